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
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.probe.profile import load  # noqa: E402
from fixbits.probe.reconstruct import _granule_variants, granule_reading  # noqa: E402
from fixbits.probe.recover import _signature  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for path in args.profiles:
        prof = load(path)
        total, open_rows = 0, []
        for key, e in sorted(prof.entries.items()):
            variants = _granule_variants(e.desc) if e.desc is not None else []
            if not variants:
                continue
            total += 1
            ks = {int(m.group(1)) for m in re.finditer(r"\d+x\d+x(\d+)", e.note or "")} | ({e.shape[2]} if e.shape else set())
            own = {k: _signature(e.desc, k) for k in ks}
            agree = [granule_reading(v) for v in variants if all(_signature(v, k) == own[k] for k in ks)]
            if agree:
                open_rows.append((key, granule_reading(e.desc), agree, sorted(ks)))
        print(f"## {path.name}: {len(open_rows)} of {total} split entries not pinned by their own shapes")
        print(f"entry readings among them: {dict(Counter(r[1] for r in open_rows))}")
        for key, got, agree, kk in open_rows:
            print(f"- {key}: {got} (also fits: {', '.join(agree)}; K {', '.join(map(str, kk))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
