"""A coordinate predicate of a reduction leaf written as a function of the leaf's own index, so
that leaves guarded by ``tl.where(mask, x, 0)`` (Inductor's persistent reductions) keep one
template and the balanced-tree proof (balanced.py) can collapse them.

A leaf at index i = R + T + c (R: the block-level part of its start, T: thread bits with every
coefficient a multiple of g, c: a constant) whose predicate compares q = a*T + r + q0 (r: block
level, q0: constant) is rewritten as ``ixform<g, a>(R, e)`` with e = r + q0 - a*(c - c mod g),
read as  a * floor_g(IX - R) + e  at index IX (floor_g(x) = x - x mod g, floor modulo).

Exact: at the leaf's own index, IX - R = T + c and (T + c) mod g = c mod g (T's values are
multiples of g), so a*floor_g(IX - R) + e = a*T + a*(c - c mod g) + r + q0 - a*(c - c mod g) = q.
The template is therefore the leaf's value as a function of its index, which is what a balanced
node means; two leaves share the template only when (g, a, R, e) agree, so a mask that picks other
columns, another vector width or another row keeps its own template (no combine, no collapse).
g is the largest power of two (at most 64) dividing every coefficient of T: a per-vector mask
(Triton masks a vector by its first column) and a per-element one both fit it, each exactly.
"""

from __future__ import annotations

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.node import Node, int_node

_PRED_KINDS = frozenset({"cmp", "and", "or", "not", "true"})
_NOT_BLOCK_LEVEL = ("tid.", "Tv:", "D:", "carried:", "IT", "lane", "warpid")
_MAX_G = 64


def is_coordinate_pred(n: Node) -> bool:
    """A predicate tree of integer comparisons only (the walk's coordinate predicates)."""
    if n.kind not in _PRED_KINDS:
        return False
    if n.kind == "cmp":
        return len(n.kids) == 2 and all(k.poly is not None for k in n.kids)
    return all(is_coordinate_pred(k) for k in n.kids)


def _split(p: Poly) -> tuple[Poly, Poly, int] | None:
    """(thread-bit part, block-level part, constant); None when a term is neither (a product of
    bits, a data or loop symbol)."""
    thr: dict[tuple, int] = {}
    blk: dict[tuple, int] = {}
    for m, c in p.terms.items():
        if not m:
            continue
        if len(m) == 1 and is_bit_symbol(m[0]):
            thr[m] = c
        elif any(is_bit_symbol(s) or s.startswith(_NOT_BLOCK_LEVEL) for s in m):
            return None
        else:
            blk[m] = c
    return Poly(thr), Poly(blk), p.const_value()


def _granule(t: Poly) -> int:
    g = _MAX_G
    for c in t.terms.values():
        while g > 1 and c % g:
            g //= 2
    return g


def relative_pred(pred: Node, start: Poly) -> Node | None:
    """``pred`` over the leaf index (module docstring); None when it is not such a function."""
    s = _split(start)
    if s is None:
        return None
    return _rel(pred, s)


def _rel(n: Node, s: tuple[Poly, Poly, int]) -> Node | None:
    if n.kind == "true":
        return n
    if n.kind != "cmp":
        kids = []
        for k in n.kids:
            r = _rel(k, s)
            if r is None:
                return None
            kids.append(r)
        return Node(n.kind, n.attrs, tuple(kids))
    q, z = n.kids
    assert q.poly is not None and z.poly is not None
    if not z.poly.is_const():
        return None
    got = _split(q.poly)
    if got is None:
        return None
    tq, rq, q0 = got
    ts, rs, c = s
    if not tq.terms:
        return n  # no thread bit: the same comparison for every leaf of the block
    if not ts.terms or set(tq.terms) != set(ts.terms):
        return None
    m0 = next(iter(ts.terms))
    if tq.terms[m0] % ts.terms[m0]:
        return None
    a = tq.terms[m0] // ts.terms[m0]
    if any(tq.terms[m] != a * ts.terms[m] for m in ts.terms):
        return None
    g = _granule(ts)
    e = rq + Poly.const(q0 - a * (c - c % g))
    form = Node("ixform", (g, a), (int_node(rs), int_node(e)))
    return Node("cmp", n.attrs, (form, z))


def index_bound(pred: Node, start: Poly) -> Node | None:
    """``relative_pred`` of a load's mask, with a per-vector bound written per element where it
    is the same predicate: ``floor_g(y) + e <= 0`` is ``y + e <= 0`` when -e + 1 is a multiple of
    g (floor_g(y) <= K and y <= K agree for every integer y exactly when K + 1 is a multiple of
    g). So the masks of two layouts with other vector widths meet; None when not of this form."""
    r = relative_pred(pred, start)
    if r is None or r.kind != "cmp" or r.attrs[:2] != ("le", "s") or r.kids[0].kind != "ixform":
        return None
    form, z = r.kids
    g, a = form.attrs
    e = form.kids[1].poly
    if a != 1 or z.poly is None or z.poly != Poly.const(0) or e is None or not e.is_const():
        return None
    if (1 - e.const_value()) % g:
        return None
    return Node("cmp", r.attrs, (Node("ixform", (1, 1), form.kids), z))


def normal_ixform(n: Node) -> Node:
    """``ixform<g, a>(R + k, e)`` as ``ixform<g, a>(R, e - a*k)`` for a constant k that is a
    multiple of g (floor_g(x - k) = floor_g(x) - k exactly then): a row start written with a
    constant after a change of coordinates meets the one written without."""
    r, e = n.kids[0].poly, n.kids[1].poly
    if r is None or e is None:
        return n
    g, a = n.attrs
    k = r.const_value()
    if not k or k % g:
        return n
    return Node("ixform", n.attrs, (int_node(r - Poly.const(k)), int_node(e - Poly.const(a * k))))
