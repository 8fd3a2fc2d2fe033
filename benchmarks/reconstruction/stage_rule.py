#!/usr/bin/env python3
"""Profile entries whose K-loop step is not the one their STAGES_ID implies, held to every
recorded cuBLAS cell of their answer, and corrected where the cells allow (CPU).

    .venv/bin/python benchmarks/reconstruction/stage_rule.py --samples DIR [DIR ...] \
        [--replay DIR] [--apply --run s15] [--out FILE.yaml]

For each disagreeing descriptor (fixbits.probe.stages.disagreements) the script emulates the
entry as it is and with the implied step on every sampled cell the listed sweeps recorded for
that answer (sweep_samples/*.json.gz: all draws, ordinary, wide and spike) and on the full
outputs matmul_replay kept. ``--apply`` replaces the step where the implied step fits every
recorded cell (or where none was recorded, saying so in the note); an entry whose cells reject
the implied step is left as it is and reported, as a counterexample to the rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from fixbits.probe import profile as profiles  # noqa: E402
from fixbits.probe.stages import disagreements, implied_step  # noqa: E402
from fixbits.probe.sweep import draw_mismatches, load_samples, sampled_operands  # noqa: E402


def sample_cells(dirs: list[Path]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """(in dtype, out dtype, answer key) -> the collected cases of every listed sweep."""
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for d in dirs:
        for rec in load_samples(d):
            if rec.get("key") and rec.get("got"):
                out[(rec["dtype"], rec["out_dtype"], rec["key"])].append({**rec, "_from": d.name})
    return out


def replay_outputs(
    d: Path | None,
) -> dict[tuple[str, str, str], list[tuple[int, int, int, np.ndarray, np.ndarray, np.ndarray]]]:
    """(in, out, answer) -> (m, n, k, a, b, cuBLAS output) per draw matmul_replay kept."""
    out: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    if d is None:
        return out
    from matmul_replay import read_replay

    for row, draws in read_replay(d):
        dt, od = row["pair"].split("->")
        out[(dt, od, row["answer"])] += [(*row["shape"], a, b, want) for a, b, want in draws]
    return out


def misses(desc: Any, cases: list[dict[str, Any]], full: list[Any]) -> tuple[int, int, list[str]]:
    """(differing cells, cells compared, shapes with a difference) of ``desc`` at each case's K."""
    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits

    bad = total = 0
    where = []
    for rec in cases:
        a, b, sizes = sampled_operands(rec)
        got = np.array(rec["got"], dtype=np.uint32).view(np.float32)
        per_draw, _ = draw_mismatches(desc.at_k(rec["k"]), a, b, sizes, got, rec["out_dtype"])
        bad += sum(per_draw)
        total += sum(r * c for r, c in sizes)
        if sum(per_draw):
            where.append(f"{rec['m']}x{rec['n']}x{rec['k']} ({rec['_from']})")
    for m, n, k, a, b, want in full:
        got = emulate(desc.at_k(k), a, b)
        diff = int((bits(np.ascontiguousarray(got)) != bits(np.ascontiguousarray(want))).sum())
        bad += diff
        total += want.size
        if diff and f"{m}x{n}x{k} (replay)" not in where:
            where.append(f"{m}x{n}x{k} (replay)")
    return bad, total, where


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", nargs="+", type=Path, default=[], help="sweep run dirs with sweep_samples/")
    ap.add_argument("--replay", type=Path, help="a matmul_replay output dir")
    ap.add_argument("--apply", action="store_true")
    ap.add_argument("--run", default="s15", help="named in the notes of corrected entries")
    ap.add_argument("--out", type=Path, help="write the findings as YAML here")
    args = ap.parse_args(argv)
    cells = sample_cells(args.samples)
    full = replay_outputs(args.replay)
    findings = []
    for path in profiles.available():
        prof = profiles.load(path)
        entries = dict(prof.entries)
        for key, where, step, implied in disagreements(prof):
            if where != "entry":
                findings.append({"profile": path.name, "key": key, "where": where, "skipped": "variant"})
                continue
            entry = entries[key]
            pair = (prof.dtype, prof.out_dtype, key)
            fixed = entry.desc.replace(k_loop_step=implied)
            old_bad, n_cells, old_where = misses(entry.desc, cells.get(pair, []), full.get(pair, []))
            new_bad, _, new_where = misses(fixed, cells.get(pair, []), full.get(pair, []))
            shapes = len(cells.get(pair, [])) + len({x[:3] for x in full.get(pair, [])})
            row = {
                "profile": path.name,
                "key": key,
                "step": step,
                "implied": implied,
                "shapes": shapes,
                "cells": n_cells,
                "differ_as_is": old_bad,
                "differ_implied": new_bad,
                "as_is_misses": old_where[:6],
                "implied_misses": new_where[:6],
            }
            findings.append(row)
            print(yaml.safe_dump([row], sort_keys=False, width=200), flush=True)
            if args.apply and new_bad == 0:
                evidence = (
                    f"fits all {n_cells} recorded cells of {shapes} shapes ({old_bad} of them differ "
                    f"at step {step})"
                    if shapes
                    else "no recorded cells: the step is the STAGES_ID's only"
                )
                note = (
                    f"k_loop_step {step} -> {implied}, the depth of STAGES_ID {key.rsplit('-g', 1)[1]} "
                    f"(fixbits.probe.stages, run {args.run}); {evidence}. Before: {entry.note}"
                )
                entries[key] = dataclasses.replace(entry, desc=fixed, note=note)
        if args.apply and entries != prof.entries:
            dataclasses.replace(prof, entries=entries).save(path.parent)
    if args.out:
        args.out.write_text(yaml.safe_dump(findings, sort_keys=False, width=200))
    assert all(implied_step(f["key"]) for f in findings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
