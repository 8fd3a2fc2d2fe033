#!/usr/bin/env python3
"""List split-K entries whose span granule their own verification shapes do not pin.

An entry's granule (64, 128, the K-loop step, or 8 with 64 when 64 | K) decides the split span
ceil(K / count) rounds to; at many K two readings give the same span, so draws there cannot tell
them apart. Session 40's fresh fp8 sweep (H100) found two predicted entries wrong exactly this way
(verified at K 50,224 and 190,688, where 64 and 128 agree). For every entry with a tensor-core
split, this reads the K of the shapes its note names (and its representative shape) and lists the
readings that agree with the entry at all of them: those entries stand on the prior the prober chose,
not on cuBLAS's bytes, until a sweep or a settling draw meets a K where the readings part.

    .venv/bin/python benchmarks/reconstruction/granule_audit.py matrices/profiles/*.yaml
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.probe.granules import open_granules  # noqa: E402
from fixbits.probe.profile import load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for path in args.profiles:
        total, rows = open_granules(load(path))
        print(f"## {path.name}: {len(rows)} of {total} split entries not pinned by their own shapes")
        print(f"entry readings among them: {dict(Counter(r.reading for r in rows))}")
        for r in rows:
            ks = sorted({s[2] for s in r.shapes})
            print(
                f"- {r.key}: {r.reading} (also fits: {', '.join(r.readings())}; K {', '.join(map(str, ks))})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
