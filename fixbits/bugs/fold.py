"""Fold a GPU sweep (runners/device/cublas_probe.py's splitk_sweep.csv) into a recorded case list.

The gate's shape lists are data measured on a GPU; this picks a small, telling subset of a
sweep: losses (one per distinct heuristic answer and loss size), shapes where only the ALGO_ID
clause keeps the prediction right, and whole ALGO_ID 66 shapes with a tail. Each case keeps the
answer it was measured under, so a later run can say whether the heuristic or the kernel moved.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

from fixbits.bugs.splitk_tail import HEURISTIC_FIELDS, parse_case_file

_CSV_FIELDS = ("algo_id", "tile_id", "splitk_num", "reduction_scheme")


def read_sweep_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        if not r.get("observed") or r.get("error"):
            continue
        if not r.get("algo_id") or r["algo_id"] == "None":
            continue
        out.append(
            {
                "m": int(r["m"]),
                "n": int(r["n"]),
                "k": int(r["k"]),
                "in_dtype": r["in_dtype"],
                "observed": int(r["observed"]),
                "predicted": int(r["predicted"]),
                "predicted_without_algo": int(r["predicted_without_algo"]),
                **{f: int(r[f]) for f in _CSV_FIELDS},
            }
        )
    return out


def pick_cases(rows: list[dict[str, Any]], *, per_kind: int = 12) -> list[dict[str, Any]]:
    """Losses (one per answer and size, those beyond the paper's condition first), ALGO-clause
    saves, and whole ALGO 66 shapes with a tail."""
    seen: set[tuple[Any, ...]] = set()
    losses: list[dict[str, Any]] = []
    saves: list[dict[str, Any]] = []
    whole: list[dict[str, Any]] = []
    # losses the paper's condition does not explain (more than K mod 64) first, then by K
    for r in sorted(
        rows, key=lambda r: (r["observed"] == r["k"] % 64, r["k"], r["m"], r["n"], r["in_dtype"])
    ):
        answer = tuple(r[f] for f in _CSV_FIELDS)
        if r["observed"]:
            key: tuple[Any, ...] = ("loss", r["in_dtype"], r["observed"], *answer)
            bucket, cap = losses, per_kind * 2
        elif r["predicted_without_algo"] and not r["predicted"]:  # only the ALGO_ID clause keeps it whole
            key = ("save", r["in_dtype"], r["algo_id"])
            bucket, cap = saves, per_kind
        elif r["algo_id"] == 66 and r["splitk_num"] > 1 and r["k"] % 64:  # split, with a tail, whole
            key = ("whole", r["in_dtype"], r["tile_id"], r["splitk_num"])
            bucket, cap = whole, per_kind
        else:
            continue
        if key not in seen and len(bucket) < cap:
            seen.add(key)
            bucket.append(r)
    cases = []
    for r in losses + saves + whole:
        cases.append(
            {
                "m": r["m"],
                "n": r["n"],
                "k": r["k"],
                "in_dtype": r["in_dtype"],
                "expected_lost": r["observed"],
                "heuristic": {f: r[f] for f in _CSV_FIELDS if f in HEURISTIC_FIELDS},
            }
        )
    return cases


def fold(csv_path: Path, out_path: Path, *, arch: str, version: str, source: str, per_kind: int = 12) -> int:
    """Write a case document for (arch, version) from a sweep CSV; returns the number of cases."""
    cases = pick_cases(read_sweep_csv(csv_path), per_kind=per_kind)
    doc: dict[str, Any] = {
        "arch": arch,
        "library": "cublasLt",
        "library_version": version,
        "source": source,
        "workspace_bytes": 32 * 1024 * 1024,
        "cases": cases,
    }
    parse_case_file(doc, str(out_path))  # validate before writing
    header = (
        f"# Split-K tail cases picked from a cublas_probe sweep ({source}) by fixbits.bugs.fold:\n"
        "# losses (one per heuristic answer and loss size), shapes only the ALGO_ID clause keeps whole\n"
        "# (one per ALGO_ID), and split ALGO_ID 66 shapes with K mod 64 != 0 that stay whole.\n"
        "# expected_lost = what the GPU returned.\n"
    )
    head = {k: v for k, v in doc.items() if k != "cases"}
    body = "".join(
        f"  - {yaml.safe_dump(c, default_flow_style=True, sort_keys=False, width=400).strip()}\n"
        for c in cases
    )
    out_path.write_text(header + yaml.safe_dump(head, sort_keys=False, width=140) + "cases:\n" + body)
    return len(cases)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="fold a cublas_probe splitk_sweep.csv into matrices/cublas_bugs")
    p.add_argument("csv", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--arch", required=True)
    p.add_argument("--version", required=True, help="cuBLASLt version, e.g. 13.1.0")
    p.add_argument("--source", required=True, help="where the sweep ran (GPU, date)")
    p.add_argument("--per-kind", type=int, default=12)
    a = p.parse_args(argv)
    n = fold(a.csv, a.out, arch=a.arch, version=a.version, source=a.source, per_kind=a.per_kind)
    print(f"wrote {n} cases to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
