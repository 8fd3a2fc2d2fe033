"""The evaluation tree a GEMMDesc implies on one K, read straight from desc.py's docstring.

Two uses. ``addresses`` places every element of K in the tree (which part at each cut level,
which promotion segment, which instruction group), which is all the ±L / r placements can
see: ``predict`` says from it alone whether r survives a placement, with no arithmetic, so
the prober can test thousands of candidate descriptors against its evidence cheaply.
``canonical_tree`` is the tree itself with the no-op steps folded away (an empty part, an
add of +0, a round of an fp32 value to fp32, mma vs wgmma where both are the same block):
two descriptors with equal canonical trees on K owe each other the same bits at that K,
which is the canonical form the prober returns when several descriptors coincide there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from fixbits.desc import GEMMDesc, reduce_1block_fold

# the kinds of tree level an address walks through, root first
CHAIN = "chain"  # parts merged in order from +0 (RN adds)
UP = "butterfly_up"
DOWN = "butterfly_down"
BLOCK = "block"  # instruction groups folded into a carried accumulator (one node per group)
R1B = "reduce_1block"  # cuBLAS's reduce_1Block_kernel<float, 128, 7> over the parts (fixbits.desc)


@dataclass(frozen=True)
class Addresses:
    """Where each element of [0, K) sits: ``index[x, l]`` at level ``kinds[l]`` (-1: never summed)."""

    k: int
    kinds: tuple[str, ...]
    counts: tuple[int, ...]  # lanes of a butterfly level, parts of a reduce_1block level (0 elsewhere)
    index: np.ndarray  # (K, levels) int64

    @property
    def summed(self) -> np.ndarray:
        return self.index[:, 0] >= 0 if self.index.shape[1] else np.ones(self.k, dtype=bool)


def _groups(length: int, desc: GEMMDesc) -> np.ndarray:
    """Instruction-group index of each element of one innermost part (residue turn first/last)."""
    ik = desc.instruction_k
    j = np.arange(length, dtype=np.int64)
    rem = length % desc.k_loop_step
    if desc.residue == "first" and rem:
        first = -(-rem // ik)
        return np.where(j < rem, j // ik, first + (j - rem) // ik)
    return j // ik


def _cut_level(cut: Any, loc: np.ndarray, plen: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(part index, position inside the part, part length) of each element after one cut;
    part index -1 marks an element the cut never sums (tail_dropped)."""
    part = np.full(loc.shape, -1, dtype=np.int64)
    new_loc = np.zeros_like(loc)
    new_len = np.zeros_like(loc)
    if cut.layout == "strided":
        t, c = cut.span, cut.count
        tile = loc // t
        part = tile % c
        new_loc = (tile // c) * t + loc % t
        ntiles = -(-plen // t)
        full_rounds, extra = ntiles // c, ntiles % c
        count_tiles = full_rounds + (part < extra)
        last_tile_lane = (ntiles - 1) % c
        short = np.where((plen % t != 0) & (part == last_tile_lane), t - plen % t, 0)
        new_len = count_tiles * t - short
        return part, new_loc, new_len
    if cut.span is not None:
        s = cut.span
        part = loc // s
        return part, loc % s, np.minimum(s, plen - part * s)
    for n in np.unique(plen):
        sel = plen == n
        runs = cut.parts(int(n))
        starts = np.array([r[0][0] if r else int(n) for r in runs], dtype=np.int64)
        stops = np.array([r[0][1] if r else int(n) for r in runs], dtype=np.int64)
        x = loc[sel]
        p = np.searchsorted(starts, x, side="right") - 1
        # among parts with equal starts (empty ones) take the non-empty one
        p = np.clip(p, 0, len(starts) - 1)
        ok = (x >= starts[p]) & (x < stops[p])
        part[sel] = np.where(ok, p, -1)
        new_loc[sel] = np.where(ok, x - starts[p], 0)
        new_len[sel] = np.where(ok, stops[p] - starts[p], 0)
    return part, new_loc, new_len


def addresses(desc: GEMMDesc, k: int) -> Addresses:
    """Address of every element of K under ``desc`` (see the module docstring)."""
    desc = desc.at_k(k)
    kinds: list[str] = [c.merge for c in desc.k_cuts]
    counts: list[int] = [(c.count or 0) if c.merge != "chain" else 0 for c in desc.k_cuts]  # reduce_1block: parts
    promo = not desc.use_fast_accum
    if promo:
        kinds.append(CHAIN)
        counts.append(0)
    kinds.append(BLOCK)
    counts.append(0)
    index = np.full((k, len(kinds)), -1, dtype=np.int64)
    alive = np.arange(k, dtype=np.int64)
    loc = alive.copy()
    plen = np.full(k, k, dtype=np.int64)
    for lv, cut in enumerate(desc.k_cuts):
        part, loc, plen = _cut_level(cut, loc, plen)
        keep = part >= 0
        alive, loc, plen, part = alive[keep], loc[keep], plen[keep], part[keep]
        index[alive, lv] = part
    ik = desc.instruction_k
    rem = plen % desc.k_loop_step
    if desc.residue == "first":
        g = np.where(loc < rem, loc // ik, -(-rem // ik) + (loc - rem) // ik)
    else:
        g = loc // ik
    if promo:
        assert desc.promotion_interval is not None
        index[alive, len(desc.k_cuts)] = g // desc.promotion_interval
    index[alive, len(kinds) - 1] = g
    return Addresses(k=k, kinds=tuple(kinds), counts=tuple(counts), index=index)


def predict_many(ad: Addresses, r: np.ndarray, plus: np.ndarray, minus: np.ndarray) -> np.ndarray:
    """``predict`` for arrays of placements at once: 0 absorbed ('z'), 1 survives ('r'), 2 'big'."""
    idx = ad.index
    ir, il, im = idx[r], idx[plus], idx[minus]
    sr, sp, sm = ir[:, 0] >= 0, il[:, 0] >= 0, im[:, 0] >= 0
    out = np.zeros(len(r), dtype=np.int8)
    decided = np.zeros(len(r), dtype=bool)
    big = sp != sm
    out[big] = 2
    decided |= big
    nopair = ~decided & ~sp
    out[nopair] = sr[nopair].astype(np.int8)
    decided |= nopair
    nor = ~decided & ~sr
    decided |= nor  # out stays 0
    for lv, kind in enumerate(ad.kinds):
        a, b, c = ir[:, lv], il[:, lv], im[:, lv]
        here = ~decided & ~((a == b) & (b == c))
        if not here.any():
            continue
        if kind == BLOCK or kind == CHAIN:
            same_pair = b == c
            if kind == BLOCK:
                surv = np.maximum(b, c) < a
            else:
                surv = same_pair | (np.maximum(b, c) < a)
        elif kind == R1B:
            meet = r1b_meet(ad.counts[lv])
            same_pair = b == c
            surv = same_pair | (meet[b, c] < np.maximum(meet[a, b], meet[a, c]))
        else:
            same_pair = b == c
            cnt = ad.counts[lv]
            j_pair = _join_arr(kind, cnt, b, c)
            j_r = np.maximum(_join_arr(kind, cnt, a, b), _join_arr(kind, cnt, a, c))
            surv = same_pair | (j_pair < j_r)
        out[here] = surv[here].astype(np.int8)
        decided |= here
    return out


@functools.lru_cache(maxsize=64)
def r1b_meet(count: int) -> np.ndarray:
    """(count, count) matrix: the node at which parts a and b first meet in reduce_1Block's tree
    (-1 on the diagonal), numbered in evaluation order, so an ancestor always has the larger
    number: comparing two meets on one leaf's path to the root says which is lower.

    The tree is fixbits.desc.reduce_1block_fold's; an add with an empty side (+0) makes no node."""
    meet = np.full((count, count), -1, dtype=np.int64)
    node = 0

    def add(x: list[int], y: list[int]) -> list[int]:
        nonlocal node
        if x and y:
            xi, yi = np.array(x), np.array(y)
            meet[np.ix_(xi, yi)] = node
            meet[np.ix_(yi, xi)] = node
            node += 1
        return x + y

    reduce_1block_fold([[i] for i in range(count)], add, [])
    return meet


def _join_arr(kind: str, count: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = a ^ b
    res = np.full(x.shape, -1, dtype=np.int64)
    nz = x != 0
    if kind == UP:
        res[nz] = np.floor(np.log2(x[nz])).astype(np.int64)
    else:
        low = np.floor(np.log2(x[nz] & -x[nz])).astype(np.int64)
        res[nz] = (int(count).bit_length() - 2) - low
    return res


def _join(kind: str, count: int, a: int, b: int) -> int:
    """Stage at which lanes a and b of a butterfly have been folded together."""
    x = a ^ b
    if x == 0:
        return -1
    if kind == UP:
        return x.bit_length() - 1
    low = (x & -x).bit_length() - 1
    return count.bit_length() - 2 - low


def predict(ad: Addresses, r: int, plus: int, minus: int) -> str:
    """'r' if r survives (+L and -L cancel away from it), 'z' if absorbed, 'big' if an L is lost.

    The rule: r survives exactly when the pair meets (and cancels) strictly below the node
    where r first meets either of them; a block folds its whole group and its incoming
    accumulator in one truncated sum, so r meeting the pair inside one block is absorbed.
    """
    idx = ad.index
    sr, sp, sm = idx[r, 0] >= 0, idx[plus, 0] >= 0, idx[minus, 0] >= 0
    if ad.index.shape[1] == 0:
        sr = sp = sm = True
    if sp != sm:
        return "big"
    if not sp:  # pair never summed
        return "r" if sr else "z"
    if not sr:
        return "z"
    for lv, kind in enumerate(ad.kinds):
        ir, il, im = int(idx[r, lv]), int(idx[plus, lv]), int(idx[minus, lv])
        if ir == il == im:
            continue
        if kind == BLOCK:
            return "r" if max(il, im) < ir else "z"
        if il == im:
            return "r"
        if kind == CHAIN:
            return "r" if max(il, im) < ir else "z"
        if kind == R1B:
            meet = r1b_meet(ad.counts[lv])
            return "r" if meet[il, im] < max(meet[ir, il], meet[ir, im]) else "z"
        c = ad.counts[lv]
        pair = _join(kind, c, il, im)
        return "r" if pair < max(_join(kind, c, ir, il), _join(kind, c, ir, im)) else "z"
    return "z"


# -- canonical tree ------------------------------------------------------------------------

_EMPTY = ("empty",)


def _instruction_label(desc: GEMMDesc) -> tuple[str, int]:
    """mma and wgmma/tcgen05 at the same k are one block model (NUMERICS.md): one label."""
    if desc.instruction == "fma":
        return ("fma", 1)
    return ("tc", desc.instruction_k)


def _round(dt: str, node: Any) -> Any:
    if node is _EMPTY or dt == "fp32":
        return node
    if isinstance(node, tuple) and node and node[0] == "round" and node[1] == dt:
        return node
    return ("round", dt, node)


def _add(dt: str, a: Any, b: Any) -> Any:
    if a is _EMPTY:
        return _round(dt, b)
    if b is _EMPTY:
        return _round(dt, a)
    return _round(dt, ("add", a, b))


def _merge(kind: str, parts: list[Any], dt: str) -> Any:
    if kind == "chain":
        acc: Any = _EMPTY
        for p in parts:
            acc = _add(dt, acc, p)
        return acc
    if kind == R1B:  # the empty threads' +0 folded away by _add
        return reduce_1block_fold(parts, lambda a, b: _add(dt, a, b), _EMPTY)
    lanes = list(parts)
    n = len(lanes)
    offsets = [1 << i for i in range(n.bit_length() - 1)]
    if kind == "butterfly_down":
        offsets.reverse()
    for off in offsets:
        # every lane holds the same value after each stage (the add commutes): keep lane order
        lanes = [_add(dt, lanes[i], lanes[i ^ off]) if not (i & off) else _add(dt, lanes[i ^ off], lanes[i])
                 for i in range(n)]
    return lanes[0] if lanes else _EMPTY


def canonical_tree(desc: GEMMDesc, k: int) -> Any:
    """The evaluation tree of one output on K, no-ops folded (see the module docstring)."""
    desc = desc.at_k(k)
    label = _instruction_label(desc)

    def chain(elems: list[int]) -> Any:
        g = _groups(len(elems), desc)
        groups: list[tuple[int, ...]] = []
        for gi in range(int(g.max()) + 1 if len(elems) else 0):
            groups.append(tuple(int(elems[j]) for j in np.nonzero(g == gi)[0]))
        segs: list[list[tuple[int, ...]]]
        if desc.use_fast_accum:
            segs = [groups]
        else:
            p = desc.promotion_interval or 1
            segs = [groups[i : i + p] for i in range(0, len(groups), p)]
        acc: Any = _EMPTY
        for seg in segs:
            temp: Any = _EMPTY
            for grp in seg:
                temp = ("blk", label, temp, grp)
            acc = _add("fp32", acc, temp)
        return acc

    def walk(elems: list[int], level: int) -> Any:
        if level == len(desc.k_cuts):
            return chain(elems) if elems else _EMPTY
        cut = desc.k_cuts[level]
        parts = []
        for runs in cut.parts(len(elems)):
            sub = [elems[j] for s, e in runs for j in range(s, e)]
            node = walk(sub, level + 1)
            if level == 0:
                node = _round(desc.partial_dtype, node)
            parts.append(node)
        dt = desc.merge_dtype if level == 0 else "fp32"
        return _merge(cut.merge, parts, dt)

    return _output(desc.out_dtype, walk(list(range(k)), 0))


def _output(out: str, tree: Any) -> Any:
    """Final rounding to the output type. round_o(fp32(a + b)) == round_o(a + b) when a and b
    are both o-values (fp16 / bf16): the exact sum of two 11-bit (8-bit) significands never
    sits within half an fp32 ulp of an o tie without being on it, so the fp32 step is a no-op."""
    if (out != "fp32" and isinstance(tree, tuple) and tree and tree[0] == "add"
            and all(isinstance(x, tuple) and x[:2] == ("round", out) for x in tree[1:])):
        return ("round", out, tree)
    return _round(out, tree)


def function_key(desc: GEMMDesc) -> GEMMDesc:
    """Equal for two descriptors that give the same bits at every K, by structure: with the
    residue turn last, the K-loop step places nothing (every chain is cut into instruction
    groups from its start, the short group last, whatever the step), so it is set to
    instruction_k; with no K cut there are no parts to round or merge, so partial_dtype and
    merge_dtype are set to the accumulator's. A key may split descriptors that are one
    function, never merge two that are not."""
    if desc.residue == "last" and desc.k_loop_step != desc.instruction_k:
        desc = desc.replace(k_loop_step=desc.instruction_k)
    return without_part_dtypes(desc)


def without_part_dtypes(desc: GEMMDesc) -> GEMMDesc:
    """``desc`` with partial_dtype and merge_dtype set to acc_dtype when it has no K cut: the
    tree (canonical_tree) and the emulator read them only where a cut's parts are rounded and
    merged, so a single-pass descriptor is one function whatever they say."""
    if desc.k_cuts or (desc.partial_dtype == desc.acc_dtype and desc.merge_dtype == desc.acc_dtype):
        return desc
    return desc.replace(partial_dtype=desc.acc_dtype, merge_dtype=desc.acc_dtype)


def equivalent_on(a: GEMMDesc, b: GEMMDesc, k: int) -> bool:
    """True when a and b provably give the same bits at this K (equal canonical trees, dtypes)."""
    if (a.arch, a.in_dtype, a.out_dtype, a.acc_dtype, a.epilogue) != (b.arch, b.in_dtype, b.out_dtype, b.acc_dtype, b.epilogue):
        return False
    return bool(canonical_tree(a, k) == canonical_tree(b, k))
