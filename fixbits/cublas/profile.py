"""What a cuBLAS call launched, and which of the paper's eight GEMM families that points to.

Runtime profiling is the cheap first instrument of the reconstruction (paper §4): the kernel
names, their count and grids, and whether a split-K reduce or a workspace GEMV merge ran,
narrow a shape to a family before any numerical probing. The name rules are data
(matrices/kernel_families.yaml) so a new library's names are a YAML edit, not a code change.
torch is imported inside ``profile_calls`` only; the classifier runs on recorded names on CPU.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

FAMILIES: tuple[str, ...] = (
    "nvjet_single_pass",
    "nvjet_splitk",
    "cutlass_per_mma",
    "cutlass_splitk_per_mma",
    "gemmsn_chain",
    "gemv2t_lane_tree",
    "gemv2t_contiguous",
    "workspace_gemv",
)
UNKNOWN = "unknown"
DEFAULT_RULES = Path(__file__).resolve().parents[2] / "matrices" / "kernel_families.yaml"


class RulesError(ValueError):
    """matrices/kernel_families.yaml is malformed; the message names the file and key."""


@dataclass(frozen=True)
class Rule:
    name: str
    all: tuple[str, ...]
    none: tuple[str, ...]
    families: tuple[str, ...]
    basis: str


@dataclass(frozen=True)
class FamilyRules:
    ignore: tuple[str, ...]
    rules: tuple[Rule, ...]
    desc_family: dict[str, str]
    algo_ids: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def families_for_algo(self, algo_id: int) -> tuple[str, ...]:
        """The families a heuristic ALGO_ID allows (all of them when the ALGO_ID is not listed)."""
        return dict(self.algo_ids).get(int(algo_id), FAMILIES)


@dataclass(frozen=True)
class Classification:
    """``family`` is one of FAMILIES when a rule names exactly one, else 'unknown';
    ``candidates`` is what the launch is consistent with (empty when no rule matched)."""

    family: str
    candidates: tuple[str, ...]
    rule: str | None

    @property
    def narrowed(self) -> bool:
        return len(self.candidates) > 1


@dataclass(frozen=True)
class KernelLaunch:
    name: str
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    duration_us: float | None = None


@dataclass(frozen=True)
class LaunchProfile:
    """The GPU work one call did: kernels in launch order (memsets/copies counted apart)."""

    launches: tuple[KernelLaunch, ...]
    memsets: int
    classification: Classification

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.launches)

    @property
    def count(self) -> int:
        return len(self.launches)

    @property
    def grids(self) -> tuple[tuple[int, int, int] | None, ...]:
        return tuple(k.grid for k in self.launches)

    @property
    def splitk_reduce(self) -> bool:
        return any("splitKreduce" in n for n in self.kernel_names)

    @property
    def workspace_reduce(self) -> bool:
        return any("reduce_1Block" in n for n in self.kernel_names)

    @property
    def family(self) -> str:
        return self.classification.family

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": list(self.kernel_names),
            "grids": [list(g) if g else None for g in self.grids],
            "count": self.count,
            "memsets": self.memsets,
            "splitk_reduce": self.splitk_reduce,
            "workspace_reduce": self.workspace_reduce,
            "family": self.family,
            "candidates": list(self.classification.candidates),
            "rule": self.classification.rule,
        }


def _str_list(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RulesError(f"{where}: expected a list of strings, got {value!r}")
    for v in value:
        try:
            re.compile(v)
        except re.error as exc:
            raise RulesError(f"{where}: bad regex {v!r}: {exc}") from exc
    return tuple(value)


def parse_rules(data: Any, where: str = "kernel_families.yaml") -> FamilyRules:
    """Validate the YAML document; every error names the file and key."""
    if not isinstance(data, dict):
        raise RulesError(f"{where}: expected a mapping at top level")
    fams = data.get("families")
    if not isinstance(fams, dict) or set(fams) != set(FAMILIES):
        got = sorted(fams) if isinstance(fams, dict) else fams
        raise RulesError(f"{where}: families must name exactly {', '.join(FAMILIES)}; got {got}")
    desc_family = {}
    for fam, info in fams.items():
        if not isinstance(info, dict) or "desc_family" not in info:
            raise RulesError(f"{where}: families.{fam} needs a desc_family")
        desc_family[fam] = str(info["desc_family"])
    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RulesError(f"{where}: rules must be a non-empty list")
    rules = []
    names = set()
    for i, r in enumerate(raw_rules):
        w = f"{where}: rules[{i}]"
        if not isinstance(r, dict):
            raise RulesError(f"{w}: expected a mapping")
        unknown = set(r) - {"name", "all", "none", "families", "basis"}
        if unknown:
            raise RulesError(f"{w}: unknown key(s) {', '.join(sorted(unknown))}")
        name = r.get("name")
        if not isinstance(name, str) or name in names:
            raise RulesError(f"{w}.name: must be a unique string, got {name!r}")
        names.add(name)
        families = _str_list(r.get("families"), f"{w}.families")
        bad = [f for f in families if f not in FAMILIES]
        if not families or bad:
            raise RulesError(f"{w}.families: {bad or 'empty'}; valid: {', '.join(FAMILIES)}")
        pats = _str_list(r.get("all"), f"{w}.all")
        if not pats:
            raise RulesError(f"{w}.all: needs at least one pattern")
        basis = r.get("basis", "seen")
        if basis not in ("seen", "paper"):
            raise RulesError(f"{w}.basis: {basis!r} is not one of seen, paper")
        rules.append(Rule(name, pats, _str_list(r.get("none"), f"{w}.none"), families, basis))
    algo_ids = []
    for key, info in (data.get("algo_ids") or {}).items():
        w = f"{where}: algo_ids.{key}"
        if not isinstance(key, int) or not isinstance(info, dict):
            raise RulesError(f"{w}: expected an integer ALGO_ID mapping to {{families, basis}}")
        fams_ = _str_list(info.get("families"), f"{w}.families")
        bad = [f for f in fams_ if f not in FAMILIES]
        if not fams_ or bad:
            raise RulesError(f"{w}.families: {bad or 'empty'}; valid: {', '.join(FAMILIES)}")
        algo_ids.append((key, fams_))
    return FamilyRules(
        _str_list(data.get("ignore"), f"{where}: ignore"), tuple(rules), desc_family, tuple(algo_ids)
    )


@lru_cache(maxsize=4)
def load_rules(path: str | None = None) -> FamilyRules:
    p = Path(path) if path else DEFAULT_RULES
    with open(p) as fh:
        return parse_rules(yaml.safe_load(fh), where=str(p))


def gemm_kernels(names: Sequence[str], rules: FamilyRules | None = None) -> tuple[str, ...]:
    rules = rules or load_rules()
    return tuple(n for n in names if not any(re.search(p, n) for p in rules.ignore))


def classify(names: Sequence[str], rules: FamilyRules | None = None) -> Classification:
    """First rule whose `all` patterns each hit a kernel and whose `none` patterns hit none."""
    rules = rules or load_rules()
    kernels = gemm_kernels(names, rules)
    for rule in rules.rules:
        if all(any(re.search(p, n) for n in kernels) for p in rule.all) and not any(
            re.search(p, n) for p in rule.none for n in kernels
        ):
            fam = rule.families[0] if len(rule.families) == 1 else UNKNOWN
            return Classification(fam, rule.families, rule.name)
    return Classification(UNKNOWN, (), None)


_TILE = re.compile(r"nvjet_sm\d+_[a-z]+_(\d+)x(\d+)_(\d+)x(\d+)_")


def nvjet_tile(name: str) -> dict[str, int] | None:
    """Parse an nvjet name's tile: nvjet_sm90_hsh_64x8_64x16_... -> BM 64, BN 8, BK 64, stages 16."""
    m = _TILE.search(name)
    if not m:
        return None
    bm, bn, bk, stages = (int(g) for g in m.groups())
    return {"block_m": bm, "block_n": bn, "block_k": bk, "stages": stages}


