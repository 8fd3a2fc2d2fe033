#!/usr/bin/env python3
"""GPU: draw cuBLAS at shapes where a split entry's span granule shows, for the entries whose own
shapes leave it open (fixbits.probe.granules).

H100 session 40 swept two fp8 entries wrong at granule 64 (the kernel rounds to 128); the audit
counts 88 fp8 entries (6 at 64) and 6 to 65 per 16-bit profile not pinned. Per open entry this asks
the heuristic at K near the entry's own shapes where the readings part (at most --asks per entry),
keeps up to --per-entry shapes the heuristic sends to the entry's answer, and draws cuBLAS there
(--draws, ordinary and wide). Only cells come back (DIR/sweep_samples/, the sweep's format); the
judgement is CPU work:

    PYTHONPATH=<repo> python3 runners/device/pin_granules.py --out DIR --budget-s 200 [--pairs fp8_e4m3:fp32]
    .venv/bin/python benchmarks/reconstruction/settle_steps.py DIR --keys 'KEY|KEY' --note '' \\
        --readings granule --out DIR/settle.jsonl

DIR/pin_granules.json lists every open entry with the shapes found (or why none were).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

PAIRS = ("fp8_e4m3:fp32", "fp16:fp32", "bf16:fp32", "fp16:fp16", "bf16:bf16")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--budget-s", type=float, default=200.0)
    p.add_argument("--profiles", type=Path, default=Path("matrices/profiles"))
    p.add_argument("--pairs", nargs="+", default=list(PAIRS), choices=PAIRS, metavar="IN:OUT")
    p.add_argument("--only-reading", default=None, help="only entries at this granule reading (e.g. 64)")
    p.add_argument("--per-entry", type=int, default=2)
    p.add_argument("--asks", type=int, default=30, help="heuristic queries per entry at most")
    p.add_argument("--draws", type=int, default=6)
    p.add_argument(
        "--found",
        type=Path,
        default=None,
        metavar="JSON",
        help="an earlier run's pin_granules.json: draw at the shapes it found (no search; the search "
        "is CPU-bound, 157 s for 213 entries on 14 H100-host cores)",
    )
    p.add_argument(
        "--search-share",
        type=float,
        default=0.5,
        help="share of the budget the search for parting shapes may take (the rest draws)",
    )
    p.add_argument("--draw-seed", type=int, default=3, choices=range(32), metavar="0..31")
    return p.parse_args(argv)


def candidates(job: tuple[Any, int]) -> list[tuple[int, int, int]]:
    """CPU, in a worker: the entry's parting shapes (deep K makes each reading's address map slow)."""
    from itertools import islice

    from fixbits.probe.granules import parting_shapes

    og, asks = job
    return list(islice(parting_shapes(og), asks))


def search(rows: list[Any], asks: int, until: float) -> list[list[tuple[int, int, int]] | None]:
    """Every entry's parting shapes, computed in worker processes until ``until`` (None for the
    entries not done by then): session 41's first call spent its whole budget here (157 s for 213
    entries on 14 host cores) and drew nothing."""
    from concurrent.futures import wait

    ex = ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 2))
    futs = [ex.submit(candidates, (og, asks)) for og in rows]
    wait(futs, timeout=max(0.0, until - time.time()))
    out = [f.result() if f.done() and f.exception() is None else None for f in futs]
    ex.shutdown(wait=False, cancel_futures=True)
    return out


def find_shapes(
    lt: Any, og: Any, cands: list[tuple[int, int, int]], dt: str, od: str, per_entry: int
) -> tuple[list[tuple[int, int, int]], int]:
    from fixbits.probe.profile import answer_key

    found: list[tuple[int, int, int]] = []
    asked = 0
    for m, n, k in cands:
        if len(found) >= per_entry:
            break
        asked += 1
        try:
            if answer_key(lt.heuristic(m, n, k, dt, od)) == og.key:
                found.append((m, n, k))
        except Exception:  # noqa: BLE001  (no algorithm at this K: another K)
            continue
    return found, asked


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.time()
    deadline = t0 + args.budget_s
    from fixbits.cublas.lt import CublasLt
    from fixbits.probe.granules import open_granules
    from fixbits.probe.profile import available, load
    from fixbits.probe.sweep import Case, collect

    args.out.mkdir(parents=True, exist_ok=True)
    lt = CublasLt()
    # (--found draws at recorded shapes: no profile is read)
    profs = {} if args.found else {(p.dtype, p.out_dtype): p for p in map(load, available(args.profiles))}
    report: list[dict[str, Any]] = []
    todo: dict[tuple[str, str], list[Any]] = {}
    if args.found is not None:
        report = [r for r in json.loads(args.found.read_text()) if r["pair"] in args.pairs]
        for r in report:
            dt, od = r["pair"].split(":")
            todo.setdefault((dt, od), []).extend(Case("pin", *map(int, s.split("x"))) for s in r["shapes"])
    for pair in [] if args.found is not None else args.pairs:
        dt, od = pair.split(":")
        if (dt, od) not in profs:
            print(f"{pair}: no profile under {args.profiles}", flush=True)
            continue
        total, rows = open_granules(profs[(dt, od)])
        rows = [r for r in rows if args.only_reading in (None, r.reading)]
        # the suspect class (any reading but the step's 128) first, shallow entries first
        rows.sort(key=lambda r: (r.reading == "128", max(s[2] for s in r.shapes)))
        print(f"{pair}: {len(rows)} open of {total} split entries", flush=True)
        cands = search(rows, args.asks, t0 + args.budget_s * args.search_share)
        for og, cs in zip(rows, cands, strict=True):
            if cs is None:
                report.append(
                    {
                        "pair": pair,
                        "key": og.key,
                        "reading": og.reading,
                        "shapes": [],
                        "asked": 0,
                        "why": "search out of time",
                    }
                )
                continue
            shapes, asked = find_shapes(lt, og, cs, dt, od, args.per_entry)
            report.append(
                {
                    "pair": pair,
                    "key": og.key,
                    "reading": og.reading,
                    "also_fit": og.readings(),
                    "own": ["x".join(map(str, s)) for s in og.shapes],
                    "asked": asked,
                    "shapes": ["x".join(map(str, s)) for s in shapes],
                }
            )
            todo.setdefault((dt, od), []).extend(Case("pin", *s) for s in shapes)
    (args.out / "pin_granules.json").write_text(json.dumps(report, indent=1))
    print(
        f"shapes found for {sum(bool(r['shapes']) for r in report)} of {len(report)} open entries "
        f"in {time.time() - t0:.0f}s",
        flush=True,
    )
    for (dt, od), cs in todo.items():
        cs.sort(key=lambda c: c.m * c.k + c.k * c.n)
        collect(lt, cs, [dt], od, args.draws, deadline, args.out, draw_seed=args.draw_seed)
    print(f"done in {time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
