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


# A spike draw at chosen columns: "spike@k1-k2,k1-k2,..." (the pairs travel in the kind string, so
# every path that draws a kind, on the device or the host, plants the same columns).
AT = KIND + "@"


def at_kind(pairs: list[tuple[int, int]]) -> str:
    """The kind of a spike draw planting exactly ``pairs``."""
    return AT + ",".join(f"{k1}-{k2}" for k1, k2 in pairs)


def _pairs_of(kind: str) -> list[tuple[int, int]]:
    try:
        out = [tuple(int(x) for x in p.split("-")) for p in kind[len(AT):].split(",") if p]
    except ValueError:
        raise ValueError(f"spike draw kind {kind!r}: expected {AT}k1-k2,k1-k2,...") from None
    if any(len(p) != 2 or not 0 <= p[0] < p[1] for p in out):
        raise ValueError(f"spike draw kind {kind!r}: each pair must be k1-k2 with 0 <= k1 < k2")
    return out  # type: ignore[return-value]


def straddling(starts: list[frozenset[int]], k: int, seed: int, limit: int = 32) -> list[tuple[int, int]]:
    """Short ±L pairs across the K positions where readings start their instruction groups
    differently (``starts``: each reading's group starts at this K). Random pairs hit such a
    position rarely when the readings part only in a few groups (a24-t24 split-K answers, K-loop
    step 32 or 64 with the residue first: 8 of 3,794 starts at K = 30,347 in one split part); on
    the emulator these pairs moved 34 of 512 fp16 cells where random spike draws moved 5. Empty
    when the readings start every group alike."""
    differ = frozenset().union(*starts) - frozenset.intersection(*starts) if starts else frozenset()
    cands = sorted(b for b in differ if 0 < b < k)
    rng = np.random.default_rng(seed)
    if len(cands) > limit:
        cands = sorted(int(b) for b in rng.choice(cands, size=limit, replace=False))
    out: list[tuple[int, int]] = []
    used: set[int] = set()
    for b in cands:
        k1, k2 = b - int(rng.integers(1, 4)), b + int(rng.integers(0, 3))
        if k1 < 0 or k2 >= k or k1 in used or k2 in used:
            continue
        used.update((k1, k2))
        out.append((k1, k2))
    return out


def hides_ulps(out_dtype: str) -> bool:
    """Whether an output dtype rounds away the one-ulp fp32 regroupings (spike draws needed)."""
    return out_dtype in ("fp16", "bf16")


def base_kind(kind: str) -> str:
    """The kind an operand of a ``kind`` draw is drawn as before planting."""
    return "ordinary" if kind == KIND or kind.startswith(AT) else kind


def finish(kind: str, a: Any, b: Any, seed: int, in_dtype: str) -> tuple[Any, Any]:
    """A and B of a ``kind`` draw from the base draws: planted (in place) for a spike draw."""
    if kind.startswith(AT):
        return plant_pairs(a, b, _pairs_of(kind), in_dtype)
    return plant(a, b, seed, in_dtype) if kind == KIND else (a, b)


def plant(a: Any, b: Any, seed: int, in_dtype: str) -> tuple[Any, Any]:
    """Plant the pairs of ``seed`` into A (M, K) and B (K, N), in place; returns them."""
    return plant_pairs(a, b, positions(int(a.shape[1]), seed), in_dtype)


def plant_pairs(a: Any, b: Any, pairs: list[tuple[int, int]], in_dtype: str) -> tuple[Any, Any]:
    """Plant ``pairs`` (distinct columns, each below K) into A (M, K) and B (K, N), in place."""
    if in_dtype not in _LOG2_L:
        raise ValueError(f"spike draws: unsupported input dtype {in_dtype!r}; supported: {', '.join(_LOG2_L)}")
    k = int(a.shape[1])
    cols = [c for p in pairs for c in p]
    if len(set(cols)) != len(cols) or any(c >= k for c in cols):
        raise ValueError(f"spike pairs {pairs}: columns must be distinct and below K = {k}")
    big = float(2 ** _LOG2_L[in_dtype])
    for k1, k2 in pairs:
        a[:, k1] = big
        a[:, k2] = -big
        b[k2, :] = b[k1, :]
    return a, b
