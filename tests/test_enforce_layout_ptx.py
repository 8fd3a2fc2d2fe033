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
