#!/usr/bin/env python3
"""Replace a predicted entry that a device sweep showed wrong by the one reading that fits.

settle_steps.py holds each predicted entry and its step / granule variants to a sweep's sampled
cells; where the entry misses and exactly one variant fits every cell (``fit_descs``), that
variant is the entry the evidence leaves. Session 40's fp8 sweep (H100, fuzz 7000..8999) found
two such entries: predicted with a split span granule of 64 (8 / 64) from shapes where 64 and
128 give the same span, while fresh K told them apart. The note keeps the evidence; an entry with
no single fit is left for withdraw_entries.py.

    .venv/bin/python benchmarks/reconstruction/adopt_settled.py SETTLE.jsonl [--profiles DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.desc import GEMMDesc  # noqa: E402
from fixbits.probe.profile import PROFILE_DIR, available, load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("settled", type=Path, help="settle_steps.py's JSONL")
    ap.add_argument("--profiles", type=Path, default=PROFILE_DIR)
    args = ap.parse_args(argv)
    fixes: dict[tuple[str, str], dict] = {}
    for line in args.settled.read_text().splitlines():
        r = json.loads(line)
        if r["verdict"] == "wrong" and len(r.get("fit_descs") or []) == 1:
            fixes[(r["pair"], r["key"])] = r
    for path in available(args.profiles):
        prof = load(path)
        pair = f"{prof.dtype}->{prof.out_dtype}"
        entries = dict(prof.entries)
        changed = 0
        for (p, key), r in fixes.items():
            if p != pair or key not in entries:
                continue
            e = entries[key]
            why = (f"settled by the sweep {r['run']}: the entry missed {', '.join(r['entry_misses'])}; "
                   f"{r['also_fit'][0]} fits every sampled cell")
            entries[key] = dataclasses.replace(
                e, desc=GEMMDesc.from_dict(r["fit_descs"][0]), note=f"{why} (was: {e.note})")
            changed += 1
            print(f"{pair} {key}: {r['granule']} -> {r['also_fit'][0]}")
        if changed:
            dataclasses.replace(prof, entries=entries).save(path.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
