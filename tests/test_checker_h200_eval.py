"""benchmarks/checker/h200_eval.py: this checkout's checker against the H200's byte classes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PTX = ROOT / ".aot" / "ptx"


def _mod():
    spec = importlib.util.spec_from_file_location("h200_eval", ROOT / "benchmarks/checker/h200_eval.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    sys.modules["h200_eval"] = m  # dataclasses look their module up
    spec.loader.exec_module(m)
    return m


def test_partition_counts_false_equal_pairs(tmp_path: Path) -> None:
    """Two configs on one PTX file with different bytes are a false-equal pair; a file the
    store does not keep is left out, not guessed."""
    from tests.test_checker_helpers import FROZEN

    m = _mod()
    sample = FROZEN / "row_sum_w2.ptx"
    ptx = tmp_path / "ptx"
    ptx.mkdir()
    (ptx / "aaaa.ptx").write_text(sample.read_text())
    rows = [
        {"id": 1, "kernel": "row_sum", "dtype": "fp32", "label": "a", "ptx_sha": ["aaaa"], "bytes": "x"},
        {"id": 2, "kernel": "row_sum", "dtype": "fp32", "label": "b", "ptx_sha": ["aaaa"], "bytes": "y"},
        {"id": 3, "kernel": "row_sum", "dtype": "fp32", "label": "c", "ptx_sha": ["missing"], "bytes": "x"},
    ]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, _ = m.evaluate(cases, ptx)
    (r,) = out
    assert (r.configs, r.left_out, r.true_classes, r.checker_classes) == (2, 1, 2, 1)
    assert r.false_equal_pairs == 1


@pytest.mark.skipif(not PTX.is_dir(), reason="no AOT PTX store (.aot/ptx): build it with --build-aot")
def test_no_false_equal_against_h200_bytes() -> None:
    """Soundness on real binaries: configs the checker certifies equal returned identical bytes
    on the H200 (two kernels here, the whole run in benchmarks/checker/cpu/h200_s2_eval.json)."""
    m = _mod()
    rows, _ = m.evaluate(m.DEFAULT_CASES, PTX, {"col_sum", "inductor_red_mean"})
    if not any(r.configs for r in rows):
        pytest.skip(f"{PTX} holds no PTX of col_sum or inductor_red_mean (a partial store): rebuild with --build-aot")
    assert rows and sum(r.configs for r in rows) > 100
    assert sum(r.false_equal_pairs for r in rows) == 0
    assert all(r.checker_classes >= r.true_classes for r in rows)
