"""Bitwise asserts and drift records: the comparison every fixbits test (and a user's suite) runs.

Equality here is equality of bytes. Both sides are viewed as unsigned integers of their own
width and compared as integers, so +0 and -0 differ, two NaNs with different payloads differ,
and nothing is ever "close enough". ``allclose(atol=0)`` is not this check: it equates the
zeros and ignores NaN payloads.

When the bytes differ the report says what an engineer needs to start bisecting: how many
elements moved, the first one (index, both bit patterns, both values) and how far apart in
ulps, at the first difference and at worst. The same facts become JUnit properties through
``DriftRecord.to_properties()`` so a merged CI report can show drift without rerunning.

numpy arrays and torch tensors are both accepted; torch is imported only when a tensor is
passed, so this module is usable on machines without torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_UINT_BY_WIDTH: dict[int, type[np.unsignedinteger[Any]]] = {
    1: np.uint8,
    2: np.uint16,
    4: np.uint32,
    8: np.uint64,
}


def _torch_to_numpy(t: Any) -> tuple[np.ndarray, str]:
    """A tensor's raw bits as a numpy uint array, and its dtype name ('bfloat16', 'float16', ...)."""
    import torch

    name = str(t.dtype).removeprefix("torch.")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    width = t.element_size()
    if width not in _UINT_BY_WIDTH:
        raise TypeError(f"cannot compare bits of a torch.{name} tensor (element size {width})")
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    # torch has no uint16/uint32 views on older builds: view as the signed int of the width,
    # then reinterpret in numpy (same bytes).
    signed = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
    raw = t.view(signed).numpy().view(_UINT_BY_WIDTH[width])
    return raw, name