# one profiler session, many calls: the record_function name of call i, and the trace categories
CALL_PREFIX = "fixbits_call:"
MEMSET_CATS = ("gpu_memset", "memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def _kernel_launch(ev: dict[str, Any]) -> KernelLaunch:
    args = ev.get("args", {}) or {}
    grid = args.get("grid")
    block = args.get("block")
    return KernelLaunch(
        name=str(ev.get("name", "")),
        grid=tuple(int(x) for x in grid) if isinstance(grid, list) and len(grid) == 3 else None,  # type: ignore[arg-type]
        block=tuple(int(x) for x in block) if isinstance(block, list) and len(block) == 3 else None,  # type: ignore[arg-type]
        duration_us=float(ev["dur"]) if "dur" in ev else None,
    )


def _complete_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    return [ev for ev in events if isinstance(ev, dict) and ev.get("ph") == "X"]


def _cat(ev: dict[str, Any]) -> str:
    return str(ev.get("cat", "")).lower()


def _correlation(ev: dict[str, Any]) -> Any:
    return (ev.get("args") or {}).get("correlation")


def _collect(gpu_events: Sequence[dict[str, Any]]) -> tuple[tuple[KernelLaunch, ...], int]:
    kernels = sorted(
        ((float(ev.get("ts", 0.0)), _kernel_launch(ev)) for ev in gpu_events if _cat(ev) == "kernel"),
        key=lambda t: t[0],
    )
    memsets = sum(1 for ev in gpu_events if _cat(ev) in MEMSET_CATS)
    return tuple(k for _, k in kernels), memsets


def launches_from_trace(trace: dict[str, Any]) -> tuple[tuple[KernelLaunch, ...], int]:
    """Kernel launches (in start order) and the memset count from a Chrome trace document."""
    events = _complete_events(trace)
    return _collect([ev for ev in events if _cat(ev) == "kernel" or _cat(ev) in MEMSET_CATS])


def _windows(events: Sequence[dict[str, Any]], cat: str, calls: int) -> list[tuple[int, float, float]]:
    out = []
    for ev in events:
        name = str(ev.get("name", ""))
        if _cat(ev) != cat or not name.startswith(CALL_PREFIX):
            continue
        try:
            i = int(name[len(CALL_PREFIX) :])
        except ValueError:
            continue
        if 0 <= i < calls:
            ts = float(ev.get("ts", 0.0))
            out.append((i, ts, ts + float(ev.get("dur", 0.0))))
    return out


def _call_of(ts: float, windows: Sequence[tuple[int, float, float]]) -> int | None:
    for i, lo, hi in windows:
        if lo <= ts <= hi:
            return i
    return None


def calls_from_trace(trace: dict[str, Any], calls: int) -> list[tuple[tuple[KernelLaunch, ...], int]]:
    """Split one profiler session's trace into the ``calls`` calls ``profile_calls`` annotated.

    A kernel or memset belongs to call i when the runtime/driver API event that launched it
    (same ``args.correlation``) lies in the CPU ``user_annotation`` range ``fixbits_call:i``;
    without such an event, when its start lies in the GPU ``gpu_user_annotation`` range of that
    name. GPU work in no call's range (operands drawn between calls) is dropped.
    """
    events = _complete_events(trace)
    cpu_windows = _windows(events, "user_annotation", calls)
    gpu_windows = _windows(events, "gpu_user_annotation", calls)
    launch_ts = {
        _correlation(ev): float(ev.get("ts", 0.0))
        for ev in events
        if _cat(ev) in LAUNCH_CATS and _correlation(ev) is not None
    }
    per_call: list[list[dict[str, Any]]] = [[] for _ in range(calls)]
    for ev in events:
        if _cat(ev) != "kernel" and _cat(ev) not in MEMSET_CATS:
            continue
        corr = _correlation(ev)
        if corr is not None and corr in launch_ts:
            i = _call_of(launch_ts[corr], cpu_windows)
        else:
            i = _call_of(float(ev.get("ts", 0.0)), gpu_windows)
        if i is not None:
            per_call[i].append(ev)
    return [_collect(evs) for evs in per_call]


def profile_from_names(names: Sequence[str], memsets: int = 0) -> LaunchProfile:
    launches = tuple(KernelLaunch(n) for n in names)
    return LaunchProfile(launches, memsets, classify(gemm_kernels(names)))


def profile_call(fn: Callable[[], Any], *, warmup: int = 1) -> LaunchProfile:
    """Run ``fn`` once under torch.profiler (after ``warmup`` plain runs) and record its launches.

    Prepare inputs outside ``fn``: everything it launches is counted (torch's own elementwise
    kernels are dropped by the YAML's ``ignore`` list, memsets are counted apart).
    """
    return profile_calls([fn], warmup=warmup)[0]


def profile_calls(fns: Sequence[Callable[[], Any]], *, warmup: int = 1) -> list[LaunchProfile]:
    """``profile_call`` for many calls in ONE profiler session (a session costs seconds to start
    and export; one per call was most of a matmul_check run).

    Each ``fn`` runs ``warmup`` times before the session, then once inside it under
    ``record_function("fixbits_call:i")`` followed by a device synchronize; ``calls_from_trace``
    gives each call the GPU work it launched.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if not fns:
        return []
    for fn in fns:
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i, fn in enumerate(fns):
            with record_function(f"{CALL_PREFIX}{i}"):
                fn()
            torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="fixbits-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            trace = json.load(fh)
    finally:
        os.unlink(path)
    return [_profile(launches, memsets) for launches, memsets in calls_from_trace(trace, len(fns))]


def _profile(launches: Sequence[KernelLaunch], memsets: int) -> LaunchProfile:
    rules = load_rules()
    keep = set(gemm_kernels([x.name for x in launches], rules))
    gemm = tuple(k for k in launches if k.name in keep)
    return LaunchProfile(gemm, memsets, classify([k.name for k in gemm], rules))
