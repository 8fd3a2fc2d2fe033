"""A slot every thread of the block writes with one and the same tree (thread_roots._same_at),
and ``bar.warp.sync`` as the barrier of a one-warp block (PTXWalk._warp_is_block).

Triton's multi-row reductions (row_sum BLOCK_M = 4, 8) finish with every thread writing the
block's row totals to one shared window (``st.shared.v4``), a barrier, and a read that hands
each thread its row's total: after a butterfly all-reduce every lane holds the same tree, so the
read is that tree whoever wrote last, and the block meets the signature of one row per block.
With one warp the barrier is ``bar.warp.sync -1``. Negatives: lanes that write different trees
(the all-reduce stopped early), no barrier, a partial lane mask, a block of two warps.
"""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_entry

from fixbits.checker.api import signature

pytestmark = pytest.mark.unit

FULL = (16, 8, 4, 2, 1)


def _allreduce(src: int, dst0: int, offsets: tuple[int, ...]) -> tuple[list[str], int]:
    """A butterfly over ``offsets`` from %r<src>; registers from %r<dst0> on; (lines, result)."""
    out, cur, reg = [], src, dst0
    for off in offsets:
        out += [
            f"\tshfl.sync.bfly.b32 %r{reg}, %r{cur}, {off}, 31, -1;",
            f"\tadd.f32 %r{reg + 1}, %r{cur}, %r{reg};",
        ]
        cur, reg = reg + 1, reg + 2
    return out, cur


def one_row() -> str:
    """One warp sums row ctaid (32 floats); thread 0 stores y[ctaid]."""
    lines = [
        ptx_entry(["ptr", "ptr"], 32),
        "\tmov.u32 %r2, %tid.x;",
        "\tmov.u32 %r3, %ctaid.x;",
        "\tshl.b32 %r4, %r3, 5;",
        "\tadd.s32 %r5, %r4, %r2;",
        "\tmul.wide.u32 %rd3, %r5, 4;",
        "\tadd.s64 %rd4, %rd1, %rd3;",
        "\tld.global.b32 %r10, [%rd4];",
    ]
    body, total = _allreduce(10, 20, FULL)
    lines += body
    lines += [
        "\tsetp.eq.s32 %p1, %r2, 0;",
        "\tmul.wide.u32 %rd5, %r3, 4;",
        "\tadd.s64 %rd6, %rd2, %rd5;",
        f"\t@%p1 st.global.b32 [%rd6], %r{total};",
        "\tret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def two_rows(
    *,
    barrier: str = "\tbar.warp.sync -1;",
    offsets: tuple[int, ...] = FULL,
    threads: int = 32,
    writer: str = "",
) -> str:
    """One warp sums rows 2c and 2c + 1; every thread stores both totals to the window
    (``st.shared.v2``), then ``barrier``, then thread t reads word t & 1 and threads 0, 1 store
    y[2c + t]. ``writer``: a predicate register set up before the store, only those lanes store
    ("lane0": thread 0; "data": lanes whose first element is positive)."""
    lines = [
        ptx_entry(["ptr", "ptr"], threads),
        "\tmov.u32 %r2, %tid.x;",
        "\tmov.u32 %r3, %ctaid.x;",
        "\tand.b32 %r6, %r2, 31;",
        "\tshl.b32 %r4, %r3, 6;",
        "\tadd.s32 %r5, %r4, %r6;",
        "\tmul.wide.u32 %rd3, %r5, 4;",
        "\tadd.s64 %rd4, %rd1, %rd3;",
        "\tld.global.b32 %r10, [%rd4];",
        "\tld.global.b32 %r11, [%rd4+128];",
    ]
    b0, t0 = _allreduce(10, 20, offsets)
    b1, t1 = _allreduce(11, 40, offsets)
    lines += b0 + b1
    lines += [
        "\tmov.b32 %r60, global_smem;",
        *_writer_pred(writer),
        f"\t{'@%p3 ' if writer else ''}st.shared.v2.b32 [global_smem], {{%r{t0}, %r{t1}}};",
        barrier,
        "\tand.b32 %r61, %r2, 1;",
        "\tshl.b32 %r62, %r61, 2;",
        "\tadd.s32 %r63, %r60, %r62;",
        "\tld.shared.b32 %r64, [%r63];",
        "\tshl.b32 %r65, %r3, 1;",
        "\tadd.s32 %r66, %r65, %r61;",
        "\tsetp.lt.u32 %p1, %r2, 2;",
        "\tmul.wide.u32 %rd5, %r66, 4;",
        "\tadd.s64 %rd6, %rd2, %rd5;",
        "\t@%p1 st.global.b32 [%rd6], %r64;",
        "\tret;",
        "}",
    ]
    text = "\n".join(lines) + "\n"
    # the window's declaration goes before the entry
    return text.replace(
        ".visible .entry k(", ".extern .shared .align 16 .b8 global_smem[];\n.visible .entry k(", 1
    )


def _writer_pred(writer: str) -> list[str]:
    if writer == "lane0":
        return ["\tsetp.eq.s32 %p3, %r2, 0;"]
    if writer == "data":
        return ["\tsetp.gt.f32 %p3, %r10, 0f00000000;"]
    return []


def digest(text: str) -> str:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest


@pytest.mark.parametrize("barrier", ["\tbar.warp.sync -1;", "\tbar.sync 0;"])
def test_rows_handed_out_through_one_window_meet_one_row_per_block(barrier: str) -> None:
    assert digest(two_rows(barrier=barrier)) == digest(one_row())


def test_lanes_that_write_different_trees_stay_apart() -> None:
    # the all-reduce stops before offset 1: lanes 2k and 2k + 1 write different partial sums
    part = two_rows(offsets=(16, 8, 4, 2))
    assert digest(part) != digest(one_row())
    assert digest(part) != digest(two_rows())
    assert digest(part) != digest(two_rows(offsets=(16, 8, 4, 1)))


@pytest.mark.parametrize("barrier", ["", "\tbar.warp.sync 0xffff;", "\t@%p2 bar.sync 0;"])
def test_a_read_not_ordered_after_every_store_stays_apart(barrier: str) -> None:
    text = two_rows(barrier=barrier)
    if "%p2" in barrier:
        text = text.replace(
            "\tmov.b32 %r60, global_smem;", "\tsetp.eq.s32 %p2, %r2, 0;\n\tmov.b32 %r60, global_smem;"
        )
    assert digest(text) != digest(one_row())
    assert digest(text) != digest(two_rows())


def test_warp_sync_is_no_block_barrier_in_a_block_of_two_warps() -> None:
    # the same code in a 64-thread block: bar.warp.sync orders one warp only, and the second
    # warp's lanes write the same slots
    assert digest(two_rows(threads=64)) != digest(two_rows(threads=64, barrier="\tbar.sync 0;"))


def test_one_lane_writing_the_slot_is_read_as_that_lane_value() -> None:
    # only thread 0 stores: its total is what every thread reads, a partial is not
    assert digest(two_rows(writer="lane0")) == digest(one_row())
    assert digest(two_rows(writer="lane0", offsets=(16, 8, 4, 2))) != digest(one_row())


def test_writers_picked_by_data_stay_apart() -> None:
    # which lanes store is not decided per thread: the read keeps its history
    assert digest(two_rows(writer="data")) != digest(one_row())
    assert digest(two_rows(writer="data")) != digest(two_rows())
