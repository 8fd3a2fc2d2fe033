"""Single-pass tensor-core GEMM: one output tile per program, one chain over all of K.

C[m, n] = epilogue(round_out(chain over k in [0, K) of A[m, k] * B[k, n])), the chain being
fixbits.kernels._tensorcore.chain (fast accumulation here; per_mma.py reuses this kernel
with PROMO > 0). BLOCK_M/N/K, GROUP_M, warps and stages are speed knobs.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from fixbits.desc import GEMMDesc
from fixbits.kernels._host import (
    LAUNCH_OPTS,
    EpilogueArgs,
    KernelConfig,
    check_config,
    check_operands,
    epilogue_args,
    epilogue_check,
    fewer_stages_on_oom,
    fit_config,
    launch_geometry,
    out_code,
    swapped_epilogue,
    torch_dtype,
)
from fixbits.kernels._tensorcore import chain_routed, tile_coords, tma_turns
from fixbits.kernels.epilogue import epilogue_store, epilogue_value
from fixbits.kernels.launch import DescAt, DescForm, DirectLaunch
from fixbits.kernels.plan import UnsupportedDesc

if TYPE_CHECKING:
    import torch

FAMILY = "single_pass"


@triton.jit
def _write_tile(
    acc, out_ptr, c_desc, rm, rn, off_m, off_n, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn, ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr, TMA_STORE: tl.constexpr,
):  # fmt: skip
    """The epilogue's tile, written by the masked store or, with TMA_STORE, by one TMA bulk store
    of the same values (it clips rows >= M and cols >= N itself)."""
    if TMA_STORE:
        x = epilogue_value(
            acc, out_ptr, rm, rn, M, N, bias_ptr, res_ptr, gate_ptr, stride_rm, stride_rn, stride_gm, stride_gn,
            ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
        )  # fmt: skip
        c_desc.store([off_m, off_n], x)
    else:
        epilogue_store(
            acc, out_ptr, rm, rn, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
            stride_rm, stride_rn, stride_gm, stride_gn,
            ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
        )  # fmt: skip


@triton.jit
def _single_pass_kernel(
    a_ptr, b_ptr, out_ptr, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn, a_desc, b_desc, c_desc,
    M, N, K, sam, sak, sbk, sbn, som, son,
    ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr, GROUPS: tl.constexpr,
    RES_FIRST: tl.constexpr,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr, USE_TMA: tl.constexpr, B_TRANS: tl.constexpr, TMA_STORE: tl.constexpr,
    WS: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    pid_m, pid_n = tile_coords(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # rows/cols past the edge read a valid row (wrapped) and are never stored
    rm_ld = rm % M
    rn_ld = rn % N
    a_rows = a_ptr + rm_ld[:, None] * sam
    b_cols = b_ptr + rn_ld[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if WS:  # whole turns from k = 0 (ws_route)
        TURN: tl.constexpr = GROUPS * PROMO * IK if PROMO > 0 else BLOCK_K  # a TMA turn (single_pass.tma_k)
        acc = tma_turns(acc, a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K // TURN, TURN, IK, PROMO,
                        B_TRANS, NUM_STAGES, True)  # fmt: skip
    else:
        acc = chain_routed(acc, a_rows, b_cols, a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K, sak, sbk,
                           STEP, IK, HWK, BLOCK_K, PROMO, GROUPS, RES_FIRST, USE_TMA, B_TRANS, NUM_STAGES,
                           True)  # fmt: skip  (a whole-K chain: TMA turns may run past K)
    _write_tile(
        acc, out_ptr, c_desc, rm, rn, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
        stride_rm, stride_rn, stride_gm, stride_gn, ep_scale0, ep_scale1, ep_scale2, ep_scale3,
        EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA, TMA_STORE,
    )  # fmt: skip


@triton.jit
def _single_pass_persistent_kernel(
    a_ptr, b_ptr, out_ptr, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn, a_desc, b_desc, c_desc,
    M, N, K, sam, sak, sbk, sbn, som, son, num_programs,
    ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, RES_FIRST: tl.constexpr,
    PROMO: tl.constexpr, GROUPS: tl.constexpr,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_STAGES: tl.constexpr, B_TRANS: tl.constexpr, TMA_STORE: tl.constexpr,
):  # fmt: skip
    """Persistent grid over output tiles, TMA body: each tile's chain is exactly the one of
    _single_pass_kernel (fast accumulation, or fp8 per-MMA with PROMO > 0), only the program
    that computes it changes."""
    start = tl.program_id(0)
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(start, num_tiles, num_programs):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        a_rows = a_ptr + (rm % M)[:, None] * sam
        b_cols = b_ptr + (rn % N)[None, :] * sbn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = chain_routed(acc, a_rows, b_cols, a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, 0, K, sak, sbk,
                           STEP, IK, HWK, BLOCK_K, PROMO, GROUPS, RES_FIRST, True, B_TRANS, NUM_STAGES, True)  # fmt: skip
        _write_tile(
            acc, out_ptr, c_desc, rm, rn, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N, som, son, bias_ptr, res_ptr,
            gate_ptr, stride_rm, stride_rn, stride_gm, stride_gn, ep_scale0, ep_scale1, ep_scale2, ep_scale3,
            EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA, TMA_STORE,
        )  # fmt: skip


_SMS: dict[int, int] = {}


def num_sms(device: Any) -> int:
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SMS:
        _SMS[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SMS[idx]


def hw_k(desc: GEMMDesc) -> int:
    """The instruction width tl.dot issues on sm_90 for these inputs (wgmma / mma.sync k16, fp8 k32)."""
    return 32 if desc.in_dtype.startswith("fp8") else 16


def promo_of(desc: GEMMDesc) -> int:
    return 0 if desc.use_fast_accum else int(desc.promotion_interval or 1)


TMA_BOX_MAX = 256  # elements per dimension of one TMA box (cuTensorMapEncodeTiled's boxDim limit)


def tma_k(desc: GEMMDesc, cfg: KernelConfig) -> int:
    """K width of one TMA turn: BLOCK_K for fast accumulation, GROUPS promotion groups per-MMA."""
    promo = promo_of(desc)
    return cfg.BLOCK_K if not promo else groups_for(desc, cfg) * promo * desc.instruction_k


def tma_route(desc: GEMMDesc, cfg: KernelConfig) -> bool:
    """Whether a USE_TMA config may load its turns by TMA for ``desc`` (operands aside): the
    instruction is the one tl.dot issues, a per-MMA chain has fp8 inputs into fp32 (Triton's
    sm_90 dot then promotes a partial accumulator itself, chain_promoted_tma) and whole
    promotion groups per turn, and a turn fits one TMA box. Otherwise the pointer body computes
    the same dots."""
    if not cfg.USE_TMA or desc.instruction_k != hw_k(desc):
        return False
    if promo_of(desc) and not (desc.in_dtype.startswith("fp8") and desc.acc_dtype == "fp32"):
        return False
    return 0 < tma_k(desc, cfg) <= TMA_BOX_MAX  # (0: a group width groups_for cannot turn)


WARP_SPEC_ENV = "FIXBITS_WARP_SPEC"


def ws_route(desc: GEMMDesc, cfg: KernelConfig, k: int, b_trans: bool) -> bool:
    """Whether a WARP_SPEC config takes the warp-specialized turn loop (tma_turns, WS) for K = k:
    only in a process started with FIXBITS_WARP_SPEC=1 (the diagnosis runner
    runners/device/ws_probe.py and the GPU suite's child process; read at each call), because
    on an H100 with Triton 3.6 every fp16 warp-specialized launch hung
    (benchmarks/gemm/h100/s23/ws_fp16, B N-major and K-major) and the fp8 suite test did not
    finish (h100/s24); a hang cannot be interrupted inside a process that shares the GPU
    context. There, fp8 needs B K-major (b_trans; fp8 wgmma reads both operands K-major from
    shared memory and the consumers cannot transpose a tile), and every dtype the TMA route, one
    tile per program, and a chain of whole TMA turns from k = 0 (K a multiple of the k-loop step
    and of the turn). Otherwise the config runs the other branches, with the same bytes."""
    if not cfg.WARP_SPEC or cfg.PERSISTENT or not tma_route(desc, cfg):
        return False
    flag = os.environ.get(WARP_SPEC_ENV, "0")
    if flag not in ("0", "1"):
        raise ValueError(f"{WARP_SPEC_ENV}={flag!r}: expected 0 (off, the default) or 1")
    if flag != "1" or (desc.in_dtype.startswith("fp8") and not b_trans):
        return False
    return k > 0 and k % desc.k_loop_step == 0 and k % tma_k(desc, cfg) == 0


def groups_for(desc: GEMMDesc, cfg: KernelConfig) -> int:
    """Promotion groups per turn for the per-MMA body (0: one instruction at a time)."""
    promo = promo_of(desc)
    if promo == 0:
        return 0
    g = promo * desc.instruction_k
    if g & (g - 1):
        return 0
    return max(1, cfg.GROUPS)


def launch_tile_kernel(
    desc: GEMMDesc,
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    ep: EpilogueArgs,
    cfg: KernelConfig,
    *,
    gelu_tanh_fma: bool = True,
) -> Any:
    swapped = False
    if cfg.SWAP_AB:
        # C^T = B^T A^T: every output element keeps its products and their k order, only the
        # tile that computes it moves, so the bytes are the same (a speed knob, like BLOCK_M)
        sep = swapped_epilogue(ep, a.shape[0], b.shape[1])
        if sep is not None:
            a, b, out, ep = b.t(), a.t(), out.t(), sep
            swapped = True
        cfg = dataclasses.replace(cfg, SWAP_AB=0)
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    tiles = triton.cdiv(m, cfg.BLOCK_M) * triton.cdiv(n, cfg.BLOCK_N)
    grid = (tiles,)
    a_desc, b_desc, b_trans = tma_descriptors(desc, a, b, cfg)
    # the TMA store rides the TMA route only; a swapped call writes C^T (column-major): masked store
    c_desc = out_descriptor(out, cfg) if a_desc is not None and not swapped else None
    if cfg.PERSISTENT and a_desc is not None:
        progs = min(tiles, num_sms(a.device) * cfg.PERSISTENT)
        return _single_pass_persistent_kernel[(progs,)](
            a, b, out, *ep.kernel_args(out), a_desc, b_desc, c_desc,
            m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1), progs,
            *ep.plan.scales,
            STEP=desc.k_loop_step, IK=desc.instruction_k, HWK=hw_k(desc), RES_FIRST=desc.residue == "first",
            PROMO=promo_of(desc), GROUPS=groups_for(desc, cfg),
            EP0=ep.plan.codes[0], EP1=ep.plan.codes[1], EP2=ep.plan.codes[2], EP3=ep.plan.codes[3],
            OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
            BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, GROUP_M=cfg.GROUP_M,
            NUM_STAGES=cfg.num_stages, B_TRANS=b_trans, TMA_STORE=c_desc is not None,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages, **LAUNCH_OPTS,
        )  # fmt: skip
    return _single_pass_kernel[grid](
        a, b, out, *ep.kernel_args(out), a_desc, b_desc, c_desc,
        m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        *ep.plan.scales,
        STEP=desc.k_loop_step, IK=desc.instruction_k, HWK=hw_k(desc), PROMO=promo_of(desc), GROUPS=groups_for(desc, cfg),
        RES_FIRST=desc.residue == "first",
        EP0=ep.plan.codes[0], EP1=ep.plan.codes[1], EP2=ep.plan.codes[2], EP3=ep.plan.codes[3],
        OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, GROUP_M=cfg.GROUP_M,
        NUM_STAGES=cfg.num_stages, USE_TMA=a_desc is not None, B_TRANS=b_trans, TMA_STORE=c_desc is not None,
        WS=a_desc is not None and ws_route(desc, cfg, k, b_trans),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, **LAUNCH_OPTS,
    )  # fmt: skip


def tma_descriptors(
    desc: GEMMDesc, a: torch.Tensor, b: torch.Tensor, cfg: KernelConfig, *, require_cuda: bool = True
) -> tuple[Any, Any, bool]:
    """Host tensor descriptors when the config asks for TMA and the operands allow it, else
    (None, None, False): the pointer path computes the same dots, so this is a speed choice.
    ``require_cuda=False`` lets the CPU tests compile the TMA body ahead of time."""
    if not tma_route(desc, cfg) or (
        require_cuda and a.device.type not in ("cuda", "meta")  # meta: compile-only stand-ins
    ):
        return None, None, False
    if not tma_ok(a):
        return None, None, False
    bk = tma_k(desc, cfg)
    if tma_ok(b):
        return (TensorDescriptor.from_tensor(a, [cfg.BLOCK_M, bk]),
                TensorDescriptor.from_tensor(b, [bk, cfg.BLOCK_N]), False)  # fmt: skip
    bt = b.t()
    if tma_ok(bt):
        return (TensorDescriptor.from_tensor(a, [cfg.BLOCK_M, bk]),
                TensorDescriptor.from_tensor(bt, [cfg.BLOCK_N, bk]), True)  # fmt: skip
    return None, None, False


class TmaOperands:
    """The TMA descriptors of one launch site's two operands, per call. The site is keyed on
    shapes and strides, so after the first call whose operands allow TMA (from_tensor builds and
    validates the descriptors) only the base address moves: a call then costs two small DescAt
    objects and an alignment check instead of two TensorDescriptor builds."""

    def __init__(self, desc: GEMMDesc, cfg: KernelConfig, swap: bool) -> None:
        self.desc, self.cfg, self.swap = desc, cfg, swap
        self.forms: tuple[DescForm, DescForm, bool] | None = None

    def __call__(self, a: Any, b: Any) -> tuple[Any, Any, bool]:
        """(A's descriptor, B's, B_TRANS) or (None, None, False). ``a``, ``b``: the tensors the
        kernel's pointers get; at a swapped site they are B and A of C^T = B^T A^T, the kernel's
        operands being their transposes."""
        f = self.forms
        if f is not None:
            pa, pb = a.data_ptr(), b.data_ptr()
            if not (pa | pb) & 15:
                return DescAt(f[0], a, pa), DescAt(f[1], b, pb), f[2]
        ka, kb = (a.t(), b.t()) if self.swap else (a, b)
        a_desc, b_desc, b_trans = tma_descriptors(self.desc, ka, kb, self.cfg)
        if a_desc is not None and f is None:
            # the fields only: keeping `base` would keep the first call's operands alive
            self.forms = (DescForm(_fields(a_desc)), DescForm(_fields(b_desc)), b_trans)
        return a_desc, b_desc, b_trans


def tma_ok(t: torch.Tensor) -> bool:
    """A tensor a TMA descriptor can cover: row-major, 16-byte aligned base and row pitch."""
    return t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


def out_descriptor(out: torch.Tensor, cfg: KernelConfig) -> Any:
    """The output's descriptor for TMA_STORE (block [BLOCK_M, BLOCK_N]; the bulk store clips at
    the tensor's bounds, as the masked store does), or None: then the masked store writes the
    same values. The caller asks only on the TMA route with the output not transposed."""
    if not cfg.TMA_STORE or not tma_ok(out):
        return None
    return TensorDescriptor.from_tensor(out, [cfg.BLOCK_M, cfg.BLOCK_N])


def check_family(desc: GEMMDesc, families: tuple[str, ...]) -> None:
    if desc.family not in families:
        raise UnsupportedDesc(f"descriptor family {desc.family!r} is not one of {families}")
    if desc.k_cuts:
        raise UnsupportedDesc(f"{desc.family}: k_cuts {desc.k_cuts} need the split-K kernels")
    if desc.instruction == "fma":
        raise UnsupportedDesc("instruction=fma runs on the scalar families")


def tile_matmul(
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
) -> torch.Tensor:
    import torch

    m, n, _ = check_operands(desc, a, b)
    cfg = fit_config(desc, config or KernelConfig())
    check_config(desc, cfg)
    ep = epilogue_args(desc, m, n, bias, residual, gate)
    if out is None:
        out = torch.empty((m, n), dtype=torch_dtype(desc.out_dtype), device=a.device)
    if m and n:
        fewer_stages_on_oom(
            lambda c: launch_tile_kernel(desc, a, b, out, ep, c, gelu_tanh_fma=gelu_tanh_fma), cfg
        )
    return out


def single_pass_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(A @ B) with the single-pass fast-accumulation arithmetic of ``desc``."""
    check_family(desc, (FAMILY,))
    return tile_matmul(a, b, desc, **kw)


def _fields(d: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(d).items() if k != "base"}


def tile_launcher(
    desc: GEMMDesc,
    m: int,
    n: int,
    k: int,
    a_strides: tuple[int, int],
    b_strides: tuple[int, int],
    device_index: int,
    cfg: KernelConfig,
    *,
    gelu_tanh_fma: bool = True,
) -> Any:
    """``launch(a, b, bias, residual, gate) -> out`` for repeated calls of one descriptor,
    shape, operand strides and config: everything that does not depend on the tensors'
    storage (checks, epilogue plan, swap, grid, constexprs, strides) is settled here once, so a
    call is one torch.empty, the epilogue tensors' shape checks and one launch. fixbits.matmul
    keys these on exactly the arguments above; launch_tile_kernel stays the reference path."""
    import torch

    from fixbits.kernels._host import EP_BIAS, EP_RESIDUAL, _plan

    cfg = fit_config(desc, cfg)
    check_config(desc, cfg)
    plan = _plan(desc.epilogue)
    odt = torch_dtype(desc.out_dtype)
    swap = bool(cfg.SWAP_AB) and not (plan.needs_bias and plan.needs_residual)
    codes = plan.codes
    if swap:
        codes = tuple(EP_RESIDUAL if c == EP_BIAS else c for c in codes)  # bias rides the residual slot
    geo = launch_geometry(m, n, a_strides, b_strides, swap)
    km, kn = geo.m, geo.n
    (sam, sak), (sbk, sbn), (som, son) = geo.a_strides, geo.b_strides, geo.out_strides
    cfg = dataclasses.replace(cfg, SWAP_AB=0)
    promo = promo_of(desc)
    maybe_tma = tma_route(desc, cfg)
    tiles = triton.cdiv(km, cfg.BLOCK_M) * triton.cdiv(kn, cfg.BLOCK_N)
    common = dict(
        STEP=desc.k_loop_step, IK=desc.instruction_k, HWK=hw_k(desc), RES_FIRST=desc.residue == "first",
        EP0=codes[0], EP1=codes[1], EP2=codes[2], EP3=codes[3], OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
        BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, BLOCK_K=cfg.BLOCK_K, GROUP_M=cfg.GROUP_M,
        NUM_STAGES=cfg.num_stages, num_warps=cfg.num_warps, num_stages=cfg.num_stages, **LAUNCH_OPTS,
    )  # fmt: skip
    plain = DirectLaunch(
        _single_pass_kernel, (tiles,),
        dict(common, PROMO=promo, GROUPS=groups_for(desc, cfg), USE_TMA=False, B_TRANS=False, TMA_STORE=False, WS=False),
    )  # fmt: skip
    by_trans: dict[
        tuple[bool, bool], tuple[DirectLaunch, tuple[int, ...]]
    ] = {}  # TMA launches by (B_TRANS, TMA store), settled at first use
    tma = TmaOperands(desc, cfg, swap) if maybe_tma else None
    # TMA_STORE: the output is a fresh row-major (m, n) tensor, never transposed unless swapped;
    # its pitch is fixed here, its base is checked per call (an unaligned one: the masked store)
    store_tma = bool(cfg.TMA_STORE) and not swap and (n * odt.itemsize) % 16 == 0
    c_fields: list[Any] = []  # the output descriptor's DescForm, from the first TMA store
    scales = plan.scales
    need_bias, need_res, need_gate = plan.needs_bias, plan.needs_residual, plan.needs_gate
    mn = (m, n)
    check_epilogue = epilogue_check(desc, m, n)
    empty = torch.empty
    # bias as a residual of C^T: bias[None, :].expand(m, n).t() has strides (1, 0)
    brs = (1, 0)
    if not (m and n):
        return lambda a, b, bias, residual, gate: empty(mn, dtype=odt, device=a.device)

    def launch(a: Any, b: Any, bias: Any, residual: Any, gate: Any) -> Any:
        check_epilogue(bias, residual, gate)
        out = empty(mn, dtype=odt, device=a.device)
        if swap:
            # the kernel reads only pointers (strides are settled above), so the operands of
            # C^T = B^T A^T go in as they are; the transposed views are built for TMA's first call
            a, b, o = b, a, out
            if need_bias:
                r, rs0, rs1 = bias, brs[0], brs[1]
            elif need_res:
                r = residual
                rs0, rs1 = residual.stride(1), residual.stride(0)
            else:
                r, rs0, rs1 = out, som, son
            if need_gate:
                gt, gs0, gs1 = gate, gate.stride(1), gate.stride(0)
            else:
                gt, gs0, gs1 = out, som, son
            bs = out
        else:
            o = out
            if need_res:
                r, rs0, rs1 = residual, residual.stride(0), residual.stride(1)
            else:
                r, rs0, rs1 = out, som, son
            if need_gate:
                gt, gs0, gs1 = gate, gate.stride(0), gate.stride(1)
            else:
                gt, gs0, gs1 = out, som, son
            bs = bias if need_bias else out
        if tma is not None:
            a_desc, b_desc, b_trans = tma(a, b)
            if a_desc is not None:
                c_desc = None
                if store_tma:
                    po = out.data_ptr()
                    if c_fields and not po & 15:
                        c_desc = DescAt(c_fields[0], out, po)  # RawRun keeps the encoded map per base
                    elif not c_fields:
                        c_desc = out_descriptor(out, cfg)
                        if c_desc is not None:
                            c_fields.append(DescForm(_fields(c_desc)))
                key = (b_trans, c_desc is not None)
                hit = by_trans.get(key)
                if hit is None:
                    hit = by_trans[key] = _tma_launch(
                        cfg, common, tiles, b_trans, device_index, key[1], promo, groups_for(desc, cfg),
                        ws=ws_route(desc, cfg, k, b_trans),
                    )
                fn, extra = hit
                fn(a, b, o, bs, r, gt, rs0, rs1, gs0, gs1, a_desc, b_desc, c_desc, km, kn, k, sam, sak, sbk, sbn,
                   som, son, *extra, *scales)  # fmt: skip
                return out
        plain(
            a,
            b,
            o,
            bs,
            r,
            gt,
            rs0,
            rs1,
            gs0,
            gs1,
            None,
            None,
            None,
            km,
            kn,
            k,
            sam,
            sak,
            sbk,
            sbn,
            som,
            son,
            *scales,
        )
        return out

    return launch


def _tma_launch(
    cfg: KernelConfig,
    common: dict[str, Any],
    tiles: int,
    b_trans: bool,
    device_index: int,
    tma_store: bool,
    promo: int = 0,
    groups: int = 0,
    *,
    ws: bool = False,
) -> tuple[DirectLaunch, tuple[int, ...]]:
    """The TMA launch of tile_launcher: (launch, runtime arguments after the output strides).
    One launch per (B_TRANS, TMA store): DirectLaunch's key does not see a None/descriptor swap."""
    if cfg.PERSISTENT:
        import torch

        progs = min(tiles, num_sms(torch.device("cuda", max(device_index, 0))) * cfg.PERSISTENT)
        kw = dict(common, PROMO=promo, GROUPS=groups, B_TRANS=b_trans, TMA_STORE=tma_store)
        return DirectLaunch(_single_pass_persistent_kernel, (progs,), kw), (progs,)
    kw = dict(common, PROMO=promo, GROUPS=groups, USE_TMA=True, B_TRANS=b_trans, TMA_STORE=tma_store, WS=ws)
    return DirectLaunch(_single_pass_kernel, (tiles,), kw), ()
