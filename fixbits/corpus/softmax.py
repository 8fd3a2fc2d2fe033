"""Row softmax: P[m, :] = exp(x - max) / sum(exp(x - max)), one row per program.

The max needs no pinning (it selects an input); the denominator is the sum that moves with the
layout. exp is an approximate hardware instruction the CPU does not reproduce, so with aux=True
the kernel also stores the fp32 numerators E and the denominator D: the model check is
D == tree_sum(E) on the GPU's own E.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model


@triton.jit
def softmax_kernel(X, P, E, D, N, stride_m, BLOCK_N: tl.constexpr, AUX: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_m + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    e = tl.exp(z)
    d = tl.sum(e, axis=0)
    p = e / d
    tl.store(P + row * stride_m + cols, p.to(P.dtype.element_ty), mask=mask)
    if AUX:
        tl.store(E + row * stride_m + cols, e, mask=mask)
        tl.store(D + row, d)


KERNELS = (softmax_kernel,)
CPU_REPLAY: tuple[str, ...] = ()  # the model needs the GPU's own exp values


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    # softmax of wide-exponent logits is a one-hot; 'wide' here spreads the logits over +-64.
    x = draw((shape["M"], shape["N"]), dtype, "ordinary", seed, scale=4.0 if kind == "wide" else 1.0)
    return {"x": x}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    p = torch.empty_like(x)
    e = torch.empty((M, N) if aux else (1,), dtype=torch.float32, device=x.device)
    d = torch.empty(M if aux else 1, dtype=torch.float32, device=x.device)
    k = kernel_for(softmax_kernel, pinned)
    bn = next_pow2(N) * dict(cfg.blocks).get("N_MULT", 1)
    k[(M,)](x, p, e, d, N, x.stride(0), BLOCK_N=bn, AUX=aux, **launch_opts(cfg))
    out = {"p": p}
    if aux:
        out.update({"e": e, "d": d})
    return out


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if "e" not in outputs:
        return {}
    return {"d": model.tree_sum(outputs["e"], axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "P": ptr(dtype), "E": "*fp32", "D": "*fp32", "N": "i32", "stride_m": "i32",
           "BLOCK_N": "constexpr", "AUX": "constexpr"}
    bn = next_pow2(shape["N"]) * dict(cfg.blocks).get("N_MULT", 1)
    return [(softmax_kernel, sig, {"BLOCK_N": bn, "AUX": False})]


def launch_ints(shape: dict[str, int], cfg: Config, pinned: bool) -> tuple[dict[str, int], tuple[int]]:
    """The row length and grid of ``softmax_kernel`` as ``launch`` passes them, for the checker's
    launch specialisation (free and pinned order). The row stride stays a parameter: a number
    that is no multiple of the tile would leave no block / thread split of the store offset
    (coord_split.py), and the signature then holds for every stride."""
    return {"N": shape["N"]}, (shape["M"],)
