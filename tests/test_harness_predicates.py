"""Predicates answer from what torch reports, and never need torch to exist."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixbits import plugin, predicates

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    predicates.clear_caches()
    yield
    predicates.clear_caches()


def fake_torch(
    *,
    available: bool,
    capability: tuple[int, int] = (9, 0),
    hip: str | None = None,
    gcn: str = "gfx942:sramecc+:xnack-",
) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.version = types.SimpleNamespace(hip=hip, cuda=None if hip else "13.0")  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: available,
        get_device_capability=lambda i=0: capability,
        get_device_properties=lambda i=0: types.SimpleNamespace(gcnArchName=gcn),
    )
    return torch


def install(monkeypatch: pytest.MonkeyPatch, torch: types.ModuleType | None, *, nodes: bool = True) -> None:
    monkeypatch.setitem(sys.modules, "torch", torch)  # None: 'import torch' raises ImportError
    monkeypatch.setattr(predicates, "_torch", lambda: torch)
    monkeypatch.setattr(predicates, "_installed", lambda name: torch is not None or name != "torch")
    monkeypatch.setattr(predicates, "device_nodes_present", lambda: nodes)


def test_without_torch_everything_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(predicates, "device_nodes_present", lambda: True)
    assert predicates._torch() is None
    assert not predicates.has_torch() and not predicates.has_cuda()
    assert predicates.gpu_arch() is None and not predicates.is_hopper() and not predicates.has_cublaslt()
    assert predicates.cpu_reason("needs a GPU") == "needs a GPU: torch is not installed"


def test_cuda_capability_becomes_sm_name(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_torch(available=True, capability=(9, 0)))
    assert predicates.gpu_arch() == "sm_90" and predicates.is_hopper() and not predicates.is_blackwell()
    assert predicates.gpu_vendor() == "nvidia"
    predicates.clear_caches()
    install(monkeypatch, fake_torch(available=True, capability=(10, 3)))
    assert predicates.gpu_arch() == "sm_103" and predicates.is_blackwell()


def test_rocm_reports_the_gcn_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_torch(available=True, hip="6.4.1"))
    assert predicates.gpu_arch() == "gfx942" and predicates.gpu_vendor() == "amd"
    assert not predicates.has_cublaslt()


def test_no_visible_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_torch(available=False))
    assert predicates.gpu_arch() is None and not predicates.has_triton_gpu()
    assert "torch.cuda.is_available() is False" in predicates.cpu_reason("x")


def test_without_device_nodes_torch_is_not_even_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> None:
        raise AssertionError("torch must not be imported when no GPU device node exists")

    monkeypatch.setattr(predicates, "device_nodes_present", lambda: False)
    monkeypatch.setattr(predicates, "_torch", boom)
    monkeypatch.setattr(predicates, "_installed", lambda name: True)
    assert predicates.gpu_arch() is None and not predicates.has_cuda()
    assert "no CUDA GPU visible (no /dev/nvidia* or /dev/kfd device node" in predicates.cpu_reason("x")


def test_ready_markers_are_skipifs_with_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_torch(available=False))
    for name in (
        "requires_gpu",
        "requires_hopper",
        "requires_blackwell",
        "requires_cublaslt",
        "requires_triton_gpu",
    ):
        mark = getattr(predicates, name).mark
        assert mark.name == "skipif" and mark.args == (True,) and mark.kwargs["reason"], name
    with pytest.raises(AttributeError):
        predicates.not_a_predicate  # noqa: B018


def test_importing_fixbits_imports_neither_torch_nor_triton() -> None:
    code = (
        "import sys, fixbits, fixbits.plugin, fixbits.predicates, fixbits.testing, fixbits.env, "
        "fixbits.shapes, fixbits.matrices, fixbits.report.cli, fixbits.cli;"
        "bad = [m for m in ('torch', 'triton') if m in sys.modules]; assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("markers", "requested", "detected", "expected"),
    [
        ({"gpu": ()}, "auto", "sm_90", None),
        ({"gpu": (), "nvidia": ()}, "sm_90", "sm_90", None),
        ({"gpu": ()}, "gfx942", "sm_90", "--arch gfx942 selected but an NVIDIA sm_90 GPU is present"),
        ({"gpu": ()}, "sm_90", "gfx942", "--arch sm_90 selected but an AMD gfx942 GPU is present"),
        ({"nvidia": ()}, "auto", "gfx950", "needs an NVIDIA GPU, but an AMD gfx950 GPU is present"),
        ({"amd": ()}, "auto", "sm_100", "needs an AMD GPU, but an NVIDIA sm_100 GPU is present"),
        ({"gpu": ("sm_100",)}, "auto", "sm_90", "needs one of sm_100, but an NVIDIA sm_90 GPU is present"),
        ({"slow": ()}, "auto", None, None),
    ],
)
def test_gpu_skip_reason(
    markers: dict[str, tuple[str, ...]], requested: str, detected: str | None, expected: str | None
) -> None:
    assert plugin.gpu_skip_reason(markers, requested, detected) == expected


def test_gpu_skip_reason_without_gpu_names_the_missing_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_torch(available=False))
    reason = plugin.gpu_skip_reason({"gpu": ()}, "auto", None)
    assert reason == "no CUDA GPU visible (torch.cuda.is_available() is False)"
    assert plugin.gpu_skip_reason({"gpu": ()}, "sm_90", None) == f"--arch sm_90 selected but {reason}"


@pytest.mark.parametrize(
    ("exc", "gpu_test", "crash"),
    [
        (RuntimeError("CUDA error: an illegal memory access was encountered"), False, True),
        (RuntimeError("HIP error: hipErrorLaunchFailure"), False, True),
        (RuntimeError("shape mismatch"), False, False),
        (RuntimeError("shape mismatch"), True, True),
        (AssertionError("bitwise mismatch"), True, False),
    ],
)
def test_gpu_crash_classification(exc: BaseException, gpu_test: bool, crash: bool) -> None:
    assert plugin.is_gpu_crash(exc, gpu_test=gpu_test) is crash
