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
