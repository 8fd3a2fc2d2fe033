"""Order-free max / min reductions as the set of elements they select from.

PTX defines ``max`` and ``min`` on floats as a total order with NaN as a missing value
(``.NaN``: NaN absorbs) and +0.0 above -0.0 (PTX ISA 9.1, "Floating Point Instructions: max");
session 21's H200 probe found them commutative and associative on raw bits. A tree of one such
instruction over at least two leaves is then a function of the set of values it reads: the
greatest non-NaN one, or the canonical NaN when all are NaN (its root combines two NaNs), with
``.NaN`` any NaN giving the canonical NaN. Its shape and how often an element enters it do not
matter. A row max of a softmax is such a tree, and its shape moves with the layout (per-thread
chains, butterflies, a cross-warp exchange). So instead of its shape the signature keeps its
combine and the set of elements it reads: two layouts that read the same set meet. ``.abs`` with
``.xorsign`` is not such a function (an element met twice loses its sign), ``.relu`` clamps, and
the packed x2 forms are split into halves by the walk: those stay trees.

A set is a function of the thread: each element is (template, index polynomial), and a
butterfly renames the partner's lane bits. ``{p, p with bit b flipped}`` equals
``{p at b = 0, p at b = 1}`` at every thread, which is how the sets of a butterfly lose their
lane bits; a cross-warp read renames the writer's bits as ``Collapser.slots`` proves for
balanced spans. Only equal sets meet, so a set this module cannot prove stays a tree.

Launch-specialised walks add two exact rewrites: a padding value (the register a masked load
leaves) that every thread's set holds is an element of the set; and an element that reads a
masked load is written as the padding where the load's bound fails at its index, and as the
masked template where a plain load's index is inside the bound (mask_bounds.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fixbits.checker.forms import Poly, add_terms, is_bit_symbol
from fixbits.checker.mask_bounds import fails_on, holds_on, masked_in, replace_node, wrapped
from fixbits.checker.node import Node, int_node
from fixbits.checker.pads import const_of, is_bit_move

if TYPE_CHECKING:
    from fixbits.checker.balanced import Collapser

SET_KINDS = frozenset({"max", "min"})
_NOT_A_SET = frozenset({"abs", "xorsign", "relu"})
Elem = tuple[bytes, Poly]  # (template digest, index)


@dataclass(frozen=True)
class ElemSet:
    """What a value reads: its combine ((kind, attrs); None for one element) and elements."""

    comb: tuple | None
    elems: frozenset[Elem]
    # launch-specialised walks: per padding value (its node's digest), the threads whose set
    # holds it because a masked load of theirs reads it (a bitmask over the block's threads)
    pads: tuple[tuple[bytes, int], ...] = ()


def is_set_combine(kind: str, attrs: tuple) -> bool:
    if kind not in SET_KINDS or len(attrs) != 1 or not isinstance(attrs[0], str):
        return False
    return not (_NOT_A_SET & set(attrs[0].split(".")))


class SetProver:
    """The element sets of the max / min trees of one signature (memoised by digest)."""

    def __init__(
        self, col: Collapser, masked_false: dict[bytes, int] | None = None, nbits: int | None = None
    ) -> None:
        self.col = col
        self.memo: dict[bytes, ElemSet | None] = {}
        self.templates: dict[bytes, Node] = {}
        # launch facts (ptx walk's masked_false): where a masked load keeps its padding
        self.masked_false = masked_false if nbits is not None else None
        self.nbits = nbits

    def of(self, n: Node) -> ElemSet | None:
        got = self.memo.get(n.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        res = self._of(n)
        self.memo[n.digest] = res
        return res

    def _of(self, n: Node) -> ElemSet | None:
        if n.kind in SET_KINDS and len(n.kids) >= 2:
            comb = (n.kind, n.attrs)
            if not is_set_combine(n.kind, n.attrs):
                return None
            parts = []
            pads: dict[bytes, int] = {}
            bit = _butterfly_bit(n)
            # (the butterfly's shuffle, as _butterfly_bit picks it: only whether it has a set, its
            # combine and its padding facts are read below, not its elements)
            sh = None if bit is None else (0 if n.kids[0].kind == "shfl" else 1)
            for i, k in enumerate(n.kids):
                s = self._partner(k) if i == sh else self.of(k)
                if s is None or s.comb not in (None, comb):
                    return None
                parts.append(s.elems)
                for d, m in s.pads:
                    pads[d] = pads.get(d, 0) | m
            if bit is not None:
                # x with its butterfly partner over one lane bit: each element's pair is there, so
                # the union is the set at both values of the bit (expand's rewrite, without its search)
                x = set(parts[0] if n.kids[0].kind != "shfl" else parts[1])
                return ElemSet(comb, frozenset(_both(x, bit)), _pads(pads))
            # each part is expanded already: a new pair has an element outside the largest part
            parts.sort(key=len)
            acc = set(parts[-1])
            for x in parts[:-1]:
                acc |= x
            return ElemSet(comb, expand(acc, [e for x in parts[:-1] for e in x]), _pads(pads))
        if n.kind == "shfl":
            return self._shfl(n)
        if n.kind == "xwarp":
            got = self._xwarp(n)
            if got is not None:
                return got
        sp = self.col.span(n)
        if (sp is None or sp.zero) and n.kind not in ("shfl", "xwarp"):
            # a value no thread coordinate enters (a register the launch leaves at its -inf
            # padding): one element, the same at every thread
            c = self.col.collapse(n)
            if self.col.thread_free(c):
                self.templates[c.digest] = c
                return ElemSet(None, frozenset({(c.digest, Poly.const(0))}))
            return None
        if sp is None or sp.zero or sp.canon or sp.live is not None:
            return None
        t = sp.template
        self.templates[t.digest] = t
        if sp.height == 0:
            return ElemSet(None, frozenset({(t.digest, sp.start)}), self._pad_of(n))
        if sp.combine is None or not is_set_combine(*sp.combine):
            return None
        return ElemSet(
            sp.combine, expand({(t.digest, sp.start + Poly.const(i)) for i in range(1 << sp.height)})
        )

    def _partner(self, n: Node) -> ElemSet | None:
        """``of(n)`` for the shuffle of a butterfly ``max(x, shfl.bfly(x, 2^k))``, without its
        elements unless memoised already: the butterfly's set is made from x's elements alone."""
        got = self.memo.get(n.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        return self._shfl(n, elements=False)

    def _shfl(self, n: Node, elements: bool = True) -> ElemSet | None:
        """x's set with the shuffle's lane bits flipped; ``elements=False``: the same None,
        combine and padding facts, with no elements built."""
        from fixbits.checker.balanced import _flip_bit, flippable

        if not is_bit_move(n):
            return None
        off = const_of(n.kids[1])
        assert off is not None
        s = self.of(n.kids[0])
        if s is None:
            return None
        syms = [f"tx{k}" for k in range(5) if off >> k & 1]
        out = set()
        for t, p in s.elems:
            if not elements:
                if not all(flippable(p, sym) for sym in syms):
                    return None
                continue
            for sym in syms:
                q = _flip_bit(p, sym)
                if q is None:
                    return None
                p = q
            out.add((t, p))
        pads = s.pads
        if pads and self.nbits is not None:
            pads = tuple((d, _xor_threads(m, off, self.nbits)) for d, m in pads)
        return ElemSet(s.comb, frozenset(out), pads)

    def _xwarp(self, n: Node) -> ElemSet | None:
        from fixbits.checker.balanced import rename_bits

        slots = self.col.slots(n)
        if slots is None:
            return None
        lb, free, picks = slots
        sets: dict[int, ElemSet] = {}
        for mask, value, mapping in picks:
            s = self.of(value)
            if s is None:
                return None
            out = set()
            for t, p in s.elems:
                q = rename_bits(p, mapping)
                if q is None:
                    return None  # the writer's set depends on a thread bit the address does not fix
                out.add((t, q))
            sets[mask] = ElemSet(s.comb, expand(out), s.pads)
        base = sets[0]
        if any(x.comb != base.comb for x in sets.values()):
            return None
        # the reader bits that pick the store (another row's partial, say) must move every
        # element by one amount each, free of thread bits (a row stride): then the set is one
        # function of the reader's bits
        coefs: list[Poly] = []
        for i in range(len(free)):
            c = _shift(base.elems, sets[1 << i].elems)
            if c is None:
                return None
            coefs.append(c)
        for mask, x in sets.items():
            d = Poly.const(0)
            for i, c in enumerate(coefs):
                if mask >> i & 1:
                    d = d + c
            if x.elems != frozenset((t, p + d) for t, p in base.elems):
                return None
        move = Poly.const(0)
        for i, pos in enumerate(free):
            move = move + Poly.sym(lb[pos]) * coefs[i]
        return ElemSet(
            base.comb, expand({(t, p + move) for t, p in base.elems}), self._read_pads(lb, free, picks, sets)
        )

    def node(self, s: ElemSet) -> Node:
        """The set as a tree; a padding value every thread's set holds is one of its elements
        (so a tile that also holds it in registers the launch masks off wholly meets it)."""
        assert s.comb is not None
        elems = set(s.elems)
        if self.nbits is not None:
            full = (1 << (1 << self.nbits)) - 1
            elems.update((d, Poly.const(0)) for d, m in s.pads if m == full)
        return set_node(s.comb, self._lifted(elems), self.templates)

    def _lifted(self, elems: set[Elem]) -> set[Elem]:
        """Plain loads written as the set's masked loads of the same index where the launch
        proves the mask true (balanced._lift): one element, whichever register it came from."""
        masked = [self.templates[t] for t in {t for t, _ in elems} if _has_bound(self.templates[t])]
        if not masked:
            return elems
        out = set()
        for t, p in elems:
            tmpl = self.templates[t]
            found = masked_in(tmpl)
            if len(found) == 1 and fails_on(found[0].kids[2], p, 0):
                # a masked load whose bound is false here reads the register's padding
                pad = self.col.collapse(replace_node(tmpl, found[0].digest, found[0].kids[1]))
                if self.col.thread_free(pad):
                    self.templates[pad.digest] = pad
                    out.add((pad.digest, Poly.const(0)))
                    continue
            for m in masked:
                bounds = wrapped(tmpl, m) if m.digest != t else None
                if bounds and all(holds_on(r, p, 0) for r in bounds):
                    t = m.digest
                    break
            out.add((t, p))
        return out

    def _pad_of(self, n: Node) -> tuple[tuple[bytes, int], ...]:
        """An element read through one masked load: its padding value (the element with the
        load replaced by what the register kept) and the threads where the launch masks the load
        off in every block; () when not known."""
        if not self.masked_false:
            return ()
        found = masked_in(n, 2)
        if len(found) != 1 or masked_in(n, 3):
            return ()
        (mk,) = found
        f = self.masked_false.get(mk.digest, 0)
        if not f:
            return ()
        pad = self.col.collapse(replace_node(n, mk.digest, mk.kids[1]))
        if not self.col.thread_free(pad):
            return ()
        self.templates[pad.digest] = pad
        return ((pad.digest, f),)

    def _read_pads(
        self, lb: dict[int, str], free: list[int], picks: list, sets: dict[int, ElemSet]
    ) -> tuple[tuple[bytes, int], ...]:
        """The writers' padding facts as each reader of a shared read sees them: reader r reads
        the writer its pick's mapping names (a writer bit the address leaves open must not change
        the fact, else the fact is dropped, which only keeps sets apart)."""
        nb = self.nbits
        if nb is None or not any(x.pads for x in sets.values()):
            return ()
        names = {pos: _tx(sym) for pos, sym in lb.items()}
        if any(v is None for v in names.values()):
            return ()
        size = 1 << nb
        # per pick: the writer as a function of the reader (bit k of the writer: a constant, or
        # reader bit j), after checking that the bits the address leaves open change no fact
        plans = []
        for m, (_mask, _value, mapping) in enumerate(picks):
            plan: list[tuple[int, int | None, int]] = []
            fixed = 0
            for sym, val in mapping.items():
                k = _tx(sym)
                if k is None:
                    return ()
                fixed |= 1 << k
                if val.is_const():
                    plan.append((k, None, val.const_value()))
                    continue
                syms = val.symbols()
                rk = _tx(next(iter(syms))) if len(syms) == 1 else None
                if rk is None or val != Poly.sym(f"tx{rk}"):
                    return ()
                plan.append((k, rk, 0))
            for _d, wmask in sets[m].pads:
                for k in range(nb):
                    if not fixed >> k & 1 and _xor_threads(wmask, 1 << k, nb) != wmask:
                        return ()
            plans.append((plan, dict(sets[m].pads)))
        out: dict[bytes, int] = {}
        for d in {d for x in sets.values() for d, _ in x.pads}:
            acc = 0
            for r in range(size):
                m = sum(1 << i for i, pos in enumerate(free) if r >> names[pos] & 1)  # type: ignore[operator]
                plan, wpads = plans[m]
                w = 0
                for k, rk, c in plan:
                    w |= ((r >> rk & 1) if rk is not None else c) << k
                if wpads.get(d, 0) >> w & 1:
                    acc |= 1 << r
            if acc:
                out[d] = acc
        return _pads(out)


def set_node(comb: tuple, elems: Iterable[Elem], templates: dict[bytes, Node]) -> Node:
    """The set as a tree: per template and index base (the index without its constant), the
    constant offsets as runs; groups in a fixed order, so equal sets give equal nodes."""
    groups: dict[tuple[bytes, tuple], tuple[Poly, set[int]]] = {}
    for t, p in elems:
        c = p.terms.get((), 0)
        bk = p.key()[1:] if c else p.key()  # (without the constant, which sorts first)
        g = groups.get((t, bk))
        if g is None:
            g = groups[(t, bk)] = (p - Poly.const(c) if c else p, set())
        g[1].add(c)
    kids = []
    for (t, _bk), (base, cs) in sorted(groups.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
        kids.append(Node("elems", (_runs(sorted(cs)),), (templates[t], int_node(base))))
    return Node("selset", comb, tuple(kids))


def normal_set(n: Node) -> Node:
    """A set node whose index bases hold constants (a relative rewrite names a later row's start
    as a shifted base) built again, its constants in the runs: equal sets, equal nodes."""
    if not any(g.kids[1].poly is not None and g.kids[1].poly.terms.get((), 0) for g in n.kids):
        return n
    return map_indices(n, lambda p: p, force=True) or n


def map_indices(n: Node, f: Callable[[Poly], Poly | None], force: bool = False) -> Node | None:
    """A set node with every element's index mapped through ``f`` (a thread's value of it),
    built again so that equal sets still give equal nodes; None where ``f`` gives None."""
    bases = []
    for g in n.kids:
        assert g.kids[1].poly is not None
        b = f(g.kids[1].poly)
        if b is None:
            return None
        bases.append(b)
    if not force and all(b == g.kids[1].poly for b, g in zip(bases, n.kids, strict=True)):
        return n  # (no index moves: the same set)
    elems: set[Elem] = set()
    templates: dict[bytes, Node] = {}
    for g, b in zip(n.kids, bases, strict=True):
        tmpl = g.kids[0]
        templates[tmpl.digest] = tmpl
        for first, count in g.attrs[0]:
            elems.update((tmpl.digest, b + Poly.const(first + i)) for i in range(count))
    return set_node(n.attrs, elems, templates)


def expand(elems: set[Elem], todo: list[Elem] | None = None) -> frozenset[Elem]:
    """Each pair {p, p with thread bit b flipped} of one template as {p at b = 0, p at b = 1}:
    the same set at every thread, with one bit fewer. ``todo``: the elements a pair may start
    from (by default all; a union of expanded sets passes the smaller ones' elements)."""
    from fixbits.checker.balanced import _flip_bit

    out = set(elems)
    todo = list(out) if todo is None else list(todo)
    while todo:
        e = todo.pop()
        if e not in out:
            continue
        t, p = e
        for sym in sorted(p.symbols()):
            if not is_bit_symbol(sym):
                continue
            q = _flip_bit(p, sym)
            if q is None or q == p or (t, q) not in out:
                continue
            out.discard(e)
            out.discard((t, q))
            for r in _at_bit(p, sym):
                if (t, r) not in out:
                    out.add((t, r))
                    todo.append((t, r))
            break
    return frozenset(out)


def _has_bound(n: Node) -> bool:
    """A template that reads a masked load with its launch bound (balanced._elementwise)."""
    if n.kind == "masked" and len(n.kids) == 3:
        return True
    return any(_has_bound(k) for k in n.kids if k.poly is None)


def _butterfly_bit(n: Node) -> str | None:
    """``max(x, shfl.bfly(x, 2^k))`` (either order): the lane bit tx<k>; None otherwise."""
    if len(n.kids) != 2:
        return None
    a, b = n.kids
    sh, x = (a, b) if a.kind == "shfl" else (b, a)
    if not is_bit_move(sh) or sh.kids[0].digest != x.digest:
        return None
    off = const_of(sh.kids[1])
    if not off or off & (off - 1):
        return None
    return f"tx{off.bit_length() - 1}"


def _both(elems: set[Elem], bit: str) -> set[Elem]:
    """{p at bit = 0, p at bit = 1} for each element: the union of a set with its flip over the
    bit, for elements affine in it (any other: the union itself, with its flips)."""
    from fixbits.checker.balanced import _flip_bit

    out: set[Elem] = set()
    for t, p in elems:
        if not any(bit in m for m in p.terms):  # (bit not in p.symbols(), without the set)
            out.add((t, p))
        elif (p.terms.get((bit,)) is not None) and not any(bit in m and m != (bit,) for m in p.terms):
            out.update((t, q) for q in _at_bit(p, bit))
        else:
            q = _flip_bit(p, bit)
            out.add((t, p))
            if q is not None:
                out.add((t, q))
    return out


def _at_bit(p: Poly, bit: str) -> tuple[Poly, Poly]:
    """p at bit = 0 and at bit = 1, for p affine in the bit (``substitute``'s values, directly)."""
    c = p.terms[(bit,)]
    t0 = {m: v for m, v in p.terms.items() if m != (bit,)}
    t1 = dict(t0)
    add_terms(t1, (((), c),))
    return Poly._of(t0), Poly._of(t1)


def _pads(pads: dict[bytes, int]) -> tuple[tuple[bytes, int], ...]:
    return tuple(sorted((d, m) for d, m in pads.items() if m))


def _tx(sym: str) -> int | None:
    return int(sym[2:]) if sym.startswith("tx") and sym[2:].isdigit() else None


def _xor_threads(mask: int, off: int, nbits: int) -> int:
    """A bitmask over threads as seen from thread t ^ off (bit t of the result is bit t ^ off)."""
    out = 0
    for t in range(1 << nbits):
        if mask >> (t ^ off) & 1:
            out |= 1 << t
    return out


def _shift(a: frozenset[Elem], b: frozenset[Elem]) -> Poly | None:
    """The amount d, free of thread bits, with b = a + d (every index moved by d), if any."""
    if len(a) != len(b) or not a:
        return None
    t0, p0 = min(a, key=_order)
    cands = [q - p0 for t, q in b if t == t0]
    for d in cands:
        if not any(is_bit_symbol(x) for x in d.symbols()) and frozenset((t, p + d) for t, p in a) == b:
            return d
    return None


def _order(e: Elem) -> tuple:
    return (e[0], repr(e[1].key()))


def _runs(cs: list[int]) -> tuple[tuple[int, int], ...]:
    """Sorted distinct integers as (first, count) runs of consecutive values."""
    out: list[tuple[int, int]] = []
    for c in cs:
        if out and out[-1][0] + out[-1][1] == c:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((c, 1))
    return tuple(out)
