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
"""

from __future__ import annotations

from dataclasses import dataclass

from fixbits.checker.forms import Poly, is_bit_symbol

_MAX_BITS = 16


@dataclass(frozen=True)
class SplitCoord:
    """The two parts of a coordinate and the names of the symbols that stand for them."""

    block: Poly
    thread: Poly
    k: int

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


def split_coordinate(p: Poly) -> SplitCoord | None:
    """The block / thread split of coordinate ``p`` when it is exact (module docstring)."""
    from fixbits.checker.forward import eval_all

    got = _parts(p)
    if got is None:
        return None
    blk, thr = got
    if not blk.terms or any(c == 0 for c in blk.terms.values()):
        return None
    k = min(_v2(c) for c in blk.terms.values())
    bits = sorted({s for m in thr.terms for s in m})
    if len(bits) > _MAX_BITS:
        return None
    ren = {b: f"tx{i}" for i, b in enumerate(bits)}
    vals = eval_all(Poly({tuple(ren[x] for x in m): c for m, c in thr.terms.items()}), len(bits))
    if min(vals) < 0 or max(vals) >= 1 << k:
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
        if r is None:
            return None
        out = out + Poly({(f"{nb}/{r[1]}",): r[0]})
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
