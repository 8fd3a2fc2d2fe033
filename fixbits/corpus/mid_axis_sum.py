"""Rank-3 sum over the middle axis: Y[b, c] = sum_r X[b, r, c] on a (BLOCK_B, BLOCK_R, BLOCK_C) tile.

Exercises the tree on an inner axis of a rank-3 tensor (neither first nor last).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model


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


KERNELS = (mid_axis_sum_kernel,)
CPU_REPLAY = ("y",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["B"], shape["R"], shape["C"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    B, R, C = x.shape
    y = torch.empty((B, C), dtype=torch.float32, device=x.device)
    bb, bc = cfg.block("BLOCK_B"), cfg.block("BLOCK_C")
    k = kernel_for(mid_axis_sum_kernel, pinned)
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
