"""Offline search for the fp32 summation order of cuBLASLt 13.1's GEMV answers (ALGO_ID 13,
gemv2T family: M == 1 or N == 1) on the H200, from the cells recorded in run s12/a13r.

Data: ``benchmarks/reconstruction/h200/s12/a13r/sweep_samples`` (950 cases; the a13 ones are
fp16 or bf16 inputs, fp32 output, 10 draws each). Each case's sampled A rows and B columns are
rebuilt from the seeds (fixbits.probe.sweep.sampled_operands) and every sampled cell becomes a
row of exact products (a product of two fp16 / bf16 values is exact in float64). A candidate
order is then evaluated directly in numpy: each fma / add is one correctly rounded fp32
operation (float64 two-sum, round-to-odd, one rounding to fp32), vectorised over cells and
lanes. ``check --exact`` / ``found --exact`` additionally run the same orders through
``fixbits.emulate`` (fixbits.probe.sweep.draw_mismatches) as plain GEMMDescs.

Found (every a13 case of the run, both input dtypes, both orientations, 0 cells differ):
one model per CUSTOM_OPTION, the same for M == 1 and N == 1 and, except c7, for fp16 and bf16
(c7 is 2 lanes on fp16, 16 lanes on bf16, as the profiles already say):

- SPLITK_NUM = s > 1 (REDUCTION_SCHEME 2): K is cut into s contiguous parts of
  P = ceil(K/s) (the last one shorter), chained in order from +0 (the profiles' top level).
- Inside each part, L lanes (threads) each own tiles of ``span`` consecutive elements dealt
  round-robin (strided cut); a lane is one fma chain from +0 over its elements in order.
- The L lane values fold with a count-down butterfly (xor L/2 .. 1), or, for c11 / c12 / c14
  (N == 1 kernels), are chained in lane order from +0.
- c11 / c12 / c14: a lane's chain restarts from +0 every B of its own elements (B = 32 for
  c11: a 512-element K block of 16 lanes; B = 16 for c12 / c14: 256 elements) and the lane's
  block partials are chained in order. In GEMMDesc terms an innermost
  ``{"layout": "contiguous", "span": B, "merge": "chain"}`` level below the lane level.
- "Capped" options (c56, c92, c100, and by their lane tiles c50 / c66 / c68 / c96 / c106,
  whose recorded K never reach the cap's lower regime so the cap is untested there): the tile span
  is min(64, ceil(P / L)) = min(64, ceil(K / (s*L))), computed from the NOMINAL part length P,
  so the short last split part uses the same span as the others. Session 12 wrote these as
  K-range variants of plain descriptors (``variants`` prints them); since session 13 a GEMMDesc
  says it directly (KCut span_rule="capped", ``cap`` rewrites the entries): span v = ceil(K/(s*L)) < 64 holds for
  K in [(v-1)*s*L + 1, v*s*L]; span 64 from K = 63*s*L + 1 up. With s = 1 and v < 64 the
  level is the same as ``contiguous count=L``. c10 is NOT capped: fixed span 4 (span 3 at
  K = 69 and 81 misses). Nor is c7: fixed span 64 (run s13/a13v, fresh draws at K = 44 and 55,
  both dtypes: the capped reading misses 64 to 79 of 120 cells, span 64 matches all).

The evaluator's own extension of the k_cuts JSON (only here): a strided level may give
``"span_cap": C`` instead of ``"span"``; its tile span is then min(C, ceil(P / count)) where P
is the nominal part length of the level above (the span a contiguous count cut computes, the
whole K at level 0).

    .venv/bin/python benchmarks/reconstruction/a13_search.py found                 # FOUND on every a13 group
    .venv/bin/python benchmarks/reconstruction/a13_search.py found --exact --kmax 40000
    .venv/bin/python benchmarks/reconstruction/a13_search.py check --keys 'a13-t0-s16-.*-c92-g0' \\
        --cuts '[{"layout":"strided","count":32,"span_cap":64,"merge":"butterfly_down"}]'
    .venv/bin/python benchmarks/reconstruction/a13_search.py grid a13-t0-s132-r2-w0-c14-g0 fp16 n1 --cases 2
    .venv/bin/python benchmarks/reconstruction/a13_search.py variants a13-t0-s16-r2-w0-c92-g0 fp16
    .venv/bin/python benchmarks/reconstruction/a13_search.py apply    # fp32 profiles: failed a13 answers

``check`` prepends the split level ``{"layout":"contiguous","count":s,"merge":"chain"}`` for
answers with s > 1 unless ``--no-split`` is given. Run one process at a time; ``found`` over
all groups takes about 3 minutes on one core (``--exact`` is slower: use ``--kmax``).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.desc import DescError, GEMMDesc, KCut  # noqa: E402
from fixbits.probe.profile import PROFILE_DIR  # noqa: E402
from fixbits.probe.sweep import draw_mismatches, load_samples, sampled_operands  # noqa: E402

DEFAULT_DIR = ROOT / "benchmarks" / "reconstruction" / "h200" / "s12" / "a13r"
BFD = "butterfly_down"
Cut = dict[str, Any]


# -- data -------------------------------------------------------------------------------------


def split_of(key: str) -> int:
    """SPLITK_NUM of an answer key ('a13-t0-s16-r2-...' -> 16)."""
    m = re.search(r"-s(-?\d+)-", key)
    return int(m.group(1)) if m else 1


def custom_of(key: str) -> int:
    """CUSTOM_OPTION of an answer key ('...-c92-g0' -> 92)."""
    m = re.search(r"-c(\d+)-", key)
    return int(m.group(1)) if m else -1


def orientation(rec: dict[str, Any]) -> str:
    return "n1" if rec["n"] == 1 else "m1" if rec["m"] == 1 else "mn"


def a13_groups(sample_dir: Path, keys: str = r"a13-.*", dtype: str | None = None, orient: str | None = None,
               kmax: int | None = None, kmin: int = 0) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Recorded a13 cases by (key, input dtype, orientation), each list sorted by K."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = collections.defaultdict(list)
    for r in load_samples(sample_dir):
        if "got" not in r or not r.get("key") or not re.fullmatch(keys, r["key"]):
            continue
        if r.get("out_dtype") != "fp32" or (dtype and r["dtype"] != dtype):
            continue
        o = orientation(r)
        if (orient and o != orient) or (kmax is not None and r["k"] > kmax) or r["k"] < kmin:
            continue
        groups[(r["key"], r["dtype"], o)].append(r)
    for v in groups.values():
        v.sort(key=lambda r: r["k"])
    return dict(sorted(groups.items(), key=lambda kv: (custom_of(kv[0][0]), split_of(kv[0][0]), kv[0][1:])))


# -- exact fp32 arithmetic --------------------------------------------------------------------


def add_f32(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Correctly rounded fp32 x + y (as float64) for x, y exact in float64 (fp32 values or exact
    products): two-sum, round-to-odd to 53 bits, one cast to float32 (53 >= 24 + 2)."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    fix = (e != 0) & ((s.view(np.uint64) & np.uint64(1)) == 0)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    with np.errstate(over="ignore"):
        return s.astype(np.float32).astype(np.float64)


def chain_fold(vals: np.ndarray) -> np.ndarray:
    """(C, n) -> (C,): ((0 + v0) + v1) + ..."""
    s = np.zeros(vals.shape[0])
    for j in range(vals.shape[1]):
        s = add_f32(s, vals[:, j])
    return s


def butterfly_fold(vals: np.ndarray, down: bool) -> np.ndarray:
    """(C, n) -> (C,): lanes exchanging with xor n/2 .. 1 (down) or 1 .. n/2 (up); lane 0."""
    n = vals.shape[1]
    offsets = [1 << i for i in range(n.bit_length() - 1)]
    if down:
        offsets.reverse()
    lanes = vals
    for off in offsets:
        lanes = add_f32(lanes, lanes[:, np.arange(n) ^ off])
    return lanes[:, 0]


def fold(vals: np.ndarray, how: str) -> np.ndarray:
    if how == "chain":
        return chain_fold(vals)
    if how in ("butterfly_down", "butterfly_up"):
        return butterfly_fold(vals, how == "butterfly_down")
    raise ValueError(f"merge {how!r} is not evaluated here")


class Case:
    """One recorded case: exact products (cells x K, plus a zero column) and cuBLAS's bits."""

    def __init__(self, rec: dict[str, Any]) -> None:
        self.rec = rec
        a, b, sizes = sampled_operands(rec)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        rows, cols, r0, c0 = [], [], 0, 0
        for r, c in sizes:
            for i in range(r):
                for j in range(c):
                    rows.append(r0 + i)
                    cols.append(c0 + j)
            r0, c0 = r0 + r, c0 + c
        self.k = int(rec["k"])
        self.cells = len(rows)
        self.products = np.zeros((self.cells, self.k + 1))
        self.products[:, : self.k] = a64[rows, :] * b64[:, cols].T
        self.got = np.array(rec["got"], dtype=np.uint32)

    def chains(self, idx: np.ndarray) -> np.ndarray:
        """fma chains from +0: idx (lanes, T) of K indices, -1 = no element; returns (cells, lanes)."""
        idx = np.where(idx < 0, self.k, idx)
        acc = np.zeros((self.cells, idx.shape[0]))
        for t in range(idx.shape[1]):
            acc = add_f32(self.products[:, idx[:, t]], acc)
        return acc

    def differing(self, value: np.ndarray) -> int:
        return int((value.astype(np.float32).view(np.uint32) != self.got).sum())


