#!/usr/bin/env python3
"""A segment-K answer's recorded sweep cases: where its entry misses, and split readings there.

Session 37: the bf16->bf16 entry of the segment-K answer a42-t15-s-1 matched its one probe shape
and missed 17 of n15's 19 H200 shapes. Per recorded case, shallowest K first (CPU emulation):

- ``tiles``: the row tiles whose sampled cells differ from the entry, next to the tiles of the
  last, partial wave (tile index >= SMS * floor(tiles / SMS)), to tell a wrong descriptor (misses
  anywhere) from a kernel that sums the partial wave's tiles another way (misses only there).
  Tiles are numbered by row tile, the launch order only where N fits one column tile (all of
  a42's recorded shapes have N <= 7);
- ``even``: the entry with K cut into COUNT contiguous parts (granule 64, parts chained), for
  every COUNT in 2..66; prints the counts that fit;
- ``streamk``: the wave's 64-deep K iterations dealt over SMS CTAs (ceil or floor per CTA), so a
  tile's cuts fall at its own offsets; parts emulated from zero in fp32 and summed in K order or
  reversed; prints which variants fit.

    .venv/bin/python benchmarks/reconstruction/segment_k.py tiles \\
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.desc import GEMMDesc, KCut  # noqa: E402
from fixbits.emulate import emulate  # noqa: E402
from fixbits.numerics.formats import bits, to_dtype  # noqa: E402
from fixbits.probe.sweep import sampled_operands  # noqa: E402

STEP = 64  # the kernel's K tile (its name's tilesize64x64x64)


def _wave(m: int, tile_m: int, sms: int) -> tuple[int, int]:
    """(row tiles, index of the first tile of the last, partial wave)."""
    tiles = math.ceil(m / tile_m)
    return tiles, sms * (tiles // sms)


def draw_blocks(rec: dict[str, Any]) -> Iterator[tuple[list[int], np.ndarray, np.ndarray, np.ndarray]]:
    """Per draw of a recorded case: its sampled output rows, their A rows, its B columns, and
    cuBLAS's cells there in the output dtype."""
    a, b, sizes = sampled_operands(rec)
    got = np.asarray(rec["got"], dtype=np.uint32).view(np.float32)
    r0 = c0 = off = 0
    for draw, (rr, cc) in zip(rec["draws"], sizes, strict=True):
        yield (draw["rows"], a[r0:r0 + rr], b[:, c0:c0 + cc],
               to_dtype(got[off:off + rr * cc].reshape(rr, cc), rec["out_dtype"]))
        r0, c0, off = r0 + rr, c0 + cc, off + rr * cc


def _bits(x: np.ndarray, out_dtype: str) -> np.ndarray:
    return bits(np.ascontiguousarray(to_dtype(x, out_dtype)))


