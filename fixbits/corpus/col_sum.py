"""Column sums: Y[n] = sum_m X[m, n], the reduction over axis 0 of a (BLOCK_M, BLOCK_N) tile.

BLOCK_M >= M (one tile holds every row of a column strip), BLOCK_N columns per program. The
axis-0 reduction crosses warps along rows for most layouts, the case FINDINGS measured least.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr, rows_split
from fixbits.enforce import model
from fixbits.enforce.tree import tree_sum


@triton.jit
def col_sum_kernel(X, Y, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + cols, tl.sum(x, axis=0), mask=cols < N)


@triton.jit
def col_sum_rows_in_regs_kernel(X, Y, M, N, stride_m, R_HI: tl.constexpr, R_LO: tl.constexpr,
                                BLOCK_N: tl.constexpr):
    # The same sum, written for a pinned tree: the tile is (R_HI, R_LO, BLOCK_N) with row =
    # hi * R_LO + lo, so the low row bits sit in registers; tree_sum over (0, 1) folds row index
    # hi * R_LO + lo, i.e. the very tree of col_sum_kernel's pinned tl.sum.
    hi = tl.arange(0, R_HI)[:, None, None]
    lo = tl.arange(0, R_LO)[None, :, None]
    c1 = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = c1[None, None, :]
    rows = hi * R_LO + lo
    x = tl.load(X + rows * stride_m + cols, mask=(rows < M) & (cols < N), other=0.0).to(tl.float32)
    tl.store(Y + c1, tree_sum(x, (0, 1)), mask=c1 < N)


KERNELS = (col_sum_kernel, col_sum_rows_in_regs_kernel)
VARIANTS = ("rows_in_regs",)
CPU_REPLAY = ("y",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["M"], shape["N"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    y = torch.empty(N, dtype=torch.float32, device=x.device)
    bn = cfg.block("BLOCK_N")
    if pinned == "rows_in_regs":
        r_hi, r_lo = rows_split(next_pow2(M), bn, x.element_size(), cfg.num_warps)
        col_sum_rows_in_regs_kernel[(triton.cdiv(N, bn),)](x, y, M, N, x.stride(0), R_HI=r_hi, R_LO=r_lo,
                                                           BLOCK_N=bn, **launch_opts(cfg))
        return {"y": y}
    k = kernel_for(col_sum_kernel, bool(pinned))
    k[(triton.cdiv(N, bn),)](x, y, M, N, x.stride(0), BLOCK_M=next_pow2(M), BLOCK_N=bn, **launch_opts(cfg))
    return {"y": y}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"y": model.tree_sum(inputs["x"], axis=0)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "Y": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    return [(col_sum_kernel, sig, {"BLOCK_M": next_pow2(shape["M"]), "BLOCK_N": cfg.block("BLOCK_N")})]
