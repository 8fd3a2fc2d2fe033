"""Benchmark every corpus kernel pinned vs free on the GPU, both autotuned over the same space.

    PYTHONPATH=<repo> python3 runners/device/enforcement_bench.py --out DIR [--budget-s 300]

Repeats the measurement of a pair until the spread of the pinned/free ratio over rounds is at
most --target-spread (or --max-rounds). Writes DIR/enforcement_bench.{csv,md,png,yaml}; prints the
table last.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=7)
    ap.add_argument("--target-spread", type=float, default=0.03)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    import statistics

    from benchmarks.enforcement.report import markdown, plot, verdict, write_csv
    from fixbits.corpus.registry import budget, pairs
    from fixbits.corpus.timing import measure_pair

    todo = [(e, d) for e, d in pairs() if not args.only or e.name in args.only]
    rows = []
    details = []
    for i, (e, d) in enumerate(todo):
        left = args.budget_s - (time.time() - t0)
        if left < 5:
            print(f"budget reached: {len(todo) - i} pairs not measured", flush=True)
            break
        ratios: list[float] = []
        res = None
        try:
            while True:
                res = measure_pair(e, d, rounds=args.min_rounds if not ratios else 1, reps=args.reps,
                                   log=lambda m: print(m, flush=True))
                ratios += list(res.rounds)
                spread = (max(ratios) - min(ratios)) if ratios else float("nan")
                over = time.time() - t0 > args.budget_s * (i + 1) / len(todo) + 10
                if spread <= args.target_spread or len(ratios) >= args.max_rounds or over or not ratios:
                    break
        except Exception as ex:  # reported, the rest go on
            print(f"CRASH {e.name}/{d}: {type(ex).__name__}: {ex}", flush=True)
            continue
        assert res is not None
        ratio = statistics.median(ratios) if ratios else float("nan")
        spread = (max(ratios) - min(ratios)) if ratios else float("nan")
        b = budget(e.name, d)
        row = {"kernel": e.name, "dtype": d, "free_us": res.free.best_us, "pinned_us": res.pinned.best_us,
               "ratio": ratio, "spread": spread, "rounds": len(ratios), "budget": b, "verdict": verdict(ratio, b),
               "free_best": res.free.best_config, "pinned_best": res.pinned.best_config,
               "errors": len(res.errors)}
        rows.append(row)
        details.append({**row, "ratios": [round(x, 4) for x in ratios], "errors": list(res.errors),
                        "pinned_per_config_us": {k: round(v, 2) for k, v in res.pinned.per_config_us},
                        "free_per_config_us": {k: round(v, 2) for k, v in res.free.per_config_us}})
        print(f"{e.name}/{d}: free {row['free_us']:.2f}us pinned {row['pinned_us']:.2f}us ratio {ratio:.3f} "
              f"spread {spread:.3f} rounds {len(ratios)} [{row['verdict']}]", flush=True)

    write_csv(rows, args.out / "enforcement_bench.csv")
    import torch
    import triton

    head = (f"# Pinned inner-tree vs free order ({torch.cuda.get_device_name(0)}, triton {triton.__version__}, "
            f"torch {torch.__version__})\n\nEach mode autotuned over the same config space; medians of CUDA-graph "
            "replays over rotating inputs; ratio = free time / pinned time (>= 1: pinned as fast).")
    md = markdown(rows, head)
    (args.out / "enforcement_bench.md").write_text(md)
    (args.out / "enforcement_bench.yaml").write_text(yaml.safe_dump(details, sort_keys=False))
    plotted = plot(rows, args.out / "enforcement_bench.png")
    print("\n" + md)
    print(f"plot: {'written' if plotted else 'skipped (no matplotlib)'}; total {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
