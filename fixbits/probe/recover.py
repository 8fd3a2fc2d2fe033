"""probe(): recover the GEMMDesc of one black-box GEMM at one shape (paper §4).

Order of work, each stage cheaper than the next:
1. Which trailing elements are summed at all (the split-K tail defect drops some).
2. Window walks: ``rn_start`` and ``group_start`` over the head of K (all of K when small).
3. Enumerate candidates (fixbits.probe.candidates) and keep those whose predicted ±L / r
   outcomes (fixbits.probe.plan, no arithmetic) match every outcome seen.
4. While candidates with different trees remain: pick the placements that split them most,
   run them (one call carries as many as the shape has rows or columns), filter again.
5. partial_dtype / merge_dtype: value placements that fp16 or bf16 cannot hold, judged by
   the emulator for each dtype pair.
6. Fresh random draws (ordinary and wide exponents): the emulator with each survivor against
   the black box's bytes on sampled outputs. One survivor (or one class of descriptors with
   equal canonical trees) is a result; none or several different ones are reported as such.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixbits.desc import GEMMDesc, KCut
from fixbits.probe import candidates as C
from fixbits.probe.placements import Call, Placement
from fixbits.probe.plan import addresses, canonical_tree, predict_many, without_part_dtypes
from fixbits.probe.walks import Session, WalkRecord, dropped_tail, group_start, rn_start

DTYPE_PAIRS = tuple(itertools.product(("fp32", "fp16", "bf16"), repeat=2))
_CANON_LIMIT = 1_100_000  # canonical trees are built for K up to this; beyond, equal predictions + bytes


@dataclass(frozen=True)
class ProbeResult:
    """What probe() found at one shape, and the evidence for it.

    status: 'recovered' (one descriptor, or one class proven bit-equal on this K),
    'ambiguous' (several non-equivalent descriptors explain everything seen: ``survivors``),
    'failed' (no candidate explains the black box; ``notes`` says at which stage).
    """

    m: int
    n: int
    k: int
    status: str
    desc: GEMMDesc | None
    survivors: tuple[GEMMDesc, ...]
    evidence: tuple[WalkRecord, ...]
    calls: int
    candidates: int
    eliminated: int
    dropped_tail: int
    draws_checked: int
    notes: tuple[str, ...] = ()
    alternatives: tuple[GEMMDesc, ...] = field(default=(), compare=False)

    def summary(self) -> str:
        d = self.desc.family if self.desc else "-"
        return (f"{self.m}x{self.n}x{self.k}: {self.status} {d} "
                f"{self.desc.short_hash if self.desc else ''} calls={self.calls} "
                f"candidates={self.candidates} eliminated={self.eliminated} survivors={len(self.survivors)}")


def _windows(k: int, slots: int, limit: int | None) -> list[int]:
    lim = limit if limit is not None else max(512, min(2048, 32 * slots))
    if k <= lim:
        return list(range(k))
    head = list(range(min(k, lim)))
    tail = list(range(max(0, k - 128), k))
    return sorted(set(head + tail))


def _read_cells(desc: GEMMDesc, call: Call) -> np.ndarray:
    """The emulator's bits at the cells a call reads (only those rows and columns emulated)."""
    from fixbits.emulate import emulate
    from fixbits.numerics.formats import bits

    rows = sorted({i for i, _ in call.reads})
    cols = sorted({j for _, j in call.reads})
    out = emulate(desc, call.a_rows(rows), call.b_cols(cols))
    ri = {r: x for x, r in enumerate(rows)}
    ci = {c: x for x, c in enumerate(cols)}
    u = bits(np.ascontiguousarray(out))
    return np.array([int(u[ri[i], ci[j]]) for i, j in call.reads], dtype=np.uint64)


def _class_key(desc: GEMMDesc, k: int) -> Any:
    return canonical_tree(desc, k) if k <= _CANON_LIMIT else desc.to_json()


