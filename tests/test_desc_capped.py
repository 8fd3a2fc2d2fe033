"""KCut span_rule="capped": a strided lane tile min(span, ceil(P / count)) on the part's nominal
length P (cuBLASLt 13.1 gemv2T options c56 / c92 / c100 on the H200, runs s12/a13r and s13/a13v):
cut arithmetic, GEMMDesc.at_k, emulator bits, YAML round trip, profile lookup."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.desc import DescError, GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics import formats
from fixbits.probe.plan import equivalent_on
from fixbits.probe.profile import available, load

pytestmark = pytest.mark.unit

GEMV = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="bf16", out_dtype="fp32",
                use_fast_accum=True, k_loop_step=64, residue="last")
LANES = KCut("strided", count=16, span=64, span_rule="capped", merge="butterfly_down")


def split_capped(parts: int, lanes: KCut = LANES) -> GEMMDesc:
    return GEMV.replace(k_cuts=(KCut("contiguous", count=parts, merge="chain"), lanes))


def test_tile_follows_the_nominal_part_length_up_to_the_cap() -> None:
    d = split_capped(8)
    assert d.at_k(1000).k_cuts[1] == KCut("strided", count=16, span=8, merge="butterfly_down")  # ceil(125 / 16)
    assert d.at_k(8 * 16 * 63).k_cuts[1].span == 63
    assert d.at_k(8 * 16 * 63 + 1).k_cuts[1].span == 64
    assert d.at_k(300_000).k_cuts[1].span == 64
    assert GEMV.at_k(77) is GEMV  # nothing capped: the descriptor itself


def test_a_short_last_part_keeps_the_tile_of_the_full_parts() -> None:
    """K = 100 in 3 parts: 34, 34, 32. The tile is ceil(34 / 4) = 9 in every part, the last one too."""
    lanes = KCut("strided", count=4, span=64, span_rule="capped", merge="butterfly_down")
    d = split_capped(3, lanes)
    plain9 = d.at_k(100)
    assert plain9.k_cuts[1].span == 9
    assert equivalent_on(d, plain9, 100)
    own_length = plain9.replace(k_cuts=(plain9.k_cuts[0], KCut("strided", count=4, span=8, merge="butterfly_down")))
    assert not equivalent_on(d, own_length, 100)  # tile 8 is the first parts' reading of 32, not 34


@pytest.mark.parametrize("seed", [5, 17])
@pytest.mark.parametrize("k", [100, 1000, 16129, 16130])
def test_emulator_bits_of_a_capped_descriptor_are_those_of_its_plain_cut(seed: int, k: int) -> None:
    for kind in ("ordinary", "wide"):
        a = draw((1, k), "bf16", kind, seed)
        b = draw((k, 3), "bf16", kind, seed + 1)
        d = split_capped(16)
        got = formats.bits(emulate(d, a, b))
        want = formats.bits(emulate(d.at_k(k), a, b))
        assert np.array_equal(got, want), f"seed={seed} k={k} kind={kind}"
        assert np.any(got != 0), f"seed={seed} k={k} kind={kind}: zeros only"


def test_bad_capped_cuts_name_what_is_wrong() -> None:
    with pytest.raises(DescError, match="capped applies to strided cuts only"):
        KCut("contiguous", count=4, span_rule="capped")
    deep = GEMV.replace(k_cuts=(KCut("strided", count=2, span=8), LANES))
    with pytest.raises(DescError, match="below a strided cut"):
        deep.at_k(1000)


def test_capped_descriptor_round_trips() -> None:
    d = split_capped(16)
    assert GEMMDesc.from_yaml(d.to_yaml()) == d
    assert GEMMDesc.from_dict(d.to_dict()).short_hash == d.short_hash


def test_profile_lookup_resolves_a_capped_entry_at_k() -> None:
    """The bf16->fp32 c100 entries were 64 K ranges; they are one capped descriptor now."""
    prof = next(load(p) for p in available() if p.name == "sm_90_cublaslt130100_bf16_fp32.yaml")
    key = "a13-t0-s16-r2-w0-c100-g0"
    e = prof.entries[key]
    assert e.desc.k_cuts[-1].span_rule == "capped" and not e.variants
    assert prof.lookup(key, k=5000).k_cuts[-1] == KCut("strided", count=16, span=20, merge="butterfly_down")
    assert prof.lookup(key, k=100_000).k_cuts[-1].span == 64
    assert prof.lookup(key) == e.desc
