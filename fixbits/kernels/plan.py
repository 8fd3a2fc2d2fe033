"""Host-side plans: a GEMMDesc and K turned into the integer tables a kernel indexes.

Why a separate module: the nest of ``k_cuts`` is walked once on the host (pure Python, CPU
testable), and the Triton kernels only read ``[start, stop)`` tables. The kernels never
re-derive a cut, so the contract in fixbits/desc.py lives in one place on this side.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fixbits.desc import GEMMDesc, KCut

TENSOR_CORE_FAMILIES: tuple[str, ...] = ("single_pass", "per_mma", "splitk", "splitk_per_mma")
SCALAR_FAMILIES: tuple[str, ...] = ("scalar_chain", "gemv_contiguous", "chained_chunks", "gemv_lane_tree")


class UnsupportedDesc(NotImplementedError):
    """The descriptor is valid but no fixbits kernel realises it; the message says which field."""


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class TensorCorePlan:
    """Level-0 parts (each a list of innermost contiguous runs) of one tensor-core GEMM.

    ``part_runs[p]`` is a half-open index range into ``runs``: the innermost chains of part p,
    in order. With no inner level each part holds exactly one run (or none when empty).
    """

    k: int
    runs: tuple[tuple[int, int], ...]
    part_runs: tuple[tuple[int, int], ...]
    has_inner: bool

    @property
    def n_parts(self) -> int:
        return len(self.part_runs)

    def run_align(self, step: int, cap: int = 64) -> int:
        """The largest power of two (at most ``cap``) dividing every run bound and the K step:
        a kernel told so (tl.multiple_of) keeps its K-contiguous operand on vectorised,
        pipelined loads, which a start it must assume odd would turn into scalar ld.global
        (the H200 run 8b's split-K parts: 0.34x cuBLAS). Only codegen changes, never the sum."""
        g = step
        for lo, hi in self.runs:
            g = math.gcd(g, math.gcd(lo, hi))
        g = g or cap
        return min(cap, g & -g)

    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(runs int32 [R, 2], part offsets int32 [P + 1]) for the kernel."""
        runs = np.asarray(self.runs if self.runs else [(0, 0)], dtype=np.int32).reshape(-1, 2)
        offs = np.asarray([lo for lo, _ in self.part_runs] + [self.part_runs[-1][1]], dtype=np.int32)
        return runs, offs


def _single_run(part: list[tuple[int, int]], where: str) -> tuple[int, int] | None:
    if not part:
        return None
    if len(part) != 1:
        raise UnsupportedDesc(f"{where}: tensor-core kernels need contiguous parts, got runs {part[:3]}...")
    return part[0]


def reduce_1block_at_level0(desc: GEMMDesc) -> bool:
    """Whether level 0 merges by cuBLAS's reduce_1Block order, which only the workspace GEMV's
    merge kernel realises; that merge anywhere else (an inner level, a tensor-core nest) has no
    kernel and raises here, the one place the rule is written."""
    at = [i for i, c in enumerate(desc.k_cuts) if c.merge == "reduce_1block"]
    if not at:
        return False
    if at != [0] or desc.instruction != "fma":
        raise UnsupportedDesc("merge=reduce_1block: realised at level 0 of a scalar (fma) nest only, by the "
                              "workspace GEMV's merge kernel")  # fmt: skip
    return True


@functools.lru_cache(maxsize=512)  # per call it would be Python work per K element (a steady-state cost)
def tensor_core_plan(desc: GEMMDesc, k: int) -> TensorCorePlan:
    """Cut [0, k) per ``desc.k_cuts`` for the tensor-core families (at most two contiguous levels)."""
    desc = desc.at_k(k)
    cuts = desc.k_cuts
    if reduce_1block_at_level0(desc):
        raise UnsupportedDesc("merge=reduce_1block: the workspace GEMV realises it, not the tensor-core kernels")
    if len(cuts) > 2:
        raise UnsupportedDesc(f"k_cuts: tensor-core kernels realise at most 2 levels, got {len(cuts)}")
    for lvl, c in enumerate(cuts):
        if c.layout != "contiguous":
            raise UnsupportedDesc(
                f"k_cuts[{lvl}].layout={c.layout}: tensor-core kernels realise contiguous cuts only"
            )
        if c.merge != "chain" and lvl > 0:
            raise UnsupportedDesc(
                f"k_cuts[{lvl}].merge={c.merge}: tensor-core kernels merge inner parts by chain only"
            )
    level0 = cuts[0].parts(k) if cuts else [[(0, k)] if k else []]
    if cuts and cuts[0].merge != "chain" and (len(level0) < 2 or len(level0) & (len(level0) - 1)):
        raise UnsupportedDesc(
            f"k_cuts[0].merge={cuts[0].merge} over {len(level0)} parts: a butterfly needs a power of two"
        )
    runs: list[tuple[int, int]] = []
    part_runs: list[tuple[int, int]] = []
    for p, part in enumerate(level0):
        run = _single_run(part, f"k_cuts[0] part {p}")
        lo = len(runs)
        if run is not None:
            if len(cuts) == 2:
                s, e = run
                for sub in cuts[1].parts(e - s):
                    r = _single_run(sub, f"k_cuts[1] of part {p}")
                    if r is not None:
                        runs.append((s + r[0], s + r[1]))
            else:
                runs.append(run)
        part_runs.append((lo, len(runs)))
    return TensorCorePlan(k=k, runs=tuple(runs), part_runs=tuple(part_runs), has_inner=len(cuts) == 2)


@dataclass(frozen=True)
class ScalarNest:
    """The fma nest as a dense table: leaves are innermost chains, in nest order.

    ``counts[l]`` is level l's part count per parent, padded to a power of two (padded parts
    are empty, so they hold +0, which a chain merge absorbs exactly and a butterfly never
    meets because butterfly counts are powers of two already). ``index[leaf, t]`` is the
    absolute k of the t-th product of that leaf, or -1 past its end.
    """

    k: int
    counts: tuple[int, ...]
    merges: tuple[str, ...]
    index: np.ndarray

    @property
    def n_leaves(self) -> int:
        return int(self.index.shape[0])

    @property
    def length(self) -> int:
        return int(self.index.shape[1])


def _cut_elements(cut: KCut, elems: list[int]) -> list[list[int]]:
    out = []
    for part in cut.parts(len(elems)):
        out.append([elems[i] for s, e in part for i in range(s, e)])
    return out


@functools.lru_cache(maxsize=256)  # a Python loop over every K element: once per (desc, k), not per call
def scalar_nest(desc: GEMMDesc, k: int, *, levels_from: int = 0) -> ScalarNest:
    """Flatten ``desc.k_cuts[levels_from:]`` over [0, k) into a leaf table (see ScalarNest)."""
    desc = desc.at_k(k)
    cuts = desc.k_cuts[levels_from:]
    reduce_1block_at_level0(desc)  # raises where no kernel realises that merge
    groups: list[list[int]] = [list(range(k))]
    counts: list[int] = []
    for cut in cuts:
        nxt: list[list[list[int]]] = [_cut_elements(cut, g) for g in groups]
        width = _next_pow2(max(len(x) for x in nxt))
        # chain and reduce_1block take padded parts exactly: an empty part sums to +0, and adding
        # +0 changes no sum that started from +0 (such a sum is never -0)
        if cut.merge not in ("chain", "reduce_1block") and width != cut.count:
            raise UnsupportedDesc(f"butterfly merge over {cut.count} parts produced {width}")
        counts.append(width)
        groups = [x[i] if i < len(x) else [] for x in nxt for i in range(width)]
    length = max(1, max(len(g) for g in groups))
    index = np.full((len(groups), length), -1, dtype=np.int32)
    for i, g in enumerate(groups):
        index[i, : len(g)] = g
    index.flags.writeable = False  # shared by every caller through the cache
    return ScalarNest(k=k, counts=tuple(counts), merges=tuple(c.merge for c in cuts), index=index)


def scalar_nest_parts(desc: GEMMDesc, k: int) -> list[list[int]]:
    """Level-0 parts as element lists (the workspace GEMV gives each its own program)."""
    desc = desc.at_k(k)
    if not desc.k_cuts:
        return [list(range(k))]
    return _cut_elements(desc.k_cuts[0], list(range(k)))
