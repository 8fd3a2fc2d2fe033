#!/usr/bin/env python3
"""Where a withdrawn entry misses a device sweep's recorded cells, by output tile and wave.

Session 37: the bf16->bf16 entry of the segment-K answer a42-t15-s-1 matched its one probe shape
and missed 17 of n15's 19 H200 shapes. This re-emulates the entry on every recorded case of the
answer and prints, per case, the 64-row tiles whose sampled cells differ next to the tiles of the
last, partial wave (tile index >= SMS * floor(tiles / SMS)), to tell a wrong descriptor (misses
anywhere) from a kernel that sums the partial wave's tiles another way (misses only there).
Tiles are numbered by row tile, which is the launch order only where N fits one column tile (all
of a42's recorded shapes have N <= 7).

    .venv/bin/python benchmarks/reconstruction/segment_k_tiles.py \\
        benchmarks/reconstruction/h200/s14/n15 \\
        benchmarks/reconstruction/h100/s37/phaseb13/profiles/sm_90_cublaslt130100_bf16_bf16.yaml \\
        a42-t15-s-1-r2-w0-c0-g35
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.desc import GEMMDesc  # noqa: E402
from fixbits.emulate import emulate  # noqa: E402
from fixbits.numerics.formats import bits, to_dtype  # noqa: E402
from fixbits.probe.sweep import sampled_operands  # noqa: E402


def tiles_missed(desc: GEMMDesc, rec: dict, tile_m: int) -> tuple[set[int], set[int]]:
    """(row tiles with a differing sampled cell, row tiles whose sampled cells all match)."""
    a, b, sizes = sampled_operands(rec)
    got = np.asarray(rec["got"], dtype=np.uint32).view(np.float32)
    em = emulate(desc, a, b)
    bad: set[int] = set()
    good: set[int] = set()
    r0 = c0 = off = 0
    for draw, (rr, cc) in zip(rec["draws"], sizes, strict=True):
        want = to_dtype(got[off:off + rr * cc].reshape(rr, cc), rec["out_dtype"])
        diff = bits(np.ascontiguousarray(em[r0:r0 + rr, c0:c0 + cc])) != bits(np.ascontiguousarray(want))
        for i, row in enumerate(draw["rows"]):
            (bad if diff[i].any() else good).add(row // tile_m)
        r0, c0, off = r0 + rr, c0 + cc, off + rr * cc
    return bad, good - bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a device run directory with sweep_samples/")
    ap.add_argument("profile", type=Path, help="a profile YAML that still holds the entry")
    ap.add_argument("key", help="the answer key")
    ap.add_argument("--tile-m", type=int, default=64, help="the kernel's CTA tile rows (its name's tilesize)")
    ap.add_argument("--tile-n", type=int, default=64)
    ap.add_argument("--sms", type=int, default=132, help="streaming multiprocessors (H100 SXM / H200: 132)")
    args = ap.parse_args(argv)
    prof = yaml.safe_load(args.profile.read_text())
    if args.key not in prof.get("entries", {}):
        ap.error(f"{args.profile}: no entry {args.key}")
    desc = GEMMDesc.from_dict(prof["entries"][args.key]["desc"])
    pair = f"{prof['dtype']}_{prof['out_dtype']}"
    cases = 0
    for f in sorted((args.run_dir / "sweep_samples").glob(f"{pair}_*.json.gz")):
        for rec in json.loads(gzip.open(f).read()):
            if rec.get("key") != args.key:
                continue
            cases += 1
            m, n, k = rec["m"], rec["n"], rec["k"]
            tiles = math.ceil(m / args.tile_m) * math.ceil(n / args.tile_n)
            full = args.sms * (tiles // args.sms)
            bad, good = tiles_missed(desc, rec, args.tile_m)
            print(f"{m}x{n}x{k}: {tiles} tiles, partial wave from {full}; missed tiles {sorted(bad)}; "
                  f"matched: {sum(t < full for t in good)} in full waves, {sorted(t for t in good if t >= full)} in the partial one")
    print(f"{cases} recorded cases of {args.key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