class _Filter:
    """Candidates with their addresses, filtered against the session's outcomes."""

    def __init__(self, cands: list[GEMMDesc], k: int, seen: dict[tuple[int, int, int], int]) -> None:
        """Keep only the candidates that explain ``seen`` (addresses of the others are dropped at
        once: at deep K thousands of them would not fit in memory together)."""
        self.k = k
        self.items: list[tuple[GEMMDesc, Any]] = []
        t = np.array(list(seen.keys()), dtype=np.int64).reshape(-1, 3)
        obs = np.array(list(seen.values()), dtype=np.int8)
        for d in cands:
            ad = addresses(d, k)
            if len(t) == 0 or np.array_equal(predict_many(ad, t[:, 0], t[:, 1], t[:, 2]), obs):
                self.items.append((d, ad))

    def apply(self, seen: dict[tuple[int, int, int], int]) -> None:
        if not seen:
            return
        t = np.array(list(seen.keys()), dtype=np.int64)
        obs = np.array(list(seen.values()), dtype=np.int8)
        keep = []
        for d, ad in self.items:
            if np.array_equal(predict_many(ad, t[:, 0], t[:, 1], t[:, 2]), obs):
                keep.append((d, ad))
        self.items = keep

    def signatures(self, q: np.ndarray) -> dict[bytes, list[int]]:
        groups: dict[bytes, list[int]] = {}
        for i, (_, ad) in enumerate(self.items):
            sig = predict_many(ad, q[:, 0], q[:, 1], q[:, 2]).tobytes()
            groups.setdefault(sig, []).append(i)
        return groups


