"""emulate() against a slow, independent reading of the GEMMDesc docstring.

The reference below evaluates one output element at a time with Python integers and Fractions
(no numpy arithmetic, no shared helpers except KCut.parts, which is the contract itself), and
hypothesis draws random descriptors: nests of cuts with every layout / merge / span rule, both
residue placements, fast and promoted accumulation, the scalar path, partial and merge types.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.desc import GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw

pytestmark = pytest.mark.unit

# (fraction bits, min normal exponent, max exponent) of the formats the reference rounds to
FMT = {"fp32": (23, -126, 127), "fp16": (10, -14, 15), "bf16": (7, -126, 127), "e8m13": (13, -126, 127)}
EMIN_IN = {"fp16": -14, "bf16": -126, "fp8_e4m3": -6, "fp8_e5m2": -14}
# (L, F, e_zero, out) per (arch, instruction, family), restated from NUMERICS.md
MODEL = {
    ("sm_90", "16bit"): (16, 25, -133, "fp32"),
    ("sm_90", "fp8"): (32, 13, -133, "e8m13"),
    ("sm_100", "16bit"): (16, 25, -133, "fp32"),
    ("sm_100", "fp8"): (32, 25, -133, "fp32"),
    ("sm_80", "16bit"): (8, 24, -132, "fp32"),
}


def exponent(x: Fraction, emin: int) -> int:
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    return max(e, emin)


def rnd(x: Fraction, fmt: str, mode: str = "rn") -> Fraction:
    """Round to a format; overflow is reported as an exception (the draws here stay finite)."""
    if x == 0:
        return Fraction(0)
    frac, emin, emax = FMT[fmt]
    q = Fraction(2) ** (exponent(x, emin) - frac)
    n = abs(x) / q
    if mode == "rz":
        r = math.floor(n)
    else:
        fl = math.floor(n)
        rem = n - fl
        r = fl + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else fl
    val = r * q
    if val >= Fraction(2) ** (emax + 1):
        raise OverflowError
    return val if x > 0 else -val


def block(
    terms: list[tuple[Fraction, Fraction]], c: Fraction, model: tuple[int, int, int, str], emin_in: int
) -> Fraction:
    _, f, e_zero, out = model
    items = []
    for x, y in terms:
        if x == 0 or y == 0:
            items.append((Fraction(0), e_zero))
        else:
            items.append((x * y, exponent(x, emin_in) + exponent(y, emin_in)))
    items.append((c, e_zero if c == 0 else exponent(c, -126)))
    emax = max(e for _, e in items)
    q = Fraction(2) ** (emax - f)
    total = sum((int(v / q) * q for v, _ in items), Fraction(0))
    return rnd(total, out, "rz")


def leaf(desc: GEMMDesc, a: list[Fraction], b: list[Fraction], idx: list[int], start: Fraction) -> Fraction:
    if desc.instruction == "fma":
        acc = start
        for k in idx:
            acc = rnd(a[k] * b[k] + acc, "fp32")
        return acc
    family = "fp8" if desc.in_dtype.startswith("fp8") else "16bit"
    model = MODEL[(desc.arch, family)]
    n, ik = len(idx), desc.instruction_k
    r = n % desc.k_loop_step
    turns = [idx[:r], idx[r:]] if desc.residue == "first" else [idx[: n - r], idx[n - r :]]
    groups = [t[j : j + ik] for t in turns for j in range(0, len(t), ik)]

    def fold(g: list[int], c: Fraction) -> Fraction:
        padded = [(a[k], b[k]) for k in g] + [(Fraction(0), Fraction(0))] * (ik - len(g))
        for j in range(0, ik, model[0]):  # an instruction wider than the block is a chain of blocks
            c = block(padded[j : j + model[0]], c, model, EMIN_IN[desc.in_dtype])
        return c

    acc = start
    if desc.use_fast_accum:
        for g in groups:
            acc = fold(g, acc)
        return acc
    temp, pending = Fraction(0), 0
    for g in groups:
        temp, pending = fold(g, temp), pending + 1
        if pending == desc.promotion_interval:
            acc, temp, pending = rnd(acc + temp, "fp32"), Fraction(0), 0
    return rnd(acc + temp, "fp32") if pending else acc


def merge(values: list[Fraction], how: str, fmt: str) -> Fraction:
    def add(x: Fraction, y: Fraction) -> Fraction:  # the fp32 sum, rounded again to a narrow fmt
        return rnd(rnd(x + y, "fp32"), fmt)

    if how == "chain":
        s = Fraction(0)
        for v in values:
            s = add(s, v)
        return s
    lanes = list(values)
    offsets = [1 << i for i in range(len(lanes).bit_length() - 1)]
    for off in offsets if how == "butterfly_up" else offsets[::-1]:
        lanes = [add(lanes[i], lanes[i ^ off]) for i in range(len(lanes))]
    return lanes[0]


def reference(desc: GEMMDesc, a: list[Fraction], b: list[Fraction]) -> Fraction:
    def node(idx: list[int], level: int) -> Fraction:
        if level == len(desc.k_cuts):
            return leaf(desc, a, b, idx, Fraction(0))
        cut = desc.k_cuts[level]
        vals = [
            node([idx[p] for s, e in runs for p in range(s, e)], level + 1) for runs in cut.parts(len(idx))
        ]
        if level == 0:
            return merge([rnd(v, desc.partial_dtype) for v in vals], cut.merge, desc.merge_dtype)
        return merge(vals, cut.merge, "fp32")

    return rnd(node(list(range(len(a))), 0), desc.out_dtype)


@st.composite
def cuts(draw_: st.DrawFn) -> KCut:
    layout = draw_(st.sampled_from(["contiguous", "strided"]))
    merge_ = draw_(st.sampled_from(["chain", "butterfly_up", "butterfly_down"]))
    pow2 = draw_(st.sampled_from([1, 2, 4, 8]))
    if layout == "strided":
        return KCut("strided", count=pow2, span=draw_(st.sampled_from([1, 3, 16, 32])), merge=merge_)
    if merge_ != "chain" or draw_(st.booleans()):
        rule = draw_(st.sampled_from(["ceil", "floor", "tail_dropped"]))
        return KCut(
            "contiguous", count=pow2, granule=draw_(st.sampled_from([1, 8, 16])), span_rule=rule, merge=merge_
        )
    return KCut("contiguous", span=draw_(st.integers(5, 70)))


@st.composite
def descs(draw_: st.DrawFn) -> GEMMDesc:
    in_dtype = draw_(st.sampled_from(["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]))
    fp8 = in_dtype.startswith("fp8")
    kind = draw_(st.sampled_from(["tensor", "tensor", "fma"]))
    nest = tuple(draw_(st.lists(cuts(), max_size=2)))
    common = dict(
        in_dtype=in_dtype,
        out_dtype=draw_(st.sampled_from(["fp32", "fp16", "bf16"])),
        k_cuts=nest,
        partial_dtype=draw_(st.sampled_from(["fp32", "fp32", "fp16", "bf16"])),
        merge_dtype=draw_(st.sampled_from(["fp32", "fp32", "bf16"])),
    )
    if kind == "fma":
        return GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, **common)
    arch, inst = draw_(
        st.sampled_from(
            [("sm_90", "wgmma"), ("sm_90", "mma"), ("sm_100", "tcgen05")]
            + ([] if fp8 else [("sm_80", "mma")])
        )
    )
    if fp8:
        ik = 32
    elif inst == "mma":
        ik = draw_(st.sampled_from([8, 16]))
    else:
        ik = 16
    fast = draw_(st.booleans())
    return GEMMDesc(
        arch=arch,
        instruction=inst,
        instruction_k=ik,
        use_fast_accum=fast,
        promotion_interval=None if fast else draw_(st.integers(1, 3)),
        k_loop_step=ik * draw_(st.sampled_from([1, 2, 4])),
        residue=draw_(st.sampled_from(["first", "last"])),
        **common,
    )


@settings(max_examples=40, deadline=None)
@given(
    desc=descs(),
    k=st.integers(0, 150),
    seed=st.integers(0, 2**31),
    kind=st.sampled_from(["ordinary", "wide", "tiny", "subnormal", "cancel"]),
)
def test_emulate_matches_the_docstring_reference(desc: GEMMDesc, k: int, seed: int, kind: str) -> None:
    m, n = 2, 2
    a = draw((m, k), desc.in_dtype, kind, seed)
    b = draw((k, n), desc.in_dtype, kind, seed + 1)
    got = emulate(desc, a, b)
    fa = [[Fraction(float(v)) for v in row] for row in a.astype(np.float64)]
    fb = [[Fraction(float(v)) for v in col] for col in b.T.astype(np.float64)]
    for i in range(m):
        for j in range(n):
            try:
                want = reference(desc, fa[i], fb[j])
            except OverflowError:
                continue  # the reference does not model inf; outputs that overflow are skipped
            g = float(got[i, j])
            assert Fraction(g) == want, (
                f"seed {seed} kind {kind} at {(i, j)}: {g!r} != {float(want)!r}\n{desc.to_yaml()}"
            )
