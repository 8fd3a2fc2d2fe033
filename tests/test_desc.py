"""GEMMDesc: validation, serialisation round-trips, the stable hash, and the K-cut arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.desc import DescError, EpilogueOp, GEMMDesc, KCut

BASE = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")


def cuts() -> st.SearchStrategy[KCut]:
    contiguous_count = st.builds(
        KCut,
        layout=st.just("contiguous"),
        count=st.integers(1, 64),
        granule=st.sampled_from([1, 16, 64, 128]),
        span_rule=st.sampled_from(["ceil", "floor", "tail_dropped"]),
        aligned_granule=st.sampled_from([None, None, 64, 128]),
    )
    contiguous_span = st.builds(KCut, layout=st.just("contiguous"), span=st.integers(1, 4096))
    strided = st.builds(
        KCut,
        layout=st.just("strided"),
        count=st.sampled_from([2, 4, 8, 16, 32]),
        span=st.integers(1, 64),
        span_rule=st.sampled_from(["ceil", "capped"]),
        merge=st.sampled_from(["chain", "butterfly_up", "butterfly_down"]),
    )
    return st.one_of(contiguous_count, contiguous_span, strided)


def descs() -> st.SearchStrategy[GEMMDesc]:
    return st.builds(
        GEMMDesc,
        arch=st.just("sm_90"),
        instruction=st.just("wgmma"),
        instruction_k=st.just(16),
        in_dtype=st.sampled_from(["fp16", "bf16"]),
        out_dtype=st.sampled_from(["fp32", "fp16", "bf16"]),
        k_loop_step=st.sampled_from([16, 32, 64, 128]),
        residue=st.sampled_from(["first", "last"]),
        k_cuts=st.lists(cuts(), max_size=2).map(tuple),
        partial_dtype=st.sampled_from(["fp32", "fp16"]),
        epilogue=st.lists(st.sampled_from([EpilogueOp("relu"), EpilogueOp("scale", 0.5)]), max_size=2).map(tuple),
    )


@settings(max_examples=60, deadline=None)
@given(descs())
def test_round_trips_preserve_equality_and_hash(desc: GEMMDesc) -> None:
    assert GEMMDesc.from_json(desc.to_json()) == desc
    assert GEMMDesc.from_yaml(desc.to_yaml()) == desc
    assert GEMMDesc.from_json(desc.to_json()).short_hash == desc.short_hash


def test_hash_is_stable_across_releases() -> None:
    # A committed golden record names its descriptor by this hash: it must never move.
    assert BASE.short_hash == GEMMDesc.from_dict(BASE.to_dict()).short_hash
    assert len(BASE.short_hash) == 12
    assert BASE.replace(residue="first").short_hash != BASE.short_hash


@settings(max_examples=200, deadline=None)
@given(cuts(), st.integers(0, 20000))
def test_parts_cover_each_index_at_most_once_in_order(cut: KCut, n: int) -> None:
    seen: list[int] = []
    for part in cut.parts(n):
        for start, stop in part:
            assert 0 <= start < stop <= n
            seen.extend(range(start, stop))
    assert len(seen) == len(set(seen))
    if cut.span_rule != "tail_dropped":
        assert sorted(seen) == list(range(n))


def test_tail_dropped_keeps_the_first_parts_whole_steps() -> None:
    # K = 8648, nine parts of whole 64-steps: 9 x 960 = 8640, the last 8 values never summed.
    parts = KCut("contiguous", count=9, granule=64, span_rule="tail_dropped").parts(8648)
    covered = sum(stop - start for p in parts for start, stop in p)
    assert covered == 8640


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arch": "sm_75"}, "arch='sm_75' is not one of"),
        ({"in_dtype": "fp7"}, "in_dtype='fp7' is not one of fp16, bf16"),
        ({"instruction_k": 32}, "instruction_k=32 is not valid for wgmma on fp16; valid: 16"),
        ({"k_loop_step": 40}, "k_loop_step=40 must be a multiple of instruction_k=16"),
        ({"promotion_interval": 4}, "promotion_interval applies only when use_fast_accum is false"),
        ({"use_fast_accum": False}, "promotion_interval=None must be a positive integer"),
        ({"arch": "sm_100"}, "wgmma exists only on sm_90"),
    ],
)
def test_bad_fields_name_what_is_wrong(changes: dict[str, object], message: str) -> None:
    with pytest.raises(DescError, match=message.replace("(", r"\(")):
        BASE.replace(**changes)


def test_bad_cuts_and_unknown_keys_are_named() -> None:
    with pytest.raises(DescError, match="strided cut needs both count"):
        KCut("strided", count=4)
    with pytest.raises(DescError, match="power-of-two count"):
        KCut("strided", count=6, span=8, merge="butterfly_up")
    with pytest.raises(DescError, match="unknown key\\(s\\) block_m"):
        GEMMDesc.from_dict({**BASE.to_dict(), "block_m": 128}, where="matrices/profiles/x.yaml: entries[0]")


def test_family_names_follow_the_paper() -> None:
    assert BASE.family == "single_pass"
    assert BASE.replace(k_cuts=(KCut("contiguous", count=4, granule=64),)).family == "splitk"
    assert BASE.replace(use_fast_accum=False, promotion_interval=1).family == "per_mma"
    gemv = GEMMDesc(
        arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", k_loop_step=1,
        k_cuts=(KCut("strided", count=32, span=8, merge="butterfly_down"),),
    )
    assert gemv.family == "gemv_lane_tree"


@pytest.mark.parametrize(
    ("k", "splits", "lost"),
    [
        (8648, 9, 8),  # the paper's example: q = 135 = 9 x 15, t = 8 < 9
        (8648, 6, 0),  # FINDINGS.md: 1x8x8648 on 6 parts comes back whole
        (11528, 9, 8),
        (57608, 45, 8),
        (57616, 45, 16),
        (114008, 89, 88),  # measured on the H200: q mod s = 1 and s > b + t, a whole step lost too
        (223008, 129, 96),
        (256008, 129, 72),
    ],
)
def test_nvjet_split_rule_reproduces_measured_losses(k: int, splits: int, lost: int) -> None:
    parts = KCut("contiguous", count=splits, granule=64, span_rule="tail_dropped").parts(k)
    assert k - sum(stop - start for p in parts for start, stop in p) == lost
