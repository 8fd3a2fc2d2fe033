"""The pinned tree run by Triton's interpreter (TRITON_INTERPRET) on CPU, against the numpy model.

The interpreter executes the kernel's Python with numpy: it checks what the tree computes (which
elements, which pairs, padding, axes, ranks, dtype widening) and that the rewrite hands the
corpus kernels to it, but it does NOT reproduce the GPU's reduction order or layouts (its own
tl.sum is numpy's). The GPU suites check that the hardware agrees.
"""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixbits.enforce import model

_tree_sum = None
_tree_sum_split = None
_gemm = None  # fixbits.corpus.gemm_colsum, a global the interpreted kernel can see
# The interpreter must be on before triton.language is imported (its own helpers are decorated
# then), so these tests run in a subprocess started by test_enforce_interpreter_run.py.
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="interpreter cases: run by tests/test_enforce_interpreter_run.py "
                                       "in a subprocess with TRITON_INTERPRET=1")


@pytest.fixture(scope="module")
def interp():
    return importlib.import_module("fixbits.enforce.tree")


def _kernels(tree):
    import triton
    import triton.language as tl

    global _tree_sum  # the interpreter re-executes kernel source against module globals (no closures)
    _tree_sum = tree.tree_sum

    @triton.jit
    def sum_2d(X, Y, R: tl.constexpr, C: tl.constexpr, AX: tl.constexpr):
        r = tl.arange(0, R)[:, None]
        c = tl.arange(0, C)[None, :]
        x = tl.load(X + r * C + c)
        s = _tree_sum(x, AX)
        if AX == 0:
            tl.store(Y + tl.arange(0, C), s)
        else:
            tl.store(Y + tl.arange(0, R), s)

    @triton.jit
    def sum_3d_all(X, Y, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
        a = tl.arange(0, A)[:, None, None]
        b = tl.arange(0, B)[None, :, None]
        c = tl.arange(0, C)[None, None, :]
        x = tl.load(X + a * B * C + b * C + c)
        tl.store(Y, _tree_sum(x))

    return sum_2d, sum_3d_all


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint32)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lr=st.integers(0, 5), lc=st.integers(0, 5), axis=st.sampled_from([0, 1]), wide=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_tree_sum_2d_matches_model(interp, lr: int, lc: int, axis: int, wide: bool, seed: int) -> None:
    import torch

    sum_2d, _ = _kernels(interp)
    R, C = 1 << lr, 1 << lc
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((R, C))
    if wide:
        x *= np.exp2(rng.integers(-60, 60, size=(R, C)))
    x = x.astype(np.float32)
    y = torch.empty(C if axis == 0 else R)
    sum_2d[(1,)](torch.from_numpy(x), y, R=R, C=C, AX=axis)
    want = model.tree_sum(x, axis=axis)
    got = y.numpy()
    assert np.array_equal(_bits(got), _bits(want)), (
        f"seed={seed} shape=({R},{C}) axis={axis} wide={wide}: got {got[:4]} want {want[:4]}")


@pytest.mark.parametrize("seed", [3, 11])
def test_tree_sum_rank3_all_axes_is_row_major_tree(interp, seed: int) -> None:
    import torch

    _, sum_3d_all = _kernels(interp)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((4, 8, 16)) * np.exp2(rng.integers(-40, 40, size=(4, 8, 16)))).astype(np.float32)
    y = torch.empty(1)
    sum_3d_all[(1,)](torch.from_numpy(x), y, A=4, B=8, C=16)
    want = model.tree_sum(x, axis=None)
    assert _bits(y.numpy())[0] == _bits(np.asarray([want]))[0], f"seed={seed}: {y.item()} vs {want}"
    # the model's axis=None is the tree over the row-major ravel, not over any other order
    assert _bits(np.asarray([want]))[0] == _bits(np.asarray([model.tree_sum(x.reshape(-1))]))[0]


_CORPUS = ["row_sum", "col_sum", "mid_axis_sum", "softmax", "log_softmax", "layernorm_fwd", "layernorm_bwd",
           "rmsnorm", "inductor_per_sum", "inductor_per_softmax"]
# gemm_colsum and inductor_red_mean loop over a runtime bound (range(0, K, BLOCK_K)); Triton
# 3.6's interpreter fails there with numpy >= 2.3 (int() of a 1-element array), so they are
# covered by the AOT compile tests and the GPU suite only.


