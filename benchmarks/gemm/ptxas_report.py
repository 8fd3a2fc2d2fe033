"""What ptxas makes of fixbits.matmul's tile kernel per config, on a machine with no GPU.

    PYTHONPATH=. python3 benchmarks/gemm/ptxas_report.py --dtype fp8_e4m3 --shape 16384x18432x8192 \
        --b-kmajor 128x128x128_g8_w8_s4_G1_tma 128x256x128_g8_w8_s3_G1_tma [--out FILE.md]

Each config's kernel is compiled for sm_90 through the reference host path on meta tensors
(Triton's own binder, tests/_kernels_aot.Sm90Launches), then assembled by the ptxas that ships
with Triton (-arch=sm_90a -v). One row per config: registers per thread, spill bytes, shared
memory, and ptxas's performance notes: C7514 (wgmma serialised, registers short) and C7517
(a warpgroup.wait the compiler had to inject). The per-MMA fp8 chain holds two accumulators
per thread (the running fp32 sum and the zero-started group partial), so this is where a
tile shape runs into the register file before it is ever timed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

DTYPES = ("fp16", "bf16", "fp8_e4m3")


@dataclass(frozen=True)
class PtxasRow:
    """ptxas's account of one config's kernel."""

    config: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    wgmma_serialized: bool  # C7514
    injected_waits: int  # C7517 notes


def ptxas_path() -> str:
    import triton

    p = Path(triton.__file__).parent / "backends/nvidia/bin/ptxas"
    if not p.exists():
        raise FileNotFoundError(f"no ptxas in this Triton install ({p})")
    return str(p)


def descriptor(dtype: str) -> object:
    """The tile family's descriptor for ``dtype``: fp8 per-MMA (promotion every 4 k32
    instructions, cuBLASLt's fp8 form on sm_90), 16-bit fast accumulation."""
    from fixbits.desc import GEMMDesc

    if dtype == "fp8_e4m3":
        return GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype=dtype, out_dtype="fp32",
                        use_fast_accum=False, promotion_interval=4, k_loop_step=128)  # fmt: skip
    return GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype=dtype, out_dtype="fp32")


def compile_row(dtype: str, label: str, m: int, n: int, k: int, b_kmajor: bool) -> PtxasRow:
    import torch
    from _kernels_aot import Sm90Launches

    from fixbits.kernels._host import KernelConfig, epilogue_args, torch_dtype
    from fixbits.kernels.single_pass import launch_tile_kernel

    desc = descriptor(dtype)
    cfg = KernelConfig.from_label(label)
    dt = torch_dtype(dtype)
    a = torch.empty((m, k), dtype=dt, device="meta")
    b = torch.empty((n, k), dtype=dt, device="meta").t() if b_kmajor else torch.empty((k, n), dtype=dt, device="meta")
    out = torch.empty((m, n), dtype=torch.float32, device="meta")
    with Sm90Launches() as got:
        launch_tile_kernel(desc, a, b, out, epilogue_args(desc, m, n), cfg)  # type: ignore[arg-type]
    kern = got.kernels[0]
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(kern.asm["ptx"])
        res = subprocess.run([ptxas_path(), "-arch=sm_90a", "-v", src, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True, check=True)  # fmt: skip
    log = res.stderr + res.stdout
    regs = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return PtxasRow(
        config=label,
        registers=int(regs.group(1)) if regs else -1,
        spill_stores=int(spills.group(1)) if spills else -1,
        spill_loads=int(spills.group(2)) if spills else -1,
        shared_bytes=int(kern.metadata.shared),
        wgmma_serialized="C7514" in log or "wgmma.mma_async instructions are serialized" in log,
        injected_waits=log.count("C7517"),
    )


def markdown(rows: list[PtxasRow], head: str) -> str:
    lines = [head, "", "| config | registers | spill stores / loads (B) | shared (B) | wgmma serialised (C7514) | injected waits (C7517) |",
             "|---|---:|---:|---:|---|---:|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r.config} | {r.registers} | {r.spill_stores} / {r.spill_loads} | {r.shared_bytes} | "
                     f"{'yes' if r.wgmma_serialized else 'no'} | {r.injected_waits} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("configs", nargs="+", help="KernelConfig labels, e.g. 128x128x128_g8_w8_s4_G1_tma")
    ap.add_argument("--dtype", default="fp8_e4m3", choices=DTYPES)
    ap.add_argument("--shape", default="16384x18432x8192", help="MxNxK the kernel is specialised for")
    ap.add_argument("--b-kmajor", action="store_true", help="B as the transpose of a row-major (N, K)")
    ap.add_argument("--out", help="also write the table to this markdown file")
    args = ap.parse_args(argv)
    try:
        m, n, k = (int(x) for x in args.shape.lower().split("x"))
    except ValueError:
        ap.error(f"--shape {args.shape!r}: expected MxNxK, e.g. 16384x18432x8192")
    rows = [compile_row(args.dtype, c, m, n, k, args.b_kmajor) for c in args.configs]
    text = markdown(rows, f"ptxas -arch=sm_90a on the {args.dtype} tile kernel, {args.shape}, "
                          f"B {'K-major' if args.b_kmajor else 'row-major'} (compiled on CPU, no GPU)")  # fmt: skip
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
