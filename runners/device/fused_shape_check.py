"""GPU: fixbits.matmul on one shape, plain and with each fused epilogue, against torch.mm (+ eager).

    PYTHONPATH=<repo> python3 runners/device/fused_shape_check.py --out DIR [--shape 16,4096,4096]
        [--draws 10] [--seed 21]

For a profile entry that was just added (session 21: ``a66-t394-s3``, the fp16->fp16 answer of
the fused-benchmark shape 16x4096x4096 on the H200), this is the quick byte check before a whole
benchmark: the plain GEMM and every fused epilogue (bias, ReLU, GELU, SiLU·gate, residual,
scale), on ordinary draws and on draws whose rows carry wide power-of-two scales, compared as
int16 views. Writes DIR/fused_shape_check.yaml; exit status 1 on any differing draw.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402


def _cases(c: Any, m: int, n: int, g: Any) -> dict[str, tuple[dict[str, Any], Any]]:
    """Epilogue name -> (fixbits.matmul keywords, the eager reference on cuBLAS's output c)."""
    import torch
    import torch.nn.functional as F

    def rnd(*shape: int) -> Any:
        return torch.randn(*shape, dtype=torch.float16, device="cuda", generator=g)

    bias, res, gate = rnd(n), rnd(m, n), rnd(m, n)
    return {
        "none": ({}, c),
        "bias": ({"epilogue": "bias", "bias": bias}, c + bias),
        "relu": ({"epilogue": "relu"}, F.relu(c)),
        "gelu": ({"epilogue": "gelu"}, F.gelu(c)),
        "silu_gate": ({"epilogue": "silu_gate", "gate": gate}, F.silu(c) * gate),
        "residual": ({"epilogue": "residual", "residual": res}, c + res),
        "scale": ({"epilogue": (("scale", 0.5),)}, c * 0.5),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--budget-s", type=float, default=60.0, help="taken for run_all.sh; the check takes seconds"
    )
    ap.add_argument("--shape", default="16,4096,4096", help="M,N,K (fp16 in and out)")
    ap.add_argument("--draws", type=int, default=10, help="odd draws scale A's rows by 2^[-8, 8)")
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from fixbits.kernels.matmul import matmul

    m, n, k = (int(x) for x in args.shape.split(","))
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    rows = []
    for d in range(args.draws):
        wide = bool(d % 2)
        a = torch.randn(m, k, dtype=torch.float16, device="cuda", generator=g)
        b = torch.randn(k, n, dtype=torch.float16, device="cuda", generator=g)
        if wide:
            a = a * torch.exp2(torch.randint(-8, 8, (m, 1), device="cuda", generator=g).half())
        c = torch.mm(a, b)
        for name, (kw, ref) in _cases(c, m, n, g).items():
            y = matmul(a, b, **kw)
            diff = int((y.view(torch.int16) != ref.view(torch.int16)).sum())
            rows.append({"draw": d, "wide": wide, "epilogue": name, "differing": diff})
            print(
                f"draw {d} {'wide' if wide else 'ordinary':8s} {name:10s} differing elements {diff}",
                flush=True,
            )
    bad = [r for r in rows if r["differing"]]
    summary = {
        "device": torch.cuda.get_device_name(0),
        "shape": [m, n, k],
        "seed": args.seed,
        "comparisons": len(rows),
        "equal": len(rows) - len(bad),
        "rows": rows,
    }
    (out / "fused_shape_check.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    print(f"{m}x{n}x{k} fp16: {len(rows) - len(bad)} of {len(rows)} comparisons equal to torch.mm (+ eager epilogue)"
          f" (seed {args.seed})")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
