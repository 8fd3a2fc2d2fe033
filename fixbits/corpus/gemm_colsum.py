"""GEMM with a column-sum epilogue: C = A @ B (fp32 out) and dBias[n] = sum_m C[m, n].

The epilogue sums its (BLOCK_M, BLOCK_N) accumulator tile over axis 0 into one partial per
M-tile; a second kernel sums the partials. The pinned tree makes the pair exactly the balanced
tree over all M rows for any power-of-two BLOCK_M. The model check is dBias == tree_sum(C) on the
GPU's own C (the tensor-core chain of C itself is the emulator's business, not this one's).
BLOCK_K stays fixed: the K loop is the kernel's own algorithm.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr
from fixbits.corpus.layernorm_bwd import col_partials_sum_kernel
from fixbits.enforce import model
from fixbits.enforce.tree import _add, tree_sum


@triton.jit
def _tile_product(A, B, C, rm, rn, M, N, K, stride_am, stride_bk, stride_cm, BLOCK_M: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # The GEMM tile both kernels share (one fp32 accumulator over K in BLOCK_K steps), stored to C;
    # only the row order rm and the column-sum epilogue differ between them.
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(A + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(B + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :], acc, mask=cmask)
    return acc, cmask


@triton.jit
def gemm_colsum_kernel(A, B, C, PART, M, N, K, stride_am, stride_bk, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc, cmask = _tile_product(A, B, C, rm, rn, M, N, K, stride_am, stride_bk, stride_cm, BLOCK_M, BLOCK_N, BLOCK_K)
    part = tl.sum(tl.where(cmask, acc, 0.0), axis=0)
    tl.store(PART + pid_m * N + rn, part, mask=rn < N)


@triton.constexpr_function
def _row_order(log_m, lo0, lo1):
    # Physical tile-row bits in logical significance order: the accumulator's register row bits
    # (lo0, lo1; -1 = none) become the lowest logical bits, the others keep their order.
    log_m, lo0, lo1 = (int(getattr(v, "value", v)) for v in (log_m, lo0, lo1))
    regs = [b for b in (lo0, lo1) if b >= 0]
    return tuple(regs + [b for b in range(log_m) if b not in regs])


@triton.constexpr_function
def _log2c(n):
    return int(getattr(n, "value", n)).bit_length() - 1


@triton.constexpr_function
def _logical_bit(order, j):
    return order.index(int(getattr(j, "value", j)))


@triton.constexpr_function
def _tree_axes(order, nred):
    # dims of the (2,)*log_m + (BLOCK_N,) view (dim d = physical bit log_m-1-d), logical MSB first,
    # for the nred lowest logical bits
    log_m = len(order)
    return tuple(log_m - 1 - order[k] for k in range(int(getattr(nred, "value", nred)) - 1, -1, -1))


@triton.constexpr_function
def _bits_shape(log_m, bn):
    return (2, ) * int(getattr(log_m, "value", log_m)) + (int(getattr(bn, "value", bn)), )


@triton.jit
def gemm_colsum_rows_in_regs_kernel(A, B, C, PART, M, N, K, stride_am, stride_bk, stride_cm,
                                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                    LO0: tl.constexpr, LO1: tl.constexpr, PARTS_LOG: tl.constexpr,
                                    SPLIT_LOG: tl.constexpr):
    # The same GEMM, written for the pinned tree: tile row p holds logical row L(p), where the row
    # bits the wgmma accumulator keeps in registers (LO0, LO1) are L's lowest bits, so the first
    # tree levels are register adds, then lane shuffles. With PARTS_LOG > 0 the top logical bits
    # (the warp bits) are not folded here: each warp stores its own partial (a subtree over an
    # aligned chunk of 2**(log2(BLOCK_M) - PARTS_LOG) logical rows), and stage 2 folds them; the
    # tree over all rows is unchanged and no shared-memory round is needed.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tile_rows(BLOCK_M, LO0, LO1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc, cmask = _tile_product(A, B, C, rm, rn, M, N, K, stride_am, stride_bk, stride_cm, BLOCK_M, BLOCK_N, BLOCK_K)
    store_tile_partials(tl.where(cmask, acc, 0.0), PART, pid_m, rn, N, LO0, LO1, PARTS_LOG, SPLIT_LOG)


@triton.jit
def tile_rows(BLOCK_M: tl.constexpr, LO0: tl.constexpr, LO1: tl.constexpr):
    """Logical row (within the tile) held by each tile row of the rows_in_regs layout."""
    LOG_M: tl.constexpr = _log2c(BLOCK_M)
    ORDER: tl.constexpr = _row_order(LOG_M, LO0, LO1)
    p = tl.arange(0, BLOCK_M)
    lrow = p * 0
    for j in tl.static_range(LOG_M):
        lrow += ((p >> j) & 1) << _logical_bit(ORDER, j)
    return lrow


@triton.jit
def store_tile_partials(x, PART, pid_m, rn, N, LO0: tl.constexpr, LO1: tl.constexpr, PARTS_LOG: tl.constexpr,
                        SPLIT_LOG: tl.constexpr = 0):
    """Tree over the tile's logical rows (all, or all but the top PARTS_LOG bits), stored to PART.

    SPLIT_LOG > 0: the top SPLIT_LOG logical bits (the warp bits) are folded by tl.split after
    one layout change (one shared-memory round) instead of one tt.reduce round per bit."""
    BLOCK_M: tl.constexpr = x.shape[0]
    BLOCK_N: tl.constexpr = x.shape[1]
    LOG_M: tl.constexpr = _log2c(BLOCK_M)
    ORDER: tl.constexpr = _row_order(LOG_M, LO0, LO1)
    y = tl.reshape(x, _bits_shape(LOG_M, BLOCK_N))
    TOP: tl.constexpr = PARTS_LOG + SPLIT_LOG
    part = tl.reshape(tree_sum(y, _tree_axes(ORDER, LOG_M - TOP)), (1 << TOP, BLOCK_N))
    if SPLIT_LOG > 0:
        q = tl.permute(part, (1, 0))  # (BLOCK_N, chunks): the pairs of each level last
        for j in tl.static_range(SPLIT_LOG):
            a, b = tl.split(tl.reshape(q, (BLOCK_N, 1 << (SPLIT_LOG - j - 1), 2)))
            q = tl.reshape(_add(a, b), (BLOCK_N, 1 << (SPLIT_LOG - j - 1)))
        part = tl.reshape(q, (1, BLOCK_N))
    prow = pid_m * (1 << PARTS_LOG) + tl.arange(0, 1 << PARTS_LOG)
    tl.store(PART + prow[:, None] * N + rn[None, :], part, mask=rn[None, :] < N)


KERNELS = (gemm_colsum_kernel, gemm_colsum_rows_in_regs_kernel, col_partials_sum_kernel)
VARIANTS = ("rows_in_regs", "warp_partials", "split_warps")
CPU_REPLAY: tuple[str, ...] = ()  # the model sums the GPU's own C
BLOCK_K = 64


def acc_row_bits(block_m: int, num_warps: int) -> tuple[int, int, int]:
    """Row bits of the sm_90 wgmma accumulator tile: (register bit, second register bit or -1, warp bits).

    A warpgroup's m64 instruction gives each warp 16 rows (row bits 0-2 in lanes, bit 3 in a
    register, bits 4-5 in warps); 8 warps split 128 rows over two warpgroups (bit 6 a warp bit),
    4 warps repeat the instruction (bit 6 a register). Read off the ttgir (tests/test_enforce_layout_ptx.py).
    """
    log_m = block_m.bit_length() - 1
    wg_m = 2 if num_warps == 8 and block_m >= 128 else 1
    top = [b for b in range(6, log_m) if not (wg_m == 2 and b == 6)]
    warp_bits = 2 + (1 if wg_m == 2 else 0)
    return 3, (top[0] if top else -1), warp_bits


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N, K = shape["M"], shape["N"], shape["K"]
    return {"a": draw((M, K), dtype, kind, seed), "b": draw((K, N), dtype, "ordinary", seed + 1)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
           aux: bool = False) -> dict[str, Any]:
    import torch

    a, b = inputs["a"], inputs["b"]
    M, K = a.shape
    N = b.shape[1]
    bm, bn = cfg.block("BLOCK_M"), cfg.block("BLOCK_N")
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    mt = triton.cdiv(M, bm)
    part = torch.empty((mt, N), dtype=torch.float32, device=a.device)
    opts = launch_opts(cfg)
    if pinned in VARIANTS:
        lo0, lo1, warp_bits = acc_row_bits(bm, cfg.num_warps)
        parts_log = warp_bits if pinned == "warp_partials" else 0
        split_log = warp_bits if pinned == "split_warps" else 0
        mt = mt << parts_log
        part = torch.empty((mt, N), dtype=torch.float32, device=a.device)
        gemm_colsum_rows_in_regs_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
            a, b, c, part, M, N, K, a.stride(0), b.stride(0), c.stride(0),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=BLOCK_K, LO0=lo0, LO1=lo1, PARTS_LOG=parts_log,
            SPLIT_LOG=split_log, **opts)
    else:
        kernel_for(gemm_colsum_kernel, pinned)[(mt, triton.cdiv(N, bn))](
            a, b, c, part, M, N, K, a.stride(0), b.stride(0), c.stride(0),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=BLOCK_K, **opts)
    dbias = torch.empty(N, dtype=torch.float32, device=a.device)
    fbn = 64
    kernel_for(col_partials_sum_kernel, pinned)[(triton.cdiv(N, fbn),)](
        part, dbias, mt, N, BLOCK_P=next_pow2(mt), BLOCK_N=fbn, num_warps=4)
    return {"c": c, "dbias": dbias}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"dbias": model.tree_sum(outputs["c"], axis=0)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    p = ptr(dtype)
    sig = {"A": p, "B": p, "C": "*fp32", "PART": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
           "stride_bk": "i32", "stride_cm": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr",
           "BLOCK_K": "constexpr"}
    return [(gemm_colsum_kernel, sig, {"BLOCK_M": cfg.block("BLOCK_M"), "BLOCK_N": cfg.block("BLOCK_N"),
                                       "BLOCK_K": BLOCK_K})]
