"""Which heuristic answers two benchmark runs got for the same shapes, e.g. one run on an H200 and
one on an H100 with the same cuBLAS.

The arch profile maps an answer (algo, tile, stages, split-K, ...) to a descriptor; which answer a
shape gets is the library's choice per device. A shape whose answer differs between the runs is
still covered where the other answer has a profile entry; this counts both cases and says whether
the bytes matched cuBLAS in the second run.

    python benchmarks/gemm/compare_answers.py RUN_A.csv RUN_B.csv [--md OUT.md]
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

SHAPE = ("m", "n", "k")


def _rows(path: Path) -> dict[tuple[str, ...], dict[str, str]]:
    """The GEMM rows of a run keyed by shape (a shape timed for several layers counts once)."""
    return {tuple(r[c] for c in SHAPE): r for r in csv.DictReader(path.open()) if r["layer"] != "fused"}


def compare(a: Path, b: Path) -> list[str]:
    ra, rb = _rows(a), _rows(b)
    shared = sorted(set(ra) & set(rb), key=lambda s: tuple(int(x) for x in s))
    moved = [s for s in shared if ra[s]["cublas_answer"] != rb[s]["cublas_answer"]]
    src = Counter(rb[s]["desc_source"] for s in moved)
    equal = Counter((rb[s]["desc_source"], rb[s]["bytes_equal_cublas"]) for s in moved)
    lines = [
        f"shapes in both runs: {len(shared)}; same heuristic answer: {len(shared) - len(moved)}; "
        f"another answer in {b.parent.name}: {len(moved)}",
        "",
        "| descriptor source in the second run | shapes | bytes equal to cuBLAS |",
        "|---|---:|---:|",
    ]
    for source, n in src.most_common():
        lines.append(f"| {source} | {n} | {equal[(source, 'True')]} |")
    lines += ["", "| m | n | k | answer (first run) | answer (second run) | source | bytes equal |", "|---|---|---|---|---|---|---|"]
    for s in moved:
        x, y = ra[s], rb[s]
        lines.append(
            f"| {' | '.join(s)} | {x['cublas_answer']} | {y['cublas_answer']} | {y['desc_source']} | {y['bytes_equal_cublas']} |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--md", type=Path, default=None, help="write the table here too")
    args = ap.parse_args()
    text = "\n".join(compare(args.first, args.second)) + "\n"
    print(text, end="")
    if args.md:
        args.md.write_text(f"# heuristic answers: {args.first} vs {args.second}\n\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
