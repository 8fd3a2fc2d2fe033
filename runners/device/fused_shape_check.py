"""GPU: fixbits.matmul on one shape, plain and with each fused epilogue, against torch.mm (+ eager).

    PYTHONPATH=<repo> python3 runners/device/fused_shape_check.py --out DIR [--shape 16,4096,4096]
        [--draws 10] [--seed 21]

For a profile entry that was just added (session 21: ``a66-t394-s3``, the fp16->fp16 answer of
the fused-benchmark shape 16x4096x4096 on the H200), this is the quick byte check before a whole
benchmark: the plain GEMM and every epilogue the fused benchmark times, against torch.mm and the
same eager reference the benchmark uses, on ordinary and wide draws (``fixbits.inputs``), compared
as int16 views. Writes DIR/fused_shape_check.yaml; exit status 1 on any differing draw.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))  # bench.FUSED_EPILOGUES: the epilogues it times

import yaml  # noqa: E402


def _references(c: Any, side: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Epilogue name -> (its ops, the eager reference on cuBLAS's output c): each fused
    benchmark epilogue (``bench.FUSED_EPILOGUES``) as ``fixbits.matmul``'s own fallback and
    ``bench.measure_fused`` build it (``precompile.epilogue_ops``, ``eager_epilogue``)."""
    from bench import FUSED_EPILOGUES

    from fixbits.desc import GEMMDesc
    from fixbits.kernels.matmul import eager_epilogue
    from fixbits.kernels.precompile import epilogue_ops

    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    out: dict[str, tuple[Any, Any]] = {"none": ((), c)}
    for name in FUSED_EPILOGUES:
        ops = epilogue_ops(name)
        out[name] = (
            ops,
            eager_epilogue(c, base.replace(epilogue=ops), side["bias"], side["residual"], side["gate"]),
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--budget-s", type=float, default=60.0, help="taken for run_all.sh; the check takes seconds"
    )
    ap.add_argument("--shape", default="16,4096,4096", help="M,N,K (fp16 in and out)")
    ap.add_argument(
        "--draws", type=int, default=10, help="even draws ordinary, odd draws wide (fixbits.inputs)"
    )
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch

    from fixbits.inputs import draw
    from fixbits.kernels.backend import to_torch
    from fixbits.kernels.matmul import matmul

    m, n, k = (int(x) for x in args.shape.split(","))
    rows = []
    for d in range(args.draws):
        kind = "wide" if d % 2 else "ordinary"
        seed = args.seed + d
        a, b = (
            to_torch(draw(s, "fp16", kind, seed + i), "fp16", "cuda") for i, s in enumerate(((m, k), (k, n)))
        )
        side = {  # the epilogue operands, ordinary draws in the output dtype
            name: to_torch(draw(s, "fp16", "ordinary", seed + 2 + i), "fp16", "cuda")
            for i, (name, s) in enumerate((("bias", (n,)), ("residual", (m, n)), ("gate", (m, n))))
        }
        for name, (ops, ref) in _references(torch.mm(a, b), side).items():
            y = matmul(a, b, epilogue=ops or None, **side)
            diff = int((y.view(torch.int16) != ref.view(torch.int16)).sum())
            rows.append({"draw": d, "kind": kind, "seed": seed, "epilogue": name, "differing": diff})
            print(f"draw {d} {kind:8s} seed {seed} {name:10s} differing elements {diff}", flush=True)
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
