"""fixbits.probe.granules: which split entries their own shapes leave open, and where they part."""

from __future__ import annotations

import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.probe.granules import open_granules, own_shapes, parting_shapes
from fixbits.probe.plan import equivalent_on
from fixbits.probe.profile import ArchProfile, ProfileEntry

pytestmark = pytest.mark.unit

STEP128 = GEMMDesc(
    arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", k_loop_step=128, residue="first"
)
AT64 = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))
AT128 = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=128),))


def _profile(note: str, shape: tuple[int, int, int]) -> ArchProfile:
    entry = ProfileEntry("a66-x", AT64, shape, verified_shapes=2, note=note)
    plain = ProfileEntry("a1-x", STEP128, (16, 16, 256), verified_shapes=1)
    return ArchProfile("sm_90", "cublaslt", "130100", "fp16", "fp32", entries={"a66-x": entry, "a1-x": plain})


def test_an_entry_seen_only_where_the_granules_agree_is_open() -> None:
    assert equivalent_on(AT64, AT128, 2000) and equivalent_on(AT64, AT128, 1900)
    total, rows = open_granules(_profile("verified at 16x4x1900", (16, 4, 2000)))
    assert total == 1 and [r.key for r in rows] == ["a66-x"]
    assert rows[0].reading == "64" and AT128 in rows[0].also_fit
    assert own_shapes(_profile("verified at 16x4x1900", (16, 4, 2000)).entries["a66-x"]) == (
        (16, 4, 1900),
        (16, 4, 2000),
    )


def test_a_shape_where_they_part_pins_it() -> None:
    assert not equivalent_on(AT64, AT128, 1200)
    total, rows = open_granules(_profile("verified at 16x4x1200", (16, 4, 2000)))
    assert total == 1 and rows == []


def test_parting_shapes_keep_m_and_n_and_part_the_readings() -> None:
    _, rows = open_granules(_profile("", (16, 4, 2000)))
    shapes = list(parting_shapes(rows[0]))
    assert shapes, "no K near 2000 parts granule 64 from 128"
    for m, n, k in shapes:
        assert (m, n) == (16, 4) and k % 8 == 0 and abs(k - 2000) <= 500
        assert any(not equivalent_on(AT64, v, k) for v in rows[0].also_fit), k
