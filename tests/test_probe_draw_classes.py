"""verify_draws emulates each class of readings once, on all draws at once (s16 review items 1-2).

Why: phase B's cost is CPU emulation of ~40 candidate readings at deep K; many owe each other the
same bits at the K drawn (a step or residue turn that cuts this K alike). Merging two readings that
differ would let a wrong one through, so members of a class must give equal raw bits on any
operands, and verify_draws must answer exactly as the one-draw, one-reading loop it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.backends import EmulatorBackend
from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics.formats import bits
from fixbits.probe import reconstruct as R
from fixbits.probe.recover import _draw_pair, _sample, _split_alternatives, draw_classes, verify_draws

pytestmark = pytest.mark.unit

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
SPLIT = TC.replace(k_cuts=(KCut("contiguous", count=2, granule=8, aligned_granule=64),),
                   partial_dtype="fp16", merge_dtype="fp16")  # fmt: skip
GEMV = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="bf16",
                k_cuts=(KCut("strided", count=8, span=64, merge="butterfly_down"),))  # fmt: skip


def _readings(base: GEMMDesc) -> list[GEMMDesc]:
    """What phase B weighs for one base: steps, residue turns, reduction dtypes, lanes, split rules."""
    out = R._step_variants(base) + R._reduction_variants(
        base.replace(partial_dtype="fp32", merge_dtype="fp32")
    )
    out += R._lane_variants(base) + _split_alternatives(base, 1000)
    out += [
        base.replace(use_fast_accum=False, promotion_interval=p) for p in (1, 4) if base.instruction != "fma"
    ]
    return list(dict.fromkeys(out))


@pytest.mark.parametrize(("base", "k"), [(SPLIT, 1000), (SPLIT, 1120), (SPLIT, 4480), (SPLIT, 5003),
                                         (TC, 777), (TC, 6144), (GEMV, 300), (GEMV, 4700)])  # fmt: skip
def test_members_of_a_class_give_equal_bits(base: GEMMDesc, k: int) -> None:
    cands = _readings(base)
    groups = draw_classes(cands, k)
    assert sorted(j for g in groups for j in g) == list(range(len(cands)))
    merged = [g for g in groups if len(g) > 1]
    assert merged, "no class with two members: the test would test nothing"
    for seed in (11, 12):
        kind = ("ordinary", "wide")[seed % 2]
        a, b = draw((3, k), base.in_dtype, kind, seed), draw((k, 2), base.in_dtype, kind, seed + 100)
        for g in merged:
            first = bits(np.ascontiguousarray(emulate(cands[g[0]], a, b)))
            for j in g[1:]:
                got = bits(np.ascontiguousarray(emulate(cands[j], a, b)))
                assert np.array_equal(got, first), f"seed={seed} k={k}: {cands[j]} vs {cands[g[0]]}"


def test_readings_that_part_are_not_merged() -> None:
    """Steps 32 and 64 with the residue turn first part at K mod 64 >= 32 (with it last, never);
    dtypes and the promotion always part."""
    wide = SPLIT.replace(out_dtype="fp32", partial_dtype="fp32", merge_dtype="fp32")  # fp16 C hides the ulps
    s32, s64 = wide.replace(k_loop_step=32, residue="first"), wide.replace(k_loop_step=64, residue="first")
    assert len(draw_classes([SPLIT.replace(k_loop_step=32), SPLIT.replace(k_loop_step=64)], 1120)) == 1
    assert len(draw_classes([s32, s64], 1128)) == 2  # parts of 568 and 560: heads of 24 vs 56
    other = [SPLIT.replace(partial_dtype="fp32"), SPLIT.replace(out_dtype="bf16", partial_dtype="bf16",
                                                               merge_dtype="bf16", in_dtype="bf16"),
             SPLIT.replace(use_fast_accum=False, promotion_interval=4)]  # fmt: skip
    assert len(draw_classes([SPLIT, *other], 1120)) == 4
    a, b = draw((16, 1128), "fp16", "ordinary", 3), draw((1128, 16), "fp16", "ordinary", 4)
    assert not np.array_equal(bits(emulate(s32, a, b)), bits(emulate(s64, a, b))), "seed=3"


def test_a_wide_instruction_is_never_merged() -> None:
    """sm_80 mma k16 folds two 8-product blocks in position order, which the address map omits."""
    d = GEMMDesc(arch="sm_80", instruction="mma", instruction_k=16, in_dtype="fp16", k_loop_step=32)
    assert len(draw_classes([d, d.replace(k_loop_step=64)], 5000)) == 2


def _reference(
    backend: object,
    descs: list[GEMMDesc],
    m: int,
    n: int,
    k: int,
    *,
    seed: int,
    draws: int,
    cells: int,
    kinds: tuple[str, ...],
) -> list[bool]:
    """The verify_draws of s15: one emulate per reading per draw, host draws."""
    from fixbits.cublas.backend import cells_for

    ok = [True] * len(descs)
    rng = np.random.default_rng(seed)
    cells = cells_for(k, cells)
    for i in range(draws):
        rows, cols = _sample(m, cells, rng), _sample(n, cells, rng)
        a, b = _draw_pair(m, n, k, descs[0].in_dtype, kinds[i % len(kinds)], seed * 1000 + 2 * i)
        want = bits(np.ascontiguousarray(backend.gemm(a, b)[np.ix_(rows, cols)]))  # type: ignore[attr-defined]
        for j, d in enumerate(descs):
            if ok[j]:
                ok[j] = bool(
                    np.array_equal(bits(np.ascontiguousarray(emulate(d, a[rows], b[:, cols]))), want)
                )
    return ok


@pytest.mark.parametrize(("truth", "shape", "seed"), [
    (SPLIT.replace(k_loop_step=64), (40, 30, 1120), 21),
    (SPLIT.replace(k_loop_step=32, residue="first"), (9, 17, 1417), 22),
    (GEMV.replace(k_cuts=(KCut("strided", count=16, span=64, merge="butterfly_down"),)), (1, 33, 2105), 23),
])  # fmt: skip
def test_verify_draws_answers_as_the_per_draw_loop(
    truth: GEMMDesc, shape: tuple[int, int, int], seed: int
) -> None:
    from fixbits.probe import spikes

    cands = _readings(truth if truth.instruction == "fma" else SPLIT)
    if truth not in cands:
        cands.append(truth)
    box = EmulatorBackend(truth)
    for cells, kinds in ((8, ("ordinary", "wide")), (5, (spikes.KIND, "wide"))):
        got, done = verify_draws(box, cands, *shape, seed=seed, draws=3, cells=cells, kinds=kinds)
        want = _reference(box, cands, *shape, seed=seed, draws=3, cells=cells, kinds=kinds)
        assert got == want, f"seed={seed} shape={shape} kinds={kinds}"
        assert got[cands.index(truth)] and done == 3, f"seed={seed}"
        assert not all(got), f"seed={seed}: no reading rejected, the comparison is vacuous"
