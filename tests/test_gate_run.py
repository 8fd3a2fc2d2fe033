"""`fixbits gate` end to end on small generated suites: planted drift, no GPU, broken environments.

Each test writes a miniature repository (pytest.ini, suites/, matrices/pins.yaml, a golden file
carrying a recorded fingerprint) and runs the real command in a subprocess, so the exit code,
the JUnit XML and the report files are exactly what CI and the runners get.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]

RECORDED: dict[str, object] = {
    "gpu_name": "NVIDIA H200",
    "sm": "sm_90",
    "sm_count": 132,
    "driver": "580.95.05 (CUDA 13.0)",
    "cuda_runtime": "13.0",
    "cublas": "13.1.0",
    "cublaslt": "13.1.0",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
}
# a CPU machine's fingerprint (what --fingerprint feeds the gate instead of probing torch)
CPU_ENV: dict[str, object] = {
    "gpu_name": None,
    "sm": None,
    "sm_count": None,
    "driver": None,
    "cuda_runtime": None,
    "cublas": None,
    "cublaslt": None,
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "numpy": "2.0",
    "python": "3.11",
    "host": "ci",
}

PLANTED = """
import numpy as np

SEED = 20260911


def test_matches(drift):
    x = np.random.default_rng(SEED).standard_normal(64).astype(np.float32)
    drift.context(shape=(8, 8, 1), dtype="fp32", desc="aaaaaaaaaaaa")
    drift.assert_equal(x.reshape(8, 8), x.reshape(8, 8).copy())


def test_planted_drift(drift):
    x = np.random.default_rng(SEED).standard_normal(64).astype(np.float32).reshape(8, 8)
    y = x.copy()
    y[3, 5] = np.nextafter(y[3, 5], np.float32(np.inf))  # one ulp, one element
    drift.context(shape=(8, 8, 16), dtype="fp32", desc="planted0hash")
    drift.assert_equal(y, x)
"""

CPU_AND_GPU = """
import numpy as np
import pytest


def test_cpu_part():
    a = np.arange(16, dtype=np.float32)
    assert (a.view(np.uint32) == np.arange(16, dtype=np.float32).view(np.uint32)).all()
    assert a.any()


@pytest.mark.gpu
@pytest.mark.nvidia
def test_gpu_part():
    raise AssertionError("a GPU test must be skipped on a machine without a GPU")
"""


def make_repo(
    tmp_path: Path, files: dict[str, str], *, recorded: dict[str, object] | None = RECORDED
) -> Path:
    root = tmp_path / "repo"
    (root / "matrices" / "golden").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
    (root / "conftest.py").write_text(
        "import sys\npytest_plugins = [] if 'fixbits.plugin' in sys.modules else ['fixbits.plugin']\n"
    )
    pins = yaml.safe_load((REPO / "matrices" / "pins.yaml").read_text())
    (root / "matrices" / "pins.yaml").write_text(yaml.safe_dump(pins))
    if recorded is not None:
        golden = {"records": [{"id": "r0", "suite": "reconstruction", "env": recorded}]}
        (root / "matrices" / "golden" / "recorded.yaml").write_text(yaml.safe_dump(golden))
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def gate(root: Path, *args: str, env_file: dict[str, object] | None = CPU_ENV) -> tuple[int, str, Path]:
    out = root / "out"
    cmd = [
        sys.executable,
        "-m",
        "fixbits.cli",
        "gate",
        "--root",
        str(root),
        "--out",
        str(out),
        "-n",
        "0",
        *args,
    ]
    if env_file is not None:
        fp = root / "fingerprint.yaml"
        fp.write_text(yaml.safe_dump(env_file))
        cmd += ["--fingerprint", str(fp)]
    proc = subprocess.run(
        cmd,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    return proc.returncode, proc.stdout + proc.stderr, out


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One gate run over a suite with a planted one-ulp drift (and a speed CSV for the plot)."""
    root = make_repo(
        tmp_path_factory.mktemp("planted"),
        {
            "suites/reconstruction/test_planted.py": PLANTED,
            "bench/k.csv": "kernel,ratio\nsum,0.98\nsoftmax,1.04\n",
        },
    )
    return gate(root, "--benchmarks", str(root / "bench"))


