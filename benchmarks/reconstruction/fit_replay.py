#!/usr/bin/env python3
"""Which descriptor reading gives cuBLAS's bytes on a shape matmul_replay kept (CPU).

    python benchmarks/reconstruction/fit_replay.py REPLAY_DIR [--draws 10]

matmul_replay saves, per differing row, cuBLAS's and fixbits.matmul's outputs of every draw; the
operands are redrawn here (fixbits.probe.hashdraw, the seeds matmul_check used). The profile's
descriptor for the row's answer is varied one field at a time and then over the split-K cut's
span rounding (granule, aligned granule, span rule), and every variant that gives cuBLAS's bytes
on all draws is printed. Evidence for placing a profile entry's miss, not a verdict by itself:
an entry is changed only after the variant also fits the answer's other recorded shapes.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))


def variants(desc: Any, steps_only: bool = False) -> list[tuple[str, Any]]:
    """The profile's descriptor first, then readings a probe at another K could have confused."""
    out: list[tuple[str, Any]] = [("profile", desc)]
    for step in (16, 32, 64, 128, 256):
        if step != desc.k_loop_step:
            out.append((f"k_loop_step {step}", desc.replace(k_loop_step=step)))
    if steps_only:
        return out
    out.append(
        (
            f"residue {'last' if desc.residue == 'first' else 'first'}",
            desc.replace(residue="last" if desc.residue == "first" else "first"),
        )
    )
    if desc.use_fast_accum:
        for p in (1, 2, 4):
            out.append((f"promotion every {p}", desc.replace(use_fast_accum=False, promotion_interval=p)))
    else:
        out.append(("fast accumulation", desc.replace(use_fast_accum=True, promotion_interval=None)))
    if desc.k_cuts and desc.k_cuts[0].count:
        c0 = desc.k_cuts[0]
        for g, ag, rule in itertools.product(
            (1, 8, 16, 32, 64, 128, 256), (None, 64, 128, 256), ("ceil", "floor", "tail_dropped")
        ):
            if (g, ag, rule) == (c0.granule, c0.aligned_granule, c0.span_rule) or (
                ag is not None and ag <= g
            ):
                continue
            cut = dataclasses.replace(c0, granule=g, aligned_granule=ag, span_rule=rule)
            out.append(
                (f"cut granule {g} aligned {ag} {rule}", desc.replace(k_cuts=(cut,) + desc.k_cuts[1:]))
            )
        for step in (32, 64, 128):
            for g in (8, 64):
                cut = dataclasses.replace(c0, granule=g)
                out.append(
                    (
                        f"cut granule {g} + k_loop_step {step}",
                        desc.replace(k_loop_step=step, k_cuts=(cut,) + desc.k_cuts[1:]),
                    )
                )
    return out


def main() -> int:
    import numpy as np
    import yaml

    from fixbits.emulate import emulate
    from fixbits.kernels.backend import to_numpy
    from fixbits.probe import profile as profiles

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("replay_dir")
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--steps-only", action="store_true", help="vary the K-loop step only")
    args = ap.parse_args()
    d = Path(args.replay_dir)
    for row in yaml.safe_load((d / "replay.yaml").read_text()):
        if "ndiff" not in row:
            continue
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
        saved = np.load(d / f"{dt}_{od}_{m}x{n}x{k}.npz")
        ops = []
        for i in range(args.draws):
            a, b = _host_operands(m, n, k, dt, row["seed"], i)
            ops.append((to_numpy(a, dt), to_numpy(b, dt), saved[f"cublas_{i}"]))
        print(
            f"== {row['pair']} {m}x{n}x{k} {row['answer']}: {desc.k_cuts}, step {desc.k_loop_step}",
            flush=True,
        )
        for name, cand in variants(desc, args.steps_only):
            diffs = 0
            for a, b, want in ops:
                got = emulate(cand, a, b)
                diffs += int((got.view(np.uint32) != want.view(np.uint32)).sum())
                if diffs and name != "profile":
                    break
            if diffs == 0 or name == "profile":
                print(f"  {'FITS' if diffs == 0 else 'differs'} {name} (ndiff {diffs})", flush=True)
    return 0


def _host_operands(m: int, n: int, k: int, dt: str, seed: int, d: int) -> tuple[Any, Any]:
    """matmul_check.draw_operands, drawn on this host."""
    from fixbits.probe.hashdraw import operand

    kind = "ordinary" if d % 2 == 0 else "wide"
    s = seed * 64 + 2 * d
    return operand((m, k), dt, kind, s, "cpu"), operand((k, n), dt, kind, s + 1, "cpu")


if __name__ == "__main__":
    raise SystemExit(main())