# -- k_cuts with the span_cap extension ---------------------------------------------------------


def as_kcuts(cuts: list[Cut]) -> tuple[KCut, ...]:
    """This script's k_cuts JSON as KCuts: ``"span_cap": C`` is a strided cut of span C with
    span_rule "capped" (fixbits.desc.KCut)."""
    out = []
    for c in cuts:
        c = dict(c)
        if "span_cap" in c:
            c["span"] = c.pop("span_cap")
            c["span_rule"] = "capped"
        out.append(KCut(**c))
    return tuple(out)


def resolved_cuts(cuts: list[Cut], k: int) -> list[Cut] | None:
    """The plain k_cuts equal to ``cuts`` at this K (GEMMDesc.at_k), or None when a span_cap level
    sits below a strided level (whose parts have no single nominal length; no model here does that)."""
    try:
        plain = base_desc("fp16").replace(k_cuts=as_kcuts(cuts)).at_k(k)
    except DescError:
        return None
    return [c.to_dict() for c in plain.k_cuts]


def evaluate(case: Case, cuts: list[Cut]) -> np.ndarray:
    """The cells' fp32 values under a k_cuts nest (fma path, chains from +0)."""
    plain = resolved_cuts(cuts, case.k)
    if plain is None:
        raise ValueError("span_cap below a strided level is not defined")
    kcuts = [KCut(**c) for c in plain]
    leaves: list[np.ndarray] = []

    def build(idx: np.ndarray, level: int) -> Any:
        if level == len(kcuts):
            leaves.append(idx)
            return len(leaves) - 1
        kids = []
        for runs in kcuts[level].parts(len(idx)):
            pos = np.concatenate([np.arange(s, e) for s, e in runs]) if runs else np.zeros(0, dtype=np.int64)
            kids.append(build(idx[pos], level + 1))
        return (kcuts[level].merge, kids)

    tree = build(np.arange(case.k, dtype=np.int64), 0)
    width = max(1, max(len(x) for x in leaves))
    mat = np.full((len(leaves), width), -1, dtype=np.int64)
    for i, x in enumerate(leaves):
        mat[i, : len(x)] = x
    lane_values = case.chains(mat)

    def walk(node: Any) -> np.ndarray:
        if isinstance(node, int):
            return lane_values[:, node]
        how, kids = node
        return fold(np.stack([walk(k) for k in kids], 1), how)

    return walk(tree)


