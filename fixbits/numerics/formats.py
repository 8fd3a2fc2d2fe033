"""Floating-point formats as fixbits names them, and exact rounding of float64 values into them.

Every rounding the emulator performs goes through ``round_to``: the value is scaled by a power
of two (exact), rounded to an integer (``np.rint`` is round-half-even, ``np.trunc`` is toward
zero) and scaled back, so no step relies on a library cast of unknown rounding. float64 holds
every value that reaches here exactly (products of two inputs, block sums, TwoSum pairs
collapsed by round-to-odd), which is why the results are bit-exact.

NaN handling follows the GPU: every NaN an fp32 operation produces is the canonical
0x7FFFFFFF (fp16/bf16: 0x7FFF), never a propagated payload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

# name -> numpy dtype; the names are the ones GEMMDesc uses.
_NP_DTYPES: dict[str, Any] = {
    "fp32": np.dtype(np.float32),
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
SUPPORTED: tuple[str, ...] = tuple(_NP_DTYPES)
DTYPE_BITS: dict[str, int] = {name: dt.itemsize * 8 for name, dt in _NP_DTYPES.items()}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: ``frac`` stored fraction bits, exponents of normal
    numbers in [emin, emax]; values at or above ``overflow`` become inf (NaN-only formats
    such as e4m3fn have no inf, and callers must keep values in range)."""

    name: str
    frac: int
    emin: int
    emax: int
    has_inf: bool = True
    max_finite: float = 0.0

    @property
    def overflow(self) -> float:
        """Smallest magnitude that rounds to inf under RZ (2^(emax+1))."""
        return float(2.0 ** (self.emax + 1))


