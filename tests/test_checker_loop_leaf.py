"""Per-element loop accumulators as balanced-tree leaves (session 30: fixbits/checker/loop_leaf.py,
balanced.Collapser._span, thread_roots' ``ileaf``), masks of a column in a multi-row block as
forms modulo the row (leaf_pred), the path condition's constant folding (walk.pc_and) and
relativize_meets over normalised row starts. Node-level cases for what each rule takes and
refuses, real Triton PTX of Inductor's looped mean for the merges the H200 measured."""

from __future__ import annotations

import pytest

from fixbits.checker.balanced import Collapser, _leaf_of
from fixbits.checker.forms import Poly
from fixbits.checker.leaf_pred import at_element, relative_pred
from fixbits.checker.loop_leaf import loop_leaf
from fixbits.checker.node import Node, int_node
from fixbits.checker.walk import FALSE, TRUE, pc_and

ZERO = int_node(Poly.const(0))
IT = Poly.sym("IT1")
STATE = Node("state", (0,))


def _lane(bits: dict[str, int]) -> Poly:
    out = Poly.const(0)
    for b, c in bits.items():
        out = out + Poly.sym(b).scale(c)
    return out


def _loopout(
    elem: Poly, *, cond_extra: Poly | None = None, stride: int = 256, slot2: Poly | None = None, init: Node = ZERO
) -> Node:
    """acc = where(IT*256 + v < 8192, acc + x[e + IT*stride], acc) over a loop of 32 chunks (v:
    the first element of e's vector, whose column Triton's mask compares)."""
    cond = Node("cmp", ("le", "s"), (int_node(IT.scale(256) + Poly.const(-7935) + (cond_extra or Poly.const(0))), ZERO))

    def upd(e: Poly) -> Node:
        addr = Poly.sym("p:0") + (e + IT.scale(stride)).scale(4)
        x = Node("masked", (), (Node("load", ("global", 4), (int_node(addr),)), ZERO))
        v = e - Poly.const(e.const_value())
        pred = Node("cmp", ("le", "s"), (int_node(IT.scale(256) + v + Poly.const(-8191)), ZERO))
        return Node("select", (), (pred, Node("add", ("f32",), (x, STATE)), STATE))

    slots = [Node("slot", (), (init, upd(elem)))]
    if slot2 is not None:
        slots.append(Node("slot", (), (ZERO, upd(slot2))))
    return Node("loopout", (0,), (Node("loop", (1,), (cond, *slots)),))


def test_a_per_element_accumulator_is_a_leaf_at_its_element():
    # two layouts: four elements per thread (lane bits from 4) and two per thread (from 2)
    a = loop_leaf(_loopout(_lane({"tx0": 4, "tx1": 8}) + Poly.const(3)), _leaf_of)
    b = loop_leaf(_loopout(_lane({"tx0": 2, "tx1": 4}) + Poly.const(1)), _leaf_of)
    assert a is not None and b is not None
    assert a[0].digest == b[0].digest  # one function of the element
    assert a[1] == _lane({"tx0": 4, "tx1": 8}) + Poly.const(3)  # the element, iteration terms off
    assert "IT1" not in repr(a[0]) and not a[0].variant and not a[0].exchange  # (bound names)
    # the leaf's template keeps the loop: another chunk stride is another function
    c = loop_leaf(_loopout(_lane({"tx0": 4, "tx1": 8}) + Poly.const(3), stride=512), _leaf_of)
    assert c is not None and c[0].digest != a[0].digest


def test_what_is_not_one_element_per_lane_is_refused():
    e = _lane({"tx0": 4}) + Poly.const(3)
    assert loop_leaf(_loopout(e, cond_extra=Poly.sym("tx0")), _leaf_of) is None  # a thread's own trip count
    assert loop_leaf(_loopout(e, cond_extra=Poly.sym("ctaid.x")), _leaf_of) is None  # a block's
    assert loop_leaf(_loopout(e, slot2=e + Poly.const(1)), _leaf_of) is None  # two elements in one loop
    assert loop_leaf(_loopout(e, stride=0), _leaf_of) is None  # no chunk stride: not an accumulation
    assert loop_leaf(_loopout(e, init=Node("undef")), _leaf_of) is None  # an initial value not a number
    assert loop_leaf(_loopout(e, slot2=e), _leaf_of) is not None  # (two slots over one element)


def test_a_tree_of_loop_leaves_collapses():
    lo = _loopout(_lane({"tx0": 2}))
    hi = _loopout(_lane({"tx0": 2}) + Poly.const(1))
    got = Collapser().collapse(Node("add", ("rn.f32",), (lo, hi)))
    assert got.kind == "balanced" and got.attrs[1] == 1
    assert got.kids[1].poly == _lane({"tx0": 2})


