"""Tensor-core block models: how one matrix instruction folds L products and an accumulator.

A block computes d = c + sum(a_k * b_k) as a truncated fused dot-product-add (NUMERICS.md,
after MMA-Sim and Khattak & Mikaitis): exact products with unnormalised significands, the
largest exponent e_max over the products and c (a zero takes e_zero), every term truncated
toward zero to a multiple of 2^(e_max - F), an exact sum, one round-toward-zero to the output
format. Those four numbers (L, F, e_zero, output format) are all that differs between
architectures, so they live in one table here and nowhere else.

Bottom of the range, as the H200 (sm_90 wgmma, bf16 -> fp32) measured it in the 'underflow'
golden records (products down to 2^-180, K 16 and 777, with and without an incoming c):

* nothing is flushed: products wholly below 2^-126 are summed on the 2^(e_zero - F) grid and
  nonzero fp32 subnormal results come out with their sign; e_zero = -133 is pinned (-132 and
  -134 each move elements of those records);
* a zero result is +0, whatever made it zero: exact cancellation, every term truncated away,
  or a nonzero sum of magnitude below 2^-149 that the round toward zero takes to zero, even
  when that sum is negative (NUMERICS.md names only the first; the sum's sign is not kept).
  Every zero a block returned in the golden records is +0.

Everything is float64 underneath: a product of two 8/16-bit inputs is exact in float64, every
truncated term is an integer of at most F + 2 bits times 2^(e_max - F), and the sum of at most
33 of them fits in 53 bits, so scaling by powers of two, ``np.trunc`` and ``sum`` are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fixbits.numerics import formats


@dataclass(frozen=True)
class BlockModel:
    """One instruction's arithmetic: ``L`` products per block, ``F`` fraction bits kept below
    e_max, ``e_zero`` the exponent of a zero product or zero c, ``out`` the format the block
    result is rounded toward zero to ('fp32' or 'e8m13')."""

    L: int
    F: int
    e_zero: int
    out: str = "fp32"
    note: str = ""


HOPPER_16BIT = BlockModel(16, 25, -133, "fp32", "sm_90 wgmma / mma fp16, bf16 -> fp32")
HOPPER_FP8 = BlockModel(32, 13, -133, "e8m13", "sm_90 wgmma fp8 (fast accumulation: 13 fraction bits)")
BLACKWELL_16BIT = BlockModel(16, 25, -133, "fp32", "sm_100/sm_103 tcgen05 / mma fp16, bf16 -> fp32")
BLACKWELL_FP8 = BlockModel(32, 25, -133, "fp32", "sm_100/sm_103 tcgen05 kind::f8f6f4 -> fp32")
AMPERE_16BIT = BlockModel(8, 24, -132, "fp32", "sm_80 mma fp16, bf16 -> fp32 (comparison)")
VOLTA_LIKE = BlockModel(4, 23, -131, "fp32", "Volta-like profile of the NUMERICS.md test vectors")

# (arch, instruction, input family) -> model. Families: '16bit' (fp16, bf16), 'fp8'.
MODELS: dict[tuple[str, str, str], BlockModel] = {
    ("sm_90", "wgmma", "16bit"): HOPPER_16BIT,
    ("sm_90", "mma", "16bit"): HOPPER_16BIT,
    ("sm_90", "wgmma", "fp8"): HOPPER_FP8,
    # mma.sync on fp8 at sm_90 is assumed to share wgmma's fp8 datapath: not yet measured.
    ("sm_90", "mma", "fp8"): HOPPER_FP8,
    ("sm_100", "tcgen05", "16bit"): BLACKWELL_16BIT,
    ("sm_103", "tcgen05", "16bit"): BLACKWELL_16BIT,
    ("sm_100", "mma", "16bit"): BLACKWELL_16BIT,
    ("sm_103", "mma", "16bit"): BLACKWELL_16BIT,
    ("sm_100", "tcgen05", "fp8"): BLACKWELL_FP8,
    ("sm_103", "tcgen05", "fp8"): BLACKWELL_FP8,
    ("sm_80", "mma", "16bit"): AMPERE_16BIT,
}


def family(in_dtype: str) -> str:
    """Input family of a dtype name: 'fp8' or '16bit'."""
    if in_dtype in ("fp8_e4m3", "fp8_e5m2"):
        return "fp8"
    if in_dtype in ("fp16", "bf16"):
        return "16bit"
    raise ValueError(
        f"no tensor-core input family for {in_dtype!r}; supported: fp16, bf16, fp8_e4m3, fp8_e5m2"
    )


def model_for(arch: str, instruction: str, in_dtype: str) -> BlockModel:
    """The block model of (arch, instruction, input dtype); ValueError names the known keys."""
    key = (arch, instruction, family(in_dtype))
    try:
        return MODELS[key]
    except KeyError:
        known = ", ".join("/".join(k) for k in MODELS)
        raise ValueError(
            f"no block model for arch={arch} instruction={instruction} inputs={key[2]}; known: {known}"
        ) from None


def c_exponent(c: np.ndarray, model: BlockModel) -> np.ndarray:
    """Exponent of an fp32 accumulator value as a block sees it (zero -> e_zero)."""
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.abs(c))
    return np.where(c == 0, model.e_zero, np.maximum(e.astype(np.int32) - 1, -126)).astype(np.int32)


def fold_products(
    p: np.ndarray, e: np.ndarray, c: np.ndarray, model: BlockModel, *, scratch: bool = False
) -> np.ndarray:
    """One block: exact products ``p`` (..., n<=L) with raw exponents ``e`` (e_a + e_b; a zero
    product may carry any exponent below e_zero) folded into accumulator ``c`` (...).

    Returns float64 values exactly representable in ``model.out``. With ``scratch`` the caller
    gives up ``p`` and it is overwritten (saves two allocations per block in the emulator).

    Non-finite inputs need no branch: a scaled, truncated inf stays inf and NaN stays NaN, so
    the term sum is the IEEE sum of the terms' classes (inf*0 is NaN in ``p`` already, inf - inf
    gives NaN here), while finite terms stay below 2^(F+2) and never overflow.
    """
    ec = c_exponent(c, model)
    emax = np.array(e.max(axis=-1) if e.shape[-1] else np.full(e.shape[:-1], model.e_zero), dtype=np.int32)
    np.maximum(emax, ec, out=emax)
    np.maximum(emax, model.e_zero, out=emax)
    shift = model.F - emax
    scale = np.ldexp(1.0, shift)
    with np.errstate(invalid="ignore", over="ignore"):
        q = p if scratch else np.empty_like(p)
        np.multiply(p, scale[..., None], out=q)
        np.trunc(q, out=q)
        # every term is an integer below 2^(F+2) and there are at most 33: any summation order,
        # fused or not, is exact, so a matrix-vector product with ones is a fast exact sum
        t = np.asarray(q @ np.ones(q.shape[-1]) if q.shape[-1] else np.zeros(q.shape[:-1]))
        t = t + np.trunc(c * scale)
        d = np.ldexp(t, -shift)
        d = np.asarray(formats.round_to(d, model.out, "rz"))
    # a zero result is +0 however it arose (H200, 'underflow' golden records): exact
    # cancellation, every term truncated away, or a nonzero sum below the output's smallest
    # subnormal that the round toward zero takes to zero -- the sum's sign is not kept
    d[d == 0] = 0.0
    return d


def fold_chain(
    p: np.ndarray, e: np.ndarray, c: np.ndarray, model: BlockModel, *, scratch: bool = False
) -> np.ndarray:
    """Fold n products as ceil(n / L) blocks in order (an instruction wider than the block)."""
    n = p.shape[-1]
    for j in range(0, max(n, 1), model.L):
        c = fold_products(p[..., j : j + model.L], e[..., j : j + model.L], c, model, scratch=scratch)
    return c


def operand_parts(x: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(float64 value, decoded exponent) of an input array of dtype ``name``."""
    if formats.DTYPE_BITS[name] <= 16:
        table = _table(name)
        e = table[formats.bits(np.asarray(x, dtype=formats.np_dtype(name)))]
    else:
        e = formats.decode(x, name)[2]
    return np.asarray(x).astype(np.float64), e


