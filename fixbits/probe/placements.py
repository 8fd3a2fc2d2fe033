"""±L / r placements (paper §4) and how many of them ride in one black-box GEMM.

A placement is a handful of products on an otherwise empty contracted axis of ONE output
element. Each product is a·b with a from the varying operand and b from the shared one, so
the magnitudes can exceed what one input format holds (fp8: L = 2^7·2^7, r = 2^-9·2^-3).

Batching: rows of A are independent outputs, so a call carries one placement per row (or per
column of B when M is small: a GEMV shape), and the shared operand's other columns (rows)
carry different scale vectors, so placements that need different b at one position still
share a call. That is what keeps the prober to a few calls per shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Magnitudes:
    """L and r as (a, b) factor pairs: L·(1 - 2^-24·2) absorbs r in fp32 and in every block.

    Chosen so that: ±L cancel exactly; r < 2^(e_L - F) (a block holding L truncates r away);
    r < half an ulp of fp32 at L (an RN add absorbs it); L and r are exact in fp16, bf16 and
    the fp8 accumulator, so a partial or an output rounded to those keeps the answer.
    """

    in_dtype: str
    l_a: float
    l_b: float
    r_a: float
    r_b: float

    @property
    def L(self) -> float:  # noqa: N802  (the paper's name)
        return self.l_a * self.l_b

    @property
    def r(self) -> float:
        return self.r_a * self.r_b


def magnitudes(in_dtype: str) -> Magnitudes:
    if in_dtype in ("fp16", "bf16"):
        return Magnitudes(in_dtype, 2.0**10, 1.0, 2.0**-17, 1.0)
    if in_dtype == "fp8_e4m3":
        return Magnitudes(in_dtype, 2.0**7, 2.0**7, 2.0**-9, 2.0**-3)
    if in_dtype == "fp8_e5m2":
        return Magnitudes(in_dtype, 2.0**7, 2.0**7, 2.0**-12, 2.0**0)
    raise ValueError(f"no ±L/r magnitudes for in_dtype={in_dtype!r}; supported: fp16, bf16, fp8_e4m3, fp8_e5m2")


@dataclass(frozen=True)
class Placement:
    """Products (position, a, b) on one output's axis; ``tag`` names the walk step it serves."""

    terms: tuple[tuple[int, float, float], ...]
    tag: tuple[Any, ...] = ()


def lr_placement(mag: Magnitudes, r: int, plus: int, minus: int, tag: tuple[Any, ...] = ()) -> Placement:
    return Placement(((r, mag.r_a, mag.r_b), (plus, mag.l_a, mag.l_b), (minus, -mag.l_a, mag.l_b)), tag)


@dataclass
class Call:
    """One black-box GEMM: the inputs, and where each placement's answer will be read."""

    a: np.ndarray
    b: np.ndarray
    reads: list[tuple[int, int]]  # (row, col) of each placement, in order
    placements: list[Placement]
    out: np.ndarray | None = None


@dataclass
class Packer:
    """Packs placements into calls of shape (m, k)·(k, n) (see the module docstring)."""

    m: int
    n: int
    k: int
    in_dtype: str
    slots_on_rows: bool = field(init=False)

    def __post_init__(self) -> None:
        self.slots_on_rows = self.m >= self.n

    @property
    def slots(self) -> int:
        return self.m if self.slots_on_rows else self.n

    @property
    def scales(self) -> int:
        return self.n if self.slots_on_rows else self.m

    def pack(self, placements: list[Placement]) -> list[Call]:
        from fixbits.numerics.formats import np_dtype

        dt = np_dtype(self.in_dtype)
        calls: list[Call] = []
        # current call state: per scale vector a dict position -> b
        pending: list[tuple[Placement, int]] = []
        vectors: list[dict[int, float]] = []

        def flush() -> None:
            if not pending:
                return
            var = np.zeros((self.slots, self.k), dtype=np.float32)
            shared = np.zeros((self.scales, self.k), dtype=np.float32)
            values: set[float] = set()
            for j, vec in enumerate(vectors):
                for pos, bval in vec.items():
                    shared[j, pos] = bval
                    values.add(bval)
            reads = []
            for slot, (pl, j) in enumerate(pending):
                for pos, aval, _ in pl.terms:
                    var[slot, pos] += aval
                    values.add(aval)
                reads.append((slot, j) if self.slots_on_rows else (j, slot))
            vals = np.array(sorted(values), dtype=np.float64)
            bad = vals[vals.astype(dt).astype(np.float64) != vals]
            if bad.size:
                raise ValueError(f"placement value(s) {bad[:4].tolist()} not exact in {self.in_dtype}")
            if self.slots_on_rows:
                a, b = var.astype(dt), np.ascontiguousarray(shared.T).astype(dt)
            else:
                a, b = shared.astype(dt), np.ascontiguousarray(var.T).astype(dt)
            calls.append(Call(a=a, b=b, reads=reads, placements=[p for p, _ in pending]))
            pending.clear()
            vectors.clear()

        remaining: list[tuple[Placement, dict[int, float]]] = []
        for pl in placements:
            need = {pos: bval for pos, _, bval in pl.terms}
            if len(need) != len(pl.terms):
                raise ValueError(f"placement {pl.tag} uses a position twice")
            if any(not 0 <= pos < self.k for pos in need):
                raise ValueError(f"placement {pl.tag} falls outside K={self.k}")
            remaining.append((pl, need))
        # fill each call with every placement that fits its scale vectors (not just the next
        # ones in order): with one scale vector, fp8 walks otherwise flush at every conflict
        while remaining:
            left: list[tuple[Placement, dict[int, float]]] = []
            for pl, need in remaining:
                if len(pending) == self.slots:
                    left.append((pl, need))
                    continue
                j = next((i for i, v in enumerate(vectors) if all(v.get(p, b) == b for p, b in need.items())), None)
                if j is None:
                    if len(vectors) == self.scales:
                        left.append((pl, need))
                        continue
                    vectors.append({})
                    j = len(vectors) - 1
                vectors[j].update(need)
                pending.append((pl, j))
            flush()
            remaining = left
        flush()
        return calls


def read(call: Call) -> list[float]:
    """Each placement's output as a float (the call must have run)."""
    assert call.out is not None
    out = call.out
    return [float(np.asarray(out[i, j], dtype=np.float64)) for i, j in call.reads]


def read_bits(call: Call) -> list[int]:
    from fixbits.numerics.formats import bits

    assert call.out is not None
    u = bits(np.ascontiguousarray(call.out))
    return [int(u[i, j]) for i, j in call.reads]
