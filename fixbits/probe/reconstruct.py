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
import json
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fixbits.probe.profile import ArchProfile, ProfileEntry, answer_key, load, profile_filename

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


def _dump_evidence(out_dir: Path, in_dtype: str, key: str, rep: tuple[int, int, int], hints: dict[str, Any],
                   launch: Any, res: Any, cap: int = 6000) -> None:
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
    doc = {"key": key, "shape": list(rep), "hints": {k: v for k, v in hints.items()}, "launch": launch,
           "status": res.status, "notes": list(res.notes), "calls": res.calls, "dropped_tail": res.dropped_tail,
           "desc": res.desc.to_dict() if res.desc else None,
           "survivors": [x.to_dict() for x in res.survivors[:8]], "walks": walks}
    (d / f"{in_dtype}_{key}.json").write_text(json.dumps(doc, separators=(",", ":"), default=str))


def verify_entry(backend: Any, desc: Any, shapes: list[tuple[int, int, int]], *, seed: int, draws: int = 2,
                 cells: int = 8) -> tuple[int, int, list[str]]:
    """(shapes verified, shapes tried, mismatch notes): emulator vs cuBLAS on sampled cells."""
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
# inputs are drawn on the CPU and every probe call moves A, B and C: shapes above this many
# elements are never used to probe or verify (an answer reached only by them is reported)
MAX_ELEMENTS = 150_000_000


def _elements(s: tuple[int, int, int]) -> int:
    m, n, k = s
    return m * k + k * n + m * n


def _family_key(ans: Any) -> tuple[int, int, bool]:
    return (int(getattr(ans, "algo_id", -1)), int(getattr(ans, "reduction_scheme", 0)),
            int(getattr(ans, "splitk_num", 1)) > 1)


def _with_split(desc: dict[str, Any], splitk: int) -> dict[str, Any] | None:
    """The family descriptor with its level-0 split count set to this answer's SPLITK_NUM."""
    cuts = desc.get("k_cuts") or []
    if splitk <= 1:
        return desc if not cuts or cuts[0].get("count") is None or cuts[0]["layout"] != "contiguous" else None
    if not cuts or cuts[0]["layout"] != "contiguous" or cuts[0].get("count") is None:
        return None
    c0 = dict(cuts[0])
    c0["count"] = splitk
    if c0.get("merge", "chain") != "chain" and splitk & (splitk - 1):
        return None
    return {**desc, "k_cuts": [c0] + list(cuts[1:])}


def _get_backend(task: dict[str, Any], backend: Any) -> Any:
    backend = backend if backend is not None else task.get("backend")
    if backend is None:
        bk = (task["in_dtype"], task["out_dtype"])
        if bk not in _BACKENDS:
            from fixbits.cublas.backend import CublasBackend

            _BACKENDS[bk] = CublasBackend(*bk)
        backend = _BACKENDS[bk]
    return backend


def verify_answers(batch: dict[str, Any], backend: Any = None) -> list[dict[str, Any]]:
    """Phase B of reconstruct: family descriptors checked on other answers' own shapes."""
    from fixbits.desc import GEMMDesc

    out = []
    for task in batch["items"]:
        key, group = task["key"], [tuple(x) for x in task["group"]]
        if not group:
            out.append({"key": key, "rep": [0, 0, 0], "group_size": task["group_size"], "status": "failed",
                        "why": f"every shape reaching this answer has more than {MAX_ELEMENTS} elements"})
            continue
        shapes = pick(group, 2, task["in_dtype"])
        base = {"key": key, "rep": list(shapes[0]), "group_size": task["group_size"], "kernels": [], "notes": [],
                "calls": 0, "bad": [], "good": 0, "tried": 0, "seconds": 0.0, "probed": False}
        if time.time() > batch["deadline"]:
            out.append({**base, "status": "skipped"})
            continue
        bk = _get_backend(task, backend)
        try:
            desc = GEMMDesc.from_dict(task["desc"])
            good, tried, bad = verify_entry(bk, desc, shapes, seed=task["seed"] + 11, draws=2)
        except Exception as exc:  # noqa: BLE001
            out.append({**base, "status": "failed", "why": f"verify crashed: {type(exc).__name__}: {exc}"})
            continue
        if good == tried and tried:
            out.append({**base, "status": "recovered", "desc": task["desc"], "good": good, "tried": tried,
                        "note": f"predicted from {task['from_key']}, verified by draws"})
        else:
            out.append({**base, "status": "failed",
                        "why": f"the family descriptor of {task['from_key']} fails here ({', '.join(bad)})"})
    return out


