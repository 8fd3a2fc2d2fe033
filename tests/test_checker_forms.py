"""The exactness rules of the integer evaluator, checked against concrete arithmetic.

Every rewrite the evaluator admits (mask, shift, or) must agree with the machine operation for
every thread index and a spread of block coordinates; a rule that cannot prove exactness must
answer None (an opaque token), never a wrong form.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.checker.forms import Poly, exact_and, exact_bfe, exact_or, exact_shr

pytestmark = pytest.mark.unit

NBITS = 6  # a 64-thread block: %tid.x = sum 2^i tx_i
CTAIDS = (0, 1, 3, 7, 100)


def evaluate(p: Poly, tid: int, ctaid: int) -> int:
    env = {f"tx{i}": (tid >> i) & 1 for i in range(NBITS)}
    env["ctaid.x"] = ctaid
    total = 0
    for mono, c in p.terms.items():
        v = c
        for s in mono:
            v *= env[s]
        total += v
    return total


@st.composite
def forms(draw: st.DrawFn) -> Poly:
    """tid-derived index forms as Triton builds them: scaled/shifted/masked bits plus a block term."""
    p = Poly.bits("tx", NBITS)
    sh = draw(st.integers(0, 4))
    p = p.scale(1 << sh)
    mask = draw(st.integers(0, (1 << (NBITS + 4)) - 1))
    masked = exact_and(p, mask)
    if masked is not None:
        p = masked
    p = p + Poly.const(draw(st.integers(0, 3)) << draw(st.integers(0, 8)))
    if draw(st.booleans()):
        p = p + Poly.sym("ctaid.x").scale(1 << draw(st.integers(0, 10)))
    return p


@settings(max_examples=120, deadline=None)
@given(forms(), st.integers(0, (1 << 12) - 1))
def test_and_is_exact_when_admitted(p: Poly, mask: int) -> None:
    r = exact_and(p, mask)
    if r is None:
        return
    for tid, cta in itertools.product(range(1 << NBITS), CTAIDS):
        assert evaluate(r, tid, cta) == evaluate(p, tid, cta) & mask, (p, mask, r, tid, cta)


@settings(max_examples=120, deadline=None)
@given(forms(), st.integers(0, 12))
def test_shr_is_exact_when_admitted(p: Poly, k: int) -> None:
    r = exact_shr(p, k)
    if r is None:
        return
    for tid, cta in itertools.product(range(1 << NBITS), CTAIDS):
        assert evaluate(r, tid, cta) == evaluate(p, tid, cta) >> k, (p, k, r, tid, cta)


@settings(max_examples=120, deadline=None)
@given(forms(), forms())
def test_or_is_exact_when_admitted(a: Poly, b: Poly) -> None:
    r = exact_or(a, b)
    if r is None:
        return
    for tid, cta in itertools.product(range(1 << NBITS), CTAIDS):
        assert evaluate(r, tid, cta) == evaluate(a, tid, cta) | evaluate(b, tid, cta), (a, b, r, tid, cta)


@settings(max_examples=80, deadline=None)
@given(forms(), st.integers(0, 8), st.integers(1, 6))
def test_bfe_is_exact_when_admitted(p: Poly, pos: int, length: int) -> None:
    r = exact_bfe(p, pos, length)
    if r is None:
        return
    for tid, cta in itertools.product(range(1 << NBITS), CTAIDS):
        assert evaluate(r, tid, cta) == (evaluate(p, tid, cta) >> pos) & ((1 << length) - 1)


def test_rules_admit_the_common_triton_patterns() -> None:
    tid = Poly.bits("tx", 7)
    lane = exact_and(tid, 31)
    assert lane == Poly.bits("tx", 5)
    warp = exact_shr(tid, 5)
    assert warp == Poly({("tx5",): 1, ("tx6",): 2})
    assert exact_or(tid.scale(4), Poly.const(2)) == tid.scale(4) + Poly.const(2)
    assert exact_or(tid, Poly.const(1)) is None  # bit 0 is shared: not an addition


def test_assign_bits_equals_substituting_each_bit() -> None:
    """ThreadEval's one-pass bit assignment is the sequential substitution it replaced."""
    tx = Poly.bits("tx", 5)
    p = (
        tx * Poly.sym("p:ld")
        + tx * tx * Poly.const(3)
        + Poly.sym("ctaid.x") * Poly.sym("tx2")
        + Poly.const(7)
    )
    for t in (0, 1, 5, 22, 31):
        values = {f"tx{i}": t >> i & 1 for i in range(5)}
        want = p
        for s, v in values.items():
            want = want.substitute(s, Poly.const(v))
        assert p.assign_bits(values) == want, (t, p.assign_bits(values), want)


@st.composite
def signed_tile_rows(draw: st.DrawFn) -> Poly:
    """A tile's first row as a grouped tile order computes it through a remainder:
    2^k * (ctaid.x - q * ctaid.y), whose sign is not known, plus thread bits below 2^k or not."""
    k = draw(st.integers(2, 7))
    q = draw(st.integers(1, 9))
    base = (Poly.sym("ctaid.x") - Poly.sym("ctaid.y").scale(q)).scale(1 << k)
    lanes = exact_and(Poly.bits("tx", NBITS), draw(st.integers(0, (1 << NBITS) - 1)))
    return (
        base
        + (lanes if lanes is not None else Poly.const(0))
        + Poly.const(draw(st.integers(0, 3)) << draw(st.integers(0, 8)))
    )


@settings(max_examples=150, deadline=None)
@given(signed_tile_rows(), forms(), st.sampled_from([0, 1, 5, 40]))
def test_or_with_a_signed_tile_base_is_exact_in_every_register_width(a: Poly, b: Poly, cy: int) -> None:
    """The base may be negative: its low k bits are still 0 in two's complement, so an or whose
    other side stays below 2^k (and off a's own low bits) is the sum, at 32 and 64 bits."""
    r = exact_or(a, b)
    if r is None:
        return
    for tid, cta in itertools.product(range(1 << NBITS), CTAIDS):
        env_b = evaluate(b, tid, cta)
        env_a = evaluate(a.substitute("ctaid.y", Poly.const(cy)), tid, cta)
        got = evaluate(r.substitute("ctaid.y", Poly.const(cy)), tid, cta)
        for width in (32, 64):
            m = (1 << width) - 1
            assert got & m == (env_a & m) | (env_b & m), (a, b, r, tid, cta, cy, width)


def test_or_admits_a_row_base_made_through_a_remainder() -> None:
    tile = (Poly.sym("ctaid.x") - Poly.sym("Tv:q").scale(3)).scale(64)  # may be negative
    rows = exact_and(Poly.bits("tx", 7), 63)
    assert rows is not None
    assert exact_or(tile, rows) == tile + rows
    assert exact_or(tile + Poly.const(16), Poly.const(16)) is None  # bit 4 is shared
    assert exact_or(tile, Poly.const(64)) is None  # bit 6 may be set in the tile part
