"""Shared @triton.jit core of the scalar (instruction 'fma') families.

The nest of k_cuts is flattened on the host into a leaf table (fixbits.kernels.plan.ScalarNest):
leaf j is one innermost chain, ``index[j, t]`` the k of its t-th product. A program computes
all leaves of its output tile at once as a [BM, BN, NL] tensor of round-to-nearest fp32 fma
chains starting from +0 (padding products are 0*0, which leaves a chain exact: a chain that
starts at +0 can never hold -0), then folds the leaves level by level, innermost first:

* chain: sum the level's parts in order from +0;
* butterfly_up: lanes xor 1, 2, 4, ...: pair neighbours first (bit 0 of the part index);
* butterfly_down: lanes xor count/2, ..., 1: pair the highest bit first.

Every add of the level-0 merge is rounded to merge_dtype after each part was rounded to
partial_dtype; inner levels stay in fp32. A butterfly is done by reshaping the part axis so
one size-2 axis holds the pair and summing that axis (one add, commutative): the fold
is fixed by the reshape, never by warps or layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import triton
import triton.language as tl

from fixbits.desc import GEMMDesc
from fixbits.kernels._host import (
    LAUNCH_OPTS,
    check_operands,
    device_table,
    epilogue_args,
    out_code,
    torch_dtype,
)
from fixbits.kernels.epilogue import OUT_CODES, epilogue_store, round_to
from fixbits.kernels.plan import ScalarNest, UnsupportedDesc, scalar_nest

if TYPE_CHECKING:
    import torch

CHAIN, BUTTERFLY_UP, BUTTERFLY_DOWN, REDUCE_1BLOCK = 0, 1, 2, 3
MERGE_CODES = {"chain": CHAIN, "butterfly_up": BUTTERFLY_UP, "butterfly_down": BUTTERFLY_DOWN,
               "reduce_1block": REDUCE_1BLOCK}  # fmt: skip


@triton.jit
def leaf_chains(a_ptr, b_ptr, idx_ptr, leaf0, rm, rn, M, N, T, sam, sak, sbk, sbn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NL: tl.constexpr):  # fmt: skip
    """[BM, BN, NL] fp32: leaf j = fma chain over k = index[leaf0 + j, 0..T)."""
    leaves = leaf0 + tl.arange(0, NL)
    acc = tl.zeros((BLOCK_M, BLOCK_N, NL), dtype=tl.float32)
    row_ok = rm < M
    col_ok = rn < N
    for t in range(0, T):
        kk = tl.load(idx_ptr + leaves * T + t)
        ok = kk >= 0
        kk = tl.where(ok, kk, 0)
        a = tl.load(a_ptr + rm[:, None, None] * sam + kk[None, None, :] * sak,
                    mask=row_ok[:, None, None] & ok[None, None, :], other=0.0)  # fmt: skip
        b = tl.load(b_ptr + kk[None, None, :] * sbk + rn[None, :, None] * sbn,
                    mask=col_ok[None, :, None] & ok[None, None, :], other=0.0)  # fmt: skip
        acc = tl.fma(a.to(tl.float32), b.to(tl.float32), acc)
    return acc


@triton.jit
def merge_level(
    x, R: tl.constexpr, C: tl.constexpr, LOG: tl.constexpr, KIND: tl.constexpr, ROUND: tl.constexpr
):
    """Fold [R * C] (parts innermost) to [R] by KIND; every add rounded to ROUND (OUT code)."""
    if C == 1:
        out = x
    elif KIND == 0:
        x2 = tl.reshape(x, (R, C))
        lane = tl.arange(0, C)[None, :]
        out = tl.zeros((R,), dtype=tl.float32)
        for c in tl.static_range(C):
            # one value and zeros: exact (a -0 becomes +0, which a chain from +0 cannot tell apart)
            part = tl.sum(tl.where(lane == c, x2, 0.0), axis=1)
            out = round_to(out + part, ROUND)
    elif KIND == 1:
        out = x
        for i in tl.static_range(LOG):
            pairs = tl.reshape(out, (R * (C >> (i + 1)), 2))
            out = round_to(tl.sum(pairs, axis=1), ROUND)
    else:
        out = x
        for i in tl.static_range(LOG):
            halves = tl.reshape(out, (R, 2, C >> (i + 1)))
            out = tl.reshape(round_to(tl.sum(halves, axis=1), ROUND), (R * (C >> (i + 1)),))
    return out


@triton.jit
def fold_nest(acc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr,
              L0: tl.constexpr, L1: tl.constexpr, L2: tl.constexpr, L3: tl.constexpr,
              K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
              PARTIAL: tl.constexpr, MERGE: tl.constexpr, HAS_L0: tl.constexpr):  # fmt: skip
    """[BM, BN, C0*C1*C2*C3] leaves -> [BM, BN] by the nest's merges, innermost level first."""
    BO: tl.constexpr = BLOCK_M * BLOCK_N
    x = tl.reshape(acc, (BO * C0 * C1 * C2 * C3,))
    x = merge_level(x, BO * C0 * C1 * C2, C3, L3, K3, 0)
    x = merge_level(x, BO * C0 * C1, C2, L2, K2, 0)
    x = merge_level(x, BO * C0, C1, L1, K1, 0)
    if HAS_L0:
        x = round_to(x, PARTIAL)
        x = merge_level(x, BO, C0, L0, K0, MERGE)
    return tl.reshape(x, (BLOCK_M, BLOCK_N))


