"""Per-thread sign facts of a launch-specialised walk: where ``canon(x)`` is ``x`` itself.

``canon(x)`` (``pads.mk_fadd``) is x with -0 turned into +0 and any NaN into the
canonical NaN. A padded fp32 sum carries it at its root; the same sum without padding does not.
The two store the same bytes wherever x is neither -0 nor a non-canonical NaN. This module proves
that per thread of the block (thread t of ``tid.x``, bits ``tx0 ..``), as two bit masks over the
block's threads:

* ``nmz(n)``: threads at which n's value is provably not -0;
* ``nc(n)``: threads at which n's value is provably not a NaN other than the canonical one;
* ``nng(n)``: threads at which n's value is provably +0, positive, +inf or a NaN (never a
  negative number, never -0); every nng thread is an nmz thread.

Rules (anything else: the empty set, which only keeps a class apart):

* ``canon(x)``: nmz and nc every thread (by definition); nng = nng(x).
* an integer constant: every thread when its bits are 0 (+0.0 in every width), else none.
* ``add`` (``add.f32`` / ``add.rn.f32``: round to nearest, no flush to zero):
  nmz = nmz(a) | nmz(b). Under round to nearest a sum is -0 only when both operands are -0: an
  exact zero of opposite-signed operands is +0, a non-zero exact sum never rounds to zero
  (subnormal sums are exact, nothing is flushed), and +-inf / NaN are not -0. nc = every thread
  (the checker's standing assumption: every NaN result of an add, mul or fma is the canonical
  NaN). nng = nng(a) & nng(b) (a non-negative exact sum, zero only as +0 + +0). An ``add.f32``
  fed by a ``mul.f32`` (no rounding mode) may be fused by ptxas into an fma, whose exact sum can
  be a negative value below half the smallest subnormal that rounds to -0: its nmz is its nng.
* a square, ``mul.f32`` / ``mul.rn.f32`` of one operand twice: nng and nc every thread (the exact
  product is +0 or positive and rounds to +0 or up). ``fma.rn.f32(x, x, c)``: nng = nng(c) (the
  exact sum of a square and a non-negative c is non-negative), nc every thread.
* ``cvt.f32.f16`` / ``cvt.f32.bf16`` (exact widenings): nmz and nng as x's (sign and zero-ness
  kept); nc = none (a NaN payload may be kept).
* ``masked(new, old)`` (a load under a coordinate predicate; the register keeps ``old`` where the
  predicate is false): with F the threads where the predicate is false for every block of the
  launch (recorded by the walk, intersected when one node meets two predicates),
  set = (F & set(old)) | (set(new) & set(old)).
* ``shfl.sync.bfly.b32 x, b, 31, -1`` (b a constant < 32, full warps): a bit move, thread t
  receives x of thread t ^ b: the set of x with those lane bits flipped.
* ``xwarp`` (a 4-byte shared-memory read; ``ReadFacts`` proved by the walk at the read): thread
  t is in the set when some store is proven to have written its slot before a block-wide barrier
  that precedes the read (so the bytes are not whatever was there) and every (store, writer)
  that may have made the last write of the slot (same or later barrier generation than the
  latest proven one; 4-byte aligned 4-byte accesses only, so a read takes one store's bytes
  whole) stored a value whose set holds that writer. ``ldmatrix .m8n8 .b16`` (not transposed)
  over such a history is the same 4-byte read per lane, at the offset the walk proved for it.

Like the rest of the checker these are statements about the walk's model of the kernel (its
integer forms for addresses and predicates, ``forward.truth_all`` for store predicates).
"""

from __future__ import annotations

from dataclasses import dataclass

from fixbits.checker.node import Node
from fixbits.checker.pads import RN_F32, WIDEN, const_of, contractable, is_bit_move, is_square


