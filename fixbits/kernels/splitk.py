"""Split-K tensor-core GEMM: level-0 contiguous parts in separate programs, merged in order.

Part p (KCut.parts at level 0, an optional contiguous inner level inside it) is chained from
+0 by its own program (fixbits.kernels._tensorcore.part_value), rounded to ``partial_dtype``
and written to a workspace [P, M, N]. A second kernel then sums the parts in order starting
from +0, rounding each add to ``merge_dtype``, rounds to ``out_dtype`` and runs the fused
epilogue. No atomics anywhere: the merge order is the loop order. Parts the cut leaves empty
hold +0; elements a ``tail_dropped`` cut never assigns are never read (the cuBLAS defect).
fp8 parts may run swapped (C^T = B^T A^T, a thin M tiling N) and load whole turns by TMA
(``part_knobs``): that moves which program computes an element and how its tiles arrive, never
its products or their order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from fixbits.desc import GEMMDesc
from fixbits.kernels._host import (
    LAUNCH_OPTS,
    EpilogueArgs,
    KernelConfig,
    check_config,
    check_operands,
    device_table,
    epilogue_args,
    epilogue_check,
    fit_config,
    launch_geometry,
    out_code,
    torch_dtype,
)
from fixbits.kernels._tensorcore import part_value, tile_coords
from fixbits.kernels.epilogue import OUT_CODES, epilogue_store, round_to
from fixbits.kernels.plan import TensorCorePlan, UnsupportedDesc, tensor_core_plan
from fixbits.kernels.single_pass import TmaOperands, groups_for, hw_k, promo_of, tma_descriptors, tma_route

if TYPE_CHECKING:
    import torch

FAMILY = "splitk"
MERGE_BLOCK_M = 32
MERGE_BLOCK_N = 128


@triton.jit
def _splitk_part_kernel(
    a_ptr, b_ptr, ws_ptr, runs_ptr, offs_ptr, a_desc, b_desc,
    M, N, sam, sak, sbk, sbn, swp, swm, swn,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr, GROUPS: tl.constexpr,
    RES_FIRST: tl.constexpr, HAS_INNER: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr, RUN_ALIGN: tl.constexpr, USE_TMA: tl.constexpr, B_TRANS: tl.constexpr,
):  # fmt: skip
    """One (tile, part) program. (M, N, the strides) are those of the product the kernel computes:
    C, or C^T = B^T A^T for a swapped launch, whose workspace strides swm/swn are then swapped too."""
    pid = tl.program_id(0)
    part = tl.program_id(1)
    pid_m, pid_n = tile_coords(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    a_rows = a_ptr + (rm % M)[:, None] * sam
    b_cols = b_ptr + (rn % N)[None, :] * sbn
    r_lo = tl.load(offs_ptr + part)
    r_hi = tl.load(offs_ptr + part + 1)
    val = part_value(a_rows, b_cols, a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, runs_ptr, r_lo, r_hi, sak, sbk,
                     BLOCK_M, BLOCK_N, STEP, IK, HWK, BLOCK_K, PROMO, GROUPS, RES_FIRST, HAS_INNER, USE_TMA, B_TRANS,
                     NUM_STAGES, RUN_ALIGN)  # fmt: skip
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    ptrs = ws_ptr + part * swp + rm[:, None] * swm + rn[None, :] * swn
    tl.store(ptrs, val.to(ws_ptr.dtype.element_ty), mask=mask)  # the one rounding to partial_dtype


@triton.jit
def _splitk_merge_kernel(
    ws_ptr, out_ptr, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn,
    P, M, N, swp, swm, swn, som, son,
    ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    MERGE: tl.constexpr, FROM_ZERO: tl.constexpr,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Chain merge of P parts from +0 (FROM_ZERO), or, after the butterfly levels, the one
    folded value as it is (P == 1, FROM_ZERO False: +0 + -0 would turn its sign)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    ptrs = ws_ptr + rm[:, None] * swm + rn[None, :] * swn
    if FROM_ZERO:
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for p in range(0, P):
            x = tl.load(ptrs + p * swp, mask=mask, other=0.0).to(tl.float32)
            total = round_to(total + x, MERGE)  # the fp32 sum rounded again to merge_dtype (fixbits.emulate._merge_add)
    else:
        total = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    epilogue_store(
        total, out_ptr, rm, rn, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
        stride_rm, stride_rn, stride_gm, stride_gn,
        ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
    )  # fmt: skip


@triton.jit
def _butterfly_level_kernel(
    src_ptr, dst_ptr, M, N, half, s_sp, s_sm, s_sn, d_sp, d_sm, d_sn,
    MERGE: tl.constexpr, DOWN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """One butterfly level as lane 0 sees it: dst[i] = RN(src[i] + src[i + half]) (down, xor
    offsets count/2 .. 1) or RN(src[2i] + src[2i + 1]) (up, offsets 1 .. count/2)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    i = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    off = rm[:, None] * s_sm + rn[None, :] * s_sn
    if DOWN:
        lo = i
        hi = i + half
    else:
        lo = 2 * i
        hi = 2 * i + 1
    x = tl.load(src_ptr + lo * s_sp + off, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(src_ptr + hi * s_sp + off, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst_ptr + i * d_sp + rm[:, None] * d_sm + rn[None, :] * d_sn, round_to(x + y, MERGE), mask=mask)


def butterfly_fold(desc: GEMMDesc, ws: torch.Tensor) -> torch.Tensor:
    """Fold the level-0 parts by the descriptor's butterfly (lane 0's value), one launch per level."""
    import torch

    merge = desc.k_cuts[0].merge
    p, m, n = ws.shape
    grid_mn = (triton.cdiv(m, MERGE_BLOCK_M), triton.cdiv(n, MERGE_BLOCK_N))
    while p > 1:
        half = p // 2
        dst = torch.empty((half, m, n), dtype=torch.float32, device=ws.device)
        _butterfly_level_kernel[(*grid_mn, half)](
            ws, dst, m, n, half, ws.stride(0), ws.stride(1), ws.stride(2), dst.stride(0), dst.stride(1), dst.stride(2),
            MERGE=OUT_CODES[desc.merge_dtype], DOWN=merge == "butterfly_down",
            BLOCK_M=MERGE_BLOCK_M, BLOCK_N=MERGE_BLOCK_N, num_warps=4, **LAUNCH_OPTS,
        )  # fmt: skip
        ws, p = dst, half
    return ws


def launch_merge(
    desc: GEMMDesc, ws: torch.Tensor, out: torch.Tensor, ep: EpilogueArgs, *, gelu_tanh_fma: bool
) -> Any:
    butterfly = bool(desc.k_cuts) and desc.k_cuts[0].merge != "chain"
    if butterfly:
        ws = butterfly_fold(desc, ws)
    p, m, n = ws.shape
    grid = (triton.cdiv(m, MERGE_BLOCK_M), triton.cdiv(n, MERGE_BLOCK_N))
    return _splitk_merge_kernel[grid](
        ws, out, *ep.kernel_args(out),
        p, m, n, ws.stride(0), ws.stride(1), ws.stride(2), out.stride(0), out.stride(1),
        *ep.plan.scales,
        MERGE=OUT_CODES[desc.merge_dtype], FROM_ZERO=not butterfly,
        EP0=ep.plan.codes[0], EP1=ep.plan.codes[1], EP2=ep.plan.codes[2], EP3=ep.plan.codes[3],
        OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
        BLOCK_M=MERGE_BLOCK_M, BLOCK_N=MERGE_BLOCK_N, num_warps=4, **LAUNCH_OPTS,
    )  # fmt: skip


def part_knobs(desc: GEMMDesc, cfg: KernelConfig) -> tuple[bool, bool]:
    """(swap, TMA) for the part kernel. A part writes its fp32 partials to the workspace by
    strides and the epilogue runs in the merge, so C^T = B^T A^T (SWAP_AB: a thin M gets
    wgmma's 64 rows from N) and TMA turns change which program computes an element and how its
    tiles arrive, never its dots or their order. Both are taken for fp8 inputs only: the
    16-bit split-K configs were tuned and measured with these knobs ignored."""
    if not desc.in_dtype.startswith("fp8"):
        return False, False
    return bool(cfg.SWAP_AB), tma_route(desc, cfg)


def part_operands(a: Any, b: Any, swap: bool) -> tuple[Any, Any, int, int]:
    """(the kernel's A, its B, M, N): a, b and (m, n), or B^T, A^T and (n, m) when swapped."""
    m, n = a.shape[0], b.shape[1]
    return (b.t(), a.t(), n, m) if swap else (a, b, m, n)


def launch_parts(
    desc: GEMMDesc,
    plan: TensorCorePlan,
    a: torch.Tensor,
    b: torch.Tensor,
    ws: torch.Tensor,
    cfg: KernelConfig,
) -> Any:
    swap, maybe_tma = part_knobs(desc, cfg)
    ka, kb, km, kn = part_operands(a, b, swap)
    a_desc, b_desc, b_trans = tma_descriptors(desc, ka, kb, cfg) if maybe_tma else (None, None, False)
    swm, swn = (ws.stride(2), ws.stride(1)) if swap else (ws.stride(1), ws.stride(2))
    runs_t = device_table(("splitk_runs", desc, plan.k), lambda: plan.tables()[0].reshape(-1), a.device)
    offs_t = device_table(("splitk_offs", desc, plan.k), lambda: plan.tables()[1], a.device)
    grid = (triton.cdiv(km, cfg.BLOCK_M) * triton.cdiv(kn, cfg.BLOCK_N), plan.n_parts)
    return _splitk_part_kernel[grid](
        ka, kb, ws, runs_t, offs_t, a_desc, b_desc,
        km, kn, ka.stride(0), ka.stride(1), kb.stride(0), kb.stride(1), ws.stride(0), swm, swn,
        STEP=desc.k_loop_step, IK=desc.instruction_k, HWK=hw_k(desc), PROMO=promo_of(desc), GROUPS=groups_for(desc, cfg),
        RES_FIRST=desc.residue == "first", HAS_INNER=plan.has_inner,
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, GROUP_M=cfg.GROUP_M,
        NUM_STAGES=cfg.num_stages, RUN_ALIGN=plan.run_align(desc.k_loop_step),
        USE_TMA=a_desc is not None, B_TRANS=b_trans,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **LAUNCH_OPTS,
    )  # fmt: skip


def check_family(desc: GEMMDesc, families: tuple[str, ...]) -> None:
    if desc.family not in families:
        raise UnsupportedDesc(f"descriptor family {desc.family!r} is not one of {families}")


def splitk_core(
    a: torch.Tensor,
    b: torch.Tensor,
    desc: GEMMDesc,
    *,
    bias: Any = None,
    residual: Any = None,
    gate: Any = None,
    config: KernelConfig | None = None,
    out: torch.Tensor | None = None,
    gelu_tanh_fma: bool = True,
    reverse_merge: bool = False,
) -> torch.Tensor:
    """Parts then ordered merge. ``reverse_merge`` is the planted defect the suites must catch."""
    import torch

    m, n, k = check_operands(desc, a, b)
    cfg = fit_config(desc, config or KernelConfig())
    check_config(desc, cfg)
    ep = epilogue_args(desc, m, n, bias, residual, gate)
    plan = tensor_core_plan(desc, k)
    if out is None:
        out = torch.empty((m, n), dtype=torch_dtype(desc.out_dtype), device=a.device)
    if not (m and n):
        return out
    ws = torch.empty((plan.n_parts, m, n), dtype=torch_dtype(desc.partial_dtype), device=a.device)
    launch_parts(desc, plan, a, b, ws, cfg)
    if reverse_merge:
        ws = ws.flip(0)
    launch_merge(desc, ws, out, ep, gelu_tanh_fma=gelu_tanh_fma)
    return out


def splitk_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(merge of the level-0 parts of ``desc``), fast accumulation inside each part."""
    check_family(desc, (FAMILY,))
    return splitk_core(a, b, desc, **kw)


def splitk_launcher(
    desc: GEMMDesc,
    m: int,
    n: int,
    k: int,
    a_strides: tuple[int, int],
    b_strides: tuple[int, int],
    cfg: KernelConfig,
    *,
    gelu_tanh_fma: bool = True,
) -> Any:
    """``launch(a, b, bias, residual, gate) -> out`` for repeated calls of one chain-merged
    split-K descriptor, shape, operand strides and config (fixbits.matmul keys it on them):
    the plan, its device tables, grids and constexprs are settled once, so a call is two
    torch.empty and two direct launches instead of the reference path's checks, plan and
    Triton dispatch (tens of microseconds, more than a small split-K GEMM on the GPU).
    Butterfly merges keep the reference path (splitk_core)."""
    import torch

    from fixbits.kernels._host import _plan
    from fixbits.kernels.launch import DirectLaunch

    cfg = fit_config(desc, cfg)
    check_config(desc, cfg)
    if desc.k_cuts and desc.k_cuts[0].merge != "chain":
        return lambda a, b, bias, residual, gate: splitk_core(
            a, b, desc, bias=bias, residual=residual, gate=gate, config=cfg, gelu_tanh_fma=gelu_tanh_fma
        )
    plan = tensor_core_plan(desc, k)
    ep = _plan(desc.epilogue)
    odt, pdt = torch_dtype(desc.out_dtype), torch_dtype(desc.partial_dtype)
    p = plan.n_parts
    mn, pmn = (m, n), (p, m, n)
    if not (m and n):
        return lambda a, b, bias, residual, gate: torch.empty(mn, dtype=odt, device=a.device)
    swap, maybe_tma = part_knobs(desc, cfg)
    # swapped, the kernel computes C^T = B^T A^T into a workspace read back as (p, m, n)
    geo = launch_geometry(m, n, a_strides, b_strides, swap)
    km, kn = geo.m, geo.n
    (sam, sak), (sbk, sbn), (swm, swn) = geo.a_strides, geo.b_strides, geo.out_strides
    part_kw = dict(
        STEP=desc.k_loop_step, IK=desc.instruction_k, HWK=hw_k(desc), PROMO=promo_of(desc),
        GROUPS=groups_for(desc, cfg), RES_FIRST=desc.residue == "first", HAS_INNER=plan.has_inner,
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, GROUP_M=cfg.GROUP_M,
        NUM_STAGES=cfg.num_stages, RUN_ALIGN=plan.run_align(desc.k_loop_step),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **LAUNCH_OPTS,
    )  # fmt: skip
    part_grid = (triton.cdiv(km, cfg.BLOCK_M) * triton.cdiv(kn, cfg.BLOCK_N), p)
    parts_by_trans: dict[bool | None, DirectLaunch] = {  # pointer body (None), TMA body per B_TRANS
        None: DirectLaunch(_splitk_part_kernel, part_grid, dict(part_kw, USE_TMA=False, B_TRANS=False))
    }
    tma = TmaOperands(desc, cfg, swap) if maybe_tma else None
    merge = DirectLaunch(_splitk_merge_kernel, (triton.cdiv(m, MERGE_BLOCK_M), triton.cdiv(n, MERGE_BLOCK_N)), dict(
        MERGE=OUT_CODES[desc.merge_dtype], FROM_ZERO=True,
        EP0=ep.codes[0], EP1=ep.codes[1], EP2=ep.codes[2], EP3=ep.codes[3],
        OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
        BLOCK_M=MERGE_BLOCK_M, BLOCK_N=MERGE_BLOCK_N, num_warps=4, **LAUNCH_OPTS,
    ))  # fmt: skip
    need_bias, need_res, need_gate, scales = ep.needs_bias, ep.needs_residual, ep.needs_gate, ep.scales
    check_epilogue = epilogue_check(desc, m, n)
    tables: list[Any] = []  # (runs, offsets) on the device of the first call
    empty = torch.empty

    def launch(a: Any, b: Any, bias: Any, residual: Any, gate: Any) -> Any:
        check_epilogue(bias, residual, gate)
        if not tables or tables[2] != a.device:
            tables[:] = [device_table(("splitk_runs", desc, k), lambda: plan.tables()[0].reshape(-1), a.device),
                         device_table(("splitk_offs", desc, k), lambda: plan.tables()[1], a.device), a.device]
        ws = empty(pmn, dtype=pdt, device=a.device)
        out = empty(mn, dtype=odt, device=a.device)
        ka, kb = (b, a) if swap else (a, b)  # pointers; the strides above make them B^T, A^T
        a_desc, b_desc, b_trans = tma(ka, kb) if tma is not None else (None, None, False)
        key = b_trans if a_desc is not None else None
        parts = parts_by_trans.get(key)
        if parts is None:
            parts = parts_by_trans[key] = DirectLaunch(
                _splitk_part_kernel, part_grid, dict(part_kw, USE_TMA=True, B_TRANS=b_trans)
            )
        parts(ka, kb, ws, tables[0], tables[1], a_desc, b_desc, km, kn, sam, sak, sbk, sbn, m * n, swm, swn)
        r = residual if need_res else out
        g = gate if need_gate else out
        merge(ws, out, bias if need_bias else out, r, g, r.stride(0), r.stride(1), g.stride(0), g.stride(1),
              p, m, n, m * n, n, 1, n, 1, *scales)  # fmt: skip
        return out

    return launch
