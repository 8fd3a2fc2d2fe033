"""The Triton kernels run on the CPU under TRITON_INTERPRET=1, each case in its own process
(the variable must be set before triton.jit runs, and tests must not set it at import).

What this proves without a GPU: indexing, masking, residue turns, split-K tables, the tail a
tail_dropped cut never reads, the scalar nest folds (bit-exact against the emulator), the
non-transcendental fused epilogues, and that a backwards split-K merge is caught. What it
cannot prove: tensor-core rounding (the interpreter's tl.dot is numpy), libdevice epilogues.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("_kernels_interp_child.py")
REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "case",
    [
        "tensor_core_indexing",
        "scalar_vs_emulator",
        "epilogue_vs_emulator",
        "planted_reverse_merge",
        "butterfly_merge",
        "splitk_launcher",
        "reduce_1block_vs_emulator",
    ],
)
def test_kernels_under_interpreter(case: str) -> None:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(CHILD), case], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (
        f"{case} failed under TRITON_INTERPRET=1:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    assert f"ok {case}" in proc.stdout
