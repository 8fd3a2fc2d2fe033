"""Find the cuBLASLt libraries installed on this machine and read each one's version.

The split-K tail loss and every arch profile are keyed by library version, and one machine
can hold several copies (the torch wheel's, an nvidia-cublas wheel, the CUDA toolkit's). The
suites run once per distinct version, so discovery must name each file and its
``cublasLtGetVersion()``. Link stubs (``.../stubs/``) are never returned: they load but fail
``cublasLtCreate``. With no GPU and no library this returns an empty tuple.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

_NAMES = ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11")


@dataclass(frozen=True)
class CublasLtLibrary:
    """One libcublasLt file: where it is, where it came from and the version it reports."""

    path: str
    realpath: str
    source: str  # "torch-wheel", "nvidia-wheel", "cuda-toolkit", "env"
    version: int | None  # cublasLtGetVersion(), e.g. 130100; None when it could not be read
    error: str | None = None

    @property
    def version_str(self) -> str:
        return version_string(self.version) if self.version is not None else "unknown"

    @property
    def usable(self) -> bool:
        return self.version is not None and self.error is None


def version_string(version: int) -> str:
    """130100 -> '13.1.0' (cuBLAS encodes major*10000 + minor*100 + patch)."""
    return f"{version // 10000}.{(version // 100) % 100}.{version % 100}"


def is_stub(path: str) -> bool:
    return "stubs" in Path(path).parts or "stubs" in Path(os.path.realpath(path)).parts


def _wheel_dirs() -> list[tuple[str, str]]:
    """(directory, source) for the nvidia namespace packages of pip wheels (no import of torch)."""
    out: list[tuple[str, str]] = []
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for sub, source in (
            ("cu13/lib", "torch-wheel"),
            ("cublas/lib", "nvidia-wheel"),
            ("cu12/lib", "nvidia-wheel"),
        ):
            out.append((os.path.join(root, sub), source))
    return out


def _toolkit_dirs() -> list[tuple[str, str]]:
    dirs: list[tuple[str, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        base = os.environ.get(var)
        if base:
            dirs += [(os.path.join(base, "lib64"), "env"), (os.path.join(base, "lib"), "env")]
    for base in sorted(glob.glob("/usr/local/cuda*")):
        dirs.append((os.path.join(base, "lib64"), "cuda-toolkit"))
        for tdir in sorted(glob.glob(os.path.join(base, "targets", "*", "lib"))):
            dirs.append((tdir, "cuda-toolkit"))
    dirs.append(("/usr/lib/x86_64-linux-gnu", "cuda-toolkit"))
    return dirs


def candidate_paths(extra_dirs: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(path, source) of every non-stub libcublasLt file found, first occurrence of each real file."""
    seen: set[str] = set()
    found: list[tuple[str, str]] = []
    for directory, source in [(d, "env") for d in extra_dirs] + _wheel_dirs() + _toolkit_dirs():
        if not os.path.isdir(directory) or is_stub(directory):
            continue
        for name in _NAMES:
            path = os.path.join(directory, name)
            if not os.path.isfile(path) or is_stub(path):
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            found.append((path, source))
    return found


def read_version(path: str) -> tuple[int | None, str | None]:
    """Load one file privately (RTLD_LOCAL) and call cublasLtGetVersion(); (version, error)."""
    try:
        lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
        fn = lib.cublasLtGetVersion
        fn.restype = ctypes.c_size_t
        fn.argtypes = []
        return int(fn()), None
    except (OSError, AttributeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def discover(extra_dirs: tuple[str, ...] = ()) -> tuple[CublasLtLibrary, ...]:
    """Every cuBLASLt library on this machine with its version; empty where there is none."""
    out = []
    for path, source in candidate_paths(extra_dirs):
        version, error = read_version(path)
        out.append(CublasLtLibrary(path, os.path.realpath(path), source, version, error))
    return tuple(out)


def distinct_versions(libs: tuple[CublasLtLibrary, ...]) -> tuple[CublasLtLibrary, ...]:
    """One usable library per version (the first found), in discovery order: the suite's axis."""
    seen: set[int] = set()
    out = []
    for lib in libs:
        if lib.usable and lib.version not in seen:
            assert lib.version is not None
            seen.add(lib.version)
            out.append(lib)
    return tuple(out)
