"""runners/device/gate_run.py on this CPU machine (--device cpu): the script the H200 runs, end to
end, with the GPU hidden. It must leave the report files and exit with the gate's verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]


def test_gate_run_on_cpu_writes_the_report_and_exits_with_the_verdict(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "runners" / "device" / "gate_run.py"), "--out", str(out),
         "--device", "cpu", "--budget-s", "90", "--sample", "1", "--slice", "cublas"],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    log = proc.stdout + proc.stderr + (out / "gate_stdout.log").read_text()
    verdict = json.loads((out / "gate" / "gate.json").read_text())
    assert proc.returncode == {"no drift": 0, "drift": 1, "could not run": 2}[verdict["verdict"]], log
    assert proc.returncode == 0, log  # the CPU half of the cuBLAS slice replays recorded bytes
    for f in ("gate.html", "gate.md", "gate.json", "junit.xml", "pytest.log"):
        assert (out / "gate" / f).is_file(), f
    assert verdict["slice"]["paths"] == ["suites/reconstruction", "suites/cublas_bugs"]
    table = proc.stdout.split("== fixbits gate on this machine", 1)[1]
    for row in ("runner check", "gate exit", "verdict", "changed", "sample report", "wall"):
        assert f"\n{row}" in table, table
    assert "--budget-s" in table and "--sample 1" in table
    html = (out / "gate" / "gate.html").read_text()
    assert "<svg" in html  # plots inline; nothing is fetched when the page opens
    assert not any(s in html for s in ('src="http', "src='http", "<link", "@import")), "external resource"
