"""CPU model of the pinned tree: its bits are the specification of ``tree_sum``.

A balanced tree over logical element order, neighbours first: the axis is padded to the next
power of two with -0.0 (x + -0.0 == x for every x, including -0.0, so padding never changes a
bit), then pairs (2i, 2i+1) are added level by level. Narrow floats (fp16, bf16, fp8) are
widened to fp32 first, exactly as the kernel does; fp32 adds in numpy are IEEE round-to-nearest,
the same as the GPU's add.rn.f32. A tree over 2^L elements is the tree over its 2^(L-r) subtrees
of 2^r, which is why any power-of-two block or chunk size gives the same bits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_NARROW_KINDS = {"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}


def accumulate_dtype(dtype: np.dtype) -> np.dtype:
    """fp32 for narrow floats (fp16/bf16/fp8), the dtype itself for fp32/fp64/ints."""
    dt = np.dtype(dtype)
    if dt.name in _NARROW_KINDS:
        return np.dtype(np.float32)
    return dt


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def tree_reduce(
    x: np.ndarray,
    axis: int | tuple[int, ...] | None,
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray],
    identity: float | int,
) -> np.ndarray:
    """Balanced tree of ``combine`` over ``axis`` (None: all elements, row-major; a tuple: those
    dims as one logical axis, most significant first)."""
    a = np.asarray(x)
    if isinstance(axis, tuple):
        axes = [d % a.ndim for d in axis]
        a = np.moveaxis(a, axes, list(range(a.ndim - len(axes), a.ndim)))
        a = a.reshape(a.shape[: a.ndim - len(axes)] + (-1,))
        axis = -1
    if axis is None:
        a = a.reshape(-1)
        axis = 0
    axis = axis % a.ndim
    a = np.moveaxis(a, axis, -1)
    n = a.shape[-1]
    if n == 0:
        raise ValueError("tree_reduce: empty axis")
    p = next_pow2(n)
    if p != n:
        pad = np.full(a.shape[:-1] + (p - n,), identity, dtype=a.dtype)
        a = np.concatenate([a, pad], axis=-1)
    while a.shape[-1] > 1:
        a = combine(a[..., 0::2], a[..., 1::2])
    return a[..., 0]


def tree_sum(x: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
    """The pinned sum: widen narrow floats to fp32, pad with -0.0, add neighbours first."""
    a = np.asarray(x)
    acc = accumulate_dtype(a.dtype)
    a = a.astype(acc)
    ident: float | int = -0.0 if acc.kind == "f" else 0
    with np.errstate(over="ignore", invalid="ignore"):
        return tree_reduce(a, axis, np.add, ident)


def tree_sum_like(x: np.ndarray, axis: int | None = None, out_dtype: np.dtype | None = None) -> np.ndarray:
    """What the automatic rewrite computes for ``tl.sum``: the tree, rounded once to ``tl.sum``'s dtype."""
    a = np.asarray(x)
    r = tree_sum(a, axis)
    dt = np.dtype(out_dtype) if out_dtype is not None else a.dtype
    with np.errstate(over="ignore"):
        return np.asarray(r).astype(dt)
