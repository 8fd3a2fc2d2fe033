"""Integers made from a float's bits, kept as trees until the signature is built.

libdevice's ``log`` (log-softmax's denominator) reads the sum's bits as an integer, shifts and
masks them, and turns the pieces back into floats. The walk writes such an integer as a ``D:``
token: a hash of its inputs' digests, variant because it may hide a thread coordinate. Two
kernels whose sums only meet after the balanced collapse then hash different tokens, and a
variant token keeps its root physical (the launch bound joins its signature).

The walk records what each token stands for (``bits(x)``: the float x's bits read as an integer;
``dtok<op>(inputs)``: an integer instruction over them). Before the collapse, an int node whose
variant symbols are all recorded tokens becomes ``dint<template>(tokens)``: the collapse and the
relative rewrite then see the float trees inside. Tokens made inside a loop body are left alone
(a loop summary renames its registers, not the digests a token was hashed from).
"""

from __future__ import annotations

from fixbits.checker.forms import Mono, Poly, add_terms, is_variant_symbol
from fixbits.checker.node import Node, int_node

# kinds whose trees hold loop state: a token over them is not expanded
_LOOP_KINDS = frozenset({"inloop", "loop", "loopout", "carried", "mmafold"})
_LOOP_SYMS = ("carried:", "IT")


def bits_node(x: Node) -> Node:
    """What ``to_poly`` names for a non-integer node: its bits read as an integer."""
    return Node("bits", (), (x,))


def op_node(op: str, inputs: tuple[Node, ...]) -> Node:
    """What an integer instruction's data token names: the instruction over its inputs."""
    return Node("dtok", (op,), inputs)


class Expander:
    """Rewrites a root's int nodes over recorded tokens into trees (one per walk)."""

    def __init__(self, table: dict[str, Node]):
        self.table = table
        self.memo: dict[bytes, Node] = {}
        self._loopy: dict[bytes, bool] = {}

    def expand(self, n: Node) -> Node:
        if not n.variant:
            return n  # (a token is variant: no recorded one below)
        got = self.memo.get(n.digest)
        if got is not None:
            return got
        if n.poly is not None:
            out = self._int(n)
        elif n.kind in _LOOP_KINDS or not n.kids:
            out = n
        else:
            kids = tuple(self.expand(k) for k in n.kids)
            out = n if all(a is b for a, b in zip(kids, n.kids, strict=True)) else Node(n.kind, n.attrs, kids)
        self.memo[n.digest] = out
        return out

    def _int(self, n: Node) -> Node:
        assert n.poly is not None
        toks: dict[str, Node] = {}
        for s in n.poly.symbols():
            if not is_variant_symbol(s):
                continue
            t = self.table.get(s)
            if t is None or self._has_loop(t):
                return n  # a thread symbol, or a token of unknown meaning: the int stays as it is
            toks[s] = t
        if not toks:
            return n
        names = sorted(toks)
        rename = {s: f"${i}" for i, s in enumerate(names)}
        kids = tuple(self.expand(toks[s]) for s in names)
        return Node("dint", (_renamed(n.poly, rename).key(),), kids)

    def _has_loop(self, n: Node) -> bool:
        got = self._loopy.get(n.digest)
        if got is None:
            if n.kind in _LOOP_KINDS:
                got = True
            elif n.poly is not None:
                got = any(s.startswith(_LOOP_SYMS) for s in n.poly.symbols())
            else:
                got = any(self._has_loop(k) for k in n.kids)
            self._loopy[n.digest] = got
        return got


def canonical(n: Node, memo: dict[bytes, Node]) -> Node:
    """``n`` with each ``dint``'s tokens in digest order and its template renamed to match (the
    tokens' digests change in the collapse, so their order is fixed only after it); two tokens
    that became one tree become one symbol."""
    got = memo.get(n.digest)
    if got is not None:
        return got
    if not n.kids or n.poly is not None:
        out = n
    else:
        kids = tuple(canonical(k, memo) for k in n.kids)
        if n.kind == "dint":
            out = _sorted_dint(n.attrs[0], kids)
        elif all(a is b for a, b in zip(kids, n.kids, strict=True)):
            out = n
        else:
            out = Node(n.kind, n.attrs, kids)
    memo[n.digest] = out
    return out


def _sorted_dint(template: tuple[tuple[Mono, int], ...], kids: tuple[Node, ...]) -> Node:
    order = sorted({k.digest for k in kids})
    rank = {d: i for i, d in enumerate(order)}
    rename = {f"${i}": f"${rank[k.digest]}" for i, k in enumerate(kids)}
    uniq: dict[bytes, Node] = {k.digest: k for k in kids}
    p = _renamed(Poly(dict(template)), rename)
    if not p.symbols():
        return int_node(p)  # (the tokens cancelled)
    return Node("dint", (p.key(),), tuple(uniq[d] for d in order))


def _renamed(p: Poly, rename: dict[str, str]) -> Poly:
    t: dict[Mono, int] = {}
    add_terms(t, ((tuple(sorted(rename.get(s, s) for s in m)), c) for m, c in p.key()))
    return Poly(t)
