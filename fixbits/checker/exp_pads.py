"""The padding of a launch-specialised softmax: exp(-inf - max) read as +0.0.

A row of a softmax tile wider than the row is loaded with -inf where the launch masks it off, so
the sum of exponentials holds terms ``ex2(c * (-inf - M))`` with M the row max (a set node,
maxsets.py) and c > 0 a constant. Such a term is +0 exactly unless M is -inf or NaN. In that
event every element x of M's set is -inf or NaN, so ``x - M`` is NaN for each of them.

So where the stored value reaches ``sub(x, M)`` through NaN-propagating arithmetic alone (div,
sub, add, mul, fma, ex2, float conversions), x being its own element and a member of M's set,
the stored value is the canonical NaN in that event, whatever the padding terms are; and in every
other event they are +0. Writing them as +0 then leaves the stored value unchanged at every
input, and the +0 padding rules fold them (pads.mk_fadd, balanced.ZERO): a wider tile meets the
exact-width one. Anything that does not match this form keeps its terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.mask_bounds import bound_form, wrapped
from fixbits.checker.node import Node, int_node
from fixbits.checker.pads import RN_F32, is_bit_move, is_zero, mk_fadd

if TYPE_CHECKING:
    from fixbits.checker.balanced import Collapser

_ARITH = frozenset({"f32", "rn.f32", "ftz.f32", "rn.ftz.f32"})
_EX2 = frozenset({"approx.f32", "approx.ftz.f32"})
# -inf as the register holds it before the widening to fp32 (cvt attrs -> bits)
_NEG_INF = {None: 0xFF800000, "f32.bf16": 0xFF80, "f32.f16": 0xFC00}
_FLOATS = frozenset({"f16", "bf16", "f32", "f64"})
_STRICT = frozenset(
    {"add", "sub", "mul", "div", "fma", "ex2", "lg2", "sqrt", "rsqrt", "rcp", "neg", "abs", "canon"}
)
ZERO = int_node(Poly.const(0))


def fold(raw: Node, value: Node, col: Collapser, storers: int | None = None) -> Node:
    """The root ``raw`` (collapsed: ``value``) with its padding terms written as +0 where the
    module's condition holds at every thread that may store it (``storers``, a bitmask; None:
    every thread), collapsed by a collapser licensed to read them so (balanced.Collapser
    .licensed); ``value`` itself otherwise."""
    target = _strict_sub(value, set())
    if target is None:
        return value
    x, m = target
    if not _member(x, m, col, storers):
        return value
    lic = col.licensed(m.digest)
    out = lic.collapse(_rebuild(raw, m.digest, col, lic.rebuild_memo))  # (roots share their sums)
    return value if out.digest == value.digest else out


def _is_neg_inf(n: Node) -> bool:
    """-inf in fp32, or an fp16 / bf16 -inf widened to fp32 (a constant's bits, either sign
    convention of the walk's integers)."""
    if n.poly is not None:
        return n.poly.is_const() and n.poly.const_value() & 0xFFFFFFFF == _NEG_INF[None]
    if n.kind == "cvt" and len(n.kids) == 1 and n.attrs and n.attrs[0] in _NEG_INF:
        k = n.kids[0]
        return (
            k.poly is not None and k.poly.is_const() and k.poly.const_value() & 0xFFFF == _NEG_INF[n.attrs[0]]
        )
    return False


def _positive_const(n: Node) -> bool:
    return n.poly is not None and n.poly.is_const() and 0 < n.poly.const_value() < 0x7F800000


def pad_term(n: Node, m: bytes, col: Collapser | None = None) -> bool:
    """``ex2(c * (-inf - M))`` for this M (its set node's digest; with ``col``, a tree that
    collapses to it), c > 0 finite."""
    if n.kind != "ex2" or not n.attrs or n.attrs[0] not in _EX2 or len(n.kids) != 1:
        return False
    mul = n.kids[0]
    if mul.kind != "mul" or not mul.attrs or mul.attrs[0] not in _ARITH or len(mul.kids) != 2:
        return False
    c, sub = mul.kids if mul.kids[1].kind == "sub" else (mul.kids[1], mul.kids[0])
    if not _positive_const(c) or sub.kind != "sub" or not sub.attrs or sub.attrs[0] not in _ARITH:
        return False
    if len(sub.kids) != 2 or not _is_neg_inf(sub.kids[0]):
        return False
    return (col.collapse(sub.kids[1]) if col is not None else sub.kids[1]).digest == m


def _strict_sub(n: Node, seen: set[bytes]) -> tuple[Node, Node] | None:
    """(x, M) of a ``sub(x, M)`` (M a max set) that ``n`` reaches through NaN-propagating
    float arithmetic only; None when there is none."""
    if n.digest in seen:
        return None
    seen.add(n.digest)
    if n.kind == "sub" and len(n.kids) == 2 and n.kids[1].kind == "selset" and n.kids[1].attrs[0] == "max":
        if n.attrs and n.attrs[0] in _ARITH:
            return n.kids[0], n.kids[1]
    strict = n.kind in _STRICT or (n.kind == "cvt" and _float_cvt(n))
    if not strict or n.poly is not None:
        return None
    for k in n.kids:
        got = _strict_sub(k, seen)
        if got is not None:
            return got
    return None


def _float_cvt(n: Node) -> bool:
    """A conversion between float types (the walk writes ``f32.bf16`` and ``rn.f32>bf16``)."""
    parts = str(n.attrs[0]).replace(">", ".").split(".") if n.attrs else []
    return len(parts) >= 2 and parts[-1] in _FLOATS and parts[-2] in _FLOATS


def _member(x: Node, m: Node, col: Collapser, storers: int | None) -> bool:
    """x (the stored element) is an element of M's set at every storing thread: its template is
    one of the set's, or a plain load of the set's masked loads whose bound holds at x's index
    there (balanced._lift), and its index there is in that template's runs."""
    sp = col.span(x)
    if sp is None or sp.height != 0 or sp.zero or sp.canon or sp.live is not None:
        return False
    start = sp.start
    bits = [s for s in start.symbols() if is_bit_symbol(s)]
    if any(not b.startswith("tx") for b in bits) or len(bits) > 10:
        return False
    nb = max((int(b[2:]) + 1 for b in bits), default=0)
    threads = [t for t in range(1 << nb) if storers is None or storers >> t & 1] if nb <= 10 else []
    for g in m.kids:
        tmpl, base = g.kids
        bounds: list[Node] = []
        if tmpl.digest != sp.template.digest:
            got = wrapped(sp.template, tmpl)
            if not got:
                continue
            bounds = got
        assert base.poly is not None
        rest = start - base.poly
        if any(s not in bits for s in rest.symbols()):
            continue
        limits = [_bound_limit(r, base.poly) for r in bounds]
        if any(lim is None for lim in limits):
            continue
        runs = g.attrs[0]
        ok = bool(threads)
        for t in threads:
            v = rest.assign_bits({b: t >> int(b[2:]) & 1 for b in bits}).const_value()
            if not any(a <= v < a + c for a, c in runs) or any(v > lim for lim in limits):  # type: ignore[operator]
                ok = False
                break
        if ok:
            return True
    return False


def _bound_limit(r: Node, base: Poly) -> int | None:
    """The largest index offset (from ``base``) where bound r (IX - R + e <= 0) holds."""
    form = bound_form(r)
    if form is None or form[0] != base:
        return None
    return -form[1]


def _rebuild(n: Node, m: bytes, col: Collapser, memo: dict[bytes, Node]) -> Node:
    """n (a root as the walk built it) with every padding term of M written +0, its adds
    refolded (pads.mk_fadd)."""
    if n.poly is not None or not n.kids:
        return n
    got = memo.get(n.digest)
    if got is not None:
        return got
    if pad_term(n, m, col):
        out = ZERO
    else:
        kids = tuple(_rebuild(k, m, col, memo) for k in n.kids)
        if all(a is b for a, b in zip(kids, n.kids, strict=True)):
            out = n
        elif n.kind == "add" and len(kids) == 2 and n.attrs and n.attrs[0] in RN_F32:
            out = mk_fadd(kids[0], kids[1], n.attrs)
        elif n.kind == "shfl" and is_bit_move(n) and is_zero(kids[0]):
            out = kids[0]  # (every lane sends +0)
        else:
            out = Node(n.kind, n.attrs, kids)
    memo[n.digest] = out
    return out
