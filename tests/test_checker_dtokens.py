"""Integers made from a float's bits (fixbits/checker/dtokens.py): libdevice's log reads the
row sum's bits, so log-softmax's root held hashed tokens of the uncollapsed sum. Real Triton PTX
for the merge; node-level cases for what the expansion must keep apart."""

from __future__ import annotations

import pytest

from fixbits.checker.dtokens import Expander, bits_node, canonical, op_node
from fixbits.checker.forms import Poly, data_token
from fixbits.checker.node import Node, int_node

X = Node("load", ("global", 4), (int_node(Poly.sym("p:0") + Poly.sym("tx0").scale(4)),))
Y = Node("load", ("global", 4), (int_node(Poly.sym("p:1") + Poly.sym("tx0").scale(4)),))


def _tok(n: Node) -> str:
    (s,) = data_token([n.digest]).symbols()
    return s


def test_a_bits_token_becomes_a_tree_over_its_float():
    tx, ty = _tok(X), _tok(Y)
    table = {tx: bits_node(X), ty: bits_node(Y)}
    n = int_node(Poly.sym(tx) - Poly.sym(ty) + Poly.const(7))
    out = Expander(table).expand(n)
    assert out.kind == "dint" and {k.kids[0] for k in out.kids} == {X, Y}
    # the same integer written with its tokens in the other order meets it once canonical
    assert _renumbered(out) != out
    assert canonical(_renumbered(out), {}) == canonical(out, {})
    # the tokens swapped without renaming the template is another integer
    assert canonical(Node("dint", out.attrs, out.kids[::-1]), {}) != canonical(out, {})


def _renumbered(n: Node) -> Node:
    """``n`` (a dint of two tokens) with its tokens swapped and its template renamed to match."""
    from fixbits.checker.dtokens import _renamed

    t = _renamed(Poly(dict(n.attrs[0])), {"$0": "$1", "$1": "$0"})
    return Node("dint", (t.key(),), n.kids[::-1])


def test_different_integers_over_the_same_bits_stay_apart():
    t = _tok(X)
    table = {t: bits_node(X)}
    e = Expander(table)
    a = canonical(e.expand(int_node(Poly.sym(t) + Poly.const(1))), {})
    b = canonical(e.expand(int_node(Poly.sym(t) + Poly.const(2))), {})
    c = canonical(e.expand(int_node(Poly.sym(t).scale(2))), {})
    assert len({a, b, c}) == 3
    shr = op_node("shr.u32", (int_node(Poly.sym(t)), int_node(Poly.const(23))))
    and_ = op_node("and.b32", (int_node(Poly.sym(t)), int_node(Poly.const(23))))
    assert e.expand(shr) != e.expand(and_)


def test_tokens_cancel_to_a_constant_when_their_trees_meet():
    # two tokens over different trees that the collapse made one: D1 - D2 is 0
    dint = Node("dint", (Poly({("$0",): 1, ("$1",): -1, (): 5}).key(),), (bits_node(X), bits_node(X)))
    assert canonical(dint, {}) == int_node(Poly.const(5))


def test_an_int_with_a_thread_symbol_or_an_unknown_token_stays_as_it_is():
    t = _tok(X)
    e = Expander({t: bits_node(X)})
    with_thread = int_node(Poly.sym(t) + Poly.sym("tx1"))
    assert e.expand(with_thread) is with_thread
    unknown = int_node(Poly.sym(t) + Poly.sym("D:0123456789abcdef0123"))
    assert e.expand(unknown) is unknown


def test_a_token_over_loop_state_is_not_expanded():
    carried = Node("carried", ("r5",), ())
    inloop = Node("add", ("f32",), (X, carried))
    t = _tok(inloop)
    e = Expander({t: bits_node(inloop)})
    n = int_node(Poly.sym(t))
    assert e.expand(n) is n


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_real_triton_pinned_log_softmax_merges_for_the_launch(tmp_path, monkeypatch, dtype):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the corpus log-softmax at N = 2000, pinned order: the H200
    measured N_MULT 1, 2, 4 and num_warps 4, 8 as one class. With the log's bit arithmetic over
    the collapsed sum they meet under the launch (before: one class each, every root physical);
    unspecialised, N_MULT keeps them apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import n_mult_digests

    spec, plain = n_mult_digests("log_softmax", dtype, True, monkeypatch, tmp_path)
    assert spec[0] == spec[1] == spec[2]
    assert len(set(plain)) == 3
    other_w, _ = n_mult_digests("log_softmax", dtype, True, monkeypatch, tmp_path, num_warps=8, mults=(1,))
    assert other_w[0] == spec[0]
    free, _ = n_mult_digests("log_softmax", dtype, False, monkeypatch, tmp_path, mults=(1,))
    assert free[0] != spec[0]  # (the free order's sum is another tree: its bytes differ)
