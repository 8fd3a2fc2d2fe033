"""Pinned balanced-tree reductions for Triton kernels (``tree_sum``, ``tree_reduce``).

Why: ``tl.sum`` folds in an order set by the layout (elements per thread, lanes, warps) and by
the Triton release, so every (BLOCK, num_warps) config may return different bits. Here the
reduced axis is viewed as log2(n) dims of size 2 (``tl.reshape``, row-major, so logical order is
kept) and the bit-0 dim is summed first, then bit 1, ...: a balanced tree over logical element
order, neighbours first. A size-2 dim is one add however the compiler lays it out, so the tree
no longer depends on the layout. Measured on H200 at 0.96-1.00x ``tl.sum`` speed (FINDINGS.md).

Contract (the CPU spec is fixbits.enforce.model.tree_sum):
* any rank, any axis, axis=None reduces everything in row-major order;
* Triton extents are powers of two; a kernel that masks a shorter logical extent should load
  the tail as -0.0, the exact identity of addition (x + -0.0 == x for every x). With +0.0 the
  result differs only in the sign of an all-zero sum;
* fp16 / bf16 / fp8 inputs are accumulated in fp32 and the fp32 result is returned
  (``tree_sum_like`` rounds back to the dtype ``tl.sum`` would have returned).
"""

from __future__ import annotations

import triton
import triton.language as tl


# Constexpr helpers: Triton only lets a constexpr_function call builtins and other
# constexpr_functions, so each is self-contained; they mirror fixbits.enforce.shapes (tested).
@triton.constexpr_function
def _dims(shape):
    return tuple(int(getattr(s, "value", s)) for s in shape)


@triton.constexpr_function
def _norm_axis(shape, axis):
    rank = len(shape)
    a = int(getattr(axis, "value", axis))
    if not -rank <= a < rank:
        raise ValueError(f"tree reduction: axis {a} out of range for rank {rank}")
    return a % rank


@triton.constexpr_function
def _log2(n):
    n = int(getattr(n, "value", n))
    if n < 1 or n & (n - 1):
        raise ValueError(f"tree reduction: reduced extent must be a power of two, got {n}")
    return n.bit_length() - 1


@triton.constexpr_function
def _split_shape(dims, axis, log):
    dims = list(dims)
    return tuple(dims[:axis] + [2] * log + dims[axis + 1 :])


@triton.constexpr_function
def _numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


@triton.constexpr_function
def _is_multi(axis):
    return isinstance(axis, (tuple, list)) or type(axis).__name__ == "tuple"


@triton.constexpr_function
def _multi_plan(dims, axes):
    # Reduce several dims as ONE logical axis: index = i[axes[0]] * ... + i[axes[-1]] (axes[0] most
    # significant). Each listed dim becomes log2 size-2 dims (row-major); the plan is the new shape
    # and the positions to reduce, least significant bit first, after each earlier removal.
    dims = [int(getattr(d, "value", d)) for d in dims]
    rank = len(dims)
    axes = [int(getattr(a, "value", a)) for a in axes]
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"tree reduction: axis {a} out of range for rank {rank}")
    axes = [a % rank for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"tree reduction: repeated axis in {axes}")
    logs = []
    for a in axes:
        n = dims[a]
        if n < 1 or n & (n - 1):
            raise ValueError(f"tree reduction: reduced extent must be a power of two, got {n}")
        logs.append(n.bit_length() - 1)
    shape, tags = [], []
    for d in range(rank):
        if d in axes:
            k = axes.index(d)
            for b in range(logs[k] - 1, -1, -1):
                shape.append(2)
                tags.append((k, b))
        else:
            shape.append(dims[d])
            tags.append(None)
    seq = []
    for k in range(len(axes) - 1, -1, -1):
        for b in range(logs[k]):
            pos = tags.index((k, b))
            seq.append(pos)
            tags.pop(pos)
    return tuple(shape), tuple(seq)


@triton.constexpr_function
def _plan_len(plan):
    return len(plan[1])


@triton.constexpr_function
def _plan_shape(plan):
    return plan[0]


