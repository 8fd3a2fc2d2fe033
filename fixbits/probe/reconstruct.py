"""`fixbits reconstruct`: build an arch profile from cuBLASLt on this machine's GPU.

1. Scan: ask the heuristic (host only, no kernel) for a large shape space, vectors to very
   long lengths and K to very deep, and group shapes by answer key.
2. For every answer: profile one launch (kernel names narrow the family), probe one
   representative shape (fixbits.probe.recover.probe), pin a split's span rule on a second
   K of the same answer, then verify on a few other shapes of that answer: the emulator with
   the entry's descriptor against cuBLAS's bytes on fresh ordinary and wide draws.
3. Write the profile after every answer (a partial profile is resumable), and list every
   answer that failed to probe with the reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fixbits.probe.profile import ArchProfile, ProfileEntry, answer_key, is_withdrawn, load, profile_filename

_POW2 = [1 << i for i in range(0, 15)]


def shape_space(max_queries: int, seed: int = 0, *, k_multiple: int = 1) -> list[tuple[int, int, int]]:
    """GEMV/vector shapes to very long, K to very deep, and a seeded sample of general shapes."""
    rng = np.random.default_rng(seed)
    ks = sorted({int(x) for x in np.unique(np.round(np.geomspace(8, 1_048_576, 160)))}
                | {64 * j + t for j in (1, 2, 16, 64, 135, 180, 900) for t in (0, 8, 16, 40)})
    ms = [1, 2, 3, 4, 8, 16, 17, 32, 64, 100, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    ns = [1, 2, 8, 16, 64, 128, 512, 1000, 2048, 2880, 4096, 8192, 14336, 32768, 65536, 131072, 248320, 1_048_576]
    out: set[tuple[int, int, int]] = set()
    for m in (1, 2, 4, 8, 16):
        for n in ns:
            for k in ks[::3]:
                out.add((m, n, k))
    for k in ks:
        for m, n in ((1, 8), (32, 32), (1, 2), (16, 64), (64, 64), (128, 128), (1, 1), (256, 4096), (4096, 4096)):
            out.add((m, n, k))
    while len(out) < max_queries:
        m = int(rng.choice(ms)) if rng.random() < 0.6 else int(rng.integers(1, 16385))
        n = int(rng.choice(ns)) if rng.random() < 0.6 else int(rng.integers(1, 131073))
        k = int(rng.choice(ks)) if rng.random() < 0.5 else int(np.exp(rng.uniform(np.log(8), np.log(262144))))
        out.add((m, n, k))
    shapes = sorted(out)
    if k_multiple > 1:
        shapes = [(m, n, max(k_multiple, k - k % k_multiple)) for m, n, k in shapes]
        shapes = sorted(set(shapes))
    rng.shuffle(shapes)  # type: ignore[arg-type]
    return [tuple(int(x) for x in s) for s in shapes[:max_queries]]  # type: ignore[misc]


@dataclass
class ScanResult:
    groups: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    queries: int = 0
    errors: int = 0
    seconds: float = 0.0


def scan(lt: Any, in_dtype: str, out_dtype: str, shapes: list[tuple[int, int, int]], *, budget_s: float) -> ScanResult:
    res = ScanResult()
    t0 = time.time()
    for m, n, k in shapes:
        if time.time() - t0 > budget_s:
            break
        res.queries += 1
        try:
            ans = lt.heuristic(m, n, k, in_dtype, out_dtype)
        except Exception:  # noqa: BLE001  (no algorithm for this shape: counted, the scan goes on)
            res.errors += 1
            continue
        key = answer_key(ans)
        res.groups.setdefault(key, []).append((m, n, k))
        res.answers.setdefault(key, ans)
    res.seconds = time.time() - t0
    return res


def _cost(s: tuple[int, int, int]) -> float:
    """Rough probe cost: black-box calls for the window walks (one placement per row or column)
    times what each call moves (A, B and C), plus CPU emulation that grows with K."""
    m, n, k = s
    slots = max(m, n)
    window = min(k, max(512, min(2048, 32 * slots)))
    calls = 2 * window / min(slots, 4096)
    moved = (m * k + k * n + m * n) / 2e6
    return calls * (1 + moved) + k / 2000 + (1e9 if m * n * 4 + (m + n) * k * 2 > 8e9 else 0)


def _informative(k: int, in_dtype: str) -> int:
    """0 for a K that shows the residue turn and split granules (K >= 256, not a multiple of the
    instruction or of the step), higher for K that hide them."""
    if k < 256:
        return 2
    if in_dtype.startswith("fp8"):
        return 0 if k % 32 == 16 else 1
    return 0 if k % 8 else 1


def pick(shapes: list[tuple[int, int, int]], count: int = 1, in_dtype: str = "fp16") -> list[tuple[int, int, int]]:
    """The cheapest shapes that can still separate candidates (see _informative)."""
    return sorted(shapes, key=lambda s: (_informative(s[2], in_dtype), _cost(s)))[:count]


def _tail_hit(ans: Any, k: int) -> bool:
    try:
        from fixbits.bugs.splitk_tail import expected_loss

        return bool(expected_loss(ans, k, 64))
    except Exception:  # noqa: BLE001  (no predicate, or an answer it cannot read: keep the shape)
        return False


def _hints(ans: Any, launch: dict[str, Any] | None) -> dict[str, Any]:
    h: dict[str, Any] = {}
    if ans is not None and int(getattr(ans, "splitk_num", 1)) > 1:
        h["splitk_num"] = int(ans.splitk_num)
    if launch:
        fam = launch.get("family", "unknown")
        names = " ".join(launch.get("kernels", []))
        if fam.startswith("gemv") or fam in ("gemmsn_chain", "workspace_gemv") or "dot_kernel" in names or "gemv" in names:
            h["instruction"] = "fma"
        elif fam.startswith("nvjet") or fam.startswith("cutlass"):
            h["instruction"] = "tc"
    return h


def evidence_name(in_dtype: str, out_dtype: str, key: str) -> str:
    """evidence/<in>_<answer>.json for fp32 outputs, <in>_<out>_<answer>.json otherwise: the same
    answer key recurs across output dtypes, and one pair's probe must not overwrite another's."""
    return f"{in_dtype}_{key}.json" if out_dtype == "fp32" else f"{in_dtype}_{out_dtype}_{key}.json"


def _dump_evidence(out_dir: Path, in_dtype: str, out_dtype: str, key: str, rep: tuple[int, int, int],
                   hints: dict[str, Any], launch: Any, res: Any, cap: int = 6000) -> None:
    """Every walk and outcome of one probe, for offline replay of the reasoning (small JSON)."""
    d = out_dir / "evidence"
    d.mkdir(parents=True, exist_ok=True)
    walks = []
    n = 0
    for w in res.evidence:
        take = max(0, min(len(w.triples), cap - n))
        n += take
        walks.append({"walk": w.walk, "calls": w.calls, "triples": [list(t) for t in w.triples[:take]],
                      "outcomes": list(w.outcomes[:take])})
    doc = {"key": key, "in_dtype": in_dtype, "out_dtype": out_dtype, "shape": list(rep), "hints": {k: v for k, v in hints.items()}, "launch": launch,
           "status": res.status, "notes": list(res.notes), "calls": res.calls, "dropped_tail": res.dropped_tail,
           "desc": res.desc.to_dict() if res.desc else None,
           "survivors": [x.to_dict() for x in res.survivors[:8]], "walks": walks}
    (d / evidence_name(in_dtype, out_dtype, key)).write_text(json.dumps(doc, separators=(",", ":"), default=str))


def verify_entry(backend: Any, desc: Any, shapes: list[tuple[int, int, int]], *, seed: int, draws: int = 2,
                 cells: int = 8) -> tuple[int, int, list[str]]:
    """(shapes verified, shapes tried, mismatching shapes 'MxNxK'): emulator vs cuBLAS on sampled cells."""
    from fixbits.probe.recover import verify_draws

    good, notes = 0, []
    for i, (m, n, k) in enumerate(shapes):
        ok, _ = verify_draws(backend, [desc], m, n, k, seed=seed + 17 * i, draws=draws, cells=cells)
        if ok[0]:
            good += 1
        else:
            notes.append(f"{m}x{n}x{k}")
    return good, len(shapes), notes


_BACKENDS: dict[tuple[str, str], Any] = {}
# with host-built operands (an emulator backend, CPU draws) shapes above this many elements are
# never used; a device backend builds probe calls and draws where it runs, bounded by memory only
MAX_ELEMENTS = 150_000_000


def _elements(s: tuple[int, int, int]) -> int:
    m, n, k = s
    return m * k + k * n + m * n


def _usable(s: tuple[int, int, int], device: bool) -> bool:
    if not device:
        return _elements(s) <= MAX_ELEMENTS
    from fixbits.cublas.backend import MAX_CALL_BYTES, call_bytes

    return call_bytes(*s) <= MAX_CALL_BYTES  # the verification draws need the most


def _shape_of(x: str) -> tuple[int, int, int]:
    m, n, k = (int(v) for v in x.split("x"))
    return (m, n, k)


def _orientation(sh: tuple[int, ...]) -> bool | None:
    """A GEMV shape's side as KVariant.n1 reads it (True: N == 1, False: M == 1); None for a GEMM."""
    m, n = int(sh[0]), int(sh[1])
    return True if n == 1 else False if m == 1 else None


