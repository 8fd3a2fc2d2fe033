"""fixbits.probe.plan.function_key: descriptors with equal keys give the same bits at every K.

The claim is structural (with the residue turn last the K-loop step places nothing), so it is
checked here on the emulator: every step of a residue-last descriptor, over K values that are
and are not multiples of the steps, on ordinary and wide-exponent draws, gives one set of raw
bits; and the key keeps apart what it must (residue first: the step moves the short turn).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics.formats import bits
from fixbits.probe.plan import function_key

BASE = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
FAMILIES = {
    "single_pass": BASE,
    "per_mma": BASE.replace(use_fast_accum=False, promotion_interval=2),
    "split_k": BASE.replace(k_cuts=(KCut("contiguous", count=3),), partial_dtype="fp16"),
    "split_k_nest": BASE.replace(k_cuts=(KCut("contiguous", span=100), KCut("contiguous", span=40))),
    "narrow_out": BASE.replace(out_dtype="fp16", in_dtype="bf16"),
}
KS = (1, 15, 16, 17, 48, 63, 64, 65, 100, 127, 129, 200, 257, 300)
STEPS = (16, 32, 64, 128)


def _bits_at(desc: GEMMDesc, k: int, kind: str, seed: int) -> np.ndarray:
    a = draw((3, k), desc.in_dtype, kind, seed)
    b = draw((k, 2), desc.in_dtype, kind, seed + 1)
    return bits(np.ascontiguousarray(emulate(desc, a, b)))


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_residue_last_readings_of_any_step_are_one_function(family: str, kind: str) -> None:
    seed = 1000 + sorted(FAMILIES).index(family)
    readings = [FAMILIES[family].replace(k_loop_step=s, residue="last") for s in STEPS]
    assert len({function_key(d) for d in readings}) == 1
    for k in KS:
        first = _bits_at(readings[0], k, kind, seed + k)
        for d in readings[1:]:
            assert np.array_equal(_bits_at(d, k, kind, seed + k), first), (
                f"seed {seed + k}: {family} K={k} step {d.k_loop_step} parts from step {STEPS[0]}"
            )


def test_residue_first_readings_stay_apart_and_do_part() -> None:
    """The key never merges residue-first readings of different steps, and the emulator shows
    why: on wide-exponent draws their bits part at some K that is not a multiple of the step."""
    a, b = (BASE.replace(k_loop_step=s, residue="first") for s in (32, 64))
    assert function_key(a) != function_key(b)
    assert function_key(a) != function_key(a.replace(residue="last"))
    parted = [k for k in KS if not np.array_equal(_bits_at(a, k, "wide", 77 + k), _bits_at(b, k, "wide", 77 + k))]
    assert parted, "steps 32 and 64 (residue first) gave equal bits at every K tried; the draws have no power"
    assert all(k % 64 for k in parted)


def test_offline_prediction_counts_one_function_once() -> None:
    """predict_offline.one_per_function: residue-last readings of several steps are one reading,
    kept with the answer's implied step (STAGES_ID 20: depth 128); residue-first ones stay."""
    mod = _predict_offline()
    last = [BASE.replace(k_loop_step=s, residue="last") for s in (32, 64)]
    kept, merged = mod.one_per_function(last, "a23-t11-s52-r4-w0-c0-g20")
    assert merged and kept == [BASE.replace(k_loop_step=128, residue="last")]
    first = [BASE.replace(k_loop_step=s, residue="first") for s in (32, 64)]
    kept, merged = mod.one_per_function(first + last, "a24-t15-s11-r4-w0-c0-g0")  # STAGES_ID 0: no step
    assert merged and kept == [*first, last[0]]


PART_DTYPES = [("fp32", "fp32"), ("fp16", "fp32"), ("fp32", "fp16"), ("fp16", "fp16")]


@pytest.mark.parametrize("out", ["fp16", "fp32"])
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_part_dtypes_of_a_single_pass_are_one_function(out: str, kind: str) -> None:
    """With no K cut there are no parts: partial_dtype and merge_dtype are read nowhere, so
    the readings that differ only there (what phase B left ambiguous for a23-t5-s1 in s18) key
    as one, draw_classes serves them with one emulation, and the emulator agrees bit for bit."""
    from fixbits.probe.recover import draw_classes

    base = BASE.replace(out_dtype=out, k_loop_step=128, residue="first")
    readings = [base.replace(partial_dtype=p, merge_dtype=m) for p, m in PART_DTYPES]
    assert len({function_key(d) for d in readings}) == 1
    for k in KS:
        assert draw_classes(readings, k) == [list(range(len(readings)))]
        first = _bits_at(readings[0], k, kind, 500 + k)
        for d in readings[1:]:
            assert np.array_equal(_bits_at(d, k, kind, 500 + k), first), (
                f"seed {500 + k}: K={k} partial {d.partial_dtype} merge {d.merge_dtype} parts from fp32/fp32"
            )


