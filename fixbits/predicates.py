"""What hardware and libraries this process can see, asked once per question and never at import.

Every GPU test gets its skip from one of these predicates, so "why was this skipped" has one
answer in one place. torch and triton are imported inside the functions: importing fixbits (or
collecting the suites) on a CPU-only CI runner must not pay for, or depend on, either.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from types import ModuleType

NVIDIA_ARCHES: tuple[str, ...] = ("sm_80", "sm_90", "sm_100", "sm_103")
AMD_ARCHES: tuple[str, ...] = ("gfx942", "gfx950")
ARCHES: tuple[str, ...] = NVIDIA_ARCHES + AMD_ARCHES


_DEVICE_NODES: tuple[str, ...] = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def device_nodes_present() -> bool:
    """Whether any NVIDIA, ROCm or WSL GPU device node exists. Without one, no driver can be
    reached and torch.cuda.is_available() is False, so a CPU runner skips the 5-second torch
    import that asking torch would cost every xdist worker."""
    return any(os.path.exists(p) for p in _DEVICE_NODES)


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # sys.modules[name] is None, or a broken spec
        return False


def _torch() -> ModuleType | None:
    """torch if it is installed and imports cleanly, else None (a broken install is 'absent')."""
    if not _installed("torch"):
        return None
    try:
        import torch
    except Exception:  # a half-installed torch must read as "no torch", not crash collection
        return None
    return torch


@functools.cache
def has_torch() -> bool:
    """torch is installed (found, not imported)."""
    return _installed("torch")


@functools.cache
def has_cuda() -> bool:
    """A GPU torch can launch on (CUDA or ROCm: torch reports both through torch.cuda)."""
    if not device_nodes_present():
        return False
    torch = _torch()
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


@functools.cache
def is_rocm() -> bool:
    torch = _torch()
    return bool(torch is not None and getattr(torch.version, "hip", None))


@functools.cache
def gpu_arch() -> str | None:
    """The visible device 0 as 'sm_90' / 'gfx942', or None when no GPU is visible."""
    if not has_cuda():
        return None
    torch = _torch()
    assert torch is not None
    if is_rocm():
        name = str(getattr(torch.cuda.get_device_properties(0), "gcnArchName", ""))
        return name.split(":")[0] or None  # 'gfx942:sramecc+:xnack-' -> 'gfx942'
    major, minor = torch.cuda.get_device_capability(0)
    return f"sm_{major}{minor}"


def gpu_vendor() -> str | None:
    arch = gpu_arch()
    if arch is None:
        return None
    return "amd" if arch.startswith("gfx") else "nvidia"


def is_hopper() -> bool:
    return gpu_arch() == "sm_90"


def is_blackwell() -> bool:
    return gpu_arch() in ("sm_100", "sm_103")


@functools.cache
def has_triton() -> bool:
    return _installed("triton")


def has_triton_gpu() -> bool:
    """Triton installed and a GPU it can launch on."""
    return has_triton() and has_cuda()


@functools.cache
def has_cublaslt() -> bool:
    """An NVIDIA GPU plus a loadable libcublasLt (the cuBLAS helper's discovery when it exists)."""
    if gpu_vendor() != "nvidia":
        return False
    try:
        from fixbits.cublas.lib import discover

        return any(lib.usable for lib in discover())
    except ImportError:  # the discovery module is absent: try the loader's own search path
        pass
    for name in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def cpu_reason(missing: str) -> str:
    """The one phrasing of 'no GPU here' every skip uses."""
    if not has_torch():
        return f"{missing}: torch is not installed"
    if not device_nodes_present():
        return f"{missing}: no CUDA GPU visible (no /dev/nvidia* or /dev/kfd device node, so torch.cuda.is_available() is False)"
    return f"{missing}: no CUDA GPU visible (torch.cuda.is_available() is False)"


def _skip_unless(ok: bool, reason: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not ok, reason=reason)


# Ready skip markers. They are evaluated lazily (per use, when the module applying them runs),
# but the predicates are cached, so the cost is one CUDA query per process.
class _LazyMarks:
    """Attribute access builds the marker, so importing this module queries no GPU."""

    @property
    def requires_gpu(self) -> pytest.MarkDecorator:
        return _skip_unless(has_cuda(), cpu_reason("needs a GPU"))

    @property
    def requires_hopper(self) -> pytest.MarkDecorator:
        return _skip_unless(is_hopper(), f"needs an sm_90 (Hopper) GPU, found {gpu_arch() or 'none'}")

    @property
    def requires_blackwell(self) -> pytest.MarkDecorator:
        return _skip_unless(is_blackwell(), f"needs an sm_100/sm_103 GPU, found {gpu_arch() or 'none'}")

    @property
    def requires_cublaslt(self) -> pytest.MarkDecorator:
        return _skip_unless(has_cublaslt(), "needs an NVIDIA GPU with a loadable libcublasLt")

    @property
    def requires_triton_gpu(self) -> pytest.MarkDecorator:
        return _skip_unless(has_triton_gpu(), "needs triton and a GPU it can launch on")


_MARKS = _LazyMarks()


def __getattr__(name: str) -> pytest.MarkDecorator:
    if name.startswith("requires_"):
        return getattr(_MARKS, name)  # type: ignore[no-any-return]
    raise AttributeError(name)


def clear_caches() -> None:
    """For tests that fake the environment (monkeypatching torch): forget what was asked."""
    for fn in (has_torch, has_cuda, is_rocm, gpu_arch, has_triton, has_cublaslt):
        fn.cache_clear()