FORMATS: dict[str, Format] = {
    "fp32": Format("fp32", 23, -126, 127, True, float(np.finfo(np.float32).max)),
    "fp16": Format("fp16", 10, -14, 15, True, 65504.0),
    "bf16": Format("bf16", 7, -126, 127, True, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    # Hopper fp8 tensor-core accumulator: fp32 exponent range, 13 fraction bits.
    "e8m13": Format("e8m13", 13, -126, 127, True, float((2 - 2.0**-13) * 2.0**127)),
    "fp8_e4m3": Format("fp8_e4m3", 3, -6, 8, False, 448.0),
    "fp8_e5m2": Format("fp8_e5m2", 2, -14, 15, True, 57344.0),
}

# decoded exponent of an input whose value is zero: low enough that a sum of two of them
# stays below every real exponent (and below every e_zero), small enough for int32.
ZERO_EXPONENT = -4096


def _unsupported(name: object) -> ValueError:
    return ValueError(f"unsupported dtype {name!r}; supported: {', '.join(SUPPORTED)}")


def np_dtype(name: str) -> np.dtype[Any]:
    """numpy dtype of a fixbits dtype name."""
    try:
        return _NP_DTYPES[name]
    except (KeyError, TypeError):
        raise _unsupported(name) from None


def dtype_name(dt: Any) -> str:
    """fixbits name of a numpy dtype (inverse of np_dtype)."""
    dt = np.dtype(dt)
    for name, known in _NP_DTYPES.items():
        if known == dt:
            return name
    raise _unsupported(str(dt))


def fmt(name: str) -> Format:
    """Format record of a dtype name (also 'e8m13')."""
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unsupported format {name!r}; supported: {', '.join(FORMATS)}") from None


def bits(x: np.ndarray) -> np.ndarray:
    """Unsigned-integer view of the same width (the only way fixbits compares floats)."""
    x = np.asarray(x)
    return x.view(_UINT[x.dtype.itemsize])


def from_bits(u: Any, name: str) -> np.ndarray:
    """Array of dtype ``name`` whose bit patterns are ``u``."""
    dt = np_dtype(name)
    return np.asarray(u, dtype=_UINT[dt.itemsize]).view(dt)


def decode(x: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sign, significand, exponent) with value = (-1)^sign * significand * 2^exponent exactly.

    Significand in [1, 2) for normal numbers; subnormals keep the format's minimum exponent and
    a significand below 1; zeros get significand 0 and exponent ZERO_EXPONENT. Non-finite
    values give NaN significands (callers treat them apart).
    """
    f = fmt(name)
    with np.errstate(invalid="ignore"):
        v = np.asarray(x).astype(np.float64)
    sign = np.signbit(v).astype(np.int8)
    mag = np.abs(v)
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(mag)  # mag = m * 2^e, m in [0.5, 1)
    exp = np.maximum(e.astype(np.int32) - 1, f.emin)
    exp = np.where(mag == 0, ZERO_EXPONENT, exp).astype(np.int32)
    with np.errstate(invalid="ignore"):
        sig = np.where(mag == 0, 0.0, np.ldexp(mag, -np.where(mag == 0, 0, exp)))
    sig = np.where(np.isfinite(mag), sig, np.nan)
    return sign, sig, exp


def exponent_table(name: str) -> np.ndarray:
    """decode()'s exponent for every bit pattern of an 8- or 16-bit format (a lookup table)."""
    width = DTYPE_BITS[name]
    if width > 16:
        raise ValueError(f"exponent_table is for 8/16-bit formats, not {name}")
    allbits = np.arange(2**width, dtype=np.uint64).astype(_UINT[width // 8])
    return decode(allbits.view(np_dtype(name)), name)[2]


def _exponent_of(x: np.ndarray, f: Format) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        _, e = np.frexp(np.abs(x))
    return np.maximum(e.astype(np.int32) - 1, f.emin)


def round_to(x: Any, name: str, mode: str = "rn") -> np.ndarray:
    """Round float64 values to format ``name`` (``mode`` 'rn' nearest-even or 'rz' toward zero).

    Returns float64 holding exactly representable values of the format (inf on overflow, the
    way the GPU's cvt.rn does; RZ also returns inf at |x| >= 2^(emax+1), per the tensor-core
    block model). Subnormals are kept.
    """
    f = fmt(name)
    x = np.asarray(x, dtype=np.float64)
    q = _exponent_of(x, f) - f.frac  # quantum exponent
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.ldexp(x, -q)
        if mode == "rn":
            r = np.rint(scaled)
        elif mode == "rz":
            r = np.trunc(scaled)
        else:
            raise ValueError(f"rounding mode {mode!r}; supported: rn, rz")
        out = np.ldexp(r, q)
        limit = f.overflow
        if mode == "rz":
            over = np.abs(x) >= limit
        else:  # beyond the largest finite value (e4m3fn's 480 pattern is NaN, not a number)
            over = np.abs(out) > f.max_finite
        out = np.where(over, np.copysign(np.inf, x), out)
    out = np.where(np.isfinite(x), out, x)  # inf stays inf, NaN stays NaN
    return out


def to_dtype(x: Any, name: str, mode: str = "rn") -> np.ndarray:
    """Round float64 values to dtype ``name`` and return an array of that dtype (NaN canonical)."""
    dt = np_dtype(name)
    r = round_to(x, name, mode)
    if name == "fp8_e4m3":
        r = np.where(np.isinf(r), np.nan, r)  # e4m3fn has no inf: overflow is NaN
    out = r.astype(dt)  # exact: r is representable
    nan = np.isnan(r)
    if nan.any() and name in _CANONICAL_NAN:
        out = np.where(nan, from_bits(_CANONICAL_NAN[name], name), out)
    return np.asarray(out, dtype=dt)


_CANONICAL_NAN = {"fp32": 0x7FFFFFFF, "fp16": 0x7FFF, "bf16": 0x7FFF}


def canonical_nan(x: np.ndarray) -> np.ndarray:
    """Replace every NaN of an fp32/fp16/bf16 array by the canonical pattern."""
    name = dtype_name(x.dtype)
    nan = np.isnan(x.astype(np.float32))
    if not nan.any():
        return x
    return np.where(nan, from_bits(_CANONICAL_NAN[name], name), x)


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl64(a + b) and the exact error e, a + b = s + e (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _round_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Round-to-odd of s + e given as a TwoSum pair: s with its last bit forced to 1 if inexact."""
    sb = s.view(np.uint64)
    inexact = (e != 0) & np.isfinite(s)
    even = (sb & np.uint64(1)) == 0
    fix = inexact & even
    if not fix.any():
        return s
    # step one ulp toward s + e: the odd neighbour on that side
    toward = np.where(e > 0, np.inf, -np.inf)
    return np.where(fix, np.nextafter(s, toward), s)


def add_rn(x: Any, y: Any, name: str = "fp32") -> np.ndarray:
    """Correctly rounded x + y in format ``name`` (float64 result). x, y are float64 arrays of
    values of at most 24 significant bits; exact cancellation gives +0, as IEEE RN does."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s, e = two_sum(x, y)
        s = _round_odd(s, np.where(np.isfinite(e), e, 0.0))
    return round_to(s, name, "rn")


def fma_rn(a: Any, b: Any, c: Any, name: str = "fp32") -> np.ndarray:
    """Correctly rounded a*b + c (one rounding) for fp32-representable a, b, c.

    The product is exact in float64 (24 + 24 bits); TwoSum with c gives the exact sum as a
    pair; round-to-odd to 53 bits then round-to-nearest to 24 bits is a single correct rounding
    (53 >= 24 + 2).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        s, e = two_sum(p, c)
        s = _round_odd(s, np.where(np.isfinite(e), e, 0.0))
    return round_to(s, name, "rn")


def mul_rn(a: Any, b: Any, name: str = "fp32") -> np.ndarray:
    """Correctly rounded a*b for fp32-representable a, b (the float64 product is exact)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return round_to(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64), name, "rn")


def div_rn(a: Any, b: Any, name: str = "fp32") -> np.ndarray:
    """Correctly rounded a/b for fp32 a, b: rounding the correctly rounded float64 quotient again
    to 24 bits is innocuous double rounding (53 >= 2*24 + 2, Figueroa 1995)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return round_to(np.asarray(a, dtype=np.float64) / np.asarray(b, dtype=np.float64), name, "rn")


def ulp_distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between same-dtype arrays: bit patterns mapped onto a
    monotone integer line, so neighbours are 1 apart and +0 / -0 count as 1 apart (they differ)."""
    if x.dtype != y.dtype:
        raise ValueError(f"ulp_distance of different dtypes {x.dtype} and {y.dtype}")
    width = x.dtype.itemsize * 8
    return np.abs(_monotone(bits(x), width) - _monotone(bits(y), width))


def _monotone(u: np.ndarray, width: int) -> np.ndarray:
    """Map sign-magnitude patterns onto an integer line: -0 -> -1, +0 -> 0, then increasing."""
    u64 = u.astype(np.int64)
    sign = np.int64(1) << (width - 1)
    mag = u64 & (sign - 1)
    return np.where(u64 & sign, -mag - 1, mag)
