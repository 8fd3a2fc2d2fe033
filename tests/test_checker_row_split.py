"""The block / thread split at a row's bit (session 31: coord_split's narrower split,
coord_split.row_bits, maxsets.normal_set). A block of several rows named each later row "the
block's start plus a pitch", so its roots missed a one-row block's; split at the row pitch's
bit, every row is "its own start and the column". Node-level cases for the split, its
refusals and the set's normal form; real Triton PTX of Inductor's persistent softmax for the
merge the H200 measured."""

from __future__ import annotations

import pytest

from fixbits.checker.coord_split import row_bits, split_coordinate, split_group
from fixbits.checker.forms import Poly
from fixbits.checker.maxsets import normal_set, set_node
from fixbits.checker.node import Node, Root, int_node

CTA = Poly.sym("ctaid.x")


def _cols(base: int) -> Poly:
    """A row's column offsets in bytes: 32 lanes of 16 bytes from ``base``."""
    out = Poly.const(base)
    for i in range(5):
        out = out + Poly.sym(f"tx{i}").scale(16 << i)
    return out


def test_the_second_row_of_a_block_splits_at_its_row_bit():
    """Two rows of 4,096 bytes per block: the default split is at the block's bit 13 with the
    row in the thread part; at bit 12 the row's start is the block part."""
    second = CTA.scale(8192) + _cols(4096)
    default = split_coordinate(second)
    assert default is not None and (default.k, default.const) == (13, 0)
    at12 = split_coordinate(second, 12)
    assert at12 is not None and (at12.k, at12.const) == (12, 4096)
    assert at12.thread == _cols(0) and at12.block == CTA.scale(8192)
    # the row's start (elements of 4 bytes) is the block part alone, with no constant
    got = split_group(CTA.scale(2048) + Poly.const(1024), at12)
    assert got == Poly.sym("OUT[|blk12]/4")
    assert split_group(CTA.scale(2048) + Poly.const(1024), default) == Poly.sym("OUT[|blk13]/4") + Poly.const(1024)


def test_a_split_bit_the_thread_part_straddles_is_not_taken():
    """Columns that cross a 4,096-byte boundary have no split at bit 12: the default stands,
    and a bit above the block's is never taken."""
    straddle = CTA.scale(8192) + _cols(4096 - 256)
    got = split_coordinate(straddle, 12)
    assert got is not None and (got.k, got.const) == (13, 0)
    assert split_coordinate(CTA.scale(8192) + _cols(0), 14) == split_coordinate(CTA.scale(8192) + _cols(0))
    assert split_coordinate(CTA.scale(8192) + _cols(0) + Poly.sym("tx5").scale(8192)) is None


def test_an_outputs_row_bit_is_the_pitch_of_a_later_rows_start():
    """A root whose tree reads its row from 1024 + 2048 ctaid (elements) while its address's
    block part is 8192 ctaid (bytes) has its row start 4,096 bytes into the block: bit 12."""
    leaf = Node("leaf", ("global", 4, "p:0"))
    row1 = Node("balanced", (("add", ("rn.f32",)), 10), (leaf, int_node(CTA.scale(2048) + Poly.const(1024))))
    row0 = Node("balanced", (("add", ("rn.f32",)), 10), (leaf, int_node(CTA.scale(2048))))
    addr = int_node(Poly.sym("p:1") + CTA.scale(8192) + _cols(0))
    assert row_bits([Root("p:1", 4, addr, row0, False)]) == {}
    assert row_bits([Root("p:1", 4, addr, row0, False), Root("p:1", 4, addr, row1, False)]) == {"p:1": 12}


def test_a_sets_base_constant_moves_into_its_runs():
    """The same elements with the constant in the base or in the runs are one node."""
    leaf = Node("leaf", ("global", 4, "p:0"))
    base = Poly.sym("OUT[|blk12]/4")
    tmpl = {leaf.digest: leaf}
    plain = set_node(("max",), [(leaf.digest, base + Poly.const(i)) for i in range(8)], tmpl)
    shifted = Node("selset", ("max",), (Node("elems", (((3, 8),),), (leaf, int_node(base - Poly.const(3)))),))
    assert normal_set(shifted).digest == plain.digest
    assert normal_set(plain) is plain


def test_real_triton_inductor_softmax_rows_meet_a_one_row_block(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the Inductor persistent softmax with one warp: the H200 measured
    pinned XBLOCK 1, 2 and 4 as one class. Under the launch they meet (each row split at its
    own start); free XBLOCK 1 with one and two warps stay apart, as their bytes do."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("inductor_per_softmax", "fp32", monkeypatch, tmp_path)
    pinned, _ = corpus_digests(mod, fam.module, inputs, shape, "fp32", True, [(("XBLOCK", x),) for x in (1, 2, 4)], 1)
    assert len(set(pinned)) == 1
    free = [corpus_digests(mod, fam.module, inputs, shape, "fp32", False, [(("XBLOCK", 1),)], w)[0][0] for w in (1, 2)]
    assert free[0] != free[1]