_TABLES: dict[str, np.ndarray] = {}


def _table(name: str) -> np.ndarray:
    # a cache of pure functions of the format, filled on first use (not at import)
    if name not in _TABLES:
        _TABLES[name] = formats.exponent_table(name)
    return _TABLES[name]


def block_fold(
    a: np.ndarray, b: np.ndarray, c: np.ndarray | float, model: BlockModel, *, in_dtype: str | None = None
) -> np.ndarray:
    """d = c + sum_k a[..., k] * b[..., k] under ``model``, vectorised over leading axes.

    ``a`` and ``b`` are arrays of the input dtype (fp16, bf16, fp8; or give ``in_dtype`` for
    float arrays holding such values); ``c`` is fp32-representable. More than L products are
    folded as a chain of blocks. Returns float32 (NaN as the canonical 0x7FFFFFFF).
    """
    a = np.asarray(a)
    b = np.asarray(b)
    name_a = in_dtype or formats.dtype_name(a.dtype)
    name_b = in_dtype or formats.dtype_name(b.dtype)
    if in_dtype is not None:
        a = formats.to_dtype(a, in_dtype)
        b = formats.to_dtype(b, in_dtype)
    pa, ea = operand_parts(a, name_a)
    pb, eb = operand_parts(b, name_b)
    pa, pb = np.broadcast_arrays(pa, pb)
    ea, eb = np.broadcast_arrays(ea, eb)
    with np.errstate(invalid="ignore", over="ignore"):
        p = pa * pb
    e = ea + eb
    cc = np.broadcast_to(np.asarray(c, dtype=np.float32).astype(np.float64), p.shape[:-1])
    d = fold_chain(p, e, cc, model)
    return formats.canonical_nan(d.astype(np.float32))
