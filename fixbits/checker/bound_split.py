"""A balanced span's template where the launch decides its index bounds on a sub-range.

A tile wider than the row reads its last columns through masked loads and ``tl.where(mask, x,
0)``; the template of a balanced span over them keeps the bound (leaf_pred.py). Where the bound
holds at every index of a range, the masked load is the load and the select its first arm;
where it fails at every index, the register's old value and the second arm. A span whose range
straddles the bound is, by the definition of the balanced tree, the combine of its two halves,
so it can be split until each half is decided (balanced.Collapser._by_bounds). Then a layout
that summed the padding inside one warp's partial and one that summed it across warps reach the
same tree over the same leaves.
"""

from __future__ import annotations

from fixbits.checker.forms import Poly
from fixbits.checker.launch import join_truths
from fixbits.checker.mask_bounds import bound_form, fails_on, holds_on, offset_range
from fixbits.checker.node import Node
from fixbits.checker.pads import zero_result


def decided(t: Node, start: Poly, height: int, memo: dict[bytes, tuple[Node, bool]]) -> tuple[Node, bool]:
    """(the template with every bound decided on [start, start + 2^height) replaced by what it
    selects there, whether some bound is still undecided). ``memo`` is for this range only."""
    got = memo.get(t.digest)
    if got is not None:
        return got
    out: tuple[Node, bool]
    if t.poly is not None or not t.kids or t.kind == "selset":
        out = (t, False)  # (a set's elements are read by every index alike: not the leaf's own)
    elif t.kind == "masked" and len(t.kids) == 3:
        b = t.kids[2]
        if holds_on(b, start, height):
            out = decided(t.kids[0], start, height, memo)
        elif fails_on(b, start, height):
            out = (t.kids[1], False)
        else:
            out = (t, bound_form(b) is not None)  # (open: a narrower range may decide it)
    elif t.kind == "select" and len(t.kids) == 3 and _index_pred(t.kids[0]):
        v = pred_on(t.kids[0], start, height)
        if v is not None:
            out = decided(t.kids[1] if v else t.kids[2], start, height, memo)
        else:
            out = (t, True)
    else:
        kids = [decided(k, start, height, memo) for k in t.kids]
        left = any(o for _, o in kids)
        same = all(a is b for (a, _), b in zip(kids, t.kids, strict=True))
        node = t if same else Node(t.kind, t.attrs, tuple(k for k, _ in kids))
        if not same and zero_result(node.kind, node.attrs, node.kids):
            node = node.kids[0]  # (+0: a padded lane's square or widened pad, so the span is +0)
        out = (node, left)
    memo[t.digest] = out
    return out


def _index_pred(p: Node) -> bool:
    """A predicate whose comparisons are all bounds over the leaf index that pred_on reads."""
    if p.kind == "true":
        return True
    if p.kind in ("and", "or", "not"):
        return bool(p.kids) and all(_index_pred(k) for k in p.kids)
    if p.kind != "cmp" or p.attrs[:2] != ("le", "s") or len(p.kids) != 2 or p.kids[1].poly != Poly.const(0):
        return False
    f = p.kids[0]
    return f.kind == "ixform" and f.attrs[1] > 0 and f.kids[1].poly is not None and f.kids[1].poly.is_const()


def pred_on(p: Node, start: Poly, height: int) -> bool | None:
    """A predicate over the leaf index (leaf_pred.relative_pred's forms) on the whole range:
    True or False when the same at every index and thread, None otherwise."""
    if p.kind == "true":
        return True
    if p.kind == "not" and len(p.kids) == 1:
        v = pred_on(p.kids[0], start, height)
        return None if v is None else not v
    if p.kind in ("and", "or"):
        return join_truths(p.kind, [pred_on(k, start, height) for k in p.kids])
    if p.kind != "cmp" or p.attrs[:2] != ("le", "s") or len(p.kids) != 2:
        return None
    rng = _ix_range(p.kids[0], start, height)
    z = p.kids[1].poly
    if rng is None or z is None or z != Poly.const(0):
        return None
    lo, hi = rng
    return True if hi <= 0 else (False if lo > 0 else None)


def _ix_range(form: Node, start: Poly, height: int) -> tuple[int, int] | None:
    """Least and greatest a * floor_g(IX - R) + e over the range (a > 0: floor_g is monotone)."""
    if form.kind != "ixform" or len(form.kids) != 2 or len(form.attrs) != 2:
        return None  # (a modular form is not monotone over the range)
    g, a = form.attrs
    r, e = form.kids[0].poly, form.kids[1].poly
    if r is None or e is None or not e.is_const() or a <= 0:
        return None
    got = offset_range(start - r)
    if got is None:
        return None
    lo, hi = got[0], got[1] + (1 << height) - 1
    ev = e.const_value()
    return a * (lo - lo % g) + ev, a * (hi - hi % g) + ev