@pytest.mark.parametrize("name", _CORPUS)
def test_corpus_pinned_equals_model_in_interpreter(interp, name: str) -> None:
    from fixbits.corpus.check import check_pair
    from fixbits.corpus.registry import entry

    e = entry(name)
    cfgs = (e.configs()[0], e.configs()[-1])
    for dtype in e.dtypes[:2]:
        r = check_pair(e, dtype, "wide", 5, "cpu", cpu_shape=True, configs=cfgs, with_free=False)
        assert not r.errors, f"{name}/{dtype} seed=5: {r.errors}"
        assert r.pinned_invariant, f"{name}/{dtype} seed=5: pinned classes {r.classes('pinned')}"
        assert r.model_equal, f"{name}/{dtype} seed=5: {[m for m in r.model if not m.equal]}"


def test_chunked_two_stage_free_varies_pinned_does_not(interp) -> None:
    """layernorm_bwd's dW over ROWS-row chunks: free order changes with ROWS even in the
    interpreter (numpy sums each chunk); the pinned tree gives one result for every ROWS."""
    from fixbits.corpus.check import check_pair
    from fixbits.corpus.common import Config
    from fixbits.corpus.registry import entry

    e = entry("layernorm_bwd")
    cfgs = tuple(Config((("ROWS", r), ("BLOCK_N", 32)), 4, 1) for r in (4, 8, 16))
    r = check_pair(e, "fp32", "wide", 7, "cpu", cpu_shape=True, configs=cfgs)
    assert r.pinned_invariant and r.model_equal, f"seed=7: pinned {r.classes('pinned')} model {r.model}"
    assert r.classes("free")["dw"] > 1, f"seed=7: free dW gave {r.classes('free')['dw']} class: no contrast"


def test_axis_none_keep_dims_shape_matches_tl_sum(interp) -> None:
    import torch
    import triton
    import triton.language as tl

    global _tree_sum
    _tree_sum = interp.tree_sum

    @triton.jit
    def k(X, Y):
        r = tl.arange(0, 4)[:, None]
        c = tl.arange(0, 8)[None, :]
        x = tl.load(X + r * 8 + c)
        s = _tree_sum(x, None, True)
        t = tl.sum(x, None, True)
        tl.static_assert(len(s.shape) == len(t.shape))
        tl.store(Y + r * 0 + c * 0, s + x * 0)

    x = np.arange(32, dtype=np.float32)
    y = torch.zeros(1)
    k[(1,)](torch.from_numpy(x), y)
    assert y.item() == float(x.sum())


@pytest.mark.parametrize("name", ["row_sum", "row_sum_unaligned", "col_sum", "mid_axis_sum", "layernorm_bwd"])
def test_pinned_variants_return_the_pinned_bytes(interp, name: str) -> None:
    """Kernels written for the tree (low index bits in registers) give the rewrite's bytes."""
    from fixbits.corpus.check import check_pair
    from fixbits.corpus.registry import entry

    e = entry(name)
    r = check_pair(e, e.dtypes[0], "wide", 9, "cpu", cpu_shape=True, configs=e.configs()[:1], with_free=False,
                   with_variants=True, variant_limit=3)
    assert any(":" in x.config for x in r.runs), f"{name}: no variant ran"
    assert not r.errors, f"{name} seed=9: {r.errors}"
    assert r.pinned_invariant and r.model_equal, f"{name} seed=9: classes {r.classes('pinned')}"


@pytest.mark.parametrize(("block_m", "warps", "variant"), [(128, 4, "rows_in_regs"), (128, 4, "warp_partials"),
                                                           (128, 8, "warp_partials"), (64, 4, "rows_in_regs"),
                                                           (64, 8, "warp_partials"), (128, 4, "split_warps"),
                                                           (128, 8, "split_warps"), (64, 4, "split_warps")])
