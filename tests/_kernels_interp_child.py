"""Child process of tests/test_kernels_interp.py, run with TRITON_INTERPRET=1 (Triton on numpy).

The interpreter reproduces the scalar families bit for bit (an fp32 fma of fp16/bf16 products is
one rounding of an exact product, which numpy's multiply-then-add also gives), but not the
tensor-core block model: there the inputs are small integers, so every order gives the exact
sum and any difference is an indexing or masking bug. (*) Triton 3.6's interpreter keeps bf16
as raw uint16: its tl.dot multiplies the raw bits and its fp32 -> bf16 cast is not round to
nearest, so bf16 dots, bf16 partials and bf16 outputs are left to the GPU suite here (bf16
inputs to the scalar kernels are fine: they are widened exactly). Usage: python this.py CASE.
"""

from __future__ import annotations

import sys

import numpy as np


def _setup():
    from fixbits.kernels._interp import patch

    patch()


def _t(x, dtype):
    from fixbits.kernels.backend import to_torch

    return to_torch(x, dtype, "cpu")


def _n(t, dtype):
    from fixbits.kernels.backend import to_numpy

    return to_numpy(t, dtype)


def _eq(got: np.ndarray, want: np.ndarray, ctx: str) -> None:
    """Raw bits, except that a NaN's payload is the host CPU's here (x86 numpy makes 0xfe00 where
    the GPU and the emulator make 0x7fff), so NaNs must sit at the same places, payload aside."""
    from fixbits.testing import assert_bitwise_equal

    g_nan = np.isnan(got.astype(np.float32))
    w_nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(g_nan, w_nan), f"{ctx}: NaN at different places: {np.argwhere(g_nan != w_nan)[:5]}"
    got, want = got.copy(), want.copy()
    got[g_nan] = 0
    want[w_nan] = 0
    assert_bitwise_equal(got, want, context=ctx)


def _ints(shape, dtype, seed):
    import ml_dtypes

    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, size=shape).astype(np.float32)
    np_dt = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn}[dtype]
    return x.astype(np_dt)


def case_tensor_core_indexing() -> None:
    from fixbits.desc import GEMMDesc, KCut
    from fixbits.emulate import emulate
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.matmul import matmul

    cfgs = [KernelConfig(16, 16, 16, 1, 1, 1), KernelConfig(32, 16, 64, 2, 2, 2, GROUPS=2),
            KernelConfig(16, 32, 128, 4, 4, 3), KernelConfig(32, 16, 64, 1, 4, 3, SWAP_AB=1)]  # fmt: skip
    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    descs = [
        base,
        base.replace(residue="first", out_dtype="fp16"),
        base.replace(out_dtype="bf16", use_fast_accum=False, promotion_interval=3),  # bf16 dots: GPU only (*)
        base.replace(use_fast_accum=False, promotion_interval=2, residue="first"),
        base.replace(k_cuts=(KCut("contiguous", count=3),), partial_dtype="fp16"),
        base.replace(k_cuts=(KCut("contiguous", count=5, granule=64, span_rule="tail_dropped"),)),
        base.replace(
            k_cuts=(KCut("contiguous", span=100), KCut("contiguous", span=40)),
            use_fast_accum=False,
            promotion_interval=1,
        ),  # fmt: skip
    ]
    for i, d in enumerate(descs):
        for m, n, k in ((5, 7, 333), (33, 20, 64), (1, 1, 17)) if i == 0 else ((5, 7, 333), (1, 1, 17)):
            a, b = _ints((m, k), d.in_dtype, m + k), _ints((k, n), d.in_dtype, n + k + 1)
            want = emulate(d, a, b)
            for cfg in cfgs if i == 0 else cfgs[1:]:
                got = _n(matmul(_t(a, d.in_dtype), _t(b, d.in_dtype), desc=d, config=cfg), d.out_dtype)
                _eq(got, want, f"{d.family} {d.short_hash} {m}x{n}x{k} {cfg.label()}")
    # swap-AB with the epilogues: bias becomes a broadcast residual view, 2-D tensors transpose
    from fixbits.desc import EpilogueOp

    swap = KernelConfig(16, 16, 32, 1, 4, 2, SWAP_AB=1)
    for ops in ((EpilogueOp("bias"), EpilogueOp("relu"), EpilogueOp("scale", 0.5)),
                (EpilogueOp("residual"), EpilogueOp("scale", 1.5)),
                (EpilogueOp("bias"), EpilogueOp("residual"))):  # fmt: skip
        d = base.replace(out_dtype="fp16", epilogue=ops)
        m, n, k = 19, 37, 96
        a, b = _ints((m, k), "fp16", 3), _ints((k, n), "fp16", 4)
        bias, res = _ints((n,), "fp16", 5), _ints((m, n), "fp16", 6)
        want = emulate(d, a, b, bias=bias, residual=res)
        got = matmul(
            _t(a, "fp16"), _t(b, "fp16"), desc=d, config=swap, bias=_t(bias, "fp16"), residual=_t(res, "fp16")
        )
        _eq(_n(got, "fp16"), want, f"swap-AB epilogue {[o.kind for o in ops]}")


