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
    proc = _run(
        [str(REPO / "benchmarks/gemm/bench.py"), "--out", str(out), "--dry-run", "--limit", "2"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = list(csv.DictReader((out / "gemm_bench.csv").open()))
    main = [r for r in rows if r["layer"] != "fused"]
    fused = [r for r in rows if r["layer"] == "fused"]
    assert len(main) == 2
    assert all(r["t_cublas_ms"] for r in rows), rows
    assert not [r for r in rows if r.get("error")], [r["error"] for r in rows if r.get("error")]
    assert {r["epilogue"] for r in fused} >= {"bias", "relu", "residual", "scale"}, fused
    assert all(r["t_fused_ms"] and r["t_pair_ms"] for r in fused), fused
    md = (out / "gemm_bench.md").read_text()
    assert "speed relative to cuBLAS" in md and "split-K tail shapes" in md


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
