"""GEMM variants graded by the checker's soundness gate (fp32 accumulate, narrow output).

Same interface as the enforcement corpus modules (``make_inputs`` / ``launch``), so the gate
runs both the same way. Block sizes, warps, stages and the tile swizzle are the speed knobs; the
k-group count and the split of the fused reductions are the parts that move the bits.

* ``plain``    C = A @ B
* ``bias_relu`` C = relu(A @ B + bias[n])
* ``kgroup``   G accumulators, tile t of the K loop into accumulator t mod G, summed at the end
* ``rowsum``   C = A @ B and S[pid_n, m] = sum over the tile's columns of C
* ``softmax``  P = softmax(A @ B) along n, the whole row in one tile
* ``tma``      C = A @ B written through a device-side tensor descriptor (TMA store)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, launch_opts, torch_dtype


@triton.jit
def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    # grouped ordering of the output tiles: GROUP_M tile-rows share their B columns in L2
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tm = first_m + (pid % per_group) % rows
    tn = (pid % per_group) // rows
    return tm, tn


@triton.jit
def gemm_kernel(
    A,
    B,
    C,
    BIAS,
    S,
    M,
    N,
    K,
    sa,
    sb,
    sc,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    KGROUPS: tl.constexpr,
    EPI: tl.constexpr,
):
    """EPI: 0 plain, 1 bias+relu, 2 plain + per-tile row sums into S, 3 row softmax."""
    tm, tn = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = tm * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tn * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptr = A + offs_m[:, None] * sa + offs_k[None, :]
    b_ptr = B + offs_k[:, None] * sb + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if KGROUPS == 1:
        for k0 in range(0, K, BLOCK_K):
            kin = (k0 + offs_k) < K
            a = tl.load(a_ptr, mask=kin[None, :] & (offs_m[:, None] < M), other=0.0)
            b = tl.load(b_ptr, mask=kin[:, None] & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptr += BLOCK_K
            b_ptr += BLOCK_K * sb
    else:
        acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, 2 * BLOCK_K):
            kin = (k0 + offs_k) < K
            a = tl.load(a_ptr, mask=kin[None, :] & (offs_m[:, None] < M), other=0.0)
            b = tl.load(b_ptr, mask=kin[:, None] & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            kin2 = (k0 + BLOCK_K + offs_k) < K
            a2 = tl.load(a_ptr + BLOCK_K, mask=kin2[None, :] & (offs_m[:, None] < M), other=0.0)
            b2 = tl.load(b_ptr + BLOCK_K * sb, mask=kin2[:, None] & (offs_n[None, :] < N), other=0.0)
            acc2 = tl.dot(a2, b2, acc2)
            a_ptr += 2 * BLOCK_K
            b_ptr += 2 * BLOCK_K * sb
        acc = acc + acc2
    cmask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if EPI == 1:
        bias = tl.load(BIAS + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = tl.maximum(acc + bias[None, :], 0.0)
    if EPI == 3:
        z = tl.where(cmask, acc, float("-inf"))
        z = z - tl.max(z, axis=1)[:, None]
        e = tl.exp(z)
        acc = e / tl.sum(e, axis=1)[:, None]
    tl.store(C + offs_m[:, None] * sc + offs_n[None, :], acc.to(C.dtype.element_ty), mask=cmask)
    if EPI == 2:
        part = tl.sum(tl.where(cmask, acc, 0.0), axis=1)
        tl.store(S + tn * M + offs_m, part, mask=offs_m < M)


@triton.jit
def gemm_tma_kernel(
    A,
    B,
    C,
    M,
    N,
    K,
    sa,
    sb,
    sc,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    tm, tn = _tile_ids(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    a_desc = tl.make_tensor_descriptor(A, shape=[M, K], strides=[sa, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(B, shape=[K, N], strides=[sb, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(C, shape=[M, N], strides=[sc, 1], block_shape=[BLOCK_M, BLOCK_N])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([tm * BLOCK_M, k0])
        b = b_desc.load([k0, tn * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_desc.store([tm * BLOCK_M, tn * BLOCK_N], acc.to(C.dtype.element_ty))


VARIANTS = {"plain": 0, "bias_relu": 1, "rowsum": 2, "softmax": 3, "kgroup": 0, "tma": -1}
KERNELS = (gemm_kernel, gemm_tma_kernel)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N, K = shape["M"], shape["N"], shape["K"]
    return {
        "a": draw((M, K), dtype, kind, seed),
        "b": draw((K, N), dtype, kind, seed + 1),
        "bias": draw((N,), dtype, kind, seed + 2),
    }


def launch(
    inputs: dict[str, Any],
    shape: dict[str, int],
    cfg: Config,
    pinned: bool = False,
    aux: bool = False,
    variant: str = "plain",
) -> dict[str, Any]:
    import torch

    a, b, bias = inputs["a"], inputs["b"], inputs["bias"]
    M, K = a.shape
    N = b.shape[1]
    bl = dict(cfg.blocks)
    bm, bn, bk = bl["BLOCK_M"], bl["BLOCK_N"], bl["BLOCK_K"]
    gm = bl.get("GROUP_M", 1)
    out_dt = a.dtype if a.dtype.itemsize >= 2 else torch_dtype("fp16")
    c = torch.empty((M, N), dtype=out_dt, device=a.device)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    if variant == "tma":

        def alloc(size: int, align: int, stream: Any) -> Any:
            return torch.empty(size, dtype=torch.int8, device=a.device)

        triton.set_allocator(alloc)
        gemm_tma_kernel[grid](
            a,
            b,
            c,
            M,
            N,
            K,
            a.stride(0),
            b.stride(0),
            c.stride(0),
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=gm,
            **launch_opts(cfg),
        )
        return {"c": c}
    s = torch.empty((triton.cdiv(N, bn), M), dtype=torch.float32, device=a.device)
    kg = bl.get("KGROUPS", 2 if variant == "kgroup" else 1)
    gemm_kernel[grid](
        a,
        b,
        c,
        bias,
        s,
        M,
        N,
        K,
        a.stride(0),
        b.stride(0),
        c.stride(0),
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=gm,
        KGROUPS=kg,
        EPI=VARIANTS[variant],
        **launch_opts(cfg),
    )
    out = {"c": c}
    if variant == "rowsum":
        out["s"] = s
    return out