@triton.constexpr_function
def _plan_at(plan, j):
    return plan[1][int(getattr(j, "value", j))]


@triton.constexpr_function
def _ones(rank):
    return (1, ) * rank


@triton.constexpr_function
def _is_narrow_float(dt):
    return dt.is_floating() and dt.primitive_bitwidth < 32


@triton.constexpr_function
def _sum_out_dtype(dt, dtype):
    # The dtype tl.sum(x, dtype=dtype) returns in Triton 3.6: ints < 32 bits widen, floats keep.
    if dtype is not None:
        return dtype
    if dt.is_int_signed() and dt.int_bitwidth < 32:
        return tl.int32
    if dt.is_int_unsigned() and dt.int_bitwidth < 32:
        return tl.uint32
    return dt


@tl.core.builtin
def _reduce(input, axis, combine_fn, _semantic=None, _generator=None):
    # tl.reduce with a combine function that arrived as a (constexpr-wrapped) argument.
    fn = tl.core._unwrap_if_constexpr(combine_fn)
    return tl.core.reduce(input, axis, fn, _semantic=_semantic, _generator=_generator)


@tl.core.builtin
def _add_rn(a, b, _semantic=None):
    # An add ptxas may not contract with the multiply that produced a leaf: with fma contraction
    # on, `sum(x * w)` would otherwise fuse one product per pair, and which one depends on the
    # layout. `add.rn.f32` (explicit rounding, no .ftz) is never contracted and keeps subnormals,
    # as IEEE and the numpy model do. (libdevice's __nv_fadd_rn is built with FTZ under Triton,
    # so it is not used.) Other backends and other dtypes get a plain add.
    opts = getattr(getattr(_semantic, "builder", None), "options", None)
    if getattr(opts, "backend_name", "") == "cuda" and a.dtype in (tl.float32, tl.float64):
        if a.dtype == tl.float32:
            asm, cons = "add.rn.f32 $0, $1, $2;", "=r,r,r"
        else:
            asm, cons = "add.rn.f64 $0, $1, $2;", "=d,d,d"
        return tl.core.inline_asm_elementwise(asm, cons, [a, b], dtype=a.dtype, is_pure=True, pack=1,
                                              _semantic=_semantic)
    return _semantic.add(a, b, True)


@triton.constexpr_function
def _interpreting():
    # TRITON_INTERPRET runs plain Python: no builtins of ours, no libdevice there.
    return bool(triton.knobs.runtime.interpret)


@triton.jit
def _add(a, b):
    if _interpreting():
        r = a + b
    else:
        r = _add_rn(a, b)
    return r


@triton.jit
def _tree_last_axes(y, AX: tl.constexpr, LOG: tl.constexpr, combine_fn: tl.constexpr):
    # y has LOG size-2 dims at AX .. AX+LOG-1 (bit LOG-1 first); fold bit 0 first.
    for j in tl.static_range(LOG):
        if _interpreting():
            y = tl.reduce(y, AX + LOG - 1 - j, combine_fn)
        else:
            y = _reduce(y, AX + LOG - 1 - j, combine_fn)
    return y


