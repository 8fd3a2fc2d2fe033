"""Block / thread split of a root's byte-offset coordinate: relativize's second try.

Launch specialisation makes a row stride a number, so a store's byte offset becomes one form
E = B + T, with B = sum c_i * ctaid_i and T a form over thread bits plus a constant, and the
one-coordinate rewrite cannot say "the start of this row" (a multiple of ctaid alone).

Rule: when B has only lone ``ctaid`` terms whose coefficients are all multiples of 2^k (k the
largest such exponent: canonical), and T takes values in [0, 2^k) only (enumerated at every
thread id), then T = E mod 2^k and B = E - T for every store. So OUT_blk = B and OUT_thr = T are
functions of the element's address alone, and a tree rewritten over them (their names carry k)
is still a function of the element it is stored at: two kernels whose relative roots agree store
equal values at equal addresses, as with the one-coordinate rewrite. Anything else (a product of
a block id and a thread bit, another variant symbol, T out of range) gives no split: the root
stays physical, which can only split classes.

A narrower split is exact too: at any k' <= k where T's values at every thread lie in one
aligned window [C, C + 2^k'), T - C = E mod 2^k' and B + C = E - (E mod 2^k'). A block of
several rows stores row r at T = r * pitch + column: split at the row pitch's bit, every row's
store is "the row's start and the column", as a one-row block's is, where the block's bit names
the second row "the block's start plus one pitch" (``row_bits`` finds the pitch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fixbits.checker.forms import Poly, is_bit_symbol

if TYPE_CHECKING:
    from fixbits.checker.node import Node, Root

_MAX_BITS = 16


@dataclass(frozen=True)
class SplitCoord:
    """The two parts of a coordinate and the names of the symbols that stand for them."""

    block: Poly  # the block-id terms (B)
    thread: Poly  # the thread-bit terms and constant, less ``const`` (T - C)
    k: int
    const: int = 0  # C: a multiple of 2^k; OUT_blk = B + C, OUT_thr = T - C

    @property
    def names(self) -> tuple[str, str]:
        return (f"OUT[|blk{self.k}]", f"OUT[|thr{self.k}]")


def _parts(p: Poly) -> tuple[Poly, Poly] | None:
    """(block-id terms, thread-bit and constant terms); None when a term is neither."""
    blk: dict[tuple, int] = {}
    thr: dict[tuple, int] = {}
    for m, c in p.terms.items():
        if len(m) == 1 and m[0] in ("ctaid.x", "ctaid.y", "ctaid.z"):
            blk[m] = c
        elif all(is_bit_symbol(s) for s in m):
            thr[m] = c
        else:
            return None
    return Poly(blk), Poly(thr)


def _v2(c: int) -> int:
    return (abs(c) & -abs(c)).bit_length() - 1


def _window(p: Poly) -> tuple[Poly, Poly, int, int, int] | None:
    """(B, T, the largest k B's coefficients allow, min T, max T) of a splittable coordinate."""
    from fixbits.checker.forward import eval_all

    got = _parts(p)
    if got is None:
        return None
    blk, thr = got
    if not blk.terms or any(c == 0 for c in blk.terms.values()):
        return None
    bits = sorted({s for m in thr.terms for s in m})
    if len(bits) > _MAX_BITS:
        return None
    ren = {b: f"tx{i}" for i, b in enumerate(bits)}
    vals = eval_all(Poly({tuple(ren[x] for x in m): c for m, c in thr.terms.items()}), len(bits))
    return blk, thr, min(_v2(c) for c in blk.terms.values()), min(vals), max(vals)


def split_coordinate(p: Poly, at: int | None = None) -> SplitCoord | None:
    """The block / thread split of coordinate ``p`` when it is exact (module docstring): at
    bit ``at`` when it is given and exact there, else at the largest k with C = 0."""
    w = _window(p)
    if w is None:
        return None
    blk, thr, k, lo, hi = w
    if at is not None and at <= k and lo >= 0 and lo >> at == hi >> at:
        c = (lo >> at) << at
        return SplitCoord(blk, thr - Poly.const(c), at, c)
    if lo < 0 or hi >= 1 << k:
        return None
    return SplitCoord(blk, thr, k)


def split_group(g: Poly, sc: SplitCoord) -> Poly | None:
    """``g`` (a variant form of the byte-offset group) over the split's symbols: its block terms
    an exact multiple of B, its thread terms an exact multiple of T plus a constant; None when
    it is not such a combination (the tree then stays variant)."""
    from fixbits.checker.walk import _ratio

    got = _parts(g)
    if got is None:
        return None
    gb, gt = got
    nb, nt = sc.names
    out = Poly({})
    if gb.terms:
        r = _ratio(gb, sc.block)
        if r is None or (r[0] * sc.const) % r[1]:
            return None
        out = out + Poly({(f"{nb}/{r[1]}",): r[0]})
        gt = gt - Poly.const(r[0] * sc.const // r[1])  # (r * OUT_blk holds r * C)
    if gt.is_variant():
        r = _ratio(gt, sc.thread)
        if r is not None:
            return out + Poly({(f"{nt}/{r[1]}",): r[0]})
        g0, c0 = gt.const_value(), sc.thread.const_value()
        r = _ratio(gt - Poly.const(g0), sc.thread - Poly.const(c0))
        if r is None or (r[0] * c0) % r[1]:
            return None
        return out + Poly({(f"{nt}/{r[1]}",): r[0]}) + Poly.const(g0 - r[0] * c0 // r[1])
    return out + gt


def row_bits(roots: list[Root]) -> dict[str, int]:
    """Per output, the bit its split rewrites split at where a block stores several rows: a row
    start in a root's tree, a multiple of the address's block part plus a constant (a later
    row's start, e.g. 1024 + 2048 ctaid for a 4096-byte row pitch), gives the bit of that
    constant in bytes; the smallest such bit of an output's roots names every row by its own
    start, as a one-row block's roots are named. Any bit at which a root's split is exact gives
    an exact rewrite (a root whose split is not exact there keeps the default), so the choice
    only decides which kernels meet."""
    out: dict[str, int] = {}
    seen: dict[tuple, set[bytes]] = {}  # (per output and block part: roots share subtrees)
    for r in roots:
        if r.relative or r.address.poly is None:
            continue
        terms = r.address.poly.terms
        blk = Poly({m: c for m, c in terms.items() if len(m) == 1 and m[0].startswith("ctaid.")})
        if not blk.terms:
            continue
        bit = _row_bit(r.value, blk, seen.setdefault((r.param, blk.key()), set()))
        if bit is not None and bit < out.get(r.param, bit + 1):
            out[r.param] = bit
    return out


_TRIES = 3  # split_bits tries at most this many bits below the block's own


def split_bits(roots: list[Root], param_syms: set[str]) -> dict[str, tuple[int | None, ...]]:
    """Per output, the bits to try its split rewrite at, in order (None: the default, the
    largest k the block part allows), for the caller to keep the first that signs the output's
    roots with the fewest physical roots, then the fewest distinct trees. With a row start in
    the trees (``row_bits``) that bit alone. Else, where every root's thread part lies in one
    aligned window below the block's bit, the default and then up to _TRIES bits below it down to
    that window's: a block of several rows whose stores each stay inside one row meets a block
    of one row at the row pitch's bit, where every row's roots are the first row's (the trees
    say which bit does that; the roots' windows alone cannot tell a row from a run of columns)."""
    rows = row_bits(roots)
    out: dict[str, tuple[int | None, ...]] = {p: (b,) for p, b in rows.items()}
    for param, (b_min, k) in _window_bits(roots, param_syms).items():
        if param not in out:
            out[param] = (None, *range(k - 1, max(b_min, k - _TRIES) - 1, -1))
    return out


def _window_bits(roots: list[Root], param_syms: set[str]) -> dict[str, tuple[int, int]]:
    """Per output whose roots all have a splittable byte offset: (the narrowest bit at which
    every one of them splits exactly, its thread part's values in one aligned window; the
    smallest bit their block parts allow), where the first is below the second."""
    need: dict[str, int] = {}
    top: dict[str, int] = {}
    bad: set[str] = set()
    for r in roots:
        if r.relative:
            continue
        w = _offset_window(r.address.poly, param_syms) if r.address.poly is not None else None
        if w is None:
            bad.add(r.param)
            continue
        k, lo, hi = w
        b = (lo ^ hi).bit_length()
        if lo < 0 or b > k:
            bad.add(r.param)
            continue
        need[r.param] = max(need.get(r.param, 0), b)
        top[r.param] = min(top.get(r.param, k), k)
    return {p: (b, top[p]) for p, b in need.items() if p not in bad and b < top[p]}


def _offset_window(addr: Poly, param_syms: set[str]) -> tuple[int, int, int] | None:
    """(the largest bit the block part allows, min and max of the thread part) of an address's
    byte offset (its pointer parameter left out, found as walk._frame finds it); None when the
    offset is not block ids plus thread bits plus a constant."""
    base = next((m for m, c in addr.terms.items() if len(m) == 1 and m[0] in param_syms and c == 1), None)
    if base is None:
        return None
    w = _window(Poly({m: c for m, c in addr.terms.items() if m != base}))
    return None if w is None else (w[2], w[3], w[4])


def _row_bit(value: Node, blk: Poly, seen: set[bytes]) -> int | None:
    """The smallest bit of a row start's constant (``row_bits``) in ``value``, below the bit of
    the address's block part ``blk``; None when there is none (``seen``: nodes already read)."""
    from fixbits.checker.walk import _ratio

    best = min(_v2(c) for c in blk.terms.values())
    found = False
    todo = [value]
    while todo:
        x = todo.pop()
        if x.digest in seen or not x.variant:
            continue
        seen.add(x.digest)
        todo.extend(x.kids)
        p = x.poly
        if p is None:
            continue
        c0 = p.terms.get((), 0)
        if not c0 or len(p.terms) < 2:
            continue
        ratio = _ratio(Poly({m: c for m, c in p.terms.items() if m}), blk)
        if ratio is None or (c0 * ratio[1]) % ratio[0]:
            continue
        bit = _v2(c0 * ratio[1] // ratio[0])
        if bit < best:
            best, found = bit, True
    return best if found else None
