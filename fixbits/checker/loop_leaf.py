"""A loop that keeps one accumulator per element as a leaf of the balanced tree after it.

Inductor's looped reductions and the tutorial layer norm add one chunk per iteration into a
tile-wide accumulator (``acc = where(mask, acc + x[e + k*IT], acc)``) and reduce the tile once
after the loop. Each lane's accumulator is then a function of its element e alone: the loop's
condition, its initial values and its update with e blanked. As a leaf template that function is
what layouts share, so the tree after the loop collapses as a tree of plain loads does
(balanced.py), and configurations that differ only in which thread held which lane meet.

Exact, not a guess: the template keeps the whole loop (condition, every slot's initial value
and update, each load's iteration stride), and is accepted only when every load of every slot
reads the one element e (iteration terms aside), the condition and initial values hold no
thread or block coordinate, and every coordinate predicate is rewritten over e (leaf_pred.py).
Two leaves with one template therefore compute one function of their element.
"""

from __future__ import annotations

from collections.abc import Callable

from fixbits.checker.forms import Poly, iter_symbol
from fixbits.checker.leaf_pred import BOUND_IT, index_bound, is_coordinate_pred, relative_pred
from fixbits.checker.node import Node, int_node

_BODY = frozenset({"cvt", "neg", "abs", "fabs", "mul", "add", "sub", "fma", "max", "min", "masked", "select"})
_PREDS = frozenset({"cmp", "and", "or", "not", "true"})
_ITER = ("IT",)  # the loop's iteration symbols: one value for every thread of an iteration


def _uniform_poly(p: Poly) -> bool:
    """Only parameters, iteration counts and constants: the same in every thread and block."""
    return all(s.startswith(("p:", *_ITER)) for s in p.symbols())


def _uniform(n: Node) -> bool:
    """An integer form or a predicate over such forms, uniform (_uniform_poly): a loop's
    condition and its slots' initial values; anything else is refused."""
    if n.poly is not None:
        return _uniform_poly(n.poly)
    return n.kind in _PREDS and all(_uniform(k) for k in n.kids)


def _iter_part(p: Poly) -> Poly:
    return Poly({m: c for m, c in p.terms.items() if any(s.startswith(_ITER) for s in m)})


class _Body:
    """One pass over a loop's updates: the element index every load reads, then the updates
    with each load as its template (its iteration stride kept) and predicates over the index."""

    def __init__(self, leaf: Callable[[Node], tuple[Node, Poly] | None],
                 masked_preds: dict[bytes, Node | None] | None) -> None:  # fmt: skip
        self.leaf = leaf
        self.masked_preds = masked_preds
        self.start: Poly | None = None  # the element index, iteration terms included
        self.ok = True

    def scan(self, n: Node) -> None:
        if not self.ok:
            return
        if n.kind == "load":
            got = self.leaf(n)
            if got is None or (self.start is not None and got[1] != self.start):
                self.ok = False
            else:
                self.start = got[1]
        elif n.kind == "state" or (n.poly is not None and _uniform_poly(n.poly)):
            return
        elif n.kind == "select" and n.kids and is_coordinate_pred(n.kids[0]):
            for k in n.kids[1:]:
                self.scan(k)
        elif n.kind in _BODY and n.kids:
            for k in n.kids:
                self.scan(k)
        else:
            self.ok = False

    def template(self, n: Node) -> Node | None:
        assert self.start is not None
        if n.kind == "load":
            got = self.leaf(n)
            assert got is not None
            return got[0]
        if n.kind == "state" or n.poly is not None:
            return n
        kids: list[Node] = []
        for i, k in enumerate(n.kids):
            t = self._pred(k) if n.kind == "select" and i == 0 else self.template(k)
            if t is None:
                return None
            kids.append(t)
        if n.kind == "masked" and self.masked_preds:
            p = self.masked_preds.get(n.digest)
            r = index_bound(p, self.start, _ITER) if p is not None else None
            if r is not None:
                kids.append(r)  # (as balanced._elementwise writes a masked leaf's bound)
        return Node(n.kind, n.attrs, tuple(kids))

    def _pred(self, p: Node) -> Node | None:
        """A where's predicate over the element index: per element where a per-vector bound is
        the same predicate (leaf_pred.index_bound), so layouts of other vector widths meet."""
        assert self.start is not None
        return index_bound(p, self.start, _ITER) or relative_pred(p, self.start, _ITER)


def loop_leaf(
    n: Node,
    leaf: Callable[[Node], tuple[Node, Poly] | None],
    masked_preds: dict[bytes, Node | None] | None = None,
) -> tuple[Node, Poly] | None:
    """``n`` (a loopout) as (template, element index) when it is a per-element accumulation
    (module docstring); ``leaf`` gives a load's template and index. None otherwise."""
    if n.kind != "loopout" or len(n.kids) != 1 or n.kids[0].kind != "loop":
        return None
    loop = n.kids[0]
    cond, slots = loop.kids[0], loop.kids[1:]
    if not slots or not _uniform(cond):
        return None
    body = _Body(leaf, masked_preds)
    for s in slots:
        if s.kind != "slot" or len(s.kids) != 2 or not _uniform(s.kids[0]):
            return None
        body.scan(s.kids[1])
    if not body.ok or body.start is None:
        return None
    new_slots = []
    for s in slots:
        t = body.template(s.kids[1])
        if t is None:
            return None
        new_slots.append(Node("slot", (), (s.kids[0], t)))
    it = _iter_part(body.start)
    start = body.start - it
    if not it.terms or any(x.startswith(_ITER) for x in start.symbols()):
        return None  # (no iteration stride: not an accumulation over chunks)
    tpl = Node("loopleaf", n.attrs, (int_node(it), Node("loop", loop.attrs, (cond, *new_slots))))
    return _close(tpl, iter_symbol(loop.attrs[0]), {}), start


def _close(n: Node, it: str, memo: dict[bytes, Node]) -> Node:
    """The template with its loop's own iteration count and state as bound names: inside the
    leaf they vary with nothing outside it, so they do not keep the tree physical (an outer
    loop's count does)."""
    got = memo.get(n.digest)
    if got is not None:
        return got
    if n.poly is not None:
        out = int_node(n.poly.substitute(it, Poly.sym(BOUND_IT + it[2:]))) if it in n.poly.symbols() else n
    elif n.kind == "state":
        out = Node("lstate", n.attrs)
    else:
        out = Node(n.kind, n.attrs, tuple(_close(k, it, memo) for k in n.kids))
    memo[n.digest] = out
    return out
