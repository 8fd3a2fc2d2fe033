#!/usr/bin/env python3
"""Shapes on which two readings of an answer part, for a GPU recheck (CPU).

    .venv/bin/python benchmarks/reconstruction/step_candidates.py FINDINGS.yaml OUT.csv [--per-key 3]

    .venv/bin/python benchmarks/reconstruction/step_candidates.py --ambiguous RESULTS.jsonl OUT.csv

FINDINGS is stage_rule.py's --out: per disagreeing entry, its step and the implied one. With
--ambiguous, RESULTS is predict_offline.py's output: every answer it left ambiguous, with the
readings its recorded shapes could not part, gets shapes where all of them part (K moved as
below), for fit_replay.py --readings to settle after the device replay. For each,
K is moved around the entry's recorded shapes (M and N kept, so the heuristic is likely to give
the same answer) to the nearest values where the two readings' trees differ; both readings are emulated on one ordinary and one wide draw, and the shapes
where most output elements differ are written as matmul_check-style rows (pair, m, n, k, answer,
seed, outcome) for runners/device/matmul_replay.py, which keeps cuBLAS's full outputs.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))
sys.path.insert(0, str(ROOT / "benchmarks" / "reconstruction"))

import yaml  # noqa: E402


def base_shapes(entry: Any) -> list[tuple[int, int, int]]:
    """The entry's probe shape and the shapes its note says it was verified on."""
    from explain_mismatch import verification_shapes

    return list(dict.fromkeys([tuple(entry.shape), *verification_shapes(entry.note)]))


def main() -> int:
    from matmul_check import case_seed, draw_operands

    from fixbits.emulate import emulate
    from fixbits.kernels.backend import to_numpy
    from fixbits.numerics.formats import bits
    from fixbits.probe import profile as profiles
    from fixbits.probe.plan import equivalent_on

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("findings", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--per-key", type=int, default=3)
    ap.add_argument(
        "--max-out", type=int, default=40000, help="largest M*N kept (cuBLAS outputs come back whole)"
    )
    ap.add_argument("--max-mnk", type=float, default=1.5e8, help="largest M*N*K screened (emulation cost)")
    ap.add_argument("--bases", type=int, default=2, help="recorded shapes per entry, cheapest first")
    ap.add_argument("--ambiguous", action="store_true", help="FINDINGS is predict_offline.py's results")
    ap.add_argument(
        "--seed-search",
        type=int,
        default=0,
        metavar="R",
        help="with --ambiguous, narrow outputs: also try row seeds 0..R-1 at each recorded shape itself (its K "
        "reached the answer) for a spike draw on which every two readings part",
    )
    args = ap.parse_args()
    if args.ambiguous:
        rows = ambiguous_rows(args)
        write_rows(rows, args.out)
        return 0
    rows = []
    for f in yaml.safe_load(args.findings.read_text()):
        if "implied" not in f:
            continue
        prof = profiles.load(Path(profiles.PROFILE_DIR) / f["profile"])
        entry = prof.entries[f["key"]]
        dt, od = prof.dtype, prof.out_dtype
        if od != "fp32":
            continue  # narrow outputs hide the step on ordinary and wide draws; their fp32 twins carry it
        old = entry.desc.replace(k_loop_step=f["step"])
        new = entry.desc.replace(k_loop_step=f["implied"])
        scored = []
        bases = sorted(
            (
                s
                for s in base_shapes(entry)
                if s[0] * s[1] <= args.max_out and s[0] * s[1] * s[2] <= args.max_mnk
            ),
            key=lambda s: s[0] * s[1] * s[2],
        )
        for m, n, k in bases[: args.bases]:
            # K where the two readings' trees differ (fixbits.probe.plan.equivalent_on), nearest first
            parts = [
                kk
                for d in range(0, 257)
                for kk in {k - d, k + d}
                if kk > 0 and not equivalent_on(old, new, kk)
            ][:2]
            for kk in parts:
                diff = 0
                for d in (0, 1):  # one ordinary and one wide draw
                    a, b = (to_numpy(x, dt) for x in draw_operands(m, n, kk, dt, 0, d, device="cpu"))
                    diff += int(
                        (bits(emulate(old.at_k(kk), a, b)) != bits(emulate(new.at_k(kk), a, b))).sum()
                    )
                scored.append((diff / (2 * m * n), (m, n, kk)))
                print(f"{f['key']} {dt}->{od} {m}x{n}x{kk}: {diff} of {2 * m * n} differ", flush=True)
        scored.sort(reverse=True)
        for share, (m, n, k) in [x for x in scored if x[0] > 0][: args.per_key]:
            pair = f"{dt}->{od}"
            rows.append(
                {
                    "pair": pair,
                    "set": "step",
                    "m": m,
                    "n": n,
                    "k": k,
                    "answer": f["key"],
                    "seed": case_seed(pair, m, n, k),
                    "outcome": "mismatch",
                    "desc_hash": "",
                    "share_differing": round(share, 4),
                }
            )
    write_rows(rows, args.out)
    return 0


def write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["pair"])
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} shapes written to {out}")


