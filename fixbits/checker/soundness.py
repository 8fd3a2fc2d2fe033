"""The soundness gate's data: config spaces from YAML, cases, and the partition arithmetic.

Kept free of torch/triton so CPU tests can load and check it anywhere.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOUNDNESS_YAML = ROOT / "matrices" / "checker" / "soundness.yaml"
_LAUNCH_KEYS = ("num_warps", "num_stages")


@dataclass(frozen=True)
class Family:
    """One kernel of the gate with its dtypes and config spaces."""

    name: str
    module: str
    family: str
    dtypes: tuple[str, ...]
    pinned: tuple[bool, ...]
    shape: tuple[tuple[str, int], ...]
    space: tuple[tuple[str, tuple[int, ...]], ...]
    cpu_space: tuple[tuple[str, tuple[int, ...]], ...]
    launch_kwargs: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Case:
    """One compiled configuration: kernel, dtype, pinned or free, and the config point."""

    kernel: str
    dtype: str
    pinned: bool
    blocks: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    def label(self) -> str:
        b = ",".join(f"{k}={v}" for k, v in self.blocks)
        return f"{'pinned' if self.pinned else 'free'}:{b},w={self.num_warps},s={self.num_stages}"

    def group(self) -> tuple[str, str]:
        return (self.kernel, self.dtype)


def _err(path: Path, key: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {key}: {msg}")


def _space(path: Path, key: str, v: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    if not isinstance(v, dict) or not v:
        raise _err(path, key, "expected a mapping name -> list of positive ints")
    out = []
    for k, vals in v.items():
        if not isinstance(vals, list) or not vals or not all(isinstance(x, int) and x > 0 for x in vals):
            raise _err(path, f"{key}.{k}", f"expected a non-empty list of positive ints, got {vals!r}")
        out.append((str(k), tuple(vals)))
    return tuple(out)


def load_families(path: Path = SOUNDNESS_YAML) -> tuple[Family, ...]:
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("kernels"), dict):
        raise _err(path, "kernels", "missing mapping of kernel entries")
    out = []
    for name, e in data["kernels"].items():
        k = f"kernels.{name}"
        for req in ("module", "family", "dtypes", "shape", "space", "cpu_space"):
            if req not in e:
                raise _err(path, f"{k}.{req}", "missing")
        shape = e["shape"]
        if not isinstance(shape, dict) or not all(isinstance(x, int) and x > 0 for x in shape.values()):
            raise _err(path, f"{k}.shape", f"expected a mapping of positive ints, got {shape!r}")
        pinned = tuple(bool(p) for p in e.get("pinned", [False]))
        lk = e.get("launch_kwargs", {}) or {}
        if not isinstance(lk, dict):
            raise _err(path, f"{k}.launch_kwargs", "expected a mapping")
        out.append(
            Family(
                str(name),
                str(e["module"]),
                str(e["family"]),
                tuple(str(d) for d in e["dtypes"]),
                pinned,
                tuple((str(a), int(b)) for a, b in shape.items()),
                _space(path, f"{k}.space", e["space"]),
                _space(path, f"{k}.cpu_space", e["cpu_space"]),
                tuple(sorted(lk.items())),
            )
        )
    return tuple(out)


def gate_meta(path: Path = SOUNDNESS_YAML) -> dict[str, Any]:
    data = yaml.safe_load(Path(path).read_text())
    return {
        "kinds": tuple(data.get("kinds", ("ordinary", "wide"))),
        "seeds": tuple(data.get("seeds", (0,))),
        "cpu_targets": tuple(data.get("cpu_targets", ("sm_90",))),
    }


def cases(fam: Family, cpu: bool = False) -> list[Case]:
    space = fam.cpu_space if cpu else fam.space
    keys = [k for k, _ in space]
    out = []
    for dtype in fam.dtypes:
        for pinned in fam.pinned:
            for combo in itertools.product(*(v for _, v in space)):
                d = dict(zip(keys, combo, strict=False))
                blocks = tuple((k, d[k]) for k in keys if k not in _LAUNCH_KEYS)
                out.append(
                    Case(fam.name, dtype, pinned, blocks, d.get("num_warps", 4), d.get("num_stages", 1))
                )
    return out


def interleave(groups: Sequence[Sequence[Case]]) -> list[Case]:
    """Round-robin over groups, so a time budget cut leaves every group partly covered."""
    out: list[Case] = []
    for row in itertools.zip_longest(*groups):
        out.extend(c for c in row if c is not None)
    return out


@dataclass(frozen=True)
class GroupStats:
    """Partition of one (kernel, dtype) group: checker classes against true (byte) classes."""

    kernel: str
    dtype: str
    configs: int
    checker_classes: int
    true_classes: int | None
    false_equal_pairs: int | None
    impure_classes: int | None

    @property
    def over_split(self) -> float | None:
        if not self.true_classes:
            return None
        return self.checker_classes / self.true_classes


def partition(items: Iterable[tuple[str, str | None]]) -> tuple[int, int | None, int | None, int | None]:
    """From (checker digest, byte digest or None) per config: (checker classes, true classes,
    false-equal pairs, impure checker classes). A false-equal pair is two configs the checker
    certified equal whose bytes differ."""
    items = list(items)
    by_sig: dict[str, list[str | None]] = defaultdict(list)
    for sig, b in items:
        by_sig[sig].append(b)
    checker = len(by_sig)
    if any(b is None for _, b in items):
        return checker, None, None, None
    true = len({b for _, b in items})
    pairs = 0
    impure = 0
    for members in by_sig.values():
        counts: dict[str | None, int] = defaultdict(int)
        for b in members:
            counts[b] += 1
        n = len(members)
        same = sum(c * (c - 1) // 2 for c in counts.values())
        bad = n * (n - 1) // 2 - same
        pairs += bad
        impure += 1 if bad else 0
    return checker, true, pairs, impure


def device_cases(path: Path) -> list[dict[str, Any]]:
    """The per-config rows a device run wrote (runners/device/checker_soundness.py), from the
    .jsonl or its committed .jsonl.gz (kept compressed: the device call copies the whole tree)."""
    import gzip
    import json

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
