"""The GPU scripts run end to end on the CPU (TRITON_INTERPRET=1 dry runs), so the one device
call they get is never spent on a Python error. Bits are not checked here (no tensor cores)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=600, cwd=tmp
    )


def test_gemm_bench_dry_run_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = [str(REPO / "runners/device/kernels_bench.py"), "--out", str(out), "--dry-run", "--per-cell", "1",
            "--limit", "2", "--no-compile", "--tune-limit", "2"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = list(csv.DictReader((out / "gemm_bench.csv").open()))
    main = [r for r in rows if r["layer"] != "fused"]
    fused = [r for r in rows if r["layer"] == "fused"]
    assert len(main) == 2
    assert {r["layer"] for r in main} == {"attention", "lm_head"}, main  # cells interleave
    assert all(r["t_cublas_ms"] and r["t_cublas_gpu_ms"] and r["t_ours_gpu_ms"] for r in rows), rows
    assert all(r["t_fused_gpu_ms"] for r in fused), fused
    tuned = json.loads((out / "tuned_configs.json").read_text())["entries"]
    assert {(e["m"], e["n"], e["k"]) for e in tuned} >= {
        (int(r["m"]), int(r["n"]), int(r["k"])) for r in main
    }
    assert all(len(e["times_ms"]) <= 2 for e in tuned), tuned
    assert not [r for r in rows if r.get("error")], [r["error"] for r in rows if r.get("error")]
    assert {r["epilogue"] for r in fused} >= {"bias", "relu", "residual", "scale"}, fused
    assert all(r["t_fused_ms"] and r["t_pair_ms"] for r in fused), fused
    md = (out / "gemm_bench.md").read_text()
    assert "speed relative to cuBLAS" in md and "split-K tail shapes" in md and "GPU-time geomean" in md


def test_gemm_bench_subset_covers_every_cell_in_rounds() -> None:
    sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    shapes = bench.shapes_list()
    picked = bench.subset(shapes, 3)
    cells = {(s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) for s in shapes}
    first_round = picked[: len(cells)]
    assert {(s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) for s in first_round} == cells
    assert len(picked) == len(set(picked)) == sum(min(3, sum(1 for s in shapes if
               (s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) == c)) for c in cells)  # fmt: skip
    assert bench.subset(shapes, 3) == picked


def test_kernels_check_dry_run_catches_the_planted_defects(tmp_path: Path) -> None:
    out = tmp_path / "check"
    args = [str(REPO / "runners/device/kernels_check.py"), "--out", str(out), "--device", "cpu", "--small",
            "--sections", "ce", "--budget-s", "300"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "kernels_check.json").read_text())
    planted = [r for r in results if r["section"] == "c"]
    assert len(planted) == 4 and all(r["status"] == "PASS" and r["caught"] for r in planted), planted
    summary = [r for r in results if r["section"] == "e" and r["case"].startswith("epilogue summary")]
    assert {r["case"].split()[2] for r in summary} >= {"bias", "relu", "residual"}, summary
    assert all("ordinary" in r and "wide" in r for r in summary), summary
    assert not [r for r in results if r["status"] == "ERROR"], [r for r in results if r["status"] == "ERROR"]


def test_gemm_bench_with_no_budget_still_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "bench0"
    args = [str(REPO / "runners/device/kernels_bench.py"), "--out", str(out), "--dry-run", "--per-cell", "2",
            "--no-compile", "--budget-s", "0"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (
        "stopping the main pass after 0 shapes" in proc.stdout and "stopping the fused sweep" in proc.stdout
    )
    assert (out / "gemm_bench.md").exists() and (out / "gemm_bench.csv").exists()


def test_kernels_check_cases_filter_section_a(tmp_path: Path) -> None:
    out = tmp_path / "check_a"
    args = [str(REPO / "runners/device/kernels_check.py"), "--out", str(out), "--device", "cpu", "--small",
            "--sections", "a", "--cases", "single_pass fp16->fp32", "--budget-s", "300"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "kernels_check.json").read_text())
    assert results and all(r["case"].startswith("single_pass fp16->fp32 ") for r in results), results
    assert not [r for r in results if r["status"] == "ERROR"], results


def _runner(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"runner_{name}", REPO / "runners/device" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_matmul_check_tables_count_every_outcome(tmp_path: Path) -> None:
    """The GPU-free parts of runners/device/matmul_check.py: seeded shape sets, the CSV, the summary."""
    mc = _runner("matmul_check")
    shapes = mc.shape_sets(40, 3e8, 4e12)
    assert shapes == mc.shape_sets(40, 3e8, 4e12)
    assert sum(1 for s in shapes if s[0] == "realistic") == 390
    assert 0 < sum(1 for s in shapes if s[0] == "fuzz") <= 40
    assert all(m * n <= 3e8 and 2 * m * n * k <= 4e12 for w, m, n, k, _ in shapes if w == "fuzz")
    assert mc.case_seed("fp16->fp16", 1, 2, 3) == mc.case_seed("fp16->fp16", 1, 2, 3) != mc.case_seed("bf16->bf16", 1, 2, 3)
    rows = [
        {"pair": "fp16->fp16", "set": "realistic", "m": 1, "n": 2, "k": 3, "outcome": "match", "draws": 10,
         "elements": 20, "family": "single_pass", "_desc": object()},
        {"pair": "fp16->fp16", "set": "realistic", "m": 4, "n": 2, "k": 3, "outcome": "not_in_profile"},
        {"pair": "fp16->fp16", "set": "fuzz", "m": 5, "n": 2, "k": 3, "outcome": "tail_defect", "draws": 10,
         "elements": 100, "family": "splitk"},
    ]  # fmt: skip
    mc.write(rows, tmp_path)
    back = list(csv.DictReader((tmp_path / "matmul_check.csv").open()))
    assert [r["outcome"] for r in back] == ["match", "not_in_profile", "tail_defect"]
    table = mc.summarize(rows)["fp16->fp16"]
    assert table["realistic"] == {"shapes": 2, "match": 1, "not_in_profile": 1, "draws": 10,
                                  "elements_compared": 20, "families": {"single_pass": 1}}  # fmt: skip
    assert table["fuzz"]["tail_defect"] == 1 and "match" not in table["fuzz"]
    assert mc.summarize_csv(tmp_path / "matmul_check.csv")["fp16->fp16"] == table  # a cut run's CSV, read back


def test_reconstruct_pairs_and_sweep_extension() -> None:
    rc = _runner("reconstruct")
    todo, weights = rc.explicit_pairs("bf16:bf16:2,fp16:fp32")
    assert todo == [("bf16", "bf16"), ("fp16", "fp32")] and weights == {("bf16", "bf16"): 2.0, ("fp16", "fp32"): 1.0}
    with pytest.raises(SystemExit, match="IN:OUT"):
        rc.explicit_pairs("fp16")
    first = rc.sweep_cases(60, 0)
    more = rc.sweep_cases(90, 0, 60)
    assert more and all(c.which == "fuzz" for c in more)
    assert not {(c.m, c.n, c.k) for c in more} & {(c.m, c.n, c.k) for c in first if c.which == "fuzz"}
