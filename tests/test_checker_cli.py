"""`fixbits check`: verdicts, exit codes, signatures, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_checker_helpers as S

from fixbits.cli import main

pytestmark = pytest.mark.unit


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_equal_and_not_equal_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path, "a.ptx", S.ptx_reduce([16, 8, 4, 2, 1]))
    b = write(tmp_path, "b.ptx", S.ptx_reduce([16, 8, 4, 2, 1]).replace("%r20", "%r50"))
    c = write(tmp_path, "c.ptx", S.ptx_reduce([1, 2, 4, 8, 16]))
    assert main(["check", a, b]) == 0
    assert capsys.readouterr().out.strip() == "equal"
    assert main(["check", a, c]) == 1
    out = capsys.readouterr().out
    assert out.startswith("not equal") and "count down" in out and "count up" in out, out


def test_json_and_signature_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path, "a.ptx", S.ptx(S.SUM_LEFT))
    assert main(["check", a, "--signature", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["isa"] == "ptx" and rec["fallback"] is None and len(rec["signature"]) == 32
    g = write(tmp_path, "k.amdgcn", S.gcn_dpp([8, 4, 2, 1]))
    assert main(["check", g, g, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["equal"] is True


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "nope.ptx"), str(tmp_path / "nope2.ptx")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_garbage_is_never_equal_to_a_real_kernel(tmp_path: Path) -> None:
    a = write(tmp_path, "a.ptx", S.ptx(S.SUM_LEFT))
    g = write(tmp_path, "g.ptx", "this is not ptx at all {")
    assert main(["check", a, g]) == 1
