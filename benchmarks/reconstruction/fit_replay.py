#!/usr/bin/env python3
"""Which descriptor reading gives cuBLAS's bytes on a shape matmul_replay kept (CPU).

    python benchmarks/reconstruction/fit_replay.py REPLAY_DIR [--steps-only]

matmul_replay saves, per row, cuBLAS's outputs of every draw; the operands are redrawn here
(matmul_replay.read_replay). The profile's descriptor for the row's answer is varied as
explain_mismatch.py varies a wrong entry (K-loop step and residue turn, accumulation, instruction
width, then the split-K cut's granule, aligned granule, span rule and merge; ``--steps-only``:
the step and residue turn alone), and every variant that gives cuBLAS's bytes on all draws is
printed. Evidence for placing a profile entry's miss, not a verdict by itself: an entry is
changed only after the variant also fits the answer's other recorded shapes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))
sys.path.insert(0, str(ROOT / "benchmarks" / "reconstruction"))


def variants(desc: Any, steps_only: bool = False) -> list[tuple[str, Any]]:
    """The profile's descriptor first, then the readings explain_mismatch tries, labelled by the
    fields where they depart from it."""
    from explain_mismatch import label, order_variants, split_variants

    from fixbits.probe.reconstruct import _step_variants

    others = _step_variants(desc) if steps_only else order_variants(desc)
    if not steps_only and desc.k_cuts and desc.k_cuts[0].count:
        others = others + split_variants(desc)
    out = [("profile", desc)]
    out += [(label(d, desc), d) for d in dict.fromkeys(others) if d != desc]
    return out


def main() -> int:
    import numpy as np
    from matmul_replay import read_replay

    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits
    from fixbits.probe import profile as profiles

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay_dir", type=Path)
    ap.add_argument("--steps-only", action="store_true", help="vary the K-loop step and residue turn only")
    args = ap.parse_args()
    for row, draws in read_replay(args.replay_dir):
        dt, od = row["pair"].split("->")
        m, n, k = row["shape"]
        prof = profiles.load(
            Path(profiles.PROFILE_DIR) / profiles.profile_filename("sm_90", "130100", dt, od)
        )
        try:
            desc = prof.lookup(row["answer"], k=k, n=n)
        except profiles.NotInProfile as exc:
            print(f"== {row['pair']} {m}x{n}x{k}: {exc}", flush=True)
            continue
        print(
            f"== {row['pair']} {m}x{n}x{k} {row['answer']}: {desc.k_cuts}, step {desc.k_loop_step}",
            flush=True,
        )
        for name, cand in variants(desc, args.steps_only):
            diffs = 0
            for a, b, want in draws:
                diffs += int((bits(emulate(cand, a, b)) != bits(np.ascontiguousarray(want))).sum())
                if diffs and name != "profile":
                    break  # a variant is out at its first differing draw
            if diffs == 0 or name == "profile":
                print(f"  {'FITS' if diffs == 0 else 'differs'} {name} (ndiff {diffs})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
