"""runners/device/multi_gpu_fuzz.py, the two-GPU proof of issue 9, run on this CPU machine: the
GPU list is simulated, the xdist workers pin themselves and compute on the CPU. It checks the
script's own logic (each shape once, shapes per pinned GPU, the verdict), not the GPUs."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "runners" / "device" / "multi_gpu_fuzz.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fixbits_multi_gpu_fuzz", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=600,
        check=False, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )  # fmt: skip


def test_cpu_dry_run_spreads_the_shapes_once_over_two_pinned_workers(tmp_path: Path) -> None:
    proc = _run("--out", str(tmp_path), "--device", "cpu", "--count", "24", "--max-elements", "4096",
                "--budget-s", "240")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = yaml.safe_load((tmp_path / "multi_gpu_fuzz.yaml").read_text())
    assert res["verdict"].startswith("dry run ok"), res["verdict"]
    assert res["each_shape_once"] is True
    assert res["spread"]["computed_per_gpu"] == {"nvidia:0": 12, "nvidia:1": 12}
    assert res["spread"]["computed_per_worker"] == {"gw0": 12, "gw1": 12}
    assert res["one_gpu"]["passed"] == 24 and res["one_gpu"]["computed_per_gpu"] == {"nvidia:0": 24}
    assert "each exactly once" in (tmp_path / "check_shapes.txt").read_text()
    assert res["speedup_shapes_per_s"] is not None  # measured; no CPU test asserts its value


def test_with_too_few_gpus_it_says_blocked_and_exits_2(tmp_path: Path) -> None:
    proc = _run("--out", str(tmp_path), "--count", "10", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    res = yaml.safe_load((tmp_path / "multi_gpu_fuzz.yaml").read_text())
    assert res["verdict"] == "blocked: needs 2 GPUs, 1 visible"


def test_smi_summary_reads_nvidia_smi_loop_output(tmp_path: Path) -> None:
    csv = tmp_path / "smi.csv"
    csv.write_text(
        "2026/12/02 17:00:00.000, 0, 87, 1500\n2026/12/02 17:00:00.000, 1, 0, 600\n"
        "2026/12/02 17:00:00.200, 0, 91, 1700\n2026/12/02 17:00:00.200, 1, 40, 1600\n"
        "garbage line\n"
    )
    got = _script().smi_summary(csv)
    assert got == {
        "0": {"samples": 2, "busy_share": 1.0, "mean_util": 89.0, "peak_mem_mib": 1700.0},
        "1": {"samples": 2, "busy_share": 0.5, "mean_util": 20.0, "peak_mem_mib": 1600.0},
    }
