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


def _warm(name: str, dtype: str, explore: bool) -> str:
    """Compile (launch once) every config of both modes, so the timing process hits the cache."""
    import torch

    from fixbits.corpus.common import to_device
    from fixbits.corpus.registry import entry

    t0 = time.time()
    e = entry(name)
    mod = e.load()
    shape = e.shape_dict()
    inputs = {k: to_device(v, "cuda") for k, v in mod.make_inputs(shape, dtype, "ordinary", 0).items()}
    bad = []
    jobs = [(how, cfg) for cfg in e.configs(explore=explore) for how in (True, False)]
    jobs += [(vn, c) for vn, _ in e.variants for c in e.variant_configs(vn)]
    for how, cfg in jobs:
        try:
            mod.launch(inputs, shape, cfg, how, aux=False)
        except Exception as ex:
            bad.append(f"{how} {cfg.label()}: {type(ex).__name__}: {str(ex).splitlines()[:2]}")
    torch.cuda.synchronize()
    return f"warm {name}/{dtype}: {time.time() - t0:.0f}s" + ("".join(f"\n   {b}" for b in bad))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--max-rounds", type=int, default=7)
    ap.add_argument("--target-spread", type=float, default=0.03)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=16, help="processes that precompile (0: none)")
    ap.add_argument("--no-explore", action="store_true", help="skip the widened-space pass")
    args = ap.parse_args()
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    import statistics

    from benchmarks.enforcement.report import markdown, plot, verdict, write_csv
    from fixbits.corpus.registry import budget, pairs
    from fixbits.corpus.timing import measure_pair

    # kernels with pinned variants first (they carry the layout work), then the generated ones
    todo = sorted(((e, d) for e, d in pairs() if not args.only or e.name in args.only),
                  key=lambda ed: (not ed[0].variants, not ed[0].name.startswith("inductor_gen")))
    explore_of = {(e.name, d): (not args.no_explore and bool(e.explore) and d == e.dtypes[0]) for e, d in todo}
    if args.workers > 0:
        import concurrent.futures as cf
        import multiprocessing as mp

        print(f"precompiling {len(todo)} pairs on {args.workers} processes", flush=True)
        with cf.ProcessPoolExecutor(max_workers=args.workers, mp_context=mp.get_context("spawn")) as pool:
            futs = [pool.submit(_warm, e.name, d, explore_of[(e.name, d)]) for e, d in todo]
            for f in cf.as_completed(futs):
                try:
                    print(f.result(), flush=True)
                except Exception as ex:
                    print(f"warm CRASH {type(ex).__name__}: {ex}", flush=True)
        print(f"precompile done at {time.time() - t0:.0f}s", flush=True)
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
               "auto_ratio": res.auto_ratio, "errors": len(res.errors)}
        if explore_of[(e.name, d)] and time.time() - t0 < args.budget_s * 0.9:
            extra = e.configs(explore=True)[len(e.configs()):]
            try:
                ex_res = measure_pair(e, d, rounds=2, reps=args.reps, configs=extra)
                pin_all = dict(res.pinned.per_config_us) | dict(ex_res.pinned.per_config_us)
                free_all = dict(res.free.per_config_us) | dict(ex_res.free.per_config_us)
                pb = min(pin_all, key=pin_all.__getitem__)
                fb = min(free_all, key=free_all.__getitem__)
                row["explore_ratio"] = free_all[fb] / pin_all[pb]
                row["explore_pinned_best"] = pb
                row["explore_free_best"] = fb
                res_pin_cfg = {**pin_all}
                res_free_cfg = {**free_all}
                print(f"   explore ({len(extra)} more configs): pinned {pin_all[pb]:.2f}us [{pb}] free "
                      f"{free_all[fb]:.2f}us [{fb}] ratio {row['explore_ratio']:.3f}", flush=True)
            except Exception as ex:
                print(f"   explore CRASH {type(ex).__name__}: {ex}", flush=True)
                res_pin_cfg, res_free_cfg = dict(res.pinned.per_config_us), dict(res.free.per_config_us)
        else:
            res_pin_cfg, res_free_cfg = dict(res.pinned.per_config_us), dict(res.free.per_config_us)
        if ratio < 0.95 or "explore_ratio" in row:
            for k in sorted(res_pin_cfg, key=res_pin_cfg.__getitem__):
                print(f"   {k:40s} pinned {res_pin_cfg[k]:9.2f}us free {res_free_cfg.get(k, float('nan')):9.2f}us",
                      flush=True)
        rows.append(row)
        details.append({**row, "ratios": [round(x, 4) for x in ratios], "errors": list(res.errors),
                        "pinned_per_config_us": {k: round(v, 2) for k, v in res_pin_cfg.items()},
                        "free_per_config_us": {k: round(v, 2) for k, v in res_free_cfg.items()}})
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
