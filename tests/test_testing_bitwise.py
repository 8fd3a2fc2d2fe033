"""assert_bitwise_equal / compare_bits: equality of bytes, and a report that locates the drift."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.testing import BitwiseDiff, DriftRecord, assert_bitwise_equal, compare_bits

FLOATS = {
    "float16": (np.float16, np.uint16),
    "bfloat16": (ml_dtypes.bfloat16, np.uint16),
    "float32": (np.float32, np.uint32),
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8),
}
SEEDS = st.integers(0, 2**32 - 1)


def draw(dtype: type, shape: tuple[int, ...], seed: int, *, wide: bool) -> np.ndarray:
    """Ordinary values, or exponents spread wide (never all zeros)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if wide:
        x = x * np.exp2(rng.integers(-12, 12, size=shape))
    out = x.astype(np.float32).astype(dtype)
    assert np.any(out.astype(np.float32) != 0), f"seed={seed}: drew only zeros"
    return out


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, name=st.sampled_from(sorted(FLOATS)), wide=st.booleans())
def test_equal_bytes_pass(seed: int, name: str, wide: bool) -> None:
    x = draw(FLOATS[name][0], (7, 9), seed, wide=wide)
    assert_bitwise_equal(x, x.copy(), context={"seed": seed})
    assert compare_bits(x, x.copy()).equal


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS, name=st.sampled_from(sorted(FLOATS)), wide=st.booleans(), bit=st.integers(0, 31))
def test_any_flipped_bit_is_found_and_located(seed: int, name: str, wide: bool, bit: int) -> None:
    dtype, uint = FLOATS[name]
    expected = draw(dtype, (5, 11), seed, wide=wide)
    actual = expected.copy()
    flat = int(np.random.default_rng(seed).integers(0, actual.size))
    bit %= 8 * np.dtype(uint).itemsize
    actual.view(uint).reshape(-1)[flat] ^= uint(1 << bit)
    diff = compare_bits(actual, expected)
    where = np.unravel_index(flat, actual.shape)
    assert diff.n_diff == 1, f"seed={seed}"
    assert diff.first_index == tuple(int(i) for i in where), f"seed={seed}"
    assert int(diff.actual_bits, 16) ^ int(diff.expected_bits, 16) == 1 << bit, f"seed={seed}"
    with pytest.raises(AssertionError, match=r"bitwise mismatch: 1 of 55 elements differ"):
        assert_bitwise_equal(actual, expected, context={"seed": seed})


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, steps=st.integers(1, 1000))
def test_ulp_distance_counts_representable_steps(seed: int, steps: int) -> None:
    x = np.float32(np.random.default_rng(seed).uniform(-1e3, 1e3))
    y = x
    toward = np.float32(np.inf) if x >= 0 else np.float32(-np.inf)
    for _ in range(steps):
        y = np.nextafter(y, toward)
    diff = compare_bits(np.array([y]), np.array([x]))
    assert diff.ulp_first == steps and diff.ulp_max == steps, f"seed={seed}"


def test_ulp_distance_across_zero_counts_both_sides() -> None:
    tiny = np.float32(np.nextafter(np.float32(0), np.float32(1)))
    diff = compare_bits(np.array([tiny]), np.array([-tiny]))
    assert diff.ulp_first == 2


def test_signed_zeros_differ() -> None:
    plus, minus = np.zeros(4, np.float16), np.zeros(4, np.float16)
    minus[2] = -0.0
    assert (plus == minus).all()  # value equality (and so any tolerance check) cannot see the sign of zero
    diff = compare_bits(plus, minus)
    assert (diff.n_diff, diff.first_index, diff.actual_bits, diff.expected_bits) == (
        1,
        (2,),
        "0x0000",
        "0x8000",
    )
    with pytest.raises(AssertionError, match="the sign of zero"):
        assert_bitwise_equal(plus, minus)


def test_nan_payloads_differ_and_have_no_ulp_distance() -> None:
    a = np.array([1.0, np.nan, 3.0], np.float32)
    b = a.copy()
    b.view(np.uint32)[1] = 0x7FC00001
    diff = compare_bits(a, b)
    assert diff.n_diff == 1 and diff.ulp_first is None and diff.ulp_max is None
    assert diff.expected_bits == "0x7fc00001"
    with pytest.raises(AssertionError, match=r"ulp distance n/a \(NaN\)"):
        assert_bitwise_equal(a, b)


