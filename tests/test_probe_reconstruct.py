"""`fixbits reconstruct` end to end on CPU: a fake heuristic, the emulator as cuBLAS.

The fake library answers 'split into 4' for deep K and 'single pass' otherwise, and its GEMM
is the emulator running the matching descriptor, so the written profile must hold exactly
those two descriptors (up to equivalence on the probed shapes), verified on other shapes of
the same answer, and be resumable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.probe import reconstruct as R
from fixbits.probe.placements import Packer, Placement
from fixbits.probe.plan import equivalent_on
from fixbits.probe.profile import TO_PROBE_AGAIN, WITHDRAWN, load

pytestmark = pytest.mark.unit

PLAIN = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
SPLIT = PLAIN.replace(k_cuts=(KCut("contiguous", count=4, granule=64),))


# the prober's clocks are for the GPU run; a loaded CI worker must not turn them into a result
UNTIMED = 1e6


class _Answer:
    algo_id = 1
    reduction_scheme = 0

    def __init__(self, split: int, tile: int = 1) -> None:
        self.splitk_num = split
        self.tile = tile

    def key_str(self) -> str:
        return f"a1-t{self.tile}-s{self.splitk_num}-r0-w0-c0-g0"


class _FakeLt:
    version = 130100

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _Answer:
        return _Answer(4 if k >= 1024 else 1, tile=1 if m >= 32 else 2)


class _FakeCublas:
    name, in_dtype, out_dtype = "fake", "fp16", "fp32"

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.emulate import emulate

        return emulate(SPLIT if a.shape[1] >= 1024 else PLAIN, a, b)


def test_reconstruct_writes_a_verified_resumable_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(m, 4, k) for m in (16, 48) for k in (200, 300, 1100, 1300, 1500)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_FakeLt(), backend=_FakeCublas(), profile_launch=False, log=lines.append)
    assert s["answers"] == 4 and not s["failed"], s
    # two arithmetic families probed once each; the other tile of each predicted and verified by draws
    assert len(s["probed"]) == 2 and len(s["predicted"]) == 2, s
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    split, plain = prof.entries["a1-t1-s4-r0-w0-c0-g0"], prof.entries["a1-t1-s1-r0-w0-c0-g0"]
    assert len(prof.entries) == 4
    predicted = prof.entries[next(k for k in s["predicted"] if "-s4-" in k)]
    assert equivalent_on(predicted.desc, SPLIT, 1300) and "predicted from" in predicted.note
    for k in (1100, 1300, 1500, 4000):
        assert equivalent_on(split.desc, SPLIT, k), (k, split.desc)
    for k in (200, 300, 1000):
        assert equivalent_on(plain.desc, PLAIN, k), (k, plain.desc)
    assert split.verified_shapes >= 2 and plain.verified_shapes >= 2
    ev = tmp_path / "evidence" / f"fp16_{next(p['key'] for p in s['probed'] if '-s4-' in p['key'])}.json"
    from fixbits.probe.replay import explain, explains, load_recorded

    rec = load_recorded(ev)
    assert explains(split.desc, rec)
    assert not explains(PLAIN, rec)  # the walks have power against a neighbour
    assert any(equivalent_on(d, SPLIT, rec.shape[2]) for d in explain(rec))
    # resumable: a second run probes nothing already in the profile
    s2 = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                       budget_s=UNTIMED, per_answer_s=UNTIMED,
                       lt=_FakeLt(), backend=_FakeCublas(), profile_launch=False, log=lines.append)
    assert s2["probed"] == [], s2


def test_reconstruct_only_probes_the_selected_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--only-answers: a family re-probed alone; the other answers are neither probed nor failed."""
    shapes = [(48, 4, k) for k in (200, 300, 1100, 1300)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_FakeLt(), backend=_FakeCublas(), profile_launch=False, log=lines.append, only=["a1-s4"])
    assert s["answers"] == 2 and [p["key"] for p in s["probed"]] == ["a1-t1-s4-r0-w0-c0-g0"], s
    assert not s["failed"] and not s["skipped_budget"], s
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    assert list(prof.entries) == ["a1-t1-s4-r0-w0-c0-g0"]
    assert any("only a1-s4: 1 of 2 answers" in x for x in lines), lines


