"""KCut.aligned_granule: split-K spans that round to 64 when 64 | K, else to the granule
(cuBLASLt 13.1 split-K on the H200, run s2b): cut arithmetic, emulator bits, YAML round trip."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.desc import DescError, GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics import formats

pytestmark = pytest.mark.unit

WG = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", k_loop_step=128, residue="first")


def split(count: int, granule: int, aligned: int | None) -> GEMMDesc:
    return WG.replace(k_cuts=(KCut("contiguous", count=count, granule=granule, aligned_granule=aligned),))


def test_span_rounds_to_the_aligned_granule_only_when_it_divides_k() -> None:
    cut = KCut("contiguous", count=8, granule=8, aligned_granule=64)
    # 48832 = 763 * 64: span 64 * ceil(763 / 8) = 6144 (granule 8 alone: 6104)
    assert cut.parts(48832)[0] == [(0, 6144)]
    assert cut.granule_for(48832) == 64
    # 16 | K and 32 | K keep granule 8 (H200 s2b: 17632, 96080, 107600 match only granule 8)
    for k in (17632, 96080, 107600, 91993):
        assert cut.granule_for(k) == 8
        assert cut.parts(k) == KCut("contiguous", count=8, granule=8).parts(k)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 64), st.sampled_from([1, 8, 16]), st.sampled_from([32, 64, 128]), st.integers(1, 30000),
       st.sampled_from(["ceil", "floor", "tail_dropped"]))
def test_aligned_cut_equals_the_plain_cut_of_the_granule_it_picks(count: int, g: int, a: int, k: int, rule: str) -> None:
    cut = KCut("contiguous", count=count, granule=g, aligned_granule=a, span_rule=rule)  # type: ignore[arg-type]
    plain = KCut("contiguous", count=count, granule=a if k % a == 0 else g, span_rule=rule)  # type: ignore[arg-type]
    assert cut.parts(k) == plain.parts(k), f"count={count} g={g} a={a} k={k} rule={rule}"


@pytest.mark.parametrize("seed", [3, 11])
@pytest.mark.parametrize("k", [1536, 1544, 1600])
def test_emulator_bits_follow_the_granule_in_force(seed: int, k: int) -> None:
    a = draw((3, k), "fp16", "wide", seed)
    b = draw((k, 2), "fp16", "wide", seed + 1)
    got = formats.bits(emulate(split(5, 8, 64), a, b))
    want = formats.bits(emulate(split(5, 64 if k % 64 == 0 else 8, None), a, b))
    assert np.array_equal(got, want), f"seed={seed} k={k}"


def test_yaml_round_trip_and_stable_hash_without_the_field() -> None:
    d = split(12, 8, 64)
    assert GEMMDesc.from_yaml(d.to_yaml()) == d
    assert GEMMDesc.from_json(d.to_json()).short_hash == d.short_hash
    assert "aligned_granule: 64" in d.to_yaml()
    plain = split(12, 8, None)
    assert "aligned_granule" not in plain.to_yaml()  # descriptors from before the field hash as before
    assert plain.short_hash != d.short_hash


def test_aligned_granule_needs_a_contiguous_count_cut() -> None:
    with pytest.raises(DescError, match="aligned_granule"):
        KCut("contiguous", span=64, aligned_granule=64)
    with pytest.raises(DescError, match="aligned_granule"):
        KCut("strided", count=2, span=8, aligned_granule=64)