def with_split(key: str, cuts: list[Cut], add_split: bool = True) -> list[Cut]:
    s = split_of(key)
    if add_split and s > 1:
        return [{"layout": "contiguous", "count": s, "merge": "chain"}] + cuts
    return cuts


def base_desc(dtype: str) -> GEMMDesc:
    return GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype=dtype, out_dtype="fp32",
                    acc_dtype="fp32", use_fast_accum=True, k_loop_step=64, residue="last")


def exact_differing(rec: dict[str, Any], cuts: list[Cut]) -> int:
    """Differing cells through fixbits.emulate, with the per-K plain k_cuts."""
    plain = resolved_cuts(cuts, int(rec["k"]))
    assert plain is not None
    desc = base_desc(rec["dtype"]).replace(k_cuts=tuple(KCut(**c) for c in plain))
    a, b, sizes = sampled_operands(rec)
    got = np.array(rec["got"], dtype=np.uint32).view(np.float32)
    bad, _ = draw_mismatches(desc, a, b, sizes, got, "fp32")
    return int(sum(bad))


# -- the models found -------------------------------------------------------------------------


@dataclass(frozen=True)
class Lanes:
    """The order inside one split part: ``count`` lanes own tiles of ``span`` consecutive
    elements dealt round-robin (``capped``: span min(span, ceil(P/count)), P the nominal part
    length); the lanes fold by ``merge``; ``block``: a lane restarts its chain from +0 every
    ``block`` of its elements and chains those block partials."""

    count: int
    span: int
    merge: str
    block: int | None = None
    capped: bool = False

    def cuts(self) -> list[Cut]:
        lane: Cut = {"layout": "strided", "count": self.count, "merge": self.merge}
        lane["span_cap" if self.capped else "span"] = self.span
        out = [lane]
        if self.block:
            out.append({"layout": "contiguous", "span": self.block, "merge": "chain"})
        return out


