"""Process time of reconstruct's phase B (``_predict``, with its ``_settle``) on synthetic answers.

Why: phase B on the H200 spent ~45 s per answer, nearly all of it CPU emulation of candidate
readings (review of s16). This times that CPU part alone, on one core, so a change to the
emulator or to phase B can be measured on any machine before it meets the device.

The black box is a stand-in for cuBLAS's ``draw_sampled``: it draws only the sampled rows of A
and columns of B (cells are independent, so that is what the device returns) and computes the
true cells with the emulator under the answer's true descriptor. Its own time is measured and
subtracted: on the device that work is the GPU's. Every run checks that phase B returns a
descriptor equivalent to the truth on the answer's shapes (a faster wrong answer is no result).

    PYTHONPATH=. python benchmarks/reconstruction/phaseb_speed.py [--cases a,b] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    """One phase-B answer: its key, the truth, the known descriptor it is predicted from, shapes."""

    name: str
    key: str
    truth: Any
    bases: tuple[Any, ...]
    group: tuple[tuple[int, int, int], ...]


class SampledBox:
    """cuBLAS stand-in: ``draw_sampled`` returns sampled operand rows/columns and the true cells."""

    name = "sampled-emulator"

    def __init__(self, truth: Any) -> None:
        self.truth = truth
        self.in_dtype, self.out_dtype = truth.in_dtype, truth.out_dtype
        self.spent = 0.0  # process seconds inside the stand-in (the GPU's share on the device)
        self.draws = 0

    def draw_sampled(
        self, m: int, n: int, k: int, kind: str, seed: int, rows: list[int], cols: list[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from fixbits.emulate import emulate
        from fixbits.probe.recover import _draw_pair

        t = time.process_time()
        a, b = _draw_pair(len(rows), len(cols), k, self.in_dtype, kind, seed)
        got = emulate(self.truth, a, b)
        self.spent += time.process_time() - t
        self.draws += 1
        return a, b, got

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        raise RuntimeError("the stand-in only draws sampled cells")


def cases() -> list[Case]:
    """fp16 answers of the H200's a23 / a24 kinds (shapes and K from the n16 log's failures), each
    predicted from four known descriptors as bases_for gives them (other tiles' steps, an fp32-output
    hint whose partials are fp32, another split granule), so phase B weighs ~40 readings."""
    from fixbits.desc import GEMMDesc, KCut

    tc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    split2 = tc.replace(
        k_cuts=(KCut("contiguous", count=2, granule=8, aligned_granule=64),),
        partial_dtype="fp16",
        merge_dtype="fp16",
    )
    cut8 = (KCut("contiguous", count=2, granule=8),)
    hint = split2.replace(partial_dtype="fp32", merge_dtype="fp32")
    others = (
        split2.replace(k_loop_step=32),
        hint.replace(k_loop_step=128, residue="first"),
        split2.replace(k_cuts=cut8),
        hint.replace(k_loop_step=64, residue="first"),
    )
    deep = ((20, 70322, 30232), (24, 4096, 7822), (40, 2048, 1182), (17, 1000, 2105), (32, 512, 1417))
    mid = ((16, 8192, 5001), (64, 1000, 1182), (48, 2880, 2105), (8, 14336, 12001))
    return [
        Case("a23-split2-fp16out", "a23-t5-s2-r4-w0-c0-g0", split2.replace(k_loop_step=64), others, deep),
        Case("a23-split2-stages64", "a23-t5-s2-r4-w0-c0-g15", split2.replace(k_loop_step=64), others, deep),
        Case(
            "a24-single-fp16out",
            "a24-t11-s1-r0-w0-c0-g0",
            tc.replace(k_loop_step=128, residue="first"),
            (
                tc.replace(k_loop_step=64),
                tc.replace(k_loop_step=32),
                tc.replace(use_fast_accum=False, promotion_interval=4),
                tc.replace(k_loop_step=256, residue="first"),
            ),
            mid,
        ),
    ]


def run_case(case: Case, seed: int) -> dict[str, Any]:
    from fixbits.probe import reconstruct as R
    from fixbits.probe.plan import equivalent_on

    box = SampledBox(case.truth)
    task: dict[str, Any] = {
        "seed": seed,
        "prio": [],
        "group": [list(s) for s in case.group],
        "in_dtype": case.truth.in_dtype,
        "out_dtype": case.truth.out_dtype,
        "key": case.key,
        "from_keys": [f"a23-t{9 + i}-s2-r4-w0-c0-g0" for i in range(len(case.bases))],
    }
    shapes = R._verify_shapes(task, 2)
    t0 = time.process_time()
    desc, used, note, _ = R._predict(box, list(case.bases), task, shapes)
    total = time.process_time() - t0
    ok = desc is not None and all(equivalent_on(desc, case.truth, k) for _, _, k in case.group)
    return {
        "case": case.name,
        "phase_b_s": total - box.spent,
        "box_s": box.spent,
        "draws": box.draws,
        "shapes": " ".join(f"{m}x{n}x{k}" for m, n, k in used),
        "correct": ok,
        "note": note.strip(),
    }


def run_shape(case: Case, shape: tuple[int, int, int], draws: int, cells: int, seed: int) -> dict[str, Any]:
    """One verify_draws call as _predict (2 draws, 8 cells) or _settle (8 draws, 32 cells) makes it,
    with every reading _predict builds from the case's bases."""
    from fixbits.probe import reconstruct as R
    from fixbits.probe.recover import verify_draws

    readings: list[Any] = []
    for b in case.bases:
        readings += R._step_variants(b) + R._reduction_variants(b) + R._granule_variants(b)
    readings = list(dict.fromkeys(readings))
    box = SampledBox(case.truth)
    t0 = time.process_time()
    ok, done = verify_draws(box, readings, *shape, seed=seed, draws=draws, cells=cells)
    total = time.process_time() - t0
    return {
        "what": f"{case.name}: verify_draws {shape[0]}x{shape[1]}x{shape[2]}, {len(readings)} readings, "
        f"{draws} draws, cells {cells}",
        "s": total - box.spent,
        "box_s": box.spent,
        "passed": sum(ok),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--seed", type=int, default=5)
    args = p.parse_args(argv)
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as a worker has
    except (AttributeError, OSError):
        pass
    want = {c for c in args.cases.split(",") if c}
    bad = 0
    print("| case | phase B CPU s (box excluded) | box s | draws | correct | shapes drawn |")
    print("|---|---:|---:|---:|---|---|")
    for case in cases():
        if want and case.name not in want:
            continue
        r = run_case(case, args.seed)
        bad += not r["correct"]
        print(
            f"| {r['case']} | {r['phase_b_s']:.1f} | {r['box_s']:.1f} | {r['draws']} | {r['correct']} | "
            f"{r['shapes']} |",
            flush=True,
        )
    print()
    print("| one verify_draws call | CPU s (box excluded) | box s | readings passing |")
    print("|---|---:|---:|---:|")
    first = cases()[0]
    if not want or first.name in want:
        for shape, draws, cells in (
            ((40, 2048, 1182), 2, 8),
            ((20, 70322, 30232), 2, 8),
            ((20, 70322, 30232), 8, 32),
        ):
            r = run_shape(first, shape, draws, cells, args.seed)
            print(f"| {r['what']} | {r['s']:.2f} | {r['box_s']:.2f} | {r['passed']} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
