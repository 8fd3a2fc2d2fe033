"""Per-thread sign facts of a launch-specialised walk: where ``canon(x)`` is ``x`` itself.

``canon(x)`` (``ptx/walk.py: mk_fadd``) is x with -0 turned into +0 and any NaN into the
canonical NaN. A padded fp32 sum carries it at its root; the same sum without padding does not.
The two store the same bytes wherever x is neither -0 nor a non-canonical NaN. This module proves
that per thread of the block (thread t of ``tid.x``, bits ``tx0 ..``), as two bit masks over the
block's threads:

* ``nmz(n)``: threads at which n's value is provably not -0;
* ``nc(n)``: threads at which n's value is provably not a NaN other than the canonical one.

Rules (anything else: the empty set, which only keeps a class apart):

* ``canon(x)``: every thread (by definition).
* an integer constant: every thread when its bits are 0 (+0.0 in every width), else none.
* ``add`` (``add.f32`` / ``add.rn.f32``: round to nearest, no flush to zero):
  nmz = nmz(a) | nmz(b). Under round to nearest a sum is -0 only when both operands are -0: an
  exact zero of opposite-signed operands is +0, a non-zero exact sum never rounds to zero
  (subnormal sums are exact, nothing is flushed), and +-inf / NaN are not -0. nc = every thread
  (the checker's standing assumption: every NaN result of an add is the canonical NaN).
* ``cvt.f32.f16`` / ``cvt.f32.bf16`` (exact widenings): nmz = nmz(x) (sign and zero-ness kept);
  nc = none (a NaN payload may be kept).
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

FOLD_ADD = frozenset({"f32", "rn.f32"})  # plain fp32 adds, round to nearest even, subnormals kept
WIDEN = frozenset({"f32.f16", "f32.bf16"})  # exact float widenings


@dataclass(frozen=True)
class ReadFacts:
    """What one shared-memory read may return, per reader thread: the (index of the store in the
    read's ``hist``, writer thread) pairs that may have written its bytes last, or None when no
    store is proven to have written them before a barrier the read follows."""

    cands: tuple[tuple[tuple[int, int], ...] | None, ...]

    def covered(self) -> bool:
        return all(c is not None for c in self.cands)


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
            got = self._memo[key] = self._rule(n, which) & self.full
        return got

    def _rule(self, n: Node, which: str) -> int:
        k = n.kind
        if k == "canon":
            return self.full
        c = const_of(n)
        if c is not None:
            return self.full if c == 0 else 0
        if k == "add" and len(n.kids) == 2 and n.attrs and n.attrs[0] in FOLD_ADD:
            if which == "nc":
                return self.full
            return self._get(n.kids[0], which) | self._get(n.kids[1], which)
        if k == "cvt" and len(n.kids) == 1 and n.attrs and n.attrs[0] in WIDEN:
            return self._get(n.kids[0], which) if which == "nmz" else 0
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