def test_part_dtypes_of_a_split_stay_apart_and_do_part() -> None:
    """With a K cut the parts are rounded to partial_dtype: the key keeps the readings apart, and
    on a K that splits, the emulator shows fp16 partials parting from fp32 ones."""
    from fixbits.probe.recover import draw_classes

    split = BASE.replace(k_cuts=(KCut("contiguous", count=3),))
    a, b = split, split.replace(partial_dtype="fp16")
    assert function_key(a) != function_key(b)
    assert draw_classes([a, b], 300) == [[0], [1]]
    parted = [k for k in KS if k >= 3 and not np.array_equal(_bits_at(a, k, "ordinary", 90 + k), _bits_at(b, k, "ordinary", 90 + k))]
    assert parted, "fp16 and fp32 partials gave equal bits at every K tried; the draws have no power"


def _predict_offline() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "reconstruction" / "predict_offline.py"
    spec = importlib.util.spec_from_file_location("predict_offline", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the two readings phase B kept for a13-t0-s1-r0-w0-c74-g0 (fp16->fp16 GEMV) in session 18: 32
# lanes of at most 64 strided elements, or 32 contiguous slices; the same tree up to K = 32 * 64
GEMV = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp16",
                k_loop_step=64, residue="last")
LANES = [GEMV.replace(k_cuts=(KCut("strided", count=32, span=64, span_rule="capped", merge="butterfly_down"),)),
         GEMV.replace(k_cuts=(KCut("contiguous", count=32, merge="butterfly_down"),))]


def test_readings_one_function_on_the_recorded_range_only() -> None:
    """predict_offline.one_function_on: the readings have one canonical tree at every K up to
    2048 and part at 2049, so a range below 2049 is one function and any range reaching it is
    not; the emulator agrees on both sides (equal bits inside, parted bits at 2049 and past)."""
    mod = _predict_offline()
    assert mod.one_function_on(LANES, 169, 887)
    assert mod.one_function_on(LANES, 2000, 2048)
    assert not mod.one_function_on(LANES, 2000, 2049)
    for k in (169, 500, 887, 2048):
        for kind in ("ordinary", "wide"):
            assert np.array_equal(_bits_at(LANES[0], k, kind, 40 + k), _bits_at(LANES[1], k, kind, 40 + k)), (
                f"seed {40 + k}: K={k} {kind}: the readings parted inside the range"
            )
    # past 2048 the trees differ; an fp16 output rounds the difference away on most draws (why
    # the recorded cells left the answer ambiguous), so the fp32-output twins show it
    wide = [d.replace(out_dtype="fp32") for d in LANES]
    assert not mod.one_function_on(wide, 2000, 2049)
    parted = [k for k in (2049, 2500, 3000, 4000) if not np.array_equal(_bits_at(wide[0], k, "wide", 60 + k),
                                                                         _bits_at(wide[1], k, "wide", 60 + k))]
    assert parted, "no K past 2048 parted the fp32-output readings on wide draws; the draws have no power"


def test_a_range_entry_stays_out_of_the_profile_past_its_range() -> None:
    """An entry made from a range-settled answer (predict_offline --apply with k_range) is a K
    variant: a K inside gives its descriptor, a K outside is not in the profile (never guessed)."""
    from fixbits.probe.profile import ArchProfile, KVariant, NotInProfile, ProfileEntry

    key = "a13-t0-s1-r0-w0-c74-g0"
    entry = ProfileEntry(key, LANES[0], (2506, 1, 169), 1, 6, (), "", (KVariant(169, 887, LANES[0], (2506, 1, 169)),))
    prof = ArchProfile("sm_90", "cublaslt", "130100", "fp16", "fp16", {key: entry})
    assert prof.lookup(key, k=500, n=1) == LANES[0].at_k(500)
    for k in (168, 888, 4096):
        with pytest.raises(NotInProfile, match="outside the probed ranges"):
            prof.lookup(key, k=k, n=1)
    again = ArchProfile.from_dict(prof.to_dict(), where="test")
    assert again.entries[key].variants == entry.variants
