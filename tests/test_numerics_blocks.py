"""Block models: the NUMERICS.md test vectors, special values, and a pure-Python reference."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits import golden
from fixbits.numerics import blocks, formats

pytestmark = pytest.mark.unit

H = blocks.HOPPER_16BIT


def fp16(bits_list: list[int]) -> np.ndarray:
    return formats.from_bits(np.array(bits_list, dtype=np.uint16), "fp16")


def u32(x: np.ndarray) -> int:
    return int(formats.bits(np.asarray(x, dtype=np.float32)))


# -- NUMERICS.md test vectors -------------------------------------------------------------------

_A = [-(2.0**13), -0.5, -0.25, -0.125]
_B = [2.0**10, 1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("model", "dtype", "length", "want"),
    [
        (blocks.HOPPER_16BIT, np.float16, 16, -0.75),
        (blocks.AMPERE_16BIT, np.float16, 8, -0.5),
        (blocks.HOPPER_FP8, ml_dtypes.float8_e5m2, 32, 0.0),
    ],
    ids=["hopper_fp16", "ampere_fp16", "hopper_e5m2"],
)
def test_vector_truncation(model: blocks.BlockModel, dtype: type, length: int, want: float) -> None:
    a = np.zeros(length, dtype=dtype)
    b = np.zeros(length, dtype=dtype)
    a[:4] = np.array(_A, dtype=np.float32).astype(dtype)
    b[:4] = np.array(_B, dtype=np.float32).astype(dtype)
    d = blocks.block_fold(a, b, np.float32(2.0**23), model)
    assert u32(d) == u32(np.float32(want)), (model.note, float(d), want)


@pytest.mark.parametrize(
    ("a", "b", "c", "want"),
    [
        ([0x3E00, 0x1000, 0x1000, 0], [0x3E00, 0x0C00, 0x0C00, 0], 0.0, 0x40100001),
        ([0x3C00, 0x1000, 0x1000, 0], [0x4080, 0x0C00, 0x0C00, 0], 0.0, 0x40100000),
        (
            [0x3E00, 0x3C01, 0x3C01, 0x3C00],
            [0x3E00, 0x3001, 0x3001, 0x3000],
            float(formats.from_bits(np.uint32(0x3E000000), "fp32")),
            0x40300801,
        ),
        ([0x3E00] * 4, [0x3D00] * 4, 1 - 2.0**-24, 0x4107FFFF),
    ],
)
def test_vector_volta_like(a: list[int], b: list[int], c: float, want: int) -> None:
    d = blocks.block_fold(fp16(a), fp16(b), np.float32(c), blocks.VOLTA_LIKE)
    assert u32(d) == want, f"got 0x{u32(d):08x}, want 0x{want:08x}"


# -- special values -------------------------------------------------------------------------------


def test_special_values() -> None:
    inf, nan = np.inf, np.nan
    a = np.array(
        [
            [1, 2, 0, 0],
            [nan, 1, 0, 0],
            [inf, 1, 0, 0],
            [inf, 0, 0, 0],
            [inf, 1, 0, 0],
            [1, -1, 0, 0],
            [0, 0, 0, 0],
            [60000, 60000, 0, 0],
        ],
        dtype=np.float16,
    )
    b = np.array(
        [
            [1, 1, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 0, 0],
            [1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 0, 0, 0],
            [60000, 60000, 0, 0],
        ],
        dtype=np.float16,
    )
    c = np.array([0, 0, 1, 0, -inf, 0, -0.0, 2.0**127], dtype=np.float32)
    d = blocks.block_fold(a, b, c, H)
    got = [int(u) for u in formats.bits(d)]
    assert got[0] == u32(np.float32(3))
    assert got[1] == 0x7FFFFFFF  # NaN in -> canonical NaN
    assert got[2] == 0x7F800000  # inf + finite -> inf
    assert got[3] == 0x7FFFFFFF  # inf * 0 -> NaN
    assert got[4] == 0x7FFFFFFF  # inf - inf -> NaN
    assert got[5] == 0  # exact cancellation -> +0
    assert got[6] == 0  # -0 accumulator plus zero products -> +0
    assert got[7] == u32(np.float32(2.0**127))  # products below 2^(127-25) truncate away
    # |d| >= 2^128 -> inf (bf16 products can reach it; RZ would give max finite, the model gives inf)
    big = np.array([2.0**64, 2.0**64], dtype=ml_dtypes.bfloat16)
    assert u32(blocks.block_fold(big[:1], big[:1], np.float32(0), H)) == 0x7F800000
    assert u32(blocks.block_fold(-big[:1], big[:1], np.float32(0), H)) == 0xFF800000


def test_fp32_subnormal_results_kept() -> None:
    # bf16 products of 2^-70 * 2^-70 = 2^-140: an fp32 subnormal, kept (not flushed)
    a = np.array([2.0**-70, 3 * 2.0**-71], dtype=ml_dtypes.bfloat16)
    b = np.array([2.0**-70, 2.0**-70], dtype=ml_dtypes.bfloat16)
    d = blocks.block_fold(a, b, np.float32(0), H)
    assert float(d) == 2.0**-140 + 3 * 2.0**-141 and float(d) < 2.0**-126


def test_model_lookup_errors() -> None:
    assert blocks.model_for("sm_90", "wgmma", "fp8_e4m3") is blocks.HOPPER_FP8
    assert blocks.model_for("sm_100", "tcgen05", "bf16") is blocks.BLACKWELL_16BIT
    with pytest.raises(ValueError, match="no block model for arch=sm_80 instruction=mma inputs=fp8"):
        blocks.model_for("sm_80", "mma", "fp8_e4m3")
    with pytest.raises(ValueError, match="supported: fp16, bf16"):
        blocks.family("fp32")


# -- a pure-Python reference of the block model (integers and Fractions only) ---------------------

_EMIN = {"fp16": -14, "bf16": -126, "fp8_e4m3": -6, "fp8_e5m2": -14}


def _exp(x: Fraction, emin: int) -> int:
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    return max(e, emin)


def ref_block(a: list[float], b: list[float], c: float, model: blocks.BlockModel, dtype: str) -> float:
    terms: list[tuple[Fraction, int]] = []
    for x, y in zip(a, b, strict=True):
        if x == 0 or y == 0:
            terms.append((Fraction(0), model.e_zero))
        else:
            terms.append(
                (Fraction(x) * Fraction(y), _exp(Fraction(x), _EMIN[dtype]) + _exp(Fraction(y), _EMIN[dtype]))
            )
    terms.append((Fraction(c), model.e_zero if c == 0 else _exp(Fraction(c), -126)))
    emax = max(e for _, e in terms)
    q = Fraction(2) ** (emax - model.F)
    total = sum((int(v / q) * q for v, _ in terms), Fraction(0))  # int() truncates toward zero
    if total == 0:
        return 0.0
    frac = formats.fmt(model.out).frac
    e = _exp(total, -126)
    quantum = Fraction(2) ** (e - frac)
    r = int(total / quantum) * quantum
    if abs(total) >= Fraction(2) ** 128:
        return math.copysign(math.inf, total)
    return float(r)


def _patterns(dtype: str, n: int) -> st.SearchStrategy[list[int]]:
    width = formats.DTYPE_BITS[dtype]

    def finite(u: int) -> bool:
        with np.errstate(invalid="ignore"):
            v = float(
                formats.from_bits(np.array([u], dtype=np.uint16 if width == 16 else np.uint8), dtype).astype(
                    np.float64
                )[0]
            )
        return math.isfinite(v)

    return st.lists(st.integers(0, 2**width - 1).filter(finite), min_size=n, max_size=n)


CASES = [
    (blocks.HOPPER_16BIT, "fp16", 16),
    (blocks.HOPPER_16BIT, "bf16", 16),
    (blocks.HOPPER_FP8, "fp8_e4m3", 32),
    (blocks.HOPPER_FP8, "fp8_e5m2", 32),
    (blocks.BLACKWELL_FP8, "fp8_e4m3", 32),
    (blocks.AMPERE_16BIT, "fp16", 8),
    (blocks.VOLTA_LIKE, "fp16", 4),
]


@pytest.mark.parametrize(("model", "dtype", "n"), CASES, ids=[f"{m.L}_{m.F}_{d}" for m, d, _ in CASES])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_block_fold_matches_reference(
    model: blocks.BlockModel, dtype: str, n: int, data: st.DataObject
) -> None:
    width = formats.DTYPE_BITS[dtype]
    ua = data.draw(_patterns(dtype, n), label="a bits")
    ub = data.draw(_patterns(dtype, n), label="b bits")
    cexp = data.draw(st.integers(-149, 40), label="c exponent")
    csig = data.draw(st.integers(-(2**24) + 1, 2**24 - 1), label="c significand")
    c = float(np.float32(math.ldexp(csig, cexp - 23))) if cexp > -149 else 0.0
    udt = np.uint16 if width == 16 else np.uint8
    a = formats.from_bits(np.array(ua, dtype=udt), dtype)
    b = formats.from_bits(np.array(ub, dtype=udt), dtype)
    got = float(blocks.block_fold(a, b, np.float32(c), model))
    want = ref_block(
        [float(v) for v in a.astype(np.float64)],
        [float(v) for v in b.astype(np.float64)],
        float(np.float32(c)),
        model,
        dtype,
    )
    assert got == want and math.copysign(1, got) == math.copysign(1, want), (
        ua,
        ub,
        c,
        got,
        want,
    )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1024, 2047),
            st.integers(1024, 2047),
            st.integers(15, 17),
            st.integers(15, 17),
            st.booleans(),
        ),
        min_size=16,
        max_size=16,
    )
)
def test_no_truncation_equals_exact_sum_rz(terms: list[tuple[int, int, int, int, bool]]) -> None:
    """Products within 5 binades of each other lose nothing to the F=25 grid, so a block is the
    exact sum rounded toward zero once."""
    a = np.array(
        [(-1 if neg else 1) * ma * 2.0 ** (ea - 25) for ma, _, ea, _, neg in terms], dtype=np.float16
    )
    b = np.array([mb * 2.0 ** (eb - 25) for _, mb, _, eb, _ in terms], dtype=np.float16)
    exact = sum(
        (
            Fraction(float(x)) * Fraction(float(y))
            for x, y in zip(a.astype(np.float64), b.astype(np.float64), strict=True)
        ),
        Fraction(0),
    )
    got = float(blocks.block_fold(a, b, np.float32(0), H))
    if exact == 0:
        assert got == 0
        return
    e = _exp(exact, -126)
    want = float(int(exact / Fraction(2) ** (e - 23)) * Fraction(2) ** (e - 23))
    assert got == want, (terms, got, want)


def test_block_fold_vectorised_over_leading_axes() -> None:
    seed = 7
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 5, 16)).astype(np.float16)
    b = rng.standard_normal((3, 5, 16)).astype(np.float16)
    c = rng.standard_normal((3, 5)).astype(np.float32)
    d = blocks.block_fold(a, b, c, H)
    assert d.shape == (3, 5) and d.dtype == np.float32
    for i in range(3):
        for j in range(5):
            want = ref_block(
                list(a[i, j].astype(float)), list(b[i, j].astype(float)), float(c[i, j]), H, "fp16"
            )
            assert u32(d[i, j]) == u32(np.float32(want)), f"seed {seed} at {(i, j)}"
    # more than L products: a chain of blocks
    a2 = rng.standard_normal(48).astype(np.float16)
    b2 = rng.standard_normal(48).astype(np.float16)
    chained = np.float32(0)
    for j in range(0, 48, 16):
        chained = blocks.block_fold(a2[j : j + 16], b2[j : j + 16], chained, H)
    assert u32(blocks.block_fold(a2, b2, np.float32(0), H)) == u32(chained), f"seed {seed}"


def test_below_fp32_range_uses_e_zero_grid_and_underflows_to_plus_zero() -> None:
    """Products of 2^-150 live on the 2^(e_zero - F) = 2^-158 grid: two of them make the smallest
    fp32 subnormal; one alone rounds toward zero to zero, and that zero is +0 whatever the sign
    of the sum (measured on the H200: see test_h200_underflow_vectors)."""
    t = 2.0**-75
    a = np.array([t, t] + [0] * 14, dtype=ml_dtypes.bfloat16)
    b = np.array([t, t] + [0] * 14, dtype=ml_dtypes.bfloat16)
    assert u32(blocks.block_fold(a, b, np.float32(0), H)) == 0x00000001
    assert u32(blocks.block_fold(-a, b, np.float32(0), H)) == 0x80000001
    assert u32(blocks.block_fold(-a[:1], b[:1], np.float32(0), H)) == 0x00000000
    assert u32(blocks.block_fold(a[:1], b[:1], np.float32(0), H)) == 0x00000000
    # with e_zero far lower the grid would be finer, but the sum the same here; with e_max raised
    # by an accumulator of 2^-126 the grid is 2^-151 and the 2^-150 products still count
    assert u32(blocks.block_fold(a, b, np.float32(2.0**-126), H)) == u32(np.float32(2.0**-126 + 2.0**-149))


# -- H200 measurements: the sign of a zero block result -------------------------------------------

_VECTORS = Path(__file__).resolve().parent.parent / "matrices" / "golden" / "vectors_underflow_sign_h200.yaml"


def _vectors() -> list[dict[str, Any]]:
    return list(yaml.safe_load(_VECTORS.read_text())["vectors"])


def _bf16(words: list[str]) -> np.ndarray:
    return formats.from_bits(np.array([int(w, 16) for w in words], dtype=np.uint16), "bf16")


def _fp32(word: str | None) -> np.float32:
    if word is None:
        return np.float32(0)
    return formats.from_bits(np.array([int(word, 16)], dtype=np.uint32), "fp32")[0]


@pytest.mark.parametrize("v", _vectors(), ids=lambda v: f"{v['record'][-5:]}-{v['index'][0]}-{v['index'][1]}")
def test_h200_underflow_vectors(v: dict[str, Any]) -> None:
    """Single wgmma blocks of the H200's 'underflow' golden records: a sum that rounds toward
    zero to zero gives +0 even when it is negative, while a nonzero subnormal keeps its sign."""
    a, b, c = _bf16(v["a_bf16"]), _bf16(v["b_bf16"]), _fp32(v["c_fp32"])
    gpu = int(v["gpu_fp32"], 16)
    assert u32(blocks.block_fold(a, b, c, H)) == gpu
    exact = sum(
        (
            Fraction(float(x)) * Fraction(float(y))
            for x, y in zip(a.astype(np.float64), b.astype(np.float64), strict=True)
        ),
        Fraction(float(c)),
    )
    tiny = Fraction(2) ** -149
    if v["what"] == "negative_sum_to_plus_zero":
        assert gpu == 0 and -tiny < exact < 0
    elif v["what"] == "positive_sum_to_plus_zero":
        assert gpu == 0 and 0 < exact < tiny
    elif v["what"] == "truncated_to_zero":
        assert gpu == 0 and exact != 0  # every term truncated away on the 2^(e_max - F) grid
    else:
        assert v["what"] == "negative_subnormal_kept"
        assert gpu >> 31 == 1 and 0 < gpu & 0x7FFFFFFF < 0x00800000 and exact < 0


def test_h200_underflow_vectors_are_the_records_inputs() -> None:
    """Each vector is the (row, column) of a committed golden record: its operands and the GPU
    word are regenerated from the record's seeds and inlined output."""
    records = {r.id: r for p in golden.golden_files() for r in golden.load_file(p)}
    vectors = _vectors()
    assert {v["what"] for v in vectors} == {
        "negative_sum_to_plus_zero",
        "positive_sum_to_plus_zero",
        "truncated_to_zero",
        "negative_subnormal_kept",
    }
    for v in vectors:
        rec = records[v["record"]]
        i, j = v["index"]
        a, b, acc = golden.regenerate_inputs(rec)
        assert [f"0x{int(w):04x}" for w in formats.bits(a[i])] == v["a_bf16"]
        assert [f"0x{int(w):04x}" for w in formats.bits(np.ascontiguousarray(b[:, j]))] == v["b_bf16"]
        assert v["c_fp32"] == (None if acc is None else f"0x{int(formats.bits(acc[i : i + 1, j])[0]):08x}")
        assert rec.output_b64z is not None
        m, n, _ = rec.shape
        out = golden.unpack_output(rec.output_b64z, rec.out_dtype, (m, n))
        assert f"0x{int(formats.bits(out)[i, j]):08x}" == v["gpu_fp32"]
