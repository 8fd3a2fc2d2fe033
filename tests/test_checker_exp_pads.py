"""A launch-specialised softmax: masked loads lifted to plain ones where the launch proves them
true, exp(-inf - max) padding read as +0 where the stored value is NaN anyway in the one event
where it is not +0 (fixbits/checker/exp_pads.py, balanced.Collapser.licensed), and the per-vector
mask written per element (leaf_pred.index_bound). Real Triton PTX for the merges, node-level
cases for what must not fold."""

from __future__ import annotations

import pytest

from fixbits.checker.exp_pads import _is_neg_inf, _strict_sub, pad_term
from fixbits.checker.forms import Poly
from fixbits.checker.leaf_pred import index_bound
from fixbits.checker.node import Node, int_node

C = int_node(Poly.const(0x3FB8AA3B))  # log2(e)
NEG_INF = int_node(Poly.const(0xFF800000 - (1 << 32)))  # as the walk writes it
M = Node("selset", ("max", ("f32",)), (Node("elems", (((0, 8),),), (Node("leaf", ("global", 4, "p:0")), int_node(Poly.sym("ctaid.x")))),))  # fmt: skip


def exp_of(x: Node, mul: str = "f32", ex2: str = "approx.f32", c: Node = C) -> Node:
    return Node("ex2", (ex2,), (Node("mul", (mul,), (c, Node("sub", ("f32",), (x, M)))),))


def test_the_padding_term_is_exp_of_minus_inf_minus_the_max():
    assert pad_term(exp_of(NEG_INF), M.digest)
    widened = Node("cvt", ("f32.bf16",), (int_node(Poly.const(0xFF80)),))
    assert _is_neg_inf(widened) and pad_term(exp_of(widened), M.digest)
    assert not pad_term(exp_of(int_node(Poly.const(0))), M.digest)  # +0 - M is no padding
    assert not pad_term(exp_of(NEG_INF, mul="sat.f32"), M.digest)  # -inf clamps to 0: 2^0 = 1
    assert not pad_term(exp_of(NEG_INF, c=int_node(Poly.const(0xBF800000 - (1 << 32)))), M.digest)  # c < 0
    assert not pad_term(exp_of(NEG_INF), b"another max")


def test_the_stored_value_must_reach_its_element_through_nan_propagating_arithmetic():
    x = Node("load", ("global", 4), (int_node(Poly.sym("p:0") + Poly.sym("tx0").scale(4)),))
    e = exp_of(x)
    d = Node("add", ("f32",), (e, exp_of(NEG_INF)))
    assert _strict_sub(Node("div", ("full.f32",), (e, d)), set()) == (x, M)
    # a select (or a max) may drop the NaN: no element is proven to make the value NaN
    p = Node("cmp", ("le", "s"), (int_node(Poly.sym("tx0")), int_node(Poly.const(0))))
    assert _strict_sub(Node("select", (), (p, e, d)), set()) is None
    assert _strict_sub(Node("max", ("f32",), (e, d)), set()) is None
    # a conversion to an integer maps NaN to a number
    assert _strict_sub(Node("cvt", ("rzi.s32.f32",), (e,)), set()) is None


def _cmp_lt(q: Poly, bound: int) -> Node:
    """The walk's ``q < bound`` (setp.lt.s32 with a constant): q - bound + 1 <= 0."""
    return Node("cmp", ("le", "s"), (int_node(q - Poly.const(bound - 1)), int_node(Poly.const(0))))


def test_a_per_vector_mask_is_written_per_element_when_the_bound_is_a_whole_vector():
    # thread t holds columns 4t .. 4t+3 of the row at R; Triton masks the vector by column 4t
    t = Poly.sym("tx0").scale(4) + Poly.sym("tx1").scale(8)
    R = Poly.sym("ctaid.x").scale(2000)
    for j in range(4):
        r = index_bound(_cmp_lt(t, 2000), R + t + Poly.const(j))
        assert r is not None and r.kids[0].attrs == (1, 1)
        assert r.kids[0].kids[1].poly == Poly.const(-1999)
    # a bound inside a vector is no per-element bound: the granule stays
    assert index_bound(_cmp_lt(t, 2002), R + t + Poly.const(1)) is None


@pytest.mark.parametrize("pinned", [True, False])
def test_real_triton_softmax_wider_tiles_merge_for_the_launch(tmp_path, monkeypatch, pinned):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the corpus softmax at N = 2000: BLOCK_N = 2048, 4096 and 8192
    pad the row with -inf. For this launch the pinned order is one class over N_MULT and
    num_warps (the H200 measured it so); in free order N_MULT 2 and 4 meet (their padding
    registers fold). Unspecialised, N_MULT keeps them apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("softmax", "fp32", monkeypatch, tmp_path)
    blocks = [(("N_MULT", m),) for m in (1, 2, 4)]
    spec, plain = corpus_digests(mod, fam.module, inputs, shape, "fp32", pinned, blocks)
    assert len(set(plain)) == 3
    if pinned:
        assert spec[0] == spec[1] == spec[2]
        other_w, _ = corpus_digests(mod, fam.module, inputs, shape, "fp32", pinned, blocks[:1], num_warps=8)
        assert other_w[0] == spec[0]
    else:
        assert spec[1] == spec[2]
