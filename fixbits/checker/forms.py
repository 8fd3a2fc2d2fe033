"""Integer values of the symbolic thread: polynomials over launch symbols, or opaque tokens.

An address decides which element a leaf is, so integer arithmetic is evaluated exactly where a
rule proves it exact (add, multiply, shift by a literal, masks and ors the bit rules admit) and
becomes an opaque symbol otherwise. An opaque symbol carries the digest of the expression that
made it, so it equals only the same expression: it can split a class, never merge two.

Symbols:
  ``tx3``      bit 3 of %tid.x (the launch bound makes %tid.x = sum 2^i tx_i exact)
  ``ctaid.x``  block coordinate            ``nctaid.x`` grid extent
  ``p:NAME``   kernel parameter            ``smem``     base of the shared window
  ``IT1``      iteration count of the loop at nesting depth 1
  ``Tv:...``   opaque token whose inputs vary with the thread/block (``Ti:`` when they do not)
  ``D:...``    integer read from memory (data, never a launch fact)
Integers are treated as unbounded and non-negative, as Triton's index arithmetic assumes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

Mono = tuple[str, ...]

_VARIANT_PREFIXES = ("tx", "ty", "tz", "tid.", "ctaid.", "IT", "Tv:", "D:", "lane", "warpid", "carried:")


def is_bit_symbol(sym: str) -> bool:
    return len(sym) >= 3 and sym[0] == "t" and sym[1] in "xyz" and sym[2:].isdigit()


def is_variant_symbol(sym: str) -> bool:
    """True for symbols whose value differs between threads, blocks or loop iterations."""
    return sym.startswith(_VARIANT_PREFIXES)


def is_data_symbol(sym: str) -> bool:
    return sym.startswith("D:") or sym.startswith("carried:")


def add_terms(t: dict[Mono, int], items: Iterable[tuple[Mono, int]]) -> None:
    """Add terms into ``t`` in order, dropping those that cancel (Poly's one accumulation rule)."""
    for m, c in items:
        v = t.get(m, 0) + c
        if v:
            t[m] = v
        else:
            del t[m]


def iter_symbol(depth: int) -> str:
    """The iteration count of the loop at ``depth`` (1 for the outermost) in integer forms."""
    return f"IT{depth}"


class Poly:
    """An exact integer polynomial: ``{monomial: coefficient}``; immutable after construction."""

    __slots__ = ("terms", "_key", "_var", "_bits", "_hash")

    def __init__(self, terms: Mapping[Mono, int]):
        self.terms: dict[Mono, int] = {m: c for m, c in terms.items() if c != 0}
        self._key: tuple[tuple[Mono, int], ...] | None = None
        self._var: bool | None = None
        self._bits: tuple[dict[int, str] | None, Poly] | None = None
        self._hash: int | None = None

    @classmethod
    def _of(cls, terms: dict[Mono, int]) -> Poly:
        """A polynomial over ``terms`` that already holds no zero coefficient (not copied)."""
        p = cls.__new__(cls)
        p.terms = terms
        p._key = None
        p._var = None
        p._bits = None
        p._hash = None
        return p

    # ---- construction -------------------------------------------------------------------
    @staticmethod
    def const(c: int) -> Poly:
        return Poly._of({(): c} if c else {})

    @staticmethod
    def sym(s: str) -> Poly:
        return Poly._of({(s,): 1})

    @staticmethod
    def bits(prefix: str, nbits: int) -> Poly:
        return Poly({(f"{prefix}{i}",): 1 << i for i in range(nbits)})

    # ---- inspection ---------------------------------------------------------------------
    def key(self) -> tuple[tuple[Mono, int], ...]:
        if self._key is None:
            self._key = tuple(sorted(self.terms.items()))
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and self.key() == other.key()

    def __hash__(self) -> int:
        # (cached: the element sets of maxsets.py hash each index again at every membership test)
        if self._hash is None:
            self._hash = hash(self.key())
        return self._hash

    def __repr__(self) -> str:
        return self.text()

    def text(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for mono, c in self.key():
            if not mono:
                parts.append(str(c))
            else:
                parts.append(("" if c == 1 else f"{c}*") + "*".join(mono))
        return " + ".join(parts)

    def is_const(self) -> bool:
        return all(not m for m in self.terms)

    def const_value(self) -> int:
        return self.terms.get((), 0)

    def symbols(self) -> set[str]:
        return {s for m in self.terms for s in m}

    def is_variant(self) -> bool:
        if self._var is None:
            self._var = any(is_variant_symbol(s) for m in self.terms for s in m)
        return self._var

    def has_data(self) -> bool:
        return any(is_data_symbol(s) for m in self.terms for s in m)

    # ---- exact arithmetic ---------------------------------------------------------------
    def __add__(self, other: Poly) -> Poly:
        if not other.terms:
            return self
        if not self.terms:
            return other
        t = dict(self.terms)
        add_terms(t, other.terms.items())
        return Poly._of(t)

    def __neg__(self) -> Poly:
        return Poly._of({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def scale(self, k: int) -> Poly:
        return Poly({m: c * k for m, c in self.terms.items()})

    def __mul__(self, other: Poly) -> Poly:
        if other.is_const():
            return self.scale(other.const_value())
        if self.is_const():
            return other.scale(self.const_value())
        t: dict[Mono, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                t[m] = t.get(m, 0) + c1 * c2
        return Poly(t)

    def substitute(self, sym: str, value: Poly) -> Poly:
        # one accumulator in place of a sum of one-term polynomials: the same terms in the same
        # order (a sum copies its left side and adds the right side's terms in order)
        t: dict[Mono, int] = {}
        for m, c in self.terms.items():
            if sym not in m:
                add_terms(t, ((m, c),))
                continue
            term = Poly._of({tuple(s for s in m if s != sym): c})
            for _ in range(m.count(sym)):
                term = term * value
            add_terms(t, term.terms.items())
        return Poly._of(t)

    def assign_bits(self, values: Mapping[str, int]) -> Poly:
        """The polynomial with each bit symbol in ``values`` set to its value (0 or 1): the
        same polynomial as substituting them one by one (a bit is its own power), in one pass."""
        t: dict[Mono, int] = {}
        for m, c in self.terms.items():
            keep: list[str] = []
            zero = False
            for s in m:
                v = values.get(s)
                if v is None:
                    keep.append(s)
                elif not v:
                    zero = True
                    break
            if not zero:
                add_terms(t, ((tuple(keep), c),))
        return Poly._of(t)

    # ---- bit structure ------------------------------------------------------------------
    def split_bits(self) -> tuple[dict[int, str] | None, Poly]:
        """Split into single-bit terms {position: bit symbol} and the rest; None if two bit terms
        share a position or a bit term's coefficient is not a power of two.
        (Cached: callers must not change the returned mapping.)"""
        if self._bits is None:
            self._bits = self._split_bits()
        return self._bits

    def _split_bits(self) -> tuple[dict[int, str] | None, Poly]:
        bits: dict[int, str] = {}
        rest: dict[Mono, int] = {}
        for m, c in self.terms.items():
            if len(m) == 1 and is_bit_symbol(m[0]) and c > 0 and c & (c - 1) == 0:
                pos = c.bit_length() - 1
                if pos in bits:
                    return None, self
                bits[pos] = m[0]
            else:
                rest[m] = c
        return bits, Poly(rest)

    def trailing_zeros(self) -> int:
        """Trailing zero bits common to every coefficient (a large number for the zero form)."""
        tz = 1 << 30
        for c in self.terms.values():
            tz = min(tz, (c & -c).bit_length() - 1)
        return tz


_THREAD_SPLIT: dict[tuple, tuple[Poly, tuple, int] | None] = {}


def split_thread_form(p: Poly, nbits: int) -> tuple[Poly, tuple, int] | None:
    """(the terms over thread bits, the key of the others but the constant, the constant) of a
    shared address: its writers / readers differ by the first part only. None when a thread bit
    is not one of a block's tx0 .. tx{nbits-1} or multiplies another symbol (memoised per form:
    the race check and thread_roots' histories meet the same stores again and again)."""
    key = (p.key(), nbits)
    if key in _THREAD_SPLIT:
        return _THREAD_SPLIT[key]
    res: tuple[Poly, tuple, int] | None = None
    bit: dict[Mono, int] = {}
    rest: dict[Mono, int] = {}
    ok = True
    for m, c in p.terms.items():
        if any(is_bit_symbol(x) for x in m):
            if not all(x[:2] == "tx" and int(x[2:]) < nbits for x in m if is_bit_symbol(x)):
                ok = False
                break
            bit[m] = c
        else:
            rest[m] = c
    if ok and not any(not is_bit_symbol(x) for m in bit for x in m):
        c0 = rest.pop((), 0)
        res = (Poly(bit), Poly(rest).key(), c0)
    if len(_THREAD_SPLIT) > 200_000:
        _THREAD_SPLIT.clear()
    _THREAD_SPLIT[key] = res
    return res


def _occupancy(p: Poly) -> tuple[int, int] | None:
    """(mask of low bits that may be set, first position from which the symbolic part may set
    a bit) for a form of distinct thread bits, a non-negative constant and a symbolic part, or
    None when unknown. The symbolic part's sign does not matter: a multiple of 2^k has its low
    k bits 0 in two's complement at any width (a tile's first row computed through a remainder
    carries negative terms)."""
    bits, rest = p.split_bits()
    if bits is None:
        return None
    low = 0
    for pos in bits:
        low |= 1 << pos
    c0 = rest.const_value()
    if c0 < 0:
        return None
    sym_rest = Poly({m: c for m, c in rest.terms.items() if m})
    high = sym_rest.trailing_zeros() if sym_rest.terms else 1 << 30
    if c0 & low:
        return None
    return low | c0, high


def exact_and(p: Poly, mask: int) -> Poly | None:
    if mask < 0:
        mask &= (1 << 64) - 1
    if p.is_const():
        return Poly.const(p.const_value() & mask)
    bits, rest = p.split_bits()
    if bits is None:
        return None
    c0 = rest.const_value()
    sym_rest = Poly({m: c for m, c in rest.terms.items() if m})
    low_bits = 0
    for pos in bits:
        low_bits |= 1 << pos
    if c0 < 0 or (c0 & low_bits):
        return None
    if not sym_rest.terms:
        kept: dict[Mono, int] = {(sym,): 1 << pos for pos, sym in bits.items() if mask >> pos & 1}
        return Poly(kept) + Poly.const(c0 & mask)
    k = sym_rest.trailing_zeros()
    if mask < (1 << k):
        kept = {(sym,): 1 << pos for pos, sym in bits.items() if mask >> pos & 1}
        return Poly(kept) + Poly.const(c0 & mask)
    # the mask covers every bit the form can set: identity (needs an upper bound: none here)
    return None


def exact_shr(p: Poly, k: int) -> Poly | None:
    if k == 0:
        return p
    if p.is_const():
        return Poly.const(p.const_value() >> k)
    if p.trailing_zeros() >= k:
        return Poly({m: c >> k for m, c in p.terms.items()})
    bits, rest = p.split_bits()
    if bits is None:
        return None
    if rest.trailing_zeros() < k:
        return None
    low_bits = 0
    for pos in bits:
        low_bits |= 1 << pos
    if rest.const_value() < 0:
        return None
    out = {m: c >> k for m, c in rest.terms.items()}
    for pos, sym in bits.items():
        if pos >= k:
            out[(sym,)] = out.get((sym,), 0) + (1 << (pos - k))
    return Poly(out)


def exact_or(a: Poly, b: Poly) -> Poly | None:
    if a.is_const() and b.is_const():
        return Poly.const(a.const_value() | b.const_value())
    oa, ob = _occupancy(a), _occupancy(b)
    if oa is None or ob is None:
        return None
    (la, ha), (lb, hb) = oa, ob
    # disjoint: no low bit shared, and neither's low bits reach the other's symbolic high part
    if la & lb:
        return None
    if la >> hb or lb >> ha:
        return None
    if ha < (1 << 30) and hb < (1 << 30):
        return None  # both carry symbolic high parts: cannot prove disjoint
    return a + b


def exact_bfe(p: Poly, pos: int, length: int) -> Poly | None:
    """Unsigned bit-field extract (shift then mask)."""
    shifted = exact_shr(p, pos)
    if shifted is None:
        return None
    return exact_and(shifted, (1 << length) - 1)


def token(kind: str, parts: Iterable[object], variant: bool) -> Poly:
    """An opaque integer: equal only to the same expression over the same inputs."""
    h = hashlib.blake2b(repr((kind, tuple(parts))).encode(), digest_size=10).hexdigest()
    return Poly.sym(("Tv:" if variant else "Ti:") + h)


def data_token(parts: Iterable[object]) -> Poly:
    h = hashlib.blake2b(repr(tuple(parts)).encode(), digest_size=10).hexdigest()
    return Poly.sym("D:" + h)
