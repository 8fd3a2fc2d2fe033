"""The kernels compile for sm_90 on a machine with no GPU, and their PTX says what the
arithmetic needs: wgmma for the tensor-core chain, explicit fma for the scalar chain, no
contracted multiply-add anywhere else (kernels compile with enable_fp_fusion=False)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")

from _kernels_aot import compile_ptx  # noqa: E402

EPN = dict(EP0=0, EP1=0, EP2=0, EP3=0, OUT=0, GELU_TANH_FMA=True)
NO_TMA = dict(USE_TMA=False, B_TRANS=False, a_desc=None, b_desc=None)


def _types(dt: str, out: str = "fp32") -> dict[str, str]:
    t = {"a_ptr": f"*{dt}", "b_ptr": f"*{dt}", "out_ptr": f"*{out}", "bias_ptr": f"*{out}", "res_ptr": f"*{out}",
         "gate_ptr": f"*{out}", "ws_ptr": "*fp32", "runs_ptr": "*i32", "offs_ptr": "*i32", "idx_ptr": "*i32"}  # fmt: skip
    t.update({f"ep_scale{i}": "fp32" for i in range(4)})
    return t


def test_single_pass_lowers_to_wgmma_k16_with_no_contraction() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=64, IK=16, HWK=16, PROMO=0, GROUPS=0, RES_FIRST=False, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
              GROUP_M=8, NUM_STAGES=3, **NO_TMA, **{**EPN, "OUT": 1, "EP0": 1, "EP1": 7})  # fmt: skip
    ptx = compile_ptx(_single_pass_kernel, _types("fp16", "fp16"), cx, num_warps=8)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16", ptx), "no fp16 wgmma k16"
    assert "fma.rn.f32" not in ptx, "a multiply-add was contracted in the epilogue"


def test_fp8_single_pass_uses_e4m3_wgmma_k32() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=128, IK=32, HWK=32, PROMO=4, GROUPS=1, RES_FIRST=False, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128,
              GROUP_M=8, NUM_STAGES=3, **NO_TMA, **EPN)  # fmt: skip
    ptx = compile_ptx(_single_pass_kernel, _types("fp8e4nv"), cx, num_warps=4)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3", ptx), (
        "no e4m3 wgmma k32"
    )


def test_tma_body_keeps_the_wgmma_chain() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=64, IK=16, HWK=16, PROMO=0, GROUPS=0, RES_FIRST=True, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
              GROUP_M=8, NUM_STAGES=3, USE_TMA=True, B_TRANS=True, **EPN)  # fmt: skip
    types = {**_types("fp16"), "a_desc": "tensordesc<fp16[128,64]>", "b_desc": "tensordesc<fp16[128,64]>"}
    ptx = compile_ptx(_single_pass_kernel, types, cx, num_warps=8)
    assert "cp.async.bulk.tensor" in ptx and re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16", ptx)


def test_scalar_nest_is_an_fma_chain() -> None:
    from fixbits.kernels._scalar import _scalar_nest_kernel

    cx = dict(C0=4, C1=8, C2=1, C3=1, L0=2, L1=3, L2=0, L3=0, K0=0, K1=2, K2=0, K3=0, PARTIAL=1, MERGE=0,
              HAS_L0=True, BLOCK_M=1, BLOCK_N=16, **EPN)  # fmt: skip
    ptx = compile_ptx(_scalar_nest_kernel, _types("fp16"), cx, num_warps=4)
    assert "fma.rn.f32" in ptx and "mma" not in ptx


def test_splitk_parts_keep_the_k_contiguous_operand_on_cp_async_when_told_the_alignment(monkeypatch) -> None:
    """A part's K start comes from a device table: unless the kernel is told it divides by 64
    (RUN_ALIGN, TensorCorePlan.run_align), Triton must assume it odd and loads A (K-contiguous)
    with scalar ld.global inside the K loop instead of pipelined cp.async (H200 run 8b: split-K
    shapes at 0.34x cuBLAS GPU time). Compiled through Triton's own binder, as the GPU would."""
    import torch
    from _kernels_aot import Sm90Launches

    from fixbits.desc import GEMMDesc, KCut
    from fixbits.kernels import plan as plan_mod
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.plan import tensor_core_plan
    from fixbits.kernels.splitk import launch_parts

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16",
                    k_cuts=(KCut("contiguous", count=3, granule=64),))  # cuBLASLt's a66-t312-s3 on the H200
    m, n, k = 16, 2048, 8192
    a, b = torch.empty((m, k), dtype=torch.float16), torch.empty((k, n), dtype=torch.float16)
    ws = torch.empty((3, m, n), dtype=torch.float16)
    cfg = KernelConfig(BLOCK_M=16, BLOCK_N=32, BLOCK_K=256, GROUP_M=1, num_warps=4, num_stages=3)
    plan = tensor_core_plan(desc, k)
    assert plan.run_align(desc.k_loop_step) == 64
    ptx = {}
    for told in (True, False):
        if not told:
            monkeypatch.setattr(plan_mod.TensorCorePlan, "run_align", lambda self, step, cap=64: 1)
        with Sm90Launches() as got:
            launch_parts(desc, plan, a, b, ws, cfg)
        ptx[told] = got.kernels[0].asm["ptx"]
    assert ptx[True].count("ld.global") <= 8 < ptx[False].count("ld.global")
    assert ptx[True].count("cp.async.cg") > ptx[False].count("cp.async.cg")
