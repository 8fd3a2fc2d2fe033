"""reconstruct with known descriptors (``hints``): answers of an algo they cover are predicted and
verified by draws without a probe: across tiles, into and out of split-K, and a GEMV's lanes set by
its custom option (H200 run s2b: most probe time went to answers a known descriptor explained)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.probe import reconstruct as R
from fixbits.probe.plan import equivalent_on
from fixbits.probe.profile import load

pytestmark = pytest.mark.unit

PLAIN = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
STEP128 = PLAIN.replace(k_loop_step=128, residue="first")
SPLIT = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=8, aligned_granule=64),))
GEMV = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", k_loop_step=64)
LANES32 = GEMV.replace(k_cuts=(KCut("strided", count=32, span=1, merge="butterfly_down"),))
LANES8 = GEMV.replace(k_cuts=(KCut("strided", count=8, span=64, merge="butterfly_down"),))


# the prober's clocks are for the GPU run; a loaded CI worker must not turn them into a result
UNTIMED = 1e6


class _Answer:
    reduction_scheme = 0

    def __init__(self, algo: int, split: int, tile: int, custom: int = 0) -> None:
        self.algo_id, self.splitk_num, self.tile, self.custom = algo, split, tile, custom

    def key_str(self) -> str:
        return f"a{self.algo_id}-t{self.tile}-s{self.splitk_num}-r0-w0-c{self.custom}-g0"


class _Lt:
    """Algo 1: tile 1 (M >= 32) single pass step 64; tile 2 step 128, split in 4 from K = 1024.
    Algo 13 (M = 1): a GEMV whose lanes follow the custom option (N >= 100: 8 lanes of 64)."""

    version = 130100

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _Answer:
        if m == 1:
            return _Answer(13, 1, 0, custom=2 if n >= 100 else 1)
        return _Answer(1, 4 if k >= 1024 and m < 32 else 1, 1 if m >= 32 else 2)


class _Cublas:
    name, in_dtype, out_dtype = "fake", "fp16", "fp32"

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.emulate import emulate

        m, k = a.shape
        n = b.shape[1]
        if m == 1:
            return emulate(LANES8 if n >= 100 else LANES32, a, b)
        return emulate(PLAIN if m >= 32 else SPLIT if k >= 1024 else STEP128, a, b)


def test_hinted_answers_are_predicted_without_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(m, 4, k) for m in (16, 48) for k in (200, 333, 1100, 1544, 1600)]
    shapes += [(1, n, k) for n in (24, 160) for k in (300, 517)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    hints = {"a1-t1-s1-r0-w0-c0-g0": PLAIN, "a13-t0-s1-r0-w0-c1-g0": LANES32}
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_Lt(), backend=_Cublas(), profile_launch=False, log=lines.append, hints=hints)
    assert not s["failed"] and s["probed"] == [], (s, lines)
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    assert len(prof.entries) == 5, sorted(prof.entries)
    truth = {"a1-t1-s1-r0-w0-c0-g0": PLAIN, "a1-t2-s1-r0-w0-c0-g0": STEP128, "a1-t2-s4-r0-w0-c0-g0": SPLIT,
             "a13-t0-s1-r0-w0-c2-g0": LANES8}
    for key, want in truth.items():
        e = prof.entries[key]
        assert "predicted from" in e.note, e.note
        ks = (300, 517) if key.startswith("a13") else (1100, 1544, 1600) if "-s4-" in key else (200, 333)
        for k in ks:  # the answer's own K (readings equal on all of them are one entry)
            assert equivalent_on(e.desc, want, k), (key, k, e.desc)


def test_adapt_moves_a_descriptor_into_and_out_of_split_k() -> None:
    d = SPLIT.to_dict()
    assert R._adapt(d, 4, 1) == STEP128.to_dict()
    assert GEMMDesc.from_dict(R._adapt(STEP128.to_dict(), 1, 4)) == SPLIT  # type: ignore[arg-type]
    six = GEMMDesc.from_dict(R._adapt(d, 4, 6))  # type: ignore[arg-type]
    assert six.k_cuts[0].count == 6 and six.k_cuts[0].aligned_granule == 64
    assert R._split_of("a41-t21-s-1-r2-w0-c0-g35") == -1 and R._split_of("a24-t11-s12-r2-w0-c0-g20") == 12


def test_fp16_output_split_takes_fp16_partials_from_an_fp32_output_hint() -> None:
    from fixbits.backends import EmulatorBackend

    hint = SPLIT.replace(out_dtype="fp16")  # carried from the fp32-output profile
    truth = hint.replace(partial_dtype="fp16", merge_dtype="fp16")
    task = {"seed": 7, "prio": [], "group": [(16, 4, 1100), (16, 4, 1544)], "in_dtype": "fp16"}
    desc, used, note, src = R._predict(EmulatorBackend(truth), [hint], task, [(16, 4, 1100), (16, 4, 1544)])
    assert desc is not None and src == 0, note
    for k in (1100, 1544):
        assert equivalent_on(desc, truth, k), (k, desc)


def test_lane_variants_cover_contiguous_lane_slices() -> None:
    """bf16 a13 c92 (H200 s2b sweep bytes): 32 lanes over contiguous slices, butterfly fold."""
    slices = GEMV.replace(k_cuts=(KCut("contiguous", count=32, merge="butterfly_down"),))
    assert slices in R._lane_variants(LANES32)
    assert LANES8 in R._lane_variants(slices)
    assert R._lane_variants(PLAIN) == [] and R._lane_variants(GEMV) == []


SPLIT32 = SPLIT.replace(k_loop_step=32, use_fast_accum=True)  # H200 s13/a2x: a23 entries carried at step 32
SPLIT64 = SPLIT32.replace(k_loop_step=64)


def test_prediction_separates_step_readings_where_they_part() -> None:
    """A step-64 kernel predicted from a step-32 descriptor: the answer's shapes include K where
    the two part (K mod 64 >= 32); the prediction must come back as step 64, never the base."""
    from fixbits.backends import EmulatorBackend

    group = [(16, 4, 1088), (16, 4, 1120), (16, 4, 1144), (24, 8, 2100)]
    task = {"seed": 11, "prio": [], "group": group, "in_dtype": "fp16"}
    desc, used, note, src = R._predict(EmulatorBackend(SPLIT64), [SPLIT32], task, group[:2])
    assert desc is not None, note
    for k in (1120, 1144, 2100):
        assert equivalent_on(desc, SPLIT64, k), (k, desc, used)


def test_prediction_refuses_readings_the_draws_cannot_separate(monkeypatch: pytest.MonkeyPatch) -> None:
    """When draws keep every reading (a rare difference, like the 1-in-10 draws of run s13/a2x) and
    the readings differ on the answer's shapes, phase B names the ambiguity instead of keeping the
    first survivor."""
    from fixbits.backends import EmulatorBackend
    from fixbits.probe import recover

    def every_reading_passes(backend: object, descs: list[GEMMDesc], *a: object, **kw: object) -> tuple[list[bool], int]:
        return [True] * len(descs), 0

    monkeypatch.setattr(recover, "verify_draws", every_reading_passes)
    group = [(16, 4, 1088), (16, 4, 1120), (16, 4, 1144)]
    task = {"seed": 11, "prio": [], "group": group, "in_dtype": "fp16"}
    desc, used, why, src = R._predict(EmulatorBackend(SPLIT64), [SPLIT32], task, group[:1])
    assert desc is None and src == -1 and why.startswith("ambiguous:"), why
    assert "step 32" in why and "step 64" in why, why


def test_prediction_keeps_the_answers_own_reading_when_draws_cannot_separate(monkeypatch: pytest.MonkeyPatch) -> None:
    """A narrow-output pair predicted from the same answer's fp32-output entry: narrow outputs may
    not separate step readings that the fp32 cells did; the answer's own reading is kept, and the
    note says the draws left others too. A reading carried from another answer is not (above)."""
    from fixbits.backends import EmulatorBackend
    from fixbits.probe import recover

    def every_reading_passes(backend: object, descs: list[GEMMDesc], *a: object, **kw: object) -> tuple[list[bool], int]:
        return [True] * len(descs), 0

    monkeypatch.setattr(recover, "verify_draws", every_reading_passes)
    group = [(16, 4, 1088), (16, 4, 1120), (16, 4, 1144)]
    key = "a23-t20-s4-r4-w0-c0-g0"  # STAGES_ID 0 implies no step (the next test has one)
    task = {"seed": 11, "prio": [], "group": group, "in_dtype": "fp16", "key": key, "from_keys": [key]}
    desc, used, note, src = R._predict(EmulatorBackend(SPLIT64), [SPLIT32], task, group[:1])
    assert desc == SPLIT32 and src == 0 and "kept this answer's own reading" in note, note


@pytest.mark.parametrize(("stages_id", "step"), [(15, 64), (9, 32)])
def test_prediction_takes_the_step_the_answers_stages_id_implies(
    monkeypatch: pytest.MonkeyPatch, stages_id: int, step: int
) -> None:
    """Draws that keep several step readings of an algo-23 answer: the one whose step is its
    STAGES_ID's depth (15: 64x3, 9: 32x3) is taken, and the note says so (matmul_check s15 found
    two entries that had kept a carried step instead)."""
    from fixbits.backends import EmulatorBackend
    from fixbits.probe import recover

    def steps_pass(backend: object, descs: list[GEMMDesc], *a: object, **kw: object) -> tuple[list[bool], int]:
        return [d.residue == "first" for d in descs], 0  # the draws part the residue turns, not the steps

    monkeypatch.setattr(recover, "verify_draws", steps_pass)
    group = [(16, 4, 1088), (16, 4, 1120), (16, 4, 1144)]
    task = {"seed": 11, "prio": [], "group": group, "in_dtype": "fp16", "key": f"a23-t20-s4-r4-w0-c0-g{stages_id}"}
    base = SPLIT32 if step == 64 else SPLIT64
    desc, used, note, src = R._predict(EmulatorBackend(SPLIT64), [base], task, group[:1])
    assert desc is not None and desc.k_loop_step == step, note
    assert "STAGES_ID" in note, note


def test_a_gemv_answer_with_a_capped_lane_tile_is_predicted_from_a_fixed_tile_hint() -> None:
    """19 fp32 a13 answers deal lanes tiles of min(64, ceil(K / lanes)) (fitted offline from H200
    cells in s12/s13): phase B now reaches them from a fixed-tile hint of the same algorithm."""
    from fixbits.backends import EmulatorBackend

    fixed = GEMV.replace(k_cuts=(KCut("strided", count=16, span=64, merge="butterfly_down"),))
    truth = GEMV.replace(k_cuts=(KCut("strided", count=16, span=64, span_rule="capped", merge="butterfly_down"),))
    assert truth in R._lane_variants(fixed)
    shapes = [(3, 5, 300), (3, 5, 700)]  # K / 16 lanes < 64: the capped tile is narrower there
    assert not equivalent_on(fixed, truth, 300)
    task = {"seed": 11, "prio": [], "group": shapes, "in_dtype": "fp16"}
    desc, _, note, _ = R._predict(EmulatorBackend(truth), [fixed], task, shapes)
    assert desc is not None, note
    for k in (300, 700, 5000):
        assert equivalent_on(desc, truth, k), (k, desc)



def test_stages_id_never_wins_over_draws_on_the_answers_other_shapes() -> None:
    """Why the STAGES_ID rule stays after the draws (s16: review item 6 not taken). The kernel steps
    64 (its STAGES_ID 9 says 32); on the first shapes (K 1144, 2100) the step-32 readings give the
    same bits, at K 1184 and 1250 they do not. Drawing only the implied-step readings first would
    keep a step-32 one (nothing left to part it from); drawing all of them, the shapes where the
    survivors part reject it. Phase B must return the reading that holds on all four K."""
    from fixbits.backends import EmulatorBackend

    truth = SPLIT.replace(k_loop_step=64)
    group = [(16, 4, 1144), (24, 8, 2100), (16, 4, 1184), (16, 4, 1250)]
    assert equivalent_on(SPLIT32, truth, 1144) and not equivalent_on(SPLIT32, truth, 1184)
    task = {"seed": 11, "prio": [], "group": group, "in_dtype": "fp16", "key": "a23-t20-s4-r4-w0-c0-g9"}
    desc, used, note, src = R._predict(EmulatorBackend(truth), [SPLIT32], task, group[:2])
    assert desc is not None, note
    for k in (1144, 2100, 1184, 1250):
        assert equivalent_on(desc, truth, k), (k, desc, used, note)


def _b_task(per_answer_s: float) -> dict[str, object]:
    group = [(16, 4, 1088), (16, 4, 1120), (16, 4, 1144)]
    return {"key": "a23-t20-s4-r4-w0-c0-g0", "group": group, "group_size": 3, "seed": 11, "prio": [],
            "in_dtype": "fp16", "out_dtype": "fp32", "desc": SPLIT32.to_dict(), "from_key": "a23-t9-s4-r4-w0-c0-g0",
            "per_answer_s": per_answer_s}


def test_phase_b_stops_at_its_per_answer_cap() -> None:
    """A phase-B answer past its cap is reported as a timeout (never as a descriptor), and one cut
    by the run's deadline is left for a later run (s16: one answer held a worker for 168 s)."""
    import time

    from fixbits.backends import EmulatorBackend

    box = EmulatorBackend(SPLIT64)
    [r] = R.verify_answers({"items": [_b_task(0.0)], "deadline": time.time() + UNTIMED}, backend=box)
    assert r["status"] == "failed" and r["timeout"] and "cap" in r["why"] and "desc" not in r, r
    [r] = R.verify_answers({"items": [_b_task(UNTIMED)], "deadline": time.time() + UNTIMED}, backend=box)
    # (seconds are rounded to 0.1 s: a recovery under 50 ms records 0.0)
    assert r["status"] == "recovered" and r["seconds"] >= 0.0 and not r.get("timeout"), r


