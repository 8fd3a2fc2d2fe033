"""The gate's budgeted slice: a deterministic sample per test function, families interleaved, and
a soft deadline after which tests skip with a reason instead of the run being killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixbits.gate_budget import BUDGET_SKIP, evenly_spaced, interleave, sample_and_order

pytestmark = pytest.mark.unit


@given(st.integers(0, 500), st.integers(0, 50))
def test_evenly_spaced_keeps_min_of_n_and_keep_with_both_ends(n: int, keep: int) -> None:
    got = evenly_spaced(n, keep)
    assert got == sorted(set(got)) and all(0 <= i < n for i in got)
    assert len(got) == (n if keep <= 0 else min(n, keep))
    if got and keep != 1:
        assert got[0] == 0 and got[-1] == n - 1


def test_interleave_gives_every_group_its_first_item_first() -> None:
    assert interleave([[1, 2, 3], [10], [20, 21]]) == [1, 10, 20, 2, 21, 3]


def test_sample_and_order_is_per_test_function() -> None:
    ids = [f"a.py::t[{i}]" for i in range(10)] + ["a.py::u", "b.py::v[x]", "b.py::v[y]"]
    order = sample_and_order(ids, 2)
    assert [ids[p] for p in order] == ["a.py::t[0]", "a.py::u", "b.py::v[x]", "a.py::t[9]", "b.py::v[y]"]


def test_the_deadline_skips_what_has_not_started(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\n@pytest.mark.parametrize('i', range(6))\ndef test_a(i): pass\ndef test_b(): pass\n"
    )
    past = time.time() - 1
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "fixbits.gate_budget", "--fixbits-sample=3",
         f"--fixbits-deadline={past:.0f}", "-p", "no:cacheprovider", "-rs", "-q", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 skipped, 3 deselected" in proc.stdout, proc.stdout
    assert BUDGET_SKIP in proc.stdout
