"""The corpus registry: which kernels, dtypes, shapes and config spaces (data in YAML).

matrices/enforcement/corpus.yaml holds the data; this module validates it and turns it into
frozen records, so a bad file fails with the file and key named.
"""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from fixbits.corpus.common import DTYPES, Config

ROOT = Path(__file__).resolve().parents[2]
CORPUS_YAML = ROOT / "matrices" / "enforcement" / "corpus.yaml"
BUDGETS_YAML = ROOT / "matrices" / "enforcement" / "budgets.yaml"
_LAUNCH_KEYS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus kernel: its module, dtypes, shapes and config space."""

    name: str
    module: str
    dtypes: tuple[str, ...]
    shape: tuple[tuple[str, int], ...]
    cpu_shape: tuple[tuple[str, int], ...]
    space: tuple[tuple[str, tuple[int, ...]], ...]
    explore: tuple[tuple[str, tuple[int, ...]], ...] = ()
    variants: tuple[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]], ...] = ()

    def variant_configs(self, name: str) -> tuple[Config, ...]:
        """Config space of a pinned variant (a kernel written for the tree, same bits)."""
        for n, sp in self.variants:
            if n == name:
                return self._product(sp)
        raise KeyError(f"{self.name}: no variant {name!r}; known: {[n for n, _ in self.variants]}")

    def load(self) -> ModuleType:
        """Import the kernel module (imports triton)."""
        return importlib.import_module(self.module)

    def configs(self, explore: bool = False) -> tuple[Config, ...]:
        """The config space (cartesian product); with explore=True, the wider exploration space
        (each axis widened by the `explore` values) after the official configs."""
        base = self._product(self.space)
        if not explore or not self.explore:
            return base
        extra = dict(self.explore)
        wide = tuple((k, tuple(sorted(set(v) | set(extra.get(k, ()))))) for k, v in self.space)
        seen = {c.label() for c in base}
        return base + tuple(c for c in self._product(wide) if c.label() not in seen)

    @staticmethod
    def _product(space: tuple[tuple[str, tuple[int, ...]], ...]) -> tuple[Config, ...]:
        keys = [k for k, _ in space]
        out = []
        for combo in itertools.product(*(v for _, v in space)):
            d = dict(zip(keys, combo, strict=True))
            blocks = tuple((k, d[k]) for k in keys if k not in _LAUNCH_KEYS)
            out.append(Config(blocks, d.get("num_warps", 4), d.get("num_stages", 1)))
        return tuple(out)

    def shape_dict(self, cpu: bool = False) -> dict[str, int]:
        return dict(self.cpu_shape if cpu else self.shape)


def _err(path: Path, key: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {key}: {msg}")


def _int_map(path: Path, key: str, v: Any) -> tuple[tuple[str, int], ...]:
    if not isinstance(v, dict) or not v or not all(isinstance(x, int) and x > 0 for x in v.values()):
        raise _err(path, key, f"expected a mapping of positive ints, got {v!r}")
    return tuple((str(k), int(x)) for k, x in v.items())


def load_corpus(path: Path = CORPUS_YAML) -> tuple[CorpusEntry, ...]:
    """All corpus entries, validated."""
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict):
        raise _err(path, "kernels", "missing mapping of kernel entries")
    out = []
    for name, e in data["kernels"].items():
        k = f"kernels.{name}"
        if not isinstance(e, dict):
            raise _err(path, k, "expected a mapping")
        for req in ("module", "dtypes", "shape", "cpu_shape", "space"):
            if req not in e:
                raise _err(path, f"{k}.{req}", "missing")
        dts = tuple(e["dtypes"])
        bad = [d for d in dts if d not in DTYPES]
        if bad:
            raise _err(path, f"{k}.dtypes", f"unknown {bad}; supported: {sorted(DTYPES)}")
        space = e["space"]
        if not isinstance(space, dict) or not space:
            raise _err(path, f"{k}.space", "expected a mapping name -> list of ints")
        sp = []
        for sk, sv in space.items():
            if not isinstance(sv, list) or not sv or not all(isinstance(x, int) and x > 0 for x in sv):
                raise _err(path, f"{k}.space.{sk}", f"expected a non-empty list of positive ints, got {sv!r}")
            if sk not in _LAUNCH_KEYS and any(x & (x - 1) for x in sv):
                raise _err(path, f"{k}.space.{sk}", f"block sizes must be powers of two, got {sv}")
            sp.append((str(sk), tuple(int(x) for x in sv)))
        ex = []
        for sk, sv in (e.get("explore") or {}).items():
            if sk not in space:
                raise _err(path, f"{k}.explore.{sk}", f"not an axis of space ({sorted(space)})")
            if not isinstance(sv, list) or not all(isinstance(x, int) and x > 0 for x in sv):
                raise _err(path, f"{k}.explore.{sk}", f"expected a list of positive ints, got {sv!r}")
            if sk not in _LAUNCH_KEYS and any(x & (x - 1) for x in sv):
                raise _err(path, f"{k}.explore.{sk}", f"block sizes must be powers of two, got {sv}")
            ex.append((str(sk), tuple(int(x) for x in sv)))
        vs = []
        for vn, vsp in (e.get("variants") or {}).items():
            if not isinstance(vsp, dict) or not vsp:
                raise _err(path, f"{k}.variants.{vn}", "expected a mapping name -> list of ints")
            axes = []
            for sk, sv in vsp.items():
                if not isinstance(sv, list) or not sv or not all(isinstance(x, int) and x > 0 for x in sv):
                    raise _err(path, f"{k}.variants.{vn}.{sk}", f"expected a non-empty list of positive ints, got {sv!r}")
                if sk not in _LAUNCH_KEYS and any(x & (x - 1) for x in sv):
                    raise _err(path, f"{k}.variants.{vn}.{sk}", f"block sizes must be powers of two, got {sv}")
                axes.append((str(sk), tuple(int(x) for x in sv)))
            vs.append((str(vn), tuple(axes)))
        out.append(CorpusEntry(str(name), str(e["module"]), dts, _int_map(path, f"{k}.shape", e["shape"]),
                               _int_map(path, f"{k}.cpu_shape", e["cpu_shape"]), tuple(sp), tuple(ex), tuple(vs)))
    return tuple(out)


def corpus_meta(path: Path = CORPUS_YAML) -> dict[str, Any]:
    data = yaml.safe_load(Path(path).read_text())
    return {"kinds": tuple(data.get("kinds", ("ordinary", "wide"))), "seeds": tuple(data.get("seeds", (0,)))}


def entry(name: str) -> CorpusEntry:
    for e in load_corpus():
        if e.name == name:
            return e
    raise KeyError(f"no corpus kernel {name!r}; known: {[e.name for e in load_corpus()]}")


def pairs() -> tuple[tuple[CorpusEntry, str], ...]:
    """Every (kernel, dtype) pair of the corpus."""
    return tuple((e, d) for e in load_corpus() for d in e.dtypes)


def budget(kernel: str, dtype: str, path: Path = BUDGETS_YAML) -> float:
    """Speed floor pinned/free for one pair: "kernel/dtype", then "kernel", then default."""
    data = yaml.safe_load(Path(path).read_text()) or {}
    if "default" not in data:
        raise _err(path, "default", "missing")
    ks = data.get("kernels") or {}
    v = ks.get(f"{kernel}/{dtype}", ks.get(kernel, data["default"]))
    if not isinstance(v, (int, float)) or not 0 < v <= 2:
        raise _err(path, f"kernels.{kernel}", f"budget must be a number in (0, 2], got {v!r}")
    return float(v)


def selected(only: list[str] | None, name: str, dtype: str) -> bool:
    """``--only`` filter of the device runners: items ``kernel`` or ``kernel:dtype``, space- or comma-separated."""
    if not only:
        return True
    items = [i.strip() for arg in only for i in arg.split(",") if i.strip()]
    return any(i == name or i == f"{name}:{dtype}" for i in items)
