"""Launch-decided bounds (session 29): a balanced span whose template reads index bounds is
written by the parts of its range where the launch decides them (fixbits/checker/bound_split.py,
balanced.Collapser._by_bounds); block-level predicates the launch decides are constants
(ptx/walk.py op_setp, walk.mk_pred_join); a row start rewritten with a constant is normalised
(leaf_pred.normal_ixform). Node-level cases for each rule, real Triton PTX for the merges."""

from __future__ import annotations

import pytest

from fixbits.checker.balanced import Collapser, Span
from fixbits.checker.bound_split import decided, pred_on
from fixbits.checker.forms import Poly
from fixbits.checker.leaf_pred import normal_ixform
from fixbits.checker.node import Node, int_node
from fixbits.checker.walk import TRUE, mk_not, mk_pred_join

R = Poly.sym("ctaid.x").scale(768)
L = Node("leaf", ("global", 4, "p:0"))
ZERO = int_node(Poly.const(0))
ADD = ("add", ("rn.f32",))


def _ix(g: int, e: int) -> Node:
    return Node("cmp", ("le", "s"), (Node("ixform", (g, 1), (int_node(R), int_node(Poly.const(e)))), ZERO))


# column < 768 of a 1024 tile, as Inductor's tl.where(r0_mask, masked load, 0) reads it
TPL = Node("select", (), (_ix(4, -767), Node("masked", (), (L, ZERO, _ix(1, -767))), ZERO))


def test_a_bound_is_decided_only_on_a_range_it_holds_or_fails_on():
    assert pred_on(_ix(4, -767), R + Poly.const(512), 8) is True
    assert pred_on(_ix(4, -767), R + Poly.const(768), 8) is False
    assert pred_on(_ix(4, -767), R + Poly.const(512), 9) is None
    # a thread bit in the start widens the range to every thread's
    assert pred_on(_ix(1, -767), R + Poly.const(512) + Poly.sym("tx0").scale(256), 8) is None
    assert decided(TPL, R + Poly.const(512), 8, {}) == (L, False)
    assert decided(TPL, R + Poly.const(768), 8, {}) == (ZERO, False)
    assert decided(TPL, R + Poly.const(512), 9, {})[1] is True


def test_a_straddling_span_is_its_decided_part_under_the_marker():
    col = Collapser(pads=True)
    got = col._by_bounds(TPL, R + Poly.const(512), 9, ADD)
    assert got == Span(L, 8, R + Poly.const(512), ADD, True)
    # the node: canon(the tree over the 256 columns that exist)
    node = col._balanced_node(Span(TPL, 9, R + Poly.const(512), ADD))
    assert node.kind == "canon" and node.kids[0].attrs == (ADD, 8)


def test_padding_halves_fold_only_under_an_add_that_rounds_to_nearest():
    col = Collapser(pads=True)
    assert col._by_bounds(TPL, R + Poly.const(512), 9, ("max", ("f32",))) is None
    assert col._by_bounds(TPL, R + Poly.const(512), 9, ("add", ("rz.f32",))) is None
    # a bound that splits a range of height 1 has no node for its single elements
    assert col._by_bounds(TPL, R + Poly.const(767), 1, ADD) is None


def test_a_split_that_leaves_two_trees_is_their_sum():
    # columns [0, 1024) of a row of 640: [0, 512) whole, [512, 640) whole, the rest padding
    tpl = Node("select", (), (_ix(4, -639), L, ZERO))
    got = Collapser(pads=True)._by_bounds(tpl, R, 10, ADD)
    assert isinstance(got, Node) and got.kind == "canon"
    heights = sorted(k.attrs[1] for k in got.kids[0].kids)
    assert heights == [7, 9]


def test_a_row_start_with_a_constant_is_normalised():
    a = Node("ixform", (4, 1), (int_node(R - Poly.const(768)), int_node(Poly.const(-1535))))
    b = Node("ixform", (4, 1), (int_node(R), int_node(Poly.const(-767))))
    assert normal_ixform(a) == b
    # floor_4(x - 6) is not floor_4(x) - 6: left as it is
    c = Node("ixform", (4, 1), (int_node(R - Poly.const(6)), int_node(Poly.const(-1535))))
    assert normal_ixform(c) is c


def test_constant_predicates_fold_in_and_or():
    x = Node("cmp", ("le", "s"), (int_node(Poly.sym("tx0")), ZERO))
    false = mk_not(TRUE)
    assert mk_pred_join("and", (TRUE, x)) == x
    assert mk_pred_join("and", (false, x)) == false
    assert mk_pred_join("or", (TRUE, x)) == TRUE
    assert mk_pred_join("or", (false, x)) == x
    assert mk_pred_join("and", (x, x)).kind == "and"


def _per_sum_digests(monkeypatch, tmp_path, pinned: bool, cfgs: list[tuple[int, int]]) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("inductor_per_sum", "fp32", monkeypatch, tmp_path)
    spec, plain = [], []
    for xb, w in cfgs:
        s, p = corpus_digests(mod, fam.module, inputs, shape, "fp32", pinned, [(("XBLOCK", xb),)], num_warps=w)
        spec += s
        plain += p
    return spec, plain


def test_real_triton_inductor_per_sum_meets_across_rows_per_block_and_warps(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the Inductor persistent row sum (N = 768 in a 1,024 tile),
    pinned order: the H200 measured XBLOCK 1 and 2 with 2 and 4 warps as one class. Under the
    launch they meet (the rows' masks decided, the straddling span split); unspecialised,
    XBLOCK 2 stays physical and apart."""
    pytest.importorskip("triton")
    cfgs = [(1, 2), (1, 4), (2, 2)]
    spec, plain = _per_sum_digests(monkeypatch, tmp_path, True, cfgs)
    assert spec[0] == spec[1] == spec[2]
    assert plain[2] not in (plain[0], plain[1])
    free, _ = _per_sum_digests(monkeypatch, tmp_path, False, [(1, 2), (1, 4)])
    assert free[0] != free[1]  # (the free order's tree follows the warps: its bytes do too)
