"""The environment fingerprint: everything outside the code that can change a kernel's bytes.

A drift is only actionable once you know what moved underneath it: the GPU, the driver, the
CUDA runtime, the cuBLAS/cuBLASLt build, torch, triton. Every golden record and every failing
test carries this fingerprint, and ``diff()`` names the fields that changed between a recorded
run and this one (what ``fixbits gate`` reports). Every probe degrades to ``None``: a CPU-only
machine without torch still gets a fingerprint.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import socket
from dataclasses import dataclass
from typing import Any

import yaml

# Fields that describe where a run happened rather than what computed it: excluded from the hash.
_NOT_HASHED = ("host",)


@dataclass(frozen=True)
class EnvFingerprint:
    """What this process computes with. ``None`` means 'absent or unknowable here'."""

    gpu_name: str | None = None
    sm: str | None = None  # 'sm_90', 'gfx942'
    sm_count: int | None = None
    driver: str | None = None  # kernel driver release, and the CUDA version it supports
    cuda_runtime: str | None = None  # the runtime torch was built against (or HIP)
    cublas: str | None = None
    cublaslt: str | None = None
    torch: str | None = None
    triton: str | None = None
    numpy: str | None = None
    python: str = ""
    host: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "fingerprint") -> EnvFingerprint:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**data)

    @property
    def short_hash(self) -> str:
        """12 hex digits over every field but the host name: equal stacks hash equal."""
        d = {k: v for k, v in self.to_dict().items() if k not in _NOT_HASHED}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]

    def diff(self, other: EnvFingerprint) -> list[str]:
        """Names of the fields whose values differ (host included), in field order."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def describe_diff(self, other: EnvFingerprint) -> list[str]:
        """'cublaslt: 13.0.2 -> 13.1.0' lines for each changed field."""
        return [f"{name}: {getattr(self, name)} -> {getattr(other, name)}" for name in self.diff(other)]

    def libraries(self) -> tuple[tuple[str, str], ...]:
        """(name, version) of the libraries that decide bits, for drift reports."""
        pairs = (
            ("cublaslt", self.cublaslt),
            ("cuda", self.cuda_runtime),
            ("torch", self.torch),
            ("triton", self.triton),
            ("driver", self.driver),
        )
        return tuple((k, v) for k, v in pairs if v)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {}
    try:
        import torch
    except Exception:
        return facts
    facts["torch"] = str(torch.__version__)
    hip = getattr(torch.version, "hip", None)
    facts["cuda_runtime"] = f"hip {hip}" if hip else (torch.version.cuda or None)
    try:
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts["gpu_name"] = str(props.name)
            facts["sm_count"] = int(props.multi_processor_count)
            if hip:
                facts["sm"] = str(getattr(props, "gcnArchName", "")).split(":")[0] or None
            else:
                facts["sm"] = f"sm_{props.major}{props.minor}"
    except Exception:  # a broken driver is a fact about the machine, not a reason to crash
        pass
    return facts


def parse_driver_release(line: str) -> str | None:
    """The release number in /proc/driver/nvidia/version's first line, whatever its wording."""
    found = re.search(r"\s(\d+\.\d+(?:\.\d+)?)(?:\s|$)", line)
    return found.group(1) if found else None


def _driver() -> str | None:
    release = None
    try:
        with open("/proc/driver/nvidia/version") as fh:
            first = fh.readline()
        # 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ...' or, for the open
        # modules, '... Open Kernel Module for x86_64  580.159.04  Release Build ...': take the
        # first dotted release number, wherever the wording puts it.
        release = parse_driver_release(first)
    except OSError:
        pass
    api = None
    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value:
            api = f"{v.value // 1000}.{(v.value % 1000) // 10}"
    except (OSError, AttributeError):
        pass
    if release and api:
        return f"{release} (CUDA {api})"
    return release or (f"CUDA {api}" if api else None)


def _mapped_paths(fragment: str) -> set[str]:
    """Real paths of the shared objects mapped into this process whose name contains ``fragment``."""
    try:
        with open("/proc/self/maps") as fh:
            return {os.path.realpath(line.split()[-1]) for line in fh if fragment in line and "/" in line}
    except OSError:
        return set()


def _cublas_versions() -> tuple[str | None, str | None]:
    """(cuBLAS, cuBLASLt) versions of the first usable library the cuBLAS helper discovers."""
    try:
        from fixbits.cublas.lib import discover, version_string
    except ImportError:
        return None, None
    try:
        libs = [lib for lib in discover() if lib.usable]
    except Exception:
        return None, None
    if not libs:
        return None, None
    loaded = _mapped_paths("libcublasLt")  # the copy this process already uses (torch's) comes first
    lt = next((lib for lib in libs if lib.realpath in loaded), libs[0])
    lt_version = version_string(lt.version) if lt.version is not None else None
    cublas = None
    sibling = os.path.join(os.path.dirname(lt.path), os.path.basename(lt.path).replace("cublasLt", "cublas"))
    try:
        lib = ctypes.CDLL(sibling, mode=getattr(os, "RTLD_LOCAL", 0))
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            v = ctypes.c_int(0)
            if lib.cublasGetProperty(prop, ctypes.byref(v)) != 0:
                raise OSError("cublasGetProperty failed")
            parts.append(str(v.value))
        cublas = ".".join(parts)
    except (OSError, AttributeError):
        pass
    return cublas, lt_version


def collect() -> EnvFingerprint:
    """Probe this process's environment now (no caching)."""
    facts = _torch_facts()
    cublas, cublaslt = _cublas_versions()
    return EnvFingerprint(
        gpu_name=facts.get("gpu_name"),
        sm=facts.get("sm"),
        sm_count=facts.get("sm_count"),
        driver=_driver(),
        cuda_runtime=facts.get("cuda_runtime"),
        cublas=cublas,
        cublaslt=cublaslt,
        torch=facts.get("torch"),
        triton=_dist_version("triton"),
        numpy=_dist_version("numpy"),
        python=platform.python_version(),
        host=socket.gethostname(),
    )


@functools.cache
def fingerprint() -> EnvFingerprint:
    """This process's fingerprint, probed once (the environment does not change under a run)."""
    return collect()


# -- `fixbits env` --------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml", help="output format")
    parser.add_argument("--hash", action="store_true", help="print only the short hash")


def run(args: argparse.Namespace) -> int:
    fp = fingerprint()
    if args.hash:
        print(fp.short_hash)
        return 0
    data = {"hash": fp.short_hash, **fp.to_dict()}
    print(
        json.dumps(data, indent=2) if args.format == "json" else yaml.safe_dump(data, sort_keys=False), end=""
    )
    if args.format == "json":
        print()
    return 0
