"""The structural model the prober filters with agrees with the emulator, and the canonical
form (canonical_tree) identifies exactly the rewrites that cannot change a bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.probe.placements import Packer, lr_placement, magnitudes, read
from fixbits.probe.plan import addresses, canonical_tree, equivalent_on, predict, predict_many
from fixbits.probe.walks import ABSORBED, BIG, OTHER, SURVIVES

pytestmark = pytest.mark.unit

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16")

DESCS = [
    TC,
    TC.replace(residue="first", k_loop_step=64),
    TC.replace(use_fast_accum=False, promotion_interval=2),
    TC.replace(in_dtype="bf16", k_cuts=(KCut("contiguous", count=3, granule=16),)),
    TC.replace(out_dtype="fp16", k_cuts=(KCut("contiguous", count=5, granule=8, span_rule="tail_dropped"),),
               partial_dtype="fp16"),
    FMA.replace(k_cuts=(KCut("strided", count=8, span=4, merge="butterfly_down"),)),
    FMA.replace(k_cuts=(KCut("strided", count=8, span=2, merge="butterfly_up"),)),
    FMA.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=8))),
    FMA.replace(k_cuts=(KCut("contiguous", count=3), KCut("strided", count=4, span=2, merge="butterfly_down"))),
    TC.replace(in_dtype="fp8_e4m3", instruction_k=32, use_fast_accum=False, promotion_interval=1,
               k_cuts=(KCut("contiguous", count=2),)),
    TC.replace(in_dtype="fp8_e4m3", instruction_k=32, out_dtype="bf16"),
]


def _classes(desc: GEMMDesc, k: int, triples: np.ndarray) -> np.ndarray:
    mag = magnitudes(desc.in_dtype)
    calls = Packer(64, 3, k, desc.in_dtype).pack([lr_placement(mag, *map(int, t)) for t in triples])
    vals: list[float] = []
    for c in calls:
        c.out = emulate(desc, c.a, c.b)
        vals += read(c)
    v = np.array(vals)
    return np.where(v == mag.r, SURVIVES, np.where(v == 0, ABSORBED, np.where(np.abs(v) >= mag.L / 4, BIG, OTHER)))


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(i=st.integers(0, len(DESCS) - 1), k=st.integers(64, 260), seed=st.integers(0, 2**16))
def test_predict_matches_emulator(i: int, k: int, seed: int) -> None:
    """r survives in the emulator exactly where the tree says it does (random triples)."""
    desc = DESCS[i]
    rng = np.random.default_rng(seed)
    t = rng.integers(0, k, (300, 3))
    t = t[(t[:, 0] != t[:, 1]) & (t[:, 0] != t[:, 2]) & (t[:, 1] != t[:, 2])]
    want = _classes(desc, k, t)
    ad = addresses(desc, k)
    got = predict_many(ad, t[:, 0], t[:, 1], t[:, 2])
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"seed={seed} K={k} desc={desc.to_json()} first={t[bad[0]].tolist()} want={want[bad[0]]}"
    # the scalar predict agrees with the vectorised one
    names = {"r": SURVIVES, "z": ABSORBED, "big": BIG}
    for row in t[:20]:
        assert names[predict(ad, *map(int, row))] == predict_many(ad, row[:1], row[1:2], row[2:])[0], (seed, row)


def test_predictions_are_not_all_one_class() -> None:
    """Power: the walks can tell a group start from the inside of a group."""
    ad = addresses(TC, 128)
    t = np.array([[16, 14, 15], [17, 15, 16]])
    assert predict_many(ad, t[:, 0], t[:, 1], t[:, 2]).tolist() == [SURVIVES, ABSORBED]


@pytest.mark.parametrize(
    ("a", "b", "k"),
    [
        (TC, TC.replace(instruction="mma"), 200),  # one block model at k16 on sm_90
        (TC, TC.replace(residue="first", k_loop_step=64), 192),  # no residue at all
        (TC, TC.replace(residue="first", k_loop_step=64), 208),  # residue of a whole instruction
        (TC, TC.replace(use_fast_accum=False, promotion_interval=64), 300),  # one promotion segment
        (TC.replace(k_cuts=(KCut("contiguous", count=3, granule=64),)),
         TC.replace(use_fast_accum=False, promotion_interval=12), 448),  # parts == promotion segments
        (TC.replace(k_cuts=(KCut("contiguous", count=2),), out_dtype="fp16", partial_dtype="fp16"),
         TC.replace(k_cuts=(KCut("contiguous", count=2),), out_dtype="fp16", partial_dtype="fp16", merge_dtype="fp16"),
         256),  # a last add of two fp16 partials: fp16 merge == fp32 merge then fp16 output
        (TC.replace(k_cuts=(KCut("contiguous", count=4, granule=64, span_rule="ceil"),)),
         TC.replace(k_cuts=(KCut("contiguous", count=4, granule=64, span_rule="floor"),)), 1024),
    ],
)
def test_canonical_form_identifies_no_op_rewrites(a: GEMMDesc, b: GEMMDesc, k: int) -> None:
    assert a != b
    assert equivalent_on(a, b, k)
    rng = np.random.default_rng(k)
    for kind in ("ordinary", "wide"):
        from fixbits.inputs import draw

        x = draw((4, k), a.in_dtype, kind, int(rng.integers(1 << 30)))
        y = draw((k, 3), a.in_dtype, kind, int(rng.integers(1 << 30)))
        ea, eb = emulate(a, x, y), emulate(b, x, y)
        assert np.array_equal(ea.view(np.uint32 if ea.itemsize == 4 else np.uint16),
                              eb.view(np.uint32 if eb.itemsize == 4 else np.uint16)), (kind, k)


@pytest.mark.parametrize(
    ("a", "b", "k"),
    [
        (TC, TC.replace(residue="first", k_loop_step=64), 200),
        (TC, TC.replace(use_fast_accum=False, promotion_interval=1), 64),
        (TC.replace(k_cuts=(KCut("contiguous", count=2),)), TC.replace(k_cuts=(KCut("contiguous", count=2),),
                                                                      partial_dtype="bf16"), 256),
        (FMA.replace(k_cuts=(KCut("strided", count=8, span=4, merge="butterfly_up"),)),
         FMA.replace(k_cuts=(KCut("strided", count=8, span=4, merge="butterfly_down"),)), 256),
        (TC.replace(k_cuts=(KCut("contiguous", count=9, granule=64, span_rule="ceil"),)),
         TC.replace(k_cuts=(KCut("contiguous", count=9, granule=64, span_rule="tail_dropped"),)), 64 * 18 + 8),
    ],
)
def test_canonical_form_separates_real_differences(a: GEMMDesc, b: GEMMDesc, k: int) -> None:
    assert canonical_tree(a, k) != canonical_tree(b, k)
    assert not equivalent_on(a, b, k)