def test_predicted_answers_are_logged_with_their_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(m, 4, k) for m in (16, 48) for k in (200, 333, 1100)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path, budget_s=UNTIMED,
                      per_answer_s=UNTIMED, lt=_Lt(), backend=_Cublas(), profile_launch=False, log=lines.append,
                      hints={"a1-t1-s1-r0-w0-c0-g0": PLAIN})
    assert s["predicted"], (s, lines)
    for key in s["predicted"]:
        line = next((x for x in lines if x.startswith(f"  {key} ") and "[B]: predicted" in x), None)
        assert line is not None and "s)" in line, (key, lines)


def test_prediction_reads_the_split_granule_where_the_base_cannot_tell() -> None:
    """H100 s38: fp8 a66 entries carried a base's span granule (64) to answers whose kernel rounds
    spans to 128; their two verification shapes had ceil(K / count) round alike both ways, and
    every cell of 16 fresh shapes missed. The answer's other shapes part the two readings."""
    from fixbits.backends import EmulatorBackend

    base = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))
    truth = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=128),))
    group = [(16, 4, 2000), (16, 4, 1900), (16, 4, 1200)]
    assert equivalent_on(base, truth, 2000) and equivalent_on(base, truth, 1900)
    assert not equivalent_on(base, truth, 1200)
    assert truth in R._granule_variants(base)
    task = {"seed": 13, "prio": [], "group": group, "in_dtype": "fp16"}
    desc, used, note, src = R._predict(EmulatorBackend(truth), [base], task, group[:2])
    assert desc is not None and src == 0, note
    for k in (2000, 1900, 1200):
        assert equivalent_on(desc, truth, k), (k, desc, used)
    assert "granule 128" in note, note


