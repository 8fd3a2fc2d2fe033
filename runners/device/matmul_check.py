#!/usr/bin/env python3
"""GPU: fixbits.matmul (heuristic -> arch profile -> Triton kernel) against cuBLAS's bytes.

    PYTHONPATH=<repo> python3 runners/device/matmul_check.py --out DIR [--budget-s 300]
        [--pairs fp16:fp16,bf16:bf16,fp16:fp32,bf16:fp32,fp8_e4m3:fp32] [--fuzz 400] [--draws 10]
    python3 runners/device/matmul_check.py --summarize DIR/matmul_check.csv   # CPU: a run's table
    ... --out DIR2 --resume DIR/matmul_check.csv   # take over the rows an earlier run finished

For every dtype pair with a committed profile, the 390 realistic shapes and a seeded fuzz set:
the heuristic's answer is looked up (host only); a shape whose answer is not in the profile is
reported as ``not_in_profile``, one whose profile descriptor no fixbits kernel realises yet as
``no_kernel``, one whose answer the split-K tail predicate flags as
``tail_defect`` (compared, never counted as a match). The rest run ``--draws`` draws
(ordinary and wide exponents alternating, counter-hash operands drawn on the GPU, seeds printed)
through ``fixbits.matmul(a, b, out_dtype=...)`` and through cuBLAS (torch.mm / cuBLASLt's own
pick; fp8 through fixbits's cuBLASLt binding, fuzz draws carried to K % 16 == 0 and N % 4 == 0),
and every output element's bits are compared (fp8: once with B row-major and once K-major, an fp8
weight's layout, which the kernel loads by TMA as B^T: another kernel). The cuBLAS kernels one call launches are
recorded (torch.profiler, draw 0 redone) once per heuristic answer and for every shape that
differs, after each pair's sweep, in a few profiler sessions of many calls (fixbits.cublas.profile.
profile_calls): a session per call was 312 s of a 507 s run (matmul_check_s8).

The pairs share the time left: a pair that finishes early leaves its rest to the later ones;
within a pair the realistic shapes run first, then the fuzz set, and the last PROFILE_RESERVE_S
seconds of its share go to the profiling. ``--resume CSV`` takes over the finished rows
(match, mismatch, tail_defect, error) of an earlier run whose heuristic answer and descriptor
are still the plan's, so a cut run goes on where it stopped.

Kernels are compiled first in parallel processes (fixbits.kernels.precompile). Writes
DIR/matmul_check.csv (one row per shape and pair, rewritten as it goes), DIR/summary.yaml and a
table printed last; a crash in one shape is a row with outcome ``error`` and the run goes on.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import functools
import os
import sys
import time
import traceback
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

FIELDS = (
    "pair",
    "set",
    "m",
    "n",
    "k",
    "layer",
    "answer",
    "family",
    "desc_hash",
    "outcome",
    "draws",
    "elements",
    "ndiff",
    "nonzero_share",
    "tail_loss",
    "seed",
    "cublas_kernels",
    "cublas_family",
    "entry_kernels",
    "note",
    "t_s",
)
DEFAULT_PAIRS = "fp16:fp16,bf16:bf16,fp16:fp32,bf16:fp32,fp8_e4m3:fp32"
DONE = ("match", "mismatch", "tail_defect", "error")  # outcomes --resume takes over
INT_FIELDS = ("m", "n", "k", "draws", "elements", "ndiff", "tail_loss", "seed")
FLOAT_FIELDS = ("nonzero_share", "t_s")
PROFILE_RESERVE_S = 8.0  # of each pair's share, for profiling its pending calls
PROFILE_CHUNK_BYTES = 24e9  # operands and outputs of one profiler session's calls
ELEMENT_BYTES = {"fp8_e4m3": 1, "fp8_e5m2": 1, "fp16": 2, "bf16": 2, "fp32": 4}

# what a pair's sweep leaves to profile: (pair, answer, "") once per answer, and
# (pair, answer, row_tag(row)) for every row whose bytes differ
PendingKey = tuple[str, str, str]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="output directory (needed unless --summarize)")
    p.add_argument("--summarize", metavar="CSV", help="print the table of a run's CSV (CPU) and exit")
    p.add_argument("--resume", metavar="CSV", help="take over the finished rows of an earlier run's CSV")
    p.add_argument("--budget-s", type=float, default=300.0)
    p.add_argument("--pairs", default=DEFAULT_PAIRS, help="IN:OUT list, in this order")
    p.add_argument(
        "--fuzz", type=int, default=400, help="seeded fuzz shapes (fixbits.shapes.fuzz_shapes, seed 7)"
    )
    p.add_argument("--recheck-csv", nargs="+", default=[], metavar="CSV",
                   help="earlier sweeps' CSVs (reconstruct's sweep.csv): their shapes routed to one of "
                        "--recheck-answers run first, as set 'recheck' (reconstruct's option of that name)")
    p.add_argument("--recheck-answers", nargs="+", default=[], metavar="KEY",
                   help="answer keys or parts of them, e.g. a14 (all dash-separated parts must occur)")
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--max-elements", type=float, default=3e8, help="cap on each operand and the output")
    p.add_argument("--max-flop", type=float, default=4e12, help="fuzz shapes above this 2MNK are left out")
    p.add_argument("--precompile-s", type=float, default=150.0)
    p.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    args = p.parse_args(argv)
    if not args.summarize and not args.out:
        p.error("--out is required")
    if bool(args.recheck_csv) != bool(args.recheck_answers):
        p.error("--recheck-csv and --recheck-answers go together")
    return args


def shape_sets(
    fuzz: int, max_elements: float, max_flop: float, recheck: list[tuple[int, int, int]] = ()
) -> list[tuple[str, int, int, int, str]]:
    from fixbits.shapes import fuzz_shapes, realistic_shapes

    out = [("recheck", m, n, k, "") for m, n, k in recheck]
    known = set(recheck)  # a rechecked shape runs once, in the recheck set
    out += [("realistic", s.m, s.n, s.k, s.layer) for s in realistic_shapes() if (s.m, s.n, s.k) not in known]
    for s in fuzz_shapes(7, fuzz, max_elements=int(max_elements)):
        if 2 * s.m * s.n * s.k <= max_flop and (s.m, s.n, s.k) not in known:
            out.append(("fuzz", s.m, s.n, s.k, s.layer))
    return out


def case_seed(pair: str, m: int, n: int, k: int) -> int:
    return zlib.crc32(f"{pair}:{m}x{n}x{k}".encode()) & 0x7FFFFFF


def plan(
    pairs: list[tuple[str, str]], shapes: list[tuple[str, int, int, int, str]], log: Any
) -> list[dict[str, Any]]:
    """One row per (pair, shape): the heuristic's answer and the profile's descriptor or why none
    (fixbits.matmul's own route: arch_profile, then lookup_desc on the answer)."""
    import torch

    from fixbits.kernels.dispatch import choose_kernel
    from fixbits.kernels.matmul import MatmulUnavailable, arch_profile, lookup_desc
    from fixbits.kernels.plan import UnsupportedDesc
    from fixbits.probe.profile import answer_key
    from fixbits.probe.sweep import _tail_loss, fp8_aligned

    rows = []
    for dt, od in pairs:
        pair = f"{dt}->{od}"
        t = time.time()
        try:
            lt, arch, prof = arch_profile(dt, od, torch.device("cuda"))
        except MatmulUnavailable as exc:
            lt, arch, prof, why = None, "", None, str(exc)[:300]
        for which, m, n, k, layer in shapes:
            if dt.startswith("fp8") and which == "fuzz":
                m, n, k = fp8_aligned(m, n, k)  # the seeded draw as cuBLASLt's fp8 path takes it
            row: dict[str, Any] = {
                "pair": pair,
                "set": which,
                "m": m,
                "n": n,
                "k": k,
                "layer": layer,
                "seed": case_seed(pair, m, n, k),
                "_in": dt,
                "_out": od,
            }
            rows.append(row)
            if prof is None:
                row.update(outcome="not_in_profile", note=why)
                continue
            if dt.startswith("fp8") and k % 16:
                row.update(outcome="not_fp8_shape", note="cuBLASLt's fp8 path needs K % 16 == 0")
                continue
            try:
                ans = lt.heuristic(m, n, k, dt, od)
                row["answer"] = ans.key_str()
                row["tail_loss"] = _tail_loss(ans, k)
                desc = lookup_desc(prof, ans, m, n, k, dt, od, arch)
                entry = prof.entries[answer_key(ans)]  # the kernels recorded when it was probed
                try:
                    choose_kernel(desc, m, n)
                except UnsupportedDesc as exc:  # an entry no fixbits kernel realises yet
                    row.update(outcome="no_kernel", family=desc.family, note=str(exc)[:300])
                    continue
                row.update(
                    family=desc.family,
                    desc_hash=desc.short_hash,
                    _desc=desc,
                    entry_kernels=" ".join(entry.kernels),
                )
            except MatmulUnavailable as exc:
                row.update(outcome="not_in_profile", note=str(exc)[:300])
            except Exception as exc:  # noqa: BLE001  (no algorithm for the shape, binding errors)
                row.update(outcome="error", note=f"{type(exc).__name__}: {exc}"[:300])
        n_cov = sum(1 for r in rows if r["pair"] == pair and "_desc" in r)
        log(f"[plan] {pair}: {n_cov}/{len(shapes)} shapes covered by the profile ({time.time() - t:.1f}s)")
    return rows


def precompile_rows(rows: list[dict[str, Any]], workers: int, timeout_s: float, log: Any) -> None:
    import torch

    from fixbits.kernels.dispatch import choose_kernel
    from fixbits.kernels.precompile import CompileJob, precompile
    from fixbits.kernels.single_pass import num_sms
    from fixbits.kernels.tuning import best_config

    jobs = []
    for r in rows:
        d = r.get("_desc")
        if d is None or r.get("_resumed"):
            continue
        cfg = ()  # the config fixbits.matmul will pick, spelled out so jobs of other M classes stay apart
        if d.instruction != "fma":
            key = (choose_kernel(d, r["m"], r["n"]).family, d.in_dtype, d.out_dtype)
            cfg = tuple(best_config(key, r["m"], r["n"], r["k"]).to_dict().items())
        jobs.append(CompileJob(r["m"], r["n"], r["k"], d, "none", cfg, out_dtype=d.out_dtype))
        if d.in_dtype.startswith("fp8"):  # compare() runs B K-major too
            jobs.append(CompileJob(r["m"], r["n"], r["k"], d, "none", cfg, out_dtype=d.out_dtype, b_kmajor=True))
    rep = precompile(jobs, workers=workers, sms=num_sms(torch.device("cuda")), timeout_s=timeout_s)
    log(
        f"[precompile] {rep.jobs} calls, {rep.unique} kernels, {rep.compiled} compiled, "
        f"{len(rep.errors)} errors in {rep.seconds:.0f}s"
    )
    for e in rep.errors[:5]:
        log(f"[precompile] {e[:300]}")


@dataclasses.dataclass(frozen=True)
class Redo:
    """What redoing a row's draw 0 needs, so its cuBLAS launch can be profiled after the sweep."""

    m: int
    n: int
    k: int
    in_dtype: str
    out_dtype: str
    seed: int

    @property
    def nbytes(self) -> int:
        i, o = ELEMENT_BYTES.get(self.in_dtype, 4), ELEMENT_BYTES.get(self.out_dtype, 4)
        return (self.m * self.k + self.k * self.n) * i + self.m * self.n * o


def row_tag(row: dict[str, Any]) -> str:
    return f"{row['set']}:{row['m']}x{row['n']}x{row['k']}"


def draw_operands(
    m: int, n: int, k: int, dtype: str, seed: int, d: int, device: str = "cuda", *, spikes: bool = False
) -> tuple[Any, Any]:
    """Draw ``d`` of a shape: ordinary and wide exponents alternating, hash seeds seed*64 + 2d and
    + 1 (one rule for the comparison, the profiler's redo of draw 0 and the host's redraw of a
    replay: fixbits.probe.hashdraw gives the same bits on any device). ``spikes``: every third
    draw is a spike draw instead (fixbits.probe.spikes: what parts readings of a narrow output)."""
    from fixbits.probe import spikes as spike_draws
    from fixbits.probe.hashdraw import operand

    kind, s = draw_kind_seed(seed, d, spikes)
    base = spike_draws.base_kind(kind)
    a, b = operand((m, k), dtype, base, s, device), operand((k, n), dtype, base, s + 1, device)
    return spike_draws.finish(kind, a, b, s, dtype)


def draw_kind_seed(seed: int, d: int, spikes: bool = False) -> tuple[str, int]:
    """(kind, hash seed of A; B's is one more) of draw ``d`` of a row seed: draw_operands' rule."""
    from fixbits.probe import spikes as spike_draws

    kinds = ("ordinary", "wide", spike_draws.KIND) if spikes else ("ordinary", "wide")
    return kinds[d % len(kinds)], seed * 64 + 2 * d


def draw_cells(
    m: int, n: int, k: int, dtype: str, seed: int, d: int, rows: int, cols: int, *, spikes: bool = False
) -> tuple[Any, Any]:
    """The first ``rows`` rows of A and ``cols`` columns of B of draw_operands(...) on the host
    (numpy), without drawing the rest: what emulating a few output cells of a large shape needs."""
    from fixbits.probe import spikes as spike_draws
    from fixbits.probe.hashdraw import numpy_cols, numpy_rows

    kind, s = draw_kind_seed(seed, d, spikes)
    base = spike_draws.base_kind(kind)
    a = numpy_rows((m, k), list(range(min(rows, m))), dtype, base, s)
    b = numpy_cols((k, n), list(range(min(cols, n))), dtype, base, s + 1)
    return spike_draws.finish(kind, a, b, s, dtype)  # a plant touches whole columns of A and rows of B


def compare(row: dict[str, Any], draws: int, pending: dict[PendingKey, Redo]) -> None:
    """Run the draws of one covered shape; fills outcome, ndiff, nonzero_share and records in
    ``pending`` what profiling its cuBLAS launch needs (done per pair, in few profiler sessions)."""
    from fixbits.kernels._host import k_major
    from fixbits.kernels.matmul import matmul
    from fixbits.testing import compare_bits

    m, n, k, dt, od = row["m"], row["n"], row["k"], row["_in"], row["_out"]
    ndiff = nonzero = 0
    for d in range(draws):
        a, b = draw_operands(m, n, k, dt, row["seed"], d)
        ours = matmul(a, b, out_dtype=od)
        ref = reference(a, b, dt, od)
        ndiff += compare_bits(ours, ref).n_diff  # raw bits; raises on a dtype or shape mismatch
        if dt.startswith("fp8"):  # and B K-major, an fp8 weight's layout: another kernel (B^T by TMA)
            del ours
            ours = matmul(a, k_major(b), out_dtype=od)
            ndiff += compare_bits(ours, ref).n_diff
        nonzero += int((ref != 0).sum().item())
        del ours
    row["draws"] = draws
    row["elements"] = m * n * draws
    row["ndiff"] = ndiff
    row["nonzero_share"] = round(nonzero / max(1, m * n * draws), 4)
    redo = Redo(m, n, k, dt, od, row["seed"])
    answer_key = (row["pair"], row["answer"], "")
    pending.setdefault(answer_key, redo)
    if ndiff and pending[answer_key] != redo:  # (the row that keyed its answer is profiled once)
        pending[(row["pair"], row["answer"], row_tag(row))] = redo
    if row["tail_loss"]:
        row["outcome"] = "tail_defect"
        row["note"] = (
            f"cuBLAS's split-K tail drops {row['tail_loss']} K terms; bytes {'equal' if not ndiff else 'differ'}"
        )
    else:
        row["outcome"] = "match" if ndiff == 0 else "mismatch"


def profile_chunks(pending: dict[PendingKey, Redo], max_bytes: float) -> list[list[PendingKey]]:
    """Pending keys in order, cut where a chunk's operands and outputs would pass ``max_bytes``
    (a chunk's operands all live through its profiler session); never an empty chunk."""
    chunks: list[list[PendingKey]] = []
    size = 0
    for key, redo in pending.items():
        if not chunks or size + redo.nbytes > max_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(key)
        size += redo.nbytes
    return chunks


def fill_kernels(
    group: list[dict[str, Any]], found: dict[PendingKey, tuple[str, str]], failed: dict[PendingKey, str]
) -> None:
    """cublas_kernels/cublas_family of every row of the pair that ran this time: a differing
    row's own launch, else its answer's; a failed or skipped profile leaves them empty, noted."""
    for r in group:
        if r.get("_resumed") or not r.get("draws") or not r.get("answer"):
            continue
        own = (r["pair"], r["answer"], row_tag(r))
        key = own if own in found or own in failed else (r["pair"], r["answer"], "")
        if key in found:
            r["cublas_kernels"], r["cublas_family"] = found[key]
        elif key in failed:
            r["note"] = "; ".join(x for x in (r.get("note", ""), failed[key]) if x)


def profile_pending(
    group: list[dict[str, Any]], pending: dict[PendingKey, Redo], until: float, log: Any
) -> None:
    """Profile a pair's pending calls in chunks, each ONE profiler session (profile_calls) on
    draw 0's operands redone as compare() draws them; a failure is noted and the run goes on.
    An answer an earlier run's taken-over row already profiled is not profiled again."""
    import torch

    from fixbits.cublas.profile import profile_calls

    found: dict[PendingKey, tuple[str, str]] = {}
    failed: dict[PendingKey, str] = {}
    for r in group:
        if r.get("_resumed") and r.get("cublas_kernels") and r.get("outcome") != "mismatch":
            found.setdefault((r["pair"], r["answer"], ""), (r["cublas_kernels"], r.get("cublas_family", "")))
    todo = {key: redo for key, redo in pending.items() if key not in found}
    t = time.time()
    chunks = profile_chunks(todo, PROFILE_CHUNK_BYTES)
    for ci, chunk in enumerate(chunks):
        if time.time() > until:
            for key in chunk:
                failed[key] = "profile_budget"
            continue
        try:
            profs = profile_calls(_reference_calls([todo[key] for key in chunk]))
            for key, prof in zip(chunk, profs, strict=True):
                found[key] = (" ".join(prof.kernel_names), prof.family)
        except Exception as exc:  # noqa: BLE001  (the kernels stay unrecorded; the run goes on)
            log(f"[profile] chunk {ci} of {len(chunk)} calls: {traceback.format_exc(limit=4)}")
            for key in chunk:
                failed[key] = f"profile_error: {type(exc).__name__}: {exc}"[:200]
        finally:
            torch.cuda.empty_cache()
    fill_kernels(group, found, failed)
    if todo:
        log(
            f"[profile] {group[0]['pair']}: {len(todo)} calls in {len(chunks)} sessions, "
            f"{sum(1 for k in todo if k in failed)} unrecorded, {time.time() - t:.1f}s"
        )


def _reference_calls(redos: list[Redo]) -> list[Any]:
    """One cuBLAS call per Redo on draw 0's operands (ordinary kind, seed*64 and seed*64+1)."""
    calls = []
    for r in redos:
        a, b = draw_operands(r.m, r.n, r.k, r.in_dtype, r.seed, 0)
        calls.append(functools.partial(reference, a, b, r.in_dtype, r.out_dtype))
    return calls


def reference(a: Any, b: Any, dt: str, od: str) -> Any:
    """cuBLAS's bytes: torch.mm for 16-bit inputs; for fp8, cuBLASLt through fixbits's own binding
    (its own pick, as the profile was built), not torch._scaled_mm (another matmul description)."""
    from fixbits.kernels.matmul import cublas_matmul

    if dt.startswith("fp8"):
        from fixbits.kernels.matmul import arch_profile

        lt, _, _ = arch_profile(dt, od, a.device)  # the binding fixbits.matmul asked
        return lt.matmul(a, b, od)
    return cublas_matmul(a, b, od)


def write(rows: list[dict[str, Any]], out: Path) -> None:
    tmp = out / "matmul_check.csv.tmp"
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({f: r.get(f, "") for f in FIELDS})
    tmp.replace(out / "matmul_check.csv")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    table: dict[str, dict[str, Any]] = defaultdict(dict)
    for (pair, which), group in _groups(rows).items():
        c = Counter(r.get("outcome", "not_run") for r in group)
        ran = [r for r in group if r.get("draws")]
        table[pair][which] = {
            "shapes": len(group),
            **dict(c),
            "draws": sum(int(r["draws"]) for r in ran),
            "elements_compared": sum(int(r["elements"]) for r in ran),
            "families": dict(Counter(r["family"] for r in ran)),
        }
    return dict(table)


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    g: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        g[(r["pair"], r["set"])].append(r)
    return g


def take_over(planned_rows: list[dict[str, Any]], old_rows: list[dict[str, Any]]) -> int:
    """Give each planned row still to run the finished row of an earlier run with the same
    (pair, set, m, n, k), heuristic answer and descriptor hash: all its FIELDS, CSV strings typed
    back (ints, floats; empty means absent), and ``_resumed``. Returns how many were taken over."""
    old: dict[tuple[str, str, int, int, int], dict[str, Any]] = {}
    for o in old_rows:
        if o.get("outcome") not in DONE:
            continue
        try:
            old[(o["pair"], o["set"], int(o["m"]), int(o["n"]), int(o["k"]))] = o
        except (KeyError, TypeError, ValueError):
            continue  # a malformed row is run again
    taken = 0
    for r in planned_rows:
        if r.get("outcome"):
            continue  # decided by the plan (not_in_profile, not_fp8_shape, error)
        o = old.get((r["pair"], r["set"], int(r["m"]), int(r["n"]), int(r["k"])))
        if o is None or any(str(o.get(f) or "") != str(r.get(f) or "") for f in ("answer", "desc_hash")):
            continue
        for f in FIELDS:
            v = o.get(f)
            if v is None or v == "":
                r.pop(f, None)
            else:
                r[f] = _typed(f, v)
        r["_resumed"] = True
        taken += 1
    return taken


def _typed(field: str, value: Any) -> Any:
    try:
        if field in INT_FIELDS:
            return int(value)
        if field in FLOAT_FIELDS:
            return float(value)
    except (TypeError, ValueError):
        pass
    return value


def read_csv(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summarize:
        table = summarize_csv(Path(args.summarize))
        print(yaml.safe_dump(table, sort_keys=False))
        report(table, print)
        return 0
    t0 = time.time()
    deadline = t0 + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    import torch
    import triton

    from fixbits.env import fingerprint

    env = fingerprint()
    log(f"torch {torch.__version__} triton {triton.__version__} {torch.cuda.get_device_name()} env {env}")
    pairs = [tuple(p.split(":")) for p in args.pairs.split(",") if p]
    from fixbits.probe.sweep import answer_shapes

    recheck = answer_shapes(args.recheck_csv, args.recheck_answers) if args.recheck_csv else []
    if recheck:
        log(f"recheck: {len(recheck)} shapes of {args.recheck_answers} from {args.recheck_csv}")
    shapes = shape_sets(args.fuzz, args.max_elements, args.max_flop, recheck)
    rows = plan(pairs, shapes, log)  # type: ignore[arg-type]
    if args.resume:
        take_over(rows, read_csv(Path(args.resume)))
        for pair, c in Counter(r["pair"] for r in rows if r.get("_resumed")).items():
            log(f"[resume] {pair}: {c} rows taken over")
    write(rows, out)
    precompile_rows(rows, args.workers, min(args.precompile_s, 0.4 * (deadline - time.time())), log)
    todo = [r for r in rows if "_desc" in r]
    by_pair: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in todo:
        by_pair[r["pair"]].append(r)
    for pi, (pair, group) in enumerate(by_pair.items()):
        # the pairs share the time left, recomputed at each pair's start: one that finishes
        # early (or was taken over by --resume) leaves the rest of its share to the later ones
        pair_end = time.time() + (deadline - 10 - time.time()) / (len(by_pair) - pi)
        sweep_end = pair_end - PROFILE_RESERVE_S
        t_pair = time.time()
        pending: dict[PendingKey, Redo] = {}
        # rechecked shapes, then realistic ones, each set cheapest first: a budget cut leaves
        # only the largest
        order = {"recheck": 0, "realistic": 1}
        for r in sorted(group, key=lambda r: (order.get(r["set"], 2), r["m"] * r["n"] * r["k"])):
            if r.get("_resumed"):
                continue
            if time.time() > sweep_end:
                r.setdefault("outcome", "not_run")
                r.setdefault("note", "budget")
                continue
            t = time.time()
            try:
                compare(r, args.draws, pending)
            except Exception as exc:  # noqa: BLE001  (reported; the run goes on)
                r["outcome"] = "error"
                r["note"] = f"{type(exc).__name__}: {exc}"[:300]
                log(
                    f"[error] {pair} {r['m']}x{r['n']}x{r['k']} seed={r['seed']}: {traceback.format_exc(limit=4)}"
                )
                torch.cuda.empty_cache()
            r["t_s"] = round(time.time() - t, 3)
        write(rows, out)
        profile_pending(group, pending, pair_end, log)
        for r in group:
            if r.get("outcome") == "mismatch" and not r.get("_resumed"):
                log(
                    f"[mismatch] {pair} {r['set']} {r['m']}x{r['n']}x{r['k']} answer={r['answer']} "
                    f"desc={r['desc_hash']} ndiff={r['ndiff']} seed={r['seed']} "
                    f"cublas={r.get('cublas_kernels', '')[:160]}"
                )
        write(rows, out)
        log(f"[{pair}] {Counter(r.get('outcome') for r in group)} in {time.time() - t_pair:.0f}s")
    write(rows, out)
    env_doc = {k: str(v) for k, v in dataclasses.asdict(env).items()}  # TorchVersion is no plain str for yaml
    summary = {
        "env": {
            "torch": str(torch.__version__),
            "triton": str(triton.__version__),
            "gpu": torch.cuda.get_device_name(),
            "fingerprint": env_doc,
        },
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "table": summarize(rows),
        "wall_s": round(time.time() - t0, 1),
    }
    (out / "summary.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    report(summary["table"], log)
    log(f"wall {time.time() - t0:.0f}s")
    return 0


def report(table: dict[str, Any], log: Any) -> None:
    log("\n== matmul against cuBLAS ==")
    for pair, sets in table.items():
        for which, s in sets.items():
            log(f"{pair:12} {which:9} " + " ".join(f"{k}={v}" for k, v in s.items() if k != "families"))


def summarize_csv(path: Path) -> dict[str, Any]:
    """The table of a run's CSV (a run cut short, or one that crashed after its rows were written)."""
    with path.open() as fh:
        rows: list[dict[str, Any]] = [{k: v for k, v in r.items() if v != ""} for r in csv.DictReader(fh)]
    return summarize(rows)


if __name__ == "__main__":
    raise SystemExit(main())
