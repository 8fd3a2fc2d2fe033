"""Column sums: Y[n] = sum_m X[m, n], the reduction over axis 0 of a (BLOCK_M, BLOCK_N) tile.

BLOCK_M >= M (one tile holds every row of a column strip), BLOCK_N columns per program. The
axis-0 reduction crosses warps along rows for most layouts, the case FINDINGS measured least.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model


@triton.jit
def col_sum_kernel(X, Y, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + cols, tl.sum(x, axis=0), mask=cols < N)


KERNELS = (col_sum_kernel,)
CPU_REPLAY = ("y",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["M"], shape["N"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    y = torch.empty(N, dtype=torch.float32, device=x.device)
    bn = cfg.block("BLOCK_N")
    k = kernel_for(col_sum_kernel, pinned)
    k[(triton.cdiv(N, bn),)](x, y, M, N, x.stride(0), BLOCK_M=next_pow2(M), BLOCK_N=bn, **launch_opts(cfg))
    return {"y": y}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"y": model.tree_sum(inputs["x"], axis=0)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "Y": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    return [(col_sum_kernel, sig, {"BLOCK_M": next_pow2(shape["M"]), "BLOCK_N": cfg.block("BLOCK_N")})]