def partial_cells(rec: dict[str, Any], tile_m: int, sms: int) -> tuple[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]]]:
    """(tiles in the partial wave, per draw: A rows, B columns, cuBLAS cells, wave tile of each row)
    for the sampled rows that fall in the partial wave."""
    tiles, full = _wave(rec["m"], tile_m, sms)
    out = []
    for rows, a, b, want in draw_blocks(rec):
        sel = [i for i, row in enumerate(rows) if row // tile_m >= full]
        if sel:
            out.append((a[sel], b, want[sel], [rows[i] // tile_m - full for i in sel]))
    return tiles - full, out


def tiles_missed(desc: GEMMDesc, rec: dict[str, Any], tile_m: int) -> tuple[set[int], set[int]]:
    """(row tiles with a differing sampled cell, row tiles whose sampled cells all match)."""
    bad: set[int] = set()
    good: set[int] = set()
    for rows, a, b, want in draw_blocks(rec):
        diff = _bits(emulate(desc, a, b), rec["out_dtype"]) != _bits(want, rec["out_dtype"])
        for i, row in enumerate(rows):
            (bad if diff[i].any() else good).add(row // tile_m)
    return bad, good - bad


def _tiles_line(desc: GEMMDesc, rec: dict[str, Any], tile_m: int, sms: int) -> str:
    tiles, full = _wave(rec["m"], tile_m, sms)
    bad, good = tiles_missed(desc, rec, tile_m)
    return (f"{tiles} tiles, partial wave from {full}; missed tiles {sorted(bad)}; matched: "
            f"{sum(t < full for t in good)} in full waves, {sorted(t for t in good if t >= full)} in the partial one")


def _same(em: np.ndarray, want: np.ndarray, out_dtype: str) -> bool:
    return bool((_bits(em, out_dtype) == _bits(want, out_dtype)).all())


def even_counts(desc: GEMMDesc, cells: list, out_dtype: str) -> list[int]:
    fits = []
    for count in range(2, 67):
        d = desc.replace(k_cuts=(KCut("contiguous", count=count, granule=STEP, merge="chain"),))
        if all(_same(emulate(d, a, b), want, out_dtype) for a, b, want, _ in cells):
            fits.append(count)
    return fits


def _streamk_row(dp: GEMMDesc, a: np.ndarray, b: np.ndarray, k: int, j: int, ipc: int, reverse: bool) -> np.ndarray:
    kt = math.ceil(k / STEP)
    start, end = j * kt, (j + 1) * kt
    cuts = [start, *range((start // ipc + 1) * ipc, end, ipc), end]
    parts = [np.asarray(emulate(dp, a[:, (c0 - start) * STEP:min((c1 - start) * STEP, k)],
                                b[(c0 - start) * STEP:min((c1 - start) * STEP, k), :]), dtype=np.float32)
             for c0, c1 in zip(cuts[:-1], cuts[1:], strict=True)]
    if reverse:
        parts.reverse()
    acc = parts[0]
    for p in parts[1:]:
        acc = (acc + p).astype(np.float32)
    return acc


def streamk_fits(desc: GEMMDesc, rec: dict[str, Any], partial: int, cells: list, sms: int) -> dict[str, bool]:
    dp = desc.replace(out_dtype="fp32")
    k, kt = rec["k"], math.ceil(rec["k"] / STEP)
    out = {}
    for rule, ipc in (("ceil", math.ceil(partial * kt / sms)), ("floor", max(1, partial * kt // sms))):
        for reverse in (False, True):
            out[f"{rule}{'-reversed' if reverse else ''}"] = all(
                _same(_streamk_row(dp, a[i:i + 1], b, k, j, ipc, reverse), want[i:i + 1], rec["out_dtype"])
                for a, b, want, js in cells for i, j in enumerate(js))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reading", choices=["tiles", "even", "streamk"])
    ap.add_argument("run_dir", type=Path, help="a device run directory with sweep_samples/")
    ap.add_argument("profile", type=Path, help="a profile YAML that still holds the entry")
    ap.add_argument("key", help="the answer key")
    ap.add_argument("--cases", type=int, default=0, help="the shallowest this many recorded cases (0: all)")
    ap.add_argument("--tile-m", type=int, default=64)
    ap.add_argument("--sms", type=int, default=132)
    args = ap.parse_args(argv)
    prof = yaml.safe_load(args.profile.read_text())
    if args.key not in prof.get("entries", {}):
        ap.error(f"{args.profile}: no entry {args.key}")
    desc = GEMMDesc.from_dict(prof["entries"][args.key]["desc"])
    pair = f"{prof['dtype']}_{prof['out_dtype']}"
    recs = [r for f in sorted((args.run_dir / "sweep_samples").glob(f"{pair}_*.json.gz"))
            for r in json.loads(gzip.open(f).read()) if r.get("key") == args.key]
    recs.sort(key=lambda r: r["k"])
    for rec in recs[:args.cases or None]:
        if args.reading == "tiles":
            print(f"{rec['m']}x{rec['n']}x{rec['k']}: {_tiles_line(desc, rec, args.tile_m, args.sms)}", flush=True)
            continue
        partial, cells = partial_cells(rec, args.tile_m, args.sms)
        got = (even_counts(desc, cells, rec["out_dtype"]) if args.reading == "even"
               else streamk_fits(desc, rec, partial, cells, args.sms))
        print(f"{rec['m']}x{rec['n']}x{rec['k']}: {partial} tiles in the partial wave; fits: {got}", flush=True)
    print(f"{len(recs)} recorded cases of {args.key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