@triton.jit
def _scalar_nest_kernel(
    a_ptr, b_ptr, idx_ptr, out_ptr, bias_ptr, res_ptr, gate_ptr,
    stride_rm, stride_rn, stride_gm, stride_gn,
    M, N, T, sam, sak, sbk, sbn, som, son,
    ep_scale0, ep_scale1, ep_scale2, ep_scale3,
    C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr,
    L0: tl.constexpr, L1: tl.constexpr, L2: tl.constexpr, L3: tl.constexpr,
    K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
    PARTIAL: tl.constexpr, MERGE: tl.constexpr, HAS_L0: tl.constexpr,
    EP0: tl.constexpr, EP1: tl.constexpr, EP2: tl.constexpr, EP3: tl.constexpr,
    OUT: tl.constexpr, GELU_TANH_FMA: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """One launch: every leaf of a [BM, BN] output tile, folded by the whole nest, epilogue."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    NL: tl.constexpr = C0 * C1 * C2 * C3
    acc = leaf_chains(a_ptr, b_ptr, idx_ptr, 0, rm, rn, M, N, T, sam, sak, sbk, sbn, BLOCK_M, BLOCK_N, NL)
    val = fold_nest(acc, BLOCK_M, BLOCK_N, C0, C1, C2, C3, L0, L1, L2, L3, K0, K1, K2, K3,
                    PARTIAL, MERGE, HAS_L0)  # fmt: skip
    epilogue_store(
        val, out_ptr, rm, rn, M, N, som, son, bias_ptr, res_ptr, gate_ptr,
        stride_rm, stride_rn, stride_gm, stride_gn,
        ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
    )  # fmt: skip


def nest_constexprs(
    nest: ScalarNest, desc: GEMMDesc, *, skip_level0: bool = False, workspace: bool = False
) -> dict[str, int]:
    """C*/L*/K* constexprs for up to four levels (absent levels count 1). reduce_1block is only
    realised by the workspace GEMV's merge kernel (``workspace``): merge_level has no such KIND."""
    counts = list(nest.counts)
    merges = list(nest.merges)
    if "reduce_1block" in merges and not workspace:
        raise UnsupportedDesc("merge=reduce_1block runs in the workspace GEMV (gemv_workspace) only")
    if len(counts) > 4:
        raise UnsupportedDesc(f"k_cuts: at most 4 levels for the scalar kernels, got {len(counts)}")
    # pad at the inside: absent inner levels have one part
    counts += [1] * (4 - len(counts))
    merges += ["chain"] * (4 - len(merges))
    kw: dict[str, int] = {}
    for i in range(4):
        kw[f"C{i}"] = counts[i]
        kw[f"L{i}"] = counts[i].bit_length() - 1
        kw[f"K{i}"] = MERGE_CODES[merges[i]]
    kw["PARTIAL"] = OUT_CODES[desc.partial_dtype]
    kw["MERGE"] = OUT_CODES[desc.merge_dtype]
    kw["HAS_L0"] = bool(nest.counts) and not skip_level0
    return kw


def tile_for(nl: int, n: int, m: int) -> tuple[int, int]:
    """Output tile so a program holds at most ~8K live fp32 leaves (a speed knob)."""
    bn = 64
    while bn > 16 and bn * nl > 8192:
        bn //= 2
    bm = 1
    while bm < 16 and bm * 2 <= m and 2 * bm * bn * nl <= 8192:
        bm *= 2
    return bm, bn


def scalar_nest_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    desc: GEMMDesc,
    *,
    bias: Any = None,
    residual: Any = None,
    gate: Any = None,
    out: torch.Tensor | None = None,
    tile: tuple[int, int] | None = None,
    num_warps: int = 4,
    gelu_tanh_fma: bool = True,
) -> torch.Tensor:
    """Realise any 'fma' descriptor of up to four levels in one launch."""
    import torch

    if desc.instruction != "fma":
        raise UnsupportedDesc(f"instruction={desc.instruction}: the scalar kernels run instruction=fma only")
    m, n, k = check_operands(desc, a, b)
    ep = epilogue_args(desc, m, n, bias, residual, gate)
    nest = scalar_nest(desc, k)
    if out is None:
        out = torch.empty((m, n), dtype=torch_dtype(desc.out_dtype), device=a.device)
    if not (m and n):
        return out
    idx = nest_table(nest, desc, a.device)
    bm, bn = tile or tile_for(nest.n_leaves, n, m)
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    _scalar_nest_kernel[grid](
        a, b, idx, out, *ep.kernel_args(out),
        m, n, nest.length, a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        *ep.plan.scales,
        **nest_constexprs(nest, desc),
        EP0=ep.plan.codes[0], EP1=ep.plan.codes[1], EP2=ep.plan.codes[2], EP3=ep.plan.codes[3],
        OUT=out_code(desc), GELU_TANH_FMA=gelu_tanh_fma,
        BLOCK_M=bm, BLOCK_N=bn, num_warps=num_warps, **LAUNCH_OPTS,
    )  # fmt: skip
    return out


def nest_table(nest: ScalarNest, desc: GEMMDesc, device: Any) -> torch.Tensor:
    """The nest's leaf index table on ``device`` (copied once per descriptor and K, shared by the
    one-launch and the workspace kernels)."""
    return device_table(("scalar_nest", desc, nest.k, nest.counts), lambda: nest.index.reshape(-1), device)


def check_family(desc: GEMMDesc, families: tuple[str, ...]) -> None:
    if desc.family not in families:
        raise UnsupportedDesc(f"descriptor family {desc.family!r} is not one of {families}")