def _pool(f: _Filter, k: int, rng: np.random.Generator, size: int) -> np.ndarray:
    """Placements likely to split the candidates: around every candidate's unit starts, plus random."""
    pts: set[int] = set()
    for _, ad in f.items[:400]:
        idx = ad.index
        change = np.nonzero(np.any(idx[1:] != idx[:-1], axis=1))[0] + 1
        pts.update(change[:64].tolist())
        pts.update(change[-16:].tolist())
    pts_l = sorted(p for p in pts if 1 <= p < k - 1)
    trip: list[tuple[int, int, int]] = []
    for b in pts_l:
        trip.append(rn_start(b))
        if b >= 2:
            trip.append(group_start(b))
        if b + 1 < k:
            trip.append((0, b, b + 1) if b > 0 else (k - 1, b, b + 1))
    if pts_l:
        arr = np.array(pts_l)
        for _ in range(size // 2):
            a, b, c = rng.choice(arr, 3)
            if len({a, b, c}) == 3:
                trip.append((int(a), int(b), int(c)))
    for _ in range(size // 2):
        a, b, c = (int(x) for x in rng.integers(0, k, 3))
        if len({a, b, c}) == 3:
            trip.append((a, b, c))
        if k > 2:
            trip.append((a, 0, max(1, k - 1 - (b % 8))) if a not in (0, k - 1 - (b % 8)) and k - 1 - (b % 8) > 0 else (1, 0, 2))
    trip = [t for t in dict.fromkeys(trip) if len(set(t)) == 3 and all(0 <= x < k for x in t)]
    return np.array(trip, dtype=np.int64).reshape(-1, 3)


def _pairs_per_column(keys: np.ndarray) -> np.ndarray:
    """For each column, how many pairs of rows share a key (run lengths of the sorted column)."""
    srt = np.sort(keys, axis=0)
    c = srt.shape[0]
    new_run = np.ones_like(srt, dtype=bool)
    new_run[1:] = srt[1:] != srt[:-1]
    idx = np.arange(c)[:, None] * np.ones((1, srt.shape[1]), dtype=np.int64)
    start = np.maximum.accumulate(np.where(new_run, idx, 0), axis=0)
    return (idx - start).sum(axis=0)


def _choose(f: _Filter, q: np.ndarray, budget: int) -> list[tuple[int, int, int]]:
    """Greedy: placements that split the most candidate pairs apart."""
    preds = np.stack([predict_many(ad, q[:, 0], q[:, 1], q[:, 2]) for _, ad in f.items]).astype(np.int64)  # (C, Q)
    preds = np.unique(preds, axis=0)  # candidates no placement here can split count once
    keep = np.nonzero((preds != preds[:1]).any(axis=0))[0]  # placements that split nothing are dropped
    if len(keep) == 0:
        return []
    q, preds = q[keep], preds[:, keep]
    n = preds.shape[0]
    labels = np.zeros(n, dtype=np.int64)
    chosen: list[int] = []
    for _ in range(budget):
        old = int(_pairs_per_column(labels[:, None]).sum())
        if old == 0:
            break
        scores = old - _pairs_per_column(labels[:, None] * 4 + preds)
        best = int(np.argmax(scores))
        if scores[best] <= 0:
            break
        chosen.append(best)
        _, labels = np.unique(labels * 4 + preds[:, best], return_inverse=True)
    return [tuple(int(x) for x in q[j]) for j in chosen]  # type: ignore[misc]


def _value_placements(desc: GEMMDesc, k: int, s: Session) -> list[Placement]:
    """Sums that fp16 / bf16 partials or merges cannot carry, in two or three level-0 parts."""
    cut = desc.k_cuts[0]
    parts = [p for p in cut.parts(k) if p]
    if len(parts) < 2:
        return []

    def elems(runs: list[tuple[int, int]]) -> list[int]:
        out: list[int] = []
        for a, b in runs:
            out.extend(range(a, b))
            if len(out) >= 2:
                break
        return out

    p0, p1 = elems(parts[0]), elems(parts[1])
    p2 = elems(parts[2]) if len(parts) > 2 else []
    fp8 = desc.in_dtype.startswith("fp8")
    pls: list[Placement] = []

    def term(pos: int, v: float) -> tuple[int, float, float]:
        if fp8 and abs(v) < 2.0**-6:  # keep fp8 factors exact: v = a * 2^-3
            return (pos, v * 8.0, 0.125)
        return (pos, v, 1.0)

    for eps in (2.0**-12, 2.0**-9, 2.0**-4):
        if len(p0) < 2 or len(p1) < 2:
            break
        pls.append(Placement((term(p0[0], 1.0), term(p0[1], eps), term(p1[0], -1.0)), ("dt", eps, 1)))
        pls.append(Placement((term(p0[0], 1.0), term(p0[1], eps), term(p1[0], -1.0), term(p1[1], -eps)), ("dt", eps, 2)))
        pls.append(Placement((term(p0[0], 1.0), term(p1[0], eps)), ("dt", eps, 3)))
        if p2:
            pls.append(Placement((term(p0[0], 1.0), term(p1[0], eps), term(p2[0], -1.0)), ("dt", eps, 4)))
    big = 2.0**8 if not fp8 else 2.0**7
    if len(p0) >= 2 and len(p1) >= 1:
        pls.append(Placement(((p0[0], big, big if fp8 else 1.0), (p0[1], big, big if fp8 else 1.0), term(p1[0], 1.0)), ("dt", "big")))
    return pls


def _draw(shape: tuple[int, int], dtype: str, kind: str, seed: int) -> np.ndarray:
    from fixbits.inputs import draw

    return draw(shape, dtype, kind, seed)


def _draw_pair(m: int, n: int, k: int, dtype: str, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A and B of one host draw; a spike draw is an ordinary one with its pairs planted."""
    from fixbits.probe import spikes

    base = spikes.base_kind(kind)
    return spikes.finish(kind, _draw((m, k), dtype, base, seed).copy(), _draw((k, n), dtype, base, seed + 1).copy(),
                         seed, dtype)  # fmt: skip


def _sample(n: int, count: int, rng: np.random.Generator) -> list[int]:
    if n <= count:
        return list(range(n))
    pick = set(rng.choice(n, count - 2, replace=False).tolist()) | {0, n - 1}
    return sorted(pick)


def verify_draws(backend: Any, descs: list[GEMMDesc], m: int, n: int, k: int, *, seed: int, draws: int,
                 cells: int = 8, kinds: tuple[str, ...] = ("ordinary", "wide"),
                 tick: Callable[[], None] | None = None) -> tuple[list[bool], int]:
    """Each desc against the black box on ``draws`` fresh draws, their kinds taken in turn from
    ``kinds`` (sampled cells: outputs are independent, so emulating only the sampled rows and
    columns is exact there). A backend with ``draw_sampled`` draws on its device and returns
    only those cells. ``spikes.KIND`` plants ±L pairs into ordinary draws (narrow outputs).

    All draws are taken first and each desc is emulated on all of them in one pass
    (``emulate_draws``); descs that owe each other the same bits at this K (``draw_classes``)
    are emulated once. A desc passes only if its bits equal the black box's on every draw.
    ``tick`` runs before each emulation (a caller's time cap raises there, not after all of them)."""
    from fixbits.cublas.backend import cells_for

    in_dtype = descs[0].in_dtype
    rng = np.random.default_rng(seed)
    cells = cells_for(k, cells)
    sampled = getattr(backend, "draw_sampled", None)
    taken: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for i in range(draws):
        kind = kinds[i % len(kinds)]
        rows, cols = _sample(m, cells, rng), _sample(n, cells, rng)
        if sampled is not None:
            try:
                a_r, b_c, got = sampled(m, n, k, kind, seed * 1000 + 2 * i, rows, cols)
            except Exception as exc:  # a device-side failure: host draws, when the shape is small
                if type(exc).__name__ == "TooLarge" or m * k + k * n > 150_000_000:
                    raise
                sampled = None
        if sampled is None:
            a, b = _draw_pair(m, n, k, in_dtype, kind, seed * 1000 + 2 * i)
            got = backend.gemm(a, b)[np.ix_(rows, cols)]
            a_r, b_c = a[rows], b[:, cols]
        taken.append((a_r, b_c, got))
    ok = [True] * len(descs)
    if not taken:
        return ok, 0
    a3, b3, want = _stack_draws(taken)
    for members in draw_classes(descs, k):
        if tick is not None:
            tick()
        good = _matches(descs[members[0]], a3, b3, want)
        for j in members:
            ok[j] = good
    return ok, len(taken)


def draw_classes(descs: list[GEMMDesc], k: int) -> list[list[int]]:
    """Indices of ``descs`` grouped so that members of a group owe each other the same bits at
    K on any operands (one emulation serves the group). Order of first appearance is kept."""
    groups: dict[Any, list[int]] = {}
    try:
        for j, d in enumerate(descs):
            groups.setdefault(_draw_key(d, k, j), []).append(j)
    except RecursionError:  # comparing two deep trees: key every desc by its address map
        groups = {}
        for j, d in enumerate(descs):
            groups.setdefault(_draw_key(d, k, j, trees=False), []).append(j)
    return list(groups.values())


def _draw_key(d: GEMMDesc, k: int, j: int, *, trees: bool = True) -> Any:
    """Every field but the ones that only place K's elements (k_cuts, k_loop_step, residue),
    plus where they place them at this K: the canonical tree itself (not its hash) up to K 4096,
    else the exact address map (which may split equal readings, never merge different ones).
    An instruction wider than its block folds its products in position order, which the address
    map does not record: such a desc keys on its index ``j`` alone (never merged)."""
    from fixbits.numerics.blocks import model_for

    # (a desc without cuts keys as one whatever its part dtypes say: nothing reads them)
    rest = dataclasses.replace(without_part_dtypes(d), k_cuts=(), k_loop_step=d.instruction_k, residue="last")
    if d.instruction != "fma" and d.instruction_k > model_for(d.arch, d.instruction, d.in_dtype).L:
        return ("alone", j)
    if trees and k <= 4096:
        try:
            tree = canonical_tree(d, k)
            hash(tree)  # deep trees recurse: the address map below
            return (rest, "tree", tree)
        except RecursionError:
            pass
    ad = addresses(d, k)
    return (rest, "addr", ad.kinds, ad.counts, ad.index.tobytes())


def _stack_draws(taken: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
                 ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """(A rows (D, R, K), B columns (D, K, C), each draw's black-box bits): draws that sampled
    fewer rows or columns are padded with zero operands (their cells are emulated and ignored)."""
    from fixbits.numerics.formats import bits

    r = max(a.shape[0] for a, _, _ in taken)
    c = max(b.shape[1] for _, b, _ in taken)
    a3 = np.zeros((len(taken), r, taken[0][0].shape[1]), dtype=taken[0][0].dtype)
    b3 = np.zeros((len(taken), taken[0][1].shape[0], c), dtype=taken[0][1].dtype)
    want = []
    for i, (a, b, got) in enumerate(taken):
        a3[i, : a.shape[0]] = a
        b3[i, :, : b.shape[1]] = b
        want.append(bits(np.ascontiguousarray(got)))
    return a3, b3, want


def _matches(desc: GEMMDesc, a3: np.ndarray, b3: np.ndarray, want: list[np.ndarray]) -> bool:
    """The emulator's raw bits under ``desc`` equal the black box's on every draw."""
    from fixbits.emulate import emulate_draws
    from fixbits.numerics.formats import bits

    em = emulate_draws(desc, a3, b3)
    return all(np.array_equal(bits(np.ascontiguousarray(em[i, : w.shape[0], : w.shape[1]])), w)
               for i, w in enumerate(want))


def _solve(s: Session, obs: C.Observed, hints: dict[str, Any], arch: str, seed: int, draws: int, rounds: int,
           rng: np.random.Generator, notes: list[str], late: Any) -> tuple[str, list[GEMMDesc], int, int, list[GEMMDesc]]:
    """Stages 3-6 of the module docstring for one reading of the window walks:
    (status, survivors, candidates generated, random draws run, every member of the surviving
    classes: descriptors with the same tree at this K, for pinning on other shapes)."""
    backend, m, n, k = s.backend, s.m, s.n, s.k
    in_dtype, out_dtype = s.in_dtype, s.out_dtype
    # 3. candidates, structural filter
    if late("candidates"):
        return ("failed", [], 0, 0, [])
    cands = list(C.generate(arch, in_dtype, out_dtype, obs, hints))
    n_cands = len(cands)
    f = _Filter(cands, k, s.seen)
    loose = {h: v for h, v in hints.items() if h not in ("splitk_num", "instruction", "fast_accum")}
    if not f.items and loose != hints:
        # the hints narrowed too far (a launch that is not what its answer suggests): widen
        notes.append("no candidate fits the hinted family; retried without splitk/instruction hints")
        more = list(C.generate(arch, in_dtype, out_dtype, obs, loose))
        n_cands += len(more)
        f = _Filter(more, k, s.seen)
    # 4. split what remains
    for _ in range(rounds):
        if len(f.items) <= 1:
            break
        if late("split round"):
            return ("failed", [], n_cands, 0, [])
        q = _pool(f, k, rng, 3000)
        if len(q) == 0:
            break
        groups = f.signatures(q)
        if len(groups) <= 1:
            break
        chosen = _choose(f, q, budget=max(8, min(4 * s.packer.slots, 256)))
        if not chosen:
            break
        s.triples("split", chosen)
        f.apply(s.seen)
    if not f.items:
        notes.append("no candidate structure explains the ±L / r walks")
        return ("failed", [], n_cands, 0, [])
    # classes of candidates that remain: equal canonical trees are one class
    classes: dict[Any, list[GEMMDesc]] = {}
    for d, _ in f.items:
        classes.setdefault(_class_key(d, k), []).append(d)
    # 5. dtypes of partials and merge, read on a member of each class that has level-0 parts
    with_dt: list[GEMMDesc] = []
    origin: list[Any] = []  # the class each with_dt entry came from
    for ckey, members in classes.items():
        n_before = len(with_dt)
        members.sort(key=lambda d: C.preference(d, hints))
        simplest = members[0]
        cut_member = next((d for d in members if d.k_cuts and sum(1 for p in d.k_cuts[0].parts(k) if p) >= 2), None)
        vp = _value_placements(cut_member, k, s) if cut_member is not None else []
        if not vp:
            with_dt.append(simplest)
        else:
            calls, _ = s.values("dtypes", vp)
            for pdt, mdt in DTYPE_PAIRS:
                d = cut_member.replace(partial_dtype=pdt, merge_dtype=mdt)
                if all(np.array_equal(_read_cells(d, c), np.array(_bits_of(c), dtype=np.uint64)) for c in calls):
                    with_dt.append(simplest if (pdt, mdt) == ("fp32", "fp32") else d)
        origin += [ckey] * (len(with_dt) - n_before)
    if not with_dt:
        notes.append("no partial/merge dtype pair reproduces the value placements")
        return ("failed", [], n_cands, 0, [])
    # 6. random draws
    if late("random draws"):
        return ("failed", [], n_cands, 0, [])
    ok, checked = verify_draws(backend, with_dt, m, n, k, seed=seed + 1, draws=draws)
    s.calls += checked
    surv = [d for d, good in zip(with_dt, ok, strict=True) if good]
    surv_origin = {o for o, good in zip(origin, ok, strict=True) if good}
    if not surv:
        notes.append(f"{len(with_dt)} candidate(s) explain the placements but none the random draws: "
                     + "; ".join(d.family + " " + d.short_hash for d in with_dt[:5]))
        return ("failed", with_dt, n_cands, checked, [])
    # descriptors equal in tree are one answer; else ambiguous
    by_class: dict[Any, list[GEMMDesc]] = {}
    for d in surv:
        by_class.setdefault(_class_key(d, k) if k <= _CANON_LIMIT else (d.to_json(),), []).append(d)
    if len(by_class) > 1:
        notes.append(f"{len(by_class)} non-equivalent descriptors survive every test")
        return ("ambiguous", surv, n_cands, checked, [])
    return ("recovered", surv, n_cands, checked, [d for o in surv_origin for d in classes[o]])


def probe(backend: Any, m: int, n: int, k: int, *, arch: str, hints: dict[str, Any] | None = None,
          seed: int = 0, draws: int = 4, rounds: int = 8, window: int | None = None,
          deadline: float | None = None) -> ProbeResult:
    """Recover the GEMMDesc ``backend`` computes at (m, n, k); see the module docstring.

    hints (all optional): splitk_num (the heuristic's SPLITK_NUM), instruction ('fma' for a
    scalar kernel, from the launch profile), fast_accum (bool), granule (preferred split
    granule), extra_shapes (other (m, n, k) with the same heuristic answer, to pin a split's
    span rule and granule). ``deadline`` (a time.time() value): past it the probe stops at the
    next stage boundary and reports 'failed', naming the stage it reached.
    """
    import time

    def late(stage: str) -> bool:
        if deadline is not None and time.time() > deadline:
            notes.append(f"out of time before {stage}")
            return True
        return False

    hints = dict(hints or {})
    in_dtype, out_dtype = backend.in_dtype, backend.out_dtype
    s = Session(backend, m, n, k, in_dtype, out_dtype)
    notes: list[str] = []
    rng = np.random.default_rng(seed)

    def result(status: str, desc: GEMMDesc | None, surv: list[GEMMDesc], cands: int, checked: int,
               alternatives: tuple[GEMMDesc, ...] = ()) -> ProbeResult:
        return ProbeResult(m, n, k, status, desc, tuple(surv), tuple(s.records), s.calls, cands,
                           cands - len(surv), k - keff, checked, tuple(notes), alternatives)

    if k < 3:
        keff = k
        notes.append("K < 3: no room for a ±L / r placement")
        return result("failed", None, [], 0, 0)
    # 1. the summed prefix
    keff = k - dropped_tail(s)
    # 2. windows
    win = [z for z in _windows(keff, s.packer.slots, window) if z < keff]
    s.triples("group_start", [group_start(z) for z in win if z >= 2])
    s.triples("rn_start", [rn_start(b) for b in win if 1 <= b < keff - 1])
    gt = [z for z in win if z >= 2 and s.seen[group_start(z)] == 1]
    gseen = [z for z in win if z >= 2]
    rt = [b for b in win if 1 <= b < keff - 1 and s.seen[rn_start(b)] == 1]
    rseen = [b for b in win if 1 <= b < keff - 1]
    head = [z for z in gseen if z < min(keff, 512)]
    scalar = bool(head) and sum(1 for z in head if s.seen[group_start(z)] == 1) >= 0.5 * len(head)
    obs = C.Observed(k, keff, tuple(rt), tuple(rseen), tuple(gt), tuple(gseen), scalar)
    attempts = [obs]
    if "instruction" not in hints:  # the scalar/tensor-core reading of the window is a guess: try both
        attempts.append(dataclasses.replace(obs, scalar=not scalar))
    total = 0
    outcome: tuple[str, list[GEMMDesc], int, list[GEMMDesc]] = ("failed", [], 0, [])
    for i, ob in enumerate(attempts):
        if i:
            notes.append(f"retrying with the {'scalar' if ob.scalar else 'tensor-core'} families")
        status, surv, n_c, checked, members = _solve(s, ob, hints, arch, seed, draws, rounds, rng, notes, late)
        total += n_c
        outcome = (status, surv, checked, members)
        if status != "failed":
            break
    status, surv, checked, members = outcome
    if status != "recovered":
        return result(status, None, surv, total, checked)
    n_cands = total
    best = sorted(surv, key=lambda d: C.preference(d, hints))[0]
    # other readings that cut THIS K the same way (their dtypes set to what was measured)
    alts = [d.replace(partial_dtype=best.partial_dtype, merge_dtype=best.merge_dtype) for d in members]
    alts += _split_alternatives(best, k)
    alts = [d for d in dict.fromkeys(alts) if d != best]
    extra = hints.get("extra_shapes") or []
    if alts and extra:
        try:
            best, alts, more = _pin(backend, best, alts, [tuple(x) for x in extra], hints, rng, deadline=deadline)
        except (RecursionError, MemoryError) as exc:  # pinning is a refinement: keep the probed reading
            more = [f"pinning stopped: {type(exc).__name__}"]
        notes.extend(more)
    return result("recovered", best, surv, n_cands, checked, tuple(alts))


def _bits_of(call: Call) -> list[int]:
    from fixbits.probe.placements import read_bits

    return read_bits(call)


def _split_alternatives(desc: GEMMDesc, k: int) -> list[GEMMDesc]:
    """Other (granule, aligned granule, span_rule) of the level-0 count cut that cut this K the
    same way (aligned 64: cuBLASLt 13.1 split-K rounds spans to 64 when 64 | K, else to 8)."""
    if not desc.k_cuts or desc.k_cuts[0].count is None or desc.k_cuts[0].layout != "contiguous":
        return []
    cut = desc.k_cuts[0]
    want = cut.parts(k)
    out = []
    for rule in C.RULES:
        for g in C.GRANULES:
            for aligned in (None, *(a for a in C.ALIGNED_GRANULES if a > g)):
                alt = KCut("contiguous", count=cut.count, granule=g, span_rule=rule, merge=cut.merge,
                           aligned_granule=aligned)
                if alt != cut and alt.parts(k) == want:
                    out.append(desc.replace(k_cuts=(alt,) + desc.k_cuts[1:]))
    return out


def _signature(d: GEMMDesc, k: int) -> Any:
    """Equal for readings that owe each other the same bits at K (canonical trees; at deep K the
    cheaper address map, which may split readings that are in fact equal)."""
    if k <= 4096:
        try:
            return ("tree", hash(canonical_tree(d, k)))  # hashed here: deep trees recurse
        except RecursionError:  # a long scalar chain: the address map below
            pass
    ad = addresses(d, k)
    return ("addr", repr((ad.kinds, ad.counts)).encode() + ad.index.tobytes())


def _pin_order(alive: list[GEMMDesc], extra: list[tuple[int, int, int]], *, max_k: int = 16,
               max_len: int = 12, cache: dict[tuple[int, int], Any] | None = None
               ) -> list[tuple[tuple[int, int, int], int]]:
    """Shapes of the answer where the readings differ most, with how many classes each makes.

    ``extra`` comes cheapest first; one shape per K, spread over K mod 128 (the residue turn,
    k_loop_step and split granules show at K that is not a multiple of them; two readings that
    differ only in step 32 vs 64 agree at every K with K mod 64 < 32), up to ``max_k`` K. No K is
    too deep to compare at (the address map: 0.3 s for 8 readings at K 284,617); a cap at 64k made
    answers whose shapes are all deeper look alike, and phase B kept the first reading unseen
    (H100 s37: 10 entries wrong on n15's H200 cells)."""
    cache = {} if cache is None else cache
    per_k: dict[int, tuple[int, int, int]] = {}
    buckets: set[int] = set()
    for sh in extra:
        k = sh[2]
        if k in per_k or k < 3:
            continue
        if (k % 128) in buckets and len(per_k) >= max_k // 2:
            continue
        buckets.add(k % 128)
        per_k[k] = sh
        if len(per_k) >= max_k:
            break
    sample = alive[:max_len]
    scored = []
    for i, (k, sh) in enumerate(per_k.items()):
        sigs = set()
        for d in sample:
            ck = (id(d), k)
            if ck not in cache:
                cache[ck] = _signature(d, k)
            sigs.add(cache[ck])
        if len(sigs) > 1:
            scored.append((-len(sigs), i, sh))
    scored.sort()
    return [(sh, -c) for c, _, sh in scored]


def _pin(backend: Any, best: GEMMDesc, alts: list[GEMMDesc], extra: list[tuple[int, int, int]],
         hints: dict[str, Any], rng: np.random.Generator, max_shapes: int = 3,
         deadline: float | None = None) -> tuple[GEMMDesc, list[GEMMDesc], list[str]]:
    """Readings equal at the probed K (split rule and granule, residue turn and step, ...)
    differ elsewhere: walk the shapes of the same heuristic answer where they part most."""
    import time

    notes = []
    alive = [best] + alts
    tried: set[int] = set()
    cache: dict[tuple[int, int], Any] = {}
    for _ in range(max_shapes):
        if len(alive) <= 1:
            break
        if deadline is not None and time.time() > deadline:
            notes.append(f"out of time before pinning {len(alive)} readings")
            break
        order = [(sh, c) for sh, c in _pin_order(alive, extra, cache=cache) if sh[2] not in tried]
        if not order:
            notes.append(f"{len(alive)} readings cut every K of this answer the same way")
            break
        (m2, n2, k2), _ = order[0]
        tried.add(k2)
        s2 = Session(backend, m2, n2, k2, best.in_dtype, best.out_dtype)
        keff2 = k2 - dropped_tail(s2)
        f = _Filter([], k2, {})
        for d in alive:
            ad = addresses(d, k2)
            if int(ad.summed.sum()) == keff2 and bool(ad.summed[:keff2].all()):
                f.items.append((d, ad))
        for _ in range(4):
            if len(f.items) <= 1:
                break
            q = _pool(f, k2, rng, 2000)
            chosen = _choose(f, q, budget=max(8, min(4 * s2.packer.slots, 128))) if len(q) else []
            if not chosen:
                break
            s2.triples("pin", chosen)
            f.apply(s2.seen)
        nxt = [d for d, _ in f.items]
        # the walks there test a few placements; draws confirm that the shape computes like the
        # probed one (an answer whose arithmetic changes with K must not be pinned across it)
        ok = verify_draws(backend, nxt, m2, n2, k2, seed=int(rng.integers(1 << 30)), draws=2)[0] if nxt else []
        passing = [d for d, o in zip(nxt, ok, strict=True) if o]
        if passing:
            notes.append(f"pinned at {m2}x{n2}x{k2}: {len(passing)} of {len(alive)} readings remain")
            alive = passing
        else:
            notes.append(f"no reading holds at {m2}x{n2}x{k2} (the answer computes otherwise there): not pinned there")
    alive.sort(key=lambda d: C.preference(d, hints))
    return alive[0], alive[1:], notes