def test_gemm_colsum_epilogue_variants_fold_the_model_tree(interp, block_m: int, warps: int, variant: str) -> None:
    """gemm_colsum's variants permute tile rows (register row bits = low logical bits) and may store
    one partial per warp; stage 2 over the partials must still be the model's tree over all rows.
    (The GEMM's K loop does not run in the 3.6 interpreter, so the epilogue runs here on a given C.)"""
    import torch
    import triton
    import triton.language as tl

    from fixbits.corpus import gemm_colsum as g
    from fixbits.corpus.common import kernel_for, next_pow2

    global _gemm
    _gemm = g

    @triton.jit
    def epilogue(C, PART, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LO0: tl.constexpr,
                 LO1: tl.constexpr, PARTS_LOG: tl.constexpr, SPLIT_LOG: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + _gemm.tile_rows(BLOCK_M, LO0, LO1)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        cmask = (rm[:, None] < M) & (rn[None, :] < N)
        c = tl.load(C + rm[:, None] * N + rn[None, :], mask=cmask, other=0.0)
        _gemm.store_tile_partials(tl.where(cmask, c, 0.0), PART, tl.program_id(0), rn, N, LO0, LO1, PARTS_LOG,
                                   SPLIT_LOG)

    rng = np.random.default_rng(11)
    M, N, bn = 2 * block_m + 40, 24, 16  # a partial last tile: padded like the rewrite
    c = (rng.standard_normal((M, N)) * np.exp2(rng.integers(-20, 20, (M, N)))).astype(np.float32)
    lo0, lo1, wb = g.acc_row_bits(block_m, warps)
    pl = wb if variant == "warp_partials" else 0
    sl = wb if variant == "split_warps" else 0
    mt = triton.cdiv(M, block_m) << pl
    part = torch.empty((mt, N), dtype=torch.float32)
    epilogue[(triton.cdiv(M, block_m), triton.cdiv(N, bn))](torch.from_numpy(c), part, M, N, BLOCK_M=block_m,
                                                            BLOCK_N=bn, LO0=lo0, LO1=lo1, PARTS_LOG=pl, SPLIT_LOG=sl)
    out = torch.empty(N, dtype=torch.float32)
    kernel_for(g.col_partials_sum_kernel, True)[(1,)](part, out, mt, N, BLOCK_P=next_pow2(mt), BLOCK_N=32)
    want = model.tree_sum(c, axis=0)
    assert np.array_equal(out.numpy().view(np.uint32), want.view(np.uint32)), f"{variant} BM={block_m} w={warps}"


@pytest.mark.parametrize(("name", "dtype"), [("row_sum_unaligned", "fp32"), ("layernorm_fwd", "fp32"),
                                             ("layernorm_fwd", "bf16")])
def test_split_variants_return_the_pinned_bytes(interp, name: str, dtype: str) -> None:
    """Variants that fold the top tree levels through tl.split (tree_sum_split), every config of
    every variant: the rewrite's bytes and the model's."""
    from fixbits.corpus.check import check_pair
    from fixbits.corpus.registry import entry

    e = entry(name)
    r = check_pair(e, dtype, "wide", 13, "cpu", cpu_shape=True, configs=e.configs()[:1], with_free=False,
                   with_variants=True)
    assert sum(":" in x.config for x in r.runs) == sum(len(e.variant_configs(v)) for v, _ in e.variants)
    assert not r.errors, f"{name}/{dtype} seed=13: {r.errors}"
    assert r.pinned_invariant and r.model_equal, f"{name}/{dtype} seed=13: classes {r.classes('pinned')}"


@pytest.mark.parametrize(("n", "top"), [(n, t) for n in (1, 2, 8, 64, 256) for t in (1, 2, 4, 8) if t <= n])
def test_tree_sum_split_is_tree_sum(interp, n: int, top: int) -> None:
    """tree_sum_split(x, TOP) is the model's tree over all elements, for any power-of-two TOP <= numel."""
    import torch
    import triton
    import triton.language as tl

    global _tree_sum_split
    _tree_sum_split = interp.tree_sum_split

    @triton.jit
    def k(X, Y, N: tl.constexpr, TOP: tl.constexpr):
        x = tl.load(X + tl.arange(0, N))
        tl.store(Y, _tree_sum_split(x, TOP))

    rng = np.random.default_rng(n * 10 + top)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(np.float32)
    y = torch.zeros(1)
    k[(1,)](torch.from_numpy(x), y, N=n, TOP=top)
    want = model.tree_sum(x)
    assert y.numpy().view(np.uint32)[0] == np.asarray(want, dtype=np.float32).view(np.uint32), (n, top)
