"""Workspace GEMV: the level-0 parts of a scalar nest in separate programs, written to a
workspace at partial_dtype, then folded by the level-0 merge (chain or butterfly) at
merge_dtype by a second kernel that also runs the epilogue.

Same arithmetic as the one-launch nest kernel (fixbits.kernels._scalar); the split across
programs only buys parallelism for a long K on a short output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from fixbits.desc import GEMMDesc
from fixbits.kernels._host import (
    LAUNCH_OPTS,
    check_operands,
    epilogue_args,
    out_code,
    torch_dtype,
)
from fixbits.kernels._scalar import (
    check_family,
    fold_nest,
    leaf_chains,
    merge_level,
    nest_constexprs,
    nest_table,
)
from fixbits.kernels.epilogue import OUT_CODES, epilogue_store, round_to
from fixbits.kernels.plan import UnsupportedDesc, scalar_nest

if TYPE_CHECKING:
    import torch

FAMILIES = ("gemv_contiguous", "chained_chunks", "gemv_lane_tree")


@triton.jit
def _ws_part_kernel(
    a_ptr, b_ptr, idx_ptr, ws_ptr,
    M, N, T, sam, sak, sbk, sbn, swp, swm, swn,
    C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr,
    L1: tl.constexpr, L2: tl.constexpr, L3: tl.constexpr,
    K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    part = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    NL: tl.constexpr = C1 * C2 * C3
    acc = leaf_chains(
        a_ptr, b_ptr, idx_ptr, part * NL, rm, rn, M, N, T, sam, sak, sbk, sbn, BLOCK_M, BLOCK_N, NL
    )
    val = fold_nest(acc, BLOCK_M, BLOCK_N, 1, C1, C2, C3, 0, L1, L2, L3, 0, K1, K2, K3, 0, 0, False)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(
        ws_ptr + part * swp + rm[:, None] * swm + rn[None, :] * swn,
        val.to(ws_ptr.dtype.element_ty),
        mask=mask,
    )


@triton.jit
def _ws_merge_kernel(
    ws_ptr, out_ptr, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn,
    M, N, swp, swm, swn, som, son,
    ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    C0: tl.constexpr, L0: tl.constexpr, K0: tl.constexpr, MERGE: tl.constexpr,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if K0 == 3:
        # cuBLAS's reduce_1Block_kernel<float, 128, 7>: thread t chains parts t, t + 128, ...
        # (a padded part adds +0, exact on a sum from +0); q[t] += q[t + 64]; q[t] += q[t + 32];
        # u_j chains q[j], q[4 + j], ..., q[28 + j]; the total chains u_0..u_3, all from +0
        t = tl.arange(0, 128)
        mask3 = (rm[:, None, None] < M) & (rn[None, :, None] < N)
        q = tl.zeros((BLOCK_M, BLOCK_N, 128), dtype=tl.float32)
        for p0 in tl.static_range(0, C0, 128):
            x = tl.load(ws_ptr + (p0 + t)[None, None, :] * swp + rm[:, None, None] * swm + rn[None, :, None] * swn,
                        mask=mask3 & ((p0 + t) < C0)[None, None, :], other=0.0)  # fmt: skip
            q = round_to(q + x.to(tl.float32), MERGE)
        q = round_to(tl.sum(tl.reshape(q, (BLOCK_M, BLOCK_N, 2, 64)), axis=2), MERGE)  # q[t] + q[t + 64]
        q = round_to(tl.sum(tl.reshape(q, (BLOCK_M, BLOCK_N, 2, 32)), axis=2), MERGE)  # q[t] + q[t + 32]
        BO: tl.constexpr = BLOCK_M * BLOCK_N
        # [j, g] = q[4g + j], parts innermost: chain the 8 g per j, then the 4 j (merge_level's chain)
        u = tl.reshape(tl.permute(tl.reshape(q, (BLOCK_M, BLOCK_N, 8, 4)), (0, 1, 3, 2)), (BO * 32,))
        u = merge_level(u, BO * 4, 8, 3, 0, MERGE)
        val = tl.reshape(merge_level(u, BO, 4, 2, 0, MERGE), (BLOCK_M, BLOCK_N))
    elif K0 == 0:
        # chain from +0, one part at a time from the workspace: linear in C0 (held in registers
        # the chain is quadratic unrolled code, and ptxas runs out of memory at C0 = 512)
        mask2 = (rm[:, None] < M) & (rn[None, :] < N)
        val = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for p in range(0, C0):
            x = tl.load(ws_ptr + p * swp + rm[:, None] * swm + rn[None, :] * swn, mask=mask2, other=0.0)
            val = round_to(val + x.to(tl.float32), MERGE)
    else:
        p = tl.arange(0, C0)
        mask3 = (rm[:, None, None] < M) & (rn[None, :, None] < N)
        x = tl.load(ws_ptr + p[None, None, :] * swp + rm[:, None, None] * swm + rn[None, :, None] * swn,
                    mask=mask3, other=0.0).to(tl.float32)  # fmt: skip
        BO: tl.constexpr = BLOCK_M * BLOCK_N
        val = tl.reshape(merge_level(tl.reshape(x, (BO * C0,)), BO, C0, L0, K0, MERGE), (BLOCK_M, BLOCK_N))
    epilogue_store(
        val, out_ptr, rm, rn, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
        stride_rm, stride_rn, stride_gm, stride_gn,
        ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
    )  # fmt: skip


def gemv_workspace_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    desc: GEMMDesc,
    *,
    bias: Any = None,
    residual: Any = None,
    gate: Any = None,
    out: torch.Tensor | None = None,
    tile: tuple[int, int] = (1, 32),
    num_warps: int = 4,
    gelu_tanh_fma: bool = True,
) -> torch.Tensor:
    """C = epilogue(level-0 fold of per-program parts); any scalar desc with a level-0 cut."""
    import torch

    check_family(desc, FAMILIES)
    if not desc.k_cuts:
        raise UnsupportedDesc("gemv_workspace needs a level-0 cut (k_cuts is empty)")
    m, n, k = check_operands(desc, a, b)
    ep = epilogue_args(desc, m, n, bias, residual, gate)
    nest = scalar_nest(desc, k)
    cx = nest_constexprs(nest, desc, workspace=True)
    if out is None:
        out = torch.empty((m, n), dtype=torch_dtype(desc.out_dtype), device=a.device)
    if not (m and n):
        return out
    c0 = cx["C0"]
    ws = torch.empty((c0, m, n), dtype=torch_dtype(desc.partial_dtype), device=a.device)
    idx = nest_table(nest, desc, a.device)
    bm, bn = tile
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn), c0)
    _ws_part_kernel[grid](
        a, b, idx, ws, m, n, nest.length, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        ws.stride(0), ws.stride(1), ws.stride(2),
        C1=cx["C1"], C2=cx["C2"], C3=cx["C3"], L1=cx["L1"], L2=cx["L2"], L3=cx["L3"],
        K1=cx["K1"], K2=cx["K2"], K3=cx["K3"], BLOCK_M=bm, BLOCK_N=bn, num_warps=num_warps, **LAUNCH_OPTS,
    )  # fmt: skip
    mbm, mbn = 1, 64
    _ws_merge_kernel[(triton.cdiv(m, mbm), triton.cdiv(n, mbn))](
        ws, out, *ep.kernel_args(out), m, n, ws.stride(0), ws.stride(1), ws.stride(2),
        out.stride(0), out.stride(1), *ep.plan.scales,
        C0=c0, L0=cx["L0"], K0=cx["K0"], MERGE=OUT_CODES[desc.merge_dtype],
        EP0=ep.plan.codes[0], EP1=ep.plan.codes[1], EP2=ep.plan.codes[2], EP3=ep.plan.codes[3],
        OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma, BLOCK_M=mbm, BLOCK_N=mbn, num_warps=4, **LAUNCH_OPTS,
    )  # fmt: skip
    return out