def test_the_path_condition_folds_decided_branches():
    x = Node("cmp", ("le", "s"), (int_node(Poly.sym("tx0")), ZERO))
    assert pc_and((TRUE, TRUE)) is TRUE
    assert pc_and((TRUE, x)) is x
    assert pc_and((x, FALSE)) is FALSE
    two = pc_and((x, Node("not", (), (x,))))
    assert two.kind == "and" and two.attrs == ("pc",)


def test_real_triton_inductor_looped_mean_meets_across_warps_when_pinned(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the Inductor looped mean (R0_BLOCK 256, 8,192 columns): the H200
    measured pinned XBLOCK 1 with 2, 4 and 8 warps as one class and free XBLOCK 1 with 2 and 4
    warps as two. Under the launch the pinned ones meet (the accumulators are leaves of one
    tree); the free ones stay apart, as their bytes do."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("inductor_red_mean", "fp32", monkeypatch, tmp_path)
    xb1 = [(("XBLOCK", 1),)]
    pinned = [corpus_digests(mod, fam.module, inputs, shape, "fp32", True, xb1, num_warps=w)[0][0] for w in (2, 4)]
    free = [corpus_digests(mod, fam.module, inputs, shape, "fp32", False, xb1, num_warps=w)[0][0] for w in (2, 4)]
    assert pinned[0] == pinned[1]
    assert free[0] != free[1]


def test_a_mask_of_the_column_alone_is_a_form_modulo_the_row():
    """Two rows per block: the start holds the row bit (coefficient 8,192), the mask only the
    column's. The form reads the column as the index modulo 8,192, exact at every element."""
    start = _lane({"tx0": 4, "tx1": 8}) + Poly.sym("tx2").scale(8192) + Poly.const(3)
    pred = Node("cmp", ("le", "s"), (int_node(_lane({"tx0": 4, "tx1": 8}) + Poly.const(-767)), ZERO))
    got = relative_pred(pred, start)
    assert got is not None
    form = got.kids[0]
    assert form.attrs == (4, 1, 8192)
    for t0 in (0, 1):
        for t1 in (0, 1):
            for t2 in (0, 1):
                ix = 4 * t0 + 8 * t1 + 8192 * t2 + 3
                g, a, m = form.attrs
                e = form.kids[1].poly.const_value()
                col = ix % m
                assert a * (col - col % g) + e == 4 * t0 + 8 * t1 - 767  # the predicate's own q
    # a row bit under the column's span: no modulus
    low = _lane({"tx0": 4, "tx1": 8}) + Poly.sym("tx2").scale(8) + Poly.const(3)
    assert relative_pred(pred, low) is None


def test_at_an_element_the_modular_form_is_its_rows_plain_form():
    r = Poly.sym("ctaid.x").scale(16384)
    form = Node("ixform", (1, 1, 8192), (int_node(r), int_node(Poly.const(-8191))))
    tpl = Node("select", (), (Node("cmp", ("le", "s"), (form, ZERO)), ZERO, ZERO))
    row1 = at_element(tpl, r + Poly.const(8192 + 5))
    assert row1.kids[0].kids[0].attrs == (1, 1)
    assert row1.kids[0].kids[0].kids[0].poly == r + Poly.const(8192)
    # a span of 2^h elements that crosses a row keeps the modular form
    assert at_element(tpl, r + Poly.const(8190), 4) is tpl


def test_relativize_meets_a_row_start_normalised_after_its_rewrite():
    """Each of two threads' stores rewritten in its output's coordinates; the second's row start
    gets a constant that normal_ixform moves into e. relativize_meets must say what relativize
    says (it checked the un-normalised kid against the first tree and said no)."""
    from fixbits.checker.walk import relativize, relativize_meets, tree_digests

    leaf = Node("leaf", ("global", 4, "p:0"))

    def root(row: int) -> tuple[Poly, Node]:
        # (the block's first row start R in both; the second row's e is 768 lower, as the
        # relative rewrite of a two-row block's second thread writes it)
        r = Poly.sym("ctaid.x").scale(2 * 768)
        form = Node("ixform", (1, 1), (int_node(r), int_node(Poly.const(-767 - 768 * row))))
        tpl = Node("select", (), (Node("cmp", ("le", "s"), (form, ZERO)), leaf, ZERO))
        v = Node("balanced", (("add", ("rn.f32",)), 10), (tpl, int_node(r + Poly.const(768 * row))))
        return Poly.sym("p:1") + Poly.sym("ctaid.x").scale(8) + Poly.const(4 * row), v

    first = relativize(*root(0), {"p:0", "p:1"}, {})
    second = relativize(*root(1), {"p:0", "p:1"}, {})
    assert first is not None and second is not None and first[1].digest == second[1].digest
    assert relativize_meets(*root(1), {"p:0", "p:1"}, {}, first, tree_digests(first[1]))
