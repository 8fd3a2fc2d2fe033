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

A predicate that compares only some of T's bits (the column of a block of several rows, whose
row bits R_T sit in the start only) is ``ixform<g, a, M>(R, e)``, read as a * floor_g((IX - R)
mod M) + e, where M is a power of two dividing every coefficient of R_T and above the compared
part's greatest value plus c: then (IX - R) mod M is that part plus c, and the rest is as above.
"""

from __future__ import annotations

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.node import Node, int_node

_PRED_KINDS = frozenset({"cmp", "and", "or", "not", "true"})
_NOT_BLOCK_LEVEL = ("tid.", "Tv:", "D:", "carried:", "IT", "lane", "warpid")
_MAX_G = 64
BOUND_IT = "it@"  # a loop leaf's own iteration count, bound in its template (loop_leaf.py)


def is_coordinate_pred(n: Node) -> bool:
    """A predicate tree of integer comparisons only (the walk's coordinate predicates)."""
    if n.kind not in _PRED_KINDS:
        return False
    if n.kind == "cmp":
        return len(n.kids) == 2 and all(k.poly is not None for k in n.kids)
    return all(is_coordinate_pred(k) for k in n.kids)


def _split(p: Poly, uniform: tuple[str, ...] = ()) -> tuple[Poly, Poly, int] | None:
    """(thread-bit part, block-level part, constant); None when a term is neither (a product of
    bits, a data or loop symbol). Symbols with a ``uniform`` prefix count as block level (a
    loop's iteration count, inside that loop's own leaf: loop_leaf.py)."""
    thr: dict[tuple, int] = {}
    blk: dict[tuple, int] = {}
    for m, c in p.terms.items():
        if not m:
            continue
        if len(m) == 1 and is_bit_symbol(m[0]):
            thr[m] = c
        elif any(is_bit_symbol(s) or (s.startswith(_NOT_BLOCK_LEVEL) and not s.startswith(uniform)) for s in m):
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


def relative_pred(pred: Node, start: Poly, uniform: tuple[str, ...] = ()) -> Node | None:
    """``pred`` over the leaf index (module docstring); None when it is not such a function."""
    s = _split(start, uniform)
    if s is None:
        return None
    return _rel(pred, s, uniform)


def _rel(n: Node, s: tuple[Poly, Poly, int], uniform: tuple[str, ...]) -> Node | None:
    if n.kind == "true":
        return n
    if n.kind != "cmp":
        kids = []
        for k in n.kids:
            r = _rel(k, s, uniform)
            if r is None:
                return None
            kids.append(r)
        return Node(n.kind, n.attrs, tuple(kids))
    q, z = n.kids
    assert q.poly is not None and z.poly is not None
    if not z.poly.is_const():
        return None
    got = _split(q.poly, uniform)
    if got is None:
        return None
    tq, rq, q0 = got
    ts, rs, c = s
    if not tq.terms:
        return n  # no thread bit: the same comparison for every leaf of the block
    if not ts.terms or not set(tq.terms) <= set(ts.terms):
        return None
    m0 = next(iter(tq.terms))
    if tq.terms[m0] % ts.terms[m0]:
        return None
    a = tq.terms[m0] // ts.terms[m0]
    if any(tq.terms[m] != a * ts.terms[m] for m in tq.terms):
        return None
    mod = ()
    if len(tq.terms) < len(ts.terms):
        # the start's other bits (a row of a multi-row block) sit above the compared ones
        m = _modulus(ts, set(tq.terms), c)
        if m is None:
            return None
        mod, ts = (m,), Poly({k: v for k, v in ts.terms.items() if k in tq.terms})
    g = _granule(ts)
    e = rq + Poly.const(q0 - a * (c - c % g))
    form = Node("ixform", (g, a, *mod), (int_node(rs), int_node(e)))
    return Node("cmp", n.attrs, (form, z))


def _modulus(ts: Poly, kept: set, c: int) -> int | None:
    """M such that (IX - R) mod M is the kept bits' part plus c at every thread: a power of two
    dividing every other bit's coefficient and above the kept part's greatest value plus c (the
    form ``ixform<g, a, M>`` reads a * floor_g((IX - R) mod M) + e); None when there is none."""
    rest = [v for k, v in ts.terms.items() if k not in kept]
    top = sum(v for k, v in ts.terms.items() if k in kept) + c
    if c < 0 or any(v <= 0 for v in ts.terms.values()):
        return None
    m = min(rest)
    m &= -m  # (the largest power of two dividing the least of them)
    if any(v % m for v in rest) or top >= m:
        return None
    return m


def index_bound(pred: Node, start: Poly, uniform: tuple[str, ...] = ()) -> Node | None:
    """``relative_pred`` of a load's mask, with a per-vector bound written per element where it
    is the same predicate: ``floor_g(y) + e <= 0`` is ``y + e <= 0`` when -e + 1 is a multiple of
    g (floor_g(y) <= K and y <= K agree for every integer y exactly when K + 1 is a multiple of
    g). So the masks of two layouts with other vector widths meet; None when not of this form."""
    r = relative_pred(pred, start, uniform)
    if r is None or r.kind != "cmp" or r.attrs[:2] != ("le", "s") or r.kids[0].kind != "ixform":
        return None
    form, z = r.kids
    g, a = form.attrs[:2]
    e = form.kids[1].poly
    if a != 1 or z.poly is None or z.poly != Poly.const(0) or e is None:
        return None
    # (inside a loop's leaf, e may hold the iteration: e mod g is its constant's when every
    # other coefficient is a multiple of g, the symbols being integers)
    if not e.is_const() and (not uniform or any(c % g for m, c in e.terms.items() if m)):
        return None
    if (1 - e.const_value()) % g:
        return None
    return Node("cmp", r.attrs, (Node("ixform", (1, 1, *form.attrs[2:]), form.kids), z))


def normal_ixform(n: Node) -> Node:
    """``ixform<g, a>(R + k, e)`` as ``ixform<g, a>(R, e - a*k)`` for a constant k that is a
    multiple of g (floor_g(x - k) = floor_g(x) - k exactly then): a row start written with a
    constant after a change of coordinates meets the one written without."""
    r, e = n.kids[0].poly, n.kids[1].poly
    if r is None or e is None or len(n.attrs) != 2:
        return n  # (with a modulus, a shift of R is not a shift of the form)
    g, a = n.attrs
    k = r.const_value()
    if not k or k % g:
        return n
    return Node("ixform", n.attrs, (int_node(r - Poly.const(k)), int_node(e - Poly.const(a * k))))


def at_element(t: Node, ix: Poly, width: int = 1, memo: dict[bytes, Node] | None = None) -> Node:
    """Template ``t`` at the ``width`` leaves from index ``ix``, known up to block-level terms (a
    thread's own elements, thread_roots.py): each ``ixform<g, a, M>(R, e)`` with ix - R a
    constant d whose range stays in one multiple of M is ``ixform<g, a>(R + k, e)``, k = d - d
    mod M (the row its bits left out select; there IX - R - k is the compared part plus c, below
    M, so the two read alike at every index of that row)."""
    memo = {} if memo is None else memo
    got = memo.get(t.digest)
    if got is not None:
        return got
    if t.kind == "ixform" and len(t.attrs) == 3 and t.kids[0].poly is not None:
        r = t.kids[0].poly
        # (a loop leaf's R holds its chunk's iteration terms, which its loads add to ix)
        d = ix - Poly({m: c for m, c in r.terms.items() if not any(x.startswith(BOUND_IT) for x in m)})
        out = t
        if d.is_const() and d.const_value() % t.attrs[2] + width <= t.attrs[2]:
            k = d.const_value() - d.const_value() % t.attrs[2]
            out = Node("ixform", t.attrs[:2], (int_node(r + Poly.const(k)), t.kids[1]))
    elif t.kids and t.poly is None:
        kids = tuple(at_element(k, ix, width, memo) for k in t.kids)
        out = t if all(a is b for a, b in zip(kids, t.kids, strict=True)) else Node(t.kind, t.attrs, kids)
    else:
        out = t
    memo[t.digest] = out
    return out

