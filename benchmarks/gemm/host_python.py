"""The Python part of fixbits.matmul's cached call on the GPU's path, measured on a CPU.

    python benchmarks/gemm/host_python.py [--fixbits-root DIR] [--reps 3000] [--out FILE]

host_us.py's CPU mode stubs the launch below Triton's CompiledKernel.run, so it never takes
the path a GPU takes (RawRun: Triton 3.6's C launcher called directly). Here the driver is
tests/_kernels_aot.RawSm90Driver: the launcher has CudaLauncher's shape, so the cached calls go
through RawRun as on the H200, and only the C launcher (a builtin that ignores its arguments)
and CUtensorMap encoding (a token) are stand-ins. CPU tensors are declared CUDA, as on the GPU.

What it leaves out: the C launcher's own work (argument parsing, data_ptr() calls and a
cuPointerGetAttribute per tensor argument, cuLaunchKernelEx) and the CUDA allocator; those
need the GPU (benchmarks/gemm/host_breakdown.py). ``--fixbits-root`` times another checkout's
fixbits (e.g. a worktree of an earlier commit) with this checkout's stand-ins, for a
before/after in one process environment. Medians of 7 batches, process time per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def per_call_us(fn: Any, reps: int) -> float:
    fn()
    out = []
    for _ in range(7):
        t = time.process_time()
        for _ in range(reps):
            fn()
        out.append((time.process_time() - t) / reps * 1e6)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixbits-root", default=str(REPO), help="the checkout whose fixbits is timed")
    ap.add_argument("--reps", type=int, default=3000)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))
    sys.path.insert(0, args.fixbits_root)

    from _kernels_aot import RawSm90Driver
    from host_us import cpu_case, route_configs

    import fixbits
    import fixbits.kernels.launch as launch
    import fixbits.kernels.matmul as mm

    launch.ADDRESS_ANY_DEVICE = True  # the CPU tensors stand in for CUDA ones
    desc, a, b, res, eps = cpu_case()
    configs = route_configs("plain", "swap", "tma", "tma persistent", "tma store")
    raw_calls = [0]
    orig = launch.RawRun.launch

    def counted(self: Any, *a: Any) -> None:
        raw_calls[0] += 1
        orig(self, *a)

    launch.RawRun.launch = counted  # type: ignore[method-assign]
    rows = []
    print(f"fixbits from {Path(fixbits.__file__).parent}")
    print(f"{'route':16s} {'epilogue':15s} {'us/call':>8s} {'raw run':>8s}  (process time, C launcher stubbed)")
    with RawSm90Driver():
        for name, cfg in configs.items():
            for ep_name, ops in eps.items():
                mm._LAUNCHES.clear()
                d = desc.replace(epilogue=ops)
                am = a[:16] if name == "swap" else a
                rm = res[:16] if name == "swap" else res
                raw_calls[0] = 0
                us = per_call_us(lambda d=d, cfg=cfg, am=am, rm=rm: mm.matmul(am, b, desc=d, config=cfg, residual=rm),
                                 args.reps)  # fmt: skip
                rows.append({"route": name, "epilogue": ep_name, "us_per_call": us, "raw_run_calls": raw_calls[0]})
                print(f"{name:16s} {ep_name:15s} {us:8.2f} {raw_calls[0] > 0!s:>8s}")
    if args.out:
        Path(args.out).write_text(json.dumps({"fixbits": str(Path(fixbits.__file__).parent), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