def _orientation_variants(sides: list[tuple[bool, Any, tuple[int, int, int]]]) -> list[dict[str, Any]]:
    """One variant per GEMV orientation (all K): the workspace GEMV loads K two at a time when
    N == 1 and one at a time when M == 1 under one answer key (H200 s9-s11)."""
    return [{"k_min": 1, "k_max": None, "desc": d.to_dict(), "shape": list(sh), "n1": n1} for n1, d, sh in sides]


def _family_key(ans: Any) -> tuple[int, int, bool]:
    return (int(getattr(ans, "algo_id", -1)), int(getattr(ans, "reduction_scheme", 0)),
            int(getattr(ans, "splitk_num", 1)) > 1)


def _with_split(desc: dict[str, Any], splitk: int) -> dict[str, Any] | None:
    """The family descriptor with its level-0 split count set to this answer's SPLITK_NUM."""
    cuts = desc.get("k_cuts") or []
    if cuts and cuts[0].get("merge") == "reduce_1block":  # the workspace GEMV: P blocks dealt K round-robin
        return {**desc, "k_cuts": [{**cuts[0], "count": splitk}] + list(cuts[1:])} if splitk > 1 else None
    if splitk <= 1:
        return desc if not cuts or cuts[0].get("count") is None or cuts[0]["layout"] != "contiguous" else None
    if not cuts or cuts[0]["layout"] != "contiguous" or cuts[0].get("count") is None:
        return None
    c0 = dict(cuts[0])
    c0["count"] = splitk
    if c0.get("merge", "chain") != "chain" and splitk & (splitk - 1):
        return None
    return {**desc, "k_cuts": [c0] + list(cuts[1:])}


def _split_of(key: str) -> int:
    """SPLITK_NUM from an answer key ('a24-t11-s12-r2-...' -> 12; 's-1' -> -1)."""
    import re

    m = re.search(r"-s(-?\d+)-", key)
    return int(m.group(1)) if m else 1


def _adapt(desc: dict[str, Any], from_split: int, splitk: int) -> dict[str, Any] | None:
    """A known answer's descriptor carried to an answer of the same algo with SPLITK_NUM
    ``splitk``: the level-0 split count set, stripped (split -> single pass) or added (single pass
    -> split: granule 8, 64 when 64 | K for the tensor-core path, granule 1 for the scalar one)."""
    src_split, dst_split = from_split > 1, splitk > 1
    if src_split == dst_split:
        return _with_split(desc, splitk) if dst_split else desc
    cuts = list(desc.get("k_cuts") or [])
    if src_split:
        if not cuts or cuts[0]["layout"] != "contiguous" or cuts[0].get("count") is None:
            return None
        return {**desc, "k_cuts": cuts[1:]}
    fma = desc.get("instruction") == "fma"
    top = {"layout": "contiguous", "count": splitk, "span": None, "granule": 1 if fma else 8, "span_rule": "ceil",
           "merge": "chain"}
    if not fma:
        top["aligned_granule"] = 64
    return {**desc, "k_cuts": [top] + cuts}


def _reduction_variants(desc: Any) -> list[Any]:
    """A split's partials and merge in the output dtype (split-K reductions of OUTPUT_TYPE or in
    place write fp16/bf16 partials when C is fp16/bf16), for a descriptor carried from fp32 C."""
    if desc.out_dtype == "fp32" or not desc.k_cuts or desc.k_cuts[0].count is None:
        return []
    o = desc.out_dtype
    return [desc.replace(partial_dtype=o, merge_dtype=o), desc.replace(partial_dtype=o),
            desc.replace(merge_dtype=o)]


def _granule_variants(desc: Any) -> list[Any]:
    """A tensor-core split's span granule read other ways: the K-loop step, 64, 128, or 8 with 64
    when 64 | K. A base carries its own granule to answers whose kernel rounds spans differently,
    and shapes where ceil(K / count) rounds alike both ways cannot tell them apart (H100 s38: 8
    fp8_e4m3 a66 entries carried at granule 64 or 8/64 missed every cell of 16 fresh shapes; their
    kernels round to 128, the step, as 394 other fp8 a66 split entries do)."""
    from fixbits.desc import KCut

    c0 = desc.k_cuts[0] if desc.k_cuts else None
    if (desc.instruction == "fma" or c0 is None or c0.layout != "contiguous" or c0.count is None or c0.count < 2
            or c0.merge == "reduce_1block"):
        return []
    readings = [(g, None) for g in dict.fromkeys((desc.k_loop_step, 64, 128))] + [(8, 64)]
    out = []
    for g, aligned in readings:
        if (g, aligned) == (c0.granule, c0.aligned_granule):
            continue
        cut = KCut("contiguous", count=c0.count, granule=g, span_rule=c0.span_rule, merge=c0.merge, aligned_granule=aligned)
        out.append(desc.replace(k_cuts=(cut,) + desc.k_cuts[1:]))
    return out


def granule_reading(desc: Any) -> str:
    """A split's span granule as records write it: "128", or "8/64" (8, and 64 when 64 | K); "-"
    without a counted split."""
    c = desc.k_cuts[0] if desc.k_cuts else None
    if c is None or c.count is None:
        return "-"
    return f"{c.granule}" + (f"/{c.aligned_granule}" if c.aligned_granule else "")


def _lane_variants(desc: Any) -> list[Any]:
    """A GEMV's lane level (strided, or folded by butterfly) with other lane counts, tile widths
    and layouts (answers of one gemv algo differ in CUSTOM_OPTION, which sets the lanes: H200 s2b)."""
    from fixbits.desc import KCut

    if desc.instruction != "fma" or any(c.merge == "reduce_1block" for c in desc.k_cuts):
        return []  # the workspace GEMV's lanes are its 128 threads, fixed by the kernel
    idx = next((i for i, c in enumerate(desc.k_cuts) if c.layout == "strided" or c.merge != "chain"), None)
    if idx is None:
        return []
    c = desc.k_cuts[idx]
    merge = c.merge if c.merge != "chain" else "butterfly_down"
    cuts = []
    for count in (2, 4, 8, 16, 32, 64, 128):
        # lanes dealt tiles of 1 or 64 (fp16 c75, bf16 c56) or contiguous slices (bf16 c92): H200 s2b
        for span in dict.fromkeys((c.span or 1, 1, 64)):
            cuts.append(KCut("strided", count=count, span=span, merge=merge))  # type: ignore[arg-type]
        # tile 64 capped at ceil(K / lanes) (19 fp32 a13 answers, fitted from H200 cells in s12/s13)
        cuts.append(KCut("strided", count=count, span=64, span_rule="capped", merge=merge))  # type: ignore[arg-type]
        cuts.append(KCut("contiguous", count=count, merge=merge))  # type: ignore[arg-type]
    return [desc.replace(k_cuts=desc.k_cuts[:idx] + (cut,) + desc.k_cuts[idx + 1:]) for cut in cuts if cut != c]


def _get_backend(task: dict[str, Any], backend: Any) -> Any:
    backend = backend if backend is not None else task.get("backend")
    if backend is None:
        bk = (task["in_dtype"], task["out_dtype"])
        if bk not in _BACKENDS:
            from fixbits.cublas.backend import CublasBackend

            _BACKENDS[bk] = CublasBackend(*bk)
        backend = _BACKENDS[bk]
    return backend


