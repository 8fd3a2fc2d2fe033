"""The arch × dtype × library-version matrices under matrices/, loaded and validated.

Test data lives in YAML so that adding an architecture or a cuBLAS release is a data change
reviewed as such. A malformed file must fail loudly and point at the line's key, e.g.
``matrices/x.yaml: key 'dtypes[2]': 'fp7' is not one of fp16, bf16, fp8_e4m3``, because a
silently ignored matrix entry is a gate that silently stopped testing something.

Files: ``arch.yaml`` (each architecture's vendor, instruction families, dtypes, warp size),
``libraries.yaml`` (the cuBLAS/cuBLASLt and Triton versions fixbits knows), and run matrices
(``pr.yaml``, ``nightly.yaml``: which archs, dtypes and library versions a CI job covers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
MATRICES_DIR = REPO_ROOT / "matrices"
VENDORS: tuple[str, ...] = ("nvidia", "amd")
INSTRUCTION_FAMILIES: tuple[str, ...] = ("mma", "wgmma", "tcgen05", "mfma", "fma")
DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2")
RUN_DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp8_e4m3")
MODES: tuple[str, ...] = ("quick", "full", "fuzz")
_VERSION = re.compile(r"^\d+(\.\d+){0,3}$")


class MatrixError(ValueError):
    """A matrix file is malformed; the message names the file, the key and what is allowed."""


def display_path(path: Path | str) -> str:
    """'matrices/x.yaml' for files in this repository, the path as given otherwise."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


class Reader:
    """Typed access to one parsed YAML document, raising MatrixError with file and key."""

    def __init__(self, path: Path | str, data: Any = None) -> None:
        self.where = display_path(path)
        if data is None:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise MatrixError(f"{self.where}: cannot read ({exc.strerror})") from None
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise MatrixError(f"{self.where}: not valid YAML: {exc}") from None
        self.data = data

    def error(self, key: str, message: str) -> MatrixError:
        return MatrixError(f"{self.where}: key '{key}': {message}")

    def mapping(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {type(value).__name__}")
        return value

    def sequence(self, value: Any, key: str) -> Sequence[Any]:
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {type(value).__name__}")
        return value

    def get(
        self,
        m: Mapping[str, Any],
        name: str,
        key: str,
        *,
        default: Any = ...,
    ) -> Any:
        if name not in m:
            if default is ...:
                raise self.error(f"{key}.{name}" if key else name, "missing")
            return default
        return m[name]

    def only_keys(self, m: Mapping[str, Any], allowed: Iterable[str], key: str) -> None:
        allowed = tuple(allowed)
        for k in m:
            if k not in allowed:
                raise self.error(f"{key}.{k}" if key else str(k), f"unknown key; known: {', '.join(allowed)}")

    def choice(self, value: Any, allowed: Sequence[str], key: str) -> str:
        if value not in allowed:
            raise self.error(key, f"{value!r} is not one of {', '.join(allowed)}")
        return str(value)

    def choices(self, value: Any, allowed: Sequence[str], key: str) -> tuple[str, ...]:
        seq = self.sequence(value, key)
        return tuple(self.choice(v, allowed, f"{key}[{i}]") for i, v in enumerate(seq))

    def integer(self, value: Any, key: str, *, minimum: int | None = None) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"{value!r} is not an integer")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{value} is below the minimum {minimum}")
        return value

    def version(self, value: Any, key: str) -> str:
        text = str(value)
        if not _VERSION.match(text):
            raise self.error(key, f"{value!r} is not a version like 13.1.0")
        return text


# -- arch.yaml --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchInfo:
    """One architecture: what a gate on it can exercise."""

    name: str
    vendor: str
    instructions: tuple[str, ...]
    dtypes: tuple[str, ...]
    warp_size: int
    description: str = ""


def _warp_size(r: Reader, value: Any, key: str) -> int:
    if value not in (32, 64) or isinstance(value, bool):
        raise r.error(key, f"{value!r} is not one of 32, 64")
    return int(value)


def load_arches(path: Path | str | None = None) -> dict[str, ArchInfo]:
    from fixbits.predicates import ARCHES

    r = Reader(path or MATRICES_DIR / "arch.yaml")
    top = r.mapping(r.data, "(top level)")
    r.only_keys(top, ("archs",), "")
    archs = r.mapping(r.get(top, "archs", ""), "archs")
    out: dict[str, ArchInfo] = {}
    for name, spec in archs.items():
        key = f"archs.{name}"
        r.choice(name, ARCHES, key)
        m = r.mapping(spec, key)
        r.only_keys(m, ("vendor", "instructions", "dtypes", "warp_size", "description"), key)
        vendor = r.choice(r.get(m, "vendor", key), VENDORS, f"{key}.vendor")
        expected_vendor = "amd" if name.startswith("gfx") else "nvidia"
        if vendor != expected_vendor:
            raise r.error(
                f"{key}.vendor", f"{vendor!r} does not match the arch (expected {expected_vendor!r})"
            )
        out[name] = ArchInfo(
            name=name,
            vendor=vendor,
            instructions=r.choices(
                r.get(m, "instructions", key), INSTRUCTION_FAMILIES, f"{key}.instructions"
            ),
            dtypes=r.choices(r.get(m, "dtypes", key), DTYPES, f"{key}.dtypes"),
            warp_size=_warp_size(r, r.get(m, "warp_size", key), f"{key}.warp_size"),
            description=str(m.get("description", "")),
        )
    return out


