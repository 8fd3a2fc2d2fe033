"""Row sums: Y[m] = sum_n X[m, n], BLOCK_M rows per program, the whole row in one tile.

The reduced axis is axis 1 of a (BLOCK_M, BLOCK_N) tile; BLOCK_N >= N, so the order is the
kernel's single ``tl.sum`` (no chunk loop). Narrow inputs are widened to fp32 before the sum,
as most hand-written kernels do.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.enforce import model
from fixbits.enforce.tree import tree_sum, tree_sum_split


@triton.jit
def row_sum_kernel(X, Y, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    s = tl.sum(x, axis=1)
    tl.store(Y + rows, s, mask=rows < M)


@triton.jit(do_not_specialize=["unit"])
def row_sum_chunks_in_regs_kernel(X, Y, N, stride_m, unit, R_HI: tl.constexpr, R_LO: tl.constexpr,
                                  VEC: tl.constexpr):
    # The same row sum, written for a pinned tree: the row is loaded as (R_HI, R_LO, VEC) with
    # column = (hi * R_LO + lo) * VEC + v, so the low column bits (v, then lo) sit in registers and
    # the first tree levels are adds, not shuffles. With VEC == 1 (rows not 16-byte aligned) `unit`
    # (a runtime 1) hides lo's contiguity so Triton does not hand lo to the lanes.
    row = tl.program_id(0)
    hi = tl.arange(0, R_HI)[:, None, None]
    lo = tl.arange(0, R_LO)[None, :, None]
    v = tl.arange(0, VEC)[None, None, :]
    if VEC == 1:
        cols = hi * R_LO + lo * unit + v
    else:
        cols = (hi * R_LO + lo) * VEC + v
    x = tl.load(X + row * stride_m + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Y + row, tree_sum(x, (0, 1, 2)))


@triton.jit(do_not_specialize=["unit"])
def row_sum_split_chunks_kernel(X, Y, N, stride_m, unit, T: tl.constexpr, R2: tl.constexpr, R_LO: tl.constexpr,
                                TOP: tl.constexpr):
    # Unaligned rows (no vector loads): chunks_in_regs puts all low column bits in registers, so a
    # warp's load spans 32 * R_LO elements (strided, slow); here only R_LO consecutive columns sit
    # in registers, then T threads, then R2 register repeats: column = (r2 * T + t) * R_LO + lo.
    # A load touches 32 * R_LO consecutive elements, the tree folds lo (adds), t (shuffles, then
    # warps) and r2 (adds): the same tree over the column index. tree_sum_split folds the TOP
    # partials (r2 and the warp bits) after one shared-memory round, not one round per warp bit.
    row = tl.program_id(0)
    t = tl.arange(0, T)[:, None, None]
    r2 = tl.arange(0, R2)[None, :, None]
    lo = tl.arange(0, R_LO)[None, None, :]
    cols = (r2 * T + t) * R_LO + lo * unit
    x = tl.load(X + row * stride_m + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(Y + row, tree_sum_split(tl.permute(x, (1, 0, 2)), TOP))


KERNELS = (row_sum_kernel, row_sum_chunks_in_regs_kernel, row_sum_split_chunks_kernel)
VARIANTS = ("chunks_in_regs", "split_chunks")
CPU_REPLAY = ("y",)  # outputs the CPU model reproduces from the inputs alone


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    return {"x": draw((shape["M"], shape["N"]), dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    M, N = x.shape
    y = torch.empty(M, dtype=torch.float32, device=x.device)
    bn = next_pow2(N) * dict(cfg.blocks).get("N_MULT", 1)  # a wider tile pads with zeros: same tree
    if pinned == "chunks_in_regs":
        bn = next_pow2(N)
        # Triton proves 16-byte alignment only for a stride divisible by 16 elements: mirror that
        aligned = x.stride(0) % 16 == 0 and x.data_ptr() % 16 == 0
        vec = min(bn, 16 // x.element_size()) if aligned else 1
        r_hi = min(bn // vec, 32 * cfg.num_warps)
        row_sum_chunks_in_regs_kernel[(M,)](x, y, N, x.stride(0), 1, R_HI=r_hi, R_LO=bn // (vec * r_hi), VEC=vec,
                                            **launch_opts(cfg))
        return {"y": y}
    if pinned == "split_chunks":
        bn = next_pow2(N)
        r_lo = min(cfg.block("R_LO"), bn)
        t = min(32 * cfg.num_warps, bn // r_lo)
        r2 = bn // (t * r_lo)
        row_sum_split_chunks_kernel[(M,)](x, y, N, x.stride(0), 1, T=t, R2=r2, R_LO=r_lo, TOP=r2 * max(1, t // 32),
                                          **launch_opts(cfg))
        return {"y": y}
    bm = cfg.block("BLOCK_M")
    k = kernel_for(row_sum_kernel, bool(pinned))
    k[(triton.cdiv(M, bm),)](x, y, M, N, x.stride(0), BLOCK_M=bm, BLOCK_N=bn, **launch_opts(cfg))
    return {"y": y}


def launch_ints(
    shape: dict[str, int], cfg: Config, pinned: bool | str
) -> tuple[dict[str, int], tuple[int]] | None:
    """Integer arguments and grid of ``row_sum_kernel`` as ``launch`` passes them (contiguous x:
    stride_m = N), for the checker's launch specialisation (free and pinned order; the pinned
    tree's balanced-span proof reads the launch's +0 padding as zero spans, balanced.py). None
    for the register-chunk variants (other kernels, other arguments)."""
    if pinned not in (False, True):
        return None
    m, n = shape["M"], shape["N"]
    return {"M": m, "N": n, "stride_m": n}, (triton.cdiv(m, cfg.block("BLOCK_M")),)


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"y": model.tree_sum(inputs["x"], axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    """(kernel, signature, constexprs) for ahead-of-time compiles (PTX tests, static checker)."""
    bn = next_pow2(shape["N"]) * dict(cfg.blocks).get("N_MULT", 1)
    sig = {"X": ptr(dtype), "Y": "*fp32", "M": "i32", "N": "i32", "stride_m": "i32",
           "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"}
    return [(row_sum_kernel, sig, {"BLOCK_M": cfg.block("BLOCK_M"), "BLOCK_N": bn})]
