"""The numpy model of the pinned tree: the properties the kernels and the suites rely on."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.enforce import model, shapes


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    return a.view(np.uint32)


def _draw(n: int, seed: int, wide: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    if wide:
        x = x * np.exp2(rng.integers(-60, 60, size=n))
    return x.astype(np.float32)


def _recursive(x: np.ndarray) -> np.float32:
    """Definition: split the power-of-two block in halves, sum each, add (neighbours first)."""
    if x.size == 1:
        return np.float32(x[0])
    h = x.size // 2
    return np.float32(_recursive(x[:h]) + _recursive(x[h:]))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**31 - 1), wide=st.booleans())
def test_tree_is_the_recursive_halving_of_the_padded_block(n: int, seed: int, wide: bool) -> None:
    x = _draw(n, seed, wide)
    p = model.next_pow2(n)
    padded = np.concatenate([x, np.full(p - n, -0.0, np.float32)])
    assert _bits(model.tree_sum(x)) == _bits(_recursive(padded)), f"n={n} seed={seed} wide={wide}"


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), extra=st.integers(0, 3), seed=st.integers(0, 2**31 - 1))
def test_padding_to_any_larger_power_of_two_changes_no_bit(n: int, extra: int, seed: int) -> None:
    """Why BLOCK >= N is a free knob: -0.0 padding is the exact identity of addition."""
    x = _draw(n, seed, True)
    big = np.concatenate([x, np.full((model.next_pow2(n) << extra) - n, -0.0, np.float32)])
    assert _bits(model.tree_sum(x)) == _bits(model.tree_sum(big)), f"n={n} extra={extra} seed={seed}"


@settings(max_examples=30, deadline=None)
@given(log_n=st.integers(1, 10), log_chunk=st.integers(0, 10), seed=st.integers(0, 2**31 - 1))
def test_tree_of_chunk_trees_is_the_tree(log_n: int, log_chunk: int, seed: int) -> None:
    """Why a two-stage reduction with power-of-two chunks pins to the same bits for every chunk."""
    n, c = 1 << log_n, 1 << min(log_chunk, log_n)
    x = _draw(n, seed, True)
    parts = model.tree_sum(x.reshape(n // c, c), axis=1)
    assert _bits(model.tree_sum(parts)) == _bits(model.tree_sum(x)), f"n={n} chunk={c} seed={seed}"


def test_the_tree_is_not_the_left_fold_nor_reverse_pairing() -> None:
    """Power: a wide draw separates the tree from a sequential fold and from bit-reversed pairing."""
    x = _draw(1024, 7, True)
    fold = np.float32(0)
    for v in x:
        fold = np.float32(fold + v)
    rev = x.reshape(2, -1).T.reshape(-1)  # pairs i with i + n/2 first
    assert _bits(model.tree_sum(x)) != _bits(fold), "seed=7: tree equals the left fold"
    assert _bits(model.tree_sum(x)) != _bits(model.tree_sum(rev)), "seed=7: tree equals reverse pairing"


def test_minus_zero_survives_and_plus_zero_padding_differs_only_in_sign_of_zero() -> None:
    x = np.array([-0.0, -0.0, -0.0], np.float32)
    assert _bits(model.tree_sum(x)) == _bits(np.float32(-0.0)), "all -0.0 must sum to -0.0"
    y = np.array([1.5, -0.0, 2.0], np.float32)
    assert _bits(model.tree_sum(y)) == _bits(np.float32(3.5))


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_narrow_floats_accumulate_in_fp32(dt) -> None:
    x = np.full(4096, 1.0, dtype=dt)
    x[0] = dt(2048.0) if dt is not ml_dtypes.float8_e4m3fn else dt(256.0)
    r = model.tree_sum(x)
    assert r.dtype == np.float32
    assert float(r) == float(x.astype(np.float32).sum(dtype=np.float64)), f"{dt}: {r}"


@pytest.mark.parametrize(("shape", "axis"), [((4, 8), 0), ((4, 8), 1), ((2, 16, 4), 1), ((3, 5, 7), 2)])
def test_axis_reduction_equals_per_fibre_tree(shape, axis) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32) * 1e3
    got = model.tree_sum(x, axis=axis)
    moved = np.moveaxis(x, axis, -1).reshape(-1, shape[axis])
    want = np.array([model.tree_sum(f) for f in moved], np.float32).reshape(got.shape)
    assert np.array_equal(_bits(got), _bits(want)), f"shape={shape} axis={axis}"


def test_split_shape_puts_bit_zero_last_on_the_axis() -> None:
    assert shapes.split_shape((4, 8, 2), 1) == (4, 2, 2, 2, 2)
    assert shapes.split_shape((16,), -1) == (2, 2, 2, 2)
    assert shapes.split_shape((1, 3), 0) == (3,)
    with pytest.raises(ValueError, match="power of two"):
        shapes.split_shape((6,), 0)
    with pytest.raises(ValueError, match="out of range"):
        shapes.norm_axis((4, 4), 2)
    # element i of the axis sits at bits (b_{L-1} .. b_0): row-major reshape keeps logical order
    a = np.arange(16).reshape(shapes.split_shape((16,), 0))
    assert a[1, 0, 1, 1] == 0b1011


def test_tree_reduce_with_other_combines() -> None:
    x = np.arange(1, 9, dtype=np.int64)
    assert model.tree_reduce(x, 0, np.multiply, 1) == 40320
    assert model.tree_reduce(np.array([3, 1, 2], np.int64), 0, np.maximum, -(2**62)) == 3
