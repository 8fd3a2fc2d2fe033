"""+0.0 padding of launch-specialised walks: the folds and where ``canon`` is the value itself.

A load the launch masks off for every thread keeps the register's ``mov 0``: +0.0. Folding it
(``x + (+0) = canon(x)``) makes a tile wider than the row meet the exact-width one; ``canon(x)``
is x with -0 turned into +0 and any NaN into the canonical NaN. The marker is dropped at a store
where x is provably neither at every storing thread (signs.py, ``PTXWalk._uncanon``).

The checker's standing assumption on NVIDIA fp32 arithmetic (add, mul, fma, round to nearest,
subnormals kept) is that every NaN result is the canonical NaN.
"""

from __future__ import annotations

from fixbits.checker.node import Node

# fp32 add / mul modifiers read as round to nearest even with subnormals kept (no .ftz, .sat
# or other rounding); only these fold
RN_F32 = frozenset({"f32", "rn.f32"})
WIDEN = frozenset({"f32.f16", "f32.bf16"})  # exact float widenings


def const_of(n: Node) -> int | None:
    if n.poly is not None and n.poly.is_const():
        return n.poly.const_value()
    return None


def is_bit_move(n: Node) -> bool:
    """``shfl.sync.bfly`` over the whole warp: every lane receives lane ^ b's register whole."""
    if n.kind != "shfl" or n.attrs != ("bfly",) or len(n.kids) != 4:
        return False
    b, c, mask = (const_of(k) for k in n.kids[1:])
    return b is not None and 0 <= b < 32 and c == 31 and mask in (-1, 0xFFFFFFFF)


def is_idx_move(n: Node) -> bool:
    """``shfl.sync.idx`` over the whole warp with clamp 31 and a lane operand that is a form
    (thread_roots reads it at each thread): lane t receives lane (b at t) mod 32's register."""
    if n.kind != "shfl" or n.attrs != ("idx",) or len(n.kids) != 4 or n.kids[1].poly is None:
        return False
    c, mask = const_of(n.kids[2]), const_of(n.kids[3])
    return c == 31 and mask in (-1, 0xFFFFFFFF)


def is_zero(n: Node) -> bool:
    """The all-zero bit pattern: +0.0 in every float width."""
    return const_of(n) == 0


def zero_result(kind: str, attrs: tuple, kids: tuple[Node, ...] | list[Node]) -> bool:
    """An operation whose result is +0 exactly: ``mul.f32`` / ``mul.rn.f32`` of +0 by +0 (and,
    contracted by ptxas into the add it feeds, an fma whose exact product is +0: that add of +0),
    or an exact widening (f16 / bf16 to f32) of +0."""
    if not attrs:
        return False
    if kind == "cvt" and len(kids) == 1 and attrs[0] in WIDEN:
        return is_zero(kids[0])
    return kind == "mul" and len(kids) == 2 and attrs[0] in RN_F32 and is_zero(kids[0]) and is_zero(kids[1])


def contractable(n: Node) -> bool:
    """A ``mul.f32`` with no rounding mode: ptxas may fuse it into an fma with the add it feeds."""
    return n.kind == "mul" and bool(n.attrs) and n.attrs[0] == "f32"


def is_square(n: Node) -> bool:
    """``mul.f32`` / ``mul.rn.f32`` or ``fma.rn.f32`` whose two factors are one operand."""
    if n.kind == "mul" and len(n.kids) == 2 and n.attrs and n.attrs[0] in RN_F32:
        return n.kids[0].digest == n.kids[1].digest
    if n.kind == "fma" and len(n.kids) == 3 and n.attrs == ("rn.f32",):
        return n.kids[0].digest == n.kids[1].digest
    return False


