"""GPU diagnosis: fp16 warp-specialized launches, one subprocess each under a timeout.

    PYTHONPATH=<repo> python3 runners/device/ws_probe.py --out DIR [--budget-s S] [--b nmajor|kmajor]
        [--dtype fp16|fp8] [--configs L,L] [--shapes MxNxK,MxNxK] [--out-dtype fp16|fp32]

single_pass.ws_route keeps every process off the warp-specialized branch unless it asks, because
every fp16 such launch hung on an H100 in session 23 (benchmarks/gemm/h100/s23/ws_fp16). To tell
what hangs, this probe lets them through in its child processes only (FIXBITS_WARP_SPEC=1). Each
(config, shape) runs alone, so a hang is reported as such and the rest goes on.
Each run compares the bytes with the non-warp-specialized twin (int16 views) and times both and
torch.mm. ``--b kmajor`` hands B as W.t() (K-major), the layout of the fp8 runs that did not hang.
``--dtype fp8`` runs the per-MMA fp8 descriptor of the GPU suite's warp-specialized test (which
did not finish on an H100 in session 24), so its config, out dtype and shape can be varied alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = [
    "128x256x64_g8_w4_s3_G1_tma_ws",
    "128x128x64_g8_w4_s4_G1_tma_ws",
    "256x128x64_g8_w4_s3_G1_tma_ws",
]
SHAPES = [(1024, 5120, 2048), (4096, 4096, 4096), (256, 18432, 8192)]

CHILD = r"""
import sys, torch, triton
sys.path.insert(0, sys.argv[1])
from fixbits.desc import GEMMDesc
from fixbits.kernels._host import KernelConfig
from fixbits.kernels.single_pass import tile_matmul as fast_matmul
from fixbits.kernels.per_mma import per_mma_matmul
label, m, n, k, dt, lay, odt = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7], sys.argv[8]
tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dt]
g = torch.Generator(device="cuda").manual_seed(7)
a = torch.randn((m, k), generator=g, device="cuda").to(tdt)
b = torch.randn((k, n), generator=g, device="cuda").to(tdt) if lay == "nmajor" else torch.randn((n, k), generator=g, device="cuda").to(tdt).t()
if dt == "fp8":  # the GPU suite's per_mma_fp8 descriptor
    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", out_dtype=odt,
                    k_loop_step=128, use_fast_accum=False, promotion_interval=4)
    tile_matmul = per_mma_matmul
else:
    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype=dt, out_dtype=odt)
    tile_matmul = fast_matmul
cfg = KernelConfig.from_label(label)
twin = KernelConfig.from_label(label.replace("_ws", "").replace("_w4_", "_w8_"))
y = tile_matmul(a, b, desc, config=cfg); torch.cuda.synchronize()
z = tile_matmul(a, b, desc, config=twin); torch.cuda.synchronize()
ms = triton.testing.do_bench(lambda: tile_matmul(a, b, desc, config=cfg), rep=50)
ms2 = triton.testing.do_bench(lambda: tile_matmul(a, b, desc, config=twin), rep=50)
ms3 = triton.testing.do_bench(lambda: torch.mm(a, b), rep=50) if dt != "fp8" else float("nan")
print("RESULT", int((y.view(torch.int16) != z.view(torch.int16)).sum()), ms, ms2, ms3)
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=120)
    ap.add_argument("--b", choices=("nmajor", "kmajor"), default="nmajor", help="B's layout")
    ap.add_argument(
        "--dtype", choices=("fp16", "fp8"), default="fp16", help="fp8: the suite's per-MMA descriptor"
    )
    ap.add_argument("--out-dtype", choices=("fp16", "fp32"), default="fp16")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated config labels")
    ap.add_argument("--shapes", default=",".join(f"{m}x{n}x{k}" for m, n, k in SHAPES), help="MxNxK,...")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from fixbits.kernels.single_pass import WARP_SPEC_ENV
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rows = []
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    for label in args.configs.split(","):
        for m, n, k in shapes:
            if time.time() - t0 > args.budget_s:
                break
            row = {
                "config": label,
                "shape": f"{m}x{n}x{k}",
                "b": args.b,
                "dtype": args.dtype,
                "out": args.out_dtype,
            }
            try:
                p = subprocess.run([sys.executable, "-c", CHILD, str(REPO), label, str(m), str(n), str(k), args.dtype, args.b,
                                    args.out_dtype],
                                   capture_output=True, text=True, timeout=40,
                                   env={**os.environ, WARP_SPEC_ENV: "1"})  # fmt: skip
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")]
                if line:
                    d, ms, ms2, ms3 = line[0].split()[1:]
                    row.update(differ=int(d), ws_ms=float(ms), twin_ms=float(ms2), mm_ms=float(ms3))
                else:
                    row.update(error=(p.stderr or p.stdout)[-400:])
            except subprocess.TimeoutExpired:
                row["error"] = "timeout 40 s (hang)"
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out / "ws_probe.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
