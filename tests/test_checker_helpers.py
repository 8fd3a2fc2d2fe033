"""Helpers for the checker tests (no tests here): hand-written PTX / AMDGCN kernels for the checker's unit tests (templates with a BODY hole)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PTX = """\
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u64 .ptr .global .align 1 k_param_1
)
.reqntid 64
{
\t.reg .pred %p<8>;
\t.reg .b32 %r<80>;
\t.reg .b64 %rd<20>;
\tld.param.b64 %rd1, [k_param_0];
\tld.param.b64 %rd2, [k_param_1];
\tmov.u32 %r1, %tid.x;
\tADDRESS
\tld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd4];
BODY
\tmov.u32 %r60, %ctaid.x;
\tmul.wide.u32 %rd5, %r60, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.b32 [%rd6], %rOUT;
\tret;
}
"""

def smem_head(threads: int) -> str:
    """An entry of ``threads`` threads with a dynamic shared window ``global_smem`` (two pointer
    parameters in %rd1 / %rd2, tid.x in %r2, ctaid.x in %r3), open for a body and its ``}``."""
    return f""".version 8.7
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0,
\t.param .u64 .ptr .global .align 1 k_param_1
)
.reqntid {threads}
{{
\t.reg .pred %p<16>;
\t.reg .b32 %r<200>;
\t.reg .f32 %f<16>;
\t.reg .b64 %rd<40>;
\tld.param.b64 %rd1, [k_param_0];
\tld.param.b64 %rd2, [k_param_1];
\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
"""


ADDR_MUL = "mul.wide.u32 %rd3, %r1, 16;\n\tadd.s64 %rd4, %rd1, %rd3;"
ADDR_SHL = "shl.b32 %r70, %r1, 4;\n\tcvt.u64.u32 %rd3, %r70;\n\tadd.s64 %rd4, %rd3, %rd1;"
ADDR_OFF = "mul.wide.u32 %rd3, %r1, 16;\n\tadd.s64 %rd7, %rd1, %rd3;\n\tadd.s64 %rd4, %rd7, 4;"

SUM_LEFT = """\tadd.f32 %r6, %r2, %r3;
\tadd.f32 %r7, %r6, %r4;
\tadd.f32 %r8, %r7, %r5;"""
SUM_LEFT_COMMUTED = """\tadd.f32 %r6, %r3, %r2;
\tadd.f32 %r7, %r4, %r6;
\tadd.f32 %r8, %r5, %r7;"""
SUM_LEFT_RENAMED = """\tadd.f32 %r16, %r2, %r3;
\tadd.f32 %r17, %r16, %r4;
\tadd.f32 %r8, %r17, %r5;"""
SUM_TREE = """\tadd.f32 %r6, %r2, %r3;
\tadd.f32 %r7, %r4, %r5;
\tadd.f32 %r8, %r6, %r7;"""
SUM_FMA_RN = """\tfma.rn.f32 %r8, %r2, %r3, %r4;"""
SUM_FMA_RZ = """\tfma.rz.f32 %r8, %r2, %r3, %r4;"""
SUM_FMA_SWAPPED = """\tfma.rn.f32 %r8, %r3, %r2, %r4;"""
SUM_FMA_ADDEND = """\tfma.rn.f32 %r8, %r2, %r4, %r3;"""


def butterfly(offsets: list[int], first: int = 8) -> tuple[str, int]:
    lines = []
    cur = first
    reg = 20
    for off in offsets:
        lines.append(f"\tshfl.sync.bfly.b32 %r{reg}, %r{cur}, {off}, 31, -1;")
        lines.append(f"\tadd.f32 %r{reg + 1}, %r{cur}, %r{reg};")
        cur = reg + 1
        reg += 2
    return "\n".join(lines), cur


def ptx(body: str, out: int = 8, address: str = ADDR_MUL) -> str:
    return PTX.replace("ADDRESS", address).replace("BODY", body).replace("%rOUT", f"%r{out}")


def ptx_reduce(offsets: list[int]) -> str:
    text, out = butterfly(offsets)
    return ptx(SUM_LEFT + "\n" + text, out)


LOOP = """\tmov.b32 %r6, 0f00000000;
\tmov.b32 %r7, 0;
$L__BB0_1:
\tmul.wide.u32 %rd8, %r7, 4;
\tadd.s64 %rd9, %rd4, %rd8;
\tld.global.b32 %r9, [%rd9];
\tadd.f32 %r6, %r6, %r9;
\tadd.s32 %r7, %r7, STEP;
\tsetp.lt.s32 %p1, %r7, 1024;
\t@%p1 bra $L__BB0_1;
\tmov.b32 %r8, %r6;"""


def ptx_loop(step: int, rename: bool = False) -> str:
    body = LOOP.replace("STEP", str(step))
    if rename:
        body = (
            body.replace("%r6", "%r36")
            .replace("%r7,", "%r37,")
            .replace("%r7;", "%r37;")
            .replace("%r7, ", "%r37, ")
        )
    return ptx(body)


GCN = """\
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx942"
\t.text
\t.globl\tk
\t.p2align\t8
\t.type\tk,@function
k:
\ts_load_dwordx2 s[2:3], s[0:1], 0x0
\ts_load_dwordx2 s[4:5], s[0:1], 0x8
\ts_waitcnt lgkmcnt(0)
\tv_lshlrev_b32_e32 v1, 2, v0
\ts_mov_b64 s[16:17], s[2:3]
\ts_mov_b32 s19, 0x27000
\ts_mov_b32 s18, 0x7ffffffe
\tbuffer_load_dword v2, v1, s[16:19], 0 offen
\tbuffer_load_dword v3, v1, s[16:19], 0 offen offset:256
\ts_waitcnt vmcnt(0)
BODY
\ts_lshl_b32 s6, s14, 2
\tv_mov_b32_e32 v4, s6
\ts_mov_b64 s[20:21], s[4:5]
\ts_mov_b32 s23, 0x27000
\ts_mov_b32 s22, 0x7ffffffe
\tbuffer_store_dword v2, v4, s[20:23], 0 offen
\ts_endpgm
.Lfunc_end0:
\t.size\tk, .Lfunc_end0-k
\t.section\t.rodata,"a",@progbits
\t.amdhsa_kernel k
\t\t.amdhsa_user_sgpr_count 14
\t\t.amdhsa_system_sgpr_workgroup_id_x 1
\t.end_amdhsa_kernel
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .max_flat_workgroup_size: 64
    .name:           k
...
\t.end_amdgpu_metadata
"""


def gcn_dpp(shifts: list[int], commute: bool = False) -> str:
    lines = ["\tv_add_f32_e32 v2, v3, v2" if commute else "\tv_add_f32_e32 v2, v2, v3"]
    for s in shifts:
        lines.append("\ts_nop 1")
        lines.append(f"\tv_add_f32_dpp v2, v2, v2 row_shr:{s} row_mask:0xf bank_mask:0xf bound_ctrl:1")
    return GCN.replace("BODY", "\n".join(lines))


# ---- shared fixtures (imported by the checker test modules) --------------------------------------
import functools  # noqa: E402
from pathlib import Path  # noqa: E402

FROZEN = Path(__file__).resolve().parents[1] / "matrices" / "checker" / "ptx"


@functools.cache
def frozen_signature(name: str):  # type: ignore[no-untyped-def]
    from fixbits.checker.api import signature_of_file

    return signature_of_file(FROZEN / name)


def ptx_kernel(params: list[str], ntid: int, body: str, *, target: str = "sm_90", smem_align: int = 0) -> str:
    """One `.entry k` with the given parameter declarations, launch bound and body (the usual
    predicate / 32-bit / 64-bit register files declared; a dynamic shared array when aligned)."""
    smem = f".extern .shared .align {smem_align} .b8 global_smem[];\n" if smem_align else ""
    decl = ",\n    ".join(f".param {p} k_param_{i}" for i, p in enumerate(params))
    return (
        f".version 8.3\n.target {target}\n.address_size 64\n{smem}"
        f".visible .entry k({decl})\n.reqntid {ntid}, 1, 1\n{{\n"
        "\t.reg .pred %p<4>;\n\t.reg .b32 %r<40>;\n\t.reg .b64 %rd<20>;\n"
        f"{body}}}\n"
    )


def corpus_family_inputs(
    name: str, dtype: str, monkeypatch: Any, tmp_path: Any
) -> tuple[Any, Any, dict[str, Any], dict[str, Any]]:
    """(family, its corpus module, its shape, CPU inputs of one ordinary draw) for a test that
    compiles a corpus kernel through Triton's own binder; Triton's cache goes to ``tmp_path``."""
    import importlib

    import triton

    from fixbits.checker.soundness import load_families
    from fixbits.corpus.common import to_device

    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path))
    fam = next(f for f in load_families() if f.name == name)
    mod = importlib.import_module(fam.module)
    shape = dict(fam.shape)
    inputs = {k: to_device(v, "cpu") for k, v in mod.make_inputs(shape, dtype, "ordinary", 0).items()}
    return fam, mod, shape, inputs


def ptx_entry(params: Sequence[str], threads: int, *, regs: tuple[int, int, int] = (8, 100, 100)) -> str:
    """The head of a hand-written sm_90 kernel ``k`` up to its first own instruction: parameters
    ('ptr': a global u64 pointer, loaded into %rd1, %rd2, ... in order; 'u32': loaded into %r1),
    ``.reqntid threads`` and the register files (pred, b32, b64 counts)."""
    decl = {"ptr": ".u64 .ptr .global .align 1", "u32": ".u32"}
    lines = [".version 8.7", ".target sm_90a", ".address_size 64", ".visible .entry k("]
    lines.append(",\n".join(f"\t.param {decl[p]} k_param_{i}" for i, p in enumerate(params)))
    lines += [")", f".reqntid {threads}", "{", f"\t.reg .pred %p<{regs[0]}>;", f"\t.reg .b32 %r<{regs[1]}>;",
              f"\t.reg .b64 %rd<{regs[2]}>;"]  # fmt: skip
    rd = 0
    for i, p in enumerate(params):
        if p == "ptr":
            rd += 1
            lines.append(f"\tld.param.b64 %rd{rd}, [k_param_{i}];")
        else:
            lines.append(f"\tld.param.b32 %r1, [k_param_{i}];")
    return "\n".join(lines) + "\n"


def modelled(text: str, isa: str = "ptx") -> Any:
    """The kernel's signature, asserting the walk modelled it (no fall-back to its text)."""
    from fixbits.checker.api import signature

    s = signature(text, isa)
    assert s.fallback is None, s.fallback
    return s


def ptx_walker(text: str, has_mma: bool | None = None) -> Any:
    """``label -> (signature, k-group loops)`` for the one entry of ``text``: api._ptx_walk under a
    k-group labelling (``None``: such loops kept whole), as ``api.settle_kgroups`` drives it;
    ``has_mma`` defaults to what api.ptx_signature reads from the text."""
    import functools

    from fixbits.checker.api import _ptx_walk
    from fixbits.checker.ptx.parse import parse_ptx

    (entry,) = parse_ptx(text)
    mma = "mma" in text if has_mma is None else has_mma
    return functools.partial(_ptx_walk, text, entry, mma, 1, {}, None)


def corpus_digests(
    mod: Any, module: str, inputs: dict[str, Any], shape: dict[str, int], dtype: str, pinned: bool | str,
    blocks: Sequence[tuple[tuple[str, int], ...]], num_warps: int = 4,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """(launch-specialised, unspecialised) digests of a corpus kernel's sm_90 PTX, compiled on CPU
    through Triton's own binder for each config point in ``blocks`` (one launch each)."""
    from fixbits.checker.api import signature
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import Case
    from fixbits.corpus.common import Config

    spec, plain = [], []
    for b in blocks:
        case = Case(module.rsplit(".", 1)[-1], dtype, bool(pinned), b, num_warps, 1)
        with capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, Config(b, num_warps, 1), pinned)
        (c,) = got
        launch = corpus_launch(module, shape, case.label())
        assert launch is not None
        s = signature(c.asm, "ptx", launch=launch)
        assert s.fallback is None, s.fallback
        spec.append(s.digest)
        plain.append(signature(c.asm, "ptx").digest)
    return spec, plain


def n_mult_digests(
    name: str, dtype: str, pinned: bool, monkeypatch: Any, tmp_path: Any, num_warps: int = 4,
    mults: Sequence[int] = (1, 2, 4),
) -> tuple[list[str], list[str]]:  # fmt: skip
    """(launch-specialised, unspecialised) digests of a corpus row kernel's sm_90 PTX at its
    soundness shape for each N_MULT of ``mults`` (tiles that many times the row's power of two)."""
    fam, mod, shape, inputs = corpus_family_inputs(name, dtype, monkeypatch, tmp_path)
    blocks = [(("N_MULT", m),) for m in mults]
    return corpus_digests(mod, fam.module, inputs, shape, dtype, pinned, blocks, num_warps=num_warps)


class FakePtr:
    """What Triton's JIT binder reads from a device tensor: its dtype and an aligned address."""

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    def data_ptr(self) -> int:
        return 1 << 20


def aot_variants(
    fn: Any,
    args: tuple[Any, ...],
    names: tuple[str, ...],
    plan: list[tuple[Any, ...]],
    fixed: dict[str, Any],
    cache_dir: str,
) -> dict[tuple[Any, ...], str]:
    """Triton's sm_90 PTX of ``fn(*args, **kwargs)`` per point of ``plan``: kwargs (constexprs
    and launch options) are ``fixed`` and the point's values under ``names``; compiled into
    ``cache_dir`` (never the user's Triton cache)."""
    import pytest
    import triton

    from fixbits.checker.compile import aot_compile, gpu_target

    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triton.knobs.cache, "dir", cache_dir)
        for point in plan:
            kw = {**fixed, **dict(zip(names, point, strict=True))}
            out[point] = aot_compile(fn, args, kw, gpu_target("sm_90")).asm
    return out


def corpus_gemm_variants(
    epi: str, ints: tuple[int, ...], names: tuple[str, ...], plan: list[tuple[Any, ...]], fixed: dict[str, Any],
    cache_dir: str,
) -> dict[tuple[Any, ...], str]:
    """aot_variants of the corpus GEMM (fp16 A, B, C; fp32 bias and side output) with epilogue
    ``epi`` (gemm.VARIANTS) and the problem's ints (M, N, K and the three strides)."""
    import pytest

    triton = pytest.importorskip("triton")
    from fixbits.checker.corpus_kernels.gemm import VARIANTS, gemm_kernel

    tl = triton.language
    args = (FakePtr(tl.float16), FakePtr(tl.float16), FakePtr(tl.float16), FakePtr(tl.float32), FakePtr(tl.float32),
            *ints)
    return aot_variants(gemm_kernel, args, names, plan, {**fixed, "EPI": VARIANTS[epi]}, cache_dir)
