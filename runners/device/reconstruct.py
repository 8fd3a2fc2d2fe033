#!/usr/bin/env python3
"""GPU: build the sm_90 cuBLASLt arch profiles, then verify them on realistic and fuzz shapes.

    PYTHONPATH=<repo> python3 runners/device/reconstruct.py --out DIR [--budget-s 420]
    python3 runners/device/reconstruct.py --check DIR        # CPU: finish the sweep's checks
    python3 runners/device/reconstruct.py --out DIR --device cpu --budget-s 60   # CPU dry run

Part 1 (per dtype pair, fp16/bf16/fp8_e4m3 -> fp32 first; --out-dtypes adds fp16/bf16 outputs):
heuristic scan, then one priority queue over a pool of probing processes: the answers that the
390 realistic and the seeded fuzz shapes reach come first (fp16, bf16, then fp8), one probe per
arithmetic family, the family's other answers predicted and verified at once on their own
(priority) shapes, anything a descriptor misses probed itself (split by K where needed).
Probe calls are built on the GPU (no element cap; each process is held to a memory budget).
Writes DIR/profiles/<arch>_cublaslt<ver>_<in>_<out>.yaml (commit to matrices/profiles/), the
evidence of every probe (DIR/profiles/evidence/) and DIR/profiles/reconstruct_<in>_<out>.json.
Part 2 (sweep): every realistic + fuzz shape, --draws draws each (ordinary and wide; a fp16 / bf16
output's every third draw a spike draw, fixbits.probe.spikes), operands
drawn on the GPU from a counter hash; only sampled output cells come back. A process pool
emulates them while the GPU goes on (fixbits.probe.sweep), so a short budget never stops the
GPU part: DIR/sweep_samples/ holds everything needed to finish the checks on a CPU
(--check DIR). DIR/sweep.csv classifies every case (match, not_in_profile, tail_defect,
wrong_entry, no_algorithm, too_large, unchecked); each mismatch leaves its sampled inputs and
outputs in DIR/mismatch_dump/*.npz. DIR/summary.yaml and a table printed last.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

DEVICE = "cuda"  # --device cpu: the same paths on CPU torch with the emulator as cuBLAS
WEIGHTS = {"fp16": 0.42, "bf16": 0.36, "fp8_e4m3": 0.22}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # @FILE reads more arguments from FILE, one per line: answer lists too long for one command line
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], fromfile_prefix_chars="@")
    p.add_argument("--out", default=None)
    p.add_argument("--budget-s", type=float, default=420.0)
    p.add_argument("--arch", default="sm_90")
    # lists as 'a,b' or 'a b' (run_all.sh turns the commas of its extra arguments into spaces)
    p.add_argument("--dtypes", nargs="+", default=["fp16,bf16,fp8_e4m3"])
    p.add_argument("--out-dtypes", nargs="+", default=["fp32"], help="fp32 first; e.g. fp32,fp16 adds fp16->fp16 and "
                   "bf16->bf16 (each input dtype with an output of its own width or fp32)")
    p.add_argument("--pairs", nargs="+", default=None, metavar="IN:OUT[:W]",
                   help="explicit dtype pairs in this order, each with an optional budget weight (e.g. "
                        "bf16:bf16:2,fp16:fp16,fp16:fp32); overrides --dtypes/--out-dtypes")
    p.add_argument("--max-queries", type=int, default=30000)
    p.add_argument("--fuzz", type=int, default=2000)
    p.add_argument("--fuzz-from", type=int, default=0, metavar="N",
                   help="sweep only fuzz shapes N.. of the --fuzz set (no realistic shapes): extends an earlier "
                        "run's sweep with new shapes of the same seeded sequence")
    p.add_argument("--scan-fuzz", type=int, default=0, metavar="N",
                   help="also reach the answers of N fuzz shapes of another seed (--scan-fuzz-seed) as priority "
                        "shapes: the answers the gate's shape distribution meets most are probed first, while the "
                        "sweep's own seed-0 shapes stay unseen by the probing")
    p.add_argument("--scan-fuzz-seed", type=int, default=1, choices=range(1, 32), metavar="1..31",
                   help="seed of the --scan-fuzz shapes (0 is the sweep's own sequence)")
    p.add_argument("--recheck-csv", nargs="+", default=[], metavar="CSV",
                   help="earlier runs' sweep.csv files: their shapes whose answer has every part of one of "
                        "--recheck-answers are swept first (set 'recheck'), to re-verify corrected entries")
    p.add_argument("--recheck-answers", nargs="+", default=[], metavar="KEY",
                   help="answer keys or parts of them, e.g. a66-t12-s10 (all parts must occur)")
    p.add_argument("--only-answers", nargs="+", default=[], metavar="KEY",
                   help="probe only answers whose key has every part of one of these (e.g. a14, "
                        "a13-c10): a family re-probed with the budget to itself")
    p.add_argument("--per-answer-s", type=float, default=60.0,
                   help="longest probe of one answer (capped at 0.8 of the pair's budget)")
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--draw-seed", type=int, default=0, choices=range(32), metavar="0..31",
                   help="> 0: sweep operands no earlier run drew (fresh draws on recheck shapes)")
    p.add_argument("--sweep-share", type=float, default=0.4, help="share of the budget kept for the sweep")
    p.add_argument("--profiles", default=None, help="use these profiles for the sweep (skip part 1)")
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                   help="processes probing answers in parallel (each has its own CUDA context and a "
                        "1/W share of 0.78 of the GPU's memory per call, at least 8 GiB: 14 on the H200 host)")
    p.add_argument("--check-workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    p.add_argument("--check", default=None, metavar="DIR", help="CPU: finish the sweep checks of a device run")
    p.add_argument("--only-unchecked", action="store_true",
                   help="with --check: keep the device's finished rows of DIR/sweep.csv, emulate the rest")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--limit-shapes", type=int, default=0, help="dry runs: this many small shapes per set")
    p.add_argument("--seed-profiles", default=None, metavar="DIR",
                   help="start from these profiles (e.g. matrices/profiles): a pair's own profile is resumed "
                        "(its answers are not probed again), and the other fp16/bf16 profiles serve as known "
                        "descriptors (dtypes replaced) for predicting answers by draws")
    p.add_argument("--narrow-sweep", default="realistic", choices=["realistic", "all", "none"],
                   help="sweep shapes for fp16/bf16 outputs (fp32 outputs always sweep realistic + fuzz)")
    args = p.parse_args(argv)
    args.dtypes = ",".join(args.dtypes)
    args.out_dtypes = ",".join(args.out_dtypes)
    args.pairs = ",".join(args.pairs) if args.pairs else None
    if bool(args.recheck_csv) != bool(args.recheck_answers):
        p.error("--recheck-csv and --recheck-answers go together")
    return args


def explicit_pairs(spec: str) -> tuple[list[tuple[str, str]], dict[tuple[str, str], float]]:
    """--pairs 'in:out[:weight],...' -> the pairs in that order and their budget weights."""
    todo: list[tuple[str, str]] = []
    weights: dict[tuple[str, str], float] = {}
    for item in (x for x in spec.split(",") if x):
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise SystemExit(f"--pairs: {item!r} is not IN:OUT or IN:OUT:WEIGHT")
        pair = (parts[0], parts[1])
        todo.append(pair)
        weights[pair] = float(parts[2]) if len(parts) == 3 else 1.0
    return todo, weights


def pairs(dtypes: list[str], out_dtypes: list[str]) -> list[tuple[str, str]]:
    """(in, out) pairs, fp32 outputs first; fp16 / bf16 outputs only for their own input."""
    out = []
    for od in out_dtypes:
        for dt in dtypes:
            if od == "fp32" or od == dt or (dt.startswith("fp8") and od in ("fp16", "bf16")):
                out.append((dt, od))
    return out


def sweep_cases(fuzz: int, limit: int, fuzz_from: int = 0) -> list[Any]:
    from fixbits.probe.sweep import Case, cases

    cs = cases(fuzz)
    if fuzz_from:
        from fixbits.shapes import fuzz_shapes

        new = {(s.m, s.n, s.k) for s in fuzz_shapes(0, fuzz)[fuzz_from:]}
        new -= {(s.m, s.n, s.k) for s in fuzz_shapes(0, fuzz_from)}
        cs = [c for c in cs if c.which == "fuzz" and (c.m, c.n, c.k) in new]
    if limit:
        small = [c for c in cs if c.m * c.n * c.k <= 4e5 and c.k <= 700]
        real = [c for c in small if c.which == "realistic"][:limit]
        fz = [c for c in small if c.which == "fuzz"][:limit]
        cs = real + fz or [Case("fuzz", 5, 7, 121)]
    return cs


SWEEP_FUZZ_KEPT = 20_000  # seed-0 fuzz shapes no --scan-fuzz shape may be (sweeps so far drew 0..8999)


def scan_fuzz_shapes(count: int, seed: int, dtypes: list[str]) -> list[tuple[int, int, int]]:
    """Fuzz shapes of a seed other than the sweep's: they steer probing toward the answers the gate's
    shape distribution meets, and the sweep still judges the profile on shapes no probe saw (a shape
    both sequences draw, a small one most often, is left out of these)."""
    from fixbits.shapes import fuzz_shapes

    if seed == 0:
        raise ValueError("--scan-fuzz-seed 0 is the sweep's own fuzz sequence; pick 1..31")
    align = 16 if any(d.startswith("fp8") for d in dtypes) else 1
    swept = {(s.m, s.n, s.k) for a in {align, 1} for s in fuzz_shapes(0, SWEEP_FUZZ_KEPT, align=a)}
    return [sh for sh in ((s.m, s.n, s.k) for s in fuzz_shapes(seed, count, align=align)) if sh not in swept]


def seed_profiles(seed_dir: Path, prof_dir: Path, arch: str, version: str, dt: str, od: str, log: Any) -> dict[str, Any]:
    """Resume the pair's own profile from ``seed_dir`` (copied into ``prof_dir`` unless a profile is
    already there) and return the descriptors of the other fp16/bf16 profiles as hints (key -> GEMMDesc,
    dtypes replaced)."""
    import shutil

    from fixbits.probe.profile import load

    hints: dict[str, Any] = {}
    twins = {"fp16": ["bf16"], "bf16": ["fp16"], "fp8_e4m3": ["fp16", "bf16"]}  # fp8: see fp8_hints
    files = sorted(seed_dir.glob(f"{arch}_cublaslt{version}_{dt}_*.yaml"))  # this library version only
    for twin in twins.get(dt, []):
        files += sorted(seed_dir.glob(f"{arch}_cublaslt{version}_{twin}_*.yaml"))
    for p in files:
        try:
            prof = load(p)
        except Exception as exc:  # noqa: BLE001
            log(f"seed profile {p}: {exc}")
            continue
        if prof.dtype == dt and prof.out_dtype == od:
            dst = prof_dir / p.name
            if not dst.exists():
                shutil.copyfile(p, dst)
                log(f"[{dt}->{od}] resuming {p} ({len(prof.entries)} answers)")
            continue
        if prof.dtype != dt and prof.out_dtype not in ("fp32", prof.dtype):
            continue
        for key, e in prof.entries.items():
            for d in [e.desc] + [v.desc for v in e.variants]:
                if dt.startswith("fp8"):
                    for i, h in enumerate(fp8_hints(d, od)):
                        hints.setdefault(f"{key}~fp8.{i}", h)  # one answer of the algo each (bases_for)
                else:
                    hints.setdefault(key, d.replace(in_dtype=dt, out_dtype=od))
    if hints:
        log(f"[{dt}->{od}] {len(hints)} known descriptors from other dtype pairs")
    return hints


def fp8_hints(d: Any, od: str) -> list[Any]:
    """A 16-bit tensor-core descriptor carried to fp8 e4m3 (answer keys of the two dtypes never
    coincide, so these only seed the algo's known structures): 32-deep instructions promoted into
    fp32 every 4 (cuBLASLt's default, no fast accumulation: the two fp8 entries probed on the
    H200), the K-loop step doubled (the phase-B step variants try the others), and split-K spans
    rounded as measured for 16-bit and at twice that (an fp8 K tile is twice as deep)."""
    from fixbits.desc import DescError

    if d.instruction == "fma":
        return []
    try:
        base = d.replace(in_dtype="fp8_e4m3", out_dtype=od, instruction_k=32, use_fast_accum=False,
                         promotion_interval=4, k_loop_step=max(64, 2 * d.k_loop_step))
        out = [base]
        if any(c.granule > 1 or c.aligned_granule for c in d.k_cuts):
            wide = tuple(dataclasses.replace(c, granule=2 * c.granule if c.granule > 1 else c.granule,
                                             aligned_granule=2 * c.aligned_granule if c.aligned_granule else None)
                         for c in d.k_cuts)
            out.append(base.replace(k_cuts=wide))
        return out
    except DescError:
        return []


def load_profiles(prof_dir: Path, log: Any) -> dict[tuple[str, str], Any]:
    from fixbits.probe.profile import load

    profiles = {}
    for p in sorted(prof_dir.glob("*.yaml")):
        try:
            prof = load(p)
            profiles[(prof.dtype, prof.out_dtype)] = prof
        except Exception as exc:  # noqa: BLE001
            log(f"cannot load {p}: {exc}")
    return profiles


# -- CPU dry run: the device paths on CPU torch, the emulator as cuBLAS ----------------------------

class _DryAnswer:
    def __init__(self, algo: int, split: int) -> None:
        self.algo_id, self.splitk_num, self.reduction_scheme, self.tile_id = algo, split, 0, 1

    def key_str(self) -> str:
        return f"a{self.algo_id}-t1-s{self.splitk_num}-r0-w0-c0-g0"


class _DryLt:
    """Two answers: single pass for K < 400, a 2-way split above (the emulator computes both)."""

    version = 1

    def heuristic(self, m: int, n: int, k: int, i: str, o: str) -> _DryAnswer:
        return _DryAnswer(1, 2 if k >= 400 else 1)

    def truth(self, k: int, i: str, o: str) -> Any:
        from fixbits.desc import GEMMDesc, KCut

        d = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32 if i.startswith("fp8") else 16, in_dtype=i,
                     out_dtype=o, k_loop_step=32 if not i.startswith("fp8") else 64, residue="first")
        return d.replace(k_cuts=(KCut("contiguous", count=2, granule=64),)) if k >= 400 else d


def _dry_matmul(lt: _DryLt, in_dtype: str, out_dtype: str) -> Any:
    def mm(a: Any, b: Any) -> Any:
        from fixbits.cublas.backend import to_numpy, to_torch
        from fixbits.cublas.torch_dtypes import fixbits_name
        from fixbits.emulate import emulate

        dt = fixbits_name(a.dtype)  # one collect call sweeps several input dtypes
        c = emulate(lt.truth(int(a.shape[1]), dt, out_dtype), to_numpy(a, dt), to_numpy(b, dt))
        return to_torch(c, out_dtype, "cpu")

    return mm


def _dry_backend(lt: _DryLt, in_dtype: str, out_dtype: str) -> Any:
    from fixbits.cublas.backend import CublasBackend

    bk = CublasBackend(in_dtype, out_dtype, device="cpu")
    bk._mm = _dry_matmul(lt, in_dtype, out_dtype)  # type: ignore[method-assign]
    bk._lt = lt  # phase B asks the backend's heuristic for K where readings part
    return bk


# -- main -------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    global DEVICE
    args = parse_args(argv)
    t0 = time.time()
    log_lines: list[str] = []

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_lines.append(msg)

    if args.check:
        from fixbits.probe.sweep import check

        out = Path(args.check)
        stats = check(out, load_profiles(Path(args.profiles) if args.profiles else out / "profiles", log),
                      workers=args.check_workers, log=log, only_unchecked=args.only_unchecked,
                      deadline=t0 + args.budget_s)  # rows past it stay 'unchecked'; sweep.csv is written
        print(yaml.safe_dump(stats, sort_keys=False))
        return 0
    if not args.out:
        raise SystemExit("--out DIR is required (or --check DIR)")
    DEVICE = args.device
    dry = DEVICE == "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prof_dir = Path(args.profiles) if args.profiles else out / "profiles"
    prof_dir.mkdir(parents=True, exist_ok=True)
    deadline = t0 + args.budget_s
    workers = 1 if dry else args.workers
    # each probing process gets its share of the GPU's memory: 0.78 of it in all (110 GiB of the
    # H200's 140, 62 of the H100's 80), the rest left to contexts, workspaces and fragmentation
    if not dry:
        from fixbits.workers import NVIDIA_VAR, gpu_memory_gib, parse_visible

        visible = parse_visible(os.environ.get(NVIDIA_VAR, "0"))  # the card this process will open
        total_gib = gpu_memory_gib(int(visible[0]) if visible and visible[0].isdigit() else 0) or 140.0
        os.environ.setdefault("FIXBITS_MAX_CALL_GIB", str(max(8, int(0.78 * total_gib / max(1, workers)))))
        print(f"GPU memory {total_gib:.0f} GiB: each of {workers} probing processes may take "
              f"{os.environ['FIXBITS_MAX_CALL_GIB']} GiB per call", flush=True)

    from fixbits.probe.reconstruct import reconstruct
    from fixbits.probe.sweep import Checker, collect

    dtypes = [d for d in args.dtypes.split(",") if d]
    todo = pairs(dtypes, [d for d in args.out_dtypes.split(",") if d])
    pair_w = {(dt, od): WEIGHTS.get(dt, 0.2) * (1.0 if od == "fp32" else 0.5) for dt, od in todo}
    if args.pairs:
        todo, pair_w = explicit_pairs(args.pairs)
        dtypes = list(dict.fromkeys(dt for dt, _ in todo))
    cs = sweep_cases(args.fuzz, args.limit_shapes, args.fuzz_from)
    if args.recheck_csv:
        from fixbits.probe.sweep import Case, answer_shapes

        again = [Case("recheck", m, n, k) for m, n, k in answer_shapes(args.recheck_csv, args.recheck_answers)]
        log(f"recheck: {len(again)} shapes of {args.recheck_answers} from {args.recheck_csv}")
        known = {(x.m, x.n, x.k) for x in again}
        cs = again + [c for c in cs if (c.m, c.n, c.k) not in known]
    prio = [(c.m, c.n, c.k) for c in cs]
    prio_real = [(c.m, c.n, c.k) for c in cs if c.which in ("realistic", "recheck")]
    if args.scan_fuzz:
        prio += scan_fuzz_shapes(args.scan_fuzz, args.scan_fuzz_seed, dtypes)
        log(f"priority: {len(prio)} shapes, {args.scan_fuzz} of them fuzz seed {args.scan_fuzz_seed}")
    lt: Any = _DryLt() if dry else None
    summaries: dict[str, Any] = {}
    lib_version = ""
    if lt is not None:
        lib_version = str(lt.version)
    else:
        from fixbits.cublas.lt import CublasLt

        try:
            lt = CublasLt()  # one handle for every pair's scan and the sweep
        except Exception as exc:  # noqa: BLE001
            if args.seed_profiles:  # the profiles to resume are named by the library's version
                raise
            log(f"cuBLASLt not loaded: {type(exc).__name__}: {exc}")  # each pair then reports its own error
        else:
            lib_version = str(lt.version)
            log(f"cuBLASLt {lib_version} through {lt.api_kind}")  # nvmath, or the ctypes layer without it
    device_label = ""
    if not dry:
        import torch

        device_label = torch.cuda.get_device_name()
        log(f"device: {device_label}")
    sweep_s = args.sweep_share * args.budget_s
    recon_end = deadline - sweep_s
    if not args.profiles:
        wsum = sum(pair_w[p] for p in todo)
        for dt, od in todo:
            left = recon_end - time.time()
            if left < 5:
                summaries[f"{dt}->{od}"] = {"error": "no time left"}
                continue
            share = pair_w[(dt, od)] / wsum
            b = max(5.0, min(left, share * (recon_end - t0)))
            hints = (seed_profiles(Path(args.seed_profiles), prof_dir, args.arch, lib_version, dt, od, log)
                     if args.seed_profiles else None)
            try:
                summaries[f"{dt}->{od}"] = reconstruct(
                    arch=args.arch, in_dtype=dt, out_dtype=od, out_dir=prof_dir, budget_s=b,
                    max_queries=args.max_queries if not dry else 40, scan_budget_s=min(30.0, 0.15 * b), log=log,
                    workers=workers, per_answer_s=min(args.per_answer_s, 0.8 * b), lt=lt,
                    only=args.only_answers or None,
                    priority_shapes=prio if od == "fp32" or args.narrow_sweep == "all" else prio_real,
                    backend=_dry_backend(lt, dt, od) if dry else None, profile_launch=not dry,
                    scan_shapes=[(m, n, k) for m in (3, 16, 40) for n in (2, 24) for k in (96, 200, 333, 500, 613)]
                    if dry else None, hints=hints, device_label=device_label)
            except Exception as exc:  # noqa: BLE001
                summaries[f"{dt}->{od}"] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=5)}
                log(f"[{dt}->{od}] reconstruct crashed: {exc}")
            (out / "summary.yaml").write_text(yaml.safe_dump({"reconstruct": _brief(summaries), "partial": True},
                                                             sort_keys=False))
    profiles = load_profiles(prof_dir, log)
    # sweep: the GPU collects (fp16 and bf16 first), a CPU pool checks meanwhile
    checker = Checker(out, profiles, workers=1 if dry else args.check_workers)
    counts: dict[str, Any] = {}
    groups: list[tuple[list[str], str]] = []
    for od in dict.fromkeys(od for _, od in todo):
        ins = [dt for dt, o in todo if o == od]
        first = [d for d in ins if not d.startswith("fp8")]
        groups += [(first, od)] if first else []
        groups += [([d for d in ins if d.startswith("fp8")], od)] if any(d.startswith("fp8") for d in ins) else []
    try:
        if lt is None:
            from fixbits.cublas.lt import CublasLt

            lt_s: Any = CublasLt()
        else:
            lt_s = lt
        narrow = [g for g in groups if g[1] != "fp32"] if args.narrow_sweep != "none" else []
        for gi, (ins, od) in enumerate(groups):
            if time.time() > deadline - 15:
                break
            # fp32 outputs leave each narrow-output group a share of the sweep (realistic shapes)
            reserve = 0.08 * sweep_s * sum(1 for g in groups[gi + 1:] if g in narrow)
            mm = _dry_matmul(lt, ins[0], od) if dry else None  # type: ignore[arg-type]
            todo_cs = cs
            if od != "fp32":  # narrow outputs: the realistic shapes (what torch.mm users run) first
                if args.narrow_sweep == "none":
                    continue
                if args.narrow_sweep == "realistic":
                    todo_cs = [c for c in cs if c.which in ("realistic", "recheck")]
            counts["+".join(ins) + "->" + od] = collect(
                lt_s, todo_cs, ins, od, args.draws, deadline - 12 - reserve, out, device=DEVICE, matmul=mm, log=log,
                on_flush=checker.submit, max_bytes=30 << 30, draw_seed=args.draw_seed)
    except Exception as exc:  # noqa: BLE001
        counts["error"] = f"{type(exc).__name__}: {exc}"
        log(f"sweep collect crashed: {exc}\n{traceback.format_exc(limit=5)}")
    stats = checker.finish(max(time.time() + 2, deadline - 3), log)
    summary = {"reconstruct": _brief(summaries), "sweep_collect": counts, "sweep": stats,
               "wall_s": round(time.time() - t0, 1)}
    (out / "summary.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    print("\n== reconstruct ==")
    print(f"{'pair':16} {'answers':>7} {'prio':>5} {'prio ok':>7} {'probed':>6} {'predicted':>9} {'failed':>6} {'left':>5}")
    for name, s in summaries.items():
        if "error" in s:
            print(f"{name:16} ERROR {s['error'][:90]}")
            continue
        print(f"{name:16} {s['answers']:7d} {s.get('priority_answers', 0):5d} {s.get('priority_done', 0):7d} "
              f"{len(s['probed']):6d} {len(s.get('predicted', [])):9d} {len(s['failed']):6d} {len(s['skipped_budget']):5d}")
    print("== sweep ==")
    for name, s in stats.items():
        print(f"{name:16} " + " ".join(f"{k}={v}" for k, v in sorted(s.items())))
    print(f"wall {time.time() - t0:.0f}s")
    return 0


def _brief(summaries: dict[str, Any]) -> dict[str, Any]:
    """summary.yaml keeps counts and failures, not the per-answer scan groups."""
    out = {}
    for k, s in summaries.items():
        out[k] = {x: v for x, v in s.items() if x != "groups"}
        if "failed" in s:
            reasons: dict[str, int] = {}
            for why in s["failed"].values():
                r = why.split(" at ")[0].split(":")[0][:60]
                reasons[r] = reasons.get(r, 0) + 1
            out[k]["failure_reasons"] = reasons
    return out


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