def _verify_shapes(task: dict[str, Any], count: int, exclude: tuple[int, int, int] | None = None) -> list[tuple[int, int, int]]:
    """Shapes the done-criterion tests first (realistic / fuzz shapes reaching this answer), then
    the cheapest informative shapes of the scan; K spread so a K-dependent rule shows."""
    prio = [tuple(x) for x in task.get("prio", [])]
    group = [tuple(x) for x in task["group"]]
    out: list[tuple[int, int, int]] = []
    ks: set[int] = set()
    for sh in pick(prio, len(prio), task["in_dtype"]) + pick(group, 4 * count + 4, task["in_dtype"]):
        if sh == exclude or sh in out:
            continue
        if sh[2] in ks and len(out) < count - 1:
            continue
        out.append(sh)  # type: ignore[arg-type]
        ks.add(sh[2])
        if len(out) >= count:
            break
    # a GEMV answer reached from both sides (M == 1 and N == 1) is verified on both: one key, two loads
    sides = {_orientation(sh) for sh in group} - {None}
    have = {_orientation(sh) for sh in out} | ({_orientation(exclude)} if exclude else set())
    for o in (False, True):
        if o not in sides or o in have:
            continue
        other = [sh for sh in prio + group if _orientation(sh) == o and sh != exclude]
        if other:
            out.append(pick(other, 1, task["in_dtype"])[0])  # type: ignore[arg-type]
    return out + _coverage_shapes(prio + group, out, exclude)


# the deepest verification K picked per answer (gemmSN chunks show past K = 512 already)
DEEP_K_CAP = 32768


def _coverage_shapes(pool: list[tuple[int, ...]], chosen: list[tuple[int, int, int]],
                     exclude: tuple[int, int, int] | None) -> list[tuple[int, int, int]]:
    """Shapes the cheapest picks leave out but the H200 showed to matter (run s2b): the answer's
    deepest K (a gemmSN chain cuts K into fixed chunks that only a K past the probe's shows) and
    a K that is a multiple of 64 (split-K spans then round to 64, not 8). At most two more; the deep
    one at most DEEP_K_CAP when the answer has such a shape (CPU emulation per answer)."""
    extra: list[tuple[int, int, int]] = []
    cand = [s for s in pool if s != exclude and s not in chosen]
    if not cand:
        return extra
    have = [s[2] for s in chosen] + ([exclude[2]] if exclude else [])
    capped = [s for s in cand if s[2] <= DEEP_K_CAP] or cand  # emulation grows with K: every answer pays it
    deep = max(capped, key=lambda s: (s[2], -_cost(s)))  # type: ignore[arg-type]
    if not have or deep[2] > max(have):
        extra.append(deep)  # type: ignore[arg-type]
    if not any(k % 64 == 0 for k in have + [s[2] for s in extra]):
        al = [s for s in cand if s[2] % 64 == 0 and s not in extra]
        if al:
            extra.append(min(al, key=_cost))  # type: ignore[arg-type]
    return extra


def verify_answers(batch: dict[str, Any], backend: Any = None) -> list[dict[str, Any]]:
    """Phase B of reconstruct: family descriptors checked on other answers' own shapes."""
    from fixbits.desc import GEMMDesc

    out = []
    for task in batch["items"]:
        t1 = time.time()
        key, group = task["key"], [tuple(x) for x in task["group"]]
        base = {"key": key, "rep": list(group[0]) if group else [0, 0, 0], "group_size": task["group_size"],
                "kernels": [], "notes": [], "calls": 0, "bad": [], "good": 0, "tried": 0, "seconds": 0.0,
                "probed": False, "phase": "B"}
        if not group:
            out.append({**base, "status": "failed", "why": "no shape reaching this answer fits in device memory"})
            continue
        shapes = _verify_shapes(task, task.get("b_shapes", 2))
        base["rep"] = list(shapes[0])
        if time.time() > batch["deadline"]:
            out.append({**base, "status": "skipped"})
            continue
        bk = _get_backend(task, backend)
        # the per-answer cap: checked between draws, so one answer cannot hold a worker for minutes
        task = {**task, "until": min(batch["deadline"], t1 + float(task.get("per_answer_s", float("inf"))))}
        bases = [GEMMDesc.from_dict(d) for d in task.get("descs") or [task["desc"]]]
        froms = _from_keys(task, len(bases))
        sides: dict[bool, list[tuple[int, int, int]]] = {}
        for sh in group:
            o = _orientation(sh)
            if o is not None:
                sides.setdefault(o, []).append(sh)  # type: ignore[arg-type]
        try:
            if len(sides) == 2:  # a GEMV answer reached from both sides: each side predicted on its own shapes
                out.append(_predict_sides(bk, bases, froms, task, sides, base))
                continue
            desc, shapes, why, src = _predict(bk, bases, task, shapes)
        except OutOfTime as exc:
            spent = round(time.time() - t1, 1)
            if time.time() > batch["deadline"]:  # the run's deadline, not this answer's: left for a later run
                out.append({**base, "status": "skipped", "seconds": spent})
            else:
                out.append({**base, "status": "failed", "seconds": spent, "timeout": True,
                            "why": f"phase B stopped at its {task.get('per_answer_s')} s cap ({exc})"})
            continue
        except Exception as exc:  # noqa: BLE001
            out.append({**base, "status": "failed", "why": f"verify crashed: {type(exc).__name__}: {exc}",
                        "seconds": round(time.time() - t1, 1)})
            continue
        base["seconds"] = round(time.time() - t1, 1)
        if desc is not None:
            out.append({**base, "status": "recovered", "desc": desc.to_dict(), "good": len(shapes),
                        "tried": len(shapes), "rep": list(shapes[0]),
                        "note": f"predicted from {froms[src]}{why}, verified by draws on "
                                + ", ".join(f"{m}x{n}x{k}" for m, n, k in shapes)})
        else:
            names = ", ".join(dict.fromkeys(froms[:4])) + (f" (+{len(set(froms)) - 4})" if len(set(froms)) > 4 else "")
            out.append({**base, "status": "failed", "bad": [],
                        "why": f"the family descriptors of {names} fail here ({why})"})
    return out


class OutOfTime(RuntimeError):
    """Phase B passed its per-answer cap (or the run's deadline) between two draws."""


def _check_time(task: dict[str, Any], where: str) -> None:
    """Raise OutOfTime past ``task['until']`` (set by verify_answers; absent: no cap)."""
    until = task.get("until")
    if until is not None and time.time() > until:
        raise OutOfTime(f"before {where}")


def _predict_sides(bk: Any, bases: list[Any], froms: list[str], task: dict[str, Any],
                   sides: dict[bool, list[tuple[int, int, int]]], base: dict[str, Any]) -> dict[str, Any]:
    """Phase B for a GEMV answer whose shapes have N == 1 and M == 1: one prediction per side, kept as
    orientation variants when they differ (one descriptor when they agree)."""
    found: list[tuple[bool, Any, list[tuple[int, int, int]], int]] = []
    for o in (False, True):
        t2 = {**task, "group": sides[o], "prio": [x for x in task.get("prio", []) if _orientation(tuple(x)) == o]}
        desc, used, why, src = _predict(bk, bases, t2, _verify_shapes(t2, task.get("b_shapes", 2)))
        if desc is None:
            names = ", ".join(dict.fromkeys(froms[:4])) + (f" (+{len(set(froms)) - 4})" if len(set(froms)) > 4 else "")
            return {**base, "status": "failed", "bad": [], "why": f"the family descriptors of {names} fail here "
                    f"when {'N' if o else 'M'} == 1 ({why})"}
        found.append((o, desc, used, src))
    shapes = [sh for _, _, used, _ in found for sh in used]
    where = ", ".join(f"{m}x{n}x{k}" for m, n, k in shapes)
    rec = {**base, "status": "recovered", "desc": found[0][1].to_dict(), "good": len(shapes), "tried": len(shapes),
           "rep": list(shapes[0])}
    if found[0][1] == found[1][1]:
        return {**rec, "note": f"predicted from {froms[found[0][3]]}, verified by draws on both sides: {where}"}
    variants = _orientation_variants([(o, d, used[0]) for o, d, used, _ in found])
    return {**rec, "variants": variants,
            "note": f"predicted per orientation (M == 1 from {froms[found[0][3]]}, N == 1 from "
                    f"{froms[found[1][3]]}), verified by draws on {where}"}


