"""The host-side plans the kernels index: every k lands in exactly the part the contract says."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.desc import GEMMDesc, KCut
from fixbits.kernels.plan import UnsupportedDesc, scalar_nest, tensor_core_plan

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16")

contiguous = st.one_of(
    st.builds(
        KCut,
        layout=st.just("contiguous"),
        count=st.integers(1, 40),
        granule=st.sampled_from([1, 16, 64]),
        span_rule=st.sampled_from(["ceil", "floor", "tail_dropped"]),
    ),  # fmt: skip
    st.builds(KCut, layout=st.just("contiguous"), span=st.integers(1, 3000)),
)
any_cut = st.one_of(
    contiguous,
    st.builds(
        KCut,
        layout=st.just("strided"),
        count=st.sampled_from([2, 4, 8, 32]),
        span=st.integers(1, 40),
        merge=st.sampled_from(["chain", "butterfly_up", "butterfly_down"]),
    ),  # fmt: skip
)


@settings(max_examples=60, deadline=None)
@given(cut=contiguous, k=st.integers(0, 20000))
def test_tensor_core_plan_parts_follow_kcut(cut: KCut, k: int) -> None:
    plan = tensor_core_plan(TC.replace(k_cuts=(cut,)), k)
    want = cut.parts(k)
    assert plan.n_parts == len(want), (cut, k)
    for p, runs in enumerate(want):
        lo, hi = plan.part_runs[p]
        assert list(plan.runs[lo:hi]) == [tuple(r) for r in runs], (cut, k, p)


@settings(max_examples=40, deadline=None)
@given(outer=contiguous, inner=st.integers(1, 700), k=st.integers(1, 9000))
def test_tensor_core_inner_level_tiles_each_part(outer: KCut, inner: int, k: int) -> None:
    desc = TC.replace(k_cuts=(outer, KCut("contiguous", span=inner)))
    plan = tensor_core_plan(desc, k)
    for p, runs in enumerate(outer.parts(k)):
        lo, hi = plan.part_runs[p]
        covered = [i for s, e in plan.runs[lo:hi] for i in range(s, e)]
        assert covered == [i for s, e in runs for i in range(s, e)], (outer, inner, k, p)
        assert all(e - s <= inner for s, e in plan.runs[lo:hi])


def test_tensor_core_plan_without_cuts_is_one_chain() -> None:
    plan = tensor_core_plan(TC, 4136)
    assert plan.runs == ((0, 4136),) and plan.part_runs == ((0, 1),) and not plan.has_inner


def test_tail_dropped_plan_never_reads_the_tail() -> None:
    cut = KCut("contiguous", count=9, granule=64, span_rule="tail_dropped")
    plan = tensor_core_plan(TC.replace(k_cuts=(cut,)), 11528)
    assert max(e for _, e in plan.runs) == 11520


@pytest.mark.parametrize(
    "cuts, why",
    [
        ((KCut("strided", count=4, span=16),), "contiguous"),
        ((KCut("contiguous", count=4), KCut("contiguous", span=8), KCut("contiguous", span=4)), "at most 2"),
    ],
)
def test_tensor_core_plan_refuses_what_it_cannot_realise(cuts: tuple[KCut, ...], why: str) -> None:
    with pytest.raises(UnsupportedDesc, match=why):
        tensor_core_plan(TC.replace(k_cuts=cuts), 1000)


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(any_cut, min_size=0, max_size=3), k=st.integers(0, 1500))
def test_scalar_nest_leaves_hold_every_k_once_in_nest_order(cuts: list[KCut], k: int) -> None:
    desc = FMA.replace(k_cuts=tuple(cuts))
    nest = scalar_nest(desc, k)
    assert len(nest.counts) == len(cuts)
    assert nest.n_leaves == int(np.prod(nest.counts)) if cuts else nest.n_leaves == 1
    for c in nest.counts:
        assert c & (c - 1) == 0, nest.counts
    flat = nest.index[nest.index >= 0]
    dropped = any(c.span_rule == "tail_dropped" for c in cuts)
    assert len(set(flat.tolist())) == len(flat), "a k appears twice"
    if not dropped:
        assert sorted(flat.tolist()) == list(range(k))

    # rebuild the nest recursively and compare leaf by leaf (padding leaves are empty)
    def leaves(elems: list[int], level: int) -> list[list[int]]:
        if level == len(cuts):
            return [elems]
        parts = [[elems[i] for s, e in p for i in range(s, e)] for p in cuts[level].parts(len(elems))]
        width = nest.counts[level]
        out: list[list[int]] = []
        for j in range(width):
            sub = (
                leaves(parts[j], level + 1)
                if j < len(parts)
                else [[]] * int(np.prod(nest.counts[level + 1 :]))
            )
            out.extend(sub)
        return out

    want = leaves(list(range(k)), 0)
    assert len(want) == nest.n_leaves
    for j, w in enumerate(want):
        row = nest.index[j]
        assert row[row >= 0].tolist() == w, (cuts, k, j)


@given(cut=contiguous, k=st.integers(1, 4096), step=st.sampled_from([16, 32, 64, 128]))
@settings(max_examples=60, deadline=None)
def test_run_align_divides_every_run_bound(cut: KCut, k: int, step: int) -> None:
    """run_align is a promise the split-K kernel hands Triton (tl.multiple_of): it must divide
    every bound the kernel loads and the step, and be the largest power of two that does."""
    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32",
                    k_cuts=(cut,))
    plan = tensor_core_plan(desc, k)
    al = plan.run_align(step)
    bounds = [x for run in plan.runs for x in run] + [step]
    assert al & (al - 1) == 0 and 1 <= al <= 64
    assert all(x % al == 0 for x in bounds)
    assert al == 64 or any(x % (2 * al) for x in bounds)


def test_run_align_of_granule_aligned_parts() -> None:
    cut = KCut("contiguous", count=3, granule=64)
    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16",
                    k_cuts=(cut,))
    assert tensor_core_plan(desc, 8192).run_align(64) == 64
    assert tensor_core_plan(desc, 8190).run_align(64) == 2  # the last part ends at K