def test_planted_drift_exits_1_and_the_report_names_it(planted: tuple[int, str, Path]) -> None:
    rc, log, out = planted
    assert rc == 1, log
    assert "DRIFT (exit 1): 1 test(s) drifted" in log
    md = (out / "gate.md").read_text()
    assert "## fixbits gate: DRIFT (exit 1)" in md
    row = next(line for line in md.splitlines() if "test_planted_drift" in line)
    assert "8x8x16" in row and "fp32" in row and "planted0hash" in row and "1 differ, max 1 ulp" in row, row
    assert "(3, 5)" in row, row  # the first differing element
    assert not any("test_matches" in line and "failed" in line for line in md.splitlines())
    verdict = json.loads((out / "gate.json").read_text())
    assert (
        verdict["verdict"] == "drift"
        and verdict["counts"]["failed"] == 1
        and verdict["counts"]["passed"] == 1
    )
    assert verdict["families"] == [
        {"family": "reconstruction", "passed": 1, "failed": 1, "errors": 0, "skipped": 0, "match_rate": 0.5}
    ]
    assert (out / "junit.xml").is_file() and (out / "pytest.log").is_file()


def test_html_page_is_self_contained(planted: tuple[int, str, Path]) -> None:
    rc, log, out = planted
    page = (out / "gate.html").read_text()
    assert "test_planted_drift" in page and "planted0hash" in page
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page, "matplotlib is a dev dependency: the plots must be inline SVG"
    assert "match rate per family" in page and "speed ratios" in page and "softmax" in page
    # nothing fetched when it opens: no external scripts, stylesheets, images or fonts
    assert not re.search(r"<(script|link|img)\b", page)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "url(http" not in page and "@import" not in page


def test_without_a_gpu_the_cpu_part_runs_and_gpu_tests_skip(tmp_path: Path) -> None:
    if any(Path(d).exists() for d in ("/dev/nvidia0", "/dev/kfd")):
        pytest.skip("this machine has a GPU; the test is about machines without one")
    root = make_repo(tmp_path, {"suites/enforcement/test_mixed.py": CPU_AND_GPU})
    # the gate is told this machine's GPU-less fingerprint (saves a torch import); the pytest it
    # starts detects the missing GPU itself and skips the GPU test with its reason
    rc, log, out = gate(root)
    verdict = json.loads((out / "gate.json").read_text())
    assert rc == 0, log
    assert verdict["verdict"] == "no drift" and verdict["counts"] == {
        "tests": 2,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "skipped": 1,
    }
    assert any("no GPU visible" in n for n in verdict["notes"])
    assert "no GPU" in (out / "gate.md").read_text()


def test_nothing_changed_runs_every_suite_quick(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path,
        {"suites/enforcement/test_mixed.py": CPU_AND_GPU, "suites/reconstruction/test_planted.py": PLANTED},
    )
    rc, log, _ = gate(root, "--dry-run")
    assert rc == 0, log
    assert "no fingerprint field changed" in log and "slice    suites  mode=quick" in log


def test_a_cublas_upgrade_selects_the_cublas_slice(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path,
        {
            "suites/enforcement/test_mixed.py": CPU_AND_GPU,
            "suites/reconstruction/test_planted.py": PLANTED,
            "suites/cublas_bugs/test_x.py": "def test_x():\n    assert 1\n",
        },
    )
    upgraded = {
        **RECORDED,
        "cublas": "13.2.0",
        "cublaslt": "13.2.0",
        "numpy": "2.0",
        "python": "3.12",
        "host": "r",
    }
    rc, log, _ = gate(root, "--dry-run", env_file=upgraded)
    assert rc == 0, log
    assert "changed  cublas: cublaslt 13.1.0 -> 13.2.0" in log
    assert "slice    suites/reconstruction suites/cublas_bugs  mode=full" in log


def test_a_broken_conftest_is_could_not_run(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path,
        {
            "suites/enforcement/test_mixed.py": CPU_AND_GPU,
            "suites/conftest.py": "import fixbits_module_that_does_not_exist\n",
        },
    )
    rc, log, out = gate(root)
    assert rc == 2, log
    assert "COULD NOT RUN (exit 2)" in log
    assert json.loads((out / "gate.json").read_text())["verdict"] == "could not run"


def test_an_unreadable_fingerprint_is_could_not_run(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"suites/enforcement/test_mixed.py": CPU_AND_GPU})
    rc, log, _ = gate(root, env_file={"gpu_name": None, "not_a_field": 1})
    assert rc == 2 and "could not run" in log and "not_a_field" in log, log


def test_missing_pins_is_could_not_run(tmp_path: Path) -> None:
    root = make_repo(tmp_path, {"suites/enforcement/test_mixed.py": CPU_AND_GPU})
    (root / "matrices" / "pins.yaml").unlink()
    rc, log, _ = gate(root)
    assert rc == 2 and "pins.yaml: cannot read" in log, log


def test_a_timeout_is_could_not_run(tmp_path: Path) -> None:
    root = make_repo(
        tmp_path,
        {"suites/enforcement/test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(120)\n"},
    )
    rc, log, out = gate(root, "--timeout-s", "2")
    assert rc == 2, log
    assert "time budget" in json.loads((out / "gate.json").read_text())["reason"]
