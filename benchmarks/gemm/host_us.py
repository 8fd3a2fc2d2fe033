"""Host microseconds per fixbits.matmul call on this CPU, with only the driver's launch stubbed.

    PYTHONPATH=. python3 benchmarks/gemm/host_us.py [--reps 2000]

Triton's real dispatch runs (tests/_kernels_aot.Sm90Driver: device 0, stream 0, sm_90
kernels compiled ahead of time, the cubin launch recorded instead of run), CPU tensors stand
in for the GPU's. Rows: the cached matmul path through DirectLaunch (the default), the same
with FIXBITS_DIRECT_LAUNCH off (kernel[grid] every call), and a bare kernel[grid] + torch.empty
for reference; per route (plain, swap-AB, TMA, TMA persistent) with a residual+scale epilogue
and without. Medians of 7 batches. On the GPU host add the real launch (cuLaunchKernelEx,
a few us) and the CUDA allocator's torch.empty.

    PYTHONPATH=. python3 benchmarks/gemm/host_us.py --gpu [--out FILE]

On a GPU: real tensors and launches, one row per route, the cached path with RawRun (Triton's
C launcher called directly, TMA maps kept) and without it (kernel.run), against torch.mm's host
time on the same operands (enqueue only, the queue drained between batches).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def route_configs(*names: str) -> dict:
    """The host-path benchmarks' routes (one config each) by name, in the order asked."""
    from fixbits.kernels._host import KernelConfig

    routes = {
        "plain": KernelConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3),
        "swap": KernelConfig(BLOCK_M=128, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4, SWAP_AB=1),
        "tma": KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, USE_TMA=1),
        "tma persistent": KernelConfig(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3,
                                       USE_TMA=1, PERSISTENT=1),
        "tma store": KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4,
                                  USE_TMA=1, TMA_STORE=1),
    }  # fmt: skip
    return {n: routes[n] for n in names}


def cpu_case():
    """(descriptor, A, B, residual, epilogues) of the CPU host-path timings, with fixbits' TMA
    descriptors allowed on CPU tensors and the H200's SM count (the launch itself is stubbed)."""
    import torch

    import fixbits.kernels.single_pass as sp
    from fixbits.desc import EpilogueOp, GEMMDesc

    sp.tma_descriptors = functools.partial(sp.tma_descriptors, require_cuda=False)  # CPU tensors
    sp.num_sms = lambda device: 132
    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    g = torch.Generator().manual_seed(5)
    m, n, k = 256, 512, 1024
    a = torch.randn((m, k), generator=g).half()
    b = torch.randn((k, n), generator=g).half()
    res = torch.randn((m, n), generator=g).half()
    return desc, a, b, res, {"none": (), "scale+residual": (EpilogueOp("scale", 0.5), EpilogueOp("residual"))}


def per_call_us(fn, reps: int, drain=None) -> float:
    """Median of 7 batches of ``reps`` calls; ``drain`` (e.g. torch.cuda.synchronize) runs
    between batches, outside the timing, so a GPU queue never fills across them."""
    fn()
    batches = []
    for _ in range(7):
        if drain is not None:
            drain()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        batches.append((time.perf_counter() - t) / reps * 1e6)
    if drain is not None:
        drain()
    return statistics.median(batches)


def gpu_rows(reps: int, out: str) -> int:
    """Host us per call with real launches: RawRun on and off, and torch.mm, per route."""
    import json

    import torch

    import fixbits.kernels.launch as launch
    import fixbits.kernels.matmul as mm
    from fixbits.desc import GEMMDesc

    def drained(fn):
        return per_call_us(fn, reps, drain=torch.cuda.synchronize)

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    configs = route_configs("plain", "tma", "tma persistent")
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn((1024, 2048), generator=g, device="cuda").half()
    b = torch.randn((2048, 1536), generator=g, device="cuda").half()
    rows = []
    print(
        f"{'route':16s} {'raw run':>8s} {'kernel.run':>11s} {'torch.mm':>9s}  (host us per call, real launches)"
    )
    for name, cfg in configs.items():
        row = {"route": name}
        outs = []
        for label, on in (("raw_run", True), ("kernel_run", False)):
            launch.RAW_RUN = on
            mm._LAUNCHES.clear()
            outs.append(mm.matmul(a, b, desc=desc, config=cfg))
            row[label] = drained(lambda cfg=cfg: mm.matmul(a, b, desc=desc, config=cfg))
        row["torch_mm"] = drained(lambda: torch.mm(a, b))
        row["bytes_equal"] = bool(torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)))
        rows.append(row)
        print(f"{name:16s} {row['raw_run']:8.2f} {row['kernel_run']:11.2f} {row['torch_mm']:9.2f}  "
              f"equal={row['bytes_equal']}")  # fmt: skip
    launch.RAW_RUN = True
    if out:
        Path(out).write_text(json.dumps({"reps": reps, "rows": rows}, indent=1))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--gpu", action="store_true", help="real launches on the current CUDA device")
    ap.add_argument("--out", default="", help="--gpu: also write the rows as JSON here")
    args = ap.parse_args()
    if args.gpu:
        return gpu_rows(min(args.reps, 400), args.out)
    import torch
    from _kernels_aot import Sm90Driver

    import fixbits.kernels.launch as launch
    import fixbits.kernels.matmul as mm
    import fixbits.kernels.single_pass as sp

    desc, a, b, res, eps = cpu_case()
    (m, k), n = a.shape, b.shape[1]
    configs = route_configs("plain", "swap", "tma", "tma persistent")
    print(
        f"{'route':16s} {'epilogue':15s} {'direct':>8s} {'kernel[grid]':>13s}  (us per call, launch stubbed)"
    )
    with Sm90Driver(record=False):
        for name, cfg in configs.items():
            for ep_name, ops in eps.items():
                row = []
                for enabled in (True, False):
                    launch.ENABLED = enabled
                    mm._LAUNCHES.clear()
                    d = desc.replace(epilogue=ops)
                    row.append(
                        per_call_us(
                            lambda d=d, cfg=cfg: mm.matmul(a, b, desc=d, config=cfg, residual=res), args.reps
                        )
                    )
                print(f"{name:16s} {ep_name:15s} {row[0]:8.2f} {row[1]:13.2f}")
        launch.ENABLED = True
        kern = sp._single_pass_kernel[(8,)]
        kw = dict(STEP=16, IK=16, HWK=16, PROMO=0, GROUPS=0, RES_FIRST=False, EP0=0, EP1=0, EP2=0, EP3=0, OUT=0,
                  GELU_TANH_FMA=True, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3, USE_TMA=False,
                  B_TRANS=False, TMA_STORE=False, WS=False, num_warps=4, num_stages=3, **sp.LAUNCH_OPTS)  # fmt: skip

        def bare():
            out = torch.empty((m, n), dtype=torch.float16)
            kern(
                a,
                b,
                out,
                out,
                out,
                out,
                n,
                1,
                n,
                1,
                None,
                None,
                None,
                m,
                n,
                k,
                k,
                1,
                n,
                1,
                n,
                1,
                1.0,
                1.0,
                1.0,
                1.0,
                **kw,
            )

        print(f"bare torch.empty + kernel[grid]: {per_call_us(bare, args.reps):.2f}")
        print(
            f"bare torch.empty: {per_call_us(lambda: torch.empty((m, n), dtype=torch.float16), args.reps):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
