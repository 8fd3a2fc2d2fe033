"""Flash-attention forward (one head dimension, non-causal), written for the checker's gate.

For each block of BLOCK_M queries the kernel walks the keys in blocks of BLOCK_N, keeping the
running row maximum m, the running denominator l and the unnormalised output o (online
softmax, base-2 exponentials with the scale folded into log2(e)/sqrt(d)). BLOCK_N moves the
bits (it is the chunk of the running sums); BLOCK_M, warps and stages should not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus.common import Config, draw, launch_opts


@triton.jit
def attn_fwd_kernel(
    Q,
    Kt,
    V,
    Out,
    Lse,
    n_ctx,
    sq,
    sk,
    sv,
    so,
    qk_scale,
    HEAD: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    bh = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    d = tl.arange(0, HEAD)
    base = bh * n_ctx
    q = tl.load(Q + (base + rows)[:, None] * sq + d[None, :], mask=rows[:, None] < n_ctx, other=0.0)
    m_run = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_run = tl.zeros((BLOCK_M,), tl.float32)
    o_run = tl.zeros((BLOCK_M, HEAD), tl.float32)
    for start in range(0, n_ctx, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kt = tl.load(Kt + d[:, None] * sk + (base + cols)[None, :], mask=cols[None, :] < n_ctx, other=0.0)
        s = tl.dot(q, kt) * qk_scale
        s = tl.where(cols[None, :] < n_ctx, s, float("-inf"))
        m_new = tl.maximum(m_run, tl.max(s, axis=1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_run - m_new)
        l_run = l_run * alpha + tl.sum(p, axis=1)
        v = tl.load(V + (base + cols)[:, None] * sv + d[None, :], mask=cols[:, None] < n_ctx, other=0.0)
        o_run = o_run * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_run = m_new
    o = o_run / l_run[:, None]
    tl.store(
        Out + (base + rows)[:, None] * so + d[None, :], o.to(Out.dtype.element_ty), mask=rows[:, None] < n_ctx
    )
    tl.store(Lse + base + rows, m_run + tl.math.log2(l_run), mask=rows < n_ctx)


KERNELS = (attn_fwd_kernel,)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    bh, n, h = shape["BH"], shape["N_CTX"], shape["HEAD"]
    return {
        "q": draw((bh * n, h), dtype, kind, seed),
        "kt": draw((h, bh * n), dtype, kind, seed + 1),
        "v": draw((bh * n, h), dtype, kind, seed + 2),
    }


def launch(
    inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool = False, aux: bool = False
) -> dict[str, Any]:
    import torch

    q, kt, v = inputs["q"], inputs["kt"], inputs["v"]
    bh, n, h = shape["BH"], shape["N_CTX"], shape["HEAD"]
    o = torch.empty_like(q)
    lse = torch.empty(bh * n, dtype=torch.float32, device=q.device)
    bm, bn = cfg.block("BLOCK_M"), cfg.block("BLOCK_N")
    scale = 1.4426950408889634 / float(h) ** 0.5
    attn_fwd_kernel[(triton.cdiv(n, bm), bh)](
        q,
        kt,
        v,
        o,
        lse,
        n,
        q.stride(0),
        kt.stride(0),
        v.stride(0),
        o.stride(0),
        scale,
        HEAD=h,
        BLOCK_M=bm,
        BLOCK_N=bn,
        **launch_opts(cfg),
    )
    return {"o": o, "lse": lse}