@pytest.mark.parametrize("prefix", [WITHDRAWN, TO_PROBE_AGAIN])
def test_a_withdrawn_answer_is_left_and_one_to_probe_again_is_probed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """An entry withdrawn on the GPU's evidence stays in the failed table on a resumed run (session
    36 re-predicted a withdrawn fp16 answer from the same sibling, and it was wrong again); one
    marked to probe again (its cause fixed in the prober) is probed again."""
    import dataclasses

    shapes = [(48, 4, k) for k in (200, 300, 1100, 1300)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    run = dict(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path, budget_s=UNTIMED,
               per_answer_s=UNTIMED, lt=_FakeLt(), backend=_FakeCublas(), profile_launch=False)
    R.reconstruct(**run, log=lambda m: None)  # type: ignore[arg-type]
    path = tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml"
    prof = load(path)
    key = "a1-t1-s4-r0-w0-c0-g0"
    why = prefix + "the H200's cell differs"
    entries = {k: e for k, e in prof.entries.items() if k != key}
    dataclasses.replace(prof, entries=entries, failed={key: why}).save(tmp_path)
    lines: list[str] = []
    s = R.reconstruct(**run, log=lines.append)  # type: ignore[arg-type]
    again = load(path)
    if prefix == TO_PROBE_AGAIN:
        assert key in again.entries and key not in again.failed, (s, again.failed)
        assert again.entries[key].desc == prof.entries[key].desc, again.entries[key]
    else:
        assert key not in again.entries and again.failed[key] == why, (s, again.failed)
        assert s["probed"] == [] and s["predicted"] == [], s
        assert any("1 withdrawn answers left as they are" in x for x in lines), lines


def test_reconstruct_in_worker_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parallel path (one process per answer, as on the GPU runner) writes the same entries."""
    shapes = [(48, 4, k) for k in (200, 300, 1100, 1300)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_FakeLt(), backend=_FakeCublas(), profile_launch=False, log=lambda m: None, workers=2)
    assert s["answers"] == 2 and not s["failed"] and len(s["probed"]) == 2, s  # one tile: 2 families
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    assert equivalent_on(prof.entries["a1-t1-s4-r0-w0-c0-g0"].desc, SPLIT, 1300)


def test_shape_space_is_large_and_reaches_long_vectors_and_deep_k() -> None:
    shapes = R.shape_space(20000, seed=0)
    assert len(shapes) == 20000 == len(set(shapes))
    assert max(k for _, _, k in shapes) >= 1_000_000
    assert max(n for m, n, _ in shapes if m == 1) >= 1_000_000
    fp8 = R.shape_space(2000, seed=0, k_multiple=16)
    assert all(k % 16 == 0 for _, _, k in fp8)


def test_pick_prefers_informative_k_then_cheap_shapes() -> None:
    """K >= 256 and not a multiple of 8 (the residue turn shows) first; then few calls, small K."""
    assert R.pick([(1, 8, 11528), (64, 64, 11528), (64, 64, 9001), (1, 2, 500), (64, 64, 8)]) == [(64, 64, 9001)]
    assert R.pick([(64, 64, 8), (1, 8, 16)]) == [(64, 64, 8)]
    assert R.pick([(64, 64, 4096), (64, 64, 4112)], in_dtype="fp8_e4m3") == [(64, 64, 4112)]


def test_packer_batches_many_placements_per_call_and_keeps_fp8_exact() -> None:
    from fixbits.probe.placements import lr_placement, magnitudes

    mag = magnitudes("fp8_e4m3")
    assert mag.r < mag.L * 2.0**-25  # below half an fp32 ulp of L
    # group-start walks put L and r on the same positions: needs scale vectors in several columns
    pls = [lr_placement(mag, z, z - 2, z - 1) for z in range(2, 66)]
    calls = Packer(64, 4, 128, "fp8_e4m3").pack(pls)
    assert len(calls) <= 2
    for c in calls:
        prod = c.a.astype(np.float64) @ c.b.astype(np.float64)
        for (i, j), pl in zip(c.reads, c.placements, strict=True):
            exact = sum(a * b for _, a, b in pl.terms)
            assert prod[i, j] == exact, pl.tag
    with pytest.raises(ValueError, match="not exact"):
        Packer(4, 1, 8, "fp16").pack([Placement(((0, 1.0 + 2.0**-12, 1.0),))])


def test_cli_probe_on_the_emulator(tmp_path: Path, capsys: Any) -> None:
    from fixbits.cli import main

    desc = PLAIN.replace(use_fast_accum=False, promotion_interval=2)
    path = tmp_path / "d.yaml"
    path.write_text(desc.to_yaml())
    rc = main(["probe", "--shape", "32,2,200", "--emulate", str(path), "--draws", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "equivalent to" in out and ": True" in out


class _OneAnswerLt:
    """One heuristic answer for every shape, although the arithmetic changes at K = 1024."""

    version = 130100

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _Answer:
        return _Answer(1)


def test_reconstruct_splits_an_answer_by_k_when_one_descriptor_misses(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """H200 run s2-1: entries held at their probed K and missed other K of their own answer.
    The verification shapes (priority shapes first) catch it, the answer is probed again at the
    missing shape and split by K, both variants verified; lookup then needs K."""
    from fixbits.probe.profile import NotInProfile

    shapes = [(48, 4, k) for k in (200, 300, 1100)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_OneAnswerLt(), backend=_FakeCublas(), profile_launch=False, log=lines.append,
                      priority_shapes=[(48, 4, 1300)])
    assert s["priority_answers"] == 1 and s["priority_done"] == 1, (s, lines)
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    e = prof.entries["a1-t1-s1-r0-w0-c0-g0"]
    assert len(e.variants) == 2, (e, lines)
    assert "split by K" in e.note
    for k in (200, 300):
        assert equivalent_on(prof.lookup("a1-t1-s1-r0-w0-c0-g0", k=k), PLAIN, k)
    for k in (1100, 1300):
        assert equivalent_on(prof.lookup("a1-t1-s1-r0-w0-c0-g0", k=k), SPLIT, k)
    lo, hi = e.variants[0].k_max, e.variants[1].k_min
    assert lo is not None and 300 <= lo < hi <= 1300
    with pytest.raises(NotInProfile, match="changes its arithmetic with K"):
        prof.lookup("a1-t1-s1-r0-w0-c0-g0", k=lo + 1)


class _TileLt:
    version = 130100

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _Answer:
        return _Answer(1, tile=1 if m >= 32 else 2)


class _TileCublas:
    """Tile 2 of the same algo steps 128 with the short turn first (H200: tiles of one family differ in step)."""

    name, in_dtype, out_dtype = "fake", "fp16", "fp32"

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.emulate import emulate

        return emulate(PLAIN if a.shape[0] >= 32 else STEP128, a, b)


STEP128 = PLAIN.replace(k_loop_step=128, residue="first")


def test_predicted_answer_takes_its_own_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shapes = [(m, 4, k) for m in (16, 48) for k in (200, 300, 333, 401)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_TileLt(), backend=_TileCublas(), profile_launch=False, log=lines.append)
    assert not s["failed"] and len(s["probed"]) == 1 and len(s["predicted"]) == 1, (s, lines)
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    e = prof.entries[s["predicted"][0]]
    assert "predicted from" in e.note and "(step" in e.note, e.note  # not the family's own step
    for k in (200, 300, 333, 401, 1000):
        assert equivalent_on(e.desc, STEP128 if "-t2-" in e.key else PLAIN, k), (k, e)


def _workspace(parts: int, v: int) -> GEMMDesc:
    """cuBLAS's workspace GEMV (dot_kernel + reduce_1Block): V lanes per thread when N == 1, one when M == 1."""
    cuts = (KCut("strided", count=parts, span=128 * v, merge="reduce_1block"),
            KCut("strided", count=128, span=v, merge="butterfly_down"))
    if v > 1:
        cuts += (KCut("strided", count=v, span=1, merge="chain"),)
    return GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", k_cuts=cuts)


class _GemvAnswer:
    algo_id, reduction_scheme = 14, 2

    def __init__(self, parts: int) -> None:
        self.splitk_num = parts

    def key_str(self) -> str:
        return f"a14-t0-s{self.splitk_num}-r2-w0-c0-g0"


class _GemvLt:
    version = 130100

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _GemvAnswer:
        return _GemvAnswer(6 if k < 1600 else 7)


class _GemvCublas:
    name, in_dtype, out_dtype = "fake", "fp16", "fp32"

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.emulate import emulate

        parts = 6 if a.shape[1] < 1600 else 7
        return emulate(_workspace(parts, 2 if b.shape[1] == 1 else 1), a, b)


def test_gemv_answer_splits_by_orientation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One answer key, two loads: the probed side's descriptor misses the other side, which is
    probed itself (orientation variants); the family's other answer is predicted per side."""
    # most shapes on the cheap side (M == 1): the verification must still reach the other side
    shapes = [(1, 24, k) for k in (1500, 1540, 1580, 1700, 1740, 1800)] + [(40, 1, 1590), (40, 1, 1850)]
    monkeypatch.setattr(R, "shape_space", lambda q, seed=0, k_multiple=1: list(shapes))
    lines: list[str] = []
    s = R.reconstruct(arch="sm_90", in_dtype="fp16", out_dtype="fp32", out_dir=tmp_path,
                      budget_s=UNTIMED, per_answer_s=UNTIMED,
                      lt=_GemvLt(), backend=_GemvCublas(), profile_launch=False, log=lines.append)
    assert not s["failed"] and len(s["probed"]) + len(s["predicted"]) == 2, (s, lines)
    prof = load(tmp_path / "sm_90_cublaslt130100_fp16_fp32.yaml")
    for parts in (6, 7):
        e = prof.entries[f"a14-t0-s{parts}-r2-w0-c0-g0"]
        assert {v.n1 for v in e.variants} == {True, False}, e
        for k in (1500, 1800, 2500):
            assert equivalent_on(prof.lookup(e.key, k=k, n=1), _workspace(parts, 2), k), (e.key, k)
            assert equivalent_on(prof.lookup(e.key, k=k, n=24), _workspace(parts, 1), k), (e.key, k)
    assert any("split by orientation" in prof.entries[p["key"]].note for p in s["probed"]), s


def test_gemv_verification_reaches_both_sides() -> None:
    """The H200 a14 run s12: six verification shapes, all M == 1, let a descriptor of one side pass."""
    prio = [(1, 300 + i, 4000 + 8 * i) for i in range(8)]
    task = {"in_dtype": "fp16", "prio": prio, "group": prio + [(30, 1, 3001), (2, 2, 64)]}
    got = R._verify_shapes(task, 3, exclude=prio[0])
    assert (30, 1, 3001) in got, got
    assert R._verify_shapes({**task, "group": prio}, 3, exclude=prio[0]) == [
        s for s in got if s != (30, 1, 3001)], got
