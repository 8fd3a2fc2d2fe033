"""Seeded GEMM inputs: the same (shape, dtype, kind, seed) gives the same bytes on every machine.

Kinds exist because ordinary random draws hide most reduction-order changes: their products
have similar exponents, so regroupings rarely move a bit, and once rounded to fp16 nothing at
all. ``wide`` spreads exponents over the usable range, ``tiny`` and ``subnormal`` exercise the
bottom of the formats (and the block model's e_zero / fp32 subnormal handling), ``cancel``
makes sums cancel almost completely so the truncation inside a block shows, ``special`` plants a
few infinities and NaNs in ordinary values (e4m3fn has no infinity: NaN only) to check the
non-finite rules. ``underflow`` (bf16 and fp32; other dtypes fall back to ``tiny``) puts products
below fp32's normal range, where a block's e_max is e_zero's and its result an fp32 subnormal
or a signed zero.

Values are built from the raw 64-bit words of numpy's PCG64 bit generator (whose stream numpy
keeps stable across versions, unlike ``Generator``'s distributions) using only +, -, *, and
powers of two, which IEEE makes identical on every machine (no exp/log/cos, whose SIMD
implementations differ by an ulp between CPUs). The result is rounded to the dtype by
``fixbits.numerics.formats``, never by a library cast. So a golden record's inputs can be
regenerated anywhere, by any numpy, from its kind and seed.
"""

from __future__ import annotations

import numpy as np

from fixbits.numerics import formats

KINDS: tuple[str, ...] = ("ordinary", "wide", "tiny", "subnormal", "cancel", "ones", "special", "underflow")

# Per dtype: exponent range for 'wide' (products and sums stay finite in fp32) and for 'tiny'
# (products near the bottom of the accumulator's range or of the format's own range).
_WIDE = {"fp16": (-10, 10), "bf16": (-20, 20), "fp8_e4m3": (-6, 7), "fp8_e5m2": (-10, 10), "fp32": (-20, 20)}
_UNDERFLOW = {"bf16": (-72, -66), "fp32": (-131, -127)}
_TINY = {
    "fp16": (-20, -10),
    "bf16": (-70, -56),
    "fp8_e4m3": (-9, -4),
    "fp8_e5m2": (-16, -9),
    "fp32": (-135, -110),
}


