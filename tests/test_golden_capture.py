"""The GPU capture script's CPU paths: a dry run writes records that replay, the case list is sane."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from fixbits.golden import golden_files, load_file, replay

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[1] / "runners" / "device" / "capture_golden.py"


def _load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("capture_golden", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["capture_golden"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_records_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = _load()
    code = cap.main(
        [
            "--out",
            str(tmp_path),
            "--dry-run",
            "--quick",
            "--only",
            "block_fp16,per_mma_bf16,splitk_fp8,fma_fp16,_ep_",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cases_mismatched=0" in out and "cases_crashed=0" in out
    files = golden_files(tmp_path)
    recs = [r for f in files for r in load_file(f)]
    assert {r.case for r in recs} == {"block", "gemm"} and len(recs) >= 8
    assert any(r.seed_acc is not None for r in recs) and any(r.seed_side is not None for r in recs)
    measured = list(tmp_path.glob("measure_*.yaml"))
    assert measured, "transcendental epilogues are written apart from golden_*.yaml"
    for rec in recs:
        assert replay(rec).ok, rec.id


def test_case_list_covers_the_issue() -> None:
    cap = _load()
    cases = cap.build_cases(quick=False)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids are unique"
    seeds = [c.seed for c in cases]
    assert len(seeds) == len(set(seeds))
    assert {c.variant for c in cases} == {"block", "single", "per_mma", "splitk", "fma"}
    assert {c.dtype for c in cases} == {"fp16", "bf16", "fp8_e4m3", "fp8_e5m2"}
    assert any(c.epilogue and c.exact for c in cases) and any(not c.exact for c in cases)
    assert any(c.partial != "fp32" for c in cases) and any(c.lanes == 2 for c in cases)
    assert {c.kind for c in cases} >= {"ordinary", "wide", "tiny", "subnormal", "cancel"}
    assert any(c.k % 16 for c in cases) and any(c.m % 2 and c.n % 2 for c in cases)
    for c in cases:
        c.desc()  # every descriptor is valid
