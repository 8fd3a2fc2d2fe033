"""Timing of pinned vs free order: same inputs, same process, each mode autotuned over its space.

Why two stages: a pair has 20-40 configs (free space, pinned space and the pinned variants'
own spaces); timing each one many times would not fit a device call. Stage 1 (the autotune)
times every config a few replays and keeps the fastest few per mode; stage 2 times those
finalists interleaved, many replays per round, and repeats rounds until the spread of the
pinned/free ratio is small (or the pair's time slice ends). Each launch sequence is a CUDA graph
that cycles over enough input copies to outgrow L2, timed replay by replay with CUDA events; a
round keeps the median per launch. The same code serves the benchmark and the perf suite.

On CPU (``device="cpu"``, under TRITON_INTERPRET=1) wall-clock timing of plain calls stands in
for the graphs, so the whole pipeline can be tested without a GPU; those numbers mean nothing.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fixbits.corpus.common import Config, to_device
from fixbits.corpus.registry import CorpusEntry

_L2_FALLBACK = 50 * 2**20


@dataclass(frozen=True)
class ModeTiming:
    """Best config of one mode, its median time per launch (us), and the stage-1 time of every config."""

    mode: str
    best_config: str
    best_us: float
    per_config_us: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class SpeedResult:
    """Pinned vs free for one (kernel, dtype): ratio = free_us / pinned_us (>= 1: pinned as fast)."""

    kernel: str
    dtype: str
    pinned: ModeTiming
    free: ModeTiming
    ratio: float
    spread: float
    rounds: tuple[float, ...]
    errors: tuple[str, ...]
    auto_ratio: float = float("nan")  # free / best config of the automatic rewrite alone (no variants)
    rotate: int = 0
    seconds: float = 0.0
    finished: bool = True  # False: the time slice ended before the spread target was met


@dataclass(frozen=True)
class Job:
    """One thing to time: a mode, how launch() is called (True/False/variant name), a config."""

    mode: str
    how: bool | str
    cfg: Config
    label: str


def jobs_for(entry: CorpusEntry, configs: tuple[Config, ...] | None = None, with_variants: bool = True) -> list[Job]:
    """Free and pinned over the kernel's space; pinned also over each variant's own space."""
    cfgs = configs if configs is not None else entry.configs()
    jobs = []
    for cfg in cfgs:
        jobs.append(Job("pinned", True, cfg, cfg.label()))
        jobs.append(Job("free", False, cfg, cfg.label()))
    if configs is None and with_variants:
        for vname, _ in entry.variants:
            jobs += [Job("pinned", vname, c, f"{vname}:{c.label()}") for c in entry.variant_configs(vname)]
    return jobs


class _CudaGraphTimer:
    """One CUDA graph of ``n_inner`` launches; each replay timed by its own pair of events."""

    def __init__(self, fn: Callable[[], None], n_inner: int) -> None:
        import torch

        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()  # load/compile + warm
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            fn()
        self.graph.replay()
        torch.cuda.synchronize()
        self.n_inner = n_inner

    def median_us(self, reps: int) -> float:
        import torch

        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for a, b in ev:  # queued back to back: no host gap inside a timed replay
            a.record()
            self.graph.replay()
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) * 1000.0 / self.n_inner for a, b in ev)


class _WallTimer:
    """CPU stand-in (interpreter): wall clock of plain calls; exercises the pipeline only."""

    def __init__(self, fn: Callable[[], None], n_inner: int) -> None:
        fn()
        self.fn = fn
        self.n_inner = n_inner

    def median_us(self, reps: int) -> float:
        out = []
        for _ in range(reps):
            t = time.perf_counter()
            self.fn()
            out.append((time.perf_counter() - t) * 1e6 / self.n_inner)
        return statistics.median(out)


def rotation(input_bytes: int, device: str, cap: int = 16) -> int:
    """Input copies to cycle through so one graph replay reads about twice the L2 size."""
    if device != "cuda":
        return 1
    import torch

    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or _L2_FALLBACK)
    return max(2, min(cap, math.ceil(2 * l2 / max(1, input_bytes))))


def _copies(mod: Any, shape: dict[str, int], dtype: str, seed: int, device: str) -> list[dict[str, Any]]:
    base = {k: to_device(v, device) for k, v in mod.make_inputs(shape, dtype, "ordinary", seed).items()}
    nbytes = sum(int(v.numel()) * int(v.element_size()) for v in base.values())
    n = rotation(nbytes, device)
    return [base] + [{k: v.clone() for k, v in base.items()} for _ in range(n - 1)]


def measure_pair(entry: CorpusEntry, dtype: str, *, device: str = "cuda", configs: tuple[Config, ...] | None = None,
                 with_variants: bool = True, screen_reps: int = 10, reps: int = 40, top_k: int = 2,
                 min_rounds: int = 3, max_rounds: int = 9, target_spread: float = 0.02, slice_s: float = 30.0,
                 seed: int = 0, cpu_shape: bool = False, log: Callable[[str], None] | None = None) -> SpeedResult:
    """Autotune both modes (stage 1), then time the finalists in rounds until the ratio settles.

    Pinned finalists are the ``top_k`` fastest over the rewrite's configs and the variants plus the
    fastest rewrite-only config (for ``auto_ratio``); a variant's label is ``name:config``. Stops a
    pair at ``slice_s`` seconds even if the spread is above ``target_spread`` (``finished`` False).
    """
    t0 = time.time()
    mod = entry.load()
    shape = entry.shape_dict(cpu=cpu_shape or device != "cuda")
    copies = _copies(mod, shape, dtype, seed, device)
    timer_cls: Any = _CudaGraphTimer if device == "cuda" else _WallTimer
    errors: list[str] = []
    screen: dict[str, dict[str, float]] = {"pinned": {}, "free": {}}
    timers: dict[str, Any] = {}
    jobs = jobs_for(entry, configs, with_variants)

    def build(job: Job) -> Any:
        def fn(how: Any = job.how, cfg: Config = job.cfg) -> None:
            for c in copies:
                mod.launch(c, shape, cfg, how, aux=False)

        return timer_cls(fn, len(copies))

    for job in jobs:  # stage 1: the autotune, every config a few replays
        try:
            tm = build(job)
            screen[job.mode][job.label] = tm.median_us(screen_reps)
            timers[f"{job.mode}|{job.label}"] = tm
        except Exception as e:  # reported, the rest go on
            msg = f"{job.mode} {job.label}: {type(e).__name__}: {str(e).splitlines()[:3]}"
            errors.append(msg)
            if log is not None:
                log(f"  timing error {entry.name}/{dtype} {msg}")
    fin: dict[str, list[str]] = {}
    for mode in ("pinned", "free"):
        ranked = sorted(screen[mode], key=screen[mode].__getitem__)
        keep = ranked[:top_k]
        if mode == "pinned":
            auto = [k for k in ranked if ":" not in k][:1]
            keep += [k for k in auto if k not in keep]
        fin[mode] = keep
    # drop graphs that lost the autotune (their memory pools too)
    timers = {k: v for k, v in timers.items() if k.split("|", 1)[1] in fin[k.split("|", 1)[0]]}
    per_round: dict[str, list[float]] = {f"{m}|{k}": [] for m in fin for k in fin[m]}
    ratios: list[float] = []
    finished = False
    order: list[str] = []
    for i in range(max(len(fin["pinned"]), len(fin["free"]))):  # interleave modes so drift hits both
        order += [f"pinned|{fin['pinned'][i]}"] if i < len(fin["pinned"]) else []
        order += [f"free|{fin['free'][i]}"] if i < len(fin["free"]) else []
    while fin["pinned"] and fin["free"] and len(ratios) < max_rounds:
        for key in order:
            per_round[key].append(timers[key].median_us(reps))
        best_p = min(per_round[f"pinned|{k}"][-1] for k in fin["pinned"])
        best_f = min(per_round[f"free|{k}"][-1] for k in fin["free"])
        ratios.append(best_f / best_p)
        spread = max(ratios) - min(ratios)
        if len(ratios) >= min_rounds and spread <= target_spread:
            finished = True
            break
        if len(ratios) >= min_rounds and time.time() - t0 > slice_s:
            break
    finished = finished or len(ratios) >= max_rounds

    def summarise(mode: str) -> ModeTiming:
        med = {k: statistics.median(per_round[f"{mode}|{k}"]) for k in fin[mode] if per_round[f"{mode}|{k}"]}
        if not med:
            return ModeTiming(mode, "", float("nan"), tuple(sorted(screen[mode].items())))
        k = min(med, key=med.__getitem__)
        return ModeTiming(mode, k, med[k], tuple(sorted(screen[mode].items())))

    p, f = summarise("pinned"), summarise("free")
    ratio = statistics.median(ratios) if ratios else float("nan")
    spread = (max(ratios) - min(ratios)) if ratios else float("nan")
    auto = [statistics.median(per_round[f"pinned|{k}"]) for k in fin["pinned"] if ":" not in k
            and per_round[f"pinned|{k}"]]
    auto_ratio = f.best_us / min(auto) if auto and f.best_us == f.best_us else float("nan")
    del timers
    return SpeedResult(entry.name, dtype, p, f, ratio, spread, tuple(ratios), tuple(errors), auto_ratio,
                       len(copies), round(time.time() - t0, 2), finished)
