"""Why column and mid-axis sums were slow pinned, and that the layout variants fix it (CPU only:
sm_90 PTX compiled from the corpus modules' own launch(), so JIT specialisation is as on a GPU).

The automatic rewrite folds bit 0 of the reduced row index first; the free kernel's load layout
(columns over lanes, 16-byte vectors) puts the low row bits in lanes and warps, so each of the
first tree levels is a shuffle or a shared-memory round over every register value. A variant
loads the rows as (R_HI, R_LO) so the low bits are registers: the same tree, and at the free
kernel's best warp count (2, measured on the H200) the same shuffle and shared-memory traffic.
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from fixbits.corpus.aot import PtxCounts, compile_launch  # noqa: E402
from fixbits.corpus.common import Config  # noqa: E402
from fixbits.corpus.registry import entry  # noqa: E402

CASES = [("col_sum", "fp16", (("BLOCK_N", 32),), (("BLOCK_N", 32),)),
         ("mid_axis_sum", "fp32", (("BLOCK_B", 1), ("BLOCK_C", 64)), (("BLOCK_C", 64),))]


def _counts(name: str, dtype: str, blocks: tuple, how: bool | str) -> PtxCounts:
    (ck,) = compile_launch(entry(name), dtype, Config(blocks, 2, 1), how)
    return PtxCounts.of(ck.ptx, ck.ttgir)


@pytest.mark.parametrize(("name", "dtype", "free_blocks", "var_blocks"), CASES, ids=[c[0] for c in CASES])
def test_rows_in_regs_variant_costs_what_free_order_costs(name, dtype, free_blocks, var_blocks) -> None:
    free = _counts(name, dtype, free_blocks, False)
    rewrite = _counts(name, dtype, free_blocks, True)
    variant = _counts(name, dtype, var_blocks, "rows_in_regs")
    # the rewrite pays a shuffle per register value per lane level: the measured slowdown
    assert rewrite.shfl >= 4 * free.shfl and rewrite.st_shared >= 4 * free.st_shared, (free, rewrite)
    # the variant: same loads, no more shuffles or shared-memory traffic than free order
    assert variant.ld_global == free.ld_global, (free, variant)
    assert variant.shfl <= free.shfl and variant.st_shared <= free.st_shared, (free, variant)
    assert variant.bar <= free.bar, (free, variant)


def _launch_counts(name: str, dtype: str, blocks: tuple, warps: int, how: bool | str, stages: int = 1) -> PtxCounts:
    from collections import Counter

    tot: Counter = Counter()
    for ck in compile_launch(entry(name), dtype, Config(blocks, warps, stages), how):
        tot.update(vars(PtxCounts.of(ck.ptx, ck.ttgir)))
    return PtxCounts(**tot)


# (kernel, dtype, free blocks at the H200's best free config, its warps, variant, variant blocks, warps, stages)
SPLIT_CASES = [
    ("row_sum_unaligned", "fp32", (("BLOCK_M", 1), ("N_MULT", 1)), 4, "split_chunks", (("R_LO", 4),), 8, 1),
    ("layernorm_fwd", "bf16", (("N_MULT", 1),), 4, "thread_chunks", (), 4, 1),
    ("layernorm_fwd", "bf16", (("N_MULT", 1),), 4, "split_top", (), 8, 1),
]


@pytest.mark.parametrize(("name", "dtype", "free_blocks", "free_w", "variant", "var_blocks", "var_w", "stages"),
                         SPLIT_CASES, ids=[f"{c[0]}-{c[4]}" for c in SPLIT_CASES])
def test_split_variants_cost_no_more_than_free_order(name, dtype, free_blocks, free_w, variant, var_blocks, var_w,
                                                     stages) -> None:
    """Low bits in registers, then lanes, and every warp level in one shared-memory round
    (tree_sum_split): no more shuffles, shared stores or barriers than tl.sum at its best config."""
    free = _launch_counts(name, dtype, free_blocks, free_w, False, stages)
    var = _launch_counts(name, dtype, var_blocks, var_w, variant, stages)
    assert var.shfl <= free.shfl and var.st_shared <= free.st_shared and var.bar <= free.bar, (free, var)


def test_gemm_colsum_rows_in_regs_epilogue_shuffles_like_free_order() -> None:
    """The wgmma accumulator keeps tile-row bits 3 and 6 in registers (128x128, 4 warps): with
    them as the low logical bits the epilogue's lane levels shuffle what tl.sum shuffles."""
    blocks = (("BLOCK_M", 128), ("BLOCK_N", 128))
    free = _launch_counts("gemm_colsum", "fp16", blocks, 4, False, 3)
    rewrite = _launch_counts("gemm_colsum", "fp16", blocks, 4, True, 3)
    var = _launch_counts("gemm_colsum", "fp16", blocks, 4, "rows_in_regs", 3)
    assert rewrite.shfl >= 3 * free.shfl, (free, rewrite)
    assert var.shfl <= free.shfl + 8 and var.st_shared < rewrite.st_shared, (free, var, rewrite)
    # and with the two warp levels in one shared-memory round: no more than tl.sum at all
    split = _launch_counts("gemm_colsum", "fp16", blocks, 4, "split_warps", 3)
    assert split.shfl <= free.shfl and split.st_shared <= free.st_shared and split.bar <= free.bar, (free, split)


@pytest.mark.parametrize(("block_m", "warps"), [(64, 4), (64, 8), (128, 4), (128, 8)])
def test_gemm_acc_row_bits_match_the_compiled_accumulator_layout(block_m: int, warps: int) -> None:
    """acc_row_bits (which tile-row bits the sm_90 accumulator keeps in registers / warps) read
    against the linear layout Triton gives the epilogue's (2,)*log2(BLOCK_M) + (BLOCK_N,) view."""
    import re

    from fixbits.corpus.gemm_colsum import acc_row_bits

    (ck, *_) = compile_launch(entry("gemm_colsum"), "fp16", Config((("BLOCK_M", block_m), ("BLOCK_N", 64)), warps, 3),
                              "split_warps")
    lin = next(ln for ln in ck.ttgir.splitlines() if ln.startswith("#linear = "))
    log_m = block_m.bit_length() - 1

    def row_bits(kind: str) -> set[int]:
        body = re.search(kind + r" = \[(.*?)\]\]", lin)
        bases = re.findall(r"\[([\d, ]+)\]", body.group(1) + "]") if body else []
        out = set()
        for b in bases:
            v = [int(t) for t in b.split(",")]
            out |= {log_m - 1 - d for d in range(log_m) if v[d]}
        return out

    lo0, lo1, warp_bits = acc_row_bits(block_m, warps)
    assert row_bits("register") == {b for b in (lo0, lo1) if b >= 0}, lin
    assert len(row_bits("warp")) == warp_bits and row_bits("lane") == {0, 1, 2}, lin
