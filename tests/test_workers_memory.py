"""The runner's per-process GPU memory share comes from nvidia-smi's total, read without a CUDA
context; a missing or failing nvidia-smi gives None (the runner then assumes an H200)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from fixbits import workers

pytestmark = pytest.mark.unit


def _smi(stdout: str, rc: int = 0) -> Any:
    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert cmd[0] == "nvidia-smi" and "--query-gpu=memory.total" in cmd
        return subprocess.CompletedProcess(cmd, rc, stdout=stdout, stderr="")

    return run


@pytest.mark.parametrize(
    ("stdout", "rc", "want"),
    [
        ("81559\n", 0, 81559 / 1024),  # H100 80GB HBM3
        ("143771\n", 0, 143771 / 1024),  # H200
        ("", 0, None),
        ("[N/A]\n", 0, None),
        ("81559\n", 9, None),
    ],
)
def test_gpu_memory_from_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, stdout: str, rc: int, want: float | None
) -> None:
    monkeypatch.setattr(workers.shutil, "which", lambda _: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(workers.subprocess, "run", _smi(stdout, rc))
    assert workers.gpu_memory_gib() == want


def test_gpu_memory_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers.shutil, "which", lambda _: None)
    assert workers.gpu_memory_gib() is None


def test_gpu_memory_when_nvidia_smi_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(cmd: list[str], **_: Any) -> None:
        raise subprocess.TimeoutExpired(cmd, 30)

    monkeypatch.setattr(workers.shutil, "which", lambda _: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(workers.subprocess, "run", hang)
    assert workers.gpu_memory_gib() is None
