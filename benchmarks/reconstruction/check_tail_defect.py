"""Do cuBLAS's bytes on the sweep's tail-defect shapes equal the profile descriptor emulated with
the predicted terms dropped?

The sweep (fixbits.probe.sweep) files a mismatch as ``tail_defect`` when fixbits.bugs.splitk_tail
predicts that cuBLASLt's split-K path loses the last terms of K. This replays each dump's sampled
cells on the CPU: the descriptor on the full K (the sweep's verdict), then on K minus each
candidate loss. The prediction is confirmed when exactly the predicted loss gives 0 differing
cells in every draw.

    .venv/bin/python benchmarks/reconstruction/check_tail_defect.py DUMP.npz [...] [--losses 16,8,32]
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
from fixbits.probe.sweep import draw_mismatches, sampled_operands  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--losses", default="16,8,32", help="terms dropped from the end of K, to try")
    args = ap.parse_args(argv)
    for path in args.dumps:
        z = np.load(path)
        meta = json.loads(str(z["meta"]))
        a, b, sizes = sampled_operands(meta)
        desc, k, got, od = GEMMDesc.from_dict(meta["desc"]), int(meta["k"]), z["got"], meta["out_dtype"]
        full, _ = draw_mismatches(desc, a, b, sizes, got, od)
        print(f"{Path(path).name} {meta['key']} K={k}: full sum, differing cells per draw {full}")
        for lost in (int(x) for x in args.losses.split(",")):
            bad, _ = draw_mismatches(desc, a[:, : k - lost], b[: k - lost, :], sizes, got, od)
            print(f"    last {lost} terms dropped: {bad}{'  <- every draw equal' if not any(bad) else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