@triton.jit
def tree_reduce(x, axis: tl.constexpr, combine_fn: tl.constexpr, keep_dims: tl.constexpr = False):
    """Balanced tree of ``combine_fn`` over ``axis`` of ``x``, neighbours first, layout-free.

    ``axis=None`` reduces all elements in row-major order. ``axis`` may be a tuple of dims reduced as
    one logical axis, most significant first: ``(1, 0)`` folds element ``i1 * n0 + i0``. That lets a
    kernel keep the low bits of the logical index in registers (load the tile so they are the
    slow dim) while the tree stays the same. No padding: extents are powers of two.
    """
    if _is_multi(axis):
        PLAN: tl.constexpr = _multi_plan(_dims(x.shape), axis)
        y = tl.reshape(x, _plan_shape(PLAN))
        for j in tl.static_range(_plan_len(PLAN)):
            if _interpreting():
                y = tl.reduce(y, _plan_at(PLAN, j), combine_fn)
            else:
                y = _reduce(y, _plan_at(PLAN, j), combine_fn)
        return y
    elif axis is None:
        D0: tl.constexpr = _dims(x.shape)
        N: tl.constexpr = _numel(D0)
        LOGN: tl.constexpr = _log2(N)
        y = tl.reshape(x, (N, ))
        if LOGN == 0:
            r = _tree_last_axes(y, 0, 1, combine_fn)
        else:
            r = _tree_last_axes(tl.reshape(y, _split_shape((N, ), 0, LOGN)), 0, LOGN, combine_fn)
        if keep_dims:
            r = tl.broadcast_to(r, _ones(len(D0)))
        return r
    else:
        D: tl.constexpr = _dims(x.shape)
        AX: tl.constexpr = _norm_axis(D, axis)
        LOG: tl.constexpr = _log2(D[AX])
        if LOG == 0:
            r = _tree_last_axes(x, AX, 1, combine_fn)
        else:
            r = _tree_last_axes(tl.reshape(x, _split_shape(D, AX, LOG)), AX, LOG, combine_fn)
        if keep_dims:
            r = tl.expand_dims(r, AX)
        return r


@triton.jit
def tree_sum(x, axis: tl.constexpr = None, keep_dims: tl.constexpr = False):
    """Pinned balanced-tree sum over ``axis``; fp16/bf16/fp8 accumulate and return fp32."""
    if _is_narrow_float(x.dtype):
        y = x.to(tl.float32)
    else:
        y = x
    return tree_reduce(y, axis, _add, keep_dims)


@triton.jit
def tree_sum_like(x, axis: tl.constexpr = None, keep_dims: tl.constexpr = False, dtype: tl.constexpr = None):
    """Drop-in for ``tl.sum`` used by the automatic rewrite: same result dtype as ``tl.sum``.

    Floats go through the pinned tree (narrow floats accumulated in fp32, then rounded once to
    the dtype ``tl.sum`` returns); integer sums are exact in any order and stay ``tl.sum``.
    """
    OUT: tl.constexpr = _sum_out_dtype(x.dtype, dtype)
    if OUT.is_floating():
        if _is_narrow_float(OUT):
            r = tree_reduce(x.to(tl.float32), axis, _add, keep_dims).to(OUT)
        else:
            r = tree_reduce(x.to(OUT), axis, _add, keep_dims)
    else:
        r = tl.sum(x, axis, keep_dims, dtype)
    return r


@triton.constexpr_function
def _pair_shape(log, j):
    log, j = (int(getattr(v, "value", v)) for v in (log, j))
    return (1 << (log - j - 1), 2)


@triton.constexpr_function
def _flat(n):
    return (int(getattr(n, "value", n)), )


@triton.jit
def _split_levels(p, LOG: tl.constexpr):
    # p: 2**LOG values; each level adds pairs (2i, 2i+1) by tl.split, which needs a pair in one
    # thread: Triton moves p into every thread's registers once (one shared-memory round when p
    # is spread over warps), where a tt.reduce per level would be one round each.
    for j in tl.static_range(LOG):
        a, b = tl.split(tl.reshape(p, _pair_shape(LOG, j)))
        p = tl.reshape(_add(a, b), _flat(1 << (LOG - j - 1)))
    return tl.reshape(p, ())


@triton.jit
def tree_sum_split(x, W: tl.constexpr):
    """``tree_sum(x)`` over all elements (row-major), its top log2(W) levels added through tl.split.

    The same tree, bit for bit; the speed knob for a row spread over W warps, with the top index
    bits in the warps (load the row as (threads, registers) so it is): the in-warp levels are
    adds and shuffles, and all warp levels cost one shared-memory round instead of one each.
    """
    if _is_narrow_float(x.dtype):
        y = x.to(tl.float32)
    else:
        y = x
    N: tl.constexpr = _numel(_dims(y.shape))
    if W == 1:
        r = tree_reduce(y, None, _add)
    else:
        p = tree_reduce(tl.reshape(y, (W, N // W)), 1, _add)
        r = _split_levels(p, _log2(W))
    return r
