"""Loading Inductor-generated kernel files: Inductor's wrapping is dropped, the kernel is kept
verbatim and pinnable. The sample below is written in the shape Inductor emits (not generated)."""

from __future__ import annotations

from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fixbits.corpus.inductor_load import load_kernel, strip_inductor_wrapping
from fixbits.enforce import inner_tree, report

SAMPLE = "\nimport triton\nimport triton.language as tl\n\nfrom torch._inductor.runtime import triton_helpers, triton_heuristics\nfrom torch._inductor.runtime.triton_helpers import libdevice, math as tl_math\nfrom torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties\ntriton_helpers.set_driver_to_gpu()\n\n@triton_heuristics.persistent_reduction(\n    size_hints={'x': 8192, 'r0_': 1024},\n    reduction_hint=ReductionHint.INNER,\n    filename=__file__,\n    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'r0_numel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, warp_size=32), 'constants': {}, 'configs': [{(0,): [['tt.divisibility', 16]]}]},\n    inductor_meta={'grid_type': 'Grid1D', 'autotune_hints': set(), 'kernel_name': 'triton_per_fused_sum_0', 'mutated_arg_names': []}\n)\n@triton.jit\ndef triton_per_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK : tl.constexpr):\n    xnumel = 64\n    r0_numel = 100\n    R0_BLOCK: tl.constexpr = 128\n    rnumel = r0_numel\n    RBLOCK: tl.constexpr = R0_BLOCK\n    xoffset = tl.program_id(0) * XBLOCK\n    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]\n    xmask = xindex < xnumel\n    r0_index = tl.arange(0, R0_BLOCK)[None, :]\n    r0_offset = 0\n    r0_mask = r0_index < r0_numel\n    roffset = r0_offset\n    rindex = r0_index\n    r0_1 = r0_index\n    x0 = xindex\n    tmp0 = tl.load(in_ptr0 + (r0_1 + 100*x0), r0_mask & xmask, other=0.0)\n    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])\n    tmp3 = tl.where(r0_mask & xmask, tmp1, 0)\n    tmp4 = tl.sum(tmp3, 1)[:, None].to(tl.float32)\n    tl.store(out_ptr0 + (x0), tmp4, xmask)\n"


def test_wrapping_is_dropped_and_the_kernel_kept_verbatim(tmp_path: Path) -> None:
    out = strip_inductor_wrapping(SAMPLE)
    assert "triton_heuristics.persistent_reduction" not in out and "set_driver_to_gpu" not in out
    body = SAMPLE[SAMPLE.index("@triton.jit"):]
    assert out.endswith(body), "the kernel text changed"


def test_generated_kernel_loads_and_pins(tmp_path: Path) -> None:
    p = tmp_path / "sum_last__triton_per_fused_sum_0.py"
    p.write_text(SAMPLE)
    k = load_kernel(p)
    assert k.__name__ == "triton_per_fused_sum_0"
    assert [(c.call, c.action) for c in report(k).calls] == [("tl.sum", "pinned")]
    sig = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr"}
    ck = triton.compile(ASTSource(inner_tree(k), signature=sig, constexprs={"XBLOCK": 2}),
                        target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert "add.rn.f32" in ck.asm["ptx"]
