"""TorchInductor-style persistent reduction (hand-written in Inductor's shape until
runners/device/gen_inductor.py supplies generated ones): out[x] = sum_r in[x, r].

Written the way Inductor emits ``torch.sum(x, dim=-1)`` for a short row: XBLOCK rows per
program, R0_BLOCK >= r0_numel, ``tl.where`` padding and ``tl.sum(..., 1)[:, None]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model


@triton.jit
def triton_per_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_mask = r0_index < r0_numel
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, other=0.0).to(tl.float32)
    tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
    tmp3 = tl.where(r0_mask & xmask, tmp1, 0)
    tmp4 = tl.sum(tmp3, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp4, xmask)


KERNELS = (triton_per_fused_sum_0,)
CPU_REPLAY = ("out",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["M"], shape["N"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    xb = cfg.block("XBLOCK")
    kernel_for(triton_per_fused_sum_0, pinned)[(triton.cdiv(M, xb),)](
        x, out, M, N, XBLOCK=xb, R0_BLOCK=next_pow2(N), **launch_opts(cfg))
    return {"out": out}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"out": model.tree_sum(inputs["x"], axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"in_ptr0": ptr(dtype), "out_ptr0": "*fp32", "xnumel": "i32", "r0_numel": "i32",
           "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"}
    return [(triton_per_fused_sum_0, sig, {"XBLOCK": cfg.block("XBLOCK"), "R0_BLOCK": next_pow2(shape["N"])})]


def launch_ints(shape: dict[str, int], cfg: Config, pinned: bool) -> tuple[dict[str, int], tuple[int]]:
    """``xnumel``, ``r0_numel`` and the grid as ``launch`` passes them, for the checker's launch
    specialisation (free and pinned order)."""
    return {"xnumel": shape["M"], "r0_numel": shape["N"]}, (triton.cdiv(shape["M"], cfg.block("XBLOCK")),)
