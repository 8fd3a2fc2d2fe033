"""RMSNorm forward: Y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps), one row per program.

The sum of squares is the pinned reduction; Rstd is stored and reproduced by the CPU model
(products rounded, then the tree: the tree's adds are add.rn so no product fuses into them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(X, W, Y, Rstd, N, stride_m, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.div_rn(tl.sum(x * x, axis=0), N * 1.0)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(ms + eps))
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_m + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    tl.store(Rstd + row, rstd)


KERNELS = (rmsnorm_kernel,)
CPU_REPLAY = ("rstd",)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N = shape["M"], shape["N"]
    return {"x": draw((M, N), dtype, kind, seed), "w": draw((N,), dtype, "ordinary", seed + 1)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x, w = inputs["x"], inputs["w"]
    M, N = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    k = kernel_for(rmsnorm_kernel, pinned)
    bn = next_pow2(N) * dict(cfg.blocks).get("N_MULT", 1)
    k[(M,)](x, w, y, rstd, N, x.stride(0), EPS, BLOCK_N=bn, **launch_opts(cfg))
    return {"y": y, "rstd": rstd}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    xf = inputs["x"].astype(np.float32)
    n = np.float32(xf.shape[1])
    with np.errstate(over="ignore"):
        ms = (model.tree_sum((xf * xf).astype(np.float32), axis=1) / n).astype(np.float32)
        rstd = (np.float32(1.0) / np.sqrt((ms + np.float32(EPS)).astype(np.float32))).astype(np.float32)
    return {"rstd": rstd}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "W": ptr(dtype), "Y": ptr(dtype), "Rstd": "*fp32", "N": "i32", "stride_m": "i32",
           "eps": "fp32", "BLOCK_N": "constexpr"}
    bn = next_pow2(shape["N"]) * dict(cfg.blocks).get("N_MULT", 1)
    return [(rmsnorm_kernel, sig, {"BLOCK_N": bn})]


def launch_ints(shape: dict[str, int], cfg: Config, pinned: bool) -> tuple[dict[str, int], tuple[int]]:
    """Integer arguments and grid of ``rmsnorm_kernel`` as ``launch`` passes them (contiguous x:
    stride_m = N), for the checker's launch specialisation (free and pinned order)."""
    return {"N": shape["N"], "stride_m": shape["N"]}, (shape["M"],)
