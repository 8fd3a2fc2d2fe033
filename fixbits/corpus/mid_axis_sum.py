"""Rank-3 sum over the middle axis: Y[b, c] = sum_r X[b, r, c] on a (BLOCK_B, BLOCK_R, BLOCK_C) tile.

Exercises the tree on an inner axis of a rank-3 tensor (neither first nor last).
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
def mid_axis_sum_kernel(X, Y, B, R, C, BLOCK_B: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    r = tl.arange(0, BLOCK_R)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    b3 = b[:, None, None]
    r3 = r[None, :, None]
    c3 = c[None, None, :]
    mask = (b3 < B) & (r3 < R) & (c3 < C)
    x = tl.load(X + b3 * R * C + r3 * C + c3, mask=mask, other=0.0).to(tl.float32)
    s = tl.sum(x, axis=1)
    tl.store(Y + b[:, None] * C + c[None, :], s, mask=(b[:, None] < B) & (c[None, :] < C))


@triton.jit
def mid_axis_sum_rows_in_regs_kernel(X, Y, B, R, C, R_HI: tl.constexpr, R_LO: tl.constexpr, BLOCK_C: tl.constexpr):
    # One b per program; the reduced R axis loaded as (R_HI, R_LO) with r = hi * R_LO + lo so its
    # low bits sit in registers; the same tree as the pinned tl.sum(x, axis=1).
    b = tl.program_id(0)
    hi = tl.arange(0, R_HI)[:, None, None]
    lo = tl.arange(0, R_LO)[None, :, None]
    c1 = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    c = c1[None, None, :]
    r = hi * R_LO + lo
    x = tl.load(X + b * R * C + r * C + c, mask=(r < R) & (c < C), other=0.0).to(tl.float32)
    tl.store(Y + b * C + c1, tree_sum(x, (0, 1)), mask=c1 < C)


KERNELS = (mid_axis_sum_kernel, mid_axis_sum_rows_in_regs_kernel)
VARIANTS = ("rows_in_regs",)
CPU_REPLAY = ("y",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["B"], shape["R"], shape["C"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    B, R, C = x.shape
    y = torch.empty((B, C), dtype=torch.float32, device=x.device)
    bc = cfg.block("BLOCK_C")
    if pinned == "rows_in_regs":
        r_hi, r_lo = rows_split(next_pow2(R), bc, x.element_size(), cfg.num_warps)
        mid_axis_sum_rows_in_regs_kernel[(B, triton.cdiv(C, bc))](x, y, B, R, C, R_HI=r_hi, R_LO=r_lo, BLOCK_C=bc,
                                                                  **launch_opts(cfg))
        return {"y": y}
    bb = cfg.block("BLOCK_B")
    k = kernel_for(mid_axis_sum_kernel, bool(pinned))
    k[(triton.cdiv(B, bb), triton.cdiv(C, bc))](x, y, B, R, C, BLOCK_B=bb, BLOCK_R=next_pow2(R), BLOCK_C=bc,
                                                 **launch_opts(cfg))
    return {"y": y}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"y": model.tree_sum(inputs["x"], axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"X": ptr(dtype), "Y": "*fp32", "B": "i32", "R": "i32", "C": "i32",
           "BLOCK_B": "constexpr", "BLOCK_R": "constexpr", "BLOCK_C": "constexpr"}
    return [(mid_axis_sum_kernel, sig, {"BLOCK_B": cfg.block("BLOCK_B"), "BLOCK_R": next_pow2(shape["R"]),
                                        "BLOCK_C": cfg.block("BLOCK_C")})]