def run_answer(task: dict[str, Any], backend: Any = None) -> dict[str, Any]:
    """Profile, probe and verify one heuristic answer (runs in a worker process when parallel)."""
    from fixbits.probe.recover import probe

    t1 = time.time()
    key, group = task["key"], [tuple(x) for x in task["group"]]
    in_dtype = task["in_dtype"]
    if not group:
        return {"key": key, "rep": [0, 0, 0], "group_size": task["group_size"], "status": "failed",
                "why": f"every shape reaching this answer has more than {MAX_ELEMENTS} elements (not probed)"}
    rep = pick(group, 1, in_dtype)[0]
    out: dict[str, Any] = {"key": key, "rep": list(rep), "group_size": task["group_size"], "kernels": [],
                           "notes": [], "calls": 0, "bad": [], "good": 0, "tried": 0}
    if time.time() > task["deadline"]:
        return {**out, "status": "skipped"}
    backend = _get_backend(task, backend)
    launch: dict[str, Any] | None = None
    try:
        if not task["profile_launch"]:
            raise RuntimeError("launch profiling off")
        from fixbits.cublas.profile import profile_call
        from fixbits.inputs import draw

        a = draw((rep[0], rep[2]), in_dtype, "ordinary", 1)
        b = draw((rep[2], rep[1]), in_dtype, "ordinary", 2)
        launch = profile_call(lambda: backend.gemm(a, b)).to_dict()
        out["kernels"] = list(launch.get("kernels", []))
    except Exception as exc:  # noqa: BLE001
        launch = {"error": f"{type(exc).__name__}: {exc}"}
    hints: dict[str, Any] = {}
    try:
        hints = _hints(task["answer"], launch)
        # other K of the same answer pin readings equal at this K; a defect shape, where the
        # split drops its tail, tells the split rule apart from the ceil rule
        by_k: dict[int, tuple[int, int, int]] = {}
        for sh in pick([s for s in group if s[2] != rep[2]], len(group), in_dtype):
            by_k.setdefault(sh[2], sh)  # the cheapest shape of each other K
        hints["extra_shapes"] = (list(by_k.values())[:2]
                                 + pick([tuple(x) for x in task.get("defect_shapes", [])], 1, in_dtype))
        res = probe(backend, *rep, arch=task["arch"], hints=hints, seed=task["seed"],
                    deadline=min(task["deadline"], time.time() + task["per_answer_s"]))
    except Exception as exc:  # noqa: BLE001
        return {**out, "status": "crashed", "seconds": round(time.time() - t1, 1),
                "why": f"probe crashed at {rep}: {type(exc).__name__}: {exc} | "
                       + traceback.format_exc(limit=4).replace("\n", " | ")}
    try:
        _dump_evidence(Path(task["out_dir"]), in_dtype, key, rep, hints, launch, res)
    except Exception:  # noqa: BLE001  (evidence is a debugging aid; never fail the answer for it)
        pass
    out.update(calls=res.calls, notes=list(res.notes), seconds=round(time.time() - t1, 1))
    if res.status != "recovered" or res.desc is None:
        return {**out, "status": res.status, "why": f"{res.status} at {rep}: " + "; ".join(res.notes)}
    others = [s for s in pick([s for s in group if s != rep], task["verify_shapes"] + 1, in_dtype) if s != rep]
    try:
        good, tried, bad = verify_entry(backend, res.desc, [rep] + others[: task["verify_shapes"]],
                                        seed=task["seed"] + 5)
    except Exception as exc:  # noqa: BLE001
        good, tried, bad = 0, 0, [f"verify crashed: {exc}"]
    out.update(status="recovered", desc=res.desc.to_dict(), good=good, tried=tried, bad=bad,
               seconds=round(time.time() - t1, 1))
    return out


