"""Where does a narrow-output wrong entry's fp32 sum sit between cuBLAS's value and the entry's?

For each dump of a wrong fp16/bf16-output entry, the entry's descriptor is emulated twice: with
its narrow output and with an fp32 output (the sum before the final rounding). For every
differing cell it prints that fp32 sum, both narrow values and its fraction of the way from the
entry's value to cuBLAS's: a fraction near 0.5 on every cell means the fp32 sums differ from
cuBLAS's by a few ulps only, so the narrow rounding hides the error except near a midpoint.

    .venv/bin/python benchmarks/reconstruction/narrow_midpoints.py DUMP.npz [...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.desc import GEMMDesc  # noqa: E402
from fixbits.emulate import emulate  # noqa: E402
from fixbits.numerics.formats import bits, to_dtype  # noqa: E402
from fixbits.probe.sweep import sampled_operands  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="+")
    args = ap.parse_args(argv)
    for path in args.dumps:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
        a, b, sizes = sampled_operands(meta)
        d = dict(meta["desc"])
        od = d["out_dtype"]
        narrow = emulate(GEMMDesc.from_dict(d), a, b)
        wide = emulate(GEMMDesc.from_dict(dict(d, out_dtype="fp32")), a, b)
        exact = np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)
        got, r0, c0, off = z["got"], 0, 0, 0
        for r, c in sizes:
            blk = narrow[r0 : r0 + r, c0 : c0 + c]
            want = to_dtype(got[off : off + r * c].reshape(r, c), od)
            for i, j in np.argwhere(bits(np.ascontiguousarray(blk)) != bits(np.ascontiguousarray(want))):
                v, lo, hi = float(wide[r0 + i, c0 + j]), float(blk[i, j]), float(want[i, j])
                frac = (v - lo) / (hi - lo) if hi != lo else float("nan")
                print(f"{Path(path).name} {meta['key']} cell ({r0 + i},{c0 + j}): fp32 sum {v!r}, entry {lo!r}, "
                      f"cuBLAS {hi!r}, fraction {frac:.4f}, exact {float(exact[r0 + i, c0 + j])!r}")  # fmt: skip
            r0, c0, off = r0 + r, c0 + c, off + r * c
    return 0


if __name__ == "__main__":
    sys.exit(main())
