"""Where fixbits.matmul's host microseconds go, part by part, on a GPU host.

    PYTHONPATH=. python3 benchmarks/gemm/host_breakdown.py [--reps 400] [--out FILE]

host_us.py gives the whole call per route; this splits it, on the same operands, so a change
to the host path can be aimed at the part that costs. Per route (plain, TMA, TMA persistent,
TMA with the bulk store):

* whole: ``fixbits.matmul`` as a caller runs it (the launch cache hit included);
* closure: the cached launch closure itself (matmul's key building skipped);
* closure_tensor_args: the same with tensors, not their addresses, handed to the launcher;
* python: the closure with Triton's C launcher stubbed (our Python plus torch.empty);
* c_launch: Triton's C launcher alone on the arguments the closure last passed it (argument
  parsing, data_ptr() and cuPointerGetAttribute per pointer, cuLaunchKernelEx);
* c_launch_ints: the same with every tensor argument passed as its integer address (what the
  launcher does with an int: no Python call, no driver query);
* empty, stream: torch.empty of the output and the (device, stream) query, alone;
* torch_mm: torch.mm on the same operands.

Medians of 7 batches, the GPU queue drained between batches (host_us.per_call_us).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--out", default="")
    args = ap.parse_args()

    import torch
    from host_us import per_call_us, route_configs

    from fixbits.desc import GEMMDesc

    def drained(fn: Any) -> float:
        return per_call_us(fn, args.reps, drain=torch.cuda.synchronize)

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    configs = route_configs("plain", "tma", "tma persistent", "tma store")
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn((1024, 2048), generator=g, device="cuda").half()
    b = torch.randn((2048, 1536), generator=g, device="cuda").half()
    rows: list[dict[str, Any]] = []
    cols = ("whole", "closure", "closure_tensor_args", "python", "c_launch", "c_launch_ints", "empty", "stream", "torch_mm")
    print(f"{'route':16s} " + " ".join(f"{c:>13s}" for c in cols) + "  (host us per call)")
    for name, cfg in configs.items():
        row = route_row(name, cfg, desc, a, b, drained)
        rows.append(row)
        print(f"{name:16s} " + " ".join(f"{row.get(c, float('nan')):13.2f}" for c in cols)
              + f"  args={row.get('n_args')} tensors={row.get('n_tensor_args')} equal={row['bytes_equal_torch_mm']}")  # fmt: skip
    if args.out:
        Path(args.out).write_text(json.dumps({"reps": args.reps, "shape": [1024, 1536, 2048], "rows": rows}, indent=1))
    return 0


def route_row(name: str, cfg: Any, desc: Any, a: Any, b: Any, drained: Any) -> dict[str, Any]:
    """One route's parts (see the module docstring), each timed alone on the same operands."""
    import torch

    import fixbits.kernels.launch as launch
    import fixbits.kernels.matmul as mm

    mm._LAUNCHES.clear()
    out = mm.matmul(a, b, desc=desc, config=cfg)
    ref = torch.mm(a, b)
    row: dict[str, Any] = {"route": name, "bytes_equal_torch_mm": bool(torch.equal(out.view(torch.int16), ref.view(torch.int16)))}
    (entry,) = mm._LAUNCHES.values()
    closure = entry[3]
    row["whole"] = drained(lambda: mm.matmul(a, b, desc=desc, config=cfg))
    row["closure"] = drained(lambda: closure(a, b, None, None, None))
    launch.INT_POINTERS = False  # the launcher given tensors, as before addresses were passed
    try:
        row["closure_tensor_args"] = drained(lambda: closure(a, b, None, None, None))
    finally:
        launch.INT_POINTERS = True
    orig_launch = launch.RawRun.launch
    seen: list[Any] = []

    def capture(self: Any, gr: Any, stream: int, kernel: Any, kargs: Any) -> None:
        seen[:] = [self.raw, (gr[0], gr[1], gr[2], stream, kernel.function, self.coop, self.pdl, None, None,
                              kernel.packed_metadata, None, None, None, *self.expand(kargs))]  # fmt: skip
        orig_launch(self, gr, stream, kernel, kargs)

    launch.RawRun.launch = capture  # type: ignore[method-assign]
    try:
        closure(a, b, None, None, None)
        launch.RawRun.launch = lambda *_: None  # type: ignore[method-assign,assignment]
        row["python"] = drained(lambda: closure(a, b, None, None, None))
    finally:
        launch.RawRun.launch = orig_launch  # type: ignore[method-assign]
    if seen:
        raw, full = seen
        ints = tuple(x.data_ptr() if isinstance(x, torch.Tensor) else x for x in full)
        row["c_launch"] = drained(lambda: raw(*full))
        row["c_launch_ints"] = drained(lambda: raw(*ints))
        row["n_args"] = len(full)
        row["n_tensor_args"] = sum(isinstance(x, torch.Tensor) for x in full)
    shape = (a.shape[0], b.shape[1])
    row["empty"] = drained(lambda: torch.empty(shape, dtype=torch.float16, device="cuda"))
    row["stream"] = drained(launch._current_device_stream)
    row["torch_mm"] = drained(lambda: torch.mm(a, b))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        mm.matmul(a, b, desc=desc, config=cfg)
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
    row["cprofile_top"] = text.getvalue()
    return row


if __name__ == "__main__":
    sys.exit(main())
