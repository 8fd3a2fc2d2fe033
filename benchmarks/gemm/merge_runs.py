"""Replace some shapes of a full benchmark run with a later partial run's rows, and print the
per-layer-group geometric means again.

A partial run (``kernels_bench.py --not-single-pass``) times only the shapes a change touched; this
puts its rows in the full table so the headline numbers reflect the change. Each row's speed is a
ratio against cuBLAS measured in its own run, so the rows stay comparable across runs, but the two
runs' hosts may differ: say so next to the table.

    python benchmarks/gemm/merge_runs.py FULL.csv PARTIAL.csv [PARTIAL2.csv ...] [--md OUT.md]

Several partial runs are applied in the order given (a later one wins a shape).
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

KEY = ("layer", "m", "n", "k", "epilogue")
SPLIT_GFLOP = 5.0


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row[k] for k in KEY)


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def merge(full: list[dict[str, str]], partial: list[dict[str, str]]) -> tuple[list[dict[str, str]], int]:
    """The full run's shape rows with the partial run's rows in place (the 'fused' extra rows of
    the epilogue pairs are not shapes of the 390 and are left out)."""
    rows = {_key(r): r for r in full if r["layer"] != "fused"}
    replaced = 0
    for r in partial:
        if r["layer"] == "fused":
            continue
        if _key(r) not in rows:
            raise SystemExit(f"partial row {_key(r)} is not in the full run")
        rows[_key(r)] = r
        replaced += 1
    return list(rows.values()), replaced


def table(rows: list[dict[str, str]]) -> list[str]:
    """Geomeans over the timed rows; a skipped shape (fp8 without a cuBLASLt algorithm or outside
    the profile) has no speed and is counted apart."""
    skipped = sum(1 for r in rows if not r["speed_ours"])
    out = [f"Timed shapes only ({skipped} skipped shapes have no speed).", "",
           "| layer group | side of 5 GFLOP | shapes | whole-call geomean | GPU-time geomean (CUDA graph) |",
           "|---|---|---:|---:|---:|"]  # fmt: skip
    timed = [r for r in rows if r["speed_ours"]]
    for side in ("above", "below"):
        sel = [r for r in timed if (float(r["gflop"]) > SPLIT_GFLOP) == (side == "above")]
        groups: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in sel:
            groups[r["layer"]].append(r)
        for name, g in [*sorted(groups.items()), ("ALL", sel)]:
            whole = _geomean([float(r["speed_ours"]) for r in g])
            gpu = _geomean([float(r["speed_ours_gpu"]) for r in g])
            out.append(f"| {name} | {side} | {len(g)} | {whole:.3f} | {gpu:.3f} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("full")
    ap.add_argument("partial", nargs="+")
    ap.add_argument("--md", default="")
    args = ap.parse_args()
    with open(args.full) as f:
        rows = list(csv.DictReader(f))
    head = []
    for path in args.partial:
        with open(path) as f:
            rows, replaced = merge(rows, list(csv.DictReader(f)))
        head.append(f"{replaced} replaced by {path}")
    lines = [f"{len(rows)} shapes from {args.full}; " + "; then ".join(head), "", *table(rows)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
