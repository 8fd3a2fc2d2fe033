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


def missing_markers(nodes: list[tuple[str, set[str]]]) -> list[str]:
    """Node ids under suites/<suite>/ without <suite>, or under tests/ without `unit`."""
    bad = []
    for nodeid, markers in nodes:
        parts = nodeid.split("::")[0].split("/")
        want = (
            parts[1] if parts[0] == "suites" and len(parts) >= 3 else "unit" if parts[0] == "tests" else None
        )
        if parts[0] == "suites" and want is None:
            bad.append(f"{nodeid} (a test directly under suites/ belongs to no suite)")
        elif want is not None and want not in markers:
            bad.append(nodeid)
    return bad


def test_no_gate_or_unit_test_lacks_its_marker(request: pytest.FixtureRequest) -> None:
    """Every collected test under suites/<suite>/ carries <suite>; every one under tests/, `unit`.

    In a whole-tree run (CI) the items this session collected are checked directly; run alone,
    the tree is collected in a subprocess, deselecting every test that has its marker.
    """
    items = request.session.items
    if any(item.nodeid.startswith("suites/") for item in items):
        nodes = [(item.nodeid, {m.name for m in item.iter_markers()}) for item in items]
        assert missing_markers(nodes) == []
        return
    expr = " or ".join((*SUITES, "unit"))
    done = collect("-m", f"not ({expr})", "tests", "suites")
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    remaining = [line for line in done.stdout.splitlines() if "::" in line]
    assert remaining == [], f"tests without their suite/unit marker: {remaining[:20]}"


def test_the_check_catches_a_missing_marker() -> None:
    assert missing_markers([("suites/enforcement/test_a.py::t", {"enforcement"})]) == []
    assert missing_markers([("suites/enforcement/test_a.py::t", {"gpu"})]) == [
        "suites/enforcement/test_a.py::t"
    ]
    assert missing_markers([("tests/test_x.py::t[1]", set())]) == ["tests/test_x.py::t[1]"]
    assert missing_markers([("suites/test_loose.py::t", set())])[0].endswith("belongs to no suite)")
