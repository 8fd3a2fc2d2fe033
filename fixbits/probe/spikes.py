"""Spike draws: ordinary operands with short-lived ±L pairs planted along K.

A narrow output (fp16, bf16) rounds away the one-ulp fp32 differences by which two readings of
an answer (K-loop step 64 or 128, say) part on ordinary or wide draws: in H200 run s14/n14 phase
B left seven fp16->fp16 split-K answers ambiguous after 8 more draws on each of two shapes. A pair
A[:, k1] = +L, A[:, k2] = -L with B[k2, :] = B[k1, :] cancels exactly, but while it is open the
running sum is ~L, so the small products added in between (and those sharing a k-group with L
under fast accumulation) are rounded at L's scale, which depends on how the K loop groups them.
The pair is short (k2 - k1 <= 64), so it straddles a turn boundary in one reading and not the
other. On the emulator (16x16 outputs, 4 draws, steps 32 / 64 / 128) this moves 1-4% of fp16
and bf16 output cells where ordinary draws move almost none; a long pair (k1 near 0, k2 near K)
moves none, since every product in between is rounded at the same scale in every reading.

The plant works in place on numpy arrays and torch tensors alike (column and row assignment),
so the device draws and the host redraws of a seed hold the same bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

KIND = "spike"
# log2 L per input dtype: L * |b| stays finite in fp32 and L is exact in the input format
_LOG2_L = {"fp16": 15, "bf16": 20, "fp8_e4m3": 8, "fp8_e5m2": 15}
_MAX_GAP = 64


def positions(k: int, seed: int) -> list[tuple[int, int]]:
    """(k1, k2) pairs, k1 < k2 < k, k2 - k1 <= 64: 16 pairs on even seeds, 32 on odd ones."""
    rng = np.random.default_rng(seed)
    out: list[tuple[int, int]] = []
    used: set[int] = set()
    for _ in range(16 if seed % 2 == 0 else 32):
        gap = int(rng.integers(1, _MAX_GAP + 1))
        if k <= gap:
            continue
        k1 = int(rng.integers(0, k - gap))
        if k1 in used or k1 + gap in used:  # a column planted twice would break the cancellation
            continue
        used.update((k1, k1 + gap))
        out.append((k1, k1 + gap))
    return out


def hides_ulps(out_dtype: str) -> bool:
    """Whether an output dtype rounds away the one-ulp fp32 regroupings (spike draws needed)."""
    return out_dtype in ("fp16", "bf16")


def base_kind(kind: str) -> str:
    """The kind an operand of a ``kind`` draw is drawn as before planting."""
    return "ordinary" if kind == KIND else kind


def finish(kind: str, a: Any, b: Any, seed: int, in_dtype: str) -> tuple[Any, Any]:
    """A and B of a ``kind`` draw from the base draws: planted (in place) for a spike draw."""
    return plant(a, b, seed, in_dtype) if kind == KIND else (a, b)


def plant(a: Any, b: Any, seed: int, in_dtype: str) -> tuple[Any, Any]:
    """Plant the pairs of ``seed`` into A (M, K) and B (K, N), in place; returns them."""
    if in_dtype not in _LOG2_L:
        raise ValueError(f"spike draws: unsupported input dtype {in_dtype!r}; supported: {', '.join(_LOG2_L)}")
    big = float(2 ** _LOG2_L[in_dtype])
    for k1, k2 in positions(int(a.shape[1]), seed):
        a[:, k1] = big
        a[:, k2] = -big
        b[k2, :] = b[k1, :]
    return a, b
