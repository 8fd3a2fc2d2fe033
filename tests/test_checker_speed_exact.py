"""The checker's speed shortcuts give the results of the plain computations they replace
(session 24): each is checked against a reference on random forms and trees (hypothesis).

* ``forward.concretize`` shares rebuilds across calls through a table keyed on the tx bits below a
  node; the reference rebuilds every tree from scratch at one thread environment;
* ``balanced._flip_bit`` builds ``substitute(sym, 1 - sym)`` term by term, in its term order;
* ``walk.relative_addresses`` names every address ``relativize`` may return for a store address,
  whatever the value (what lets ``signature.per_thread`` compare addresses before trees).

Session 28:
* ``walk.relativize_meets`` answers "does relativize give this root" as relativize compared
  would, stopping at the first node outside the wanted tree (per_thread's later threads);
* ``forward.interpolate``'s leaf table shared between calls gives what fresh calls give;
* ``maxsets.SetProver`` reads a butterfly's shuffle without its elements: the sets are those of
  a prover that builds the shuffle's set first.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.checker.balanced import _flip_bit
from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.forward import _partial, concretize, interpolate
from fixbits.checker.node import Node, int_node
from fixbits.checker.pads import const_of, is_bit_move
from fixbits.checker.walk import relative_addresses, relativize, relativize_meets, tree_digests

pytestmark = pytest.mark.unit

NB = 6
SYMS = [f"tx{i}" for i in range(NB)] + ["ty0", "ctaid.x", "p:0", "p:5"]


@st.composite
def forms(draw: st.DrawFn, syms: list[str] = SYMS, max_terms: int = 4) -> Poly:
    terms: dict[tuple[str, ...], int] = {}
    for _ in range(draw(st.integers(0, max_terms))):
        mono = tuple(sorted(draw(st.lists(st.sampled_from(syms), max_size=2, unique=True))))
        terms[mono] = terms.get(mono, 0) + draw(st.integers(-9, 9))
    return Poly(terms)


@st.composite
def trees(draw: st.DrawFn, depth: int = 3) -> Node:
    if depth == 0 or draw(st.booleans()):
        return int_node(draw(forms()))
    kind = draw(st.sampled_from(["add", "mul", "fma", "cvt", "shfl"]))
    if kind == "shfl":
        b = draw(st.integers(0, 31))
        return Node("shfl", ("bfly",), (draw(trees(depth - 1)), int_node(Poly.const(b)), int_node(Poly.const(31)),
                                          int_node(Poly.const(-1))))  # fmt: skip
    arity = {"add": 2, "mul": 2, "fma": 3, "cvt": 1}[kind]
    return Node(kind, ("f32",), tuple(draw(trees(depth - 1)) for _ in range(arity)))


def _reference(n: Node, env: dict[str, int]) -> Node:
    """concretize as it was before the shared table: every subtree rebuilt at ``env``."""
    if not _has_any_bit(n):
        return n
    if n.poly is not None:
        return int_node(_partial(n.poly, env)) if any(is_bit_symbol(s) for s in n.poly.symbols()) else n
    if n.kind == "shfl" and is_bit_move(n):
        b = const_of(n.kids[1])
        assert b is not None
        partner = {s: v ^ (b >> int(s[2:]) & 1) if int(s[2:]) < 5 else v for s, v in env.items()}
        return _reference(n.kids[0], partner)
    if not n.variant and not n.kids:
        return n
    return Node(n.kind, n.attrs, tuple(_reference(k, env) for k in n.kids))


def _has_any_bit(n: Node) -> bool:
    if n.poly is not None:
        return any(is_bit_symbol(s) for s in n.poly.symbols())
    return any(_has_any_bit(k) for k in n.kids)


@settings(max_examples=300, deadline=None)
@given(trees(), st.lists(st.integers(0, (1 << NB) - 1), min_size=1, max_size=4), st.integers(1, NB))
def test_concretize_is_the_rebuild_at_each_thread(tree: Node, threads: list[int], nb: int) -> None:
    for t in threads:  # several threads in a row: the shared table must not leak one into another
        env = {f"tx{i}": (t >> i) & 1 for i in range(nb)}
        got, want = concretize(tree, env), _reference(tree, env)
        assert got.digest == want.digest, (t, nb, tree)


@settings(max_examples=500, deadline=None)
@given(forms(max_terms=5), st.sampled_from(["tx0", "tx3"]))
def test_flip_bit_is_the_substitution_in_its_term_order(p: Poly, sym: str) -> None:
    got = _flip_bit(p, sym)
    if any(sym in m and m != (sym,) for m in p.terms):
        assert got is None
        return
    want = p.substitute(sym, Poly.const(1) - Poly.sym(sym))
    assert got is not None and list(got.terms.items()) == list(want.terms.items())


ADDR_SYMS = ["ctaid.x", "ctaid.y", "p:5", "p:6", "IT1"]


@settings(max_examples=400, deadline=None)
@given(forms(ADDR_SYMS, 4), forms(ADDR_SYMS + ["p:0"], 3), st.integers(0, 64))
def test_relativize_returns_one_of_the_relative_addresses(off: Poly, leaf: Poly, c: int) -> None:
    addr = Poly.sym("p:1") + off + Poly.const(4 * c)
    value = Node("add", ("f32",), (Node("load", ("global", 4), (int_node(Poly.sym("p:0") + leaf),)),
                                   int_node(Poly.const(c))))  # fmt: skip
    cands = relative_addresses(addr, {"p:0", "p:1"})
    got = relativize(addr, value, {"p:0", "p:1"})
    if got is not None:
        assert got[0].key() in cands


def test_a_row_store_relativizes_to_its_one_candidate_address() -> None:
    """The property above holds vacuously where relativize gives up: here it succeeds (a store
    16 bytes into row ctaid.x of stride p:5, reading 32 bytes into the same row of p:0)."""
    row = Poly._of({("ctaid.x", "p:5"): 4})
    addr = Poly.sym("p:1") + row + Poly.const(16)
    leaf = Node("load", ("global", 4), (int_node(Poly.sym("p:0") + row + Poly.const(32)),))
    got = relativize(addr, Node("add", ("f32",), (leaf, int_node(Poly.const(1)))), {"p:0", "p:1"})
    assert got is not None
    assert relative_addresses(addr, {"p:0", "p:1"}) == {got[0].key()}
    assert got[0].text() == "16 + OUT[p:5]/1*p:5 + p:1"


ROW_PARAMS = {"p:0", "p:1"}


def _row_root(r: int, offs: list[tuple[int, str]], c: int, extra: str) -> tuple[Poly, Node]:
    """A store c words into row ctaid.x + r (stride p:5) of the sum of loads ``offs`` words
    into the same row of p:0, each with an optional extra symbol (tx0 / IT1: left variant)."""
    base = Poly._of({("ctaid.x", "p:5"): 4}) + Poly({("p:5",): 4 * r})
    leaves = []
    for o, sym in offs:
        a = Poly.sym("p:0") + base + Poly.const(4 * o) + (Poly.sym(sym) if sym else Poly.const(0))
        leaves.append(Node("load", ("global", 4), (int_node(a),)))
    v = leaves[0]
    for leaf in leaves[1:]:
        v = Node("add", ("f32",), (v, leaf))
    addr = Poly.sym("p:1") + base + Poly.const(4 * c) + (Poly.sym(extra) if extra else Poly.const(0))
    return addr, v


_OFFS = st.lists(
    st.tuples(st.integers(0, 6), st.sampled_from(["", "", "", "tx0", "IT1"])), min_size=1, max_size=3
)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 3), st.integers(0, 3), _OFFS, _OFFS, st.integers(0, 6), st.sampled_from(["", "tx0"]))
def test_relativize_meets_is_relativize_compared(
    r1: int, r2: int, offs1: list, offs2: list, c: int, extra: str
) -> None:
    a1, v1 = _row_root(r1, offs1, c, extra)
    a2, v2 = _row_root(r2, offs2, c, extra)
    memos: dict = {}
    want = relativize(a1, v1, ROW_PARAMS, memos)
    if want is None:
        return
    ref = relativize(a2, v2, ROW_PARAMS)  # (a memo of its own)
    expect = ref is not None and ref[0].key() == want[0].key() and ref[1].digest == want[1].digest
    assert relativize_meets(a2, v2, ROW_PARAMS, memos, want, tree_digests(want[1])) == expect


def test_relativize_meets_takes_another_row_of_the_same_tree() -> None:
    """The property above, where it says yes: two rows of one relative root meet."""
    a1, v1 = _row_root(0, [(1, ""), (2, "")], 3, "")
    a2, v2 = _row_root(2, [(1, ""), (2, "")], 3, "")
    want = relativize(a1, v1, ROW_PARAMS)
    assert want is not None
    assert relativize_meets(a2, v2, ROW_PARAMS, {}, want, tree_digests(want[1]))
    a3, v3 = _row_root(2, [(1, ""), (3, "")], 3, "")
    assert not relativize_meets(a3, v3, ROW_PARAMS, {}, want, tree_digests(want[1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(trees(2), min_size=2, max_size=2), st.integers(0, 2**16 - 1), st.integers(1, 3))
def test_interpolate_with_a_shared_leaf_table_is_interpolate_fresh(
    pair: list[Node], pick: int, n: int
) -> None:
    rsyms = [f"tx{i}" for i in range(n)]
    shared: dict = {}
    for rep in range(2):  # the second round reads every leaf from the table
        for salt in range(2):
            trees_ = [pair[(pick >> (x + salt)) & 1] for x in range(1 << n)]
            tids = [(x * 5 + salt) % (1 << n) for x in range(1 << n)]
            got = interpolate(trees_, tids, rsyms, shared)
            want = interpolate(trees_, tids, rsyms, {})
            assert (got is None) == (want is None), rep
            assert got is None or want is None or got.digest == want.digest, rep


def _bfly(x: Node, off: int) -> Node:
    consts = (int_node(Poly.const(off)), int_node(Poly.const(31)), int_node(Poly.const(-1)))
    return Node("shfl", ("bfly",), (x,) + consts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=4), st.integers(0, 3), st.booleans())
def test_a_butterfly_set_does_not_need_its_shuffle_set(offs: list[int], lane_mul: int, prod: bool) -> None:
    from fixbits.checker.balanced import Collapser

    idx = Poly.sym("p:0") + Poly._of({("tx0",): 4 << lane_mul, ("tx1",): 8, ("ctaid.x",): 256})
    if prod:  # a lane bit in a product: the shuffle has no set
        idx = idx + Poly._of({("tx0", "ctaid.x"): 4})
    x = Node("load", ("global", 4), (int_node(idx),))
    shfls = []
    for off in offs:
        sh = _bfly(x, off)
        shfls.append(sh)
        x = Node("max", ("f32",), (x, sh))
    fresh = Collapser(nbits=5)
    first = Collapser(nbits=5)
    for sh in shfls:
        first.sets.of(sh)  # (the shuffles' sets built first, as before session 28)
    a, b = fresh.sets.of(x), first.sets.of(x)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.comb, a.elems, a.pads) == (b.comb, b.elems, b.pads)
    assert fresh.collapse(x).digest == first.collapse(x).digest
