"""Autotune spaces (matrices/kernels/*.yaml) and a per-size-class cache of the best config.

Tuning only ever picks among speed knobs; a class is tuned once (the first shape seen in
it) so the cost is bounded by classes x space, not by shapes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fixbits.kernels._host import KernelConfig

SPACE_DIR = Path(__file__).resolve().parents[2] / "matrices" / "kernels"


@dataclass(frozen=True)
class SizeClass:
    name: str
    max_m: int | None
    default: KernelConfig
    space: tuple[KernelConfig, ...]


def _load(name: str) -> dict[str, Any]:
    path = SPACE_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"autotune space {path} is missing") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at top level")
    return data


@functools.cache
def tensor_core_classes() -> tuple[SizeClass, ...]:
    """Parsed once per process: matmul() consults it on every call."""
    data = _load("tensor_core")
    out = []
    for i, c in enumerate(data.get("classes", [])):
        where = f"matrices/kernels/tensor_core.yaml: classes[{i}]"
        try:
            out.append(
                SizeClass(
                    name=str(c["name"]),
                    max_m=c.get("max_m"),
                    default=KernelConfig.from_dict(c["default"], where=f"{where}.default"),
                    space=tuple(KernelConfig.from_dict(s, where=f"{where}.space") for s in c["space"]),
                )
            )
        except KeyError as exc:
            raise ValueError(f"{where}: missing key {exc}") from exc
    return tuple(out)


def equivalence_space(name: str) -> list[dict[str, int]]:
    """The configs a family's equivalence check runs (raw dicts: scalar knobs differ)."""
    return list(_load(name).get("equivalence", []))


@functools.lru_cache(maxsize=4096)
def size_class(m: int) -> SizeClass:
    for c in tensor_core_classes():
        if c.max_m is None or m <= c.max_m:
            return c
    raise ValueError("matrices/kernels/tensor_core.yaml: no class with max_m null (catch-all)")


_BEST: dict[tuple[Any, ...], KernelConfig] = {}


def grid_bucket(m: int, n: int | None) -> int:
    """0: a small output (under two waves of 64x64 tiles on 132 SMs) that wants thin tiles; 1: else."""
    if n is None:
        return 1
    return int(-(-m // 64) * -(-n // 64) >= 264)


def best_config(key: tuple[Any, ...], m: int, n: int | None = None) -> KernelConfig:
    """A tuned config for this class key if one was recorded, else the class default."""
    cls = size_class(m)
    return _BEST.get((cls.name, grid_bucket(m, n), *key), cls.default)


def tune(
    key: tuple[Any, ...], m: int, run: Callable[[KernelConfig], float], n: int | None = None
) -> tuple[KernelConfig, dict[str, float]]:
    """Time ``run(cfg)`` (ms) for each config of m's class once; remember and return the best."""
    cls = size_class(m)
    full = (cls.name, grid_bucket(m, n), *key)
    if full in _BEST:
        return _BEST[full], {}
    times: dict[str, float] = {}
    best, best_t = cls.default, float("inf")
    for cfg in cls.space:
        try:
            t = run(cfg)
        except Exception as exc:  # a config that fails to compile is skipped, and reported
            times[cfg.label()] = float("nan")
            print(f"[tune] {cls.name} {cfg.label()} failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        times[cfg.label()] = t
        if t < best_t:
            best, best_t = cfg, t
    _BEST[full] = best
    return best, times
