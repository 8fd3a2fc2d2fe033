"""LayerNorm forward: Y = (x - mean) * rstd * w + b, with Mean and Rstd per row.

Statistics use the correctly rounded tl.div_rn / tl.sqrt_rn, so Mean and Rstd are reproducible
by the CPU model exactly (the two row sums through the tree); Y also passes through contracted
multiply-adds and is checked for config invariance only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model

EPS = 1e-5


@triton.jit
def layernorm_fwd_kernel(X, W, B, Y, Mean, Rstd, N, stride_m, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    nf = N * 1.0
    mean = tl.div_rn(tl.sum(x, axis=0), nf)
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.div_rn(tl.sum(diff * diff, axis=0), nf)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(var + eps))
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = diff * rstd * w + b
    tl.store(Y + row * stride_m + cols, y.to(Y.dtype.element_ty), mask=mask)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)


KERNELS = (layernorm_fwd_kernel,)
CPU_REPLAY = ("mean", "rstd")


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N = shape["M"], shape["N"]
    x = draw((M, N), dtype, kind, seed)
    w = draw((N,), dtype, "ordinary", seed + 1)
    b = draw((N,), dtype, "ordinary", seed + 2)
    return {"x": x, "w": w, "b": b}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x, w, b = inputs["x"], inputs["w"], inputs["b"]
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    k = kernel_for(layernorm_fwd_kernel, pinned)
    bn = next_pow2(N) * dict(cfg.blocks).get("N_MULT", 1)
    k[(M,)](x, w, b, y, mean, rstd, N, x.stride(0), EPS, BLOCK_N=bn, **launch_opts(cfg))
    return {"y": y, "mean": mean, "rstd": rstd}


def stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CPU Mean/Rstd exactly as the kernel computes them (fp32, correctly rounded ops)."""
    xf = x.astype(np.float32)
    n = np.float32(xf.shape[1])
    mean = (model.tree_sum(xf, axis=1) / n).astype(np.float32)
    diff = (xf - mean[:, None]).astype(np.float32)
    var = (model.tree_sum((diff * diff).astype(np.float32), axis=1) / n).astype(np.float32)
    rstd = (np.float32(1.0) / np.sqrt((var + np.float32(EPS)).astype(np.float32))).astype(np.float32)
    return mean, rstd


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    mean, rstd = stats(inputs["x"])
    return {"mean": mean, "rstd": rstd}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "W": ptr(dtype), "B": ptr(dtype), "Y": ptr(dtype), "Mean": "*fp32", "Rstd": "*fp32",
           "N": "i32", "stride_m": "i32", "eps": "fp32", "BLOCK_N": "constexpr"}
    bn = next_pow2(shape["N"]) * dict(cfg.blocks).get("N_MULT", 1)
    return [(layernorm_fwd_kernel, sig, {"BLOCK_N": bn})]
