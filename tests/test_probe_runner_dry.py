"""runners/device/reconstruct.py on CPU (--device cpu): the device paths with CPU torch tensors
and the emulator as cuBLAS: priority shapes, probe calls built as device tensors (zeros +
index_put), sampled device-drawn verification, the hashed sweep draws redrawn on the CPU, the
mismatch dump and its classification."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from fixbits.desc import GEMMDesc
from fixbits.probe.profile import ArchProfile, ProfileEntry

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]


def _runner() -> Any:
    spec = importlib.util.spec_from_file_location("recon_runner", ROOT / "runners" / "device" / "reconstruct.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_dry_run_builds_a_profile_and_sweeps_it(tmp_path: Path) -> None:
    run = _runner()
    out = tmp_path / "run"
    assert run.main(["--out", str(out), "--device", "cpu", "--budget-s", "120", "--dtypes", "fp16,bf16,fp8_e4m3",
                     "--out-dtypes", "fp32,fp16", "--limit-shapes", "2", "--draws", "2", "--sweep-share", "0.3",
                     "--narrow-sweep", "all"]) == 0
    summary = yaml.safe_load((out / "summary.yaml").read_text())
    assert set(summary["reconstruct"]) == {"fp16->fp32", "bf16->fp32", "fp8_e4m3->fp32", "fp16->fp16",
                                           "fp8_e4m3->fp16"}, summary["reconstruct"].keys()
    for pair, rec in summary["reconstruct"].items():
        assert rec["priority_answers"] >= 1 and rec["priority_done"] >= 1, (pair, rec)
    for pair in ("fp16->fp32", "bf16->fp32", "fp16->fp16"):
        assert summary["sweep"][pair].get("match", 0) >= 1, summary["sweep"]
    prof = yaml.safe_load((out / "profiles" / "sm_90_cublaslt1_fp16_fp32.yaml").read_text())
    assert prof["entries"], prof
    assert list((out / "profiles" / "evidence").glob("fp16_*.json"))
    rows = _rows(out / "sweep.csv")
    assert rows and {r["set"] for r in rows} <= {"realistic", "fuzz"}
    assert any(r["outcome"] == "match" for r in rows), rows
    assert not any(r["outcome"] in ("wrong_entry", "check_error", "error") for r in rows), rows
    from fixbits.probe.sweep import load_samples

    samples = load_samples(out)
    assert samples and all(len(r["draws"]) == 2 for r in samples if "draws" in r)


def test_sweep_dumps_and_classifies_a_wrong_entry(tmp_path: Path) -> None:
    """An entry with step 64 where the black box steps 32 (the H200 s2-1 defect) mismatches on
    K with K mod 64 != K mod 32; the case is dumped with what it takes to study it on a CPU."""
    run = _runner()
    truth = run._DryLt().truth(121, "fp16", "fp32")
    wrong = truth.replace(k_loop_step=64)
    pdir = tmp_path / "profiles"
    key = "a1-t1-s1-r0-w0-c0-g0"
    ArchProfile("sm_90", "cublaslt", "1", "fp16", "fp32", {key: ProfileEntry(key, wrong, (8, 8, 321), 1)}).save(pdir)
    out = tmp_path / "run"
    assert run.main(["--out", str(out), "--device", "cpu", "--budget-s", "120", "--dtypes", "fp16",
                     "--limit-shapes", "3", "--draws", "2", "--profiles", str(pdir)]) == 0
    rows = _rows(out / "sweep.csv")
    bad = [r for r in rows if r["outcome"] == "wrong_entry"]
    assert bad, rows
    for r in bad:
        k = int(r["k"])
        assert k % 64 != k % 32, r
        dump = np.load(out / "mismatch_dump" / f"fp16_fp32_{r['m']}x{r['n']}x{r['k']}.npz")
        meta = json.loads(str(dump["meta"]))
        assert GEMMDesc.from_dict(meta["desc"]) == wrong
        assert dump["a_rows"].shape[1] == k and dump["b_cols"].shape[0] == k
        assert int(dump["bad"].sum()) == int(r["mismatches"]) > 0
    # the CPU check of a device run's samples reproduces the same table
    ck = tmp_path / "again"
    ck.mkdir()
    (ck / "sweep_samples").symlink_to(out / "sweep_samples")
    assert run.main(["--check", str(ck), "--profiles", str(pdir), "--check-workers", "1"]) == 0
    assert [r["outcome"] for r in _rows(ck / "sweep.csv")] == [r["outcome"] for r in rows]


def test_seed_profiles_resume_the_pair_and_hint_other_outputs(tmp_path: Path) -> None:
    """--seed-profiles: a second dry run probes nothing: fp16->fp32 resumes its profile, and
    fp16->fp16 answers are predicted (verified by draws) from the fp32-output descriptors."""
    run = _runner()
    first, second = tmp_path / "a", tmp_path / "b"
    common = ["--device", "cpu", "--budget-s", "60", "--dtypes", "fp16", "--limit-shapes", "2", "--draws", "2",
              "--narrow-sweep", "all"]
    assert run.main(["--out", str(first), *common]) == 0
    assert run.main(["--out", str(second), "--out-dtypes", "fp32,fp16", "--seed-profiles",
                     str(first / "profiles"), *common]) == 0
    summary = yaml.safe_load((second / "summary.yaml").read_text())
    assert summary["reconstruct"]["fp16->fp32"]["probed"] == [], summary["reconstruct"]
    narrow = summary["reconstruct"]["fp16->fp16"]
    assert narrow["probed"] == [] and narrow["predicted"] and not narrow["failed"], narrow
    prof = yaml.safe_load((second / "profiles" / "sm_90_cublaslt1_fp16_fp16.yaml").read_text())
    assert all(e["desc"]["out_dtype"] == "fp16" for e in prof["entries"].values())
    assert summary["sweep"]["fp16->fp16"].get("match", 0) >= 1, summary["sweep"]


def test_fp8_hints_carry_16bit_structures_to_fp8(tmp_path: Path) -> None:
    """fp8 answers share no key with the 16-bit pairs: the 16-bit descriptors seed the algo's
    structures, with 32-deep instructions promoted every 4 and split spans at both granules."""
    from fixbits.desc import KCut

    run = _runner()
    d = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32",
                 k_loop_step=32, k_cuts=(KCut("contiguous", count=2, granule=8, aligned_granule=64),))
    hints = run.fp8_hints(d, "fp32")
    assert [h.in_dtype for h in hints] == ["fp8_e4m3", "fp8_e4m3"]
    assert all(h.instruction_k == 32 and h.promotion_interval == 4 and not h.use_fast_accum for h in hints)
    assert hints[0].k_loop_step == 64 and hints[0].k_cuts == d.k_cuts
    assert (hints[1].k_cuts[0].granule, hints[1].k_cuts[0].aligned_granule) == (16, 128)
    assert run.fp8_hints(d.replace(instruction="fma", instruction_k=1, k_cuts=()), "fp32") == []
    prof = ArchProfile("sm_90", "cublaslt", "7", "fp16", "fp32",
                       {"a66-t1-s2-r2-w0-c0-g0": ProfileEntry("a66-t1-s2-r2-w0-c0-g0", d, (8, 8, 512), 1, 1, ())}, {})
    prof.save(tmp_path / "seed")
    got = run.seed_profiles(tmp_path / "seed", tmp_path / "out", "sm_90", "7", "fp8_e4m3", "fp32", lambda m: None)
    assert set(got) == {"a66-t1-s2-r2-w0-c0-g0~fp8.0", "a66-t1-s2-r2-w0-c0-g0~fp8.1"}


def test_fp8_fuzz_shapes_are_aligned_not_dropped(tmp_path: Path) -> None:
    """cuBLASLt's fp8 path needs K % 16 == 0 and N % 4 == 0: a fuzz draw is carried there (and
    says from where) instead of being left out, so the fp8 fuzz sweep compares as many shapes."""
    from fixbits.probe.sweep import fp8_aligned, load_samples

    assert fp8_aligned(5, 7, 121) == (5, 8, 128)
    assert fp8_aligned(3, 8, 32) == (3, 8, 32)
    run = _runner()
    assert run.main(["--out", str(tmp_path), "--device", "cpu", "--budget-s", "60", "--pairs", "fp8_e4m3:fp32",
                     "--limit-shapes", "2", "--draws", "2"]) == 0
    recs = [r for r in load_samples(tmp_path) if r["set"] == "fuzz"]
    assert recs and all(r["k"] % 16 == 0 and r["n"] % 4 == 0 and "got" in r for r in recs), recs
    assert any("aligned_from" in r for r in recs)


def test_scan_fuzz_shapes_come_from_another_seed() -> None:
    """The priority shapes that steer probing never include the sweep's own seed-0 shapes, and fp8
    pairs get them aligned to 16 (the only K the fp8 heuristic is asked about)."""
    from fixbits.shapes import fuzz_shapes

    run = _runner()
    steer = run.scan_fuzz_shapes(4000, 1, ["fp8_e4m3"])
    assert 3500 < len(steer) <= 4000 and all(k % 16 == 0 and n % 16 == 0 for _, n, k in steer)
    for align in (16, 1):  # the sweep draws fp8 shapes aligned, and the 16-bit ones as they come
        swept = {(s.m, s.n, s.k) for s in fuzz_shapes(0, run.SWEEP_FUZZ_KEPT, align=align)}
        assert not swept & set(steer)
    assert run.scan_fuzz_shapes(50, 2, ["fp16"]) != run.scan_fuzz_shapes(50, 1, ["fp16"])
    with pytest.raises(ValueError, match="seed 0 is the sweep's own"):
        run.scan_fuzz_shapes(10, 0, ["fp16"])
    with pytest.raises(SystemExit):
        run.parse_args(["--out", "x", "--scan-fuzz", "10", "--scan-fuzz-seed", "0"])
