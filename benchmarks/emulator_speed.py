"""Wall time of the CPU emulator on the reference case (256x256x4096 fp16, wgmma k16 single pass).

Target: under 5 s on one core. Run: python benchmarks/emulator_speed.py [--repeat N]
(set OMP_NUM_THREADS=1 / OPENBLAS_NUM_THREADS=1 to be sure of one core; numpy's elementwise
ops used by the emulator are single-threaded anyway)."""

from __future__ import annotations

import argparse
import time

from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw

CASES = {
    "single_pass_fp16_wgmma_k16": GEMMDesc(
        arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16"
    ),
    "per_mma_fp16_interval4": GEMMDesc(
        arch="sm_90",
        instruction="wgmma",
        instruction_k=16,
        in_dtype="fp16",
        use_fast_accum=False,
        promotion_interval=4,
    ),
    "splitk8_fp16": GEMMDesc(
        arch="sm_90",
        instruction="wgmma",
        instruction_k=16,
        in_dtype="fp16",
        k_cuts=(KCut("contiguous", count=8),),
    ),
    "fp8_e4m3_wgmma_k32": GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", nargs=3, type=int, default=(256, 256, 4096), metavar=("M", "N", "K"))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="also time the other descriptor families")
    args = parser.parse_args()
    m, n, k = args.shape
    names = list(CASES) if args.all else ["single_pass_fp16_wgmma_k16"]
    for name in names:
        desc = CASES[name]
        a = draw((m, k), desc.in_dtype, "ordinary", 1)
        b = draw((k, n), desc.in_dtype, "ordinary", 2)
        best, best_cpu = float("inf"), float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            emulate(desc, a, b)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        # CPU time is the figure that matters on a shared machine (wall time includes waiting)
        print(f"{name:32s} {m}x{n}x{k}  wall {best:6.2f} s  cpu {best_cpu:6.2f} s  ({m * n * k / best_cpu / 1e6:.0f} M products/cpu-s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