# CUSTOM_OPTION -> model (per input dtype where they differ). The same model holds for M == 1 and
# N == 1 wherever both were recorded (c56, c75).
FOUND: dict[int, Lanes | dict[str, Lanes]] = {
    7: {"fp16": Lanes(2, 64, BFD), "bf16": Lanes(16, 64, BFD)},  # fixed span: s13/a13v K 44, 55
    10: Lanes(32, 4, BFD),
    11: Lanes(16, 1, "chain", block=32),
    12: Lanes(16, 1, "chain", block=16),
    14: Lanes(16, 1, "chain", block=16),
    35: Lanes(16, 1, BFD),
    43: Lanes(8, 1, BFD),
    50: Lanes(4, 64, BFD, capped=True),
    51: Lanes(4, 1, BFD),
    55: Lanes(16, 1, BFD),
    56: Lanes(2, 64, BFD, capped=True),
    57: Lanes(2, 1, BFD),
    63: Lanes(2, 1, BFD),
    66: Lanes(8, 64, BFD, capped=True),
    67: Lanes(8, 1, BFD),
    68: Lanes(4, 64, BFD, capped=True),
    69: Lanes(4, 1, BFD),
    75: Lanes(32, 1, BFD),
    92: Lanes(32, 64, BFD, capped=True),
    93: Lanes(32, 1, BFD),
    96: Lanes(4, 64, BFD, capped=True),
    97: Lanes(4, 1, BFD),
    100: Lanes(16, 64, BFD, capped=True),
    101: Lanes(16, 1, BFD),
    106: Lanes(8, 64, BFD, capped=True),
}


def found_model(key: str, dtype: str) -> Lanes | None:
    m = FOUND.get(custom_of(key))
    return m.get(dtype) if isinstance(m, dict) else m


def variants(key: str, model: Lanes, kmax: int = 1 << 20) -> list[tuple[int, int | None, list[Cut]]]:
    """(k_min, k_max, plain k_cuts) ranges that express ``model`` for ``key`` with today's GEMMDesc."""
    s = split_of(key)
    if not model.capped:
        return [(1, None, with_split(key, model.cuts()))]
    width = s * model.count
    out: list[tuple[int, int | None, list[Cut]]] = []
    for v in range(1, model.span + 1):
        lo, hi = (v - 1) * width + 1, (v * width if v < model.span else None)
        if lo > kmax:
            break
        plain = resolved_cuts(with_split(key, model.cuts()), hi if hi is not None else lo)
        assert plain is not None
        out.append((lo, hi, plain))
    return out


def capped_desc(key: str, dtype: str, model: Lanes) -> GEMMDesc:
    """The model as one GEMMDesc: a capped model's lane level is a strided cut with
    span_rule="capped" (fixbits.desc.KCut), below the split level when s > 1."""
    return base_desc(dtype).replace(k_cuts=as_kcuts(with_split(key, model.cuts())))


# -- commands ---------------------------------------------------------------------------------


