"""reconstruct.refine: readings one probe K cannot see (H200 run s2b) are found on the shapes the
probed descriptor misses, and a descriptor that already holds is never replaced."""

from __future__ import annotations

import pytest

from fixbits.backends import EmulatorBackend
from fixbits.desc import GEMMDesc, KCut
from fixbits.probe.reconstruct import refine, refinements, verify_entry

pytestmark = pytest.mark.unit

WG = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="bf16", k_loop_step=128, residue="first")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="bf16", k_loop_step=64)
SEED = 20261203


def _miss(backend: EmulatorBackend, desc: GEMMDesc, shapes: list[tuple[int, int, int]]) -> list[str]:
    return [f"{m}x{n}x{k}" for m, n, k in shapes if not verify_entry(backend, desc, [(m, n, k)], seed=SEED)[0]]


def test_split_k_span_aligned_to_64_is_recovered() -> None:
    truth = WG.replace(k_cuts=(KCut("contiguous", count=5, granule=8, aligned_granule=64),))
    probed = WG.replace(k_cuts=(KCut("contiguous", count=5, granule=8),))
    bk = EmulatorBackend(truth)
    shapes = [(3, 2, 1544), (2, 3, 1536), (2, 2, 1352)]  # 1536 = 24 * 64: span 320, not 312
    bad = _miss(bk, probed, shapes)
    assert bad == ["2x3x1536"], f"seed={SEED}"
    got = refine(bk, probed, shapes, bad, seed=SEED)
    assert got is not None and got[0] == truth, f"seed={SEED}"


def test_gemmsn_chunks_past_the_probed_k_are_recovered() -> None:
    truth = FMA.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=128)))
    probed = FMA.replace(k_cuts=(KCut("contiguous", count=4),))
    bk = EmulatorBackend(truth)
    shapes = [(2, 3, 281), (2, 2, 1301)]
    bad = _miss(bk, probed, shapes)
    assert bad == ["2x2x1301"], f"seed={SEED}"
    got = refine(bk, probed, shapes, bad, seed=SEED)
    assert got is not None and got[0] == truth, f"seed={SEED}"


def test_no_refinement_when_none_explains_the_miss() -> None:
    truth = WG.replace(k_cuts=(KCut("contiguous", count=3, granule=32),))
    probed = WG.replace(k_cuts=(KCut("contiguous", count=5, granule=8),))
    bk = EmulatorBackend(truth)
    shapes = [(2, 2, 1544)]
    bad = _miss(bk, probed, shapes)
    assert bad, f"seed={SEED}"
    assert refine(bk, probed, shapes, bad, seed=SEED) is None


def test_refinements_leave_cuts_without_a_count_alone() -> None:
    assert refinements(WG) == []
    assert refinements(WG.replace(k_cuts=(KCut("contiguous", span=256),))) == []


def test_a_lane_tile_capped_past_the_probed_k_is_recovered() -> None:
    """A probe at K = 300 reads 16 lanes dealt tiles of 19 (= ceil(300 / 16)); at K = 1300 the
    tile is 64, capped (fp32 a13 answers on the H200, s12/s13): refine finds the capped rule."""
    truth = FMA.replace(k_cuts=(KCut("strided", count=16, span=64, span_rule="capped", merge="butterfly_down"),))
    probed = FMA.replace(k_cuts=(KCut("strided", count=16, span=19, merge="butterfly_down"),))
    bk = EmulatorBackend(truth)
    shapes = [(2, 3, 300), (2, 2, 1300)]
    bad = _miss(bk, probed, shapes)
    assert bad == ["2x2x1300"], f"seed={SEED}"
    got = refine(bk, probed, shapes, bad, seed=SEED)
    assert got is not None and got[0] == truth, f"seed={SEED}"