def test_granule_variants_leave_gemvs_and_single_pass_alone() -> None:
    assert R._granule_variants(STEP128) == [] and R._granule_variants(LANES8) == []
    readings = {(d.k_cuts[0].granule, d.k_cuts[0].aligned_granule) for d in R._granule_variants(SPLIT)}
    assert readings == {(128, None), (64, None)}, readings


class _HeuristicEmulator:
    """The emulator as cuBLAS, with a heuristic that sends K in ``reach`` to answer ``key``."""

    def __init__(self, truth: GEMMDesc, key: str, reach: range) -> None:
        from fixbits.backends import EmulatorBackend

        self._bk, self.key, self.reach, self.asked = EmulatorBackend(truth), key, reach, []
        self.lt = self

    def __getattr__(self, name: str) -> object:
        return getattr(self._bk, name)

    def heuristic(self, m: int, n: int, k: int, in_dtype: str, out_dtype: str) -> str:
        self.asked.append((m, n, k))
        return self.key if k in self.reach else "a1-t1-s1-r0-w0-c0-g0"


def test_settling_asks_the_heuristic_for_a_k_where_readings_part() -> None:
    """H100 s38: an fp8 a66 answer seen only at K where ceil(K / count) rounds alike to 64 and
    128 kept the base's granule 64; fresh shapes at other K missed every cell. Phase B now asks
    the heuristic for this answer's shapes at K where the readings part and draws there."""
    base = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))
    truth = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=128),))
    group = [(16, 4, 2000), (16, 4, 1900)]
    key = "a66-t10-s4-r2-w0-c1-g0"
    bk = _HeuristicEmulator(truth, key, range(1500, 2001))  # K 1540..1792 part 64 from 128
    task = {"seed": 13, "prio": [], "group": group, "in_dtype": "fp16", "out_dtype": "fp32", "key": key}
    desc, used, note, src = R._predict(bk, [base], task, group)
    assert desc is not None, note
    assert [sh for sh in used if sh not in group], used  # a shape the heuristic named
    assert all(1500 <= k <= 2000 for _, _, k in used), used
    for k in (2000, 1900, 1200, 1950):
        assert equivalent_on(desc, truth, k), (k, desc, used)


