#!/usr/bin/env python3
"""The reconstruction sweep as a table: per dtype pair and shape set, how many shapes match
cuBLAS byte for byte, and what every other case is (from DIR/sweep.csv of
runners/device/reconstruct.py, after ``--check DIR`` has finished the unchecked rows).

    python3 benchmarks/reconstruction/sweep_table.py DIR/sweep.csv > benchmarks/reconstruction/h200/sweep_<run>.md
"""

from __future__ import annotations

import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

OUTCOMES = (
    "match",
    "not_in_profile",
    "tail_defect",
    "wrong_entry",
    "no_algorithm",
    "too_large",
    "unchecked",
    "check_error",
    "error",
)


def _rate(c: Counter[str]) -> str:
    """Match rate over the shapes the emulator was compared on (an entry existed for them)."""
    compared = c.get("match", 0) + c.get("tail_defect", 0) + c.get("wrong_entry", 0)
    return f"{c.get('match', 0)}/{compared} = {c.get('match', 0) / max(1, compared):.1%}"


def table(path: Path) -> str:
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    comps: Counter[tuple[str, str]] = Counter()
    with path.open() as fh:
        for r in csv.DictReader(fh):
            key = (f"{r['dtype']}->{r['out_dtype']}", r["set"])
            counts[key][r["outcome"]] += 1
            comps[key] += int(r["comparisons"] or 0)
    head = (
        "| pair | set | shapes | "
        + " | ".join(OUTCOMES)
        + " | match rate | match / compared | byte comparisons |"
    )
    lines = [head, "|" + "---|" * (len(OUTCOMES) + 6)]
    for (pair, which), c in sorted(counts.items()):
        n = sum(c.values())
        lines.append(
            f"| {pair} | {which} | {n} | "
            + " | ".join(str(c.get(o, 0)) for o in OUTCOMES)
            + f" | {c.get('match', 0) / max(1, n):.1%} | {_rate(c)} | {comps[(pair, which)]} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(Path(sys.argv[1])))
