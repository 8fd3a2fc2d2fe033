"""A root that stays physical, read as the stores of each thread of the block (signature.py).

A root (address A, value V) over the thread bits of a block of 2^n threads stands for the pairs
{(A(t), V(t)) : t a thread}. When each pair, with the thread's bits made constants, is relative on
its own, the root is replaced by those relative pairs (repeats counted once, as build() does for
one thread's repeats): the same set of stores, each in its output's own coordinates. This is how
a block that reduces several rows (Inductor's XBLOCK, ``select(tx0 == 0, row 0, shfl(row 1))``)
reaches the signature of one row per block.

V(t) is V with thread t's bits substituted, simplified only where that is exact:
* an integer form: the bits replaced by 0/1;
* ``cmp`` that becomes constant: signed ``d <= 0`` / ``d == 0`` decided on the integer d (the
  walk's canonical form, no wrap assumed, as launch.pred_truth); ``d == 0`` (signed or not)
  false only when 0 < |d| < 2^16 (no wrap modulo the setp width can make two integers that
  close equal, as launch.thread_truths); a decided ``select`` is its arm;
* ``shfl.sync.bfly b`` over the whole warp (signs.is_bit_move, the criterion of the balanced
  proof): thread t receives the operand as evaluated at thread t ^ b;
* ``xwarp``: the reader's address at t; the history (the writers' own bits) is left as it is;
* ``balanced``: its start at t (the template has no coordinate).
Any other node that has a thread, block or loop symbol below and is not a pointwise float or
integer operation makes the expansion fail: the root then stays physical (can only split).
"""

from __future__ import annotations

from fixbits.checker.forms import Poly, is_bit_symbol
from fixbits.checker.launch import U_EQ_BOUND, decide_cmp, join_truths
from fixbits.checker.node import Node, int_node
from fixbits.checker.signs import is_bit_move

_MAX_BITS = 10
_POINTWISE = frozenset({
    "add", "sub", "mul", "fma", "div", "sqrt", "rsqrt", "rcp", "ex2", "lg2", "max", "min", "neg",
    "abs", "fabs", "cvt", "canon", "masked", "load", "pack", "slice", "and", "or", "not", "true",
})  # fmt: skip


def thread_bits(ntid: tuple[int, int, int] | None) -> int | None:
    """n for a block of 2^n threads along x only; None otherwise."""
    if ntid is None or ntid[1] != 1 or ntid[2] != 1 or ntid[0] < 1 or ntid[0] & (ntid[0] - 1):
        return None
    n = ntid[0].bit_length() - 1
    return n if n <= _MAX_BITS else None


class ThreadEval:
    """V(t) for the threads of a block of 2^nbits threads (memoised per node and thread)."""

    def __init__(self, nbits: int) -> None:
        self.nbits = nbits
        self.memo: dict[tuple[bytes, int], Node | None] = {}

    def poly_at(self, p: Poly, t: int) -> Poly | None:
        values: dict[str, int] = {}
        for s in p.symbols():
            if is_bit_symbol(s):
                if s[:2] != "tx" or int(s[2:]) >= self.nbits:
                    return None
                values[s] = t >> int(s[2:]) & 1
        return p.assign_bits(values) if values else p

    def at(self, n: Node, t: int) -> Node | None:
        if not n.variant and not n.exchange:
            return n
        key = (n.digest, t)
        if key in self.memo:
            return self.memo[key]
        res = self._at(n, t)
        self.memo[key] = res
        return res

    def _at(self, n: Node, t: int) -> Node | None:
        if n.poly is not None:
            p = self.poly_at(n.poly, t)
            return None if p is None else (n if p is n.poly else int_node(p))
        k = n.kind
        if k == "shfl":
            if not is_bit_move(n):
                return None
            b = n.kids[1].poly
            assert b is not None
            return self.at(n.kids[0], t ^ b.const_value())
        if k == "xwarp":
            a = self.at(n.kids[0], t)
            return None if a is None else Node(k, n.attrs, (a, n.kids[1]))
        if k == "balanced":
            s = self.at(n.kids[1], t)
            return None if s is None else Node(k, n.attrs, (n.kids[0], s))
        if k == "cmp":
            kids = [self.at(x, t) for x in n.kids]
            if any(x is None for x in kids):
                return None
            truth = _decide(n.attrs, kids)  # type: ignore[arg-type]
            if truth is not None:
                return _const_pred(truth)
            return Node(k, n.attrs, tuple(kids))  # type: ignore[arg-type]
        if k == "select":
            p = self.at(n.kids[0], t)
            if p is None:
                return None
            truth = _truth(p)
            if truth is not None:
                return self.at(n.kids[1] if truth else n.kids[2], t)
            a, b = self.at(n.kids[1], t), self.at(n.kids[2], t)
            if a is None or b is None:
                return None
            return Node(k, n.attrs, (p, a, b))
        if k not in _POINTWISE:
            return None
        kids = []
        for x in n.kids:
            y = self.at(x, t)
            if y is None:
                return None
            kids.append(y)
        if k in ("and", "or", "not"):
            vals = [_truth(x) for x in kids]
            if k == "not":
                got = None if vals[0] is None else not vals[0]
            else:
                got = join_truths(k, vals)
            if got is not None:
                return _const_pred(got)
        return Node(k, n.attrs, tuple(kids))


def _const_pred(v: bool) -> Node:
    return Node("true") if v else Node("not", (), (Node("true"),))


def _truth(p: Node) -> bool | None:
    if p.kind == "true":
        return True
    if p.kind == "not" and len(p.kids) == 1 and p.kids[0].kind == "true":
        return False
    return None


def _decide(attrs: tuple, kids: list[Node]) -> bool | None:
    if len(kids) != 2 or attrs[:2] not in (("le", "s"), ("eq", "s"), ("eq", "u")):
        return None
    d, z = kids[0].poly, kids[1].poly
    if d is None or z is None or not d.is_const() or not z.is_const() or z.const_value() != 0:
        return None
    v = d.const_value()
    if attrs[0] == "eq" and v != 0 and not -U_EQ_BOUND < v < U_EQ_BOUND:
        return None  # equal modulo a register width is not excluded
    return decide_cmp(attrs[0], v, v)
