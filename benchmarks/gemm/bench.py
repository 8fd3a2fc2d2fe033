"""fixbits.matmul vs cuBLAS vs torch.compile (max-autotune, Triton GEMMs, order free) on the
390 realistic shapes (or a deterministic subset), plus fused-epilogue pairs. GPU only.

    PYTHONPATH=<repo> python3 benchmarks/gemm/bench.py --out DIR [--budget-s 360] [--per-cell 3] [--pair fp16:fp16]

``--pair`` picks the dtypes (fp16:fp16 by default; bf16, fp32 outputs and fp8_e4m3:fp32 too; see
Pair for how cuBLAS is called and what the bytes are compared with).

Two times per shape: whole call (do_bench of fixbits.matmul / torch.mm, host overhead
included, L2 flushed) and GPU time (both replayed inside a CUDA graph, so launch overhead is
excluded for both; triton.testing.do_bench_cudagraph, L2 warm). fixbits is tuned per shape
(M, N, K) over the candidates of fixbits.kernels.tuning.shape_space, each timed at a short rep,
the winner kept per shape and written to DIR/tuned_configs.json after every shape (copy it to
matrices/kernels/tuned/ for fixbits.matmul to load). --per-cell N times N shapes of every
(layer group, side of 5 GFLOP) cell (median, smallest, largest, then evenly between), the
cells interleaved so a budget cut stays representative.

Medians of triton.testing.do_bench (CUDA events around each call, L2 flushed between calls, so
every call reads its inputs from HBM as a rotating set of inputs would), all three side by side
in one process; fixbits is timed through fixbits.matmul (dispatch cached per shape, so the
timed call is one cached launch plus the Python of matmul()). Speed is
reported relative to cuBLAS (t_cublas / t_x, above 1 = faster than cuBLAS), split at 5 GFLOP
(2MNK), per layer group, as geometric means. A fused pair is our one kernel (GEMM + epilogue)
against torch.mm plus the eager PyTorch epilogue kernels, each timed as whole calls (launches
included). The descriptor comes from the arch profile when one exists, else a single-pass
descriptor (column ``desc_source`` says which); the bytes of each fused pair are compared too.
torch.compile max-autotune costs tens of seconds per shape, so it runs on a deterministic
sample (the middle shape of each layer group first, then the next ring) that fits its share of
the budget (column ``t_compile_ms`` empty elsewhere; the table says how many were timed).
GEMM byte match is counted apart for shapes where fixbits.bugs.splitk_tail predicts cuBLAS's
split-K tail loss (column ``splitk_tail_lost``). The fused sweep times each epilogue (bias,
relu, silu_gate, gelu, residual, scale) on a few fixed shapes. The CSV and table are rewritten
after every shape, so a run cut short leaves its partial results.
Writes DIR/gemm_bench.csv, DIR/gemm_bench.md, DIR/gemm_bench.png.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import sys
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

SPLIT_FLOP = 5e9
DEVICE = "cuda"


@dataclass(frozen=True)
class Pair:
    """The dtype pair timed (--pair). cuBLAS is called as PyTorch calls it: torch.mm for 16-bit
    inputs; for fp8, torch._scaled_mm on the same K-major B that fixbits.matmul reads (the TN
    form cuBLASLt's fp8 path takes; see operands). Bytes are compared with what the arch profile was built
    against: the same torch.mm, or for fp8 cuBLASLt through fixbits' own binding."""

    in_dtype: str = "fp16"
    out_dtype: str = "fp16"

    @property
    def fp8(self) -> bool:
        return self.in_dtype.startswith("fp8")

    @property
    def label(self) -> str:
        return f"{self.in_dtype}->{self.out_dtype}"

    def skip_reason(self, m: int, n: int, k: int) -> str:
        """Why cuBLASLt runs no algorithm for this shape ('' when it does)."""
        if self.fp8 and (k % 16 or n % 4):
            return "fp8: cuBLASLt 13.1 has no algorithm unless K % 16 == 0 and N % 4 == 0"
        return ""


PAIRS = ("fp16:fp16", "bf16:bf16", "fp16:fp32", "bf16:fp32", "fp8_e4m3:fp32")
PAIR = Pair()


def operands(m: int, n: int, k: int, g):
    """A (m, k) and B (k, n), row-major (the profile's layout), standard normal values in the
    pair's input dtype (fp8: drawn in fp32 and rounded). fp8's B is K-major, the transpose of a
    row-major (n, k): the layout of an fp8 weight (nn.Linear's (N, K)) and the TN form that
    cuBLASLt's fp8 path takes, so both sides read the same tensor (fp8 wgmma reads B K-major
    only: an N-major B costs the Triton kernel a byte transpose through shared memory each turn)."""
    import torch

    from fixbits.kernels._host import torch_dtype

    dt = torch_dtype(PAIR.in_dtype)
    if PAIR.fp8:
        a = torch.randn((m, k), device=DEVICE, generator=g).to(dt)
        return a, torch.randn((n, k), device=DEVICE, generator=g).to(dt).t()
    a = torch.randn((m, k), device=DEVICE, dtype=dt, generator=g)
    return a, torch.randn((k, n), device=DEVICE, dtype=dt, generator=g)


def cublas_fn(a, b):
    """cuBLAS's call on (a, b), as a zero-argument callable to time (see Pair)."""
    import torch

    from fixbits.kernels._host import k_major, torch_dtype

    odt = torch_dtype(PAIR.out_dtype)
    if PAIR.fp8:
        b_cm = k_major(b)  # (operands() draws it K-major already: no copy)
        one = torch.ones((), device=a.device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b_cm, scale_a=one, scale_b=one, out_dtype=odt)
    if odt == a.dtype:
        return lambda: torch.mm(a, b)
    if DEVICE != "cuda":  # dry runs: mm with out_dtype is a CUDA operator
        return lambda: torch.mm(a.to(odt), b.to(odt))
    return lambda: torch.mm(a, b, out_dtype=odt)


def cublas_bytes(a, b, call):
    """The output the profile's bytes are checked against (see Pair)."""
    if not PAIR.fp8:
        return call()
    from fixbits.kernels.matmul import arch_profile

    lt, _, _ = arch_profile(PAIR.in_dtype, PAIR.out_dtype, a.device)
    return lt.matmul(a, b, PAIR.out_dtype)


def same_bits(x, y) -> bool:
    import torch

    view = {2: torch.int16, 4: torch.int32}[x.element_size()]
    return x.dtype == y.dtype and bool(torch.equal(x.view(view), y.view(view)))


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def shapes_list():
    try:
        from fixbits.shapes import realistic_shapes

        return [(s.m, s.n, s.k, s.layer, s.epilogue) for s in realistic_shapes()]
    except Exception as exc:
        print(f"realistic shapes unavailable ({exc}); built-in list")
        return [(256, 4096, 4096, "builtin", "none"), (16, 4096, 14336, "builtin", "silu_gate"),
                (4096, 4096, 4096, "builtin", "residual"), (2048, 4096, 14336, "builtin", "none")]  # fmt: skip


def interleave(shapes):
    groups = defaultdict(list)
    for s in shapes:
        groups[s[3]].append(s)
    out = []
    while any(groups.values()):
        for g in sorted(groups):
            if groups[g]:
                out.append(groups[g].pop(0))
    return out


def epilogue_ops(ep: str):
    from fixbits.kernels.precompile import epilogue_ops as ops

    return ops(ep)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=360.0)
    ap.add_argument("--compile-share", type=float, default=0.35, help="budget share for torch.compile")
    ap.add_argument("--limit", type=int, default=0, help="first N shapes only (0: all)")
    ap.add_argument("--rep-ms", type=int, default=20)
    ap.add_argument("--graph-rep-ms", type=int, default=10, help="rep of the CUDA-graph (GPU time) timings")
    ap.add_argument("--tune-rep-ms", type=int, default=3, help="rep of each tuning candidate")
    ap.add_argument("--tune-limit", type=int, default=4, help="candidates per shape (0: all of shape_space)")
    ap.add_argument("--tune-s", type=float, default=6.0, help="tuning time per shape (compiles included)")
    ap.add_argument(
        "--check-candidates",
        action="store_true",
        help="compare every tuning candidate's bytes with cuBLAS's, not only the winner's",
    )
    ap.add_argument(
        "--tune-by",
        default="graph",
        choices=["graph", "call"],
        help="rank candidates by GPU time in a CUDA graph (the host part is the same for every tile) or "
        "by whole calls (host-bound at small sizes, so the pick is noise there)",
    )
    ap.add_argument(
        "--per-cell", type=int, default=0, help="shapes per (layer, side of 5 GFLOP) cell; 0: all"
    )
    ap.add_argument("--warmup-ms", type=int, default=5, help="warmup of the whole-call timings")
    ap.add_argument(
        "--seed-tuned",
        nargs="+",
        default=[],
        help="tuned_configs.json files whose per-shape winners are timed first (they still compete); "
        "for a shape in several, the last file's winner",
    )
    ap.add_argument(
        "--precompile-workers",
        type=int,
        default=-1,
        help="processes compiling every candidate kernel before timing (-1: cores - 2; 0: off)",
    )
    ap.add_argument(
        "--not-single-pass",
        action="store_true",
        help="only the shapes whose profile descriptor is not plain single-pass (re-time the other "
        "families after a kernel change; the rest keep an earlier run's figures)",
    )
    ap.add_argument(
        "--only-shapes",
        default="",
        help="comma list of MxNxK: time these realistic shapes only (e.g. an earlier run's slowest)",
    )
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument(
        "--pair",
        default="fp16:fp16",
        choices=PAIRS,
        help="input:output dtypes timed (torch.compile runs for fp16:fp16 and bf16:bf16 only)",
    )
    ap.add_argument(
        "--fused-share", type=float, default=0.15, help="budget share for the fused-epilogue sweep"
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="CPU, TRITON_INTERPRET=1, tiny shapes: exercises the script only",
    )
    args = ap.parse_args()
    global DEVICE, PAIR
    PAIR = Pair(*args.pair.split(":"))
    if args.dry_run:
        DEVICE = "cpu"
        if "triton" not in sys.modules:  # Triton reads TRITON_INTERPRET when it is first imported
            import os

            os.environ.setdefault("TRITON_INTERPRET", "1")
        from fixbits.kernels._interp import patch

        patch()
    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import torch
    import triton
    from triton.testing import do_bench

    if DEVICE == "cuda":
        print(
            f"torch {torch.__version__} triton {triton.__version__} {torch.cuda.get_device_name()}",
            flush=True,
        )
    if args.per_cell:
        shapes = subset(shapes_list(), args.per_cell)
    else:
        shapes = interleave(shapes_list())  # round-robin over layer groups: a budget cut stays representative
    if args.only_shapes:
        want = {tuple(int(x) for x in t.split("x")) for t in args.only_shapes.split(",") if t}
        shapes = [sh for sh in shapes if tuple(sh[:3]) in want]
        missing = want - {tuple(sh[:3]) for sh in shapes}
        if missing:
            ap.error(f"--only-shapes: not realistic shapes of this pair: {sorted(missing)}")
    print(f"{len(shapes)} shapes", flush=True)
    if args.dry_run:
        shapes = [(max(1, m // 512), max(16, n // 512), max(8, k // 512), g, e) for m, n, k, g, e in shapes]
    if args.not_single_pass:
        keep = []
        for s in shapes:
            desc, source, _ = shape_desc(s[0], s[1], s[2])
            if source != "profile" or desc.family != "single_pass" or desc.k_cuts:
                keep.append(s)
        shapes = keep
        print(f"--not-single-pass: {len(shapes)} shapes", flush=True)
    if args.limit:
        shapes = shapes[: args.limit]

    def bench(fn, mode: str = "call"):
        """mode 'call': whole calls (do_bench); 'graph': GPU time in a CUDA graph; 'tune': short."""
        if DEVICE != "cuda":
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
        if mode == "graph":
            from triton.testing import do_bench_cudagraph

            return do_bench_cudagraph(fn, rep=args.graph_rep_ms, return_mode="median")
        if mode == "tune":
            if args.tune_by == "graph":
                from triton.testing import do_bench_cudagraph

                try:
                    return do_bench_cudagraph(fn, rep=args.tune_rep_ms, return_mode="median")
                except Exception as exc:  # noqa: BLE001 - a capture failure falls back to whole calls
                    print(f"[tune] graph timing failed ({type(exc).__name__}: {str(exc)[:120]}); whole calls",
                          flush=True)  # fmt: skip
            return do_bench(fn, warmup=1, rep=args.tune_rep_ms, return_mode="median")
        return do_bench(fn, warmup=args.warmup_ms, rep=args.rep_ms, return_mode="median")

    bench.seeds = {}  # type: ignore[attr-defined]
    if args.seed_tuned:
        from fixbits.kernels.tuning import load_seeds

        for path in args.seed_tuned:
            bench.seeds.update(load_seeds(Path(path)))  # type: ignore[attr-defined]
        print(f"{len(bench.seeds)} seed configs from {', '.join(args.seed_tuned)}", flush=True)
    bench.tune_limit = args.tune_limit  # type: ignore[attr-defined]
    bench.check_candidates = args.check_candidates  # type: ignore[attr-defined]
    bench.tune_s = args.tune_s  # type: ignore[attr-defined]
    bench.out = out  # type: ignore[attr-defined]

    fused_shapes = FUSED_SHAPES if args.fused_share > 0 else ()
    if DEVICE == "cuda" and args.precompile_workers != 0:
        run_precompile(shapes, fused_shapes, bench, args.precompile_workers, args.budget_s * 0.3)
    rows = []
    compile_share = 0 if args.no_compile else args.compile_share
    if PAIR.in_dtype != PAIR.out_dtype:
        compile_share = 0  # torch.compile times torch.mm: same-dtype pairs only
    main_budget = args.budget_s * (1 - compile_share - args.fused_share)
    last = 0.0  # seconds the previous shape took: a shape is started only if one like it fits
    bench.pass_end = time.monotonic() + main_budget - (time.time() - t0)  # type: ignore[attr-defined]
    for i, (m, n, k, layer, ep) in enumerate(shapes):
        if time.time() - t0 + last > main_budget:
            print(f"budget: stopping the main pass after {i} shapes", flush=True)
            break
        t_shape = time.time()
        row = {"m": m, "n": n, "k": k, "layer": layer, "epilogue": ep, "gflop": 2 * m * n * k / 1e9}
        try:
            measure_shape(i, row, bench)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc()
        rows.append(row)
        nan = float("nan")
        print(f"{i:3d} {m}x{n}x{k} {layer:9s} {ep:15s} ours={row.get('t_ours_ms', nan):.4f} "
              f"cublas={row.get('t_cublas_ms', nan):.4f} speed={row.get('speed_ours', nan):.3f} "
              f"gpu: ours={row.get('t_ours_gpu_ms', nan):.4f} cublas={row.get('t_cublas_gpu_ms', nan):.4f} "
              f"speed={row.get('speed_ours_gpu', nan):.3f} fused={row.get('speed_fused', nan):.3f} "
              f"fused_gpu={row.get('speed_fused_gpu', nan):.3f} {row.get('config', '')} {row.get('error', '')}",
              flush=True)  # fmt: skip
        write_outputs(rows, out, quiet=True)
        last = time.time() - t_shape

    # 4 s kept for the final table and plot
    bench.pass_end = time.monotonic() + args.budget_s * (1 - compile_share) - 4 - (time.time() - t0)  # type: ignore[attr-defined]
    if args.fused_share > 0:
        fused_pass(rows, t0, args.budget_s * (1 - compile_share) - 4, bench, args.dry_run, out)
    if not args.no_compile and DEVICE == "cuda" and PAIR.in_dtype == PAIR.out_dtype:
        compile_pass(rows, t0, args.budget_s, bench, out)
    write_outputs(rows, out)
    print(f"total {time.time() - t0:.0f}s")
    return 0


def subset(shapes, per_cell: int):
    """per_cell shapes of every (layer, side of 5 GFLOP) cell, by GFLOP: the median, the
    smallest, the largest, then evenly between; rounds interleave the cells."""
    cells = defaultdict(list)
    for s in shapes:
        cells[(s[3], 2 * s[0] * s[1] * s[2] >= SPLIT_FLOP)].append(s)
    picks = {}
    for c, lst in cells.items():
        lst = sorted(lst, key=lambda s: (2 * s[0] * s[1] * s[2], s))
        order = [len(lst) // 2, 0, len(lst) - 1]
        q = max(per_cell, 3)
        order += [round(j * (len(lst) - 1) / (q + 1)) for j in range(1, q + 1)]
        seen, chosen = set(), []
        for j in order:
            if j not in seen and len(chosen) < per_cell:
                seen.add(j)
                chosen.append(lst[j])
        picks[c] = chosen
    out = []
    for r in range(per_cell):
        for c in sorted(picks, key=lambda c: (not c[1], c[0])):
            if r < len(picks[c]):
                out.append(picks[c][r])
    return out


GEMM_KEYS = ("t_ours_ms", "t_cublas_ms", "speed_ours", "t_ours_gpu_ms", "t_cublas_gpu_ms", "speed_ours_gpu",
             "tflops_ours", "tflops_cublas", "splitk_tail_lost", "bytes_equal_cublas")  # fmt: skip


def measure_shape(i: int, row: dict, bench, gemm: dict | None = None) -> None:
    """Time fixbits (tuned per shape), cuBLAS (whole calls and GPU time in a CUDA graph) and,
    with an epilogue, the fused pair."""
    import torch

    from fixbits.kernels.dispatch import choose_kernel
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.tuning import best_config, tune

    m, n, k = row["m"], row["n"], row["k"]
    row["pair"] = PAIR.label
    row["skipped"] = PAIR.skip_reason(m, n, k)
    if row["skipped"]:
        return
    g = torch.Generator(device=DEVICE).manual_seed(i)
    a, b = operands(m, n, k, g)
    desc, row["desc_source"], exc = shape_desc(m, n, k)
    if exc is not None and i == 0:
        print(f"profile route unavailable: {exc}", flush=True)
    if desc is None:  # fp8 outside its profile: no stand-in descriptor is timed
        row["skipped"] = f"not in the {PAIR.label} profile: {exc}"[:300]
        return
    choice = choose_kernel(desc, m, n)
    row["family"] = choice.family
    row["desc_hash"] = desc.short_hash
    via = None if row["desc_source"] == "profile" else desc  # the profile route when there is one
    kw: dict = {}
    if desc.instruction != "fma":
        key = (choice.family, desc.in_dtype, desc.out_dtype)
        t_tune = time.monotonic()
        run = lambda c: bench(lambda: matmul(a, b, desc=via, config=c, out_dtype=PAIR.out_dtype), "tune")  # noqa: E731
        if getattr(bench, "check_candidates", False) and row["desc_source"] == "profile":
            run = checked_candidates(row, a, b, via, run)
        _, times = tune(
            key, m, run, n, k,
            limit=getattr(bench, "tune_limit", 0),
            deadline=min(t_tune + getattr(bench, "tune_s", 1e9), getattr(bench, "pass_end", float("inf"))),
            seeds=tuple(c for c in [getattr(bench, "seeds", {}).get((m, n, k))] if c is not None),
        )  # fmt: skip
        if times:
            row["tune_s"] = time.monotonic() - t_tune
            print(f"[tune] {m}x{n}x{k} {choice.family} ({row['tune_s']:.1f}s): "
                  + ", ".join(f"{lab}={t:.4f}ms" for lab, t in times.items()), flush=True)  # fmt: skip
            save_tuned(bench)
        kw["config"] = best_config(key, m, n, k)
        row["config"] = kw["config"].label()
    if gemm is not None and (m, n, k) in gemm:
        row.update(gemm[(m, n, k)])
        row["gemm_timed_on"] = "an earlier fused row of this shape"
    else:
        measure_gemm(row, bench, a, b, via)
        if gemm is not None:
            gemm[(m, n, k)] = {key: row[key] for key in GEMM_KEYS if key in row}
    measure_fused(row, bench, a, b, desc, via)


def checked_candidates(row: dict, a, b, via, run):
    """``run`` that also compares each tuning candidate's bytes with cuBLAS's: every config of a
    family must return the same bytes, and the tuner would otherwise check only its winner.
    Configs that differ are listed in row["candidates_unequal"]."""
    from fixbits.kernels.matmul import matmul

    want = cublas_bytes(a, b, cublas_fn(a, b))
    row["candidates_checked"] = 0
    row["candidates_unequal"] = ""

    def checked(c):
        got = matmul(a, b, desc=via, config=c, out_dtype=PAIR.out_dtype)
        row["candidates_checked"] += 1
        if not same_bits(got, want):
            row["candidates_unequal"] = " ".join(filter(None, [row["candidates_unequal"], c.label()]))
        return run(c)

    return checked


def shape_desc(m: int, n: int, k: int):
    """(descriptor, source label): the arch profile's when it covers the shape, else single-pass."""
    import torch

    from fixbits.desc import GEMMDesc
    from fixbits.kernels.matmul import MatmulUnavailable, resolve_desc

    try:
        return resolve_desc(m, n, k, PAIR.in_dtype, PAIR.out_dtype, torch.device(DEVICE)), "profile", None
    except MatmulUnavailable as exc:
        if PAIR.fp8:
            return None, "none", exc
        desc = GEMMDesc(
            arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype=PAIR.in_dtype, out_dtype=PAIR.out_dtype
        )
        return desc, "single_pass (no profile)", exc


def run_precompile(shapes, fused_shapes, bench, workers: int, timeout_s: float) -> None:
    """Compile every kernel the timing passes can launch (each tuning candidate, plain and
    with the shape's epilogue), in parallel processes, before anything is timed."""
    import torch

    from fixbits.kernels.precompile import CompileJob, precompile
    from fixbits.kernels.single_pass import num_sms
    from fixbits.kernels.tuning import candidates

    t = time.time()
    seeds = getattr(bench, "seeds", {})
    todo = [(m, n, k, ("none", ep)) for m, n, k, _, ep in shapes]
    todo += [(m, n, k, ("none", *FUSED_EPILOGUES)) for m, n, k in fused_shapes]
    jobs = []
    for m, n, k, eps in todo:
        desc, _, _ = shape_desc(m, n, k)
        if desc is None or PAIR.skip_reason(m, n, k):
            continue
        seed = tuple(c for c in [seeds.get((m, n, k))] if c is not None)
        for cfg in candidates(m, n, k, getattr(bench, "tune_limit", 0), seed, PAIR.in_dtype):
            for ep in dict.fromkeys(eps):
                jobs.append(CompileJob(m, n, k, desc, ep, tuple(cfg.to_dict().items()), PAIR.out_dtype, PAIR.fp8))
    sms = num_sms(torch.device(DEVICE)) if DEVICE == "cuda" else 132
    rep = precompile(jobs, workers=workers if workers > 0 else None, sms=sms,
                     timeout_s=timeout_s)  # fmt: skip
    print(f"[precompile] {rep.jobs} calls, {rep.unique} distinct kernels, {rep.compiled} compiled by "
          f"{rep.workers} processes in {rep.seconds:.0f}s ({time.time() - t:.0f}s with the job list); "
          f"{len(rep.errors)} errors", flush=True)  # fmt: skip
    for e in rep.errors[:10]:
        print(f"[precompile] {e}", flush=True)


def host_us(fn, reps: int) -> float:
    """CPU microseconds per call to enqueue ``fn`` (no sync inside the loop): the host side of
    a whole call, Triton's or cuBLAS's launch included."""
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    dt = time.perf_counter() - t
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return dt / reps * 1e6


def graph_times(row: dict, bench, ours: str, f_ours, ref: str, f_ref) -> None:
    """GPU times of both sides in CUDA graphs; a capture failure is recorded, not fatal (the
    whole-call numbers and the byte checks of the row still count)."""
    try:
        row[f"t_{ours}_gpu_ms"] = bench(f_ours, "graph")
        row[f"t_{ref}_gpu_ms"] = bench(f_ref, "graph")
        speed = "speed_ours_gpu" if ours == "ours" else f"speed_{ours}_gpu"
        row[speed] = row[f"t_{ref}_gpu_ms"] / row[f"t_{ours}_gpu_ms"]
    except Exception as exc:
        row[f"{ours}_graph_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        print(f"[graph] {row['m']}x{row['n']}x{row['k']} {ours}: {row[f'{ours}_graph_error']}", flush=True)


def measure_gemm(row: dict, bench, a, b, via) -> None:

    from fixbits.kernels.matmul import matmul

    m, n, k = row["m"], row["n"], row["k"]
    od = PAIR.out_dtype
    ref = cublas_fn(a, b)
    row["t_ours_ms"] = bench(lambda: matmul(a, b, desc=via, out_dtype=od))
    row["t_cublas_ms"] = bench(ref)
    row["speed_ours"] = row["t_cublas_ms"] / row["t_ours_ms"]
    graph_times(row, bench, "ours", lambda: matmul(a, b, desc=via, out_dtype=od), "cublas", ref)
    reps = 50 if row["t_ours_ms"] < 0.5 else 5
    row["host_us_ours"] = host_us(lambda: matmul(a, b, desc=via, out_dtype=od), reps)
    row["host_us_cublas"] = host_us(ref, reps)
    row["tflops_ours"] = 2 * m * n * k / row["t_ours_ms"] / 1e9
    row["tflops_cublas"] = 2 * m * n * k / row["t_cublas_ms"] / 1e9
    row["splitk_tail_lost"] = tail_lost(m, n, k)
    row.update(cublas_launches(ref, m, n, k))
    want = cublas_bytes(a, b, ref)
    row["bytes_equal_cublas"] = same_bits(matmul(a, b, desc=via, out_dtype=od), want)
    if PAIR.fp8:  # informative: torch._scaled_mm's own pick against the profile's reference
        row["scaled_mm_bytes_equal_lt"] = same_bits(ref(), want)


def cublas_launches(fn, m: int, n: int, k: int) -> dict:
    """What cuBLAS ran for this shape: the heuristic's answer and the kernels one call launches
    (torch.profiler, classified by matrices/kernel_families.yaml); empty off the GPU."""
    if DEVICE != "cuda":
        return {}
    out: dict = {}
    try:
        from fixbits.cublas.lt import CublasLt
        from fixbits.cublas.profile import profile_call
        from fixbits.kernels.matmul import _lt_instance

        out["cublas_answer"] = _lt_instance(CublasLt).heuristic(m, n, k, PAIR.in_dtype, PAIR.out_dtype).key_str()
        prof = profile_call(fn)
        out["cublas_kernels"] = " ".join(prof.kernel_names)
        out["cublas_family"] = prof.family
    except Exception as exc:  # noqa: BLE001  (the timing row stays; the reason is kept)
        out["cublas_kernels"] = f"unavailable: {type(exc).__name__}: {exc}"[:200]
    return out


def measure_fused(row: dict, bench, a, b, desc, via) -> None:
    import torch

    from fixbits.kernels._host import torch_dtype
    from fixbits.kernels.matmul import eager_epilogue, matmul

    m, n = row["m"], row["n"]
    ops = epilogue_ops(row["epilogue"])
    if not ops:
        return
    if DEVICE != "cuda" and any(op.kind in ("silu_gate", "gelu", "gelu_tanh") for op in ops):
        row["fused_skipped"] = "dry run: Triton's interpreter runs no libdevice / inline PTX"
        return
    d_ep = desc.replace(epilogue=ops)
    g = torch.Generator(device=DEVICE).manual_seed(m * 1_000_003 + n)
    odt, od = torch_dtype(PAIR.out_dtype), PAIR.out_dtype
    side = {
        "bias": torch.randn(n, device=DEVICE, dtype=odt, generator=g),
        "residual": torch.randn((m, n), device=DEVICE, dtype=odt, generator=g),
        "gate": torch.randn((m, n), device=DEVICE, dtype=odt, generator=g),
    }
    ref = cublas_fn(a, b)

    def fused():
        return matmul(a, b, desc=d_ep if via is not None else None, epilogue=ops, out_dtype=od, **side)

    def pair():
        return eager_epilogue(ref(), d_ep, side["bias"], side["residual"], side["gate"])

    row["t_fused_ms"] = bench(fused)
    row["t_pair_ms"] = bench(pair)
    row["speed_fused"] = row["t_pair_ms"] / row["t_fused_ms"]
    graph_times(row, bench, "fused", fused, "pair", pair)
    want = eager_epilogue(cublas_bytes(a, b, ref), d_ep, side["bias"], side["residual"], side["gate"])
    row["fused_bytes_equal_cublas_pair"] = same_bits(fused(), want)


def save_tuned(bench) -> None:
    """DIR/tuned_configs.json: every per-shape winner so far (fixbits.kernels.tuning format)."""
    out = getattr(bench, "out", None)
    if out is None:
        return
    import torch
    import triton

    from fixbits.kernels.tuning import save_tuned as save

    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu (dry run)"
    save(out / "tuned_configs.json", {"gpu": gpu, "triton": triton.__version__, "torch": torch.__version__,
                                      "source": "benchmarks/gemm/bench.py"})  # fmt: skip


def tail_lost(m: int, n: int, k: int):
    """k terms cuBLAS's split-K tail defect is predicted to drop for this fp16 shape (span rule),
    None when the heuristic cannot be asked (CPU dry runs)."""
    if DEVICE != "cuda":
        return None
    try:
        from fixbits.bugs.splitk_tail import expected_loss, load_k_steps
        from fixbits.cublas.lt import CublasLt
        from fixbits.kernels.matmul import _lt_instance

        ans = _lt_instance(CublasLt).heuristic(m, n, k, PAIR.in_dtype, PAIR.out_dtype)
        step = load_k_steps().lookup("sm_90", PAIR.in_dtype, getattr(ans, "tile_id", None))
        return int(expected_loss(ans, k, step, rule="span"))
    except Exception as exc:  # no cuBLASLt binding: unknown, counted with the ordinary shapes
        print(f"[tail] {m}x{n}x{k}: {type(exc).__name__}: {exc}", flush=True)
        return None


FUSED_EPILOGUES = ("bias", "relu", "silu_gate", "gelu", "residual", "scale")
FUSED_SHAPES = ((16, 4096, 4096), (128, 14336, 4096), (1024, 4096, 4096), (4096, 4096, 14336))


def fused_pass(rows, t0, stop_at, bench, dry_run: bool, out: Path) -> None:
    """Each fusable epilogue on FUSED_SHAPES (decode to prefill): rows with layer 'fused'."""
    shapes = FUSED_SHAPES
    if dry_run:
        shapes = tuple((max(1, m // 512), max(16, n // 512), max(8, k // 512)) for m, n, k in shapes)
    i = 10_000
    # rounds: every epilogue once per round, on rotating shapes, so a budget cut keeps them all
    pairs = [
        (shapes[(r + e) % len(shapes)], ep)
        for r in range(len(shapes))
        for e, ep in enumerate(FUSED_EPILOGUES)
    ]
    gemm: dict = {}  # the plain GEMM timings of a shape, measured on its first epilogue
    last = 0.0
    for (m, n, k), ep in pairs:
        if True:
            if time.time() - t0 + last > stop_at:
                print("budget: stopping the fused sweep", flush=True)
                return
            if dry_run and ep in ("silu_gate", "gelu"):
                continue  # Triton's interpreter runs no libdevice / inline PTX
            t_row = time.time()
            row = {"m": m, "n": n, "k": k, "layer": "fused", "epilogue": ep, "gflop": 2 * m * n * k / 1e9}
            try:
                measure_shape(i, row, bench, gemm)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                traceback.print_exc()
            i += 1
            rows.append(row)
            print(f"[fused] {m}x{n}x{k} {ep}: fused={row.get('speed_fused', float('nan')):.3f} "
                  f"fused_gpu={row.get('speed_fused_gpu', float('nan')):.3f} "
                  f"equal={row.get('fused_bytes_equal_cublas_pair')} {row.get('error', '')}", flush=True)  # fmt: skip
            write_outputs(rows, out, quiet=True)
            last = time.time() - t_row


def _mm(x, y):
    """A Python frame for Dynamo to trace (torch.compile(torch.mm) would run eager)."""
    import torch

    return torch.mm(x, y)


def compile_pass(rows, t0, budget, bench, out: Path) -> None:
    """torch.compile max-autotune (Triton GEMMs only) on evenly spread shapes while budget lasts."""
    import torch
    import torch._inductor.config as icfg

    icfg.max_autotune_gemm_backends = "TRITON"
    icfg.max_autotune = True
    done = 0
    order = list(range(len(rows)))
    # spread: alternate between layer groups and sizes
    by_group = defaultdict(list)
    for i in order:
        if rows[i]["layer"] != "fused":
            by_group[rows[i]["layer"]].append(i)
    spread = []
    while any(by_group.values()):
        for g in sorted(by_group):
            if by_group[g]:
                lst = by_group[g]
                spread.append(lst.pop(len(lst) // 2))
    last = 45.0  # a max-autotune compile plus its timing: started only when one like the last fits
    for i in spread:
        if time.time() - t0 + last > budget - 6:
            break
        t_one = time.time()
        r = rows[i]
        if "error" in r:
            continue
        try:
            torch._dynamo.reset()
            m, n, k = r["m"], r["n"], r["k"]
            a, b = operands(m, n, k, None)
            f = torch.compile(_mm, mode="max-autotune", dynamic=False)
            t = time.time()
            f(a, b)
            r["compile_s"] = time.time() - t
            r["t_compile_ms"] = bench(functools.partial(f, a, b))
            tc = bench(functools.partial(torch.mm, a, b))
            r["speed_compile"] = tc / r["t_compile_ms"]
            done += 1
            print(
                f"[compile] {m}x{n}x{k} speed={r['speed_compile']:.3f} (compile {r['compile_s']:.0f}s)",
                flush=True,
            )
            write_outputs(rows, out, quiet=True)
            last = time.time() - t_one
        except Exception as exc:
            r["compile_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(f"[compile] {r['m']}x{r['n']}x{r['k']} failed: {r['compile_error']}", flush=True)
    print(f"torch.compile measured on {done} shapes")


def write_outputs(rows, out: Path, *, quiet: bool = False) -> None:
    """CSV + markdown table (rewritten after every shape); the plot only at the end (quiet=False)."""
    all_rows = rows
    rows = [r for r in all_rows if r["layer"] != "fused"]
    keys = sorted(
        {k for r in all_rows for k in r}, key=lambda k: (k not in ("m", "n", "k", "layer", "epilogue"), k)
    )
    with open(out / "gemm_bench.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(all_rows)
    groups = sorted({r["layer"] for r in rows})
    lines = [f"# fixbits GEMM benchmark, {PAIR.label} (speed relative to cuBLAS; >1 is faster)", ""]
    lines.append(
        "| layer group | side of 5 GFLOP | shapes | fixbits whole-call geomean | fixbits GPU-time geomean "
        "(CUDA graph, both sides) | torch.compile geomean (n timed: a budget-bound deterministic sample) |"
    )
    lines.append("|---|---|---|---|---|---|")
    table = {}
    for side, pred in (
        ("above", lambda r: r["gflop"] >= SPLIT_FLOP / 1e9),
        ("below", lambda r: r["gflop"] < SPLIT_FLOP / 1e9),
    ):
        for g in groups + ["ALL"]:
            sel = [r for r in rows if (g == "ALL" or r["layer"] == g) and pred(r)]
            if not sel:
                continue
            ours = geomean([r.get("speed_ours") for r in sel])
            gpu = geomean([r.get("speed_ours_gpu") for r in sel])
            comp = [r.get("speed_compile") for r in sel if r.get("speed_compile")]
            table[(g, side)] = (ours, geomean(comp))
            lines.append(
                f"| {g} | {side} | {len(sel)} | {ours:.3f} | {gpu:.3f} | {geomean(comp):.3f} ({len(comp)}) |"
            )
    lines += ["", "## Fused epilogue pairs (our fused kernel vs torch.mm + eager epilogue)", ""]
    lines.append(
        "| epilogue | shapes | fused speed geomean, whole calls (launches included) | "
        "fused speed geomean, GPU time (CUDA graph) | bytes equal to cuBLAS pair |"
    )
    lines.append("|---|---|---|---|---|")
    fused_groups = sorted({r["epilogue"] for r in all_rows if r.get("speed_fused")})
    for e in fused_groups + ["ALL"]:
        sel = [r for r in all_rows if r.get("speed_fused") and (e == "ALL" or r["epilogue"] == e)]
        eq = sum(1 for r in sel if r.get("fused_bytes_equal_cublas_pair"))
        gpu = geomean([r.get("speed_fused_gpu") for r in sel])
        lines.append(
            f"| {e} | {len(sel)} | {geomean([r['speed_fused'] for r in sel]):.3f} | {gpu:.3f} | {eq}/{len(sel)} |"
        )
    hs = [
        (r["host_us_ours"], r["host_us_cublas"])
        for r in rows
        if r.get("host_us_ours") and r.get("host_us_cublas")
    ]
    if hs:
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        lines += ["", f"Host time per call (CPU us to enqueue, median over {len(hs)} shapes): fixbits.matmul "
                  f"{med([h[0] for h in hs]):.1f}, torch.mm {med([h[1] for h in hs]):.1f}"]  # fmt: skip
    tail = [r for r in rows if r.get("splitk_tail_lost")]
    full = [r for r in rows if not r.get("splitk_tail_lost") and "bytes_equal_cublas" in r]
    eq = sum(1 for r in full if r.get("bytes_equal_cublas"))
    eq_tail = sum(1 for r in tail if r.get("bytes_equal_cublas"))
    errs = [r for r in all_rows if r.get("error")]
    checked = [r for r in rows if r.get("candidates_checked")]
    if checked:
        bad = [r for r in checked if r.get("candidates_unequal")]
        lines += ["", f"Tuning candidates compared with cuBLAS's bytes: "
                  f"{sum(r['candidates_checked'] for r in checked)} over {len(checked)} shapes; shapes with a "
                  f"candidate that differs: {len(bad)}"]  # fmt: skip
        lines += [f"- {r['m']}x{r['n']}x{r['k']}: {r['candidates_unequal']}" for r in bad[:40]]
    skipped = [r for r in rows if r.get("skipped")]
    sources: dict = {}
    for r in rows:
        sources[r.get("desc_source")] = sources.get(r.get("desc_source"), 0) + 1
    lines += ["", f"GEMM bytes equal to torch.mm: {eq}/{len(full)} shapes whose cuBLAS kernel sums all of K; "
              f"split-K tail shapes (fixbits.bugs.splitk_tail predicts a loss; never counted as matches): "
              f"{len(tail)}, of which {eq_tail} equal anyway; errors: {len(errs)}; shapes not timed: "
              f"{len(skipped)} ({'; '.join(sorted({r['skipped'][:80] for r in skipped}))})",
              f"descriptor sources: {sources} ('single_pass (no profile)': the arch profile does not cover "
              "the shape, so a single-pass descriptor is timed and its bytes need not be cuBLAS's)"]  # fmt: skip
    for r in [r for r in full if not r.get("bytes_equal_cublas")][:40]:
        lines.append(
            f"- bytes differ {r['m']}x{r['n']}x{r['k']} ({r['layer']}): descriptor {r.get('desc_source')} "
            f"{r.get('family')} {r.get('desc_hash')}; cuBLAS {r.get('cublas_answer', '?')} ran "
            f"{r.get('cublas_family', '?')}: {str(r.get('cublas_kernels', '?'))[:120]}"
        )
    for r in errs[:20]:
        lines.append(f"- error {r['m']}x{r['n']}x{r['k']}: {r['error']}")
    (out / "gemm_bench.md").write_text("\n".join(lines) + "\n")
    if quiet:
        return
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(18, 5))
        for ax, side in zip(axes[:2], ("above", "below"), strict=True):
            gs = [g for g in groups if (g, side) in table]
            xs = range(len(gs))
            ax.bar([x - 0.2 for x in xs], [table[(g, side)][0] for g in gs], 0.4, label="fixbits (bit-exact)")
            ax.bar(
                [x + 0.2 for x in xs],
                [table[(g, side)][1] for g in gs],
                0.4,
                label="torch.compile (order free)",
            )
            ax.axhline(1.0, color="k", lw=0.8)
            ax.set_xticks(list(xs), gs, rotation=30)
            ax.set_title(f"{side} 5 GFLOP: speed relative to cuBLAS")
            ax.legend()
        fe = [e for e in fused_groups]
        axes[2].bar(
            range(len(fe)),
            [
                geomean([r["speed_fused"] for r in all_rows if r.get("speed_fused") and r["epilogue"] == e])
                for e in fe
            ],
        )
        axes[2].axhline(1.0, color="k", lw=0.8)
        axes[2].set_xticks(range(len(fe)), fe, rotation=30)
        axes[2].set_title("fused epilogue vs cuBLAS + eager epilogue")
        fig.tight_layout()
        fig.savefig(out / "gemm_bench.png", dpi=110)
    except Exception as exc:
        print(f"plot failed: {exc}")


if __name__ == "__main__":
    sys.exit(main())
