#!/usr/bin/env python3
"""GPU: build the sm_90 cuBLASLt arch profiles, then verify them on realistic and fuzz shapes.

    PYTHONPATH=<repo> python3 runners/device/reconstruct.py --out DIR [--budget-s 480]

Part 1 (per dtype: fp16, bf16, fp8_e4m3 -> fp32): heuristic scan, probe each distinct answer,
verify, write DIR/profiles/<arch>_cublaslt<ver>_<in>_<out>.yaml (the lead commits them to
matrices/profiles/) and DIR/reconstruct_<in>_<out>.json.
Part 2 (sweep): for the 390 realistic shapes and >= 2000 fuzz shapes, the emulator with the
profile's descriptor against cuBLAS's bytes, ordinary and wide draws. Inputs are drawn on the
GPU; only sampled rows of A and columns of B come back, and the emulator computes exactly those
outputs (outputs are independent, so a sampled comparison is exact where it looks).
Every mismatch is explained: answer not in the profile, split-K tail defect (the entry's
descriptor with the tail dropped reproduces cuBLAS), or a true mismatch.
Writes DIR/sweep.csv, DIR/summary.yaml and prints a summary table last. Partial output is
written as it goes.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import yaml  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=480.0)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--dtypes", default="fp16,bf16,fp8_e4m3")
    p.add_argument("--max-queries", type=int, default=30000)
    p.add_argument("--fuzz", type=int, default=2000)
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--profiles", default=None, help="use these profiles for the sweep (skip part 1)")
    p.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) - 2)),
                   help="processes probing answers in parallel (each has its own CUDA context)")
    return p.parse_args()


DEVICE = "cuda"  # a CPU smoke test of the script's logic sets "cpu"


def gpu_draw(shape: tuple[int, int], dtype: str, kind: str, gen: Any) -> Any:
    import torch

    from fixbits.cublas.torch_dtypes import torch_dtype

    x = torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32)
    if kind == "wide":
        lo, hi = (-6, 6) if dtype.startswith("fp8") else (-12, 12)
        e = torch.randint(lo, hi + 1, shape, generator=gen, device=DEVICE).float()
        x = x * torch.exp2(e)
    if dtype == "fp8_e4m3":
        x = x.clamp(-448, 448)
    return x.to(torch_dtype(dtype))


def sample_idx(n: int, count: int, rng: np.random.Generator) -> list[int]:
    if n <= count:
        return list(range(n))
    return sorted(set(rng.choice(n, count - 2, replace=False).tolist()) | {0, n - 1})


def compare_shape(lt: Any, desc: Any, shape: tuple[int, int, int], in_dtype: str, out_dtype: str, draws: int,
                  seed: int, deadline: float, cells: int = 8) -> tuple[int, int, int, list[str]]:
    """(draws run, byte comparisons, mismatching elements, first mismatch notes)."""
    import torch

    from fixbits.cublas.backend import to_numpy
    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits

    m, n, k = shape
    gen = torch.Generator(device=DEVICE)
    rng = np.random.default_rng(seed)
    done = comps = bad = 0
    notes: list[str] = []
    for d in range(draws):
        if time.time() > deadline:
            break
        kind = ("ordinary", "wide")[d % 2]
        gen.manual_seed(seed * 100 + d)
        a = gpu_draw((m, k), in_dtype, kind, gen)
        b = gpu_draw((k, n), in_dtype, kind, gen)
        c = lt.matmul(a, b, out_dtype)
        rows, cols = sample_idx(m, cells, rng), sample_idx(n, cells, rng)
        got = to_numpy(c[rows][:, cols], out_dtype)
        a_np = to_numpy(a[rows], in_dtype)
        b_np = to_numpy(b[:, cols], in_dtype)
        del a, b, c
        em = emulate(desc, a_np, b_np)
        diff = bits(np.ascontiguousarray(em)) != bits(np.ascontiguousarray(got))
        comps += diff.size
        nb = int(diff.sum())
        bad += nb
        done += 1
        if nb and len(notes) < 2:
            i, j = np.argwhere(diff)[0]
            notes.append(f"{kind} draw {d}: {nb}/{diff.size} differ, first ({rows[i]},{cols[j]}) "
                         f"got {float(got[i, j])!r} emu {float(em[i, j])!r}")
    return done, comps, bad, notes


def tail_explains(lt: Any, desc: Any, shape: tuple[int, int, int], in_dtype: str, out_dtype: str, seed: int,
                  deadline: float) -> bool:
    """True when the entry's descriptor with its split's tail dropped reproduces cuBLAS."""
    from fixbits.desc import KCut

    if not desc.k_cuts or desc.k_cuts[0].count is None:
        return False
    c0 = desc.k_cuts[0]
    alt = desc.replace(k_cuts=(KCut("contiguous", count=c0.count, granule=c0.granule, span_rule="tail_dropped",
                                    merge=c0.merge),) + desc.k_cuts[1:])
    if alt == desc:
        return False
    done, _, bad, _ = compare_shape(lt, alt, shape, in_dtype, out_dtype, 2, seed, deadline)
    return done > 0 and bad == 0


def sweep(profiles: dict[str, Any], out: Path, budget_s: float, fuzz: int, draws: int, log: Any) -> dict[str, Any]:
    import torch

    from fixbits.cublas.lt import CublasLt
    from fixbits.probe.profile import NotInProfile
    from fixbits.shapes import fuzz_shapes, realistic_shapes

    t0 = time.time()
    deadline = t0 + budget_s
    lt = CublasLt()
    real = [(s.m, s.n, s.k, "realistic") for s in realistic_shapes()]
    fz = [(s.m, s.n, s.k, "fuzz") for s in fuzz_shapes(0, fuzz)]
    cases = []
    # interleave so a short budget still covers both sets
    for i in range(max(len(real), len(fz))):
        if i < len(real):
            cases.append(real[i])
        if i < len(fz):
            cases.append(fz[i])
    stats: dict[str, Any] = {}
    path = out / "sweep.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["dtype", "set", "m", "n", "k", "answer", "outcome", "draws", "comparisons", "mismatches", "note"])
        dtypes = list(profiles)
        ci = 0
        while time.time() < deadline and ci < len(cases) * len(dtypes):
            m, n, k, which = cases[ci // len(dtypes)]
            dt = dtypes[ci % len(dtypes)]
            ci += 1
            prof = profiles[dt]
            st = stats.setdefault(dt, {"shapes": 0, "draws": 0, "comparisons": 0, "mismatching_shapes": 0,
                                       "not_in_profile": 0, "tail_defect": 0, "true_mismatch": 0, "errors": 0, "no_algorithm": 0,
                                       "skipped_fp8_k": 0})
            if dt.startswith("fp8") and k % 16:
                st["skipped_fp8_k"] += 1
                continue
            if m * n * 4 + (m + n) * k * 2 > 60e9:
                continue
            try:
                ans = lt.heuristic(m, n, k, dt, prof.out_dtype)
                key = ans.key_str()
                try:
                    desc = prof.lookup(ans)
                except NotInProfile:
                    st["not_in_profile"] += 1
                    st["shapes"] += 1
                    w.writerow([dt, which, m, n, k, key, "not_in_profile", 0, 0, "", ""])
                    continue
                done, comps, bad, notes = compare_shape(lt, desc, (m, n, k), dt, prof.out_dtype, draws, 1000 + ci,
                                                        deadline)
                st["shapes"] += 1
                st["draws"] += done
                st["comparisons"] += comps
                outcome = "match"
                if bad:
                    st["mismatching_shapes"] += 1
                    if tail_explains(lt, desc, (m, n, k), dt, prof.out_dtype, 1000 + ci, deadline):
                        outcome = "tail_defect"
                        st["tail_defect"] += 1
                    else:
                        outcome = "mismatch"
                        st["true_mismatch"] += 1
                w.writerow([dt, which, m, n, k, key, outcome, done, comps, bad, " | ".join(notes)])
            except Exception as exc:  # noqa: BLE001
                no_algo = type(exc).__name__ == "NoAlgorithmError"
                st["no_algorithm" if no_algo else "errors"] += 1
                w.writerow([dt, which, m, n, k, "", "no_algorithm" if no_algo else "error", 0, 0, "",
                            f"{type(exc).__name__}: {exc}"[:300]])
                torch.cuda.empty_cache()
            if ci % 50 == 0:
                fh.flush()
    log(f"sweep: {ci} (shape, dtype) cases in {time.time() - t0:.0f}s")
    return stats


def main() -> int:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prof_dir = out / "profiles"
    prof_dir.mkdir(exist_ok=True)
    t0 = time.time()
    log_lines: list[str] = []

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_lines.append(msg)

    from fixbits.probe.profile import load
    from fixbits.probe.reconstruct import reconstruct

    dtypes = [d for d in args.dtypes.split(",") if d]
    summaries: dict[str, Any] = {}
    # budget: 60% reconstruction (split over dtypes, fp8 least), 40% sweep
    weights = {"fp16": 0.45, "bf16": 0.35, "fp8_e4m3": 0.20}
    recon_budget = 0.6 * args.budget_s
    if args.profiles:
        prof_dir = Path(args.profiles)
    else:
        for dt in dtypes:
            b = recon_budget * weights.get(dt, 0.2) / sum(weights.get(x, 0.2) for x in dtypes)
            try:
                summaries[dt] = reconstruct(arch=args.arch, in_dtype=dt, out_dtype="fp32", out_dir=prof_dir,
                                            budget_s=b, max_queries=args.max_queries, scan_budget_s=min(40.0, 0.3 * b),
                                            log=log, workers=args.workers, per_answer_s=min(90.0, 0.6 * b))
            except Exception as exc:  # noqa: BLE001
                summaries[dt] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=5)}
                log(f"[{dt}] reconstruct crashed: {exc}")
            (out / "summary.yaml").write_text(yaml.safe_dump({"reconstruct": summaries, "partial": True},
                                                             sort_keys=False))
    profiles = {}
    for p in sorted(prof_dir.glob("*.yaml")):
        try:
            prof = load(p)
            if prof.out_dtype == "fp32" and prof.dtype in dtypes:
                profiles[prof.dtype] = prof
        except Exception as exc:  # noqa: BLE001
            log(f"cannot load {p}: {exc}")
    stats: dict[str, Any] = {}
    remaining = args.budget_s - (time.time() - t0)
    if profiles and remaining > 10:
        try:
            stats = sweep(profiles, out, remaining - 5, args.fuzz, args.draws, log)
        except Exception as exc:  # noqa: BLE001
            stats = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=5)}
    (out / "summary.yaml").write_text(yaml.safe_dump({"reconstruct": summaries, "sweep": stats,
                                                      "wall_s": round(time.time() - t0, 1)}, sort_keys=False))
    print("\n== reconstruct ==")
    print(f"{'dtype':10} {'queries':>8} {'answers':>8} {'probed':>7} {'predicted':>9} {'failed':>7} {'left':>5}")
    for dt, s in summaries.items():
        if "error" in s:
            print(f"{dt:10} ERROR {s['error'][:90]}")
            continue
        print(f"{dt:10} {s['queries']:8d} {s['answers']:8d} {len(s['probed']):7d} {len(s.get('predicted', [])):9d} "
              f"{len(s['failed']):7d} {len(s['skipped_budget']):5d}")
    print("== sweep ==")
    print(f"{'dtype':10} {'shapes':>6} {'draws':>6} {'compared':>9} {'notprof':>7} {'tail':>5} {'mismatch':>8} "
          f"{'noalgo':>6} {'err':>4}")
    for dt, s in stats.items():
        if not isinstance(s, dict):
            print(dt, s)
            continue
        print(f"{dt:10} {s['shapes']:6d} {s['draws']:6d} {s['comparisons']:9d} {s['not_in_profile']:7d} "
              f"{s['tail_defect']:5d} {s['true_mismatch']:8d} {s['no_algorithm']:6d} {s['errors']:4d}")
    print(f"wall {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