def _check(shape: tuple[int, ...], dtype: str, kind: str, seed: int) -> None:
    formats.np_dtype(dtype)  # ValueError naming the supported dtypes
    if kind not in KINDS:
        raise ValueError(f"unknown input kind {kind!r}; supported: {', '.join(KINDS)}")
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if any(int(s) < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative dimension")


class _Stream:
    """Deterministic draws from PCG64's raw words (see the module docstring for why)."""

    def __init__(self, seed: int) -> None:
        self._bits = np.random.PCG64(int(seed))

    def _raw(self, shape: tuple[int, ...]) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        return np.asarray(self._bits.random_raw(n), dtype=np.uint64).reshape(shape)

    def random(self, shape: tuple[int, ...]) -> np.ndarray:
        """Uniform on [0, 1) with 53 random bits."""
        return (self._raw(shape) >> np.uint64(11)).astype(np.float64) * 2.0**-53

    def integers(self, lo: int, hi: int, shape: tuple[int, ...]) -> np.ndarray:
        """Integers in [lo, hi] (modulo bias below 2^-40: irrelevant here)."""
        return (self._raw(shape) % np.uint64(hi - lo + 1)).astype(np.int64) + lo

    def normalish(self, shape: tuple[int, ...]) -> np.ndarray:
        """Mean 0, variance 1, bell-shaped: a centred sum of four uniforms (Irwin-Hall)."""
        total = self.random(shape) + self.random(shape) + self.random(shape) + self.random(shape)
        return (total - 2.0) * 1.7320508075688772


def _pow2(rng: _Stream, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Random sign * significand in [1, 2) * 2^U{lo..hi}."""
    sig = 1.0 + rng.random(shape)
    sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
    return sign * np.ldexp(sig, rng.integers(lo, hi, shape))


def _limit(x: np.ndarray, dtype: str) -> np.ndarray:
    top = formats.fmt(dtype).max_finite
    return np.clip(x, -top, top)


def draw(shape: tuple[int, ...], dtype: str, kind: str, seed: int) -> np.ndarray:
    """An array of ``shape`` and fixbits dtype ``dtype`` drawn as ``kind`` from ``seed``."""
    shape = tuple(int(s) for s in shape)
    _check(shape, dtype, kind, seed)
    rng = _Stream(int(seed))
    f = formats.fmt(dtype)
    if kind == "ones":
        x = np.ones(shape)
    elif kind == "ordinary":
        x = rng.normalish(shape)
    elif kind == "wide":
        x = _pow2(rng, shape, *_WIDE[dtype])
    elif kind == "tiny" or (kind == "underflow" and dtype not in _UNDERFLOW):
        lo, hi = _TINY[dtype]
        x = _pow2(rng, shape, lo, hi)
        # a few exact zeros too (zero products take e_zero)
        x = np.where(rng.random(shape) < 0.05, 0.0, x)
    elif kind == "subnormal":
        # half subnormals of the format (random significand bits), half ordinary normals
        step = 2.0 ** (f.emin - f.frac)
        sub = rng.integers(1, 2**f.frac - 1, shape) * step
        sub = np.where(rng.random(shape) < 0.5, -sub, sub)
        x = np.where(rng.random(shape) < 0.5, sub, rng.normalish(shape))
    elif kind == "underflow":
        # two tiers by first-axis index (rows of A, K-rows of B): 'deep' rows make products far
        # below 2^-149, so whole outputs round to signed zeros or a few subnormal ulps and the
        # block's e_max is e_zero's; the others give subnormal sums
        lo, hi = _UNDERFLOW[dtype]
        x = _pow2(rng, shape, lo, hi)
        if len(shape) >= 1 and shape[0] > 0:
            deep = rng.random((shape[0],) + (1,) * (len(shape) - 1)) < 0.4
            x = np.where(deep, _pow2(rng, shape, lo - 18, lo - 8), x)
        x = np.where(rng.random(shape) < 0.05, 0.0, x)
    elif kind == "cancel":
        x = _cancel(rng, shape, dtype)
    else:  # special
        x = _limit(rng.normalish(shape), dtype)
        size = int(np.prod(shape, dtype=np.int64))
        count = max(1, size // 4000) if size else 0
        where = rng.integers(0, max(size - 1, 0), (count,))
        which = rng.integers(0, 2, (count,))
        values = np.array([np.inf, -np.inf, np.nan])[which]
        if dtype == "fp8_e4m3":
            values = np.full(count, np.nan)
        flat = x.reshape(-1)
        flat[where] = values
        return formats.to_dtype(flat.reshape(shape), dtype, "rn")
    return formats.to_dtype(_limit(x, dtype), dtype, "rn")


def _cancel(rng: _Stream, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Magnitudes shared by 2x2 blocks, signs alternating along the last axis, each value
    nudged by a few ulps: A @ B of two such draws cancels in pairs along K (a[m, 2j] b[2j, n] and
    a[m, 2j+1] b[2j+1, n] are equal and opposite before the nudges), leaving ulp-sized residues
    of large terms."""
    if len(shape) == 0:
        return rng.normalish(shape)
    lo, hi = _WIDE[dtype]
    half = tuple((s + 1) // 2 for s in shape)
    mag = np.abs(_pow2(rng, half, lo // 2, hi // 2))
    for ax in range(len(shape)):
        mag = np.repeat(mag, 2, axis=ax)
    mag = mag[tuple(slice(0, s) for s in shape)]
    sign = np.where(np.arange(shape[-1]) % 2 == 0, 1.0, -1.0)
    frac = formats.fmt(dtype).frac
    nudge = rng.integers(-3, 3, shape) * 2.0 ** (-frac)
    nudge = np.where(rng.random(shape) < 0.5, 0.0, nudge)
    return mag * sign * (1.0 + nudge)


def stream_digest() -> str:
    """sha256 over a fixed set of draws: equal on two machines iff draw() agrees on them
    (printed by the GPU capture script, pinned by the unit tests)."""
    import hashlib

    h = hashlib.sha256()
    for dtype in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp32"):
        for kind in ("ordinary", "wide", "tiny", "subnormal", "cancel", "ones"):  # fixed: new kinds keep it
            h.update(np.ascontiguousarray(draw((7, 5), dtype, kind, 123)).tobytes())
    return h.hexdigest()
