"""The walks the prober runs, and the black-box session that runs them and keeps the evidence.

Three readouts, each one ±L / r placement per step:
* ``group_start(z)``: +L, -L at z-2, z-1, r at z. r survives when z opens a new instruction
  group (or any later unit): a block that still holds the pair's L truncates r away.
* ``rn_start(b)``: r at b-1, the pair at b, b+1. r survives only when b opens a unit that is
  summed from zero and added to r's with a round-to-nearest add (a split-K part, a promotion
  segment, a GEMV lane tile): inside one block chain the pair's block sees r's accumulator.
* ``summed(x)``: one product 1 at x; 0 comes back where cuBLAS never sums x (the tail defect).
Everything else is a free triple (r, +L, -L) chosen to split the candidates still standing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixbits.probe.placements import (
    Call,
    Magnitudes,
    Packer,
    Placement,
    lr_placement,
    magnitudes,
    read,
    read_bits,
)

# outcome classes of one ±L / r placement (plan.predict_many's codes)
ABSORBED, SURVIVES, BIG, OTHER = 0, 1, 2, 3


@dataclass(frozen=True)
class WalkRecord:
    """One batch of placements run on the black box: what was asked and what came back."""

    walk: str
    triples: tuple[tuple[int, int, int], ...]  # (r, +L, -L) positions, or (x, -1, -1) for summed(x)
    outcomes: tuple[int, ...]  # class codes (0 absorbed, 1 r survives, 2 an L is lost, 3 other)
    calls: int


@dataclass
class Session:
    """A black box at one shape, the calls made so far and every outcome seen."""

    backend: Any
    m: int
    n: int
    k: int
    in_dtype: str
    out_dtype: str
    mag: Magnitudes = field(init=False)
    packer: Packer = field(init=False)
    calls: int = 0
    records: list[WalkRecord] = field(default_factory=list)
    # all (r, +L, -L) -> class seen, for the structural filter
    seen: dict[tuple[int, int, int], int] = field(default_factory=dict)
    value_calls: list[Call] = field(default_factory=list)
    sparse_error: str = ""

    def __post_init__(self) -> None:
        self.mag = magnitudes(self.in_dtype)
        self.packer = Packer(self.m, self.n, self.k, self.in_dtype)

    def run_calls(self, calls: list[Call]) -> None:
        sparse = getattr(self.backend, "gemm_call", None)
        for c in calls:
            if sparse is not None:  # the backend builds the call where it runs, returns the read cells
                try:
                    c.vals = sparse(c)
                except Exception as exc:  # a device-side failure: the host-built call, when it is small
                    if type(exc).__name__ == "TooLarge" or c.m * c.k + c.k * c.n > 150_000_000:
                        raise
                    sparse = None
                    self.sparse_error = f"{type(exc).__name__}: {exc}"
                    c.out = self.backend.gemm(c.a, c.b)
                    self.calls += 1
                    continue
                if len(c.vals) != len(c.reads):
                    raise RuntimeError(f"black box returned {len(c.vals)} cells for {len(c.reads)} reads")
            else:
                a, b = c.a, c.b
                out = self.backend.gemm(a, b)
                if out.shape != (a.shape[0], b.shape[1]):
                    raise RuntimeError(f"black box returned shape {out.shape} for {a.shape}x{b.shape}")
                c.out = out
            self.calls += 1

    def classify(self, values: list[float]) -> list[int]:
        out = []
        for v in values:
            if v == self.mag.r:
                out.append(SURVIVES)
            elif v == 0.0:
                out.append(ABSORBED)
            elif abs(v) >= self.mag.L / 4:
                out.append(BIG)
            else:
                out.append(OTHER)
        return out

    def triples(self, walk: str, triples: list[tuple[int, int, int]]) -> list[int]:
        """Run (r, +L, -L) placements not seen before; return the classes of all of them."""
        todo = list(dict.fromkeys(t for t in triples if t not in self.seen))
        if todo:
            pls = [lr_placement(self.mag, r, p, q, tag=(walk, r, p, q)) for r, p, q in todo]
            calls = self.packer.pack(pls)
            self.run_calls(calls)
            order: list[tuple[int, int, int]] = []
            got: list[int] = []
            for c in calls:  # the packer may reorder placements: read them back by their tags
                got += self.classify(read(c))
                order += [(int(pl.tag[1]), int(pl.tag[2]), int(pl.tag[3])) for pl in c.placements]
            for t, g in zip(order, got, strict=True):
                self.seen[t] = g
            self.records.append(WalkRecord(walk, tuple(order), tuple(got), len(calls)))
        return [self.seen[t] for t in triples]

    def summed(self, xs: list[int]) -> list[bool]:
        pls = [Placement(((x, 1.0, 1.0),), tag=("summed", x)) for x in xs]
        calls = self.packer.pack(pls)
        self.run_calls(calls)
        got: dict[int, bool] = {}
        for c in calls:
            for pl, v in zip(c.placements, read(c), strict=True):
                got[int(pl.tag[1])] = v != 0.0
        self.records.append(
            WalkRecord("summed", tuple((x, -1, -1) for x in xs), tuple(int(got[x]) for x in xs), len(calls))
        )
        return [got[x] for x in xs]

    def values(self, walk: str, placements: list[Placement]) -> tuple[list[Call], list[int]]:
        """Run arbitrary placements; returns the calls (inputs + outputs) and the output bits."""
        calls = self.packer.pack(placements)
        self.run_calls(calls)
        bits: list[int] = []
        for c in calls:
            bits += read_bits(c)
        self.records.append(WalkRecord(walk, tuple((i, -1, -1) for i in range(len(placements))), tuple(bits), len(calls)))
        return calls, bits


def group_start(z: int) -> tuple[int, int, int]:
    return (z, z - 2, z - 1)


def rn_start(b: int) -> tuple[int, int, int]:
    return (b - 1, b, b + 1)


def dropped_tail(s: Session, keff_hint: int | None = None) -> int:
    """Number of trailing elements never summed, by a multi-point search (summed is a prefix)."""
    k = s.k
    if s.summed([k - 1])[0]:
        return 0
    lo, hi = 0, k - 1  # lo summed (assumed: x = 0 always is), hi not
    cap = max(1, s.packer.slots)
    while hi - lo > 1:
        pts = sorted(set(np.linspace(lo, hi, num=min(cap, hi - lo - 1) + 2, dtype=np.int64)[1:-1].tolist()))
        if keff_hint is not None and lo < keff_hint < hi and keff_hint not in pts:
            pts = sorted(set(pts[: max(0, cap - 2)] + [keff_hint - 1, keff_hint]))
        got = s.summed(pts)
        for x, ok in zip(pts, got, strict=True):
            if ok:
                lo = max(lo, x)
        for x, ok in zip(pts, got, strict=True):
            if not ok and x > lo:
                hi = min(hi, x)
    return k - hi
