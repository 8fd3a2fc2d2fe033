"""Collapse of a balanced reduction tree to its four facts (paper §6.1): the combine with its
rounding, the leaf computation with its coordinate blanked, the height, and where it starts.

A node is collapsed only when the walk *proves* it is the canonical balanced tree over 2^h
consecutive logical elements [start, start + 2^h): every combine joins two subtrees of equal
height over adjacent ranges, whether they sat in one thread's registers, in two lanes (a
butterfly shuffle flips lane bits of the range's start) or in two warps (a shared-memory store
and load renumber the writer's thread bits as the reader's). Then which thread held which element
no longer matters, so layouts that build the same tree reach one signature. Anything the proof
does not cover keeps its physical structure.

Launch-specialised (``Collapser(pads=True)``), a +0.0 pad is a span of its own, the zero span:
an fp32 add of a span and zeros is the span with a ``canon`` marker (pads.mk_fadd: x + (+0) is
canon(x)), zeros and zeros are zeros. So a tile wider than the row, whose upper half the launch
pads, collapses to the exact-width tree under the marker, and the marker goes where the tree is
provably never -0 (pads.nonneg).
"""

from __future__ import annotations

from dataclasses import dataclass

from fixbits.checker.bound_split import decided
from fixbits.checker.exp_pads import pad_term
from fixbits.checker.forms import Poly, add_terms, is_bit_symbol
from fixbits.checker.leaf_pred import index_bound, is_coordinate_pred, relative_pred
from fixbits.checker.loop_leaf import loop_leaf
from fixbits.checker.mask_bounds import fails_on, holds_on, masked_in, replace_node, wrapped
from fixbits.checker.maxsets import SET_KINDS, SetProver
from fixbits.checker.node import Node, int_node
from fixbits.checker.pads import RN_F32, contractable, is_zero, mk_fadd, nonneg

COMBINES = frozenset({"add", "mul", "max", "min"})  # with shfl and xwarp: node._COMBINING
_ELEMENTWISE = frozenset({"cvt", "neg", "abs", "fabs", "mul", "add", "sub", "fma", "ex2", "lg2", "max", "min",
                          "sqrt", "rsqrt", "rcp", "div", "masked", "select"})  # fmt: skip


@dataclass(frozen=True)
class Span:
    """A proven balanced subtree: template (leaf computation, index blanked), height, start."""

    template: Node
    height: int
    start: Poly
    combine: tuple | None  # (kind, attrs) of its combines; None for a leaf
    canon: bool = False  # the value is canon(tree): +0 padding was added to it
    # the value is the tree at the threads whose bits have these values, +0 at the others (a read
    # of shared slots that hold partials for some readers and +0 pads for the others); None: all
    live: tuple[tuple[str, int], ...] | None = None

    @property
    def zero(self) -> bool:
        return self.height < 0


ZERO = Span(int_node(Poly.const(0)), -1, Poly.const(0), None)  # +0.0 padding of any extent


