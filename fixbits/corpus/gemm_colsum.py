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


@triton.jit
def gemm_colsum_kernel(A, B, C, PART, M, N, K, stride_am, stride_bk, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
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
    part = tl.sum(tl.where(cmask, acc, 0.0), axis=0)
    tl.store(PART + pid_m * N + rn, part, mask=rn < N)


KERNELS = (gemm_colsum_kernel, col_partials_sum_kernel)
CPU_REPLAY: tuple[str, ...] = ()  # the model sums the GPU's own C
BLOCK_K = 64


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N, K = shape["M"], shape["N"], shape["K"]
    return {"a": draw((M, K), dtype, kind, seed), "b": draw((K, N), dtype, "ordinary", seed + 1)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool,
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
