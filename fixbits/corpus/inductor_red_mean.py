"""TorchInductor-style looped reduction (hand-written in Inductor's shape): mean over the last dim.

Inductor's looped form keeps an (XBLOCK, R0_BLOCK) accumulator, adds one R0_BLOCK chunk per
iteration, and sums the accumulator once after the loop. The loop is the kernel's own algorithm
and is left as written; only the final ``tl.sum`` is pinned. So R0_BLOCK is fixed per entry
(it is part of the arithmetic) and XBLOCK / warps / stages form the config space.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, ptr
from fixbits.enforce import model

R0_BLOCK = 256


@triton.jit
def triton_red_fused_mean_1(in_ptr0, out_ptr0, out_ptr1, xnumel, r0_numel,
                            XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_first",
                       other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tmp4 = r0_numel.to(tl.float32)
    tmp5 = tmp2 / tmp4
    tl.store(out_ptr0 + (x0), tmp2, xmask)
    tl.store(out_ptr1 + (x0), tmp5, xmask)


KERNELS = (triton_red_fused_mean_1,)
CPU_REPLAY = ("sum",)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["M"], shape["N"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    s = torch.empty(M, dtype=torch.float32, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    xb = cfg.block("XBLOCK")
    kernel_for(triton_red_fused_mean_1, pinned)[(triton.cdiv(M, xb),)](
        x, s, mean, M, N, XBLOCK=xb, R0_BLOCK=R0_BLOCK, **launch_opts(cfg))
    return {"sum": s, "mean": mean}


def launch_ints(shape: dict[str, int], cfg: Config, pinned: bool) -> tuple[dict[str, int], tuple[int]]:
    """``xnumel``, ``r0_numel`` and the grid as ``launch`` passes them, for the checker's launch
    specialisation (free and pinned order)."""
    return {"xnumel": shape["M"], "r0_numel": shape["N"]}, (triton.cdiv(shape["M"], cfg.block("XBLOCK")),)


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The loop as written (a left fold per lane of the chunk, from +0.0), then the pinned tree."""
    x = inputs["x"].astype(np.float32)
    M, N = x.shape
    nch = -(-N // R0_BLOCK)
    pad = np.zeros((M, nch * R0_BLOCK), dtype=np.float32)
    pad[:, :N] = x
    acc = np.zeros((M, R0_BLOCK), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for c in range(nch):
            chunk = pad[:, c * R0_BLOCK:(c + 1) * R0_BLOCK]
            valid = (np.arange(c * R0_BLOCK, (c + 1) * R0_BLOCK) < N)[None, :]
            acc = np.where(valid, (acc + chunk).astype(np.float32), acc)
    return {"sum": model.tree_sum(acc, axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"in_ptr0": ptr(dtype), "out_ptr0": "*fp32", "out_ptr1": "*fp32", "xnumel": "i32", "r0_numel": "i32",
           "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"}
    return [(triton_red_fused_mean_1, sig, {"XBLOCK": cfg.block("XBLOCK"), "R0_BLOCK": R0_BLOCK})]