def _report(key: str, dt: str, o: str, cases: list[dict[str, Any]], cuts_for: Any, exact: bool) -> bool:
    t0 = time.time()
    ok, cells, differ, misses = 0, 0, 0, []
    for rec in cases:
        case = Case(rec)
        cuts = cuts_for(rec)
        nb = exact_differing(rec, cuts) if exact else case.differing(evaluate(case, cuts))
        cells += case.cells
        differ += nb
        if nb:
            misses.append((case.k, nb))
        else:
            ok += 1
    ks = f"K {cases[0]['k']}..{cases[-1]['k']}"
    print(f"{key} {dt} {o}: {len(cases)} cases ({ks}), {cells} cells, {differ} differ; {ok} cases match"
          + (f"; misses (K, cells) {misses}" if misses else "") + f"  [{time.time() - t0:.0f}s]", flush=True)
    return not misses


def cmd_check(args: argparse.Namespace) -> int:
    cuts = json.loads(args.cuts)
    groups = a13_groups(args.dir, args.keys, args.dtype, args.orient, args.kmax, args.kmin)
    allok = True
    for (key, dt, o), cases in groups.items():
        allok &= _report(key, dt, o, cases, lambda r, key=key: with_split(key, cuts, not args.no_split), args.exact)
    return 0 if allok else 1


def cmd_found(args: argparse.Namespace) -> int:
    groups = a13_groups(args.dir, args.keys, args.dtype, args.orient, args.kmax, args.kmin)
    allok = True
    for (key, dt, o), cases in groups.items():
        model = found_model(key, dt)
        if model is None:
            print(f"{key} {dt} {o}: no model ({len(cases)} cases)")
            allok = False
            continue
        print(f"  model {json.dumps(with_split(key, model.cuts()))}")
        allok &= _report(key, dt, o, cases, lambda r, key=key, model=model: with_split(key, model.cuts()), args.exact)
    return 0 if allok else 1


def grid_candidates() -> Iterator[Lanes]:
    for count in (2, 4, 8, 16, 32, 64, 128):
        for span in (1, 2, 4, 8, 16, 32, 64, 128):
            for capped in (False, True):
                if capped and span == 1:
                    continue
                for merge in ("chain", "butterfly_down", "butterfly_up"):
                    for block in (None, 8, 16, 32, 64):
                        yield Lanes(count, span, merge, block, capped)
        for merge in ("chain", "butterfly_down", "butterfly_up"):  # contiguous lanes: span ceil(P/count)
            yield Lanes(count, 1 << 30, merge, None, True)


def cmd_grid(args: argparse.Namespace) -> int:
    groups = a13_groups(args.dir, re.escape(args.key), args.dtype, args.orient, args.kmax)
    cases = [Case(r) for r in groups.get((args.key, args.dtype, args.orient), [])[: args.cases]]
    if not cases:
        print("no cases")
        return 1
    alive = list(grid_candidates())
    print(f"{args.key} {args.dtype} {args.orient}: K {[c.k for c in cases]}, {len(alive)} candidates", flush=True)
    for case in cases:
        t0 = time.time()
        scored = [(case.differing(evaluate(case, with_split(args.key, m.cuts()))), m) for m in alive]
        scored.sort(key=lambda x: x[0])
        alive = [m for nb, m in scored if nb == 0]
        print(f"K={case.k}: {len(alive)} fit ({time.time() - t0:.0f}s); nearest: "
              + "; ".join(f"{nb} {m}" for nb, m in scored[len(alive): len(alive) + 3]), flush=True)
        if not alive:
            break
    for m in alive[:20]:
        print("  fits:", json.dumps(m.cuts()))
    return 0 if alive else 1


def cmd_variants(args: argparse.Namespace) -> int:
    model = found_model(args.key, args.dtype)
    if model is None:
        print("no model")
        return 1
    for lo, hi, cuts in variants(args.key, model, args.kmax):
        print(f"K {lo}..{hi if hi is not None else 'inf'}: {json.dumps(cuts)}")
    return 0


