"""The CI check that every gate test carries its suite marker (and every unit test `unit`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixbits.plugin import SUITES

REPO = Path(__file__).resolve().parent.parent


def registered_markers() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    block = text[text.index("markers = [") :]
    return set(re.findall(r'^\s*"(\w+):', block[: block.index("]")], flags=re.M))


def test_every_suite_directory_has_a_registered_marker() -> None:
    dirs = {p.name for p in (REPO / "suites").iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert dirs <= registered_markers(), (
        f"suites without a marker in pyproject.toml: {sorted(dirs - registered_markers())}"
    )
    assert set(SUITES) <= registered_markers()


def collect(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "--mode",
        "fuzz",
        *args,
    ]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_no_gate_or_unit_test_lacks_its_marker() -> None:
    """Collect the whole tree, deselecting every test that carries its marker: nothing may remain."""
    expr = " or ".join((*SUITES, "unit"))
    done = collect("-m", f"not ({expr})", "tests", "suites")
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    remaining = [line for line in done.stdout.splitlines() if "::" in line]
    assert remaining == [], f"tests without their suite/unit marker: {remaining[:20]}"