def case_scalar_vs_emulator() -> None:
    from fixbits.desc import GEMMDesc, KCut
    from fixbits.emulate import emulate
    from fixbits.inputs import draw
    from fixbits.kernels._scalar import scalar_nest_matmul
    from fixbits.kernels.gemv_workspace import gemv_workspace_matmul

    base = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32")
    descs = [
        base,
        base.replace(k_cuts=(KCut("contiguous", count=4),), partial_dtype="fp16", out_dtype="fp16"),
        base.replace(k_cuts=(KCut("contiguous", count=3), KCut("contiguous", span=7)), in_dtype="bf16"),
        # many level-0 parts, chained (the workspace merge walks them one at a time; a14 has 496)
        base.replace(k_cuts=(KCut("contiguous", count=24), KCut("contiguous", span=2)), out_dtype="fp16"),
        base.replace(k_cuts=(KCut("strided", count=8, span=4, merge="butterfly_down"),)),
        base.replace(k_cuts=(KCut("strided", count=8, span=2, merge="butterfly_up"),), out_dtype="fp16"),
        base.replace(
            k_cuts=(
                KCut("contiguous", count=2, merge="butterfly_up"),
                KCut("strided", count=4, span=3, merge="butterfly_down"),
            ),
            partial_dtype="fp16",
            merge_dtype="fp16",
            in_dtype="bf16",
        ),  # fmt: skip
        # bf16->fp32 a13 c50 at N == 1 (probed on an H100, session 28): 4 contiguous lanes
        base.replace(k_cuts=(KCut("contiguous", count=4, merge="butterfly_down"),), in_dtype="bf16", k_loop_step=64),
    ]
    for d in descs:
        for kind in ("ordinary", "wide"):
            for m, n, k in ((2, 9, 101),) if kind == "wide" else ((2, 9, 101), (1, 17, 64), (5, 1, 61)):
                seed = m * 1000 + n * 10 + k
                a, b = draw((m, k), d.in_dtype, kind, seed), draw((k, n), d.in_dtype, kind, seed + 1)
                want = emulate(d, a, b)
                ctx = f"{d.family} {d.short_hash} {kind} seed={seed} {m}x{n}x{k}"
                got = _n(scalar_nest_matmul(_t(a, d.in_dtype), _t(b, d.in_dtype), d), d.out_dtype)
                _eq(got, want, ctx)
                for tile in ((2, 16),):
                    got = _n(
                        scalar_nest_matmul(_t(a, d.in_dtype), _t(b, d.in_dtype), d, tile=tile), d.out_dtype
                    )
                    _eq(got, want, ctx + f" tile={tile}")
                if d.k_cuts and kind == "wide" and len(d.k_cuts) == 2:  # the interpreter is slow here
                    got = _n(gemv_workspace_matmul(_t(a, d.in_dtype), _t(b, d.in_dtype), d), d.out_dtype)
                    _eq(got, want, ctx + " workspace")