def ambiguous_rows(args: Any) -> list[dict[str, Any]]:
    """Rows for the answers predict_offline left ambiguous: near each recorded shape (cheapest
    first, M and N kept), the nearest K where the readings fall in as many classes as there are
    readings (fixbits.probe.recover.draw_classes), kept when the replay's own first draws (one
    ordinary, one wide, and for a narrow output a spike draw: matmul_replay.py --spike-draws)
    give every two readings distinct bits."""
    import json

    from matmul_check import case_seed, draw_operands

    from fixbits.desc import GEMMDesc
    from fixbits.emulate import emulate
    from fixbits.kernels.backend import to_numpy
    from fixbits.numerics.formats import bits
    from fixbits.probe.recover import draw_classes
    from fixbits.probe.spikes import hides_ulps

    rows: list[dict[str, Any]] = []
    for line in args.findings.read_text().splitlines():
        r = json.loads(line)
        readings = [GEMMDesc.from_dict(d) for d in r.get("readings", [])]
        if r.get("outcome") != "ambiguous" or len(readings) < 2 or not r.get("recorded"):
            continue
        dt, od = r["dtype"], r["out_dtype"]
        spiked = hides_ulps(od)  # narrow outputs: the replay's third draw is a spike draw (--spike-draws)
        draws = (0, 1, 2) if spiked else (0, 1)
        bases = sorted(
            (tuple(s) for s in r["recorded"] if s[0] * s[1] <= args.max_out and s[0] * s[1] * s[2] <= args.max_mnk),
            key=lambda s: s[0] * s[1] * s[2],
        )
        found: list[tuple[float, tuple[int, int, int]]] = []
        for m, n, k in bases[: args.bases]:
            parts = [kk for d in range(0, 257) for kk in dict.fromkeys((k + d, k - d))
                     if kk > 0 and len(draw_classes(readings, kk)) == len(readings)][:2]  # fmt: skip
            for kk in parts:
                worst = 1.0
                outs = []
                for d in draws:
                    a, b = (to_numpy(x, dt) for x in draw_operands(m, n, kk, dt, 0, d, device="cpu", spikes=spiked))
                    outs.append([bits(emulate(x.at_k(kk), a, b)) for x in readings])
                for i in range(len(readings)):
                    for j in range(i):
                        diff = sum(int((o[i] != o[j]).sum()) for o in outs)
                        worst = min(worst, diff / (len(draws) * m * n))
                print(f"{r['key']} {dt}->{od} {m}x{n}x{kk}: {len(readings)} readings, closest pair parts on "
                      f"{worst:.1%} of the cells", flush=True)  # fmt: skip
                if worst > 0:
                    found.append((worst, (m, n, kk)))
        found.sort(reverse=True)
        for share, (m, n, k) in found[: args.per_key]:
            pair = f"{dt}->{od}"
            rows.append({"pair": pair, "set": "ambiguous", "m": m, "n": n, "k": k, "answer": r["key"],
                         "seed": case_seed(pair, m, n, k), "outcome": "mismatch", "desc_hash": "",
                         "share_differing": round(share, 4)})  # fmt: skip
        if spiked and args.seed_search and not found:
            for m, n, k in bases[: args.bases]:
                got = parting_seed(readings, m, n, k, dt, args.seed_search)
                what = f"seed {got[0]} tells {got[1]} of {got[2]} reading classes apart" if got else "found none"
                print(f"{r['key']} {dt}->{od} {m}x{n}x{k}: seed search {what}", flush=True)
                if got:
                    rows.append({"pair": f"{dt}->{od}", "set": "ambiguous_seed", "m": m, "n": n, "k": k,
                                 "answer": r["key"], "seed": got[0], "outcome": "mismatch", "desc_hash": "",
                                 "share_differing": round(got[1] / got[2], 4)})  # classes told apart  # fmt: skip
                    break
    return rows


SEARCH_ROWS, SEARCH_COLS = 32, 8  # output cells emulated per seed and class (rows of A, columns of B)


def parting_seed(readings: list[Any], m: int, n: int, k: int, dt: str, seeds: int) -> tuple[int, int, int] | None:
    """(row seed, readings told apart, classes of readings at K) for the seed in 0..seeds-1 whose
    spike draw (matmul_replay's draw 2 of that row seed: the same bits on any device) gives the
    most classes of readings (fixbits.probe.recover.draw_classes) distinct bits on the emulated
    cells; the search stops at the first seed that tells every class apart. None when the
    readings are one class at K or no seed tells any two apart. K stays the recorded one, which
    is known to reach the answer."""
    from matmul_check import draw_cells

    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits
    from fixbits.probe.recover import draw_classes

    reps = [readings[c[0]] for c in draw_classes(readings, k)]
    if len(reps) < 2:
        return None
    best: tuple[int, int, int] | None = None
    for seed in range(seeds):
        a, b = draw_cells(m, n, k, dt, seed, 2, SEARCH_ROWS, SEARCH_COLS, spikes=True)
        told = len({bits(emulate(x.at_k(k), a, b)).tobytes() for x in reps})
        if told > 1 and (best is None or told > best[1]):
            best = (seed, told, len(reps))
            if told == len(reps):
                break
    return best


if __name__ == "__main__":
    raise SystemExit(main())
