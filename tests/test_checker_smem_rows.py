"""Shared-memory reads taken relative to the reader (fixbits/checker/thread_roots.py, read_at):
a block that reduces two rows through one shared window (each row's warp partials in its own
slots, a thread bit picking the row) reaches the signature of one row per block, as the block
of one row does; a read that takes another row's slots, races with the stores (no barrier) or
sees a later store stays apart. Also the walk's unsigned comparison of two small thread forms
(fixbits/checker/ptx/walk.py, _small_thread_form), which decides such reads' store predicates."""

from __future__ import annotations

import pytest
from test_checker_helpers import smem_head

from fixbits.checker.api import signature
from fixbits.checker.node import Node
from fixbits.checker.ptx.parse import parse_ptx
from fixbits.checker.ptx.walk import PTXWalk

pytestmark = pytest.mark.unit

SLOT = 8  # bytes of one row's slots (two warps, one 4-byte partial each)


def rows_kernel(
    rows: int,
    *,
    read_slot: tuple[int, ...] | None = None,
    barrier: bool = True,
    late_store: bool = False,
    racing_store: bool = False,
) -> str:
    """Two warps (64 threads) sum ``rows`` rows of 64 floats per block: row j's warp w partial
    (a butterfly over the warp's lanes) goes to shared word SLOT*j + 4w, and after a barrier row
    j is the sum of the two words at SLOT*read_slot[j]. One row: thread 0 stores y[c]; two rows:
    threads 0 and 1 store y[2c + tx0] = select(tx0 == 0, row 0, row 1). ``late_store``: after the
    barrier thread 0 stores 1.0 over row 0's first word, then a second barrier. ``racing_store``:
    after the reads, with no barrier between, thread 1 stores 1.0 over row 0's first word
    (another thread may still be about to read it)."""
    read_slot = tuple(range(rows)) if read_slot is None else read_slot
    out = [
        smem_head(64),
        f"\tmul.lo.s32 %r4, %r3, {rows};",
        "\tand.b32 %r5, %r2, 31;",
        "\tsetp.eq.b32 %p1, %r5, 0;",
    ]
    out += [
        "\tshr.u32 %r6, %r2, 5;",
        "\tshl.b32 %r7, %r6, 2;",
        "\tmov.b32 %r8, global_smem;",
        "\tadd.s32 %r9, %r8, %r7;",
    ]
    out += ["\tmul.wide.u32 %rd3, %r2, 4;"]
    r = 20
    for j in range(rows):
        out += [f"\tadd.s32 %r{r}, %r4, {j};", f"\tmul.wide.u32 %rd{4 + 3 * j}, %r{r}, 256;"]
        out += [
            f"\tadd.s64 %rd{5 + 3 * j}, %rd1, %rd{4 + 3 * j};",
            f"\tadd.s64 %rd{6 + 3 * j}, %rd{5 + 3 * j}, %rd3;",
        ]
        out += [f"\tld.global.b32 %r{r + 1}, [%rd{6 + 3 * j}];"]
        v = r + 1
        for k, lane in enumerate((16, 8, 4, 2, 1)):
            out += [f"\tshfl.sync.bfly.b32 %r{r + 2 + 2 * k}, %r{v}, {lane}, 31, -1;"]
            out += [f"\tadd.f32 %r{r + 3 + 2 * k}, %r{v}, %r{r + 2 + 2 * k};"]
            v = r + 3 + 2 * k
        out += [f"\t@%p1 st.shared.b32 [%r9+{SLOT * j}], %r{v};"]
        r += 20
    if barrier:
        out += ["\tbar.sync 0;"]
    if late_store:
        out += [
            "\tsetp.eq.b32 %p2, %r2, 0;",
            "\tmov.b32 %r150, 0f3F800000;",
            "\t@%p2 st.shared.b32 [global_smem], %r150;",
        ]
        out += ["\tbar.sync 0;"]
    for j in range(rows):
        s = SLOT * read_slot[j]
        out += [
            f"\tld.shared.b32 %r{160 + 3 * j}, [global_smem+{s}];",
            f"\tld.shared.b32 %r{161 + 3 * j}, [global_smem+{s + 4}];",
        ]
        out += [f"\tadd.f32 %r{162 + 3 * j}, %r{160 + 3 * j}, %r{161 + 3 * j};"]
    if racing_store:
        out += ["\tsetp.eq.b32 %p6, %r2, 1;", "\tmov.b32 %r151, 0f3F800000;"]
        out += ["\t@%p6 st.shared.b32 [global_smem], %r151;"]
    if rows == 1:
        out += [
            "\tsetp.eq.b32 %p3, %r2, 0;",
            "\tmul.wide.u32 %rd30, %r3, 4;",
            "\tadd.s64 %rd31, %rd2, %rd30;",
        ]
        out += ["\t@%p3 st.global.b32 [%rd31], %r162;"]
    else:
        out += [
            "\tand.b32 %r180, %r2, 1;",
            "\tsetp.eq.b32 %p4, %r180, 0;",
            "\tselp.b32 %r181, %r162, %r165, %p4;",
        ]
        out += [
            "\tshl.b32 %r182, %r3, 1;",
            "\tor.b32 %r183, %r182, %r180;",
            "\tmul.wide.u32 %rd30, %r183, 4;",
        ]
        out += [
            "\tadd.s64 %rd31, %rd2, %rd30;",
            "\tsetp.lt.u32 %p5, %r2, 2;",
            "\t@%p5 st.global.b32 [%rd31], %r181;",
        ]
    out += ["\tret;", "}", ""]
    return "\n".join(out)


