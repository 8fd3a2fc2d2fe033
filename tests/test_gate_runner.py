"""runners/check_runner.py: a runner takes gate jobs only with the GPU and the stack the pins promise."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fixbits.gate import load_pins

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]

H200 = {
    "gpu_name": "NVIDIA H200",
    "sm": "sm_90",
    "sm_count": 132,
    "driver": "580.95.05 (CUDA 13.0)",
    "cuda_runtime": "13.0",
    "cublas": "13.1.0",
    "cublaslt": "13.1.0",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "numpy": "2.5.2",
    "python": "3.12.3",
    "host": "h200-1",
}
MI300 = {
    **H200,
    "gpu_name": "AMD Instinct MI300X",
    "sm": "gfx942",
    "sm_count": 304,
    "driver": None,
    "cuda_runtime": "hip 6.4.43482",
    "cublas": None,
    "cublaslt": None,
    "torch": "2.11.0+rocm6.4",
}


@pytest.fixture(scope="module")
def cr() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "fixbits_check_runner", REPO / "runners" / "check_runner.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def pins() -> dict[str, object]:
    return dict(load_pins(REPO / "matrices" / "pins.yaml").versions)


def failing(checks: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {c.name: c.detail for c in checks if not c.ok}


def test_a_pinned_h200_is_ready(cr: ModuleType) -> None:
    checks = cr.evaluate(H200, arch="sm_90", pins=pins(), gpu_works=(True, "ok"))
    assert failing(checks) == {}
    assert any(c.name == "pin cublas" and "installed 13.1.0" in c.detail for c in checks)


def test_wrong_gpu_for_the_label(cr: ModuleType) -> None:
    got = failing(cr.evaluate(H200, arch="sm_100", pins=pins(), gpu_works=(True, "ok")))
    assert got == {"arch label": "runner labelled sm_100, GPU is sm_90"}


def test_an_unpinned_cublas_is_refused(cr: ModuleType) -> None:
    env = {**H200, "cublaslt": "13.2.0", "cublas": "13.2.0"}
    got = failing(cr.evaluate(env, arch="sm_90", pins=pins(), gpu_works=(True, "ok")))
    assert got == {"pin cublas": "pinned 13.1, installed 13.2.0"}
    assert failing(cr.evaluate(env, arch="sm_90", pins=None, gpu_works=(True, "ok"))) == {}


def test_a_gpu_that_cannot_compute_is_refused(cr: ModuleType) -> None:
    got = failing(cr.evaluate(H200, arch="sm_90", pins=None, gpu_works=(False, "CUDA error: ECC")))
    assert got == {"GPU computes": "CUDA error: ECC"}


def test_no_gpu_is_refused_with_the_reason(cr: ModuleType) -> None:
    cpu = {k: None for k in H200} | {"torch": "2.11.0", "triton": "3.6.0"}
    got = failing(cr.evaluate(cpu, arch=None, pins=None, gpu_works=(False, "no GPU")))
    assert got["GPU visible"].startswith("no GPU visible to torch")
    assert "cuBLASLt recorded" in got and "driver recorded" in got


def test_amd_runner_checks_hip_not_cublas(cr: ModuleType) -> None:
    p = pins() | {"torch": None}
    checks = cr.evaluate(MI300, arch="gfx942", pins=p, gpu_works=(True, "ok"))
    names = {c.name for c in checks}
    assert "HIP runtime recorded" in names and "cuBLASLt recorded" not in names and "pin cublas" not in names
    assert failing(checks) == {}


def test_the_script_exits_nonzero_with_a_reason_here(cr: ModuleType, tmp_path: Path) -> None:
    from fixbits.env import fingerprint

    if fingerprint().sm is not None:
        pytest.skip("this machine has a GPU; the test is about one without")
    rec = tmp_path / "runner.yaml"
    proc = subprocess.run(
        [sys.executable, str(REPO / "runners" / "check_runner.py"), "--arch", "sm_90", "--record", str(rec)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("check_runner: NOT READY: GPU visible: no GPU visible"), last
    assert "fingerprint:" in rec.read_text()
