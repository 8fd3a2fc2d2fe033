"""GPU timing of pinned vs free order: same configs, same inputs, same process (GPU only).

Each config is launched from a CUDA graph holding one launch per rotating input copy (so L2
does not serve a repeated input), timed with CUDA events over many replays; the median per
launch is kept. A mode's time is its best config (autotuning over the same space); pinned and
free are measured interleaved, config by config, so clock drift hits both alike.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from fixbits.corpus.common import Config, to_device
from fixbits.corpus.registry import CorpusEntry


@dataclass(frozen=True)
class ModeTiming:
    """Best config of one mode and its median time per launch (microseconds)."""

    mode: str
    best_config: str
    best_us: float
    per_config_us: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class SpeedResult:
    """Pinned vs free for one (kernel, dtype): ratio = free_us / pinned_us (>= 1 is pinned faster)."""

    kernel: str
    dtype: str
    pinned: ModeTiming
    free: ModeTiming
    ratio: float
    spread: float
    rounds: tuple[float, ...]
    errors: tuple[str, ...]
    auto_ratio: float = float("nan")  # free / best pinned config of the automatic rewrite alone


def _time_graph(fn: Any, n_inner: int, reps: int) -> float:
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()  # compile + warm
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / n_inner)
    return statistics.median(times)


def measure_pair(entry: CorpusEntry, dtype: str, *, rounds: int = 3, reps: int = 30, rotate: int = 4,
                 configs: tuple[Config, ...] | None = None, seed: int = 0, log: Any = None,
                 with_variants: bool = True) -> SpeedResult:
    """Autotune both modes over the same configs; repeat `rounds` times; ratio = median of rounds.

    Pinned mode also autotunes over the entry's pinned variants (same bytes, checked by the
    suite); a variant's label is ``name:config``. ``auto_ratio`` uses the rewrite's configs only.
    """
    mod = entry.load()
    shape = entry.shape_dict()
    copies = [{k: to_device(v, "cuda") for k, v in mod.make_inputs(shape, dtype, "ordinary", seed + i).items()}
              for i in range(rotate)]
    cfgs = configs if configs is not None else entry.configs()
    jobs: list[tuple[str, Any, Config, str]] = []  # (mode, launch pinned=, config, label)
    for cfg in cfgs:
        jobs.append(("pinned", True, cfg, cfg.label()))
        jobs.append(("free", False, cfg, cfg.label()))
    if configs is None and with_variants:
        for vname, _ in entry.variants:
            jobs += [("pinned", vname, c, f"{vname}:{c.label()}") for c in entry.variant_configs(vname)]
    errors: list[str] = []
    per: dict[str, dict[str, list[float]]] = {"pinned": {}, "free": {}}
    ratios: list[float] = []
    for _r in range(rounds):
        best = {"pinned": float("inf"), "free": float("inf")}
        for mode, how, cfg, label in jobs:

            def fn(how: Any = how, cfg: Config = cfg) -> None:
                for c in copies:
                    mod.launch(c, shape, cfg, how, aux=False)

            try:
                us = _time_graph(fn, rotate, reps)
            except Exception as e:  # reported, the rest go on
                msg = f"{mode} {label}: {type(e).__name__}: {str(e).splitlines()[:3]}"
                if msg not in errors:
                    errors.append(msg)
                    if log is not None:
                        log(f"  timing error {entry.name}/{dtype} {msg}")
                continue
            per[mode].setdefault(label, []).append(us)
            best[mode] = min(best[mode], us)
        if best["pinned"] < float("inf") and best["free"] < float("inf"):
            ratios.append(best["free"] / best["pinned"])

    def summarise(mode: str) -> ModeTiming:
        med = {k: statistics.median(v) for k, v in per[mode].items()}
        if not med:
            return ModeTiming(mode, "", float("nan"), ())
        k = min(med, key=med.__getitem__)
        return ModeTiming(mode, k, med[k], tuple(sorted(med.items())))

    p, f = summarise("pinned"), summarise("free")
    ratio = statistics.median(ratios) if ratios else float("nan")
    spread = (max(ratios) - min(ratios)) if ratios else float("nan")
    auto = [statistics.median(v) for k, v in per["pinned"].items() if ":" not in k]
    auto_ratio = f.best_us / min(auto) if auto and f.best_us == f.best_us else float("nan")
    return SpeedResult(entry.name, dtype, p, f, ratio, spread, tuple(ratios), tuple(errors), auto_ratio)
