"""Compile-time shape arithmetic for the pinned tree (plain Python, no triton import).

Kept apart from the @triton.jit code so the CPU model, the rewrite and the kernels agree on
one definition of "split the reduced axis into size-2 dims" and can be unit-tested alone.
"""

from __future__ import annotations

from collections.abc import Sequence


def _plain(v: object) -> int:
    inner = getattr(v, "value", v)  # triton constexpr wraps ints
    return int(inner)  # type: ignore[call-overload]


def log2_exact(n: int) -> int:
    """log2 of a power of two; Triton block extents are always powers of two."""
    n = _plain(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"reduced extent must be a power of two, got {n}")
    return n.bit_length() - 1


def norm_axis(shape: Sequence[object], axis: object) -> int:
    """Axis as a non-negative int (axis=None is handled by the caller by raveling)."""
    rank = len(shape)
    a = _plain(axis)
    if not -rank <= a < rank:
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a % rank


def split_shape(shape: Sequence[object], axis: int) -> tuple[int, ...]:
    """shape with dim `axis` replaced by log2(extent) dims of size 2 (most significant bit first).

    Row-major order is kept, so element i of the axis sits at bits (b_{L-1} .. b_0) of the new
    dims; the bit-0 dim is at index axis + L - 1 and is summed first (neighbours pair first).
    """
    dims = [_plain(s) for s in shape]
    a = norm_axis(dims, axis)
    log = log2_exact(dims[a])
    return tuple(dims[:a] + [2] * log + dims[a + 1 :])


def numel(shape: Sequence[object]) -> int:
    n = 1
    for s in shape:
        n *= _plain(s)
    return n
