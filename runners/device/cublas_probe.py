#!/usr/bin/env python3
"""GPU probe of the cuBLASLt binding, launch profiling and the split-K tail loss.

    PYTHONPATH=<repo> python3 runners/device/cublas_probe.py --out DIR [--budget-s 360]

Parts (each isolated: a failure is recorded and the next part runs):
  env      library discovery, versions, nvmath vs fixbits enum values
  smoke    heuristic + matmul fp16/bf16/fp8: own pick vs chosen algo vs torch byte equality
  profile  kernels launched + family for ~20 shapes (own pick, torch.mm fp32 out, torch.matmul)
  sweep    split-K tail: heuristic for every shape, all-ones GEMM where either condition
           variant predicts a loss plus seeded others, TP/FP/FN/TN with and without ALGO_ID
  torch    whether torch.mm / torch.matmul lose the tail, at the shapes the sweep found
  replay   random inputs at losing shapes: cuBLASLt bytes vs the emulator on the tail-dropped desc
  libs     the ctypes path over every discovered libcublasLt file against the default binding
Writes DIR/cublas_probe.yaml (everything), DIR/splitk_sweep.csv (every shape run) and prints a
summary table last.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
import traceback
from typing import Any

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import yaml  # noqa: E402

SMOKE_SHAPES = [
    (256, 4096, 4096),
    (16, 4096, 14336),
    (1, 8, 11528),
    (64, 64, 1024),
    (3, 5, 777),
    (17, 1000, 333),
    (1, 4096, 4096),
    (128, 128, 65536),
]
PROFILE_SHAPES = [
    (1, 8, 8648),
    (1, 8, 11528),
    (32, 32, 11528),
    (64, 64, 11528),
    (128, 128, 11528),
    (1, 8, 57608),
    (1, 8, 57616),
    (1, 2, 1032),
    (16, 64, 11528),
    (1, 4096, 4096),
    (8, 4096, 4096),
    (16, 4096, 14336),
    (256, 4096, 4096),
    (4096, 4096, 4096),
    (3, 5, 777),
    (17, 1000, 333),
    (1, 1, 65536),
    (4096, 1, 4096),
    (64, 64, 100000),
    (1, 8, 300000),
    (2, 3, 5),
]
CSV_PLAIN_ROWS = 20000
FINDINGS_LOSS_SHAPES = [
    (1, 8, 11528),
    (32, 32, 11528),
    (16, 64, 11528),
    (1, 8, 57608),
    (1, 8, 57616),
    (64, 64, 11528),
    (128, 128, 11528),
    (1, 8, 8648),
    (1, 2, 1032),
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the results")
    p.add_argument("--budget-s", type=float, default=360.0, help="total wall-clock budget (default 360 s)")
    p.add_argument(
        "--sweep-share", type=float, default=0.65, help="share of the budget for the sweep (default 0.65)"
    )
    p.add_argument(
        "--profile-s", type=float, default=45.0, help="time cap of the profile part (default 45 s)"
    )
    p.add_argument("--quick", action="store_true", help="the quick sweep from sweep.yaml (fewer shapes)")
    p.add_argument(
        "--parts", default="env,smoke,profile,sweep,torch,replay,libs", help="comma list of parts to run"
    )
    p.add_argument("--seed", type=int, default=20261202)
    args = p.parse_args(argv)
    known = {"env", "smoke", "profile", "sweep", "torch", "replay", "libs"}
    bad = set(args.parts.split(",")) - known
    if bad:
        p.error(f"unknown part(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(known))}")
    if args.budget_s <= 0 or not 0 < args.sweep_share < 1:
        p.error("--budget-s must be > 0 and --sweep-share in (0, 1)")
    return args


class Report:
    """Results by part, written after every part so a crash late keeps what came before."""

    def __init__(self, out: str) -> None:
        self.out = out
        self.data: dict[str, Any] = {"parts": {}, "errors": {}}
        os.makedirs(out, exist_ok=True)

    def part(self, name: str, fn: Any, *a: Any) -> None:
        t0 = time.time()
        try:
            self.data["parts"][name] = fn(*a)
        except Exception:
            self.data["errors"][name] = traceback.format_exc()
        self.data.setdefault("seconds", {})[name] = round(time.time() - t0, 2)
        self.flush()

    def flush(self) -> None:
        with open(os.path.join(self.out, "cublas_probe.yaml"), "w") as fh:
            # str subclasses (torch's TorchVersion) and numpy scalars are not safe-dumpable as is
            plain = json.loads(json.dumps(self.data, default=str))
            yaml.safe_dump(plain, fh, sort_keys=False, width=140)


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------


def part_env(lt: Any) -> dict[str, Any]:
    import torch

    from fixbits.cublas import enums as E
    from fixbits.cublas.lib import discover
    from fixbits.cublas.lt import loaded_cublaslt_paths

    out: dict[str, Any] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "binding": lt.api_kind,
        "version": lt.version,
        "library_path": lt.library_path,
        "loaded": list(loaded_cublaslt_paths()),
        "discovered": [
            dict(path=x.path, source=x.source, version=x.version, error=x.error) for x in discover()
        ],
    }
    try:  # how cheap a heuristic query is (the sweep and the arch-profile scan make thousands)
        t0 = time.perf_counter()
        for i in range(2000):
            lt.heuristic(1 + i % 64, 8 + (i * 7) % 512, 8 * (1 + (i * 131) % 9000), "fp16", "fp32")
        out["heuristic_us_per_query"] = round((time.perf_counter() - t0) / 2000 * 1e6, 1)
    except Exception as exc:
        out["heuristic_timing"] = _err(exc)
    try:
        from nvmath.bindings import cublasLt as nv

        mism = {}
        for const, (cls, member) in E.NVMATH_NAMES.items():
            theirs = int(getattr(getattr(nv, cls), member))
            if theirs != getattr(E, const):
                mism[const] = {"fixbits": getattr(E, const), "nvmath": theirs}
        out["enum_mismatches_vs_nvmath"] = mism
        out["nvmath_version"] = int(nv.get_version())
    except Exception as exc:
        out["nvmath"] = _err(exc)
    return out


def _draw(m: int, n: int, k: int, dtype: Any, seed: int, wide: bool) -> tuple[Any, Any]:
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    if wide:  # exponents spread over +-2^8 so a regrouping shows in the low bits
        a = a * torch.exp2(torch.randint(-8, 9, (m, k), device="cuda", generator=g).float())
        b = b * torch.exp2(torch.randint(-8, 9, (k, n), device="cuda", generator=g).float())
    if dtype in (torch.float8_e4m3fn,):
        a, b = a.clamp(-400, 400), b.clamp(-400, 400)
    return a.to(dtype), b.to(dtype)


def _bits_equal(x: Any, y: Any) -> tuple[bool, int]:
    import torch

    if x.shape != y.shape or x.dtype != y.dtype:
        return False, -1
    ints = {4: torch.int32, 2: torch.int16, 1: torch.uint8}[x.element_size()]
    diff = int((x.contiguous().view(ints) != y.contiguous().view(ints)).sum().item())
    return diff == 0, diff


def part_smoke(lt: Any, seed: int) -> dict[str, Any]:
    import torch

    rows = []
    for in_name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp8_e4m3", torch.float8_e4m3fn)):
        for m, n, k in SMOKE_SHAPES:
            if in_name.startswith("fp8") and (k % 16 or n % 16 or m * n * k > 2**31):
                continue
            for wide in (False, True):
                row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "in": in_name, "wide": wide}
                try:
                    a, b = _draw(m, n, k, dt, seed, wide)
                    ans = lt.heuristic(m, n, k, in_name, "fp32")
                    row["heuristic"] = ans.to_dict()
                    own = lt.matmul(a, b, "fp32")
                    chosen = lt.matmul(a, b, "fp32", algo=ans)
                    row["own_vs_chosen_equal"], row["own_vs_chosen_diff"] = _bits_equal(own, chosen)
                    if in_name.startswith("fp8"):
                        one = torch.ones((), device="cuda")
                        ref = torch._scaled_mm(
                            a, b.t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.float32
                        )
                        row["vs_scaled_mm_equal"], row["vs_scaled_mm_diff"] = _bits_equal(own, ref)
                        if not row["vs_scaled_mm_equal"]:  # which kernels each side ran
                            from fixbits.cublas.profile import profile_call

                            bt = b.t().contiguous().t()
                            row["kernels_own"] = list(
                                profile_call(lambda a=a, b=b: lt.matmul(a, b, "fp32")).kernel_names
                            )
                            row["kernels_scaled_mm"] = list(
                                profile_call(
                                    lambda a=a, bt=bt, one=one: torch._scaled_mm(
                                        a, bt, scale_a=one, scale_b=one, out_dtype=torch.float32
                                    )
                                ).kernel_names
                            )
                            for fa in (False, True):
                                alt = lt.matmul(a, b, "fp32", fast_accum=fa)
                                row[f"fast_accum_{fa}_vs_scaled_mm_equal"] = _bits_equal(alt, ref)[0]
                        row["max_abs_vs_fp32_ref"] = float((own - a.float() @ b.float()).abs().max().item())
                    else:
                        ref = torch.mm(a, b, out_dtype=torch.float32)
                        row["vs_torch_mm_fp32_equal"], row["vs_torch_mm_fp32_diff"] = _bits_equal(own, ref)
                        own16 = lt.matmul(a, b, in_name)
                        row["out_in_dtype_vs_torch_mm_equal"], _ = _bits_equal(own16, torch.mm(a, b))
                except Exception as exc:
                    row["error"] = _err(exc)
                rows.append(row)
    # the paper's check that asking for an fp32 output leaves the heuristic's choice alone
    from fixbits.bugs.splitk_tail import load_sweep

    same = differ = 0
    examples = []
    for m, n, k in load_sweep().random_shapes()[:600]:
        for in_name in ("fp16", "bf16"):
            try:
                a16 = lt.heuristic(m, n, k, in_name, in_name)
                a32 = lt.heuristic(m, n, k, in_name, "fp32")
            except Exception as exc:
                examples.append(f"{m}x{n}x{k} {in_name}: {_err(exc)}")
                continue
            if a16.key() == a32.key():
                same += 1
            else:
                differ += 1
                if len(examples) < 20:
                    examples.append(f"{m}x{n}x{k} {in_name}: {a16.key_str()} vs fp32 {a32.key_str()}")
    out_invariance = {"same": same, "differ": differ, "examples": examples}
    ok = sum(
        1
        for r in rows
        if r.get("own_vs_chosen_equal") and (r.get("vs_torch_mm_fp32_equal") or r.get("vs_scaled_mm_equal"))
    )
    return {
        "cases": rows,
        "out_dtype_invariance": out_invariance,
        "summary": {"cases": len(rows), "all_equal": ok, "errors": sum(1 for r in rows if "error" in r)},
    }


def part_replay(lt: Any, out: str, seed: int, budget_s: float) -> dict[str, Any]:
    """Drawn inputs at losing shapes: do cuBLASLt's bytes equal the CPU emulator run on the
    tail-dropped descriptor (s contiguous parts, fp32 partials chained in order)? Each case is
    also written as a golden record (DIR/golden_cublas_bugs_splitk.yaml) for CPU replay."""
    import numpy as np
    import torch

    from fixbits.bugs.splitk_tail import device_arch, load_k_steps, tail_condition, tail_dropped_desc
    from fixbits.cublas.backend import to_numpy, to_torch
    from fixbits.emulate import emulate
    from fixbits.golden import GoldenRecord, pack_output, save_file, sha256_of
    from fixbits.inputs import draw

    arch = device_arch()
    ks = load_k_steps()
    rows = []
    records = []
    t0 = time.monotonic()
    for m, n, k in [
        (1, 8, 11528),
        (1, 8, 114008),
        (32, 32, 11528),
        (6, 16, 129376),
        (1, 8, 57608),
        (16, 64, 223008),
        (16, 64, 11528),
        (1, 8, 57616),
    ]:
        for in_name in ("fp16", "bf16"):
            if time.monotonic() - t0 > budget_s:
                break
            row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "in": in_name}
            try:
                ans = lt.heuristic(m, n, k, in_name, "fp32")
                pred = tail_condition(k, ks.lookup(arch, in_name, ans.tile_id), ans.splitk_num, ans.algo_id)
                row.update(
                    answer=ans.key_str(), predicted_lost=pred.lost_span, paper_predicted_lost=pred.lost
                )
                if not pred.lost_span:
                    rows.append(row)
                    continue
                desc = tail_dropped_desc(pred, in_name, arch)
                row["desc"] = desc.short_hash
                for kind in ("ordinary", "wide"):
                    an = draw((m, k), in_name, kind, seed)
                    bn = draw((k, n), in_name, kind, seed + 1)
                    gpu = to_numpy(lt.matmul(to_torch(an, in_name), to_torch(bn, in_name), "fp32"), "fp32")
                    cpu = emulate(desc, an, bn)
                    same = gpu.view(np.uint32) == cpu.view(np.uint32)
                    row[kind] = {"differ": int((~same).sum()), "of": m * n}
                    records.append(
                        GoldenRecord(
                            id=f"splitk-tail-{m}x{n}x{k}-{in_name}-{kind}",
                            suite="cublas_bugs",
                            case="gemm",
                            shape=(m, n, k),
                            in_dtype=in_name,
                            out_dtype="fp32",
                            input_kind=kind,
                            seed_a=seed,
                            seed_b=seed + 1,
                            descriptor=desc.to_dict(),
                            desc_hash=desc.short_hash,
                            sha256=sha256_of(gpu),
                            elements=int(gpu.size),
                            env={
                                "device": torch.cuda.get_device_name(),
                                "cublaslt": lt.version_str,
                                "heuristic": ans.key_str(),
                            },
                            output_b64z=None if same.all() else pack_output(gpu),
                            note=f"cuBLASLt own pick (algo NULL, 32 MiB workspace), loses {pred.lost_span} of K; "
                            "descriptor: the tail-dropped split (fixbits.bugs.splitk_tail.tail_dropped_desc)",
                        )
                    )
            except Exception as exc:
                row["error"] = _err(exc)
            rows.append(row)
    if records:
        save_file(os.path.join(out, "golden_cublas_bugs_splitk.yaml"), records)
    equal = sum(
        1 for r in rows if r.get("ordinary", {}).get("differ") == 0 and r.get("wide", {}).get("differ") == 0
    )
    return {
        "cases": rows,
        "replayed_equal": equal,
        "replayed": sum(1 for r in rows if "ordinary" in r),
        "golden_records": len(records),
    }


def part_libs(lt: Any, seed: int) -> dict[str, Any]:
    """Last, since a second copy of the library in one process is the riskiest thing done here."""
    import torch

    from fixbits.cublas.lib import discover
    from fixbits.cublas.lt import CublasLt

    libs = []
    for lib in {x.path: x for x in discover() if x.usable}.values():
        entry: dict[str, Any] = {"path": lib.path, "version": lib.version}
        try:
            with CublasLt(lib.path) as other:
                same = []
                for m, n, k in SMOKE_SHAPES[:4]:
                    same.append(other.heuristic(m, n, k).key() == lt.heuristic(m, n, k).key())
                a, b = _draw(32, 32, 11528, torch.float16, seed, True)
                eq, _ = _bits_equal(other.matmul(a, b, "fp32"), lt.matmul(a, b, "fp32"))
                entry.update(api=other.api_kind, heuristic_same_as_default=same, bytes_same_as_default=eq)
        except Exception as exc:
            entry["error"] = _err(exc)
        libs.append(entry)
    return {"libraries": libs}


def part_profile(lt: Any, budget_s: float) -> dict[str, Any]:
    import torch

    from fixbits.cublas.profile import nvjet_tile, profile_call

    rows = []
    t0 = time.monotonic()
    skipped = 0
    for in_name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        for m, n, k in PROFILE_SHAPES:
            if time.monotonic() - t0 > budget_s:
                skipped += 1
                continue
            row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "in": in_name}
            try:
                a = torch.ones(m, k, dtype=dt, device="cuda")
                b = torch.ones(k, n, dtype=dt, device="cuda")
                row["heuristic"] = lt.heuristic(m, n, k, in_name, "fp32").to_dict()
                for label, fn in (
                    ("lt_own", lambda a=a, b=b: lt.matmul(a, b, "fp32")),
                    ("lt_own_no_ws", lambda a=a, b=b: lt.matmul(a, b, "fp32", workspace_bytes=0)),
                    ("torch_mm_out_fp32", lambda a=a, b=b: torch.mm(a, b, out_dtype=torch.float32)),
                    ("torch_matmul", lambda a=a, b=b: torch.matmul(a, b)),
                ):
                    try:
                        prof = profile_call(fn)
                        d = prof.to_dict()
                        d["tiles"] = [nvjet_tile(x) for x in prof.kernel_names]
                        row[label] = d
                    except Exception as exc:
                        row[label] = {"error": _err(exc)}
            except Exception as exc:
                row["error"] = _err(exc)
            rows.append(row)
    fams: dict[str, int] = {}
    for r in rows:
        for label in ("lt_own", "torch_mm_out_fp32", "torch_matmul"):
            f = (r.get(label) or {}).get("family")
            if f:
                fams[f] = fams.get(f, 0) + 1
    return {"cases": rows, "families_seen": fams, "skipped_for_time": skipped}


def part_sweep(lt: Any, out: str, budget_s: float, quick: bool, seed: int) -> dict[str, Any]:
    from fixbits.bugs.splitk_tail import (
        VARIANTS,
        OnesPool,
        device_arch,
        load_k_steps,
        load_sweep,
        ones_lt,
        run_sweep,
        summary_table,
    )

    spec = load_sweep(quick=quick)
    ks = load_k_steps()
    arch = device_arch()
    pool = OnesPool()
    shapes = [(m, n, k, dt) for (m, n, k) in spec.shapes() for dt in spec.in_dtypes]
    random.Random(seed).shuffle(shapes)  # a time-capped sweep then covers every (M, N) and dtype evenly

    def heuristic(m: int, n: int, k: int, dt: str) -> Any:
        return lt.heuristic(m, n, k, dt, "fp32")

    def observe(m: int, n: int, k: int, dt: str) -> int:
        r = ones_lt(lt, m, n, k, dt, workspace_bytes=32 * 1024 * 1024, pool=pool)
        if not r.uniform:
            raise RuntimeError(f"non-uniform output min {r.min} max {r.max}")
        lost = r.lost(k)
        assert lost is not None
        return lost

    t0 = time.monotonic()
    res = run_sweep(
        shapes,
        heuristic,
        observe,
        lambda dt, ans: ks.lookup(arch, dt, ans.tile_id),
        seed=seed,
        clock=time.monotonic,
        deadline=t0 + budget_s,
        heuristic_share=0.45,
        algo_ids=ks.condition_algo_ids,
    )
    with open(os.path.join(out, "splitk_sweep.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            [
                "m",
                "n",
                "k",
                "in_dtype",
                "algo_id",
                "tile_id",
                "splitk_num",
                "reduction_scheme",
                "k_step",
                "predicted",
                "predicted_without_algo",
                "observed",
                "error",
                "predicted_span",
                "predicted_span_without_algo",
                "custom_option",
                "stages_id",
            ]
        )
        plain = 0  # whole shapes nothing flagged: the counts are in the YAML, the CSV keeps a sample
        for r in res.records:
            interesting = r.error or r.flagged or r.observed
            if r.ran and not interesting:
                plain += 1
                if plain > CSV_PLAIN_ROWS:
                    continue
            if r.ran or interesting:
                a = r.answer or (None,) * 7
                w.writerow(
                    [
                        r.m,
                        r.n,
                        r.k,
                        r.in_dtype,
                        a[0],
                        a[1],
                        a[2],
                        a[3],
                        r.k_step,
                        r.predicted,
                        r.predicted_without_algo,
                        r.observed,
                        r.error or "",
                        r.predicted_span,
                        r.predicted_span_without_algo,
                        a[5],
                        a[6],
                    ]
                )
    losses = [
        dict(
            shape=f"{r.m}x{r.n}x{r.k}",
            in_dtype=r.in_dtype,
            answer=list(r.answer or ()),
            observed=r.observed,
            predicted=r.predicted,
            predicted_without_algo=r.predicted_without_algo,
            predicted_span=r.predicted_span,
        )
        for r in res.losses
    ]
    mismatches = {
        variant: [
            dict(
                shape=f"{r.m}x{r.n}x{r.k}",
                in_dtype=r.in_dtype,
                answer=list(r.answer or ()),
                observed=r.observed,
                predicted=r.prediction(variant),
            )
            for r in res.mispredicted(variant)
        ][:200]
        for variant in ("paper", "span")
    }
    answers: dict[str, int] = {}
    for r in res.records:
        if r.answer:
            answers[str(list(r.answer))] = answers.get(str(list(r.answer)), 0) + 1
    return {
        "arch": arch,
        "library_version": lt.version_str,
        "shapes_planned": len(shapes),
        "queried": res.queried,
        "heuristic_errors": res.heuristic_errors,
        "ran": res.ran,
        "run_errors": res.run_errors,
        "flagged_by_either_variant": res.flagged,
        "out_of_time": res.out_of_time,
        "confusion": {
            variant: {
                dt or "all": res.confusion(variant, in_dtype=dt).as_dict() for dt in (*spec.in_dtypes, None)
            }
            for variant in VARIANTS
        },
        "losses_found": len(losses),
        "losses": losses[:400],
        "mismatches": mismatches,
        "distinct_answers": len(answers),
        "answers_top": dict(sorted(answers.items(), key=lambda kv: -kv[1])[:60]),
        "csv_plain_rows_kept": min(plain, CSV_PLAIN_ROWS),
        "table": summary_table(res, spec.in_dtypes),
        "seconds": round(time.monotonic() - t0, 1),
    }


def part_torch(lt: Any, sweep: dict[str, Any] | None, budget_s: float) -> dict[str, Any]:
    from fixbits.bugs.splitk_tail import OnesPool, ones_lt, ones_torch, rounded

    shapes = list(FINDINGS_LOSS_SHAPES)
    for loss in (sweep or {}).get("losses", [])[:150]:
        m, n, k = (int(x) for x in loss["shape"].split("x"))
        if (m, n, k) not in shapes:
            shapes.append((m, n, k))
    pool = OnesPool()
    rows = []
    t0 = time.monotonic()
    for m, n, k in shapes:
        for dt in ("fp16", "bf16"):
            if time.monotonic() - t0 > budget_s:
                break
            row: dict[str, Any] = {"shape": f"{m}x{n}x{k}", "in": dt, "whole_in_dtype": rounded(k, dt)}
            try:
                row["lt_own_lost"] = ones_lt(lt, m, n, k, dt, workspace_bytes=32 << 20, pool=pool).lost(k)
                row["lt_no_workspace_lost"] = ones_lt(lt, m, n, k, dt, workspace_bytes=0, pool=pool).lost(k)
                for how in ("mm", "mm_out_fp32", "matmul"):
                    r = ones_torch(m, n, k, dt, how, pool=pool)
                    row[how] = r.value if r.uniform else [r.min, r.max]
                row["mm_out_fp32_lost"] = (
                    int(k - row["mm_out_fp32"]) if isinstance(row["mm_out_fp32"], float) else None
                )
                row["mm_short"] = isinstance(row["mm"], float) and row["mm"] != rounded(k, dt)
                row["matmul_short"] = isinstance(row["matmul"], float) and row["matmul"] != rounded(k, dt)
            except Exception as exc:
                row["error"] = _err(exc)
            rows.append(row)
    return {
        "cases": rows,
        "mm_out_fp32_loses": sum(1 for r in rows if r.get("mm_out_fp32_lost")),
        "mm_in_dtype_short": sum(1 for r in rows if r.get("mm_short")),
        "matmul_short": sum(1 for r in rows if r.get("matmul_short")),
        "no_workspace_whole": sum(1 for r in rows if r.get("lt_no_workspace_lost") == 0),
        "mm_out_fp32_equals_lt_own": sum(
            1 for r in rows if "lt_own_lost" in r and r.get("mm_out_fp32_lost") == r["lt_own_lost"]
        ),
    }


def summary(rep: Report) -> str:
    p = rep.data["parts"]
    lines = ["== cublas_probe summary =="]
    env = p.get("env") or {}
    lines.append(
        f"env: {env.get('device')} cap {env.get('capability')} cuBLASLt {env.get('version')} via {env.get('binding')}"
        f"; enum mismatches vs nvmath: {env.get('enum_mismatches_vs_nvmath', env.get('nvmath'))}"
        f"; heuristic {env.get('heuristic_us_per_query')} us/query"
    )
    sm = (p.get("smoke") or {}).get("summary")
    if sm:
        inv = (p.get("smoke") or {}).get("out_dtype_invariance", {})
        lines.append(
            f"smoke: {sm['all_equal']}/{sm['cases']} cases bit-equal own/chosen/torch, {sm['errors']} errors; "
            f"heuristic same for fp32 vs in-dtype output at {inv.get('same')} shapes, differs at {inv.get('differ')}"
        )
    pr = p.get("profile")
    if pr:
        lines.append(f"profile: families seen {pr['families_seen']}")
    sw = p.get("sweep")
    if sw:
        lines.append(
            f"sweep: {sw['queried']} shapes queried, {sw['ran']} run, {sw['losses_found']} losses, "
            f"{sw['flagged_by_either_variant']} flagged, out_of_time={sw['out_of_time']}"
        )
        lines.append(sw["table"])
    tp = p.get("torch")
    if tp:
        lines.append(
            f"torch: mm(out fp32) loses at {tp['mm_out_fp32_loses']} cases, mm short {tp['mm_in_dtype_short']}, "
            f"matmul short {tp['matmul_short']}, mm(out fp32)==lt own at {tp['mm_out_fp32_equals_lt_own']}"
            f"/{len(tp['cases'])}, zero-workspace control whole at {tp.get('no_workspace_whole')}"
        )
    rp = p.get("replay")
    if rp:
        lines.append(
            f"replay: emulator on the tail-dropped desc equals cuBLASLt at {rp['replayed_equal']}/{rp['replayed']} losing cases"
        )
    for x in (p.get("libs") or {}).get("libraries", []):
        lines.append(
            f"lib {x['path']} ({x['version']}): heuristic same {x.get('heuristic_same_as_default')}, "
            f"bytes same {x.get('bytes_same_as_default')} {x.get('error', '')}"
        )
    for name, tb in rep.data["errors"].items():
        lines.append(f"PART {name} FAILED: {tb.strip().splitlines()[-1]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t_start = time.monotonic()
    rep = Report(args.out)
    parts = args.parts.split(",")
    try:
        from fixbits.cublas.lt import CublasLt

        lt = CublasLt()
    except Exception:
        rep.data["errors"]["init"] = traceback.format_exc()
        rep.flush()
        print(summary(rep))
        return 1

    def left() -> float:
        return args.budget_s - (time.monotonic() - t_start)

    sweep_budget = args.budget_s * args.sweep_share
    if "env" in parts:
        rep.part("env", part_env, lt)
    if "smoke" in parts:
        rep.part("smoke", part_smoke, lt, args.seed)
    if "profile" in parts and left() > sweep_budget + 30:
        rep.part("profile", part_profile, lt, min(args.profile_s, left() - sweep_budget - 20))
    if "sweep" in parts:
        rep.part(
            "sweep",
            part_sweep,
            lt,
            args.out,
            max(20.0, min(sweep_budget, left() - 40)),
            args.quick,
            args.seed,
        )
    if "torch" in parts:
        rep.part("torch", part_torch, lt, rep.data["parts"].get("sweep"), max(10.0, left() - 60))
    if "replay" in parts:
        rep.part("replay", part_replay, lt, args.out, args.seed, max(10.0, left() - 15))
    if "libs" in parts:
        rep.part("libs", part_libs, lt, args.seed)
    rep.data["total_seconds"] = round(time.monotonic() - t_start, 1)
    rep.flush()
    print(summary(rep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
