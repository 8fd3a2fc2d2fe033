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
    """One black-box GEMM: its sparse inputs, and where each placement's answer will be read.

    The inputs are kept as (row, col, value) triples: a probe call is almost all zeros, so a
    GPU backend builds it in device memory (zeros + index_put) and returns only the read cells,
    whatever the shape. ``a`` / ``b`` densify on the host (emulator backends, small shapes);
    ``a_rows`` / ``b_cols`` densify only the rows or columns an emulator check needs.
    """

    m: int
    n: int
    k: int
    in_dtype: str
    a_nz: tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, cols (K positions), values of A
    b_nz: tuple[np.ndarray, np.ndarray, np.ndarray]  # rows (K positions), cols, values of B
    reads: list[tuple[int, int]]  # (row, col) of each placement, in order
    placements: list[Placement]
    out: np.ndarray | None = None  # the whole output (host backends)
    vals: np.ndarray | None = None  # the output at ``reads`` only (sparse backends)

    def _dense(self, shape: tuple[int, int], nz: tuple[np.ndarray, np.ndarray, np.ndarray],
               rows: list[int] | None = None, cols: list[int] | None = None) -> np.ndarray:
        from fixbits.numerics.formats import np_dtype

        i, j, v = nz
        if rows is not None:
            pos = {r: x for x, r in enumerate(rows)}
            sel = np.isin(i, rows)
            i, j, v = np.array([pos[int(r)] for r in i[sel]], dtype=np.int64), j[sel], v[sel]
            shape = (len(rows), shape[1])
        if cols is not None:
            pos = {c: x for x, c in enumerate(cols)}
            sel = np.isin(j, cols)
            i, j, v = i[sel], np.array([pos[int(c)] for c in j[sel]], dtype=np.int64), v[sel]
            shape = (shape[0], len(cols))
        out = np.zeros(shape, dtype=np.float32)
        np.add.at(out, (i, j), v)
        return out.astype(np_dtype(self.in_dtype))

    @property
    def a(self) -> np.ndarray:
        return self._dense((self.m, self.k), self.a_nz)

    @property
    def b(self) -> np.ndarray:
        return self._dense((self.k, self.n), self.b_nz)

    def a_rows(self, rows: list[int]) -> np.ndarray:
        return self._dense((self.m, self.k), self.a_nz, rows=rows)

    def b_cols(self, cols: list[int]) -> np.ndarray:
        return self._dense((self.k, self.n), self.b_nz, cols=cols)

    def nbytes(self) -> int:
        """Device memory one call needs (fp32 staging of A and B, their copies, fp32 C)."""
        return 6 * (self.m * self.k + self.k * self.n) + 4 * self.m * self.n


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
            si: list[int] = []  # shared operand entries: (vector, position, value)
            sp: list[int] = []
            sv: list[float] = []
            acc: dict[tuple[int, int], float] = {}  # varying operand: (slot, position) -> sum
            values: set[float] = set()
            for j, vec in enumerate(vectors):
                for pos, bval in vec.items():
                    si.append(j)
                    sp.append(pos)
                    sv.append(bval)
                    values.add(bval)
            reads = []
            for slot, (pl, j) in enumerate(pending):
                for pos, aval, _ in pl.terms:
                    acc[(slot, pos)] = float(np.float32(acc.get((slot, pos), 0.0) + aval))
                    values.add(aval)
                reads.append((slot, j) if self.slots_on_rows else (j, slot))
            vals = np.array(sorted(values), dtype=np.float64)
            bad = vals[vals.astype(dt).astype(np.float64) != vals]
            if bad.size:
                raise ValueError(f"placement value(s) {bad[:4].tolist()} not exact in {self.in_dtype}")
            vi = np.array([x[0] for x in acc], dtype=np.int64)
            vp = np.array([x[1] for x in acc], dtype=np.int64)
            vv = np.array(list(acc.values()), dtype=np.float32)
            shi, shp, shv = np.array(si, dtype=np.int64), np.array(sp, dtype=np.int64), np.array(sv, dtype=np.float32)
            if self.slots_on_rows:  # A rows are slots, B columns are scale vectors
                a_nz, b_nz = (vi, vp, vv), (shp, shi, shv)
            else:  # A rows are scale vectors, B columns are slots
                a_nz, b_nz = (shi, shp, shv), (vp, vi, vv)
            calls.append(Call(self.m, self.n, self.k, self.in_dtype, a_nz, b_nz, reads, [p for p, _ in pending]))
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


def _cells(call: Call) -> np.ndarray:
    """The output at the call's reads, from whichever form the backend filled in."""
    if call.vals is not None:
        return np.asarray(call.vals)
    assert call.out is not None
    out = np.asarray(call.out)
    ii = np.array([i for i, _ in call.reads], dtype=np.int64)
    jj = np.array([j for _, j in call.reads], dtype=np.int64)
    return out[ii, jj]


def read(call: Call) -> list[float]:
    """Each placement's output as a float (the call must have run)."""
    return [float(x) for x in _cells(call).astype(np.float64)]


def read_bits(call: Call) -> list[int]:
    from fixbits.numerics.formats import bits

    return [int(x) for x in bits(np.ascontiguousarray(_cells(call)))]
