"""Runs tests/test_enforce_interpret.py in a subprocess with TRITON_INTERPRET=1 (the interpreter
has to be on before triton.language is imported, so it cannot share this process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_interpreter_cases_pass_in_a_fresh_process() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         str(HERE / "test_enforce_interpret.py")],
        cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=600)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
    assert proc.returncode == 0, f"interpreter cases failed (exit {proc.returncode}):\n{tail}"
    assert " passed" in proc.stdout and "skipped" not in proc.stdout.splitlines()[-1], tail