def mk_fadd(a: Node, b: Node, attrs: tuple) -> Node:
    """``add.rn.f32`` with +0.0 padding folded (launch-specialised walks only).

    ``canon(x)`` is the node for ``x + (+0.0)``: x itself, except -0 -> +0 and any NaN -> the
    canonical NaN. The rules, for this add only (round to nearest, no flush to zero; NVIDIA's
    add returns the canonical NaN for every NaN result):

    * ``+0 + +0 = +0``.
    * ``x + +0 = canon(x)``, and ``canon(x) + +0 = canon(canon(x)) = canon(x)``.
    * ``canon(x) + y = canon(x + y)`` for every x, y. Proof: x NaN: both are the canonical NaN.
      x = -0: +0 + y and canon(-0 + y) agree for y = +-0 (+0), for y NaN (canonical NaN) and for
      any other y (y + +-0 = y exactly, and y is neither -0 nor NaN so canon(y) = y). Otherwise
      canon(x) = x, and x + y is not -0 (under round to nearest a sum is -0 only when both
      operands are -0: an exactly-zero sum of opposite signs is +0, and a non-zero exact sum
      never rounds to zero because subnormal sums are exact) and any NaN result is already
      canonical, so canon(x + y) = x + y.

    So a canon marker floats to the top of the add tree it sits in, and two folded trees are
    equal values when their folded shapes and markers agree; the marker is kept (a tree without
    it may be -0 where the padded one is +0), so folding only merges what is equal.

    An ``add.f32`` (no rounding mode) of a ``mul.f32`` is not folded: ptxas may contract the
    pair into one fma, whose exact sum can be a negative value that rounds to -0 (``mk_ffma``),
    so neither rule above is proven for it."""
    if attrs[0] == "f32" and (contractable(a) or contractable(b)):
        return Node("add", attrs, (a, b))
    if is_zero(a) and is_zero(b):
        return a
    if is_zero(a) or is_zero(b):
        x = b if is_zero(a) else a
        return x if x.kind == "canon" else Node("canon", (), (x,))
    if a.kind == "canon" or b.kind == "canon":
        xa = a.kids[0] if a.kind == "canon" else a
        xb = b.kids[0] if b.kind == "canon" else b
        return Node("canon", (), (Node("add", attrs, (xa, xb)),))
    return Node("add", attrs, (a, b))


def mk_ffma(a: Node, b: Node, c: Node, attrs: tuple) -> Node:
    """``fma.rn.f32`` with +0.0 padding folded (launch-specialised walks only; ``mk_fadd``):
    ``fma(+0, +0, c) = c + (+0)``, since the exact product is +0 and one rounding of +0 + c is
    ``mk_fadd``'s add. Nothing else folds: with a product of other operands (a square included)
    ``fma(a, b, canon(c))`` and ``canon(fma(a, b, c))`` part where the exact sum is a negative
    value below half the smallest subnormal (one rounds it to -0, the other gives +0)."""
    if is_zero(a) and is_zero(b):
        return mk_fadd(a, c, attrs)
    return Node("fma", attrs, (a, b, c))


def nonneg(n: Node, memo: dict[bytes, bool]) -> bool:
    """n is, at every thread, +0, a positive number, +inf or the canonical NaN: so n + (+0) = n
    bit for bit. Read from the tree alone (no launch facts, unlike signs.py).

    Rules: +0; ``canon(x)`` of such an x; ``add.f32`` / ``add.rn.f32`` of two such values or
    ``ex2.approx`` results (``_weak``; the
    exact sum of two non-negative values is non-negative, a zero sum is +0 + +0, NaN results are
    canonical; an ``add.f32`` that ptxas fuses with a square feeding it is an fma of that square,
    whose exact sum is non-negative too); a square ``x * x`` (the exact product is +0 or positive
    and rounds to +0 or up) and ``fma.rn.f32(x, x, c)`` with c such a value; a bit-move ``shfl``
    of one; a ``balanced`` tree (balanced.py: a proven tree of one add over instances of its
    template) of such adds over a template that is one. A shared-memory read is not one: unless
    a store is proven to reach it, it may return bytes left from before."""
    got = memo.get(n.digest)
    if got is not None:
        return got
    memo[n.digest] = False  # (acyclic: guards re-entry only)
    k = n.kind
    if is_zero(n):
        ok = True
    elif k == "canon":
        ok = nonneg(n.kids[0], memo)
    elif k == "add" and len(n.kids) == 2 and n.attrs and n.attrs[0] in RN_F32:
        ok = all(_weak(x, memo) for x in n.kids)
    elif is_square(n):
        ok = n.kind == "mul" or nonneg(n.kids[2], memo)
    elif k == "shfl":
        ok = is_bit_move(n) and nonneg(n.kids[0], memo)
    elif k == "balanced" and len(n.kids) == 2 and n.attrs and n.attrs[0][0] == "add":
        # (height >= 1: its root is an add, which makes a NaN of its leaves canonical)
        ok = tuple(n.attrs[0][1])[:1] in (("f32",), ("rn.f32",)) and _weak(n.kids[0], memo)
    else:
        ok = False
    memo[n.digest] = ok
    return ok


def _weak(n: Node, memo: dict[bytes, bool]) -> bool:
    """+0, positive, +inf or any NaN: an add of two such values is ``nonneg`` (its NaN results
    are canonical). ``ex2.approx`` is one: 2^x is positive, rounds or flushes to +0 below the
    smallest subnormal, is +0 at -inf and NaN at NaN."""
    return nonneg(n, memo) or (n.kind == "ex2" and bool(n.attrs) and str(n.attrs[0]).startswith("approx."))