def _step_variants(desc: Any) -> list[Any]:
    """The family descriptor and its K-loop step / residue-turn variants: answers of one family
    differ in tile, and the tile's K depth is the step (H200 s2-1: tiles of one algo stepped 32,
    64 and 128)."""
    out = [desc]
    ik = max(1, desc.instruction_k)
    if desc.instruction == "fma":
        return out
    for res in ("last", "first"):  # the simplest reading first (candidates.preference)
        for step in (64, 32, 128, 256):
            if step % ik == 0 and (step, res) != (desc.k_loop_step, desc.residue):
                out.append(desc.replace(k_loop_step=step, residue=res))
    return out


def _predict(bk: Any, bases: list[Any], task: dict[str, Any], shapes: list[tuple[int, int, int]]
             ) -> tuple[Any, list[tuple[int, int, int]], str, int]:
    """(descriptor, shapes it was verified on, note, index of its base) or (None, [], why, -1):
    the first of the known descriptors (the family's own first, then other answers of the algo)
    or their step/residue/lane variants that cuBLAS's bytes leave, on this answer's own shapes;
    shapes where surviving variants still differ are added (K chosen where they part)."""
    from fixbits.probe.recover import _pin_order, verify_draws
    from fixbits.probe.stages import prefer_step

    origin: dict[Any, int] = {}
    for i, b in enumerate(bases):
        for d in _step_variants(b):
            origin.setdefault(d, i)
    for i, b in enumerate(bases):
        for d in _reduction_variants(b) + _granule_variants(b):
            origin.setdefault(d, i)
    lanes = next((i for i, b in enumerate(bases) if _lane_variants(b)), None)  # one base's lanes (emulation cost)
    if lanes is not None:
        for d in _lane_variants(bases[lanes]):
            origin.setdefault(d, lanes)
    alive = list(origin)
    used: list[tuple[int, int, int]] = []
    queue = sorted(shapes, key=lambda sh: sh[2])  # emulation grows with K: the variants thin out on small K first
    extra_rounds = 2
    while queue:
        sh = queue.pop(0)
        where = "x".join(map(str, sh))
        _check_time(task, "drawing on " + where)
        ok, _ = verify_draws(bk, alive, *sh, seed=task["seed"] + 11 + sh[2], draws=2,
                             tick=lambda: _check_time(task, "emulating on " + where))  # noqa: B023
        used.append(sh)
        alive = [d for d, o in zip(alive, ok, strict=True) if o]
        if not alive:
            return None, [], ", ".join(f"{m}x{n}x{k}" for m, n, k in used), -1
        if not queue and len(alive) > 1 and extra_rounds:
            extra_rounds -= 1
            order = [x for x, _ in _pin_order(alive, list(task.get("prio", [])) + pick(task["group"], 200, task["in_dtype"]))
                     if x not in used]
            if order:
                queue.append(order[0])
    settled_note = ""
    if len(alive) > 1:
        # the answer's STAGES_ID settles the step where the draws cannot (fixbits.probe.stages)
        by_stage = prefer_step(alive, task.get("key", ""))
        if len(by_stage) < len(alive):
            alive = by_stage
            settled_note = f" (step {alive[0].k_loop_step} from the answer's STAGES_ID)"
    if len(alive) > 1:
        alive, settled = _settle(bk, alive, task)
        used += [sh for sh in settled if sh not in used]
        froms = _from_keys(task, len(bases))
        # the same answer's own descriptor from another output dtype (its fp32 cells separated the
        # readings that narrow outputs cannot): kept when the draws leave it among the survivors
        own = [b for b, f in zip(bases, froms, strict=True) if f is not None and f == task.get("key") and b in alive]
        if len(alive) > 1 and own:
            alive = own[:1]
            settled_note += " (the draws here leave other readings too: kept this answer's own reading)"
        where = ", ".join("x".join(map(str, sh)) for sh in settled)
        if not alive:
            return None, [], f"no reading survives the settling draws on {where}", -1
        if len(alive) > 1:
            why = "; ".join(f"step {d.k_loop_step}, residue {d.residue}" for d in alive[:4])
            return None, [], (f"ambiguous: {len(alive)} readings ({why}) differ on this answer's shapes and "
                              f"survive {SETTLE_DRAWS} more draws on {where}"), -1
    src = origin[alive[0]]
    b = bases[src]
    note = "" if alive[0] == b else (f" (step {alive[0].k_loop_step}, residue {alive[0].residue})"
                                     if alive[0].k_cuts == b.k_cuts else _cut_note(alive[0], b))
    return alive[0], used, note + settled_note, src


def _cut_note(got: Any, base: Any) -> str:
    """What a prediction changed in its base's K cuts, for the entry's note."""
    c, b = got.k_cuts[0], base.k_cuts[0] if base.k_cuts else None
    if b is not None and got.instruction != "fma" and c.count == b.count and (c.granule, c.aligned_granule) != (b.granule, b.aligned_granule):
        return f" (split span granule {c.granule}" + (f", {c.aligned_granule} when {c.aligned_granule} | K)" if c.aligned_granule else ")")
    return " (other lanes)"


def _from_keys(task: dict[str, Any], n: int) -> list[str | None]:
    """The answer key each of a phase-B task's n known descriptors was taken from."""
    return list(task.get("from_keys") or [task.get("from_key")] * n)


SETTLE_DRAWS = 8  # per shape; H200 s13: a reading with the wrong K-loop step missed 1 to 5 of 10 sweep draws
SETTLE_CELLS = 32


def _settle_kinds(alive: list[Any], k: int, seed: int) -> tuple[str, ...]:
    """Draw kinds for settling: a narrow output rounds away the fp32 ulps by which readings part
    on ordinary and wide draws (s14/n14: seven fp16->fp16 answers left ambiguous), so its draws
    are mostly spike draws (fixbits.probe.spikes), half of them planted across the K positions
    where the readings group K differently (H100 s36: a24 answers whose K-loop steps 32 and 64
    survived 8 random-spike draws on each of two shapes)."""
    from fixbits.emulate import group_starts
    from fixbits.probe import spikes

    if not spikes.hides_ulps(alive[0].out_dtype):
        return ("ordinary", "wide")
    at: list[str] = []
    if all(d.instruction != "fma" for d in alive):  # a scalar chain starts a group at every k
        starts = [group_starts(d, k) for d in alive]
        at = [spikes.at_kind(p) for p in (spikes.straddling(starts, k, seed + i) for i in range(2)) if p]
    if len(at) < 2:
        return (spikes.KIND, spikes.KIND, "ordinary", "wide")
    return (at[0], spikes.KIND, at[1], "wide")


def _settle(bk: Any, alive: list[Any], task: dict[str, Any]) -> tuple[list[Any], list[tuple[int, int, int]]]:
    """(readings left, shapes drawn on): readings that survived the prediction draws yet differ
    on some shape of the answer are held to more draws and cells where they part most. Phase B
    used to keep the first survivor; in run s13/a2x that was a wrong K-loop step on seven
    answers (32 for 64, 64 for 32, 128 for 64), each wrong on 1 to 5 of 10 later draws.
    Readings equal at every K of the answer's shapes that _pin_order samples (up to 16, spread
    over K mod 128) but apart at other K are held to a shape the heuristic sends to this answer
    at such a K (_reach_parting_k); only when none is found is the first kept (_pin_order
    compares at any K: with its old 64k cap, deep answers kept residue last where the kernel
    turns it first)."""
    from fixbits.probe.recover import _pin_order, verify_draws

    shapes = list(task.get("prio", [])) + pick(task["group"], 200, task["in_dtype"])
    used: list[tuple[int, int, int]] = []
    cache: dict[tuple[int, int], Any] = {}
    asked: set[tuple[int, int, int]] = set()
    while True:
        order = _pin_order(alive, shapes, cache=cache)
        if order:
            if len(used) >= 2:  # two settling shapes and they still part: ambiguous
                return alive, used
            sh = next((x for x, _ in order if x not in used), order[0][0])
        else:
            found = _reach_parting_k(bk, alive, task, asked) if len(used) < 3 else None
            if found is None:
                return alive[:1], used
            sh = found
        where = "x".join(map(str, sh))
        _check_time(task, "settling on " + where)
        ok, _ = verify_draws(bk, alive, *sh, seed=task["seed"] + 29 + sh[2], draws=SETTLE_DRAWS, cells=SETTLE_CELLS,
                             kinds=_settle_kinds(alive, sh[2], task["seed"] + sh[2]),
                             tick=lambda: _check_time(task, "emulating on " + where))  # noqa: B023
        used.append(sh)
        alive = [d for d, o in zip(alive, ok, strict=True) if o]
        if len(alive) <= 1:
            return alive, used


HEURISTIC_ASKS = 24  # per answer: host-side heuristic queries, about a millisecond each