def reconstruct(*, arch: str, in_dtype: str, out_dtype: str, out_dir: Path, budget_s: float,
                max_queries: int = 30000, scan_budget_s: float | None = None, verify_shapes: int = 3,
                log: Any = print, seed: int = 0, lt: Any = None, backend: Any = None,
                profile_launch: bool = True, per_answer_s: float = 60.0, workers: int = 1) -> dict[str, Any]:
    """The whole pipeline on the local GPU; returns a summary dict (also written as JSON).
    ``lt`` / ``backend`` replace cuBLASLt (tests pass a fake heuristic and the emulator)."""

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
    shapes = shape_space(max_queries, seed, k_multiple=kmul)
    sc = scan(lt, in_dtype, out_dtype, shapes, budget_s=scan_budget_s if scan_budget_s else budget_s * 0.25)
    log(f"[{in_dtype}->{out_dtype}] scan: {sc.queries} queries, {len(sc.groups)} answers, {sc.errors} errors, {sc.seconds:.1f}s")
    if backend is None and workers <= 1:
        from fixbits.cublas.backend import CublasBackend

        backend = CublasBackend(in_dtype, out_dtype)
    order = sorted(sc.groups, key=lambda key: -len(sc.groups[key]))
    summary: dict[str, Any] = {"in_dtype": in_dtype, "out_dtype": out_dtype, "library_version": version,
                               "queries": sc.queries, "answers": len(sc.groups), "probed": [], "failed": {},
                               "skipped_budget": []}

    def save() -> None:
        prof = ArchProfile(arch, "cublaslt", version, in_dtype, out_dtype, entries, failed)
        prof.save(out_dir)

    def base_task(key: str) -> dict[str, Any]:
        group_all = sc.groups[key]
        # shapes the split-K tail defect hits sum less than K: probe and verify on the others
        small = [sh for sh in group_all if _elements(sh) <= MAX_ELEMENTS]
        hit = [sh for sh in small if _tail_hit(sc.answers[key], sh[2])]
        group = [sh for sh in small if sh not in set(hit)] or small
        return {"arch": arch, "in_dtype": in_dtype, "out_dtype": out_dtype, "key": key, "group": group,
                "defect_shapes": hit[:50],
                "group_size": len(group_all), "answer": sc.answers[key], "seed": seed,
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
            log(f"  {key} {tuple(r['rep'])}: {r['why'][:300]}")
        else:
            from fixbits.desc import GEMMDesc

            desc = GEMMDesc.from_dict(r["desc"])
            entries[key] = ProfileEntry(key, desc, tuple(r["rep"]), r["good"], r["group_size"], tuple(r["kernels"]),
                                        note=r.get("note", "") or (("mismatch at " + ", ".join(r["bad"])) if r["bad"] else ""))
            failed.pop(key, None)
            summary["failed"].pop(key, None)
            if r.get("probed", True):
                summary["probed"].append({"key": key, "shape": list(r["rep"]), "family": desc.family,
                                          "hash": desc.short_hash, "calls": r["calls"],
                                          "verified": f"{r['good']}/{r['tried']}", "seconds": r["seconds"]})
                log(f"  {key} {tuple(r['rep'])}: {desc.family} {desc.short_hash} calls={r['calls']} "
                    f"verified {r['good']}/{r['tried']} ({r['seconds']}s) {'; '.join(r['notes'])}")
            else:
                summary["predicted"].append(key)
        save()

    def run_all(fn: Any, tasks: list[dict[str, Any]], deadline: float, on: Any) -> None:
        for t in tasks:
            t["deadline"] = deadline
        if workers <= 1:
            for t in tasks:
                on(fn(t, backend=backend))
            return
        import concurrent.futures as cf
        import multiprocessing as mp

        if not pools:  # one pool for all phases: workers keep their CUDA context and imports
            pools.append(cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")))
        pool = pools[0]
        futs = [pool.submit(fn, t) for t in tasks]
        try:
            for fut in cf.as_completed(futs, timeout=max(1.0, deadline + 20 - time.time())):
                try:
                    on(fut.result())
                except Exception as exc:  # noqa: BLE001  (a worker died: the others go on)
                    log(f"  worker failed: {type(exc).__name__}: {exc}")
        except cf.TimeoutError:
            log("  reconstruct: workers still busy at the deadline; their answers are left out")
            for f in futs:
                f.cancel()

    summary["predicted"] = []
    pools: list[Any] = []
    todo = [k for k in order if k not in entries]
    # phase A: one probe per arithmetic family of answers (tile, swizzle, stages, custom option
    # are speed knobs; algo, reduction scheme and split-or-not decide the arithmetic)
    fams: dict[tuple[int, int, bool], list[str]] = {}
    for key in todo:
        fams.setdefault(_family_key(sc.answers[key]), []).append(key)
    reps = {}
    for fk, keys in fams.items():
        def rank(kk: str) -> tuple[int, int]:
            usable = [sh for sh in sc.groups[kk] if _elements(sh) <= MAX_ELEMENTS]
            if not usable:
                return (9, 0)
            return (_informative(pick(usable, 1, in_dtype)[0][2], in_dtype), -len(sc.groups[kk]))

        best = min(keys, key=rank)
        reps[fk] = best
    rep_desc: dict[tuple[int, int, bool], Any] = {}

    def on_rep(r: dict[str, Any]) -> None:
        record(r)
        if r["status"] == "recovered":
            rep_desc[_family_key(sc.answers[r["key"]])] = (r["key"], r["desc"])

    log(f"  {len(fams)} arithmetic families over {len(todo)} answers")
    run_all(run_answer, [base_task(k) for k in sorted(reps.values(), key=lambda kk: -len(sc.groups[kk]))],
            t0 + 0.55 * budget_s, on_rep)
    # phase B: every other answer of a probed family: the family's descriptor (its split count
    # set to the answer's) verified on that answer's own shapes with fresh draws
    vt: list[dict[str, Any]] = []
    for fk, keys in fams.items():
        if fk not in rep_desc:
            continue
        rkey, rdesc = rep_desc[fk]
        for key in keys:
            if key == rkey or key in entries:
                continue
            d = _with_split(rdesc, int(getattr(sc.answers[key], "splitk_num", 1)))
            if d is None:
                continue
            t = base_task(key)
            t.update(desc=d, from_key=rkey)
            vt.append(t)
    chunk = max(1, len(vt) // max(1, 4 * workers))
    batches = [{"items": vt[i:i + chunk], "backend": backend if workers > 1 else None}
               for i in range(0, len(vt), chunk)]

    def on_batch(rs: list[dict[str, Any]]) -> None:
        for r in rs:
            record(r)

    if batches:
        run_all(verify_answers, batches, t0 + 0.8 * budget_s, on_batch)
    # phase C: probe one by one what no family descriptor explains, most common answers first
    rest = [k for k in order if k not in entries and k not in reps.values()]
    if rest and time.time() < t0 + budget_s:
        run_all(run_answer, [base_task(k) for k in rest], t0 + budget_s, record)
    summary["skipped_budget"] = [k for k in order if k not in entries and k not in failed]
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)
    save()
    summary["profile"] = str(prof_path)
    summary["seconds"] = round(time.time() - t0, 1)
    summary["groups"] = {k: {"count": len(v), "examples": [list(s) for s in pick(v, 3)]} for k, v in sc.groups.items()}
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
