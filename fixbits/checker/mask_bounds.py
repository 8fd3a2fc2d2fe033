"""Launch bounds of masked loads: where a masked load is its load, and where its padding.

Launch-specialised, a masked load's template carries its predicate over the leaf index (``masked(L,
old, bound)``, balanced._elementwise; the bound from leaf_pred.index_bound: IX - R + e <= 0). Where
the bound holds at every index a span covers, at every thread, the masked load is L there, so a
span of plain loads may be read as a span of the masked template (``wrapped`` + ``holds_on``:
balanced.Collapser._lift, maxsets, exp_pads); where it fails everywhere the span reads ``old``, the
register's padding (``fails_on``: the padding of a softmax, balanced.Collapser._lower).
"""

from __future__ import annotations

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.node import Node


def wrapped(a: Node, b: Node) -> list[Node] | None:
    """The bounds of the masked loads ``b`` has where ``a`` has their plain load (the trees
    otherwise equal, commutative children in either order); None when b is not such a tree."""
    if a.digest == b.digest:
        return []
    if b.kind == "masked" and len(b.kids) == 3 and b.kids[0].digest == a.digest:
        return [b.kids[2]]
    if a.kind != b.kind or a.attrs != b.attrs or len(a.kids) != len(b.kids) or not a.kids:
        return None
    orders = [b.kids]
    if len(b.kids) == 2:
        orders.append((b.kids[1], b.kids[0]))  # (a wrapped child may sort after its sibling)
    for kids in orders:
        out: list[Node] = []
        for x, y in zip(a.kids, kids, strict=True):
            got = wrapped(x, y)
            if got is None:
                break
            out += got
        else:
            return out
    return None


def bound_form(r: Node) -> tuple[Poly, int] | None:
    """(R, e) of a bound in leaf_pred.index_bound's form, IX - R + e <= 0; None otherwise."""
    if (
        r.kind != "cmp"
        or r.attrs[:2] != ("le", "s")
        or r.kids[0].kind != "ixform"
        or r.kids[0].attrs != (1, 1)
    ):
        return None
    R, e = (k.poly for k in r.kids[0].kids)
    if R is None or e is None or not e.is_const():
        return None
    return R, e.const_value()


def _extent(r: Node, start: Poly, height: int) -> tuple[int, int] | None:
    """The least and greatest IX - R + e over [start, start + 2^height) at every thread, where
    start - R is a constant plus thread bits; None otherwise."""
    form = bound_form(r)
    if form is None:
        return None
    R, e = form
    got = offset_range(start - R)
    if got is None:
        return None
    return got[0] + e, got[1] + e + (1 << height) - 1


def offset_range(d: Poly) -> tuple[int, int] | None:
    """Least and greatest value of ``d`` at every thread, where d is a constant plus thread bits
    (each 0 or 1); None otherwise."""
    lo = hi = d.terms.get((), 0)
    for m, c in d.terms.items():
        if not m:
            continue
        if len(m) != 1 or not is_bit_symbol(m[0]):
            return None
        lo, hi = lo + min(c, 0), hi + max(c, 0)
    return lo, hi


def holds_on(r: Node, start: Poly, height: int) -> bool:
    """Bound ``r`` true at every index of [start, start + 2^height) at every thread."""
    got = _extent(r, start, height)
    return got is not None and got[1] <= 0


def fails_on(r: Node, start: Poly, height: int) -> bool:
    """Bound ``r`` false at every index of [start, start + 2^height) at every thread."""
    got = _extent(r, start, height)
    return got is not None and got[0] > 0


def masked_in(n: Node, arity: int = 3) -> list[Node]:
    """The distinct masked loads a value reads itself (not those of a set it holds: a row max
    read by every element): with ``arity`` 3 those with a launch bound, 2 as the walk built them."""
    out: dict[bytes, Node] = {}
    _masked_in(n, arity, out, set())
    return list(out.values())


def _masked_in(n: Node, arity: int, out: dict[bytes, Node], seen: set[bytes]) -> None:
    if n.digest in seen or n.poly is not None or n.kind == "selset":
        return
    seen.add(n.digest)
    if n.kind == "masked":
        if len(n.kids) == arity:
            out[n.digest] = n
        return
    for k in n.kids:
        _masked_in(k, arity, out, seen)


def replace_node(n: Node, digest: bytes, by: Node, memo: dict[bytes, Node] | None = None) -> Node:
    """``n`` with the subtree ``digest`` replaced by ``by`` (not inside a set it holds)."""
    if n.digest == digest:
        return by
    if not n.kids or n.poly is not None or n.kind == "selset":
        return n
    memo = {} if memo is None else memo
    got = memo.get(n.digest)
    if got is None:
        kids = tuple(replace_node(k, digest, by, memo) for k in n.kids)
        got = n if all(a is b for a, b in zip(kids, n.kids, strict=True)) else Node(n.kind, n.attrs, kids)
        memo[n.digest] = got
    return got
