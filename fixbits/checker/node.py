"""Dependence-tree nodes shared by the PTX and AMDGCN walks.

A node is immutable and carries a digest of its kind, attributes and children, computed once
when it is built, so comparing two trees is comparing two digests. Canonical form is applied at
construction: the children of a commutative combine are sorted by digest, which is exactly the
commutativity an IEEE add or multiply has (swapping operands never changes bits on either vendor:
both return a canonical NaN), and no other rewriting.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from fixbits.checker.forms import Poly

_blake2b = hashlib.blake2b

# Kinds whose children may be reordered without changing a bit of the result.
COMMUTATIVE = frozenset({"add", "mul", "min", "max", "and", "or", "xor", "pack_eq"})
# Kinds whose first two children commute (the exact product of an fma).
COMMUTATIVE_PREFIX2 = frozenset({"fma"})


_VARIANT_KINDS = frozenset({"shfl", "xwarp", "carried", "lane_sym"})
_EXCHANGE = frozenset({"shfl", "xwarp", "carried", "ldmatrix", "state"})
# what the balanced-tree collapse looks for (balanced.COMBINES and the exchanges it proves)
_COMBINING = frozenset({"add", "mul", "max", "min", "shfl", "xwarp"})


# kind -> (2: commutative, 1: first two children commute, 0: neither; variant; exchange; combines)
_KIND_INFO: dict[str, tuple[int, bool, bool, bool]] = {}


def _kind_info(kind: str) -> tuple[int, bool, bool, bool]:
    """The kind's constant facts, looked up once per kind (one dict lookup per node after)."""
    comm = 2 if kind in COMMUTATIVE else (1 if kind in COMMUTATIVE_PREFIX2 else 0)
    info = (comm, kind in _VARIANT_KINDS, kind in _EXCHANGE, kind in _COMBINING)
    _KIND_INFO[kind] = info
    return info


_INT_TABLE: dict[tuple, Node] = {}


def reset_interning() -> None:
    """Bound the table of integer nodes (called between files). A node is a pure function of its
    polynomial's key, so the configs of one kernel share the entries they have in common."""
    global _INT_TABLE
    if len(_INT_TABLE) > _INT_TABLE_MAX:
        _INT_TABLE = {}


_INT_TABLE_MAX = 400_000


_PREFIXES: dict[tuple, bytes] = {}


def _prefix(kind: str, attrs: tuple) -> bytes:
    """The digest's leading bytes for (kind, attrs): the attrs' repr is built once per distinct
    pair (attrs that cannot be hashed are encoded every time)."""
    try:
        got = _PREFIXES.get((kind, attrs))
    except TypeError:
        return _encode(kind, attrs)
    if got is None:
        got = _encode(kind, attrs)
        if len(_PREFIXES) > 200_000:
            _PREFIXES.clear()
        _PREFIXES[(kind, attrs)] = got
    return got


def _encode(kind: str, attrs: tuple) -> bytes:
    return kind.encode() + (b"\x00()\x00" if attrs == () else b"\x00" + repr(attrs).encode() + b"\x00")


def _digest_of(n: Node) -> bytes:
    return n.digest


class Node:
    """One value of the symbolic thread."""

    __slots__ = ("kind", "attrs", "kids", "digest", "poly", "variant", "exchange", "combines")
    kind: str
    attrs: tuple
    kids: tuple[Node, ...]
    digest: bytes
    poly: Poly | None
    variant: bool
    exchange: bool
    combines: bool  # some node of the tree is a combine or an exchange (balanced.py may rewrite it)

    def __init__(self, kind: str, attrs: tuple = (), kids: tuple[Node, ...] = (), poly: Poly | None = None):
        info = _KIND_INFO.get(kind)
        if info is None:
            info = _kind_info(kind)
        comm, variant, exchange, combines = info
        nk = len(kids)
        if comm and nk > 1:
            if comm == 2:
                if nk == 2:
                    # (what the stable sort by digest does to two children, without its call)
                    a, b = kids
                    kids = (b, a) if b.digest < a.digest else (a, b)
                else:
                    kids = tuple(sorted(kids, key=_digest_of))
            else:
                a, b = kids[0], kids[1]
                if b.digest < a.digest:
                    a, b = b, a
                kids = (a, b) + tuple(kids[2:])
        self.kind = kind
        self.attrs = attrs
        self.kids = kids
        self.poly = poly
        if poly is None:
            try:
                pre = _PREFIXES.get((kind, attrs))
            except TypeError:
                pre = _encode(kind, attrs)
            if pre is None:
                pre = _prefix(kind, attrs)
        else:
            pre = _encode(kind, attrs)  # (int nodes are interned)
            if not variant:
                variant = poly.is_variant()
        if nk:
            # one digest call over the concatenation: the same bytes as feeding them one by one
            self.digest = _blake2b(pre + b"".join([k.digest for k in kids]), digest_size=16).digest()
            for k in kids:
                if k.variant:
                    variant = True
                if k.exchange:
                    exchange = True
                if k.combines:
                    combines = True
        else:
            self.digest = _blake2b(pre, digest_size=16).digest()
        self.combines = combines
        self.variant = variant
        # a value that came from another lane, warp or iteration: no change of coordinates removes it
        self.exchange = exchange

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Node) and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __repr__(self) -> str:
        return render(self, depth=3)

    def hex(self) -> str:
        return self.digest.hex()[:16]


def int_node(p: Poly) -> Node:
    """The node of an integer polynomial; one node per polynomial (hash-consed on the
    polynomial's key, which is all the node holds)."""
    k = p.key()
    n = _INT_TABLE.get(k)
    if n is None:
        # what Node("int", (k,), (), poly=p) builds, without its generic branches
        n = Node.__new__(Node)
        n.kind = "int"
        n.attrs = attrs = (k,)
        n.kids = ()
        n.poly = p
        n.digest = _blake2b(b"int\x00" + repr(attrs).encode() + b"\x00", digest_size=16).digest()
        n.variant = p.is_variant()
        n.exchange = False
        n.combines = False
        _INT_TABLE[k] = n
    return n


def const_bits(value: int, width: int) -> Node:
    """A constant by its bit pattern (floats included: 0f3F800000 is 1.0)."""
    return int_node(Poly.const(value & ((1 << width) - 1)))


def opaque(text: str, kids: tuple[Node, ...] = ()) -> Node:
    """An instruction the walk does not model: matched on its own text over its operand nodes."""
    return Node("opaque", (text,), kids)


def render(n: Node, depth: int = 4) -> str:
    """Short human-readable form of a tree (for messages; not part of the signature)."""
    if n.kind == "int":
        assert n.poly is not None
        return f"[{n.poly.text()}]"
    if depth <= 0:
        return f"{n.kind}(…)"
    attrs = ",".join(str(a) for a in n.attrs if not isinstance(a, tuple)) if n.attrs else ""
    kids = ", ".join(render(k, depth - 1) for k in n.kids)
    head = n.kind + (f"<{attrs}>" if attrs else "")
    return f"{head}({kids})" if kids else head


@dataclass(frozen=True)
class Root:
    """One stored output: the pointer parameter it is written through, its bytes and its tree."""

    param: str
    nbytes: int
    address: Node
    value: Node
    relative: bool  # True when the tree is expressed in the output's own coordinates
    # launch-specialised walks: the threads of the block that may run the store (a bitmask;
    # None: any); read by exp_pads.fold, which needs the stored element only where it is stored
    storers: int | None = field(default=None, compare=False, repr=False)