# -- libraries.yaml ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryVersions:
    """The library versions fixbits has profiles or known behaviour for."""

    cublas: tuple[str, ...]
    triton: tuple[str, ...]
    torch: tuple[str, ...]

    def knows_cublas(self, version: str) -> bool:
        return any(
            version == v or version.startswith(v + ".") or v.startswith(version + ".") for v in self.cublas
        )


def load_libraries(path: Path | str | None = None) -> LibraryVersions:
    r = Reader(path or MATRICES_DIR / "libraries.yaml")
    top = r.mapping(r.data, "(top level)")
    r.only_keys(top, ("cublas", "triton", "torch"), "")

    def versions(name: str) -> tuple[str, ...]:
        seq = r.sequence(r.get(top, name, ""), name)
        return tuple(r.version(v, f"{name}[{i}]") for i, v in enumerate(seq))

    return LibraryVersions(cublas=versions("cublas"), triton=versions("triton"), torch=versions("torch"))


# -- run matrices (pr.yaml, nightly.yaml) ------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One (arch, dtype, cuBLAS version) combination a job covers."""

    arch: str
    dtype: str
    cublas: str


@dataclass(frozen=True)
class RunMatrix:
    """Which archs × dtypes × library versions one CI job covers, and how deep (mode)."""

    name: str
    archs: tuple[str, ...]
    dtypes: tuple[str, ...]
    cublas: tuple[str, ...]
    mode: str
    fuzz_count: int = 0
    max_elements: int | None = None

    def cells(self, arches: Mapping[str, ArchInfo] | None = None) -> list[Cell]:
        """Every combination; with ``arches`` (arch.yaml), only dtypes the arch supports."""
        return [
            Cell(a, d, c)
            for a in self.archs
            for d in self.dtypes
            if arches is None or a not in arches or d in arches[a].dtypes
            for c in self.cublas
            if c == "installed" or a in arches_nvidia(arches, a)
        ]

    def restrict(self, *, arch: str | None = None, dtypes: Iterable[str] | None = None) -> RunMatrix:
        """The part of the matrix the session selected (--arch, --dtype); arch None keeps all."""
        from dataclasses import replace

        keep_dtypes = tuple(d for d in self.dtypes if dtypes is None or d in tuple(dtypes))
        keep_archs = self.archs if arch is None else tuple(a for a in self.archs if a == arch)
        return replace(self, archs=keep_archs, dtypes=keep_dtypes)


def arches_nvidia(arches: Mapping[str, ArchInfo] | None, arch: str) -> tuple[str, ...]:
    """(arch,) when a cuBLAS version axis applies to it (NVIDIA), else ()."""
    if arches is not None and arch in arches:
        return (arch,) if arches[arch].vendor == "nvidia" else ()
    return () if arch.startswith("gfx") else (arch,)


def load_run_matrix(path: Path | str) -> RunMatrix:
    from fixbits.predicates import ARCHES

    r = Reader(path)
    top = r.mapping(r.data, "(top level)")
    r.only_keys(top, ("name", "archs", "dtypes", "cublas", "mode", "fuzz_count", "max_elements"), "")
    cublas_seq = r.sequence(r.get(top, "cublas", "", default=["installed"]), "cublas")
    cublas = tuple(
        "installed" if v == "installed" else r.version(v, f"cublas[{i}]") for i, v in enumerate(cublas_seq)
    )
    max_el = top.get("max_elements")
    return RunMatrix(
        name=str(top.get("name", Path(path).stem)),
        archs=r.choices(r.get(top, "archs", ""), ARCHES, "archs"),
        dtypes=r.choices(r.get(top, "dtypes", ""), RUN_DTYPES, "dtypes"),
        cublas=cublas,
        mode=r.choice(r.get(top, "mode", "", default="quick"), MODES, "mode"),
        fuzz_count=r.integer(top.get("fuzz_count", 0), "fuzz_count", minimum=0),
        max_elements=None if max_el is None else r.integer(max_el, "max_elements", minimum=1),
    )


def check_consistency(
    run: RunMatrix, arches: Mapping[str, ArchInfo], libraries: LibraryVersions, *, where: str
) -> list[str]:
    """Problems between a run matrix and arch.yaml/libraries.yaml (empty when consistent)."""
    problems = []
    for a in run.archs:
        if a not in arches:
            problems.append(f"{where}: arch {a!r} is not described in matrices/arch.yaml")
            continue
    for c in run.cublas:
        if c != "installed" and not libraries.knows_cublas(c):
            problems.append(f"{where}: cuBLAS {c} is not listed in matrices/libraries.yaml")
    return problems