class Collapser:
    def __init__(
        self,
        pads: bool = False,
        masked_false: dict[bytes, int] | None = None,
        nbits: int | None = None,
        masked_preds: dict[bytes, Node | None] | None = None,
    ) -> None:
        self.pads = pads  # a launch-specialised walk: +0 pads are zero spans
        self.masked_preds = masked_preds if pads else None  # (ptx walk: each masked load's predicate)
        self.nonneg_memo: dict[bytes, bool] = {}
        self.memo: dict[bytes, Span | None] = {}
        self.out_memo: dict[bytes, Node] = {}
        self.free_memo: dict[bytes, bool] = {}
        self.slot_memo: dict[bytes, Slots | None] = {}
        self.rebuild_memo: dict[bytes, Node] = {}  # (exp_pads._rebuild, in a licensed copy)
        self.sets = SetProver(self, masked_false if pads else None, nbits)
        # exp_pads.licensed: a copy whose spans read a softmax's exp(-inf - M) padding as +0
        self.license: bytes | None = None
        self._licensed: dict[bytes, Collapser] = {}
        self._args = (pads, masked_false, nbits, masked_preds)

    def slots(self, n: Node) -> Slots | None:
        """``xwarp_slots(n)``, once per read (the span proof and the set prover both ask)."""
        if n.digest not in self.slot_memo:
            self.slot_memo[n.digest] = xwarp_slots(n)
        return self.slot_memo[n.digest]

    def licensed(self, m: bytes) -> Collapser:
        """A collapser for the roots exp_pads.fold has proven NaN wherever M is -inf or NaN:
        there a span of masked loads the launch masks off on its whole range, whose element is
        exp(-inf - M), is the zero span (kept apart from this one's memo)."""
        got = self._licensed.get(m)
        if got is None:
            got = self._licensed[m] = Collapser(*self._args)
            got.license = m
        return got

    def _lower(self, s: Span) -> Span:
        """Under a license: ``s`` as the zero span when its template reads one masked load whose
        bound is false at every index of its range and the padding it then reads is the
        licensed exp(-inf - M) (exp_pads.pad_term); ``s`` otherwise."""
        if s.zero or s.live is not None or self.license is None:
            return s
        found = masked_in(s.template)
        if len(found) != 1:
            return s
        r = found[0].kids[2]
        if not pad_term(replace_node(s.template, found[0].digest, found[0].kids[1]), self.license):
            return s
        if fails_on(r, s.start, s.height):
            return ZERO
        # padding at the threads where one bit b has value v: the tree at the others (a live set)
        for b in sorted(x for x in s.start.symbols() if is_bit_symbol(x)):
            if s.canon or any(b in m and m != (b,) for m in s.start.terms):
                continue
            for v in (0, 1):
                if fails_on(r, s.start.substitute(b, Poly.const(v)), s.height):
                    return Span(s.template, s.height, s.start.substitute(b, Poly.const(1 - v)), s.combine,
                                s.canon, ((b, 1 - v),))  # fmt: skip
        return s

    def _balanced_node(self, s: Span) -> Node:
        """The node of a proven span; launch-specialised, a span whose template reads index
        bounds the launch decides on parts of its range is written by those parts (_by_bounds)."""
        if self.pads and s.combine is not None:
            got = self._by_bounds(s.template, s.start, s.height, s.combine)
            if got is not None and not (isinstance(got, Span) and got.template is s.template):
                node = got if isinstance(got, Node) else self._span_node(got)
                if node is not None:
                    return self._marked(node) if s.canon else node
        out = self._span_node(s)
        assert out is not None  # (the caller's span: height >= 1, a combine, no live set)
        return out

    def _marked(self, n: Node) -> Node:
        """canon(n), or n where it is never -0 nor a non-canonical NaN."""
        if n.kind == "canon" or nonneg(n, self.nonneg_memo):
            return n
        return Node("canon", (), (n,))

    def _span_node(self, s: Span) -> Node | None:
        if s.zero:
            return ZERO.template
        if s.height < 1 or s.combine is None or s.live is not None:
            return None  # (a single element has no node of its own here)
        out = Node("balanced", (s.combine, s.height), (s.template, int_node(s.start)))
        return self._marked(out) if s.canon else out

    def _by_bounds(
        self, t: Node, start: Poly, h: int, comb: tuple, budget: list[int] | None = None
    ) -> Span | Node | None:
        """The balanced tree of template ``t`` over [start, start + 2^h): a span whose bounds
        are decided on the whole range (bound_split.decided), else the combine of its two
        halves, each written so (the balanced tree's own definition); None when a half of
        height 0 is still undecided. Padding halves fold only under an fp32 add with
        rounding to nearest (pads.mk_fadd's rules)."""
        budget = [_SPLIT_BUDGET] if budget is None else budget
        budget[0] -= 1
        if budget[0] < 0:
            return None  # (a bound no narrower range decides, at some thread: give up)
        t2, open_ = decided(t, start, h, {})
        if not open_:
            return ZERO if is_zero(t2) else Span(t2, h, start, comb)
        if h <= 1:
            return None
        half = 1 << (h - 1)
        lo = self._by_bounds(t, start, h - 1, comb, budget)
        hi = self._by_bounds(t, start + Poly.const(half), h - 1, comb, budget)
        if lo is None or hi is None:
            return None
        add_rn = _add_rn(*comb)
        if isinstance(lo, Span) and isinstance(hi, Span):
            if (lo.zero or hi.zero) and not add_rn:
                return None  # (a pad folds only into an RN add)
            got = self._join(lo, hi, comb)  # (two whole halves of one template; a pad)
            if got is not None:
                return got
        a = lo if isinstance(lo, Node) else self._span_node(lo)
        b = hi if isinstance(hi, Node) else self._span_node(hi)
        if a is None or b is None:
            return None
        return mk_fadd(a, b, comb[1]) if add_rn else Node(comb[0], comb[1], (a, b))

    # ---- proofs -----------------------------------------------------------------------------
    def span(self, n: Node) -> Span | None:
        got = self.memo.get(n.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        res = self._span(n)
        self.memo[n.digest] = res
        return res

    def _span(self, n: Node) -> Span | None:
        if n.kind == "load":
            return _leaf(n)
        if self.pads and is_zero(n):
            return ZERO
        if n.kind == "balanced" and self.pads:
            # (collapsed before, as a subtree of a per-thread root that is collapsed again)
            return Span(n.kids[0], n.attrs[1], n.kids[1].poly, n.attrs[0])  # type: ignore[arg-type]
        if self.pads and n.kind == "canon":
            s = self.span(n.kids[0])
            return None if s is None or s.zero else Span(s.template, s.height, s.start, s.combine, True)
        if n.kind == "ileaf":  # (a loop leaf at one thread's element: thread_roots.py)
            return Span(n.kids[0], 0, n.kids[1].poly, None)  # type: ignore[arg-type]
        if n.kind == "loopout":
            got = loop_leaf(n, _leaf_of, self.masked_preds)  # (a per-element accumulation)
            return None if got is None else Span(got[0], 0, got[1], None)
        if n.kind == "shfl":
            return self._shfl(n)
        if n.kind == "xwarp":
            return self._xwarp(n)
        if n.kind in COMBINES and len(n.kids) == 2:
            s = self._combine(n)
            if s is not None:
                return s
        if n.kind in _ELEMENTWISE and n.kids:
            return self._elementwise(n)
        return None

    def _elementwise(self, n: Node) -> Span | None:
        """A per-element computation over leaves of one index (x*x, cvt(x), masked(load, 0))."""
        start = None
        tkids: list[Node | None] = []
        preds: list[int] = []
        for k in n.kids:
            if k.poly is not None and k.poly.is_const():
                tkids.append(k)
                continue
            if n.kind == "select" and not tkids and is_coordinate_pred(k) and not self.thread_free(k):
                preds.append(len(tkids))  # rewritten over the leaf index below (leaf_pred.py)
                tkids.append(None)
                continue
            s = self.span(k)
            if s is None:
                # an operand every element shares (the row max of a softmax): a tree that no
                # thread coordinate enters is the same value in every lane and warp
                c = self.collapse(k)
                if self.thread_free(c):
                    tkids.append(c)
                    continue
                return None
            if s.height != 0 or s.live is not None:
                return None
            if s.canon:
                s = Span(Node("canon", (), (s.template,)), 0, s.start, None)  # (per element)
            if start is None:
                start = s.start
            elif s.start != start:
                return None
            tkids.append(s.template)
        if start is None:
            return None
        for i in preds:
            r = relative_pred(n.kids[i], start)
            if r is None:
                return None
            tkids[i] = r
        if n.kind == "masked" and len(tkids) == 2 and self.masked_preds:
            # launch-specialised: the load's predicate over the leaf index, so that the masked
            # template meets the plain load of an index where the launch proves it true (_lift)
            p = self.masked_preds.get(n.digest)
            r = index_bound(p, start) if p is not None else None
            if r is not None:
                tkids.append(r)
        return Span(Node(n.kind, n.attrs, tuple(k for k in tkids if k is not None)), 0, start, None)

    def _lift(self, s: Span, tpl: Node) -> Span | None:
        """``s`` as a span of ``tpl`` when tpl is s's template with plain loads L written as
        masked(L, old, bound) whose bound holds at every index s covers at every thread: there
        the masked load is the load."""
        if s.zero:
            return None
        bounds = wrapped(s.template, tpl)
        if not bounds or not all(holds_on(r, s.start, s.height) for r in bounds):
            return None
        return Span(tpl, s.height, s.start, s.combine, s.canon, s.live)

    def _unify_reads(
        self, got: list[tuple[int, Span, dict[str, Poly]]]
    ) -> list[tuple[int, Span, dict[str, Poly]]]:
        """The spans a shared read meets, lifted to one template where some hold masked loads
        the others' plain loads are (_lift); unchanged when there is no such template."""
        tpls = {sp.template.digest: sp.template for _m, sp, _mp in got if not sp.zero}
        if len(tpls) < 2:
            return got
        for tpl in tpls.values():
            out = []
            for m, sp, mp in got:
                if sp.zero or sp.template.digest == tpl.digest:
                    out.append((m, sp, mp))
                    continue
                lifted = self._lift(sp, tpl)
                if lifted is None:
                    break
                out.append((m, lifted, mp))
            else:
                return out
        return got

    def _shfl(self, n: Node) -> Span | None:
        if n.attrs != ("bfly",) or len(n.kids) != 4:
            return None
        x, b, c, mask = n.kids
        if not (_const(b) is not None and _const(c) == 31 and _const(mask) in (-1, 0xFFFFFFFF)):
            return None
        s = self.span(x)
        if s is None or s.zero:
            return s  # (every lane sends +0: each receives +0)
        off = _const(b)
        assert off is not None
        live = s.live
        if live is not None:  # (lane t receives lane t ^ off's value)
            live = tuple((b, v ^ (off >> int(b[2:]) & 1) if _is_lane_bit(b) else v) for b, v in live)
        start = s.start
        for k in range(5):
            if off >> k & 1:
                flipped = _flip_bit(start, f"tx{k}")
                if flipped is None:
                    return None
                start = flipped
        return Span(s.template, s.height, start, s.combine, s.canon, live)

    def _combine(self, n: Node) -> Span | None:
        x, y = self.span(n.kids[0]), self.span(n.kids[1])
        if x is None or y is None:
            return None
        if self.license is not None:
            x, y = self._lower(x), self._lower(y)
        return self._join(x, y, (n.kind, n.attrs))

    def _join(self, x: Span, y: Span, comb: tuple) -> Span | None:
        """The span of ``comb`` over spans x and y, when they are the two halves of one
        balanced tree (adjacent, or butterfly partners)."""
        if x.zero or y.zero or x.canon or y.canon or x.live or y.live:
            # (only a fold add: canon(x) + y = canon(x + y) and x + (+0) = canon(x), pads.mk_fadd)
            if not _add_rn(*comb):
                return None
            if comb[1][0] == "f32" and any(s.height == 0 and contractable(s.template) for s in (x, y)):
                return None  # (ptxas may fuse the product into an fma with this add)
            if x.zero and y.zero:
                return ZERO
            if x.zero or y.zero:
                s = y if x.zero else x
                return None if s.live else Span(s.template, s.height, s.start, s.combine, True)
            if x.live != y.live:
                return _complementary(x, y)
        if x.height == y.height and x.template.digest != y.template.digest and self.masked_preds:
            x, y = self._lift(x, y.template) or x, self._lift(y, x.template) or y
        if x.height != y.height or x.template.digest != y.template.digest:
            return None
        if x.height > 0 and (x.combine != comb or y.combine != comb):
            return None
        h = x.height
        half = 1 << h
        d = y.start - x.start
        canon, live = x.canon or y.canon, x.live  # (one live set: +0 + +0 = +0 outside it)
        if d.is_const() and abs(d.const_value()) == half:
            lo = x.start if d.const_value() > 0 else y.start
            return Span(x.template, h + 1, lo, comb, canon, live)
        # a butterfly partner: the two starts differ by +-2^h on one lane bit
        for sym in sorted(x.start.symbols()):
            if not is_bit_symbol(sym):
                continue
            coef = x.start.terms.get((sym,), 0)
            if abs(coef) != half or any(sym in m and m != (sym,) for m in x.start.terms):
                continue
            if _flip_bit(x.start, sym) == y.start:
                lo = x.start.substitute(sym, Poly.const(0 if coef > 0 else 1))
                return Span(x.template, h + 1, lo, comb, canon, live)
        return None

    def _xwarp(self, n: Node) -> Span | None:
        """A shared-memory read of balanced partials: each reader address must hit exactly one
        store of the latest generation; the writer's thread bits are renamed as the reader's,
        and the reader bits that choose between stores must move the start affinely."""
        slots = self.slots(n)
        if slots is None:
            return None
        lb, free, picks = slots
        starts: dict[int, Poly] = {}
        first: Span | None = None
        zeros: list[int] = []
        got: list[tuple[int, Span, dict[str, Poly]]] = []
        for mask, value, mapping in picks:
            sp = self.span(value)
            if sp is None:
                return None
            if self.license is not None:
                sp = self._lower(sp)
            if sp.live is not None:
                # the writer's bits that pick the tree, as the reader sees them
                conds: list[tuple[str, int]] = []
                for b, v in sp.live:
                    wb = mapping.get(b)
                    if wb is None:
                        return None
                    if wb.is_const():
                        if wb.const_value() != v:
                            sp = ZERO
                            break
                    elif len(wb.terms) == 1 and wb.terms.get((next(iter(wb.symbols())),)) == 1:
                        conds.append((next(iter(wb.symbols())), v))
                    else:
                        return None
                else:
                    sp = Span(
                        sp.template, sp.height, sp.start, sp.combine, sp.canon, tuple(sorted(conds)) or None
                    )
            got.append((mask, sp, mapping))
        if self.masked_preds:
            got = self._unify_reads(got)
        for mask, sp, mapping in got:
            if sp.zero:
                zeros.append(mask)  # (a slot written with +0 by every thread that may have written it)
                continue
            if first is None:
                first = sp
            elif (sp.template.digest, sp.height, sp.combine, sp.canon, sp.live) != (
                first.template.digest,
                first.height,
                first.combine,
                first.canon,
                first.live,
            ):
                return None
            st = rename_bits(sp.start, mapping)
            if st is None:
                return None  # the writer's value depends on a thread bit the address does not fix
            starts[mask] = st
        if first is None:
            return ZERO
        live = first.live
        fixed, cube = 0, {}  # the free bits every live reader has, with their values
        if zeros:
            if live is not None:
                return None
            alive = [m for m in range(1 << len(free)) if m not in zeros]
            cube = {i: alive[0] >> i & 1 for i in range(len(free)) if len({m >> i & 1 for m in alive}) == 1}
            if len(alive) != 1 << (len(free) - len(cube)):
                return None  # (the readers that hit a partial are not those with some bits fixed)
            live = tuple(sorted((lb[free[i]], v) for i, v in cube.items()))
            fixed = sum(v << i for i, v in cube.items())
        base = starts[fixed]
        coefs = []
        for i in range(len(free)):
            if i in cube:
                coefs.append(0)  # (the tree is the same function of the other bits)
                continue
            c = starts[fixed | 1 << i] - base
            if not c.is_const():
                return None
            coefs.append(c.const_value())
        for mask, st in starts.items():
            pred = base + Poly.const(sum(coefs[i] for i in range(len(free)) if mask >> i & 1))
            if st != pred:
                return None
        start = base
        for i, pos in enumerate(free):
            start = start + Poly.sym(lb[pos]).scale(coefs[i])
        return Span(first.template, first.height, start, first.combine, first.canon, live)

    def thread_free(self, n: Node) -> bool:
        """True when no thread coordinate, lane exchange or loop state enters ``n``."""
        got = self.free_memo.get(n.digest)
        if got is not None:
            return got
        if n.kind in ("shfl", "xwarp", "carried", "ldmatrix", "state", "lanex", "dpp", "undef", "opaque"):
            res = False
        elif n.poly is not None:
            res = not any(
                x.startswith(("tx", "ty", "tz", "tid.", "Tv:", "D:", "carried:", "IT"))
                for x in n.poly.symbols()
            )
        else:
            res = all(self.thread_free(k) for k in n.kids)
        self.free_memo[n.digest] = res
        return res

    # ---- rewrite ------------------------------------------------------------------------------
    def collapse(self, n: Node) -> Node:
        if not n.combines:
            return n  # no combine or exchange below: nothing to prove
        got = self.out_memo.get(n.digest)
        if got is not None:
            return got
        es = self.sets.of(n) if (n.kind in SET_KINDS or n.kind in ("shfl", "xwarp")) else None
        s = self.span(n) if es is None and (n.kind in COMBINES or n.kind in ("shfl", "xwarp")) else None
        if es is not None and es.comb is not None and len(es.elems) >= 2:
            out = self.sets.node(es)  # (an order-free max or min: its set, not its shape)
        elif s is not None and s.height >= 1 and s.combine is not None and s.live is None:
            out = self._balanced_node(s)
        elif n.kids and n.poly is None:
            kids = tuple(self.collapse(k) for k in n.kids)
            out = n if all(a is b for a, b in zip(kids, n.kids, strict=True)) else Node(n.kind, n.attrs, kids)
            if self.pads and out is not n and _add_rn(out.kind, out.attrs) and not (out.attrs[0] == "f32" and any(map(contractable, n.kids))):
                # (a canon marker a child gained floats up; an add ptxas may fuse with the
                # product it was written over is left as it is, whatever that product became)
                out = mk_fadd(kids[0], kids[1], out.attrs)
            if self.pads and out.kind == "canon" and (
                out.kids[0].kind == "canon" or nonneg(out.kids[0], self.nonneg_memo)
            ):
                out = out.kids[0]  # (canon(x) is x's bits where x is never -0 nor another NaN)
        else:
            out = n
        self.out_memo[n.digest] = out
        return out


Slots = tuple[dict[int, str], list[int], list[tuple[int, Node, dict[str, Poly]]]]


def xwarp_slots(n: Node) -> Slots | None:
    """Which store of the latest generation each reader of a shared read ``n`` meets: (the
    reader address's bits, the reader bits that pick the store, and per assignment of those bits
    the stored tree with the writer's bits as the reader sees them); None when some reader
    address hits no store or several, or the only writer it could meet did not store."""
    addr, hist = n.kids
    la = addr.poly
    sts = [e for e in hist.kids if e.kind == "st" and e.attrs[0] == "st"]
    if la is None or not sts:
        return None
    epoch = max(e.attrs[2] for e in sts)
    gen = [e for e in sts if e.attrs[2] == epoch]
    if any(e.attrs[1] != n.attrs[0] or e.kids[0].poly is None for e in gen):
        return None
    sb0, srest0 = gen[0].kids[0].poly.split_bits()  # type: ignore[union-attr]
    lb, lrest = la.split_bits()
    if sb0 is None or lb is None:
        return None
    offsets = []
    for e in gen:
        sb, srest = e.kids[0].poly.split_bits()  # type: ignore[union-attr]
        d = srest - srest0
        if sb != sb0 or not d.is_const():
            return None
        offsets.append(d.const_value())
    d0 = lrest - srest0
    if not d0.is_const():
        return None
    free = sorted(pos for pos in lb if pos not in sb0)  # reader bits that pick the store
    if len(free) > 6:
        return None
    s_only = 0  # weights of writer bits the reader's address fixes to constants
    for pos in sb0:
        if pos not in lb:
            s_only |= 1 << pos
    picks = []
    for mask in range(1 << len(free)):
        off = d0.const_value() + sum(1 << free[i] for i in range(len(free)) if mask >> i & 1)
        hits = [(j, off - o) for j, o in enumerate(offsets) if off - o >= 0 and (off - o) & ~s_only == 0]
        if len(hits) != 1:
            return None
        j, rem = hits[0]
        mapping = {
            sym: (Poly.sym(lb[pos]) if pos in lb else Poly.const(rem >> pos & 1)) for pos, sym in sb0.items()
        }
        if _writer_excluded(gen[j].kids[2], mapping):
            return None  # the only thread that could have written this slot did not store
        picks.append((mask, gen[j].kids[1], mapping))
    return lb, free, picks


def rename_bits(p: Poly, mapping: dict[str, Poly]) -> Poly | None:
    """A writer's polynomial as the reader sees it (all its bits renamed at once); None when it
    holds a thread bit the mapping does not fix."""
    bits = sorted(x for x in p.symbols() if is_bit_symbol(x))
    if any(x not in mapping for x in bits):
        return None
    for x in bits:
        p = p.substitute(x, Poly.sym("w:" + x))
    for x in bits:
        p = p.substitute("w:" + x, mapping[x])
    return p


_SPLIT_BUDGET = 64  # ranges one span may be split into (a single boundary needs 2 per level)


def _add_rn(kind: str, attrs: tuple) -> bool:
    """An fp32 add that rounds to nearest (pads.mk_fadd's rules hold for it)."""
    return kind == "add" and bool(attrs) and attrs[0] in RN_F32


def _const(n: Node) -> int | None:
    if n.poly is not None and n.poly.is_const():
        v = n.poly.const_value()
        return v - (1 << 32) if v >= 1 << 31 and v < 1 << 32 else v
    return None


def _is_lane_bit(b: str) -> bool:
    return b.startswith("tx") and b[2:].isdigit() and int(b[2:]) < 5


def _complementary(x: Span, y: Span) -> Span | None:
    """x + y where the two trees are one function of the thread (same template, height, combine
    and start) and their live sets differ in the value of one bit b only (the rest, R, shared;
    no bit of either set in the start): where R holds, one side is the tree and the other +0, so
    the sum is canon(tree) (pads.mk_fadd); elsewhere both are +0 and so is the sum."""
    if x.live is None or y.live is None or x.zero or y.zero:
        return None
    dx, dy = dict(x.live), dict(y.live)
    if dx.keys() != dy.keys():
        return None
    differ = [b for b in dx if dx[b] != dy[b]]
    if len(differ) != 1:
        return None
    if (x.template.digest, x.height, x.combine, x.start) != (y.template.digest, y.height, y.combine, y.start):
        return None
    if any(b in x.start.symbols() for b in dx):
        return None
    rest = tuple((b, v) for b, v in x.live if b != differ[0])
    return Span(x.template, x.height, x.start, x.combine, True, rest or None)


def _leaf(n: Node) -> Span | None:
    space, nbytes = n.attrs[0], n.attrs[1]
    a = n.kids[0].poly
    if a is None or not isinstance(nbytes, int) or nbytes <= 0:
        return None
    base = next((m[0] for m, c in a.terms.items() if len(m) == 1 and m[0].startswith("p:") and c == 1), None)
    if base is None:
        return None
    rest = a - Poly.sym(base)
    if any(c % nbytes for c in rest.terms.values()):
        return None
    idx = Poly({m: c // nbytes for m, c in rest.terms.items()})
    return Span(Node("leaf", (space, nbytes, base)), 0, idx, None)


def _leaf_of(n: Node) -> tuple[Node, Poly] | None:
    s = _leaf(n)
    return None if s is None else (s.template, s.start)


def flippable(p: Poly, sym: str) -> bool:
    """Whether _flip_bit can complement bit ``sym`` of p (it appears in no product)."""
    return not any(sym in m and m != (sym,) for m in p.terms)


def _flip_bit(p: Poly, sym: str) -> Poly | None:
    """p with bit ``sym`` replaced by its complement; None if ``sym`` appears in a product."""
    if not flippable(p, sym):
        return None
    # p.substitute(sym, 1 - sym), term for term in its order: c*sym becomes c - c*sym
    t: dict[tuple[str, ...], int] = {}
    for m, c in p.terms.items():
        add_terms(t, (((), c), ((sym,), -c)) if m == (sym,) else ((m, c),))
    return Poly._of(t)


def _writer_excluded(pred: Node, mapping: dict[str, Poly]) -> bool:
    """True when the store predicate is provably false for the writer the address picks."""
    return _truth(pred, mapping) is False


def _truth(pred: Node, mapping: dict[str, Poly]) -> bool | None:
    if pred.kind == "true":
        return True
    if pred.kind == "not":
        t = _truth(pred.kids[0], mapping)
        return None if t is None else not t
    if pred.kind == "and":
        ts = [_truth(k, mapping) for k in pred.kids]
        if any(t is False for t in ts):
            return False
        return True if all(t is True for t in ts) else None
    if (
        pred.kind == "cmp"
        and len(pred.kids) == 2
        and pred.kids[0].poly is not None
        and pred.attrs[1] in ("s", "u")
    ):
        diff = pred.kids[0].poly
        for sym in sorted(diff.symbols()):
            if sym in mapping:
                diff = diff.substitute(sym, Poly.sym("w:" + sym))
        for sym in sorted(mapping):
            diff = diff.substitute("w:" + sym, mapping[sym])
        if not diff.is_const():
            return None
        v = diff.const_value()
        return {"lt": v < 0, "le": v <= 0, "gt": v > 0, "ge": v >= 0, "eq": v == 0, "ne": v != 0}.get(
            pred.attrs[0]
        )
    return None
