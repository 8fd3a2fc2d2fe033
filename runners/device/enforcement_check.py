"""GPU check of the inner-tree corpus: pinned invariance over every pair's whole config space
(the rewrite's configs and every layout variant's own space), equality to the CPU tree model,
free order shown to vary, and the pinned bytes against the committed golden records.

    PYTHONPATH=<repo> python3 runners/device/enforcement_check.py --out DIR [--budget-s 60]
    ... --device cpu   (smoke test under TRITON_INTERPRET=1 on the small CPU shapes)

Writes DIR/check.yaml (+ check_per_config.yaml), DIR/golden_enforcement.yaml (new records),
DIR/not_run.yaml and DIR/env.yaml, rewritten after every task; tasks still running at 90% of the
budget are dropped and listed. --speed adds a short speed table (enforcement_bench does it better).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


class _NoAlias(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:  # records are read by people: no &id anchors
        return True


def _dump(obj: object) -> str:
    return yaml.dump(obj, Dumper=_NoAlias, sort_keys=False)


def _log(msg: str) -> None:
    print(msg, flush=True)


def _check_task(name: str, dtype: str, kind: str, seed: int, device: str = "cuda",
                recorded: dict[str, str] | None = None) -> dict:
    from fixbits.corpus.check import check_pair
    from fixbits.corpus.registry import entry

    t0 = time.time()
    try:
        r = check_pair(entry(name), dtype, kind, seed, device, cpu_shape=device == "cpu", with_variants=True,
                       log=None)
    except Exception as e:
        return {"kernel": name, "dtype": dtype, "kind": kind, "seed": seed, "crash": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-3000:]}
    mod = entry(name).load()
    return {
        "kernel": name, "dtype": dtype, "kind": kind, "seed": seed, "shape": dict(r.shape),
        "configs": len(r.runs), "variant_configs": sum(1 for x in r.runs if ":" in x.config),
        "pinned_classes": r.classes("pinned"), "free_classes": r.classes("free"),
        "pinned_invariant": r.pinned_invariant, "model_equal": r.model_equal,
        "model": [asdict(m) for m in r.model], "errors": list(r.errors), "golden": r.golden(),
        "golden_match": {k: r.golden().get(k) == v for k, v in (recorded or {}).items()},
        "cpu_replay": list(getattr(mod, "CPU_REPLAY", ())), "seconds": round(time.time() - t0, 1),
        "per_config": [{"config": x.config, "pinned": dict(x.pinned), "free": dict(x.free)} for x in r.runs
                       if not x.error],
    }


def _golden_task(name: str, dtype: str, kind: str, seed: int, shas: dict[str, str], device: str = "cuda") -> dict:
    """Cheap drift check of a recorded pair: first and last config, pinned, against the record."""
    from fixbits.corpus.check import digest, run_config
    from fixbits.corpus.common import to_device
    from fixbits.corpus.registry import entry

    t0 = time.time()
    e = entry(name)
    mod = e.load()
    shape = e.shape_dict()
    row = {"kernel": name, "dtype": dtype, "kind": kind, "seed": seed, "shape": shape, "golden_only": True}
    try:
        inputs = {k: to_device(v, device) for k, v in mod.make_inputs(shape, dtype, kind, seed).items()}
        got: dict[str, set[str]] = {}
        for cfg in (e.configs()[0], e.configs()[-1]):
            for k, v in run_config(mod, inputs, shape, cfg, True).items():
                got.setdefault(k, set()).add(digest(v))
    except Exception as ex:
        row["crash"] = f"{type(ex).__name__}: {ex}"
        row["trace"] = traceback.format_exc()[-3000:]
        return row
    row["golden_match"] = {k: (got.get(k) == {v}) for k, v in shas.items()}
    row["pinned_invariant"] = all(len(v) == 1 for v in got.values())
    row["seconds"] = round(time.time() - t0, 1)
    return row


def env_info() -> dict:
    import torch
    import triton

    info = {"triton": str(triton.__version__), "torch": str(torch.__version__), "cuda": str(torch.version.cuda),
            "python": sys.version.split()[0]}
    if torch.cuda.is_available():
        info.update({"gpu": torch.cuda.get_device_name(0),
                     "capability": list(torch.cuda.get_device_capability(0))})
    return info


def _write_check(out: Path, results: list[dict], env: dict) -> None:
    """check.yaml, check_per_config.yaml and golden_enforcement.yaml from the tasks done so far."""
    results = sorted(results, key=lambda r: (r["kernel"], r["dtype"], r["kind"]))
    slim = [{k: v for k, v in r.items() if k != "per_config"} for r in results]
    (out / "check.yaml").write_text(_dump(slim))
    (out / "check_per_config.yaml").write_text(_dump(results))
    records = []
    for r in results:
        if r.get("golden_only"):
            continue
        for o, sha in sorted((r.get("golden") or {}).items()):
            records.append({"kernel": r["kernel"], "dtype": r["dtype"], "kind": r["kind"], "seed": r["seed"],
                            "shape": r["shape"], "output": o, "sha256": sha, "cpu_replay": o in r["cpu_replay"],
                            "model_equal": all(m["equal"] for m in r["model"] if m["output"] == o)})
    (out / "golden_enforcement.yaml").write_text(_dump(
        {"schema": "fixbits.enforcement.golden/1", "environment": env, "records": records}))


def _stop_pool(pool: cf.ProcessPoolExecutor) -> None:
    """Budget reached: drop queued tasks and end our own worker processes (by handle, not by name)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:  # a worker that inherited an ignored SIGTERM (e.g. under a pytest-xdist worker) is killed
        p.join(timeout=3)
        if p.is_alive():
            p.kill()
            p.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 4))
    ap.add_argument("--quick", action="store_true",
                    help="pairs already in matrices/golden/enforcement_*.yaml and without variants get a cheap "
                         "two-config drift check against the record instead of the full space")
    ap.add_argument("--only", nargs="*", default=None, help="kernel or kernel:dtype items (space/comma-separated)")
    ap.add_argument("--kinds", nargs="*", default=["wide", "ordinary"])
    ap.add_argument("--speed", action="store_true", help="also time pinned vs free (enforcement_bench does it better)")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu = smoke test under TRITON_INTERPRET=1 (small shapes)")
    args = ap.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported, here and in the spawned workers
        args.quick = False  # records are at GPU shapes; the CPU smoke run uses the small shapes
    t_start = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    from fixbits.corpus import golden as gold
    from fixbits.corpus.registry import budget, pairs, selected

    env = env_info()
    (args.out / "env.yaml").write_text(yaml.safe_dump(env))
    _log(f"env: {env}")
    # pairs with layout variants first (never checked on a GPU before), then the biggest spaces,
    # so the pool does not end waiting on one long task; kinds outermost: the second kind of a
    # pair finds the first one's compiles in the disk cache
    def cost(ed: tuple) -> tuple:
        e = ed[0]
        n = len(e.configs()) * 2 + sum(len(e.variant_configs(v)) for v, _ in e.variants)
        return (not e.variants, -n * len(e.load().KERNELS))

    chosen = sorted(((e, d) for e, d in pairs() if selected(args.only, e.name, d)), key=cost)
    recorded: dict[tuple[str, str, str, int], dict[str, str]] = {}
    if args.device == "cuda":
        for rec in gold.all_records():
            recorded.setdefault((rec.kernel, rec.dtype, rec.kind, rec.seed), {})[rec.output] = rec.sha256
    full_tasks, golden_tasks = [], []
    for k in args.kinds:
        for e, d in chosen:
            key = (e.name, d, k, 0)
            if args.quick and key in recorded and not e.variants:
                golden_tasks.append(key)
            else:
                full_tasks.append(key)
    todo = full_tasks + golden_tasks
    _log(f"(a) invariance: {len(full_tasks)} full (kernel, dtype, kind) tasks + {len(golden_tasks)} drift checks "
         f"of recorded pairs on {args.workers} workers, budget {args.budget_s:.0f}s")
    results: list[dict] = []
    deadline_a = t_start + (0.9 if not args.speed else 0.6) * args.budget_s
    pool = cf.ProcessPoolExecutor(max_workers=max(1, args.workers), mp_context=mp.get_context("spawn"))
    futs = {(pool.submit(_check_task, *t, args.device, recorded.get(t)) if t in full_tasks else
             pool.submit(_golden_task, *t, recorded[t], args.device)): t for t in todo}
    done_keys: set = set()
    try:
        for fut in cf.as_completed(futs, timeout=max(1.0, deadline_a - time.time())):
            t = futs[fut]
            done_keys.add(t)
            try:
                r = fut.result()
            except Exception as e:
                r = {"kernel": t[0], "dtype": t[1], "kind": t[2], "seed": t[3], "crash": f"{type(e).__name__}: {e}"}
            results.append(r)
            _write_check(args.out, results, env)  # partial output as it goes
            if "crash" in r:
                _log(f"CRASH {t}: {r['crash']}\n{r.get('trace', '')}")
                continue
            if r.get("golden_only"):
                bad = [k for k, ok in r["golden_match"].items() if not ok]
                _log(f"{r['kernel']}/{r['dtype']}/{r['kind']}: drift check vs record "
                     f"{'OK' if not bad else 'MOVED ' + str(bad)} invariant={r['pinned_invariant']} {r['seconds']}s")
                continue
            bad_model = [m for m in r["model"] if not m["equal"]]
            moved = [k for k, ok in r["golden_match"].items() if not ok]
            _log(f"{r['kernel']}/{r['dtype']}/{r['kind']}: configs={r['configs']} (variants {r['variant_configs']}) "
                 f"pinned={r['pinned_classes']} free={r['free_classes']} model={'OK' if not bad_model else 'DIFF'} "
                 f"record={'none' if not r['golden_match'] else ('MOVED ' + str(moved) if moved else 'OK')} "
                 f"errors={len(r['errors'])} {r['seconds']}s")
            for m in bad_model[:4]:
                _log(f"   model diff {m['output']} @ {m['config']}: {m['count']} differ, first {m['first_index']} "
                     f"got {m['got_bits']} want {m['want_bits']}")
            for er in r["errors"][:3]:
                _log(f"   error {er[:1500]}")
            if not r["pinned_invariant"] and not r["errors"]:
                for pc in r["per_config"]:
                    _log(f"   pinned {pc['config']}: { {k: v[:10] for k, v in pc['pinned'].items()} }")
    except cf.TimeoutError:
        left = [t for t in todo if t not in done_keys]
        _log(f"(a) budget reached: {len(left)} tasks not finished: {['/'.join(map(str, t[:3])) for t in left]}")
        for t in left:
            results.append({"kernel": t[0], "dtype": t[1], "kind": t[2], "seed": t[3], "not_run": "budget"})
    _stop_pool(pool)
    results.sort(key=lambda r: (r["kernel"], r["dtype"], r["kind"]))
    _write_check(args.out, [r for r in results if "not_run" not in r], env)
    (args.out / "not_run.yaml").write_text(_dump([r for r in results if "not_run" in r]))
    speed_rows = []
    if args.speed and args.device == "cuda":
        from fixbits.corpus.registry import entry
        from fixbits.corpus.timing import measure_pair

        _log("(b) speed: pinned vs free, both autotuned over the same space (pinned variants included)")
        order = sorted(pairs(), key=lambda ed: (not ed[0].variants, not ed[0].name.startswith("inductor_gen")))
        for e, d in order:
            if not selected(args.only, e.name, d):
                continue
            if time.time() - t_start > 0.97 * args.budget_s:
                _log(f"(b) budget reached before {e.name}/{d}")
                break
            try:
                s = measure_pair(entry(e.name), d, min_rounds=2, max_rounds=3, slice_s=5.0, log=_log)
            except Exception as ex:
                _log(f"speed CRASH {e.name}/{d}: {type(ex).__name__}: {ex}")
                continue
            row = {"kernel": e.name, "dtype": d, "free_us": round(s.free.best_us, 2),
                   "pinned_us": round(s.pinned.best_us, 2), "ratio": round(s.ratio, 4),
                   "spread": round(s.spread, 4), "budget": budget(e.name, d),
                   "free_best": s.free.best_config, "pinned_best": s.pinned.best_config,
                   "auto_ratio": round(s.auto_ratio, 4), "errors": len(s.errors)}
            speed_rows.append(row)
            _log(f"speed {e.name}/{d}: free {row['free_us']}us [{row['free_best']}] pinned {row['pinned_us']}us "
                 f"[{row['pinned_best']}] ratio {row['ratio']} (rewrite only {row['auto_ratio']}) "
                 f"spread {row['spread']}")
            if s.ratio < 0.95:
                fr = dict(s.free.per_config_us)
                for k, v in sorted(s.pinned.per_config_us, key=lambda kv: kv[1]):
                    _log(f"   {k:40s} pinned {v:9.2f}us free {fr.get(k, float('nan')):9.2f}us")
        if speed_rows:
            with open(args.out / "speed.csv", "w", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=list(speed_rows[0]))
                w.writeheader()
                w.writerows(speed_rows)

    print("\n=== summary: invariance (pinned classes / free classes per output) ===")
    print(f"{'kernel':22s} {'dtype':9s} {'kind':8s} {'cfgs':>4s} {'pinned':>7s} {'free':>5s} {'model':>6s} {'err':>4s}")
    for r in results:
        if "crash" in r or "not_run" in r:
            print(f"{r['kernel']:22s} {r['dtype']:9s} {r['kind']:8s} {'CRASH' if 'crash' in r else 'not run (budget)'}")
            continue
        if r.get("golden_only"):
            ok = all(r["golden_match"].values()) and r["pinned_invariant"]
            print(f"{r['kernel']:22s} {r['dtype']:9s} {r['kind']:8s} record {'matches' if ok else 'MOVED'}")
            continue
        pc = max(r["pinned_classes"].values(), default=0)  # 1 = invariant
        fc = max(r["free_classes"].values(), default=0)
        print(f"{r['kernel']:22s} {r['dtype']:9s} {r['kind']:8s} {r['configs']:4d} {pc:7d} {fc:5d} "
              f"{'ok' if r['model_equal'] else 'DIFF':>6s} {len(r['errors']):4d}")
    inv = sum(1 for r in results if r.get("pinned_invariant") and not r.get("golden_only"))
    nfull = sum(1 for r in results if not r.get("golden_only"))
    rec = [ok for r in results if not r.get("golden_only") for ok in (r.get("golden_match") or {}).values()]
    print(f"full checks against committed records: {sum(rec)}/{len(rec)} outputs match; "
          f"variant configs checked: {sum(r.get('variant_configs', 0) for r in results)}; "
          f"model equal: {sum(1 for r in results if r.get('model_equal'))}/{nfull}")
    gm = [r for r in results if r.get("golden_only") and "golden_match" in r]
    print(f"drift checks against records: {sum(1 for r in gm if all(r['golden_match'].values()))}/{len(gm)} match")
    print(f"pinned invariant: {inv}/{nfull}; free varied in "
          f"{sum(1 for r in results if max((r.get('free_classes') or {0: 0}).values()) > 1)} tasks")
    if speed_rows:
        print("\n=== summary: speed (ratio = free_us / pinned_us, >= budget passes) ===")
        for row in speed_rows:
            flag = "ok" if row["ratio"] >= row["budget"] else "SLOW"
            print(f"{row['kernel']:22s} {row['dtype']:9s} free {row['free_us']:9.2f} pinned {row['pinned_us']:9.2f} "
                  f"ratio {row['ratio']:.3f} spread {row['spread']:.3f} {flag}")
        n = len(speed_rows)
        within = sum(1 for r in speed_rows if r["ratio"] >= 0.95)
        print(f"within 5%: {within}/{n}; worst {min(r['ratio'] for r in speed_rows):.3f}")
    print(f"total {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