def case_epilogue_vs_emulator() -> None:
    from fixbits.desc import EpilogueOp, GEMMDesc
    from fixbits.emulate import emulate
    from fixbits.inputs import draw
    from fixbits.kernels.matmul import matmul

    base = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16")
    for out in ("fp16", "fp32"):  # bf16 rounding: GPU only (*)
        for ops in ((EpilogueOp("bias"),), (EpilogueOp("relu"),), (EpilogueOp("residual"),),
                    (EpilogueOp("scale", 0.3),), (EpilogueOp("bias"), EpilogueOp("relu"), EpilogueOp("scale", 1.7),
                                                  EpilogueOp("residual"))):  # fmt: skip
            d = base.replace(out_dtype=out, epilogue=ops)
            m, n, k = 3, 20, 50
            a, b = draw((m, k), "fp16", "wide", 7), draw((k, n), "fp16", "wide", 8)
            bias = draw((n,), out, "wide", 9)
            res = draw((m, n), out, "wide", 10)
            want = emulate(d, a, b, bias=bias, residual=res)
            got = matmul(_t(a, "fp16"), _t(b, "fp16"), desc=d, bias=_t(bias, out), residual=_t(res, out))
            _eq(_n(got, out), want, f"epilogue {[o.kind for o in ops]} -> {out}")


def case_butterfly_merge() -> None:
    """The split-K butterfly fold (lane 0 of xor offsets) against the emulator's merge, on
    random fp32 parts where the association order shows in the bits."""
    import torch

    from fixbits.desc import GEMMDesc, KCut
    from fixbits.emulate import _merge
    from fixbits.kernels._host import epilogue_args
    from fixbits.kernels.splitk import launch_merge
    from fixbits.numerics import formats

    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    rng = np.random.default_rng(11)
    for how in ("butterfly_down", "butterfly_up", "chain"):
        for p in (2, 4, 8):
            for mdt in ("fp32", "fp16"):
                d = base.replace(k_cuts=(KCut("contiguous", count=p, merge=how),), merge_dtype=mdt)
                vals = (rng.standard_normal((p, 3, 5)) * np.exp2(rng.integers(-12, 12, (p, 3, 5)))).astype(
                    np.float32
                )
                vals[0, 0, 0], vals[1, 0, 0] = -0.0, -0.0  # the sign of an all -0 fold
                out = torch.empty((3, 5), dtype=torch.float32)
                launch_merge(
                    d, torch.from_numpy(vals.copy()), out, epilogue_args(d, 3, 5), gelu_tanh_fma=True
                )
                want = np.asarray(
                    formats.round_to(_merge(list(vals), how, mdt), "fp32", "rn"), dtype=np.float32
                )
                _eq(out.numpy(), want, f"{how} P={p} merge={mdt}")


def case_planted_reverse_merge() -> None:
    """+L, -L, r in three split-K parts: in order r survives, merged backwards it is absorbed."""
    from fixbits.desc import GEMMDesc, KCut
    from fixbits.emulate import emulate
    from fixbits.kernels.splitk import splitk_core

    d = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32",
                 k_cuts=(KCut("contiguous", count=3),))  # fmt: skip
    a = np.ones((1, 48), dtype=np.float16)
    b = np.zeros((48, 1), dtype=np.float16)
    a[0, 0], a[0, 16] = 2.0**15, 2.0**15
    b[0, 0], b[16, 0], b[32, 0] = 2.0**15, -(2.0**15), 1.0
    want = emulate(d, a, b)
    good = _n(splitk_core(_t(a, "fp16"), _t(b, "fp16"), d), "fp32")
    bad = _n(splitk_core(_t(a, "fp16"), _t(b, "fp16"), d, reverse_merge=True), "fp32")
    _eq(good, want, "in-order merge")
    assert float(good[0, 0]) == 1.0 and float(bad[0, 0]) == 0.0, (good, bad)


