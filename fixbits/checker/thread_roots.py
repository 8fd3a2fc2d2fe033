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
* ``xwarp``: the reader's address at t, then the read at that address (``read_at``): the stores
  that may write its bytes, their addresses relative to the reader's and their writer bits bound
  (``sread``), or, when one store certainly gave the bytes the read sees, that store's value;
  when out of scope, the xwarp with the history (the writers' own bits) as it is;
* ``ldmatrix .m8n8 .b16`` (not transposed): the 4-byte read at the row address its lane pair
  takes (as forward_ldmatrix), read as above;
* ``balanced``: its start at t (the template has no coordinate; a mask form modulo the row is
  written for the row of t's elements, leaf_pred.at_element);
* ``loopout`` of a per-element accumulator (loop_leaf.py): ``ileaf(template, element at t)``,
  the collapser's own leaf, so a block of several rows meets a block of one;
* a shared read with one writer left (launch-specialised only): that writer's value at it.
V(t) depends only on the bits of t that V's forms use (``bits_used``), so per_thread reads one
thread per assignment of those bits.
Any other node that has a thread, block or loop symbol below and is not a pointwise float or
integer operation makes the expansion fail: the root then stays physical (can only split).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from fixbits.checker.forms import Poly, is_bit_symbol, split_thread_form
from fixbits.checker.launch import U_EQ_BOUND, decide_cmp, join_truths
from fixbits.checker.leaf_pred import at_element
from fixbits.checker.maxsets import map_indices
from fixbits.checker.node import Node, int_node
from fixbits.checker.pads import RN_F32, is_bit_move, is_idx_move, mk_fadd, mk_ffma, zero_result
from fixbits.checker.walk import const_pred

if TYPE_CHECKING:
    from fixbits.checker.balanced import Collapser

_MAX_BITS = 10
_INDEX_MIN = 16  # a history of more stores is looked up in a byte index (_touching)
_SAME_BITS = 5  # _same_at evaluates a stored value at up to 2^this writers (one warp)
# node kinds whose value at a thread is a function of their operands' values at that thread
POINTWISE = frozenset({
    "add", "sub", "mul", "fma", "div", "sqrt", "rsqrt", "rcp", "ex2", "lg2", "max", "min", "neg",
    "abs", "fabs", "cvt", "canon", "masked", "load", "pack", "slice", "and", "or", "not", "true",
    "bits", "dtok", "dint",  # (dtokens.py: integer functions of a float's bits, at the same thread)
})  # fmt: skip


def thread_bits(ntid: tuple[int, int, int] | None) -> int | None:
    """n for a block of 2^n threads along x only; None otherwise."""
    if ntid is None or ntid[1] != 1 or ntid[2] != 1 or ntid[0] < 1 or ntid[0] & (ntid[0] - 1):
        return None
    n = ntid[0].bit_length() - 1
    return n if n <= _MAX_BITS else None


class ThreadEval:
    """V(t) for the threads of a block of 2^nbits threads (memoised per node and thread)."""

    def __init__(
        self, nbits: int, shared_reads: bool = False, pads: bool = False,
        col: Collapser | None = None, one_writer: bool = False,
    ) -> None:  # fmt: skip
        self.nbits = nbits
        # a read one writer's store reaches is that writer's value, unspecialised too, and a kept
        # store of one writer is read at it (_same_at, _one_writer): exact, but it expands every
        # thread's read into its writer's tree, so signature.build reads a root with it only
        # where the per-thread reading without it does not meet
        self.one_writer = one_writer
        self.col = col  # the signature's collapser: loop leaves' spans, one-writer reads' trees
        self.shared_reads = shared_reads  # read_at may take reads apart (signature.build)
        self.pads = pads  # launch-specialised: a read resolved to a +0 pad folds (pads.mk_fadd)
        self.memo: dict[tuple[bytes, int], Node | None] = {}
        self.masks: dict[bytes, int] = {}  # the thread bits a node's value depends on (-1: all)
        self.pmemo: dict[tuple, tuple[tuple[str, int], ...] | None] = {}
        # shared reads at one reader address (read_at) and what they are built from
        self.reads: dict[tuple[bytes, bytes, int, int | None], Node | None] = {}
        self.bmemo: dict[bytes, Node] = {}
        self.wmemo: dict[tuple, tuple[list[int], dict[int, list[int]]]] = {}
        self.umemo: dict[bytes, frozenset[int] | None] = {}
        self.tmemo: dict[bytes, list[bool | None] | None] = {}
        self.hmemo: dict[bytes, object] = {}
        self.emo: dict[bytes, tuple[tuple, _Store] | None] = {}
        # a store as a read keeps it, per (store, its constant minus the read's, bytes read)
        self.rmemo: dict[tuple, _Entry | None] = {}
        self.nmemo: dict[tuple, Node] = {}
        self.modmemo: dict[bytes, bool] = {}
        # the stores of the longest history read so far, and each byte some writer of them
        # writes -> their positions in program order (_touching)
        self.indexed: list[_Store] = []
        self.byte_index: dict[int, list[int]] = {}
        self.prefixes: dict[bytes, int | None] = {}

    def poly_at(self, p: Poly, t: int) -> Poly | None:
        k = p.key()
        if k in self.pmemo:
            bits = self.pmemo[k]
        else:
            bits = self.pmemo[k] = self._poly_bits(p)
        if bits is None:
            return None
        if not bits:
            return p
        return p.assign_bits({s: t >> i & 1 for s, i in bits})

    def _poly_bits(self, p: Poly) -> tuple[tuple[str, int], ...] | None:
        """The thread bits of a form, each (symbol, position); None when a bit symbol is not
        one of this block's (memoised per form by poly_at)."""
        out: list[tuple[str, int]] = []
        for s in p.symbols():
            if is_bit_symbol(s):
                if s[:2] != "tx" or int(s[2:]) >= self.nbits:
                    return None
                out.append((s, int(s[2:])))
        return tuple(out)

    def at(self, n: Node, t: int) -> Node | None:
        if not n.variant and not n.exchange:
            return n
        # V(t) is a function of the bits of t that bits_used names (see the module's doc): the
        # memo is keyed on those bits alone, so threads that agree on them share one evaluation
        d = n.digest
        m = self.masks.get(d)
        if m is None:
            u = self.bits_used(n)
            m = self.masks[d] = -1 if u is None else sum(1 << i for i in u)
        key = (d, t & m)
        memo = self.memo
        if key in memo:
            return memo[key]
        res = self._at(n, t)
        memo[key] = res
        return res

    def _at(self, n: Node, t: int) -> Node | None:
        if n.poly is not None:
            p = self.poly_at(n.poly, t)
            return None if p is None else (n if p is n.poly else int_node(p))
        k = n.kind
        if k == "shfl":
            if is_bit_move(n):
                b = n.kids[1].poly
                assert b is not None
                return self.at(n.kids[0], t ^ b.const_value())
            lane = self._idx_lane(n, t)
            return None if lane is None else self.at(n.kids[0], (t & ~31) | lane)
        if k == "xwarp":
            a = self.at(n.kids[0], t)
            if a is None:
                return None
            read = self.read_at(a, n)
            return read if read is not None else Node(k, n.attrs, (a, n.kids[1]))
        if k == "ldmatrix":
            return self.ldmatrix_at(n, t)
        if k == "balanced":
            s = self.at(n.kids[1], t)
            if s is None or s.poly is None:
                return None
            t = n.kids[0]
            return Node(k, n.attrs, (at_element(t, s.poly, 1 << n.attrs[1]) if self._modular(t) else t, s))
        if k == "selset":
            return map_indices(n, lambda q: self.poly_at(q, t))
        if k == "loopout":
            # a per-element accumulator (loop_leaf.py): the leaf its template gives at this
            # thread's element (the collapser's span, so both paths write one template)
            sp = self.col.span(n) if self.col is not None else None
            if sp is None or sp.height != 0 or sp.combine is not None:
                return None
            p = self.poly_at(sp.start, t)
            if p is None:
                return None
            tpl = at_element(sp.template, p) if self._modular(sp.template) else sp.template
            return Node("ileaf", (), (tpl, int_node(p)))
        if k == "cmp":
            kids = [self.at(x, t) for x in n.kids]
            if any(x is None for x in kids):
                return None
            truth = _decide(n.attrs, kids)  # type: ignore[arg-type]
            if truth is not None:
                return const_pred(truth)
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
        if k not in POINTWISE:
            return None
        kids = []
        for x in n.kids:
            y = self.at(x, t) if x.variant or x.exchange else x  # (at's first test, inline)
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
                return const_pred(got)
        if self.pads and k == "add" and len(kids) == 2 and n.attrs[0] in RN_F32:
            return mk_fadd(kids[0], kids[1], n.attrs)
        if self.pads and zero_result(k, n.attrs, kids):
            return kids[0]  # (+0, as the walk folds it)
        if self.pads and k == "fma" and len(kids) == 3 and n.attrs[0] == "rn.f32":
            return mk_ffma(kids[0], kids[1], kids[2], n.attrs)
        return Node(k, n.attrs, tuple(kids))

    def _modular(self, t: Node) -> bool:
        """Whether template ``t`` holds a mask form modulo the row (leaf_pred.at_element's)."""
        got = self.modmemo.get(t.digest)
        if got is None:
            got = (t.kind == "ixform" and len(t.attrs) == 3) or any(self._modular(k) for k in t.kids)
            self.modmemo[t.digest] = got
        return got

    # ---- a shared read at one reader: the stores that may write its bytes, row-relative ----
    def read_at(self, a: Node, x: Node) -> Node | None:
        """``x = xwarp(addr, hist)`` read at the reader address ``a`` (no thread bit left in
        it); None when out of scope (the caller keeps the xwarp, which relativize refuses: the
        root stays physical).

        The read becomes ``sread(hist')`` (with the read's size and barrier count). hist' keeps, in program order, each store of
        ``hist`` that some writer whose predicate is not false at it may write a byte of
        [a, a + n) with: its address minus ``a``, its value and predicate, each over all the
        writer bits (renamed ``wb<i>``: the entry binds them), restricted to the writers whose
        bits agree with every overlapping writer's (those bits and their values, and the block's
        bit count, are the entry's attributes). A store none of whose writers may write a byte
        read is left out: it cannot change those bytes. Then, with B the block barriers passed
        before the read: the last entry E that certainly writes every byte read (a writer whose
        predicate is true covers them) and was stored before a barrier the read follows (count
        < B) hides every entry of a lower count (a barrier orders their writes before E's, and
        E's before the read): those are left out too. When E is then the only entry, of the
        read's size, at offset 0 for every writer that may store, with a value that depends on
        no writer bit but the restriction's, or that is one and the same tree at each of those
        writers (``_same_at``: a butterfly all-reduce's total that every lane writes, the one
        writer a predicate leaves), the read is that value (whichever of them wrote last).

        Every write that may land on the bytes read after the last one that hides the rest is
        in hist', exactly, in program order with its barrier counts, so the read is a function
        of hist' alone: the shared window's absolute offset and the other rows' slots are gone,
        and two rows of a block (or a block of one row) whose slots hold the same relative
        writes read one tree. Out of scope (None): a store of another kind (copy engine,
        unmodelled, TMA template), of unknown size or address, an address that differs from
        the read's by anything but writer bits, no store at all. (Like the xwarp it replaces,
        it sees the stores before the read in program order: a racing store after the read is
        in no history.)"""
        if not self.shared_reads:
            return None
        nbytes = x.attrs[0] if x.attrs else None
        bars = x.attrs[1] if len(x.attrs) > 1 and isinstance(x.attrs[1], int) else None
        if a.poly is None or len(x.kids) != 2 or not isinstance(nbytes, int) or nbytes <= 0:
            return None
        if any(is_bit_symbol(s) for s in a.poly.symbols()):
            return None
        key = (x.kids[1].digest, a.digest, nbytes, bars)
        if key in self.reads:
            return self.reads[key]
        res = self._read_at(a.poly, x.kids[1], nbytes, bars)
        self.reads[key] = res
        return res

    def _read_at(self, a: Poly, hist: Node, nbytes: int, bars: int | None) -> Node | None:
        idx = self._hist_index(hist)
        if idx is None:
            return None
        rest_key, stores = idx
        entries: list[_Entry] = []
        a_c = a.const_value()
        a_key = a.key()[1:] if a_c else a.key()  # (the constant term sorts first)
        if stores and rest_key != a_key:
            return None  # the stores' addresses and the read's differ by more than writer bits
        a_hi = a_c + nbytes - 1
        rmemo = self.rmemo
        for st in self._touching(hist, stores, a_c, a_hi):
            c0 = st.const - a_c
            # what the store keeps is a function of the store and its constant relative to the
            # read's (every read here has the stores' address besides writer bits and constant)
            key = (st.node.digest, c0, nbytes)
            en = rmemo.get(key, False)
            if en is False:
                en = rmemo[key] = self._entry(st, a, c0, nbytes, key)
            if en is not None:
                entries.append(en)  # type: ignore[arg-type]
        if bars is not None:
            last = None
            for k, en in enumerate(entries):
                if en.definite and en.bar < bars:
                    last = k
            if last is not None:
                hide = entries[last].bar
                entries = [en for en in entries if en.bar >= hide]
                if len(entries) == 1 and entries[0].writer >= 0:
                    v = self.at(entries[0].store.kids[1], entries[0].writer)
                    if v is not None:
                        return v
        if not entries:
            return None
        # (the barriers passed before the read: whether each store is ordered before it)
        hist2 = Node("hist", (), tuple(self._entry_node(en) for en in entries))
        return Node("sread", (nbytes, bars), (hist2,))

    def _touching(self, hist: Node, stores: list[_Store], lo: int, hi: int) -> list[_Store]:
        """The stores of ``hist`` some writer of which writes a byte of [lo, hi] (their
        address constant plus a writer's offset), in program order: the stores that can change
        the bytes read. A long history is looked up in the byte index of the longest history
        it is a prefix of (the walk's histories grow by appending: a read sees the stores
        before it); a short or unindexed one is scanned store by store."""
        n = self._prefix_of_index(hist, stores) if len(stores) > _INDEX_MIN else None
        if n is None:
            return [
                st
                for st in stores
                if not (st.hi < lo or st.lo > hi)
                and any(b - st.const in st.touched for b in range(lo, hi + 1))
            ]
        index = self.byte_index
        pos: set[int] = set()
        for b in range(lo, hi + 1):
            got = index.get(b)
            if got is not None:
                pos.update(got)
        return [stores[k] for k in sorted(pos) if k < n]

    def _prefix_of_index(self, hist: Node, stores: list[_Store]) -> int | None:
        """len(stores) when they are a prefix of the indexed stores, the index extended to them
        first when the indexed stores are a prefix of theirs; None otherwise (memoised per
        history)."""
        got = self.prefixes.get(hist.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        master = self.indexed
        res: int | None = None
        if all(
            x.node is y.node or x.node.digest == y.node.digest for x, y in zip(master, stores, strict=False)
        ):  # (the shorter one's length: a prefix test)
            index = self.byte_index
            for i in range(len(master), len(stores)):
                st = stores[i]
                for off in st.touched:
                    index.setdefault(st.const + off, []).append(i)
                master.append(st)
            res = len(stores)
        self.prefixes[hist.digest] = res
        return res

    def _entry(self, st: _Store, a: Poly, c0: int, nbytes: int, key: tuple) -> _Entry | None:
        """The store ``st`` as read_at keeps it for a read of ``nbytes`` at ``a`` (its address
        constant minus the read's: c0); None when it cannot change the bytes read."""
        e, nb, bar, ap, offs, groups = st.node, st.nbytes, st.bar, st.addr, st.offs, st.groups
        n = self.nbits
        size = 1 << n
        # writers w with -nb < rel(w) < nbytes: those whose bytes overlap the read
        over: list[int] = []
        for off in range(1 - nb - c0, nbytes - c0):
            g = groups.get(off)
            if g is not None:
                over.extend(g)
        if not over:
            return None  # no writer of this store touches a byte read
        tv = self._truths(e.kids[2])
        cand = over if tv is None else [w for w in over if tv[w] is not False]
        if not cand:
            return None  # none of them stores
        lo, hi = size - 1, 0
        for w in over:
            lo &= w
            hi |= w
        agree = ~(lo ^ hi) & (size - 1)  # bits every overlapping writer shares
        env = tuple((i, over[0] >> i & 1) for i in range(n) if agree >> i & 1)
        definite = tv is not None and any(
            tv[w] is True and offs[w] + c0 <= 0 and offs[w] + c0 + nb >= nbytes for w in cand
        )
        one = definite and nb == nbytes and all(offs[w] + c0 == 0 for w in cand)
        if one:
            used = self.bits_used(e.kids[1])
            one = used is not None and (used <= {i for i, _ in env} or self._same_at(e.kids[1], cand, used))
        return _Entry(e, ap - a, env, bar, definite, cand[0] if one else -1, key)

    def _same_at(self, v: Node, writers: list[int], used: frozenset[int]) -> bool:
        """True when ``v`` is one and the same tree at every writer (each the writer's own
        value, at(); memoised on the bits ``v`` uses): then whichever of them wrote last, the
        bytes hold that tree (a butterfly all-reduce's total, a value read back from one slot).
        At most 2^_SAME_BITS distinct evaluations are tried."""
        if len(writers) == 1 and (self.one_writer or (self.pads and self.col is not None)):
            return True  # (one writer: the bytes hold its own value, e.g. a layout conversion's slot)
        if len(used) > _SAME_BITS:
            return False
        mask = sum(1 << i for i in used)
        if all(w & mask == writers[0] & mask for w in writers):
            return True  # (at() reads only these bits: one evaluation stands for all)
        first: bytes | None = None
        seen: set[int] = set()
        for w in writers:
            if w & mask in seen:
                continue
            seen.add(w & mask)
            got = self.at(v, w)
            if got is None:
                return False
            if first is None:
                first = got.digest
            elif got.digest != first:
                return False
        return True

    def _entry_node(self, en: _Entry) -> Node:
        """A kept store: (kind, bytes, epoch, barriers, block bits, restriction), over its
        address relative to the read, its value and its predicate, writer bits bound
        (memoised per entry)."""
        got = self.nmemo.get(en.key)
        if got is None:
            e = en.store
            got = self._one_writer(en)
            if got is None:
                got = Node(
                    "st",
                    ("st", e.attrs[1], e.attrs[2], e.attrs[3], self.nbits, en.env),
                    (self.bind(int_node(en.rel)), self.bind(e.kids[1]), self.bind(e.kids[2])),
                )
            self.nmemo[en.key] = got
        return got

    def _one_writer(self, en: _Entry) -> Node | None:
        """A kept store whose restriction leaves one writer: its address, value and predicate at
        that writer, and no writer bits. Which thread wrote is no part of the bytes: one writer
        does not race with itself, and the entries keep program order and barrier counts, so
        two reads whose entries agree store by store read equal bytes. None when the
        restriction leaves more than one writer or a part is out of at()'s scope."""
        if not self.one_writer or len(en.env) != self.nbits:
            return None
        w = sum(v << i for i, v in en.env)
        e = en.store
        parts = (self.at(int_node(en.rel), w), self.at(e.kids[1], w), self.at(e.kids[2], w))
        if any(x is None for x in parts):
            return None
        return Node("st", ("st", e.attrs[1], e.attrs[2], e.attrs[3], self.nbits, "one"), parts)  # type: ignore[arg-type]

    def _hist_index(self, hist: Node) -> _HistIndex | None:
        """A history's stores, each (node, bytes, barriers, address, its constant, writer
        offsets, writers by offset, lowest and highest byte some writer writes), and the key of
        what their addresses hold besides thread bits and a constant (one for all); None when a
        store is out of read_at's scope (memoised per history; each store's part per store, as
        a longer history repeats the stores of a shorter one)."""
        got = self.hmemo.get(hist.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        res = None
        if hist.kind == "hist":
            stores: list[_Store] = []
            keys: set[tuple] = set()
            emo = self.emo
            for e in hist.kids:
                if e.digest in emo:
                    one = emo[e.digest]
                else:
                    one = emo[e.digest] = self._store_index(e)
                if one is None:
                    break
                keys.add(one[0])
                stores.append(one[1])
            else:
                if len(keys) <= 1:
                    res = (next(iter(keys), ()), stores)
        self.hmemo[hist.digest] = res
        return res

    def _store_index(self, e: Node) -> tuple[tuple, _Store] | None:
        """(the key of its address besides thread bits and a constant, the store as
        _hist_index lists it) for one entry of a history; None when out of scope."""
        if e.kind != "st" or len(e.attrs) != 4 or e.attrs[0] != "st" or len(e.kids) != 3:
            return None
        nb, bar = e.attrs[1], e.attrs[3]
        ap = e.kids[0].poly
        if not isinstance(nb, int) or nb <= 0 or not isinstance(bar, int) or ap is None:
            return None
        split = split_thread_form(ap, self.nbits)
        if split is None:
            return None
        bitpart, rest_key, rest_c = split
        offs, groups = self._writers(bitpart)
        lo, hi = min(groups) + rest_c, max(groups) + rest_c + nb - 1
        touched = frozenset([off + i for off in groups for i in range(nb)])
        return rest_key, _Store(e, nb, bar, ap, rest_c, offs, groups, lo, hi, touched)

    def _writers(self, rel: Poly) -> tuple[list[int], dict[int, list[int]]]:
        """(value at every thread, {value: threads}) of a form over this block's thread bits
        alone (split_thread_form's first part; memoised per form)."""
        from fixbits.checker.forward import eval_all

        key = rel.key()
        got = self.wmemo.get(key)
        if got is None:
            offs = eval_all(rel, self.nbits)
            groups: dict[int, list[int]] = {}
            for w, off in enumerate(offs):
                groups.setdefault(off, []).append(w)
            got = self.wmemo[key] = (offs, groups)
        return got

    def _truths(self, pred: Node) -> list[bool | None] | None:
        """Per writer, the store predicate (True / False / None: not decided); None when it is
        not decided here at all (every writer may store)."""
        from fixbits.checker.launch import thread_truths

        got = self.tmemo.get(pred.digest, False)
        if got is False:
            got = self.tmemo[pred.digest] = thread_truths(pred, None, self.nbits)
        return got  # type: ignore[return-value]

    def _own_bit(self, s: str) -> bool:
        return is_bit_symbol(s) and s[:2] == "tx" and int(s[2:]) < self.nbits

    def bits_used(self, n: Node) -> frozenset[int] | None:
        """The thread bits ``n``'s value at a thread may depend on (None: not known). A bit-move
        shuffle reads its operand at t ^ b, a function of the same bits; a shared read depends
        on its address (its history's bits are the writers', bound there)."""
        got = self.umemo.get(n.digest, False)
        if got is not False:
            return got  # type: ignore[return-value]
        res: frozenset[int] | None
        if n.poly is not None:
            res = frozenset(int(s[2:]) for s in n.poly.symbols() if is_bit_symbol(s))
            if any(is_bit_symbol(s) and not self._own_bit(s) for s in n.poly.symbols()):
                res = None
        elif n.kind == "xwarp":
            res = self.bits_used(n.kids[0]) if len(n.kids) == 2 else None
        elif (
            n.kind == "ldmatrix"
            and len(n.kids) == 1
            and n.kids[0].kind == "xwarp"
            and len(n.kids[0].kids) == 2
        ):
            # ldmatrix_at: lane t & 31 and the row address at a lane of t's own warp
            u = self.bits_used(n.kids[0].kids[0])
            res = None if u is None else u | frozenset(range(min(5, self.nbits)))
        elif n.kind == "shfl" and is_idx_move(n):
            # _idx_lane: the operand at a lane of t's own warp that the lane form names
            u, v = self.bits_used(n.kids[0]), self.bits_used(n.kids[1])
            res = None if u is None or v is None else u | v | frozenset(range(min(5, self.nbits)))
        elif n.kind in ("ldmatrix", "lane_sym", "lanex", "dpp") or (n.kind == "shfl" and not is_bit_move(n)):
            res = None
        else:
            acc: set[int] = set()
            res = frozenset()
            for k in n.kids:
                u = self.bits_used(k)
                if u is None:
                    res = None
                    break
                acc |= u
            if res is not None:
                res = frozenset(acc)
        self.umemo[n.digest] = res
        return res

    def _idx_lane(self, n: Node, t: int) -> int | None:
        """The lane whose register ``shfl.sync.idx`` over the full warp with clamp 31 hands
        thread t: its lane operand at t, modulo 32 (PTX ISA: j = b[4:0] when the segment mask
        is 0, always in range); None for another shuffle or a lane operand that is not a
        number at t (a form over other than this block's thread bits)."""
        if not is_idx_move(n):
            return None
        b = n.kids[1].poly
        assert b is not None
        at = self.poly_at(b, t)
        return None if at is None or at.symbols() else at.const_value() & 31

    def ldmatrix_at(self, n: Node, t: int) -> Node | None:
        """Register k of ``ldmatrix .m8n8 .b16`` (not transposed) at lane i of thread t: the 4
        bytes at the row address lane 8k + i/4 of t's warp supplies, plus 4 (i mod 4) (as
        PTXWalk.forward_ldmatrix), read as read_at reads; None when out of scope."""
        op, k = n.attrs[0], n.attrs[1]
        parts = str(op).split(".")
        if "trans" in parts or "m8n8" not in parts or "b16" not in parts or "shared" not in parts:
            return None
        cnt = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), None)
        if cnt is None or not isinstance(k, int) or not 0 <= k < cnt or self.nbits < 5 or len(n.kids) != 1:
            return None
        x = n.kids[0]
        if x.kind != "xwarp" or len(x.kids) != 2 or len(x.attrs) != 2:
            return None
        src = (t & ~31) | (8 * k + ((t & 31) >> 2))
        row = self.at(x.kids[0], src)
        if row is None or row.poly is None:
            return None
        a = int_node(row.poly + Poly.const(4 * (t & 3)))
        return self.read_at(a, Node("xwarp", (4, x.attrs[1]), x.kids))

    def bind(self, n: Node) -> Node:
        """``n`` with each thread bit ``tx<i>`` of the block renamed ``wb<i>`` and each whole-warp bit-move
        shuffle written ``bshfl`` (x at this writer ^ b): an entry of ``sread`` binds the
        writer's bits, which range over the threads the entry stands for and are no longer
        this thread's coordinates. (Every binder below, a nested history's writers included, is
        renamed alike: the same tree up to the names.)"""
        got = self.bmemo.get(n.digest)
        if got is not None:
            return got
        if n.poly is not None:
            if any(self._own_bit(s) for s in n.poly.symbols()):
                t: dict[tuple[str, ...], int] = {}
                for m, c in n.poly.terms.items():
                    m2 = tuple(sorted("wb" + s[2:] if self._own_bit(s) else s for s in m))
                    t[m2] = t.get(m2, 0) + c
                out = int_node(Poly(t))
            else:
                out = n
        elif not n.kids or (not n.variant and not n.exchange):
            out = n
        else:
            kind = "bshfl" if n.kind == "shfl" and is_bit_move(n) else n.kind
            kids = tuple(self.bind(k) for k in n.kids)
            same = kind == n.kind and all(x is y for x, y in zip(kids, n.kids, strict=True))
            out = n if same else Node(kind, n.attrs, kids)
        self.bmemo[n.digest] = out
        return out


class _Store(NamedTuple):
    """A store of a history as read_at scans it (a tuple: it is built per store and read in
    read_at's inner loop)."""

    node: Node  # the history's st node
    nbytes: int
    bar: int  # block barriers passed before it
    addr: Poly
    const: int  # the address's constant term
    offs: list[int]  # the thread-bit part of the address at every writer
    groups: dict[int, list[int]]  # writers by that offset
    lo: int  # the lowest byte some writer writes
    hi: int  # the highest
    touched: frozenset[int]  # the bytes some writer writes, less the constant


# (the address key besides thread bits and constant, the stores)
_HistIndex = tuple[tuple, list[_Store]]


@dataclass(frozen=True)
class _Entry:
    """A store of a history as read_at keeps it."""

    store: Node  # the history's st node
    rel: Poly  # its address minus the read's
    env: tuple[tuple[int, int], ...]  # the writer bits every overlapping writer shares
    bar: int  # block barriers passed before the store
    definite: bool  # some writer certainly writes every byte read
    writer: int  # a writer at which the value is the read's (see read_at), or -1
    key: tuple = field(default=(), compare=False)  # (store digest, constant offset, bytes read)


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