def parting_unit(in_dtype: str) -> int:
    """The K step between shapes asked where readings part: cuBLASLt's fp8 path takes K in
    multiples of 16 (the sweep's fp8_k), the 16-bit ones any K (8 keeps vector loads aligned)."""
    return 16 if in_dtype.startswith("fp8") else 8


def _parting_ks(alive: list[Any], k: int, unit: int) -> Any:
    """K near ``k`` (within a quarter, multiples of ``unit`` apart) where the readings part, nearest
    first: a few steps of the unit (residue turn, step), then shifts of ceil(K / count) by 32 and
    64 (a split's span granule shows only where that rounds differently)."""
    from fixbits.probe.recover import _signature

    counts = {d.k_cuts[0].count for d in alive if d.k_cuts and d.k_cuts[0].count}
    offsets = [unit * j for j in (1, 2, 3, 5)] + sorted({g * c * j for c in counts for g in (32, 64) for j in (1, 2, 3)})
    for off in offsets:
        for kk in (k + off, k - off):
            if kk < 3 or abs(kk - k) > k // 4 or kk % unit:
                continue
            if len({_signature(d, kk) for d in alive}) > 1:
                yield kk


def _reach_parting_k(bk: Any, alive: list[Any], task: dict[str, Any], asked: set[tuple[int, int, int]]
                     ) -> tuple[int, int, int] | None:
    """A shape the heuristic sends to this answer at a K where the readings part, when none of the
    answer's known shapes parts them. H100 s38: fp8 a66 answers seen at two K each kept a span
    granule of 64 where the kernel rounds to 128 (or the other way round), and every cell of the
    fresh sweep shapes that reached them missed. None without a heuristic (the emulator backend)."""
    try:
        lt = getattr(bk, "lt", None)
    except OSError:  # no cuBLASLt to load: a backend without a heuristic
        lt = None
    key = task.get("key")
    if lt is None or not key or len(asked) >= HEURISTIC_ASKS:
        return None
    from fixbits.probe.profile import answer_key

    unit = parting_unit(task["in_dtype"])
    for m, n, k in pick(task["group"], 3, task["in_dtype"]):
        for kk in _parting_ks(alive, k, unit):
            sh = (m, n, kk)
            if sh in asked:
                continue
            if len(asked) >= HEURISTIC_ASKS:
                return None
            asked.add(sh)
            _check_time(task, f"asking the heuristic at {m}x{n}x{kk}")
            try:
                got = answer_key(lt.heuristic(m, n, kk, task["in_dtype"], task["out_dtype"]))
            except Exception:  # noqa: BLE001  (no algorithm there: another K)
                continue
            if got == key:
                return sh
    return None


