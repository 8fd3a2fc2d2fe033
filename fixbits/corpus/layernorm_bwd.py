"""LayerNorm backward: dX per row, and the weight/bias gradients dW, dB as column sums over rows.

dX: c1 = sum(xhat * wdy) / N and c2 = sum(wdy) / N per row (stored as aux C1, C2).
dW[n] = sum_m dy[m, n] * xhat[m, n], dB[n] = sum_m dy[m, n]: stage 1 sums blocks of ROWS rows
per program into partials, stage 2 sums the partials over axis 0 in one tile. With the pinned
tree and power-of-two ROWS, the two stages are exactly the balanced tree over all M rows, so
ROWS is a free speed knob (it is part of the config space the suite checks).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton
import triton.language as tl

from fixbits.corpus import layernorm_fwd
from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, next_pow2, ptr, rows_split
from fixbits.enforce import model
from fixbits.enforce.tree import tree_sum


@triton.jit
def ln_bwd_dx_kernel(X, DY, W, Mean, Rstd, DX, C1, C2, N, stride_m, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(X + row * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + row * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = w * dy
    nf = N * 1.0
    c1 = tl.div_rn(tl.sum(xhat * wdy, axis=0), nf)
    c2 = tl.div_rn(tl.sum(wdy, axis=0), nf)
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + row * stride_m + cols, dx.to(DX.dtype.element_ty), mask=mask)
    tl.store(C1 + row, c1)
    tl.store(C2 + row, c2)


@triton.jit
def ln_bwd_dwdb_partial_kernel(X, DY, Mean, Rstd, PDW, PDB, M, N, stride_m,
                               ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    chunk = tl.program_id(0)
    rows = chunk * ROWS + tl.arange(0, ROWS)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(Mean + rows, mask=rows < M, other=0.0)
    rstd = tl.load(Rstd + rows, mask=rows < M, other=0.0)
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = tl.where(mask, dy * xhat, 0.0)
    tl.store(PDW + chunk * N + cols, tl.sum(g, axis=0), mask=cols < N)
    tl.store(PDB + chunk * N + cols, tl.sum(dy, axis=0), mask=cols < N)


@triton.jit
def ln_bwd_dwdb_partial_rows_in_regs_kernel(X, DY, Mean, Rstd, PDW, PDB, M, N, stride_m, R_HI: tl.constexpr,
                                            R_LO: tl.constexpr, BLOCK_N: tl.constexpr):
    # Stage 1 written for the pinned tree: a chunk of R_HI * R_LO rows loaded as (R_HI, R_LO, BLOCK_N)
    # with row = hi * R_LO + lo, low row bits in registers; the same tree as the pinned tl.sum.
    chunk = tl.program_id(0)
    hi = tl.arange(0, R_HI)[:, None, None]
    lo = tl.arange(0, R_LO)[None, :, None]
    rows = chunk * (R_HI * R_LO) + hi * R_LO + lo
    c1 = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = c1[None, None, :]
    mask = (rows < M) & (cols < N)
    x = tl.load(X + rows * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows * stride_m + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.load(Mean + rows, mask=rows < M, other=0.0)
    rstd = tl.load(Rstd + rows, mask=rows < M, other=0.0)
    xhat = (x - mean) * rstd
    g = tl.where(mask, dy * xhat, 0.0)
    tl.store(PDW + chunk * N + c1, tree_sum(g, (0, 1)), mask=c1 < N)
    tl.store(PDB + chunk * N + c1, tree_sum(dy, (0, 1)), mask=c1 < N)


@triton.jit
def col_partials_sum_kernel(P, OUT, NP, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.arange(0, BLOCK_P)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (r[:, None] < NP) & (cols[None, :] < N)
    p = tl.load(P + r[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.store(OUT + cols, tl.sum(p, axis=0), mask=cols < N)


@triton.jit
def col_partials_sum_rows_in_regs_kernel(P, OUT, NP, N, R_HI: tl.constexpr, R_LO: tl.constexpr,
                                         BLOCK_N: tl.constexpr):
    # Stage 2 written for the pinned tree: partial p = hi * R_LO + lo, low bits in registers; the
    # same tree (and the same 0.0 padding) as the pinned tl.sum over axis 0 of col_partials_sum_kernel.
    hi = tl.arange(0, R_HI)[:, None, None]
    lo = tl.arange(0, R_LO)[None, :, None]
    r = hi * R_LO + lo
    c1 = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = c1[None, None, :]
    p = tl.load(P + r * N + cols, mask=(r < NP) & (cols < N), other=0.0)
    tl.store(OUT + c1, tree_sum(p, (0, 1)), mask=c1 < N)


KERNELS = (ln_bwd_dx_kernel, ln_bwd_dwdb_partial_kernel, col_partials_sum_kernel,
           ln_bwd_dwdb_partial_rows_in_regs_kernel, col_partials_sum_rows_in_regs_kernel)
VARIANTS = ("rows_in_regs",)
CPU_REPLAY = ("c1", "c2", "dw", "db")


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    M, N = shape["M"], shape["N"]
    x = draw((M, N), dtype, kind, seed)
    dy = draw((M, N), dtype, "ordinary", seed + 1)
    w = draw((N,), dtype, "ordinary", seed + 2)
    mean, rstd = layernorm_fwd.stats(x)
    return {"x": x, "dy": dy, "w": w, "mean": mean, "rstd": rstd}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
           aux: bool = False) -> dict[str, Any]:
    import torch

    x, dy, w, mean, rstd = (inputs[k] for k in ("x", "dy", "w", "mean", "rstd"))
    M, N = x.shape
    dev = x.device
    dx = torch.empty_like(x)
    c1 = torch.empty(M, dtype=torch.float32, device=dev)
    c2 = torch.empty(M, dtype=torch.float32, device=dev)
    opts = launch_opts(cfg)
    kernel_for(ln_bwd_dx_kernel, bool(pinned))[(M,)](x, dy, w, mean, rstd, dx, c1, c2, N, x.stride(0),
                                               BLOCK_N=next_pow2(N), **opts)
    rows, bn = cfg.block("ROWS"), cfg.block("BLOCK_N")
    nchunks = triton.cdiv(M, rows)
    pdw = torch.empty((nchunks, N), dtype=torch.float32, device=dev)
    pdb = torch.empty((nchunks, N), dtype=torch.float32, device=dev)
    if pinned == "rows_in_regs":
        r_hi, r_lo = rows_split(rows, bn, x.element_size(), cfg.num_warps)
        ln_bwd_dwdb_partial_rows_in_regs_kernel[(nchunks, triton.cdiv(N, bn))](
            x, dy, mean, rstd, pdw, pdb, M, N, x.stride(0), R_HI=r_hi, R_LO=r_lo, BLOCK_N=bn, **opts)
    else:
        kernel_for(ln_bwd_dwdb_partial_kernel, bool(pinned))[(nchunks, triton.cdiv(N, bn))](
            x, dy, mean, rstd, pdw, pdb, M, N, x.stride(0), ROWS=rows, BLOCK_N=bn, **opts)
    dw = torch.empty(N, dtype=torch.float32, device=dev)
    db = torch.empty(N, dtype=torch.float32, device=dev)
    if pinned == "rows_in_regs":
        p_hi, p_lo = rows_split(next_pow2(nchunks), bn, 4, cfg.num_warps)
        for part, out in ((pdw, dw), (pdb, db)):
            col_partials_sum_rows_in_regs_kernel[(triton.cdiv(N, bn),)](part, out, nchunks, N, R_HI=p_hi, R_LO=p_lo,
                                                                        BLOCK_N=bn, **opts)
    else:
        fin = kernel_for(col_partials_sum_kernel, bool(pinned))
        fin[(triton.cdiv(N, bn),)](pdw, dw, nchunks, N, BLOCK_P=next_pow2(nchunks), BLOCK_N=bn, **opts)
        fin[(triton.cdiv(N, bn),)](pdb, db, nchunks, N, BLOCK_P=next_pow2(nchunks), BLOCK_N=bn, **opts)
    return {"dx": dx, "c1": c1, "c2": c2, "dw": dw, "db": db}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    x = inputs["x"].astype(np.float32)
    dy = inputs["dy"].astype(np.float32)
    w = inputs["w"].astype(np.float32)
    mean, rstd = inputs["mean"], inputs["rstd"]
    n = np.float32(x.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):
        xhat = ((x - mean[:, None]).astype(np.float32) * rstd[:, None]).astype(np.float32)
        wdy = (w[None, :] * dy).astype(np.float32)
        c1 = (model.tree_sum((xhat * wdy).astype(np.float32), axis=1) / n).astype(np.float32)
        c2 = (model.tree_sum(wdy, axis=1) / n).astype(np.float32)
        dw = model.tree_sum((dy * xhat).astype(np.float32), axis=0)
        db = model.tree_sum(dy, axis=0)
    return {"c1": c1, "c2": c2, "dw": dw, "db": db}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    M, N = shape["M"], shape["N"]
    p = ptr(dtype)
    dx_sig = {"X": p, "DY": p, "W": p, "Mean": "*fp32", "Rstd": "*fp32", "DX": p, "C1": "*fp32", "C2": "*fp32",
              "N": "i32", "stride_m": "i32", "BLOCK_N": "constexpr"}
    part_sig = {"X": p, "DY": p, "Mean": "*fp32", "Rstd": "*fp32", "PDW": "*fp32", "PDB": "*fp32", "M": "i32",
                "N": "i32", "stride_m": "i32", "ROWS": "constexpr", "BLOCK_N": "constexpr"}
    fin_sig = {"P": "*fp32", "OUT": "*fp32", "NP": "i32", "N": "i32", "BLOCK_P": "constexpr", "BLOCK_N": "constexpr"}
    rows, bn = cfg.block("ROWS"), cfg.block("BLOCK_N")
    return [(ln_bwd_dx_kernel, dx_sig, {"BLOCK_N": next_pow2(N)}),
            (ln_bwd_dwdb_partial_kernel, part_sig, {"ROWS": rows, "BLOCK_N": bn}),
            (col_partials_sum_kernel, fin_sig, {"BLOCK_P": next_pow2(-(-M // rows)), "BLOCK_N": bn})]