def sig(text: str) -> tuple[str, bool]:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest, s.physical


def test_two_rows_through_one_window_meet_one_row_per_block() -> None:
    """Row 1's slots sit SLOT bytes above row 0's: read relative to the reader, its exchange
    is row 0's (and the block of one row's), so the root is relative and the classes meet."""
    one, phys1 = sig(rows_kernel(1))
    two, phys2 = sig(rows_kernel(2))
    assert not phys1 and not phys2
    assert one == two


def test_a_row_reading_another_rows_slots_stays_apart() -> None:
    """Row 1 sums row 0's partials (it stores row 2c's sum at y[2c + 1]): not the same bytes."""
    assert sig(rows_kernel(2, read_slot=(0, 0)))[0] != sig(rows_kernel(1))[0]


def test_a_read_with_no_barrier_after_the_stores_stays_apart() -> None:
    """Without the barrier the read may see the slots before the other warp wrote them."""
    assert sig(rows_kernel(1, barrier=False))[0] != sig(rows_kernel(1))[0]
    assert sig(rows_kernel(2, barrier=False))[0] != sig(rows_kernel(2))[0]


def test_a_later_store_over_the_slot_is_what_the_read_sees() -> None:
    """Thread 0 overwrites row 0's first word with 1.0 behind a barrier: the read takes that
    store (the earlier partial is hidden), which is another value than the row's sum."""
    late, phys = sig(rows_kernel(1, late_store=True))
    assert not phys
    assert late != sig(rows_kernel(1))[0]


def _setp_attrs(body: str) -> list[tuple]:
    """The cmp attributes of every predicate register a one-warp kernel's walk ends with (the
    body runs to the closing brace: no ret, so the registers are still there)."""
    (entry,) = parse_ptx(smem_head(32) + body + "\n}\n")
    w = PTXWalk(entry, False)
    w.run()
    assert w.env is not None
    out = []
    for reg in sorted(r for r in w.env if r.startswith("%p")):
        n: Node = w.env[reg]
        while n.kind == "not":
            n = n.kids[0]
        out.append(n.attrs)
    return out


def test_unsigned_compare_of_small_thread_forms_is_the_integer_compare() -> None:
    """tid & 31 < 8 (both in [0, 2^16) at every thread) is walked in the signed canonical form,
    which per-thread evaluation decides; tid - 5 < 8 unsigned (negative at threads 0..4: the
    register wraps there) keeps the unsigned form, which nothing decides."""
    small = _setp_attrs("\tand.b32 %r10, %r2, 31;\n\tsetp.lt.u32 %p1, %r10, 8;")
    wraps = _setp_attrs("\tsub.s32 %r10, %r2, 5;\n\tsetp.lt.u32 %p1, %r10, 8;")
    assert small == [("le", "s")]
    assert wraps == [("le", "u")]


def test_a_store_racing_with_a_read_keeps_the_reads_whole() -> None:
    """Thread 1 overwrites a word other threads read in the same barrier interval: whether they
    saw it is timing, and no history (the stores before each read) shows it. The walk notes the
    write-after-read race and no read is taken apart: the root stays physical, apart from the
    race-free kernel (taking the reads apart would have met it)."""
    racing, phys = sig(rows_kernel(1, racing_store=True))
    assert phys
    assert racing != sig(rows_kernel(1))[0]
