"""Time every corpus (kernel, dtype) pinned vs free, each mode autotuned over its own space.

    PYTHONPATH=<repo> python3 runners/device/enforcement_bench.py --out DIR [--budget-s 150]
    TRITON_INTERPRET=1 ... --device cpu   (pipeline smoke test on small shapes; times mean nothing)

Why this order: pairs never timed before (no row in benchmarks/enforcement/*/speed_*.csv) come
first, then the slowest of earlier runs, so a short budget still covers what is unknown or bad.
Compiles run first on a process pool (disk cache; a hot cache from enforcement_check makes this
cheap). Each pair gets a time slice (what is left over the pairs left); fixbits.corpus.timing
does the autotune and the rounds. DIR/enforcement_bench.{csv,md,yaml} are rewritten after every
pair, the plot (png) at the end; the table is printed last.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
HISTORY_GLOB = "benchmarks/enforcement/*/speed_*.csv"


def _warm(name: str, dtype: str, part: int = 0, nparts: int = 1) -> str:
    """Compile (launch once) every config of both modes and the variants, so timing hits the cache.

    ``part``/``nparts``: this worker's share of the pair's configs (big spaces, e.g. GEMMs with
    variants, are spread over several workers)."""
    import torch

    from fixbits.corpus.common import to_device
    from fixbits.corpus.registry import entry
    from fixbits.corpus.timing import jobs_for

    t0 = time.time()
    e = entry(name)
    mod = e.load()
    shape = e.shape_dict()
    inputs = {k: to_device(v, "cuda") for k, v in mod.make_inputs(shape, dtype, "ordinary", 0).items()}
    bad = []
    for job in jobs_for(e)[part::nparts]:
        try:
            mod.launch(inputs, shape, job.cfg, job.how, aux=False)
        except Exception as ex:
            bad.append(f"{job.mode} {job.label}: {type(ex).__name__}: {str(ex).splitlines()[:2]}")
    torch.cuda.synchronize()
    share = f" [{part + 1}/{nparts}]" if nparts > 1 else ""
    return f"warm {name}/{dtype}{share}: {time.time() - t0:.0f}s" + "".join(f"\n   {b}" for b in bad)


def warm_parts(n_jobs: int, n_pairs: int, workers: int) -> int:
    """Workers per pair for the precompile: spread a pair's configs when there are spare workers."""
    spare = max(1, workers // max(1, n_pairs))
    return max(1, min(spare, -(-n_jobs // 6)))


def history(paths: list[Path]) -> dict[tuple[str, str], float]:
    """Ratio per (kernel, dtype) in earlier runs (latest file wins)."""
    out: dict[tuple[str, str], float] = {}
    for p in sorted(paths):
        with open(p, newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    out[(row["kernel"], row["dtype"])] = float(row["ratio"])
                except (KeyError, ValueError):
                    continue
    return out


def priority(pairs: list[tuple[str, str]], seen: dict[tuple[str, str], float]) -> list[tuple[str, str]]:
    """Never timed first (corpus order), then timed ones slowest first."""
    new = [p for p in pairs if p not in seen]
    old = sorted((p for p in pairs if p in seen), key=lambda p: seen[p])
    return new + old


def _row(res: object, budget: float, timed_before: float | None) -> dict:
    from benchmarks.enforcement.report import verdict

    r = res  # SpeedResult
    return {"kernel": r.kernel, "dtype": r.dtype, "free_us": r.free.best_us, "pinned_us": r.pinned.best_us,
            "ratio": r.ratio, "spread": r.spread, "rounds": len(r.rounds), "budget": budget,
            "verdict": verdict(r.ratio, budget), "free_best": r.free.best_config, "pinned_best": r.pinned.best_config,
            "auto_ratio": r.auto_ratio, "rotate": r.rotate, "finished": r.finished, "seconds": r.seconds,
            "before": "" if timed_before is None else round(timed_before, 4), "errors": len(r.errors)}


def _write(out: Path, rows: list[dict], details: list[dict], head: str, left: list[str]) -> str:
    from benchmarks.enforcement.report import markdown, write_csv

    write_csv(rows, out / "enforcement_bench.csv")
    md = markdown(rows, head)
    if left:
        md += f"\nNot measured (budget): {', '.join(left)}\n"
    (out / "enforcement_bench.md").write_text(md)
    (out / "enforcement_bench.yaml").write_text(yaml.safe_dump(details, sort_keys=False))
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--only", nargs="*", default=None, help="kernel or kernel:dtype items (space/comma-separated)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 4), help="precompile processes (0: none)")
    ap.add_argument("--precompile-share", type=float, default=0.4, help="most of the budget the precompile may use")
    ap.add_argument("--screen-reps", type=int, default=10)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=9)
    ap.add_argument("--target-spread", type=float, default=0.02)
    ap.add_argument("--history", nargs="*", type=Path, default=None, help=f"earlier speed CSVs (default {HISTORY_GLOB})")
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
        args.workers = 0
    args.out.mkdir(parents=True, exist_ok=True)

    from benchmarks.enforcement.report import plot
    from fixbits.corpus.registry import budget, entry, pairs, selected
    from fixbits.corpus.timing import measure_pair

    hist = history(args.history if args.history is not None else list(REPO.glob(HISTORY_GLOB)))
    names = [(e.name, d) for e, d in pairs() if selected(args.only, e.name, d)]
    todo = priority(names, hist)
    print(f"{len(todo)} pairs, {sum(1 for p in todo if p not in hist)} never timed; budget {args.budget_s:.0f}s",
          flush=True)
    if args.workers > 0 and args.device == "cuda":
        import concurrent.futures as cf
        import multiprocessing as mp

        pool = cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=mp.get_context("spawn"))
        from fixbits.corpus.timing import jobs_for

        futs = []
        for n, d in todo:
            k = warm_parts(len(jobs_for(entry(n))), len(todo), args.workers)
            futs += [pool.submit(_warm, n, d, i, k) for i in range(k)]
        try:
            for f in cf.as_completed(futs, timeout=args.budget_s * args.precompile_share):
                try:
                    print(f.result(), flush=True)
                except Exception as ex:
                    print(f"warm CRASH {type(ex).__name__}: {ex}", flush=True)
        except cf.TimeoutError:
            print("precompile: share of the budget used up; the rest compiles on first timing", flush=True)
        procs = list((getattr(pool, "_processes", None) or {}).values())  # before shutdown clears it
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # our own workers, by handle: stop any compile still running
            p.terminate()
        print(f"precompile done at {time.time() - t0:.0f}s", flush=True)

    if args.device == "cuda":
        import torch
        import triton

        dev = torch.cuda.get_device_name(0)
        tver = f"triton {triton.__version__}, torch {torch.__version__}"
    else:
        dev, tver = "CPU interpreter (pipeline test: times mean nothing)", "TRITON_INTERPRET=1"
    head = (f"# Pinned inner-tree vs free order ({dev}, {tver})\n\nEach mode autotuned over its own space (pinned: "
            "the rewrite's configs plus the layout variants; `rewrite only` = without the variants); finalists "
            "timed in rounds of CUDA-graph replays over rotating inputs (medians), until the ratio's spread is "
            f"<= {args.target_spread}. ratio = free time / pinned time (>= 1: pinned as fast).")
    rows: list[dict] = []
    details: list[dict] = []
    left: list[str] = []
    for i, (name, d) in enumerate(todo):
        remaining = args.budget_s - (time.time() - t0)
        if remaining < 4:
            left = [f"{n}/{dd}" for n, dd in todo[i:]]
            print(f"budget reached: {len(left)} pairs not measured", flush=True)
            break
        slice_s = min(20.0, max(2.0, 0.8 * remaining / (len(todo) - i)))
        try:
            res = measure_pair(entry(name), d, device=args.device, screen_reps=args.screen_reps, reps=args.reps,
                               top_k=args.top_k, min_rounds=args.min_rounds, max_rounds=args.max_rounds,
                               target_spread=args.target_spread, slice_s=slice_s, log=lambda m: print(m, flush=True))
        except Exception as ex:  # reported, the rest go on
            print(f"CRASH {name}/{d}: {type(ex).__name__}: {ex}", flush=True)
            continue
        row = _row(res, budget(name, d), hist.get((name, d)))
        rows.append(row)
        details.append({**row, "ratios": [round(x, 4) for x in res.rounds], "errors": list(res.errors),
                        "pinned_autotune_us": {k: round(v, 2) for k, v in res.pinned.per_config_us},
                        "free_autotune_us": {k: round(v, 2) for k, v in res.free.per_config_us}})
        print(f"{name}/{d}: free {row['free_us']:.2f}us [{row['free_best']}] pinned {row['pinned_us']:.2f}us "
              f"[{row['pinned_best']}] ratio {row['ratio']:.3f} (rewrite only {row['auto_ratio']:.3f}) spread "
              f"{row['spread']:.3f} rounds {row['rounds']} rotate {row['rotate']} {res.seconds:.1f}s "
              f"[{row['verdict']}]", flush=True)
        _write(args.out, rows, details, head, [f"{n}/{dd}" for n, dd in todo[i + 1:]])
    md = _write(args.out, rows, details, head, left)
    plotted = plot(rows, args.out / "enforcement_bench.png") if rows else False
    print("\n" + md)
    print(f"plot: {'written' if plotted else 'skipped'}; total {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