@dataclass(frozen=True)
class ReadFacts:
    """What one shared-memory read may return, per reader thread: the (index of the store in the
    read's ``hist``, writer thread) pairs that may have written its bytes last, or None when no
    store is proven to have written them before a barrier the read follows."""

    cands: tuple[tuple[tuple[int, int], ...] | None, ...]

    def covered(self) -> bool:
        return all(c is not None for c in self.cands)

    def renumbered(self, kept: tuple[int, ...]) -> ReadFacts | None:
        """The same facts over a history cut to the stores at positions ``kept`` (the read's own
        ``hist``); None when a candidate writer is not among them (it could not be named)."""
        pos = {j: i for i, j in enumerate(kept)}
        out: list[tuple[tuple[int, int], ...] | None] = []
        for c in self.cands:
            if c is None:
                out.append(None)
                continue
            if any(j not in pos for j, _ in c):
                return None
            out.append(tuple((pos[j], w) for j, w in c))
        return ReadFacts(tuple(out))


class SignFacts:
    """``nmz`` / ``nc`` masks over the 2^nbits threads of a block (memoised per node)."""

    def __init__(
        self, nbits: int, masked_false: dict[bytes, int], reads: dict[bytes, ReadFacts | None]
    ) -> None:
        self.size = 1 << nbits
        self.full = (1 << self.size) - 1
        self.masked_false = masked_false
        self.reads = reads
        self._memo: dict[tuple[bytes, str], int] = {}

    def canon_fixed(self, n: Node) -> int:
        """Threads at which canon(n) has n's bits."""
        return self.nmz(n) & self.nc(n)

    def nmz(self, n: Node) -> int:
        return self._get(n, "nmz")

    def nc(self, n: Node) -> int:
        return self._get(n, "nc")

    def _get(self, n: Node, which: str) -> int:
        key = (n.digest, which)
        got = self._memo.get(key)
        if got is None:
            self._memo[key] = 0  # (a node is acyclic; this only guards re-entry)
            got = self._rule(n, which)
            if which == "nmz":
                got |= self._get(n, "nng")  # (not negative: in particular not -0)
            got = self._memo[key] = got & self.full
        return got

    def _rule(self, n: Node, which: str) -> int:
        k = n.kind
        if k == "canon":
            return self._get(n.kids[0], "nng") if which == "nng" else self.full
        c = const_of(n)
        if c is not None:
            return self.full if c == 0 else 0
        if k == "add" and len(n.kids) == 2 and n.attrs and n.attrs[0] in RN_F32:
            if which == "nc":
                return self.full
            a, b = n.kids
            if which == "nng":
                return self._get(a, "nng") & self._get(b, "nng")
            if n.attrs[0] == "f32" and (contractable(a) or contractable(b)):
                return 0  # (maybe an fma: its nng, through nmz())
            return self._get(a, "nmz") | self._get(b, "nmz")
        if is_square(n):
            if which == "nng" and n.kind == "fma":
                return self._get(n.kids[2], "nng")
            return self.full if which in ("nng", "nc") else 0
        if k == "cvt" and len(n.kids) == 1 and n.attrs and n.attrs[0] in WIDEN:
            return self._get(n.kids[0], which) if which != "nc" else 0
        if k == "masked" and len(n.kids) == 2:
            f = self.masked_false.get(n.digest, 0)
            new, old = (self._get(x, which) for x in n.kids)
            return (f & old) | (new & old)
        if k == "shfl" and is_bit_move(n):
            b = const_of(n.kids[1])
            assert b is not None
            src = self._get(n.kids[0], which)
            out = 0
            for t in range(self.size):
                if src >> (t ^ b) & 1:
                    out |= 1 << t
            return out
        x = n.kids[0] if k == "ldmatrix" and len(n.kids) == 1 else n  # (a 4-byte read per lane)
        if x.kind == "xwarp" and len(x.kids) == 2:
            facts = self.reads.get(n.digest)
            if facts is None or len(facts.cands) != self.size:
                return 0
            stores = x.kids[1].kids
            vals: dict[int, int] = {}
            out = 0
            for t, cands in enumerate(facts.cands):
                if not cands:
                    continue
                ok = True
                for j, w in cands:
                    m = vals.get(j)
                    if m is None:
                        m = vals[j] = self._get(stores[j].kids[1], which)
                    if not m >> w & 1:
                        ok = False
                        break
                if ok:
                    out |= 1 << t
            return out
        return 0