def _as_bits(x: Any, which: str) -> tuple[np.ndarray, str, np.dtype[Any] | None]:
    """(unsigned view, dtype name, numpy dtype or None for a tensor)."""
    if _is_tensor(x):
        raw, name = _torch_to_numpy(x)
        return raw, name, None
    if not isinstance(x, np.ndarray | np.generic):
        raise TypeError(f"{which}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    arr = np.ascontiguousarray(x)
    width = arr.dtype.itemsize
    if width not in _UINT_BY_WIDTH or arr.dtype.kind not in "fiubV":
        raise TypeError(f"{which}: cannot compare bits of dtype {arr.dtype} (itemsize {width})")
    return arr.view(_UINT_BY_WIDTH[width]), arr.dtype.name, arr.dtype


def _is_float(name: str) -> bool:
    return "float" in name or name in ("bfloat16", "half", "double")


def _ordered(bits: np.ndarray, width: int, is_float: bool, unsigned: bool = False) -> np.ndarray:
    """Map bit patterns to integers whose differences count ulps (sign-magnitude -> two's order)."""
    b = bits.astype(np.uint64)
    if not is_float:
        if unsigned:
            return bits.astype(np.int64)
        # signed integers: the value itself (reinterpreted as signed of its width)
        signed = bits.view({1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[width])
        return signed.astype(np.int64)
    sign_bit = np.uint64(1) << np.uint64(8 * width - 1)
    mag = (b & (sign_bit - np.uint64(1))).astype(np.int64)
    out: np.ndarray = np.where((b & sign_bit) != 0, -mag, mag)
    return out


def _nan_mask(bits: np.ndarray, name: str) -> np.ndarray:
    if not _is_float(name):
        return np.zeros(bits.shape, dtype=bool)
    nan: np.ndarray = np.isnan(_bits_to_float(bits, name))
    return nan


def _bits_to_float(bits: np.ndarray, name: str) -> np.ndarray:
    """Decode bits to float64 by dtype name (ml_dtypes covers bfloat16 and the fp8 formats)."""
    if name in ("float16", "float32", "float64"):
        dtype = np.dtype(name)
    else:
        import ml_dtypes

        dtype = np.dtype(getattr(ml_dtypes, name))
    with np.errstate(invalid="ignore"):  # NaN bit patterns are data here, not an error
        decoded: np.ndarray = bits.view(dtype).astype(np.float64)
    return decoded


def _value_repr(bits: np.ndarray, name: str) -> str:
    try:
        if _is_float(name):
            return repr(float(_bits_to_float(bits.reshape(1), name)[0]))
        if name.startswith("int"):
            return repr(int(bits.view(np.dtype(name))))
        return repr(int(bits))
    except Exception:  # an exotic dtype: the hex bits still say everything
        return "?"


@dataclass(frozen=True)
class BitwiseDiff:
    """The outcome of one bitwise comparison (equal when ``n_diff == 0``)."""

    shape: tuple[int, ...]
    dtype: str
    total: int
    n_diff: int
    first_index: tuple[int, ...] | None = None
    actual_bits: str | None = None
    expected_bits: str | None = None
    actual_value: str | None = None
    expected_value: str | None = None
    ulp_first: int | None = None  # None when either side is NaN at the first difference
    ulp_max: int | None = None  # over differing non-NaN pairs; None when all differences are NaNs

    @property
    def equal(self) -> bool:
        return self.n_diff == 0

    @property
    def first_diff(self) -> str:
        """One line: 'index (0, 5): actual 0x3c01 (1.0009765625) expected 0x3c00 (1.0), 1 ulp'."""
        if self.equal:
            return "none"
        if self.ulp_first is None:
            ulp = "ulp distance n/a (NaN)"
        elif self.ulp_first == 0:
            ulp = "0 ulp (equal values, different bits: the sign of zero)"
        else:
            ulp = f"{self.ulp_first} ulp"
        return (
            f"index {self.first_index}: actual {self.actual_bits} ({self.actual_value}) "
            f"expected {self.expected_bits} ({self.expected_value}), {ulp}"
        )

    def message(self, context: str | Mapping[str, Any] | None = None) -> str:
        if self.equal:
            head = f"bitwise equal: {self.total} elements ({self.dtype}, shape {self.shape})"
        else:
            head = (
                f"bitwise mismatch: {self.n_diff} of {self.total} elements differ "
                f"({self.dtype}, shape {self.shape})\n  first difference at {self.first_diff}\n"
                f"  max ulp distance: {'n/a (only NaNs differ)' if self.ulp_max is None else self.ulp_max}"
            )
        ctx = format_context(context)
        return head + (f"\n  context: {ctx}" if ctx else "")


def format_context(context: str | Mapping[str, Any] | None) -> str:
    if context is None:
        return ""
    if isinstance(context, Mapping):
        return ", ".join(f"{k}={v}" for k, v in context.items())
    return str(context)


def _torch_equal_on_device(actual: Any, expected: Any) -> bool:
    """Both tensors on one device with one dtype and shape, and bitwise equal there (no copy)."""
    if not (_is_tensor(actual) and _is_tensor(expected)):
        return False
    if actual.device != expected.device or actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    import torch

    signed = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(actual.element_size())
    if signed is None or actual.dtype == torch.bool:
        return False
    return bool(torch.equal(actual.contiguous().view(signed), expected.contiguous().view(signed)))


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "element_size")


def compare_bits(actual: Any, expected: Any) -> BitwiseDiff:
    """Compare raw bits; raise ValueError/TypeError when shapes or dtypes do not match."""
    if _torch_equal_on_device(actual, expected):  # the common, passing case stays on the GPU
        name = str(actual.dtype).removeprefix("torch.")
        return BitwiseDiff(
            shape=tuple(int(s) for s in actual.shape), dtype=name, total=int(actual.numel()), n_diff=0
        )
    a, a_name, _ = _as_bits(actual, "actual")
    e, e_name, _ = _as_bits(expected, "expected")
    if a_name != e_name or a.dtype.itemsize != e.dtype.itemsize:
        raise TypeError(
            f"dtype mismatch: actual is {a_name} ({8 * a.dtype.itemsize} bits), expected is "
            f"{e_name} ({8 * e.dtype.itemsize} bits); compare like with like"
        )
    if a.shape != e.shape:
        raise ValueError(f"shape mismatch: actual {a.shape} vs expected {e.shape}")
    differ = a != e
    n_diff = int(np.count_nonzero(differ))
    base = dict(shape=tuple(int(s) for s in a.shape), dtype=a_name, total=int(a.size), n_diff=n_diff)
    if n_diff == 0:
        return BitwiseDiff(**base)  # type: ignore[arg-type]
    width = a.dtype.itemsize
    hexw = 2 * width
    flat = int(np.flatnonzero(differ.reshape(-1))[0])
    idx = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.ndim else ()
    af, ef = a.reshape(-1)[flat], e.reshape(-1)[flat]
    is_float = _is_float(a_name)
    uns = a_name.startswith("uint") or a_name == "bool"
    # only the differing elements are decoded: an output can hold 10**8 elements
    ad, ed = a[differ], e[differ]  # C order, so position 0 is the first difference
    nan = _nan_mask(ad, a_name) | _nan_mask(ed, e_name)
    dist = np.abs(_ordered(ad, width, is_float, uns) - _ordered(ed, width, is_float, uns))
    ulp_max = int(dist[~nan].max()) if (~nan).any() else None
    ulp_first = None if nan[0] else int(dist[0])
    return BitwiseDiff(
        **base,  # type: ignore[arg-type]
        first_index=idx,
        actual_bits=f"0x{int(af):0{hexw}x}",
        expected_bits=f"0x{int(ef):0{hexw}x}",
        actual_value=_value_repr(np.array(af), a_name),
        expected_value=_value_repr(np.array(ef), e_name),
        ulp_first=ulp_first,
        ulp_max=ulp_max,
    )


def assert_bitwise_equal(
    actual: Any, expected: Any, *, context: str | Mapping[str, Any] | None = None
) -> None:
    """Raise AssertionError with a drift report unless every byte of ``actual`` equals ``expected``.

    ``context`` (seed, shape, descriptor, ...) is appended to the message so a failure can be
    reproduced from the log alone. Shape or dtype mismatches are AssertionErrors too, naming both.
    """
    __tracebackhide__ = True
    try:
        diff = compare_bits(actual, expected)
    except (TypeError, ValueError) as exc:
        ctx = format_context(context)
        raise AssertionError(f"{exc}" + (f"\n  context: {ctx}" if ctx else "")) from None
    if not diff.equal:
        raise AssertionError(diff.message(context))


@dataclass(frozen=True)
class DriftRecord:
    """Where a test's bytes stand, in the form CI reports keep (JUnit properties)."""

    test: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    desc_hash: str | None = None
    libraries: tuple[tuple[str, str], ...] = ()
    env_hash: str | None = None
    diff: BitwiseDiff | None = None
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    PREFIX = "fixbits."

    def to_properties(self) -> list[tuple[str, str]]:
        """(name, value) pairs for ``record_property``; names start with 'fixbits.'."""
        p = self.PREFIX
        out: list[tuple[str, str]] = []
        if self.shape is not None:
            out.append((p + "shape", "x".join(str(s) for s in self.shape)))
        if self.dtype is not None:
            out.append((p + "dtype", self.dtype))
        if self.desc_hash is not None:
            out.append((p + "desc_hash", self.desc_hash))
        if self.libraries:
            out.append((p + "libraries", " ".join(f"{k}={v}" for k, v in self.libraries)))
        if self.env_hash is not None:
            out.append((p + "env_hash", self.env_hash))
        if self.diff is not None:
            out.append((p + "n_diff", str(self.diff.n_diff)))
            if not self.diff.equal:
                out.append((p + "first_diff", self.diff.first_diff))
                out.append((p + "ulp_max", "n/a" if self.diff.ulp_max is None else str(self.diff.ulp_max)))
        out.extend((p + k, v) for k, v in self.extra)
        return out