def cmd_cap(args: argparse.Namespace) -> int:
    """Rewrite every fp32 a13 entry held as K-range variants of a capped model as one capped
    GEMMDesc. Written only when the capped descriptor at K equals the entry's variant (as a
    descriptor, else by canonical trees) at both ends of every range and past the last one, and
    matches every recorded case of --dirs up to --exact-kmax through fixbits.emulate."""
    from fixbits.probe.plan import equivalent_on
    from fixbits.probe.profile import ProfileEntry, load
    from fixbits.probe.sweep import check_one

    recs = [r for d in args.dirs for r in load_samples(d) if "got" in r and str(r.get("key", "")).startswith("a13-")]
    bad = 0
    for path in sorted(PROFILE_DIR.glob("sm_90_cublaslt130100_*_fp32.yaml")):
        prof = load(path)
        done = 0
        for key, e in sorted(prof.entries.items()):
            model = found_model(key, prof.dtype)
            if not key.startswith("a13-") or model is None or not model.capped or len(e.variants) < 2:
                continue
            if any(v.n1 is not None for v in e.variants):
                continue
            cap = capped_desc(key, prof.dtype, model)
            ks = sorted({x for v in e.variants for x in (v.k_min, v.k_max or 2 * v.k_min, (v.k_min + (v.k_max or 2 * v.k_min)) // 2)})
            differ = []
            for k in ks:
                want = prof.lookup(key, k=k)
                if cap.at_k(k) == want:
                    continue
                try:
                    same = equivalent_on(cap, want, k)
                except RecursionError:
                    same = False
                if not same:
                    differ.append(k)
            cases = [r for r in recs if r["key"] == key and r["dtype"] == prof.dtype and r["k"] <= args.exact_kmax]
            wrong = [r["k"] for r in cases if check_one(r, cap.to_dict(), None)["outcome"] != "match"]
            if differ or wrong:
                print(f"  {key} {prof.dtype}: not rewritten (differs from its variants at K {differ[:5]}, "
                      f"misses recorded K {wrong[:5]})")
                bad += 1
                continue
            note = (e.note + f"; session 13: one capped descriptor (span_rule capped) in place of its {len(e.variants)} "
                    f"K ranges, equal to them at {len(ks)} K (every range's ends) and matching {len(cases)} recorded "
                    "cases through fixbits.emulate")
            prof.entries[key] = ProfileEntry(key, cap, e.shape, e.verified_shapes, e.shapes_seen, e.kernels, note, ())
            done += 1
        prof.save(str(path.parent))
        print(f"{path.name}: {done} a13 entries now one capped descriptor")
    return 1 if bad else 0


def cmd_apply(args: argparse.Namespace) -> int:
    """Write the FOUND models into the fp32 profiles: every a13 answer in a profile's failed table,
    and every capped a13 entry of SPLITK > 1 that holds one fixed span (wrong below K = 63*s*L),
    that has recorded cases of the profile's input dtype. Capped models become K-range variants.
    An entry is written only when the model matches every recorded case (numpy evaluator) and the
    entry itself, through its K range's GEMMDesc and fixbits.emulate, every case up to --exact-kmax."""
    from fixbits.probe.profile import KVariant, ProfileEntry, load
    from fixbits.probe.sweep import check_one

    recs = load_samples(args.dir)
    bad = 0
    for path in sorted(PROFILE_DIR.glob("sm_90_cublaslt130100_*_fp32.yaml")):
        prof = load(path)
        dt = prof.dtype
        keys = [k for k in prof.failed if k.startswith("a13-")]
        for k, e in prof.entries.items():
            m = found_model(k, dt)
            if k.startswith("a13-") and m is not None and m.capped and split_of(k) > 1 and not e.variants:
                keys.append(k)
        done = 0
        for key in sorted(set(keys)):
            model = found_model(key, dt)
            cases = sorted((r for r in recs if r.get("key") == key and r["dtype"] == dt and "got" in r),
                           key=lambda r: r["k"])
            if model is None or not cases:
                continue
            if not _report(key, dt, "all", cases, lambda r, key=key, model=model: with_split(key, model.cuts()),
                           exact=False):
                bad += 1
                continue
            descs = [(lo, hi, base_desc(dt).replace(k_cuts=tuple(KCut(**c) for c in cuts)))
                     for lo, hi, cuts in variants(key, model)]
            shape = (cases[0]["m"], cases[0]["n"], cases[0]["k"])
            vs = tuple(KVariant(lo, hi, d, shape) for lo, hi, d in descs) if len(descs) > 1 else ()
            entry = ProfileEntry(key, descs[-1][2], shape, len(cases), len(cases), (), "", vs)
            exact = [r for r in cases if r["k"] <= args.exact_kmax]
            wrong = [r["k"] for r in exact
                     if check_one(r, next((v.desc for v in vs if v.holds(r["k"])), entry.desc).to_dict(),
                                  None)["outcome"] != "match"]
            if wrong:
                print(f"  {key} {dt}: the written descriptors miss K {wrong} through fixbits.emulate; not written")
                bad += 1
                continue
            cells = sum(len(d["rows"]) * len(d["cols"]) for r in cases for d in r["draws"])
            note = (f"fitted offline from the H200 run s12/a13r's fp32 cells (a13_search.py, session 12): "
                    f"{len(cases)} recorded cases, {cells} cells of this key and input dtype, 0 differ; "
                    f"{len(exact)} of the cases also through fixbits.emulate with these descriptors"
                    + (f"; the lane tile span is min(64, ceil(K/({split_of(key)}*{model.count}))), as "
                       f"{len(vs)} K ranges" if vs else "") + "; GPU re-verification on fresh draws pending")
            old = prof.entries.get(key)
            if old is not None and "a13_search.py" not in old.note:
                note += f" (replaces the fixed-span entry: {old.note[:120]})"
            elif old is not None:
                note += old.note[old.note.find(" (replaces"):] if " (replaces" in old.note else ""
            prof.entries[key] = ProfileEntry(key, entry.desc, shape, len(cases), len(cases), (), note, vs)
            prof.failed.pop(key, None)
            done += 1
        prof.save(str(path.parent))
        print(f"{path.name}: {done} a13 entries written")
    return 1 if bad else 0

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="run directory with sweep_samples/")
    sub = p.add_subparsers(dest="cmd", required=True)

    def filters(q: argparse.ArgumentParser) -> None:
        q.add_argument("--keys", default=r"a13-.*", help="regex the answer key must match in full")
        q.add_argument("--dtype", choices=("fp16", "bf16"))
        q.add_argument("--orient", choices=("m1", "n1"))
        q.add_argument("--kmin", type=int, default=0, help="only cases with K >= KMIN")
        q.add_argument("--kmax", type=int, help="only cases with K <= KMAX")
        q.add_argument("--exact", action="store_true", help="through fixbits.emulate (per-K plain GEMMDesc)")

    q = sub.add_parser("check", help="a proposed k_cuts nest on every recorded case of the selected groups")
    q.add_argument("--cuts", required=True, help="k_cuts JSON below the split level (span_cap allowed)")
    q.add_argument("--no-split", action="store_true", help="do not prepend the contiguous count=s chain level")
    filters(q)
    q.set_defaults(fn=cmd_check)
    q = sub.add_parser("found", help="the FOUND models on every recorded a13 group")
    filters(q)
    q.set_defaults(fn=cmd_found)
    q = sub.add_parser("grid", help="lanes x span x cap x merge x block search on one group's first cases")
    q.add_argument("key")
    q.add_argument("dtype", choices=("fp16", "bf16"))
    q.add_argument("orient", choices=("m1", "n1"))
    q.add_argument("--cases", type=int, default=3)
    q.add_argument("--kmax", type=int)
    q.set_defaults(fn=cmd_grid)
    q = sub.add_parser("variants", help="K-range GEMMDesc k_cuts that express a FOUND model")
    q.add_argument("key")
    q.add_argument("dtype", choices=("fp16", "bf16"))
    q.add_argument("--kmax", type=int, default=1 << 20)
    q.set_defaults(fn=cmd_variants)
    q = sub.add_parser("apply", help="write the FOUND models into matrices/profiles (fp32 profiles)")
    q.add_argument("--exact-kmax", type=int, default=20000,
                   help="cases up to this K are also checked through fixbits.emulate with the written entry")
    q.set_defaults(fn=cmd_apply)
    q = sub.add_parser("cap", help="K-range variants of capped models -> one capped GEMMDesc (fp32 profiles)")
    q.add_argument("--dirs", type=Path, nargs="+", default=[DEFAULT_DIR], help="run directories with sweep_samples/")
    q.add_argument("--exact-kmax", type=int, default=20000)
    q.set_defaults(fn=cmd_cap)
    args = p.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    raise SystemExit(main())
