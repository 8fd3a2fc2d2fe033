"""The descriptors a black box might be, enumerated from what the first walks saw.

Generation is broad on purpose (every family of desc.py, every count, granule and span rule
that fits the observed boundaries); the structural filter of fixbits.probe.plan is cheap, so
the prober can afford to start from thousands and keep only those that explain every walk.
Dtype pairs (partial, merge) are left at fp32 here: ±L / r cannot see them, the value stage
of the prober settles them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fixbits.desc import _INSTRUCTION_K, GEMMDesc, KCut

GRANULES = (1, 8, 16, 32, 64, 128, 256)
RULES = ("ceil", "floor", "tail_dropped")
# split-K spans that round to a coarser granule when it divides K (KCut.aligned_granule)
ALIGNED_GRANULES = (64,)
STEPS = (32, 64, 128, 256)
PROMOTIONS = (1, 2, 4, 8, 16)
POW2 = (2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Observed:
    """What the window walks established (positions are absolute K indices)."""

    k: int
    keff: int  # elements summed (K minus a dropped tail)
    rn_true: tuple[int, ...]  # b with rn_start(b) surviving
    rn_seen: tuple[int, ...]  # every b tested
    group_true: tuple[int, ...]
    group_seen: tuple[int, ...]
    scalar: bool  # group_start survives almost everywhere: a scalar fma chain


def instruction_for(arch: str, ik: int, in_dtype: str) -> str:
    if ik == 1:
        return "fma"
    if arch == "sm_90":
        return "mma" if ik == 8 else "wgmma"
    if arch in ("sm_100", "sm_103"):
        return "mma" if ik == 8 else "tcgen05"
    return "mma"


def tc_widths(arch: str, in_dtype: str) -> list[int]:
    fam = "fp8" if in_dtype.startswith("fp8") else "16bit"
    ks: set[int] = set()
    for (instr, f), widths in _INSTRUCTION_K.items():
        if f != fam or instr == "fma":
            continue
        if instr == "wgmma" and arch != "sm_90":
            continue
        if instr == "tcgen05" and arch not in ("sm_100", "sm_103"):
            continue
        ks.update(widths)
    return sorted(ks, reverse=True)


def spacings(pos: Iterable[int]) -> list[int]:
    p = sorted(set(pos))
    d = sorted({b - a for a, b in zip(p, p[1:], strict=False) if b > a})
    return d


def count_cuts(k: int, counts: Iterable[int], merges: tuple[str, ...] = ("chain",)) -> list[KCut]:
    """One contiguous count cut per distinct way of cutting K (granule, rule folded away)."""
    out: list[KCut] = []
    seen: set[tuple[object, ...]] = set()
    for c in sorted(set(counts)):
        if c < 2:
            continue
        for merge in merges:
            if merge != "chain" and c & (c - 1):
                continue
            for rule in RULES:
                for g in GRANULES:
                    cut = KCut("contiguous", count=c, granule=g, span_rule=rule, merge=merge)
                    key = (merge, tuple(tuple(r) for r in cut.parts(k)))
                    if key in seen:
                        continue
                    seen.add(key)
                    out.append(cut)
    return out


def _boundaries_ok(cut: KCut, obs: Observed) -> bool:
    """Cheap prefilter: the cut's part starts that rn_start tested must have survived, and the
    summed prefix must end where the dropped tail begins."""
    if cut.layout != "contiguous":
        return True
    parts = cut.parts(obs.k)
    stops = [r[0][1] for r in parts if r]
    if not stops or max(stops) != obs.keff:
        return False
    seen = set(obs.rn_seen)
    true = set(obs.rn_true)
    for r in parts:
        if not r:
            continue
        s, e = r[0]
        if s > 0 and e - s >= 2 and s in seen and s not in true:
            return False
    return True


def _counts(obs: Observed, hint: int | None) -> list[int]:
    if hint is not None:
        return [hint]
    cs = set(range(2, 17))
    firsts = [b for b in obs.rn_true if b > 1]
    for u in firsts[:3]:
        for kk in (obs.k, obs.keff):
            cs.update({kk // u, -(-kk // u), round(kk / u)})
    return sorted(c for c in cs if 2 <= c <= 512)


def generate(arch: str, in_dtype: str, out_dtype: str, obs: Observed, hints: dict[str, object]) -> Iterator[GEMMDesc]:
    """Every candidate descriptor (partial/merge dtypes fp32) the observations allow."""
    hint_c = hints.get("splitk_num")
    split_hint = int(hint_c) if isinstance(hint_c, int) and hint_c > 1 else None
    instr_hint = hints.get("instruction")
    scalar = obs.scalar if instr_hint is None else instr_hint == "fma"
    base = {"arch": arch, "in_dtype": in_dtype, "out_dtype": out_dtype}
    k = obs.k
    dropped = obs.keff < k
    if not scalar:
        cuts: list[tuple[KCut, ...]] = []
        if not dropped and split_hint is None:
            cuts.append(())
        cands = count_cuts(k, _counts(obs, split_hint), ("chain", "butterfly_up", "butterfly_down"))
        cuts += [(c,) for c in cands if _boundaries_ok(c, obs)]
        # K tiles dealt to cooperating warpgroups inside one CTA, their accumulators added after
        for c in (2, 4):
            for t in (32, 64, 128, 256):
                if c * t <= k:
                    strided = KCut("strided", count=c, span=t)
                    if split_hint is None and not dropped:
                        cuts.append((strided,))
                    cuts += [(o, strided) for o in cands if o.merge == "chain" and _boundaries_ok(o, obs)][:8]
        if not dropped and split_hint is None:
            for s in spacings([0] + list(obs.rn_true))[:4]:
                if 1 < s < k:
                    cuts.append((KCut("contiguous", span=s),))
        fast_hint = hints.get("fast_accum")
        for ik in tc_widths(arch, in_dtype):
            instr = instruction_for(arch, ik, in_dtype)
            residues = [("last", 64 if 64 % ik == 0 else ik)]
            residues += [("first", s) for s in STEPS if s % ik == 0]
            promos: list[int | None] = [] if fast_hint is False else [None]
            if fast_hint is not True:
                extra = {d // ik for d in spacings([0] + list(obs.rn_true))[:3] if d % ik == 0 and d // ik > 0}
                promos += sorted(set(PROMOTIONS) | {p for p in extra if p <= 64})
            for cut in cuts:
                for res, step in residues:
                    for p in promos:
                        yield GEMMDesc(
                            instruction=instr, instruction_k=ik, k_loop_step=step, residue=res,
                            use_fast_accum=p is None, promotion_interval=p, k_cuts=cut, **base,  # type: ignore[arg-type]
                        )
        return
    # scalar path: lanes, slices, chunks
    tiles = sorted({d for d in spacings([0] + list(obs.rn_true))[:4] if d < k} | {1, 2, 4, 8})
    structures: list[tuple[KCut, ...]] = []
    if not dropped and split_hint is None:
        structures.append(())
    outer = count_cuts(k, _counts(obs, split_hint) if split_hint is not None else range(2, 5))
    if split_hint is None:
        structures += [(c,) for c in count_cuts(k, _counts(obs, None), ("chain", "butterfly_up", "butterfly_down"))
                       if _boundaries_ok(c, obs)]
        for t in tiles:
            for c in POW2:
                if c * t > 2 * k:
                    continue
                for merge in ("butterfly_up", "butterfly_down", "chain"):
                    structures.append((KCut("strided", count=c, span=t, merge=merge),))
        # block-wide GEMV: tiles dealt round-robin to warps x lanes, lanes folded by shuffles,
        # warps merged after: a strided cut over warps (tile = lanes*t) above a strided cut over lanes
        for lanes in (32, 16, 8):
            for t in tiles:
                for warps in (2, 4, 8, 16, 32):
                    if warps * lanes * t > 2 * k:
                        continue
                    for wmerge in ("chain", "butterfly_up", "butterfly_down"):
                        for lmerge in ("butterfly_up", "butterfly_down"):
                            structures.append((KCut("strided", count=warps, span=lanes * t, merge=wmerge),
                                               KCut("strided", count=lanes, span=t, merge=lmerge)))
        for c0 in range(2, 9):
            for s in tiles:
                if 1 < s < k // c0:
                    structures.append((KCut("contiguous", count=c0), KCut("contiguous", span=s)))
    for o in outer:
        if not _boundaries_ok(o, obs):
            continue
        structures.append((o,))
        for t in tiles:
            for c in POW2:
                if c * t > 2 * k // max(1, o.count or 1) + t:
                    continue
                for merge in ("butterfly_up", "butterfly_down"):
                    structures.append((o, KCut("strided", count=c, span=t, merge=merge)))
        for s in tiles:
            if s > 1:
                structures.append((o, KCut("contiguous", span=s)))
    if split_hint is not None:
        structures += workspace_dot(split_hint, k)
    for cut in structures:
        yield GEMMDesc(instruction="fma", instruction_k=1, k_loop_step=64, residue="last", k_cuts=cut, **base)  # type: ignore[arg-type]


def workspace_dot(parts: int, k: int) -> list[tuple[KCut, ...]]:
    """cuBLAS's workspace GEMV (dot_kernel then reduce_1Block): tiles of threads*V elements dealt
    round-robin to ``parts`` blocks, thread lanes strided by V inside a tile and folded by a
    butterfly, V lane chains per thread (V = 1, 2, 4: the load width), the block partials merged
    by reduce_1Block. Only with a SPLITK_NUM hint: the part count is not read off ±L / r alone."""
    out: list[tuple[KCut, ...]] = []
    for threads in (128, 256):
        for v in (1, 2, 4):
            if threads * v > 2 * k:
                continue
            for lmerge in ("butterfly_down", "butterfly_up"):
                cut = (KCut("strided", count=parts, span=threads * v, merge="reduce_1block"),
                       KCut("strided", count=threads, span=v, merge=lmerge))
                out.append(cut + ((KCut("strided", count=v, span=1, merge="chain"),) if v > 1 else ()))
    return out


def preference(desc: GEMMDesc, hints: dict[str, object]) -> tuple[object, ...]:
    """Sort key among descriptors equivalent on the probed K: the simplest reading first."""
    cut0 = desc.k_cuts[0] if desc.k_cuts else None
    rule_rank = {"ceil": 0, "floor": 1, "tail_dropped": 2}
    g_pref = hints.get("granule", 64)
    return (
        len(desc.k_cuts),
        0 if desc.use_fast_accum else 1,
        desc.promotion_interval or 0,
        0 if desc.residue == "last" else 1,
        0 if desc.k_loop_step == 64 else 1,
        desc.k_loop_step,
        rule_rank.get(cut0.span_rule, 3) if cut0 else 0,
        0 if cut0 is None or cut0.granule == g_pref else 1,
        -(cut0.granule if cut0 else 0),
        0 if desc.instruction in ("wgmma", "tcgen05", "fma") else 1,
        desc.to_json(),
    )


def log2(x: int) -> int:
    return int(math.log2(x))