def case_splitk_launcher() -> None:
    """fixbits.matmul's cached split-K launcher (settled once, direct launches) against the
    reference path splitk_core: same bytes, epilogues included, repeated calls included."""
    import torch

    from fixbits.desc import EpilogueOp, GEMMDesc, KCut
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.splitk import splitk_core

    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    cfg = KernelConfig(BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, num_stages=2)
    g = torch.Generator().manual_seed(11)
    descs = [
        base.replace(k_cuts=(KCut("contiguous", count=3),)),
        base.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=64)), out_dtype="fp16"),
        base.replace(k_cuts=(KCut("contiguous", count=2),), partial_dtype="fp16", out_dtype="fp16",
                     epilogue=(EpilogueOp("bias"), EpilogueOp("relu"), EpilogueOp("residual"))),
    ]  # fmt: skip
    for d in descs:
        m, n, k = 5, 40, 300
        a = torch.randint(-3, 4, (m, k), generator=g).to(torch.float16)
        b = torch.randint(-3, 4, (k, n), generator=g).to(torch.float16)
        odt = torch.float16 if d.out_dtype == "fp16" else torch.float32
        side = dict(bias=torch.randint(-9, 9, (n,), generator=g).to(odt),
                    residual=torch.randint(-9, 9, (m, n), generator=g).to(odt))  # fmt: skip
        want = splitk_core(a, b, d, config=cfg, **side)
        for _ in range(2):  # the second call takes the cached launch
            got = matmul(a, b, desc=d, config=cfg, epilogue=d.epilogue or None, **side)
            w = torch.int16 if odt == torch.float16 else torch.int32
            assert torch.equal(got.view(w), want.view(w)), (d.short_hash, (got - want).abs().max())
        assert bool((want != 0).any()), d.short_hash
    # fp8 per-MMA split-K parts, plain and swapped (C^T = B^T A^T into a transposed workspace),
    # B row-major and K-major, reference path and cached launcher, against the emulator
    from fixbits.emulate import emulate

    d8 = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", out_dtype="fp32",
                  use_fast_accum=False, promotion_interval=4, k_loop_step=128,
                  k_cuts=(KCut("contiguous", count=3, granule=128),))  # fmt: skip
    m, n, k = 5, 24, 700
    a8, b8 = _ints((m, k), "fp8_e4m3", 21), _ints((k, n), "fp8_e4m3", 22)
    want8 = emulate(d8, a8, b8)
    ta, tb = _t(a8, "fp8_e4m3"), _t(b8, "fp8_e4m3")
    for swap in (0, 1):
        c8 = KernelConfig(BLOCK_M=64, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_stages=2, SWAP_AB=swap)
        for bb in (tb, tb.t().contiguous().t()):
            _eq(_n(splitk_core(ta, bb, d8, config=c8), "fp32"), want8, f"fp8 split-K swap={swap} reference")
            for _ in range(2):
                got = matmul(ta, bb, desc=d8, config=c8)
                _eq(_n(got, "fp32"), want8, f"fp8 split-K swap={swap} launcher b_stride={bb.stride()}")
    assert bool((want8 != 0).any())


def case_reduce_1block_vs_emulator() -> None:
    """The workspace GEMV with cuBLAS's reduce_1Block merge (the a14 order found in session 9):
    both orientations' profile descriptors, and the same with 5 and 200 level-0 parts (one round
    of the 128 merge threads, and two with padding), against the emulator."""
    import dataclasses

    from fixbits.emulate import emulate
    from fixbits.inputs import draw
    from fixbits.kernels.dispatch import choose_kernel
    from fixbits.kernels.gemv_workspace import gemv_workspace_matmul
    from fixbits.probe.profile import find

    prof = find("sm_90", "130100", "fp16", "fp16")
    found = {}
    for e in prof.entries.values():
        for v in e.variants or ():
            if v.desc.k_cuts and v.desc.k_cuts[0].merge == "reduce_1block":
                found.setdefault(v.n1, v.desc)
    assert set(found) == {True, False}, found.keys()
    for n1, d0 in sorted(found.items()):
        for parts in (d0.k_cuts[0].count, 5, 200):
            d = d0.replace(k_cuts=(dataclasses.replace(d0.k_cuts[0], count=parts), *d0.k_cuts[1:]))
            for kind, k in (("ordinary", 1500), ("wide", 777)):
                m, n = (3, 1) if n1 else (1, 3)
                assert choose_kernel(d, m, n).family == "gemv_workspace"
                seed = parts * 10 + k
                a, b = draw((m, k), d.in_dtype, kind, seed), draw((k, n), d.in_dtype, kind, seed + 1)
                want = emulate(d, a, b)
                got = _n(gemv_workspace_matmul(_t(a, d.in_dtype), _t(b, d.in_dtype), d), d.out_dtype)
                _eq(got, want, f"reduce_1block n1={n1} parts={parts} {kind} seed={seed} {m}x{n}x{k}")
                assert np.count_nonzero(want.astype(np.float32)), "all zeros"


if __name__ == "__main__":
    _setup()
    globals()[f"case_{sys.argv[1]}"]()
    print("ok", sys.argv[1])
