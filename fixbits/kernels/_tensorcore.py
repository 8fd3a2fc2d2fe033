"""Shared @triton.jit pieces of the tensor-core families: one accumulation chain, one part.

The contract (fixbits/desc.py, point 2): a chain over [s, e) issues instruction groups of
IK products in increasing k; the residue turn of (e - s) % STEP elements goes first or last
and is padded with zero products only up to whole instructions. A ``tl.dot`` over BLOCK_K
lowers on sm_90 to BLOCK_K / IK chained wgmma in increasing k, each folding into the fp32
accumulator with one rounding, so BLOCK_K is a free speed knob as long as the body it walks
is a whole number of instructions; the residue and any body tail shorter than BLOCK_K are
issued one instruction (one IK-wide dot) at a time, so no all-zero instruction is ever added.

HWK is the hardware instruction width Triton issues (16 for 16-bit inputs, 32 for fp8). A
narrower descriptor instruction (mma k8, IK = 8) is issued as one HWK-wide instruction whose
extra lanes are zero products (load_turn), so each wide instruction adds exactly one narrow one.

Per-MMA accumulation (PROMO = promotion_interval > 0): the instruction sequence of the chain
(residue included, in its place) is cut into runs of PROMO instructions counted from the
chain's start; each run goes into a zero-started temporary that is then added to the
accumulator with one round-to-nearest fp32 add; a short last run is added the same way.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def load_turn(a_rows, b_cols, base, sak, sbk, REAL: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr):
    """Operands for REAL consecutive elements from ``base`` (a whole number of instructions).

    IK == HWK: one plain tile. IK < HWK (mma k8 on a k16 tensor core): instruction j's IK
    products sit in lanes [j*HWK, j*HWK + IK) and the rest of its HWK lanes are zero, so a dot of
    REAL/IK*HWK lanes is REAL/IK chained wide instructions, each adding exactly one narrow one.
    """
    if IK == HWK:
        kk = base + tl.arange(0, REAL)
        a = tl.load(a_rows + kk[None, :] * sak)
        b = tl.load(b_cols + kk[:, None] * sbk)
    else:
        ix = tl.arange(0, REAL // IK * HWK)
        real = (ix % HWK) < IK
        kk = base + (ix // HWK) * IK + (ix % HWK)
        a = tl.load(a_rows + kk[None, :] * sak, mask=real[None, :], other=0.0)
        b = tl.load(b_cols + kk[:, None] * sbk, mask=real[:, None], other=0.0)
    return a, b


@triton.jit
def instrs(acc, a_rows, b_cols, lo, hi, sak, sbk, IK: tl.constexpr, HWK: tl.constexpr):
    """Whole instructions over [lo, hi), the last one padded with zero products."""
    for k0 in range(lo, hi, IK):
        ix = tl.arange(0, HWK)
        kk = k0 + ix
        km = (ix < IK) & (kk < hi)
        a = tl.load(a_rows + kk[None, :] * sak, mask=km[None, :], other=0.0)
        b = tl.load(b_cols + kk[:, None] * sbk, mask=km[:, None], other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def instrs_promoted(
    acc, tmp, cnt, a_rows, b_cols, lo, hi, sak, sbk, IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr
):
    """As ``instrs`` into the temporary; every PROMO-th instruction promotes it."""
    for k0 in range(lo, hi, IK):
        ix = tl.arange(0, HWK)
        kk = k0 + ix
        km = (ix < IK) & (kk < hi)
        a = tl.load(a_rows + kk[None, :] * sak, mask=km[None, :], other=0.0)
        b = tl.load(b_cols + kk[:, None] * sbk, mask=km[:, None], other=0.0)
        tmp = tl.dot(a, b, tmp)
        cnt += 1
        if cnt == PROMO:
            acc = acc + tmp
            tmp = tl.zeros_like(tmp)
            cnt = 0
    return acc, tmp, cnt


@triton.jit
def chain_fast(
    acc,
    a_rows,
    b_cols,
    s,
    e,
    sak,
    sbk,
    STEP: tl.constexpr,
    IK: tl.constexpr,
    HWK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    RES_FIRST: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    n = e - s
    r = n % STEP
    if RES_FIRST:
        acc = instrs(acc, a_rows, b_cols, s, s + r, sak, sbk, IK, HWK)
        lo = s + r
        hi = e
    else:
        lo = s
        hi = e - r
    nb = (hi - lo) // BLOCK_K
    for i in tl.range(0, nb, num_stages=NUM_STAGES):
        a, b = load_turn(a_rows, b_cols, lo + i * BLOCK_K, sak, sbk, BLOCK_K, IK, HWK)
        acc = tl.dot(a, b, acc)
    acc = instrs(acc, a_rows, b_cols, lo + nb * BLOCK_K, hi, sak, sbk, IK, HWK)
    if not RES_FIRST:
        acc = instrs(acc, a_rows, b_cols, hi, e, sak, sbk, IK, HWK)
    return acc


@triton.jit
def tma_operands(a_desc, b_desc, off_m, off_n, k0, B_TRANS: tl.constexpr):
    """One turn's tiles by TMA from k0. B_TRANS: b_desc describes B^T (N, K), K contiguous."""
    a = a_desc.load([off_m, k0])
    if B_TRANS:
        b = b_desc.load([off_n, k0]).T
    else:
        b = b_desc.load([k0, off_n])
    return a, b