def refinements(desc: Any) -> list[tuple[Any, str]]:
    """Readings a probe at one K cannot see, tried when the probed descriptor misses another
    shape of its answer (H200 run s2b): split-K spans that round to 64 when 64 | K
    (KCut.aligned_granule), and gemmSN chains that walk each part in fixed chunks (a part longer
    than the chunk only past the probed K: count c x 512/c, 128 or 256)."""
    from fixbits.desc import KCut

    out: list[tuple[Any, str]] = []
    for i, c in enumerate(desc.k_cuts):
        # a GEMV lane tile read at one K as ceil(K / lanes) (or as 64) may be 64 capped at
        # ceil(K / lanes): 19 fp32 a13 answers on the H200 (s12/s13 cells)
        if c.layout == "strided" and c.count and c.span_rule != "capped" and c.merge != "chain":
            cap = dataclasses.replace(c, span=64, span_rule="capped")
            out.append((desc.replace(k_cuts=desc.k_cuts[:i] + (cap,) + desc.k_cuts[i + 1:]),
                        f"lane tile 64 capped at ceil(K / {c.count})"))
    c0 = desc.k_cuts[0] if desc.k_cuts else None
    if c0 is None or c0.layout != "contiguous" or c0.count is None:
        return out
    if c0.aligned_granule is None and c0.count > 1:
        for g in dict.fromkeys(x for x in (c0.granule, 8) if x < 64):
            cut = KCut("contiguous", count=c0.count, granule=g, span_rule=c0.span_rule, merge=c0.merge,
                       aligned_granule=64)
            out.append((desc.replace(k_cuts=(cut,) + desc.k_cuts[1:]), f"split span granule {g}, 64 when 64 | K"))
    if desc.instruction == "fma" and len(desc.k_cuts) == 1 and c0.count > 1:
        for span in dict.fromkeys(s for s in (512 // c0.count, 128, 256, 512, 64) if s > 0):
            for merge in dict.fromkeys((c0.merge, "chain")):
                top = KCut("contiguous", count=c0.count, granule=c0.granule, span_rule=c0.span_rule, merge=merge)  # type: ignore[arg-type]
                out.append((desc.replace(k_cuts=(top, KCut("contiguous", span=span))),
                            f"parts walked in chunks of {span}"))
    return out


def refine(backend: Any, desc: Any, shapes: list[tuple[int, int, int]], bad: list[str], *, seed: int
           ) -> tuple[Any, str] | None:
    """The first refinement of ``desc`` that cuBLAS's bytes accept on the missed shapes and then
    on every verification shape, or None."""
    missed = [_shape_of(x) for x in bad]
    for cand, why in refinements(desc):
        if verify_entry(backend, cand, missed, seed=seed)[0] < len(missed):
            continue
        if verify_entry(backend, cand, shapes, seed=seed + 3)[0] == len(shapes):
            return cand, why
    return None


def _k_split(backend: Any, c1: list[Any], k1: int, c2: list[Any], k2: int, group: list[tuple[int, int, int]],
             seed: int, deadline: float, steps: int = 7) -> tuple[Any, int, Any, int] | None:
    """Where the answer's arithmetic turns from the readings ``c1`` (probed at k1) to ``c2``
    (probed at k2 > k1): bisection over the group's K between them, each side's readings (the
    probed one and those equal to it at its K) filtered by draws at the middle K. Returns
    (reading below, largest K verified for it, reading above, smallest K verified for it), or
    None when a K between them fits no reading of either side (not a K split)."""
    from fixbits.probe.recover import verify_draws

    by_k: dict[int, tuple[int, int, int]] = {}
    for sh in sorted(group, key=_cost):
        if k1 < sh[2] < k2:
            by_k.setdefault(sh[2], sh)
    ks = sorted(by_k)
    lo, hi = k1, k2
    for _ in range(steps):
        mid = [k for k in ks if lo < k < hi]
        if not mid or time.time() > deadline:
            break
        km = mid[len(mid) // 2]
        ok1, _ = verify_draws(backend, c1, *by_k[km], seed=seed + km, draws=2)
        if any(ok1):
            c1, lo = [d for d, o in zip(c1, ok1, strict=True) if o], km
            continue
        ok2, _ = verify_draws(backend, c2, *by_k[km], seed=seed + km, draws=2)
        if not any(ok2):
            return None
        c2, hi = [d for d, o in zip(c2, ok2, strict=True) if o], km
    return c1[0], lo, c2[0], hi


def run_answer(task: dict[str, Any], backend: Any = None) -> dict[str, Any]:
    """Profile, probe and verify one heuristic answer (runs in a worker process when parallel).
    A verification shape that the probed descriptor misses is probed itself: a different
    descriptor there splits the answer by K (both verified, the boundary searched), else the
    answer is reported with the mismatch."""
    from fixbits.desc import GEMMDesc
    from fixbits.probe.recover import probe

    t1 = time.time()
    key, group = task["key"], [tuple(x) for x in task["group"]]
    in_dtype = task["in_dtype"]
    if not group:
        return {"key": key, "rep": [0, 0, 0], "group_size": task["group_size"], "status": "failed",
                "why": "no shape reaching this answer fits in device memory (not probed)"}
    prio = [tuple(x) for x in task.get("prio", [])]
    rep = tuple(task["at"]) if task.get("at") else pick(group, 1, in_dtype)[0]
    out: dict[str, Any] = {"key": key, "rep": list(rep), "group_size": task["group_size"], "kernels": [],
                           "notes": [], "calls": 0, "bad": [], "good": 0, "tried": 0, "phase": task.get("phase", "A")}
    if time.time() > task["deadline"]:
        return {**out, "status": "skipped"}
    backend = _get_backend(task, backend)
    launch: dict[str, Any] | None = None
    try:
        if not task["profile_launch"]:
            raise RuntimeError("launch profiling off")
        from fixbits.cublas.profile import profile_call

        if hasattr(backend, "launcher"):
            fn = backend.launcher(*rep)
        else:
            from fixbits.inputs import draw

            a = draw((rep[0], rep[2]), in_dtype, "ordinary", 1)
            b = draw((rep[2], rep[1]), in_dtype, "ordinary", 2)
            fn = lambda: backend.gemm(a, b)  # noqa: E731
        launch = profile_call(fn).to_dict()
        out["kernels"] = list(launch.get("kernels", []))
    except Exception as exc:  # noqa: BLE001
        launch = {"error": f"{type(exc).__name__}: {exc}"}
    hints: dict[str, Any] = {}
    deadline = min(task["deadline"], time.time() + task["per_answer_s"])

    def probe_at(at: tuple[int, int, int]) -> Any:
        # other K of the same answer pin readings equal at this K (the prober walks the ones
        # where the readings part); a defect shape tells the split rule from the ceil rule
        others = [s for s in prio if s[2] != at[2]] + [s for s in pick(group, 400, in_dtype) if s[2] != at[2]]
        h = {**hints, "extra_shapes": others + pick([tuple(x) for x in task.get("defect_shapes", [])], 1, in_dtype)}
        return probe(backend, *at, arch=task["arch"], hints=h, seed=task["seed"], deadline=deadline), h

    try:
        hints = _hints(task["answer"], launch)
        res, used = probe_at(rep)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001
        return {**out, "status": "crashed", "seconds": round(time.time() - t1, 1),
                "why": f"probe crashed at {rep}: {type(exc).__name__}: {exc} | "
                       + traceback.format_exc(limit=4).replace("\n", " | ")}
    try:
        _dump_evidence(Path(task["out_dir"]), in_dtype, task["out_dtype"], key, rep, used, launch,  # type: ignore[arg-type]
                       res)
    except Exception:  # noqa: BLE001  (evidence is a debugging aid; never fail the answer for it)
        pass
    out.update(calls=res.calls, notes=list(res.notes), seconds=round(time.time() - t1, 1))
    if res.status != "recovered" or res.desc is None:
        return {**out, "status": res.status, "why": f"{res.status} at {rep}: " + "; ".join(res.notes)}
    shapes = [rep] + _verify_shapes(task, task["verify_shapes"], exclude=rep)  # type: ignore[list-item]
    try:
        good, tried, bad = verify_entry(backend, res.desc, shapes, seed=task["seed"] + 5)
    except Exception as exc:  # noqa: BLE001
        good, tried, bad = 0, 0, [f"verify crashed: {exc}"]
    out.update(status="recovered", desc=res.desc.to_dict(), good=good, tried=tried, bad=bad,
               seconds=round(time.time() - t1, 1))
    if not bad:
        return out
    if "crashed" not in bad[0]:
        try:
            ref = refine(backend, res.desc, shapes, bad, seed=task["seed"] + 5)
        except Exception as exc:  # noqa: BLE001  (a refinement is optional: the re-probe below decides)
            ref = None
            out["notes"].append(f"refinement crashed: {type(exc).__name__}: {exc}")
        if ref is not None:
            d, why = ref
            return {**out, "desc": d.to_dict(), "good": len(shapes), "tried": len(shapes), "bad": [],
                    "note": f"{why}: probed reading {res.desc.short_hash} missed {', '.join(bad)}; "
                            f"{d.short_hash} verified on all {len(shapes)} shapes"}
    if "crashed" in bad[0] or time.time() > deadline:  # a descriptor known to miss is never kept
        return {**out, "status": "unexplained", "why": f"descriptor probed at {rep} misses {', '.join(bad)} "
                "(no time to probe there)"}
    # the descriptor misses a shape of its own answer: probe there
    at2 = _shape_of(bad[0])
    try:
        res2, _ = probe_at(at2)
    except Exception as exc:  # noqa: BLE001
        out["notes"].append(f"re-probe at {bad[0]} crashed: {type(exc).__name__}: {exc}")
        return out
    if res2.status != "recovered" or res2.desc is None:
        out["notes"].append(f"re-probe at {bad[0]}: {res2.status}")
        return {**out, "status": "unexplained", "why": f"descriptor probed at {rep} misses {', '.join(bad)}; "
                f"re-probe at {bad[0]}: {res2.status}: " + "; ".join(res2.notes)}
    d1, d2 = res.desc, res2.desc
    o1, o2 = _orientation(rep), _orientation(at2)
    if o1 is not None and o2 is not None and o1 != o2:  # the miss is on the other side of a GEMV
        variants = _orientation_variants([(o1, d1, rep), (o2, d2, at2)])  # type: ignore[list-item]
        vgood = sum(1 for sh in shapes if verify_entry(backend, d2 if _orientation(sh) == o2 else d1, [sh],
                                                       seed=task["seed"] + 7)[0])
        if vgood < len(shapes):
            return {**out, "status": "unexplained", "why": f"split by orientation ({d1.short_hash} when "
                    f"{'N' if o1 else 'M'} == 1, {d2.short_hash} when {'N' if o2 else 'M'} == 1) still misses "
                    f"{len(shapes) - vgood} of {len(shapes)} verification shapes"}
        out.update(variants=variants, good=vgood, tried=len(shapes), bad=[], calls=out["calls"] + res2.calls,
                   note=f"split by orientation: {d1.short_hash} when {'N' if o1 else 'M'} == 1 (probed at "
                        f"{rep}), {d2.short_hash} when {'N' if o2 else 'M'} == 1 (probed at {at2}); verified "
                        f"{vgood}/{len(shapes)}")
        return out
    sides = sorted([(rep[2], [d1, *res.alternatives], rep), (at2[2], [d2, *res2.alternatives], at2)],
                   key=lambda x: x[0])
    (k1, c1, s1), (k2, c2, s2) = sides
    if d1 == d2 or k1 == k2:
        return {**out, "status": "unexplained", "why": f"descriptor probed at {rep} misses {', '.join(bad)}; the "
                "re-probe there finds " + ("the same descriptor" if d1 == d2 else "another one at the same K")}
    split = _k_split(backend, c1, k1, c2, k2, group, task["seed"] + 101, deadline)
    if split is None:
        return {**out, "status": "unexplained", "why": f"{c1[0].short_hash} holds at K={k1}, {c2[0].short_hash} at "
                f"K={k2}, no reading of either between: not a K split"}
    d1s, lo, d2s, hi = split
    variants = [{"k_min": 1, "k_max": lo, "desc": d1s.to_dict(), "shape": list(s1)},
                {"k_min": hi, "k_max": None, "desc": d2s.to_dict(), "shape": list(s2)}]
    # every verification shape must now be explained by its K's variant
    vgood = 0
    for sh in shapes:
        v = next((x for x in variants if x["k_min"] <= sh[2] and (x["k_max"] is None or sh[2] <= x["k_max"])), None)
        if v is not None and verify_entry(backend, GEMMDesc.from_dict(v["desc"]), [sh], seed=task["seed"] + 7)[0]:
            vgood += 1
    if vgood < len(shapes):
        return {**out, "status": "unexplained", "why": f"split by K at ({lo}, {hi}) still misses "
                f"{len(shapes) - vgood} of {len(shapes)} verification shapes"}
    out.update(variants=variants, good=vgood, tried=len(shapes), bad=[], calls=out["calls"] + res2.calls,
               note=f"split by K: {d1s.short_hash} up to K={lo}, {d2s.short_hash} from K={hi} "
                    f"(verified {vgood}/{len(shapes)})")
    return out


def _priority(lt: Any, in_dtype: str, out_dtype: str, shapes: list[tuple[int, int, int]],
              sc: ScanResult) -> dict[str, list[tuple[int, int, int]]]:
    """The answers the done-criterion shapes reach (added to the scan's groups)."""
    prio: dict[str, list[tuple[int, int, int]]] = {}
    for sh in shapes:
        if in_dtype.startswith("fp8") and sh[2] % 16:
            continue
        try:
            ans = lt.heuristic(*sh, in_dtype, out_dtype)
        except Exception:  # noqa: BLE001  (no algorithm: the sweep reports it)
            continue
        key = answer_key(ans)
        prio.setdefault(key, []).append(sh)
        sc.answers.setdefault(key, ans)
        g = sc.groups.setdefault(key, [])
        if sh not in g:
            g.append(sh)
    return prio


def reconstruct(*, arch: str, in_dtype: str, out_dtype: str, out_dir: Path, budget_s: float,
                max_queries: int = 30000, scan_budget_s: float | None = None, verify_shapes: int = 3,
                log: Any = print, seed: int = 0, lt: Any = None, backend: Any = None,
                profile_launch: bool = True, per_answer_s: float = 60.0, workers: int = 1,
                priority_shapes: list[tuple[int, int, int]] | None = None,
                scan_shapes: list[tuple[int, int, int]] | None = None,
                hints: dict[str, Any] | None = None, only: list[str] | None = None,
                device_label: str = "") -> dict[str, Any]:
    """The whole pipeline on the local GPU; returns a summary dict (also written as JSON).
    ``lt`` / ``backend`` replace cuBLASLt (tests pass a fake heuristic and the emulator).

    Work order (one priority queue over one worker pool): answers reached by
    ``priority_shapes`` first (the verification sweep's shapes), each family's representative
    probe, then the family's other answers predicted and verified by draws as soon as the
    representative is in, then whatever they leave probed one by one; the rest of the scan after.
    ``hints`` (answer key -> GEMMDesc of this dtype pair, e.g. from a profile of the same library
    with another output dtype) serve as known descriptors: an answer of an algo they cover is
    first predicted from them (verified by draws), probed only when none holds.
    ``only`` (answer-key patterns, see ``key_selector``) restricts the work to those answers:
    a re-probe of one family gets the whole budget and the GPU to itself.
    ``device_label`` (the GPU's name) goes into the note of every entry this run adds: the shape ->
    answer map is the device's own, so an entry says which card first verified it.
    """
    import heapq

    t0 = time.time()
    if lt is None:
        from fixbits.cublas.lt import CublasLt

        lt = CublasLt()
    version = str(lt.version)
    prof_path = out_dir / profile_filename(arch, version, in_dtype, out_dtype)
    if prof_path.exists():
        prior = load(prof_path)
        entries, failed = dict(prior.entries), dict(prior.failed)
    else:
        entries, failed = {}, {}
    kmul = 16 if in_dtype.startswith("fp8") else 1
    shapes = scan_shapes if scan_shapes is not None else shape_space(max_queries, seed, k_multiple=kmul)
    sc = scan(lt, in_dtype, out_dtype, shapes, budget_s=scan_budget_s if scan_budget_s else budget_s * 0.25)
    prio = _priority(lt, in_dtype, out_dtype, list(priority_shapes or []), sc)
    log(f"[{in_dtype}->{out_dtype}] scan: {sc.queries} queries, {len(sc.groups)} answers, {sc.errors} errors, "
        f"{sc.seconds:.1f}s; {len(prio)} answers reached by the {len(priority_shapes or [])} priority shapes")
    if backend is None and workers <= 1:
        from fixbits.cublas.backend import CublasBackend

        backend = CublasBackend(in_dtype, out_dtype)
    device = backend is None or hasattr(backend, "draw_sampled")
    order = sorted(sc.groups, key=lambda key: (-len(prio.get(key, [])), -len(sc.groups[key])))
    if only:
        from fixbits.probe.profile import key_selector

        selects = key_selector(only)
        order = [k for k in order if selects(k)]
        log(f"[{in_dtype}->{out_dtype}] only {', '.join(only)}: {len(order)} of {len(sc.groups)} answers")
    # an answer withdrawn on the GPU's evidence (benchmarks/reconstruction/withdraw_entries.py) is not
    # predicted again from the same siblings: session 36 re-predicted a23-t11-s14 exactly as session 30
    kept = [k for k in order if not is_withdrawn(failed.get(k))]
    if len(kept) < len(order):
        log(f"[{in_dtype}->{out_dtype}] {len(order) - len(kept)} withdrawn answers left as they are")
    order = kept
    summary: dict[str, Any] = {"in_dtype": in_dtype, "out_dtype": out_dtype, "library_version": version,
                               "queries": sc.queries, "answers": len(sc.groups), "priority_answers": len(prio),
                               "probed": [], "predicted": [], "failed": {}, "skipped_budget": []}

    def save() -> None:
        prof = ArchProfile(arch, "cublaslt", version, in_dtype, out_dtype, entries, failed)
        prof.save(out_dir)

    def base_task(key: str) -> dict[str, Any]:
        group_all = sc.groups[key]
        small = [sh for sh in group_all if _usable(sh, device)]
        # shapes the split-K tail defect hits sum less than K: probe and verify on the others
        hit = [sh for sh in small if _tail_hit(sc.answers[key], sh[2])]
        hs = set(hit)
        group = [sh for sh in small if sh not in hs] or small
        in_group = set(group)  # (--scan-fuzz makes priority lists of hundreds of shapes per answer)
        return {"arch": arch, "in_dtype": in_dtype, "out_dtype": out_dtype, "key": key, "group": group,
                "prio": [sh for sh in prio.get(key, []) if sh in in_group],
                "defect_shapes": hit[:50], "group_size": len(group_all), "answer": sc.answers[key], "seed": seed,
                "per_answer_s": per_answer_s, "verify_shapes": verify_shapes,
                "profile_launch": profile_launch, "out_dir": str(out_dir),
                "backend": backend if workers > 1 else None}

    def record(r: dict[str, Any]) -> None:
        key = r["key"]
        if r["status"] == "skipped":
            return
        if r["status"] != "recovered":
            if key not in entries:
                failed[key] = r["why"]
                summary["failed"][key] = r["why"]
            log(f"  {key} {tuple(r['rep'])} [{r.get('phase', '?')}]: {r['why'][:300]}")
        else:
            from fixbits.desc import GEMMDesc
            from fixbits.probe.profile import KVariant

            desc = GEMMDesc.from_dict(r["desc"])
            variants = tuple(KVariant(v["k_min"], v["k_max"], GEMMDesc.from_dict(v["desc"]), tuple(v["shape"]),
                                      n1=v.get("n1")) for v in r.get("variants", []))
            note = r.get("note", "") or (("mismatch at " + ", ".join(r["bad"])) if r["bad"] else "")
            if device_label:
                note = f"{note}; verified on {device_label}" if note else f"verified on {device_label}"
            entries[key] = ProfileEntry(key, desc, tuple(r["rep"]), r["good"], r["group_size"], tuple(r["kernels"]),
                                        note=note, variants=variants)  # type: ignore[arg-type]
            failed.pop(key, None)
            summary["failed"].pop(key, None)
            if r.get("probed", True):
                summary["probed"].append({"key": key, "shape": list(r["rep"]), "family": desc.family,
                                          "hash": desc.short_hash, "calls": r["calls"],
                                          "verified": f"{r['good']}/{r['tried']}", "seconds": r["seconds"],
                                          "note": note})
                log(f"  {key} {tuple(r['rep'])}: {desc.family} {desc.short_hash} calls={r['calls']} "
                    f"verified {r['good']}/{r['tried']} ({r['seconds']}s) {'; '.join(r['notes'])} {note}")
            else:
                summary["predicted"].append(key)
                log(f"  {key} {tuple(r['rep'])} [B]: predicted {desc.family} {desc.short_hash} "
                    f"({r.get('seconds', 0.0)}s) {note}")
        save()

    # -- the queue -------------------------------------------------------------------------
    fams: dict[tuple[int, int, bool], list[str]] = {}
    for key in order:
        if key not in entries:
            fams.setdefault(_family_key(sc.answers[key]), []).append(key)
    rep_desc: dict[tuple[int, int, bool], tuple[str, dict[str, Any]]] = {}
    for key, e in entries.items():  # a resumed profile: its probed entries serve their families
        if key in sc.answers and "predicted from" not in e.note:
            rep_desc.setdefault(_family_key(sc.answers[key]), (key, e.desc.to_dict()))
    state: dict[str, str] = {}  # key -> 'queued-A' | 'queued-B' | 'queued-C' | 'running' | 'done'
    heap: list[tuple[tuple[int, int, int], int, str, str]] = []
    seq = [0]

    def tier(key: str) -> int:
        return 0 if key in prio else 1

    def push(kind: str, key: str) -> None:
        rank = {"A": 0, "B": 1, "C": 2}[kind]
        seq[0] += 1
        heapq.heappush(heap, ((tier(key), rank, -len(prio.get(key, [])) * 1000 - len(sc.groups[key])), seq[0], kind, key))
        state[key] = "queued-" + kind

    def rank_rep(kk: str) -> tuple[int, int, int, int]:
        usable = [sh for sh in sc.groups[kk] if _usable(sh, device)]
        if not usable:
            return (9, 0, 0, 0)
        best = pick(usable, 1, in_dtype)[0]
        # a family's cheapest answer first (a workspace GEMV of 496 parts needs K past 63,000)
        return (tier(kk), _informative(best[2], in_dtype), round(float(np.log10(max(1.0, _cost(best))))),
                -len(sc.groups[kk]))

    hint_dicts = {k: d.to_dict() for k, d in (hints or {}).items()}

    def bases_for(key: str) -> tuple[list[dict[str, Any]], list[str]]:
        """Known descriptors for predicting ``key``: its family's representative, then entries
        and hints of the same algo (same tile and custom option first), adapted to its split."""
        ans = sc.answers[key]
        algo, split = int(getattr(ans, "algo_id", -1)), int(getattr(ans, "splitk_num", 1))
        parts = key.split("-")
        known: list[tuple[tuple[int, int], str, dict[str, Any]]] = []
        fk = _family_key(ans)
        if fk in rep_desc:
            known.append(((0, 0), rep_desc[fk][0], rep_desc[fk][1]))
        pool = [(k, d) for k, d in hint_dicts.items() if k not in entries]
        for k, e in entries.items():  # an entry's K / orientation variants are known descriptors too
            pool += [(k, e.desc.to_dict())] + [(k, v.desc.to_dict()) for v in e.variants if v.desc != e.desc]
        for k2, d2 in pool:
            p2 = k2.split("-")
            if p2[0] != parts[0]:
                continue
            same_tile = p2[1] == parts[1]
            same_custom = next((x for x in p2 if x.startswith("c")), "") == next((x for x in parts if x.startswith("c")), "")
            known.append(((-1, 0) if k2 == key else (1, (0 if same_tile else 2) + (0 if same_custom else 1)), k2, d2))
        known.sort(key=lambda t: t[0])
        descs, froms, seen = [], [], set()
        for _, k2, d2 in known:
            ad = _adapt(d2, _split_of(k2), split) if algo >= 0 else None
            if ad is None:
                continue
            sig = json.dumps(ad, sort_keys=True)
            if sig in seen:
                continue
            seen.add(sig)
            descs.append(ad)
            froms.append(k2)
            if len(descs) >= 8:
                break
        return descs, froms

    reps: dict[tuple[int, int, bool], str] = {}
    for fk, keys in fams.items():
        if fk in rep_desc or any(bases_for(k)[0] for k in keys[:1]):
            for key in keys:
                push("B", key)
            continue
        reps[fk] = min(keys, key=rank_rep)
        push("A", reps[fk])
    log(f"  {len(fams)} arithmetic families over {sum(len(v) for v in fams.values())} answers "
        f"({sum(1 for k in prio if k not in entries)} priority answers to do)")
    deadline = t0 + budget_s

    def on_result(kind: str, r: dict[str, Any]) -> None:
        key = r["key"]
        record(r)
        if r["status"] == "skipped":
            state[key] = "done"
            return
        fk = _family_key(sc.answers[key])
        if r["status"] == "recovered":
            state[key] = "done"
            if kind in ("A", "C") and fk not in rep_desc:
                rep_desc[fk] = (key, r["desc"])
                for other in fams.get(fk, []):  # the family's other answers: predicted, verified
                    if other not in entries and state.get(other) in (None, "waiting"):
                        push("B", other)
            return
        if kind == "B" and not r.get("timeout"):
            push("C", key)  # the family descriptor does not hold here: probe the answer itself
            return
        if kind == "B":  # over its cap: a probe there would cost more still; a later run retries it
            state[key] = "done"
            return
        state[key] = "done"
        if kind == "A" and fk not in rep_desc:  # the family's representative failed: try the next
            nxt = [k for k in fams.get(fk, []) if state.get(k) is None]
            if nxt:
                push("A", min(nxt, key=rank_rep))

    def make(kind: str, key: str) -> tuple[Any, dict[str, Any]] | None:
        if key in entries and kind != "A":
            return None
        t = base_task(key)
        t["deadline"] = deadline
        t["phase"] = kind
        if kind == "B":
            descs, froms = bases_for(key)
            if not descs:
                push("C", key)
                return None
            t.update(desc=descs[0], from_key=froms[0], descs=descs, from_keys=froms)
            return verify_answers, {"items": [t], "deadline": deadline, "backend": t["backend"]}
        return run_answer, t

    # an answer started this close to the deadline would mostly be cut off and thrown away
    submit_until = deadline - min(per_answer_s, 0.1 * budget_s)
    pool = None
    if workers > 1:
        import concurrent.futures as cf
        import multiprocessing as mp

        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    running: dict[Any, tuple[str, str]] = {}
    try:
        while (running or (heap and time.time() < submit_until)) and time.time() < deadline:
            while heap and len(running) < max(1, workers) + 2 and time.time() < submit_until:
                _, _, kind, key = heapq.heappop(heap)
                if state.get(key) != "queued-" + kind:
                    continue
                job = make(kind, key)
                if job is None:
                    if state.get(key) == "queued-" + kind:
                        state[key] = "done" if key in entries else "waiting"
                    continue
                fn, arg = job
                state[key] = "running"
                log(f"  start {kind} {key} ({len(running) + 1} running, {time.time() - t0:.0f}s)")
                if pool is None:
                    res = fn(arg, backend=backend)
                    for r in (res if isinstance(res, list) else [res]):
                        on_result(kind, r)
                    continue
                running[pool.submit(fn, arg)] = (kind, key)
            if pool is None or not running:
                continue
            import concurrent.futures as cf

            done, _ = cf.wait(list(running), timeout=max(0.5, min(5.0, deadline + 15 - time.time())),
                              return_when=cf.FIRST_COMPLETED)
            for f in done:
                kind, key = running.pop(f)
                try:
                    res = f.result()
                except Exception as exc:  # noqa: BLE001  (a worker died: the others go on)
                    log(f"  worker failed on {key}: {type(exc).__name__}: {exc}")
                    state[key] = "done"
                    continue
                for r in (res if isinstance(res, list) else [res]):
                    on_result(kind, r)
        if heap and time.time() >= submit_until:
            log(f"  reconstruct: no new answer started in the last {deadline - submit_until:.0f}s before the deadline")
        # answers whose family never got a descriptor and that were waiting for it
        if running:
            log(f"  reconstruct: {len(running)} answers still running at the deadline; left out")
    finally:
        if pool is not None:
            procs = list(getattr(pool, "_processes", {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:  # answers still running past the deadline: their GPU goes to the next phase
                if proc.is_alive():
                    proc.terminate()
    summary["skipped_budget"] = [k for k in order if k not in entries and k not in failed]
    summary["priority_done"] = sum(1 for k in prio if k in entries)
    summary["priority_failed"] = sum(1 for k in prio if k in failed and k not in entries)
    save()
    summary["profile"] = str(prof_path)
    summary["seconds"] = round(time.time() - t0, 1)
    summary["groups"] = {k: {"count": len(v), "priority": len(prio.get(k, [])),
                             "examples": [list(s) for s in pick(v, 3)]} for k, v in sc.groups.items()}
    (out_dir / f"reconstruct_{in_dtype}_{out_dtype}.json").write_text(json.dumps(summary, indent=1))
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, choices=["sm_80", "sm_90", "sm_100", "sm_103"])
    parser.add_argument("--dtype", required=True, choices=["fp16", "bf16", "fp8"], help="input dtype (fp8 = e4m3)")
    parser.add_argument("--out-dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--out", default=None, help="profile directory (default matrices/profiles)")
    parser.add_argument("--budget-s", type=float, default=600.0)
    parser.add_argument("--max-queries", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="processes probing answers in parallel")


def run(args: argparse.Namespace) -> int:
    from fixbits.probe.profile import PROFILE_DIR

    in_dtype = "fp8_e4m3" if args.dtype == "fp8" else args.dtype
    out = Path(args.out) if args.out else PROFILE_DIR
    out.mkdir(parents=True, exist_ok=True)
    summary = reconstruct(arch=args.arch, in_dtype=in_dtype, out_dtype=args.out_dtype, out_dir=out,
                          budget_s=args.budget_s, max_queries=args.max_queries, seed=args.seed,
                          workers=args.workers)
    print(f"profile: {summary['profile']}: {len(summary['probed'])} answers probed, {len(summary['failed'])} failed, "
          f"{len(summary['skipped_budget'])} left for lack of time")
    return 0 if not summary["failed"] else 1
