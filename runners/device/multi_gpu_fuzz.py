"""Issue 9's proof on a machine with two (or more) GPUs: a fuzz sweep spread one GPU per xdist
worker, both GPUs busy, every shape exactly once in the merged report, wall time against one GPU.

    python3 runners/device/multi_gpu_fuzz.py --out DIR [--count 2000] [--gpus 2] [--budget-s 540]
    python3 runners/device/multi_gpu_fuzz.py --out DIR --device cpu --count 40   # the CPU dry run

1. N-GPU run: `pytest runners/device/multi_gpu -n N --mode fuzz` over ``--count`` seeded fuzz
   shapes (test_fuzz_repeat.py: cuBLAS fp16 matmul repeated, bytes compared), with
   `nvidia-smi --query-gpu=index,utilization.gpu,memory.used --loop-ms=200` sampling all along.
2. `fixbits report --check-shapes --expect-shapes COUNT` on its JUnit: each shape exactly once;
   the fixbits.gpu / fixbits.worker properties give the shapes per GPU.
3. One-GPU run of the same sweep (-n 1, CUDA_VISIBLE_DEVICES=<first GPU>) for the wall time.
Each run has a soft deadline (fixbits.gate_budget: tests not started by then skip, so the run
still ends with a report); the YAML says how many shapes each run actually computed.

Writes DIR/multi_gpu_fuzz.yaml (verdict and figures), DIR/junit-{N}gpu.xml, DIR/junit-1gpu.xml,
DIR/smi-{N}gpu.csv, DIR/check_shapes.txt and the pytest logs; prints a table last. Exit 0 when
the proof holds, 1 when a check fails, 2 when it cannot run (fewer GPUs than --gpus).
``--device cpu`` simulates the GPU list (CUDA_VISIBLE_DEVICES=0,1,...) so the workers pin
themselves as they would on GPUs, and computes on the CPU; nvidia-smi is not sampled.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

SUITE = "runners/device/multi_gpu"
BUSY_UTIL = 1  # % utilisation (time a kernel ran in the sample window) that counts a sample as busy
BUSY_SHARE = 0.5  # a GPU is busy when at least this share of the run's samples are (mean % reported)


def _env(args: argparse.Namespace, visible: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": visible,
        "FIXBITS_FUZZ_COUNT": str(args.count),
        "FIXBITS_FUZZ_DEVICE": "cpu" if args.device == "cpu" else "cuda",
    }
    if args.max_elements:
        env["FIXBITS_FUZZ_MAX_ELEMENTS"] = str(args.max_elements)
    return env


class SmiSampler:
    """nvidia-smi in its own loop mode, written to a CSV while a run goes on."""

    def __init__(self, path: Path, period_ms: int = 200) -> None:
        self.path = path
        self.proc: subprocess.Popen[str] | None = None
        self.period_ms = period_ms

    def __enter__(self) -> SmiSampler:
        self.fh = open(self.path, "w")
        self.proc = subprocess.Popen(
            [
                "nvidia-smi",
                "--query-gpu=timestamp,index,utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
                f"--loop-ms={self.period_ms}",
            ],
            stdout=self.fh,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.fh.close()


def smi_summary(path: Path) -> dict[str, dict[str, float]]:
    """Per GPU index: samples, share of samples at >= BUSY_UTIL %, mean utilisation, peak memory."""
    per: dict[str, list[tuple[float, float]]] = {}
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        for row in csv.reader(fh):
            if len(row) < 4:
                continue
            try:
                idx, util, mem = row[1].strip(), float(row[2]), float(row[3])
            except ValueError:
                continue
            per.setdefault(idx, []).append((util, mem))
    return {
        i: {
            "samples": len(v),
            "busy_share": round(sum(u >= BUSY_UTIL for u, _ in v) / len(v), 3),
            "mean_util": round(sum(u for u, _ in v) / len(v), 1),
            "peak_mem_mib": max(m for _, m in v),
        }
        for i, v in sorted(per.items())
    }


def junit_counts(path: Path) -> dict[str, Any]:
    """Outcomes, and shapes computed per pinned GPU (fixbits.gpu) and per worker."""
    from fixbits.report.junit import cases, merge

    if not path.is_file():
        return {"error": f"{path.name} not written"}
    results = cases(merge([path]))
    outcome = Counter(r.outcome for r in results)
    per_gpu = Counter(
        dict(r.properties).get("fixbits.gpu", "unpinned") for r in results if r.outcome != "skipped"
    )
    per_worker = Counter(
        dict(r.properties).get("fixbits.worker", "-") for r in results if r.outcome != "skipped"
    )
    return {
        "tests": len(results),
        **{k: outcome.get(k, 0) for k in ("passed", "failed", "error", "skipped")},
        "computed_per_gpu": dict(sorted(per_gpu.items())),
        "computed_per_worker": dict(sorted(per_worker.items())),
    }


def run_sweep(
    args: argparse.Namespace, out: Path, *, workers: int, visible: str, tag: str, budget_s: float
) -> dict[str, Any]:
    junit = out / f"junit-{tag}.xml"
    deadline = time.time() + max(budget_s - 15.0, 5.0)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        SUITE,
        "-n",
        str(workers),
        "--mode",
        "fuzz",
        "--seed",
        str(args.seed),
    ]
    cmd += ["-p", "no:cacheprovider", "-p", "fixbits.gate_budget", f"--fixbits-deadline={deadline:.0f}"]
    cmd += [f"--junitxml={junit}", "-o", "junit_family=xunit1", "-q", "-rfE"]
    t0 = time.monotonic()
    with open(out / f"pytest-{tag}.log", "w") as log:
        try:
            rc: int | None = subprocess.run(
                cmd, cwd=REPO, env=_env(args, visible), stdout=log, stderr=subprocess.STDOUT,
                timeout=budget_s + 60, check=False,
            ).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = None
    wall = time.monotonic() - t0
    return {
        "workers": workers,
        "visible": visible,
        "pytest_exit": rc,
        "wall_s": round(wall, 1),
        **junit_counts(junit),
    }


def main(argv: list[str] | None = None) -> int:
    from fixbits.workers import visible_gpus

    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=2000, help="fuzz shapes (the issue asks for >= 2000)")
    ap.add_argument("--gpus", type=int, default=2, help="GPUs (= xdist workers) of the spread run")
    ap.add_argument("--seed", type=int, default=2609_11356)
    ap.add_argument("--max-elements", type=int, default=0, help="operand cap (default: the suite's 2^22)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="device seconds for both runs")
    ap.add_argument("--device", default="gpu", choices=("gpu", "cpu"))
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    result: dict[str, Any] = {
        "count": args.count,
        "seed": args.seed,
        "gpus_asked": args.gpus,
        "device": args.device,
    }

    if args.device == "cpu":
        gpus = tuple(str(i) for i in range(args.gpus))  # simulated: the workers pin these, compute on CPU
    else:
        gpus = visible_gpus(os.environ).entries
    result["gpus_visible"] = list(gpus)
    if len(gpus) < args.gpus:
        result["verdict"] = f"blocked: needs {args.gpus} GPUs, {len(gpus)} visible"
        (out / "multi_gpu_fuzz.yaml").write_text(yaml.safe_dump(result, sort_keys=False))
        print(f"multi_gpu_fuzz: {result['verdict']}")
        return 2
    spread = ",".join(gpus[: args.gpus])

    # the spread run gets 55% of the budget: it must finish; the one-GPU run may be cut short
    smi_path = out / f"smi-{args.gpus}gpu.csv"
    sample = args.device == "gpu"
    sampler: Any = SmiSampler(smi_path) if sample else None
    if sampler is not None:
        sampler.__enter__()
    try:
        multi = run_sweep(
            args, out, workers=args.gpus, visible=spread, tag=f"{args.gpus}gpu", budget_s=0.55 * args.budget_s
        )
    finally:
        if sampler is not None:
            sampler.__exit__(None, None, None)
    result["spread"] = multi
    result["smi"] = smi_summary(smi_path) if sample else "not sampled (--device cpu)"

    check = subprocess.run(
        [sys.executable, "-m", "fixbits.cli", "report", str(out / f"junit-{args.gpus}gpu.xml"),
         "--check-shapes", "--expect-shapes", str(args.count)],
        cwd=REPO, env=_env(args, spread), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    (out / "check_shapes.txt").write_text(check.stdout + check.stderr)
    result["each_shape_once"] = check.returncode == 0 and "each exactly once" in check.stdout

    left = args.budget_s - (time.monotonic() - start)
    single = run_sweep(args, out, workers=1, visible=gpus[0], tag="1gpu", budget_s=max(left - 10.0, 20.0))
    result["one_gpu"] = single

    # verdict: every shape once, computed on every GPU, no drift, both GPUs busy, and the times
    per_gpu = multi.get("computed_per_gpu", {})
    pinned_all = len([g for g in per_gpu if g != "unpinned"]) == args.gpus
    busy = (
        isinstance(result["smi"], dict)
        and len(result["smi"]) >= args.gpus
        and all(v["busy_share"] >= BUSY_SHARE for k, v in result["smi"].items() if k in gpus[: args.gpus])
    )
    computed = multi.get("passed", 0) + multi.get("failed", 0)
    full = computed == args.count
    if multi.get("wall_s") and single.get("wall_s"):
        # shapes per second, so a one-GPU run cut short by its deadline still compares fairly
        r_multi = computed / multi["wall_s"]
        r_one = (single.get("passed", 0) + single.get("failed", 0)) / single["wall_s"]
        result["speedup_shapes_per_s"] = round(r_multi / r_one, 2) if r_one else None
    checks = {
        "each shape exactly once in the merged report": result["each_shape_once"],
        "every shape computed (none skipped by the deadline)": full,
        f"shapes computed on all {args.gpus} pinned GPUs": pinned_all,
        "no drift (repeat bytes equal)": multi.get("failed", 1) == 0 and multi.get("error", 1) == 0,
        f"nvidia-smi: each GPU busy >= {BUSY_SHARE:.0%} of samples": busy if sample else None,
    }
    result["checks"] = {k: v for k, v in checks.items()}
    failed = [k for k, v in checks.items() if v is False]
    if args.device == "cpu":
        result["verdict"] = "dry run ok (GPUs simulated on the CPU: nothing about GPUs is proved)"
    else:
        result["verdict"] = "proved"
    if failed:
        result["verdict"] = "failed: " + "; ".join(failed)
    result["wall_s"] = round(time.monotonic() - start, 1)
    (out / "multi_gpu_fuzz.yaml").write_text(yaml.safe_dump(result, sort_keys=False))

    print("\n== multi-GPU fuzz")
    rows = [
        ("verdict", result["verdict"]),
        (
            f"{args.gpus}-GPU run",
            f"{multi.get('wall_s')} s, computed {computed}/{args.count}, per GPU {per_gpu}",
        ),
        (
            "1-GPU run",
            f"{single.get('wall_s')} s, computed {single.get('passed', 0) + single.get('failed', 0)}",
        ),
        ("speedup (shapes/s)", str(result.get("speedup_shapes_per_s"))),
        ("smi", str(result["smi"])),
        (
            "check shapes",
            next((ln for ln in check.stdout.splitlines() if ln.startswith("fuzz shapes:")), "(none)"),
        ),
        ("wall", f"{result['wall_s']} s of {args.budget_s:.0f} s"),
    ]
    for k, v in rows:
        print(f"{k:<20}  {v}")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