def test_settling_keeps_the_first_reading_where_the_heuristic_never_reaches_a_parting_k() -> None:
    base = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))
    truth = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=128),))
    group = [(16, 4, 2000), (16, 4, 1900)]
    key = "a66-t10-s4-r2-w0-c1-g0"
    bk = _HeuristicEmulator(truth, key, range(1900, 2001, 100))  # only the answer's own K
    task = {"seed": 13, "prio": [], "group": group, "in_dtype": "fp16", "out_dtype": "fp32", "key": key}
    desc, used, note, src = R._predict(bk, [base], task, group)
    assert desc is not None and sorted(used) == sorted(group), (note, used)
    assert desc.k_cuts == base.k_cuts, desc  # the first reading, unseen: the evidence has no more
    assert 0 < len(bk.asked) <= R.HEURISTIC_ASKS, bk.asked


def test_no_heuristic_search_when_the_backend_cannot_load_cublaslt() -> None:
    class _NoLibrary:
        @property
        def lt(self) -> object:
            raise FileNotFoundError("no usable libcublasLt found")

    base = STEP128.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))
    task = {"seed": 1, "group": [(16, 4, 2000)], "in_dtype": "fp16", "out_dtype": "fp32", "key": "a1-t1-s4-r0-w0-c0-g0"}
    assert R._reach_parting_k(_NoLibrary(), [base, *R._granule_variants(base)], task, set()) is None
