"""Autotune spaces (matrices/kernels/*.yaml) and the tuned configs, per shape.

Tuning only ever picks among speed knobs (every config of a family returns the same bytes).
A shape's candidates are its M class's space entries whose ``when`` conditions (N, K, M
ranges) hold, the way triton.autotune keys on (M, N, K); the winner is kept per
(family, dtypes, M, N, K) and may be saved to / loaded from JSON (``save_tuned``,
``load_tuned``; matrices/kernels/tuned/*.json are loaded on first use).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fixbits.kernels._host import KernelConfig

SPACE_DIR = Path(__file__).resolve().parents[2] / "matrices" / "kernels"


@dataclass(frozen=True)
class When:
    """Inclusive bounds a shape must meet for a space entry to be one of its candidates."""

    min_m: int = 0
    max_m: int | None = None
    min_n: int = 0
    max_n: int | None = None
    min_k: int = 0
    max_k: int | None = None
    # input dtypes the entry is for (empty: all); such an entry never holds for an unnamed dtype
    in_dtypes: tuple[str, ...] = ()

    def for_dtype(self, in_dtype: str | None) -> bool:
        return not self.in_dtypes or in_dtype in self.in_dtypes

    def holds(self, m: int, n: int, k: int, in_dtype: str | None = None) -> bool:
        if not self.for_dtype(in_dtype):
            return False
        return all(
            v >= lo and (hi is None or v <= hi)
            for v, lo, hi in (
                (m, self.min_m, self.max_m),
                (n, self.min_n, self.max_n),
                (k, self.min_k, self.max_k),
            )
        )


@dataclass(frozen=True)
class SizeClass:
    name: str
    max_m: int | None
    default: KernelConfig
    space: tuple[KernelConfig, ...]
    when: tuple[When, ...] = ()  # one per space entry
    # (input dtype, default) pairs: an untuned call of that input dtype runs this instead
    dtype_defaults: tuple[tuple[str, KernelConfig], ...] = ()

    def default_for(self, in_dtype: str | None = None) -> KernelConfig:
        for dt, cfg in self.dtype_defaults:
            if dt == in_dtype:
                return cfg
        return self.default

    def space_for(self, in_dtype: str | None = None) -> tuple[KernelConfig, ...]:
        """Every entry an input dtype may use, whatever the shape."""
        whens = self.when or (When(),) * len(self.space)
        return tuple(c for c, w in zip(self.space, whens, strict=True) if w.for_dtype(in_dtype))


def _when(raw: dict[str, Any] | None) -> When:
    raw = dict(raw or {})
    dts = raw.pop("in_dtypes", ())
    if isinstance(dts, str) or not all(isinstance(d, str) for d in dts):
        raise TypeError(f"in_dtypes must be a list of dtype names, got {dts!r}")
    return When(**{k: int(v) for k, v in raw.items()}, in_dtypes=tuple(dts))


def _load(name: str) -> dict[str, Any]:
    path = SPACE_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"autotune space {path} is missing") from exc
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
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
            entries = [dict(e) for e in c["space"]]
            whens = tuple(_when(e.pop("when", None)) for e in entries)
            out.append(
                SizeClass(
                    name=str(c["name"]),
                    max_m=c.get("max_m"),
                    default=KernelConfig.from_dict(c["default"], where=f"{where}.default"),
                    space=tuple(KernelConfig.from_dict(e, where=f"{where}.space") for e in entries),
                    when=whens,
                    dtype_defaults=tuple(
                        (str(dt), KernelConfig.from_dict(d, where=f"{where}.dtype_defaults.{dt}"))
                        for dt, d in (c.get("dtype_defaults") or {}).items()
                    ),
                )
            )
        except KeyError as exc:
            raise ValueError(f"{where}: missing key {exc}") from exc
        except TypeError as exc:
            raise ValueError(f"{where}: bad `when` ({exc})") from exc
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


def shape_space(
    m: int, n: int, k: int, limit: int = 0, in_dtype: str | None = None
) -> tuple[KernelConfig, ...]:
    """The candidates of one shape: its class's entries whose ``when`` holds, in file order
    (the first ``limit`` when limit > 0); the class default when none holds."""
    cls = size_class(m)
    seen: set[str] = set()
    out = []
    for cfg, w in zip(cls.space, cls.when or (When(),) * len(cls.space), strict=True):
        if w.holds(m, n, k, in_dtype) and cfg.label() not in seen:
            seen.add(cfg.label())
            out.append(cfg)
    if limit > 0:
        out = out[:limit]
    return tuple(out) or (cls.default_for(in_dtype),)


def candidates(
    m: int, n: int, k: int, limit: int = 0, seeds: tuple[KernelConfig, ...] = (), in_dtype: str | None = None
) -> tuple[KernelConfig, ...]:
    """What ``tune`` times for a shape: ``seeds`` (earlier winners) first, each followed by its
    TMA-store twin (the same tile with the output written by TMA: winners tuned before the knob
    existed get to compete with it), then shape_space."""
    out = [x for c in seeds for x in (c, *_store_twin(c))]
    seen = {c.label() for c in out}
    for c in shape_space(m, n, k, limit, in_dtype):
        if c.label() not in seen:
            seen.add(c.label())
            out.append(c)
    return tuple(out)


def _store_twin(c: KernelConfig) -> tuple[KernelConfig, ...]:
    if c.SWAP_AB or c.TMA_STORE:  # a swapped call writes C^T: the masked store
        return ()
    return (dataclasses.replace(c, USE_TMA=1, TMA_STORE=1),)


def load_seeds(path: Path) -> dict[tuple[int, int, int], KernelConfig]:
    """(m, n, k) -> winner of a save_tuned file (to time first, without recording it)."""
    import json

    data = json.loads(Path(path).read_text())
    return {
        (int(e["m"]), int(e["n"]), int(e["k"])): KernelConfig.from_dict(
            e["config"], where=f"{path}: entries[{i}]"
        )
        for i, e in enumerate(data.get("entries", []))
    }


class _State:
    """Per-shape winners; ``generation`` moves whenever one is recorded, so callers that cache
    a config (fixbits.matmul's launch cache) see a new tuning result."""

    generation = 0
    loaded = False


STATE = _State()
_SHAPE_BEST: dict[tuple[Any, ...], KernelConfig] = {}
_SHAPE_TIMES: dict[tuple[Any, ...], dict[str, float]] = {}
TUNED_DIR = SPACE_DIR / "tuned"


def record(
    key: tuple[Any, ...], m: int, n: int, k: int, cfg: KernelConfig, times: dict[str, float] | None = None
) -> None:
    _SHAPE_BEST[(*key, m, n, k)] = cfg
    if times is not None:
        _SHAPE_TIMES[(*key, m, n, k)] = dict(times)
    STATE.generation += 1


def best_config(key: tuple[Any, ...], m: int, n: int | None = None, k: int | None = None) -> KernelConfig:
    """The tuned config of this exact shape if one is known, else the M class's default."""
    if not STATE.loaded:
        _load_default_files()
    if n is not None and k is not None:
        hit = _SHAPE_BEST.get((*key, m, n, k))
        if hit is not None:
            return hit
    return size_class(m).default_for(_in_dtype(key))


def _in_dtype(key: tuple[Any, ...]) -> str | None:
    """The input dtype of a tuning key (family, in_dtype, out_dtype, ...), if it names one."""
    return key[1] if len(key) > 1 and isinstance(key[1], str) else None


def tuned(key: tuple[Any, ...], m: int, n: int, k: int) -> KernelConfig | None:
    return _SHAPE_BEST.get((*key, m, n, k))


def tune(
    key: tuple[Any, ...],
    m: int,
    run: Callable[[KernelConfig], float],
    n: int | None = None,
    k: int | None = None,
    *,
    limit: int = 0,
    deadline: float | None = None,
    seeds: tuple[KernelConfig, ...] = (),
) -> tuple[KernelConfig, dict[str, float]]:
    """Time ``run(cfg)`` (ms) for each candidate of the shape once; remember and return the best.

    A shape already tuned returns at once (empty times). ``seeds`` are timed first (see
    ``candidates``). ``deadline`` (time.monotonic()):
    candidates after it are skipped, the best so far wins. Without n and k the M class's
    whole space is timed and the result is not recorded (nothing to key it on).
    """
    import time

    if n is not None and k is not None and (*key, m, n, k) in _SHAPE_BEST:
        return _SHAPE_BEST[(*key, m, n, k)], {}
    dt = _in_dtype(key)
    space = candidates(m, n, k, limit, seeds, dt) if n is not None and k is not None else size_class(m).space_for(dt)
    times: dict[str, float] = {}
    best, best_t = size_class(m).default_for(dt), float("inf")
    for cfg in space:
        if deadline is not None and times and time.monotonic() > deadline:
            break
        try:
            t = run(cfg)
        except Exception as exc:  # a config that fails to compile is skipped, and reported
            times[cfg.label()] = float("nan")
            print(f"[tune] {cfg.label()} failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        times[cfg.label()] = t
        if t < best_t:
            best, best_t = cfg, t
    if n is not None and k is not None and best_t < float("inf"):
        record(key, m, n, k, best, times)
    return best, times


def save_tuned(path: Path, meta: dict[str, Any] | None = None) -> None:
    """All per-shape winners (and the candidate times) as JSON; written atomically."""
    import json
    import os

    entries = []
    for full, cfg in sorted(_SHAPE_BEST.items(), key=lambda kv: tuple(map(str, kv[0]))):
        *key, m, n, k = full
        entries.append({"key": list(key), "m": m, "n": n, "k": k, "config": cfg.to_dict(),
                        "times_ms": _SHAPE_TIMES.get(full, {})})  # fmt: skip
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({"meta": meta or {}, "entries": entries}, indent=1) + "\n")
    os.replace(tmp, path)


def load_tuned(path: Path) -> int:
    """Record every entry of a save_tuned file; returns how many."""
    import json

    data = json.loads(Path(path).read_text())
    n = 0
    for i, e in enumerate(data.get("entries", [])):
        cfg = KernelConfig.from_dict(e["config"], where=f"{path}: entries[{i}].config")
        _SHAPE_BEST[(*e["key"], int(e["m"]), int(e["n"]), int(e["k"]))] = cfg
        n += 1
    STATE.generation += 1
    return n


def _load_default_files() -> None:
    STATE.loaded = True
    if TUNED_DIR.is_dir():
        for p in sorted(TUNED_DIR.glob("*.json")):
            load_tuned(p)


def clear_tuned() -> None:
    """Forget every winner (tests)."""
    _SHAPE_BEST.clear()
    _SHAPE_TIMES.clear()
    STATE.loaded = True
    STATE.generation += 1