@triton.jit
def tma_turns(
    acc, a_desc, b_desc, off_m, off_n, lo, nb, TURN: tl.constexpr, IK: tl.constexpr, PROMO: tl.constexpr,
    B_TRANS: tl.constexpr, NUM_STAGES: tl.constexpr, WS: tl.constexpr,
):  # fmt: skip
    """nb TMA turns of TURN elements from lo, one dot each: plain (PROMO = 0, fast accumulation)
    or with max_num_imprecise_acc = PROMO*IK, where Triton's sm_90 lowering runs each group's
    PROMO instructions into a zero-started partial and adds it to acc (per-MMA). WS:
    warp-specialized (single_pass.ws_route): Triton's sm_90 pass gives the loads to a producer
    warpgroup and splits the tile's rows over consumer warpgroups, each row keeping its dots in
    order. That pass leaves the loop alone when pointer-loaded dot loops precede it (and crashes
    on some: triton-lang/triton#9728), so the kernel calls it with WS in a branch of its own."""
    for i in tl.range(0, nb, num_stages=NUM_STAGES, warp_specialize=WS):
        a, b = tma_operands(a_desc, b_desc, off_m, off_n, lo + i * TURN, B_TRANS)
        if PROMO > 0:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=PROMO * IK)
        else:
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def chain_fast_tma(
    acc,
    a_rows,
    b_cols,
    a_desc,
    b_desc,
    off_m,
    off_n,
    s,
    e,
    sak,
    sbk,
    STEP: tl.constexpr,
    IK: tl.constexpr,
    HWK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    RES_FIRST: tl.constexpr,
    B_TRANS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """chain_fast with the whole-turn body loaded by TMA (tensor descriptors); the same dots in
    the same order, so the same bytes."""
    n = e - s
    r = n % STEP
    if RES_FIRST:
        acc = instrs(acc, a_rows, b_cols, s, s + r, sak, sbk, IK, HWK)
        lo = s + r
        hi = e
    else:
        lo = s
        hi = e - r
    nb = (hi - lo) // BLOCK_K
    acc = tma_turns(acc, a_desc, b_desc, off_m, off_n, lo, nb, BLOCK_K, IK, 0, B_TRANS, NUM_STAGES, False)
    acc = instrs(acc, a_rows, b_cols, lo + nb * BLOCK_K, hi, sak, sbk, IK, HWK)
    if not RES_FIRST:
        acc = instrs(acc, a_rows, b_cols, hi, e, sak, sbk, IK, HWK)
    return acc


@triton.jit
def zero_started_dot(a, b, G: tl.constexpr, HWK: tl.constexpr):
    """A dot from +0 that Triton may not fold into the accumulator it is added to.

    Triton's combine pass rewrites ``acc + dot(a, b, 0)`` into ``dot(a, b, acc)`` (the fast
    chain, one rounding per instruction into acc) whenever the dot's max_num_imprecise_acc is
    0, which is the default for 16-bit inputs. A nonzero value only steers fp8 lowering on
    sm_90 (partial accumulators), so for 16-bit inputs it keeps the add and changes nothing
    else; fp8 keeps Triton's sm_90 default (2**30), which already blocks the rewrite.
    """
    if HWK == 16:
        d = tl.dot(a, b, max_num_imprecise_acc=G)
    else:
        d = tl.dot(a, b)
    return d


@triton.jit
def promoted_open(
    acc, a_rows, b_cols, s, e, sak, sbk,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr, RES_FIRST: tl.constexpr,
):  # fmt: skip
    """A per-MMA chain up to its aligned body: the residue turn when it goes first, then the
    promotion group it left open, one instruction at a time. Returns (acc, tmp, cnt, the body's
    start, its end); the body from there starts a promotion group."""
    tmp = tl.zeros_like(acc)
    cnt = 0
    r = (e - s) % STEP
    if RES_FIRST:
        acc, tmp, cnt = instrs_promoted(acc, tmp, cnt, a_rows, b_cols, s, s + r, sak, sbk, IK, HWK, PROMO)
        lo = s + r
        hi = e
    else:
        lo = s
        hi = e - r
    head = ((PROMO - cnt) % PROMO) * IK
    head = tl.minimum(head, hi - lo)
    acc, tmp, cnt = instrs_promoted(acc, tmp, cnt, a_rows, b_cols, lo, lo + head, sak, sbk, IK, HWK, PROMO)
    return acc, tmp, cnt, lo + head, hi


@triton.jit
def promoted_close(
    acc, tmp, cnt, a_rows, b_cols, lo, hi, e, sak, sbk,
    IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr, RES_FIRST: tl.constexpr,
):  # fmt: skip
    """The rest of a per-MMA chain after its whole turns: the body's tail [lo, hi) and the residue
    turn when it goes last, one instruction at a time, then the open group's promotion."""
    acc, tmp, cnt = instrs_promoted(acc, tmp, cnt, a_rows, b_cols, lo, hi, sak, sbk, IK, HWK, PROMO)
    if not RES_FIRST:
        acc, tmp, cnt = instrs_promoted(acc, tmp, cnt, a_rows, b_cols, hi, e, sak, sbk, IK, HWK, PROMO)
    if cnt > 0:
        acc = acc + tmp
    return acc


@triton.jit
def chain_promoted(
    acc,
    a_rows,
    b_cols,
    s,
    e,
    sak,
    sbk,
    STEP: tl.constexpr,
    IK: tl.constexpr,
    HWK: tl.constexpr,
    PROMO: tl.constexpr,
    GROUPS: tl.constexpr,
    RES_FIRST: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """Per-MMA chain. GROUPS > 0: the aligned body runs GROUPS promotion groups per turn,
    each one zero-started dot of PROMO*IK (a power of two); GROUPS == 0: one at a time."""
    acc, tmp, cnt, lo, hi = promoted_open(acc, a_rows, b_cols, s, e, sak, sbk, STEP, IK, HWK, PROMO, RES_FIRST)
    if GROUPS > 0:
        G: tl.constexpr = PROMO * IK
        turn = GROUPS * G
        nb = (hi - lo) // turn
        for i in tl.range(0, nb, num_stages=NUM_STAGES):
            base = lo + i * turn
            for g in tl.static_range(GROUPS):
                a, b = load_turn(a_rows, b_cols, base + g * G, sak, sbk, G, IK, HWK)
                acc = acc + zero_started_dot(a, b, G, HWK)
        lo = lo + nb * turn
    return promoted_close(acc, tmp, cnt, a_rows, b_cols, lo, hi, e, sak, sbk, IK, HWK, PROMO, RES_FIRST)


@triton.jit
def chain_promoted_tma(
    acc, a_rows, b_cols, a_desc, b_desc, off_m, off_n, s, e, sak, sbk,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, PROMO: tl.constexpr, TURN: tl.constexpr,
    RES_FIRST: tl.constexpr, B_TRANS: tl.constexpr, NUM_STAGES: tl.constexpr, TAIL_TMA: tl.constexpr = False,
):  # fmt: skip
    """chain_promoted for fp8 inputs with the aligned body loaded by TMA, TURN elements (a whole
    number of promotion groups) per turn. Each turn is one dot with max_num_imprecise_acc =
    PROMO*IK: Triton's sm_90 lowering then runs every group's PROMO instructions into a
    zero-started partial accumulator and adds it to acc with one fp32 add, the same adds in the
    same order as chain_promoted, without a zero-started dot per group.

    TAIL_TMA (the caller's chain ends at the operands' K, e == K, and the residue goes last): the
    body's tail and the residue ride one more TMA turn, whose elements past K the copy engine
    fills with +0. The real instructions, their k order and the promotion points are those of the
    pointer path; the turn only appends all-zero wgmma k32 blocks to the residue's group (and, with
    GROUPS > 1, whole all-zero groups). On sm_90's fp8 block (NUMERICS.md: e_max over the products
    and c, terms truncated to 13 fraction bits of it, result RZ to e8m13) a block of +0 products
    returns its c unchanged: c is +0 or a previous block's e8m13 result, and that is a sum of e4m3
    products (each 0 or at least 2^-18) on a grid no finer than 2^-31, so c's exponent is far above
    the zero products' (-133) and its own truncation drops nothing. An all-zero group adds +0 to
    an accumulator that is never -0 (it starts at +0; exact cancellation gives +0)."""
    if TAIL_TMA and not RES_FIRST:  # (nothing goes before the body: it starts a group at s)
        return tma_turns(acc, a_desc, b_desc, off_m, off_n, s, tl.cdiv(e - s, TURN), TURN, IK, PROMO, B_TRANS,
                         NUM_STAGES, False)  # fmt: skip
    acc, tmp, cnt, lo, hi = promoted_open(acc, a_rows, b_cols, s, e, sak, sbk, STEP, IK, HWK, PROMO, RES_FIRST)
    nb = (hi - lo) // TURN
    acc = tma_turns(acc, a_desc, b_desc, off_m, off_n, lo, nb, TURN, IK, PROMO, B_TRANS, NUM_STAGES, False)
    lo = lo + nb * TURN
    return promoted_close(acc, tmp, cnt, a_rows, b_cols, lo, hi, e, sak, sbk, IK, HWK, PROMO, RES_FIRST)


@triton.jit
def chain(
    acc,
    a_rows,
    b_cols,
    s,
    e,
    sak,
    sbk,
    STEP: tl.constexpr,
    IK: tl.constexpr,
    HWK: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PROMO: tl.constexpr,
    GROUPS: tl.constexpr,
    RES_FIRST: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    if PROMO == 0:
        acc = chain_fast(acc, a_rows, b_cols, s, e, sak, sbk, STEP, IK, HWK, BLOCK_K, RES_FIRST, NUM_STAGES)
    else:
        acc = chain_promoted(
            acc, a_rows, b_cols, s, e, sak, sbk, STEP, IK, HWK, PROMO, GROUPS, RES_FIRST, NUM_STAGES
        )
    return acc


@triton.jit
def chain_routed(
    acc, a_rows, b_cols, a_desc, b_desc, off_m, off_n, s, e, sak, sbk,
    STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr, BLOCK_K: tl.constexpr, PROMO: tl.constexpr,
    GROUPS: tl.constexpr, RES_FIRST: tl.constexpr, USE_TMA: tl.constexpr, B_TRANS: tl.constexpr,
    NUM_STAGES: tl.constexpr, TAIL_TMA: tl.constexpr = False,
):  # fmt: skip
    """The chain over [s, e) by the body the launch picked (USE_TMA: whole turns by TMA for the
    tile at (off_m, off_n); else pointer loads): the same dots in the same order either way.
    TAIL_TMA: e is the operands' K (a whole-K chain), see chain_promoted_tma."""
    if USE_TMA and PROMO == 0:
        acc = chain_fast_tma(acc, a_rows, b_cols, a_desc, b_desc, off_m, off_n, s, e, sak, sbk,
                             STEP, IK, HWK, BLOCK_K, RES_FIRST, B_TRANS, NUM_STAGES)  # fmt: skip
    elif USE_TMA:
        TURN: tl.constexpr = GROUPS * PROMO * IK  # a TMA turn (single_pass.tma_k)
        acc = chain_promoted_tma(acc, a_rows, b_cols, a_desc, b_desc, off_m, off_n, s, e, sak, sbk,
                                 STEP, IK, HWK, PROMO, TURN, RES_FIRST, B_TRANS, NUM_STAGES, TAIL_TMA)  # fmt: skip
    else:
        acc = chain(acc, a_rows, b_cols, s, e, sak, sbk, STEP, IK, HWK, BLOCK_K, PROMO, GROUPS, RES_FIRST, NUM_STAGES)
    return acc


@triton.jit
def part_value(
    a_rows, b_cols, a_desc, b_desc, off_m, off_n, runs_ptr, r_lo, r_hi, sak, sbk,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STEP: tl.constexpr, IK: tl.constexpr, HWK: tl.constexpr,
    BLOCK_K: tl.constexpr, PROMO: tl.constexpr, GROUPS: tl.constexpr, RES_FIRST: tl.constexpr,
    HAS_INNER: tl.constexpr, USE_TMA: tl.constexpr, B_TRANS: tl.constexpr, NUM_STAGES: tl.constexpr,
    RUN_ALIGN: tl.constexpr = 1,
):  # fmt: skip
    """One level-0 part: its innermost chains (runs r_lo..r_hi of the table), each from +0,
    summed in order from +0 in fp32 when there is an inner level. RUN_ALIGN divides every run
    bound (TensorCorePlan.run_align): a codegen hint only."""
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(r_lo, r_hi):
        s = tl.multiple_of(tl.load(runs_ptr + 2 * r), RUN_ALIGN)
        e = tl.multiple_of(tl.load(runs_ptr + 2 * r + 1), RUN_ALIGN)
        sub = chain_routed(
            tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), a_rows, b_cols, a_desc, b_desc, off_m, off_n, s, e,
            sak, sbk, STEP, IK, HWK, BLOCK_K, PROMO, GROUPS, RES_FIRST, USE_TMA, B_TRANS, NUM_STAGES,
        )  # fmt: skip
        if HAS_INNER:
            total = total + sub
        else:
            total = sub
    return total


@triton.jit
def tile_coords(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped (GROUP_M) tile order: a speed knob, it only picks which tile a program owns."""
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    group = pid // width
    first_m = group * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    return pid_m, pid_n
