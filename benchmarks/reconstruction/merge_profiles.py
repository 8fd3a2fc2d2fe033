#!/usr/bin/env python3
"""Fold the entries that several device runs added to one committed profile back into it.

Two reconstruct runs seeded from the same profile (one per device call, or two pairs of answers
probed side by side) each write a whole profile; copying the later one over the committed file
would drop what the earlier one found. This takes the committed profile, adds every entry a run
added, and refuses when two runs give one answer different descriptors (a disagreement is evidence
to look at, never a tie to break; ``--first-wins`` keeps the earlier run's entry only where a
sweep's cells already chose it, and says so). An answer stays in the failed table only while no run has an
entry for it; a run's newer reason for a failure replaces the committed one.

    .venv/bin/python benchmarks/reconstruction/merge_profiles.py matrices/profiles/P.yaml RUN1/P.yaml RUN2/P.yaml
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.probe.profile import load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the committed profile; rewritten in place")
    ap.add_argument("runs", type=Path, nargs="+", help="profiles written by runs seeded from base")
    ap.add_argument("--first-wins", default=None, metavar="EVIDENCE",
                    help="where two runs disagree keep the earlier run's entry; EVIDENCE names the cells that chose it")
    args = ap.parse_args(argv)
    base = load(args.base)
    if args.base.name != base.filename:
        ap.error(f"{args.base}: a profile is saved as {base.filename}; give the base under that name")
    entries, failed = dict(base.entries), dict(base.failed)
    came_from: dict[str, Path] = {}
    for run in args.runs:
        prof = load(run)
        if (prof.arch, prof.library_version, prof.dtype, prof.out_dtype) != (
                base.arch, base.library_version, base.dtype, base.out_dtype):
            ap.error(f"{run}: {prof.arch} {prof.library_version} {prof.dtype}->{prof.out_dtype} is not {args.base}'s pair")
        lost = sorted(k for k in base.entries if k not in prof.entries)
        if lost:
            ap.error(f"{run}: drops committed entries {lost[:5]}: not seeded from {args.base}")
        for key, e in prof.entries.items():
            if key in base.entries:
                if e.desc != base.entries[key].desc:
                    ap.error(f"{run}: {key} changed its committed descriptor")
                continue
            if key in entries and entries[key].desc != e.desc:
                if not args.first_wins:
                    ap.error(f"{key}: {came_from[key]} and {run} give different descriptors")
                print(f"{key}: kept {came_from[key]}'s entry over {run}'s ({args.first_wins})")
            entries.setdefault(key, e)
            came_from.setdefault(key, run)
        for key, why in prof.failed.items():
            if why != base.failed.get(key):
                failed[key] = why
    failed = {k: v for k, v in failed.items() if k not in entries}
    merged = dataclasses.replace(base, entries=entries, failed=failed)
    merged.save(args.base.parent)
    print(f"{args.base}: {len(base.entries)} -> {len(entries)} entries "
          f"({len(came_from)} added from {len(args.runs)} runs), {len(base.failed)} -> {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