def test_report_fields_for_a_planted_difference() -> None:
    expected = np.arange(1, 13, dtype=np.float32).reshape(3, 4).astype(np.float16)
    actual = expected.copy()
    actual[1, 2] = np.float16(7.0078125)  # 7.0 + 2 ulp at fp16 (ulp of 7 is 2**-8 * 2 = 0.0039...)
    actual[2, 3] = np.float16(12.0)  # equal
    actual[2, 0] = np.float16(-9.0)
    diff = compare_bits(actual, expected)
    assert isinstance(diff, BitwiseDiff)
    assert diff.n_diff == 2 and diff.total == 12 and diff.shape == (3, 4) and diff.dtype == "float16"
    assert diff.first_index == (1, 2)
    assert (diff.actual_bits, diff.expected_bits) == ("0x4702", "0x4700")
    assert diff.actual_value == "7.0078125" and diff.expected_value == "7.0"
    assert diff.ulp_first == 2
    assert diff.ulp_max == int(np.float16(-9.0).view(np.uint16) & 0x7FFF) + int(
        np.float16(9.0).view(np.uint16)
    )
    with pytest.raises(AssertionError) as info:
        assert_bitwise_equal(actual, expected, context={"seed": 11, "shape": "3x4x1"})
    text = str(info.value)
    assert "2 of 12 elements differ (float16, shape (3, 4))" in text
    assert "index (1, 2): actual 0x4702 (7.0078125) expected 0x4700 (7.0), 2 ulp" in text
    assert f"max ulp distance: {diff.ulp_max}" in text and "context: seed=11, shape=3x4x1" in text


@pytest.mark.parametrize(
    ("actual", "expected", "message"),
    [
        (
            np.zeros(3, np.float16),
            np.zeros(3, np.float32),
            r"dtype mismatch: actual is float16 \(16 bits\), expected is float32",
        ),
        (
            np.zeros(3, np.float16),
            np.zeros(3, ml_dtypes.bfloat16),
            r"actual is float16 \(16 bits\), expected is bfloat16",
        ),
        (
            np.zeros((2, 3), np.float16),
            np.zeros((3, 2), np.float16),
            r"shape mismatch: actual \(2, 3\) vs expected \(3, 2\)",
        ),
        ([1.0], np.zeros(1), "expected a numpy array or a torch tensor, got list"),
    ],
)
def test_mismatched_inputs_are_clear_assertion_errors(actual: object, expected: object, message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        assert_bitwise_equal(actual, expected, context="seed=3")


def test_integers_compare_by_value_distance() -> None:
    diff = compare_bits(np.array([5, -1], np.int32), np.array([5, 1], np.int32))
    assert diff.first_index == (1,) and diff.ulp_first == 2 and diff.actual_value == "-1"


def test_torch_tensors_are_compared_by_bits() -> None:
    torch = pytest.importorskip("torch")
    seed = 5
    x = draw(np.float32, (4, 4), seed, wide=True)
    t = torch.from_numpy(x).to(torch.bfloat16)
    as_numpy = x.astype(ml_dtypes.bfloat16)
    assert_bitwise_equal(t, as_numpy, context={"seed": seed})  # torch and ml_dtypes round the same way
    assert_bitwise_equal(t, t.clone())
    bumped = t.clone()
    bumped.view(torch.int16)[0, 1] += 1
    diff = compare_bits(bumped, t)
    assert diff.dtype == "bfloat16" and diff.first_index == (0, 1) and diff.ulp_first == 1, f"seed={seed}"
    f8 = torch.tensor([1.0, 2.0, -0.0]).to(torch.float8_e4m3fn)
    z = f8.clone()
    z.view(torch.uint8)[2] = 0
    assert compare_bits(f8, z).first_index == (2,)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_bitwise_equal(t, t.float())
    zeros = torch.zeros(4)
    assert compare_bits(zeros, -zeros).n_diff == 4  # torch.equal on floats would call these equal
    nan = torch.full((2,), float("nan"))
    assert compare_bits(nan, nan.clone()).equal  # same payload: equal bytes, though nan != nan


def test_drift_record_properties() -> None:
    diff = compare_bits(np.array([1.0], np.float32), np.array([2.0], np.float32))
    rec = DriftRecord(
        test="t",
        shape=(1, 2, 3),
        dtype="fp16",
        desc_hash="abc",
        libraries=(("cublaslt", "13.1.0"),),
        env_hash="e" * 12,
        diff=diff,
        extra=(("seed", "9"),),
    )
    props = dict(rec.to_properties())
    assert props == {
        "fixbits.shape": "1x2x3",
        "fixbits.dtype": "fp16",
        "fixbits.desc_hash": "abc",
        "fixbits.libraries": "cublaslt=13.1.0",
        "fixbits.env_hash": "eeeeeeeeeeee",
        "fixbits.n_diff": "1",
        "fixbits.first_diff": diff.first_diff,
        "fixbits.ulp_max": str(diff.ulp_max),
        "fixbits.seed": "9",
    }
    assert DriftRecord(test="t").to_properties() == []
