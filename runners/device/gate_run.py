"""Run `fixbits gate` on a GPU machine inside a short device budget and keep its report.

    python3 runners/device/gate_run.py --out DIR [--budget-s 90] [--sample 2] [--workers 0]
    python3 runners/device/gate_run.py --out DIR --device cpu      # the same run on a CPU machine

1. `runners/check_runner.py --record DIR/runner.yaml` (bounded; advisory: a failing check is
   reported and the gate still runs, so the report shows what this machine could do).
2. `fixbits gate --out DIR/gate --budget-s <what is left> --sample N`: the fingerprint is
   compared with the one recorded with matrices/profiles and matrices/golden, the changes are
   named (driver, CUDA, cuBLAS, Triton, torch, GPU), and the slice they affect runs as a budgeted
   slice: N evenly spaced items of every test function, families interleaved, and tests not
   started by the soft deadline skip with that reason, so the run always ends with a report.
3. A table: runner check, what changed, the slice, verdict, counts, match rate per family.

DIR/gate holds gate.html (read it first), gate.md, gate.json, junit.xml and pytest.log. The
exit code is the gate's: 0 no drift, 1 drift, 2 could not run (also: killed, no report).
``--device cpu`` hides any GPU (CUDA_VISIBLE_DEVICES='') and skips the runner check, so the CPU
part of the slice runs and the GPU tests skip: the dry run of this script in tests/.
Needs PYTHONPATH=<repo> only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERDICTS = {0: "no drift", 1: "drift", 2: "could not run"}
CHECK_MAX_S = 20.0  # the runner check imports torch and runs one GEMM: ~10 s on the H200
AFTER_GATE_S = 5.0  # writing the table after the gate returns
# the lead commits these from DIR to docs/sample_report/ (the sample the issue asks for)
SAMPLE_FILES = ("gate/gate.html", "gate/gate.md", "gate/gate.json", "gate/junit.xml", "runner.yaml")
# benchmark CSVs measured on the H200 in session 1: the speed plot shows them beside this run's
BENCHMARKS = ("benchmarks/enforcement/h200", "benchmarks/gemm/h200")


def _run(cmd: list[str], *, timeout: float, log: Path, env: dict[str, str]) -> tuple[int | None, float]:
    t0 = time.monotonic()
    with open(log, "w") as fh:
        try:
            rc: int | None = subprocess.run(
                cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False
            ).returncode
        except subprocess.TimeoutExpired:
            rc = None
            fh.write(f"\n[gate_run] killed after {timeout:.0f} s\n")
    return rc, time.monotonic() - t0


def gate_command(args: argparse.Namespace, out: Path, budget_s: float) -> list[str]:
    cmd = [sys.executable, "-m", "fixbits.cli", "gate", "--out", str(out / "gate")]
    cmd += ["--mode", args.mode, "-n", args.workers, "--budget-s", f"{budget_s:.0f}"]
    cmd += ["--sample", str(args.sample), "--slice", args.slice]
    for b in BENCHMARKS:
        cmd += ["--benchmarks", str(REPO / b)]
    return cmd


def summary_rows(v: dict) -> list[tuple[str, str]]:  # type: ignore[type-arg]
    """The table lines read from gate.json."""
    rows = [("verdict", f"{v['verdict']}: {v['reason']}")]
    c = v.get("counts") or {}
    rows.append(
        (
            "tests",
            ", ".join(f"{k} {c[k]}" for k in ("tests", "passed", "failed", "errors", "skipped") if k in c)
            or "none",
        )
    )
    changed = "; ".join(f"{x['field']} {'/'.join(x['recorded'])} -> {x['current']}" for x in v["changes"])
    rows.append(("changed", changed or "nothing"))
    for n in v.get("notes", []):
        rows.append(("note", n))
    if v.get("slice"):
        rows.append(("slice", f"{' '.join(v['slice']['paths'])} mode={v['slice']['mode']}"))
    for f in v.get("families", []):
        rate = "n/a" if f["match_rate"] is None else f"{100 * f['match_rate']:.1f}%"
        rows.append(
            (
                f"family {f['family']}",
                f"matched {f['passed']}/{f['passed'] + f['failed']} ({rate}), "
                f"errors {f['errors']}, skipped {f['skipped']}",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=90.0, help="device seconds for the whole script")
    ap.add_argument("--sample", type=int, default=2, help="items kept per test function (0: all)")
    ap.add_argument("--mode", default="auto", choices=("quick", "auto", "full"), help="gate --mode")
    ap.add_argument("--slice", default="auto", help="gate --slice (default auto: from the changes)")
    ap.add_argument("--workers", default="0", help="pytest-xdist workers (0: in-process; one GPU here)")
    ap.add_argument("--device", default="gpu", choices=("gpu", "cpu"), help="cpu: hide GPUs, no runner check")
    args = ap.parse_args(argv)
    start = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "PYTHONUNBUFFERED": "1",
    }
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["HIP_VISIBLE_DEVICES"] = ""

    rows: list[tuple[str, str]] = []
    if args.device == "gpu":
        check = [
            sys.executable,
            str(REPO / "runners" / "check_runner.py"),
            "--record",
            str(out / "runner.yaml"),
        ]
        rc_check, t_check = _run(
            [*check, "--print"],
            timeout=min(CHECK_MAX_S, args.budget_s / 4),
            log=out / "check_runner.log",
            env=env,
        )
        last = (out / "check_runner.log").read_text().strip().splitlines()[-1:] or ["(no output)"]
        rows.append(("runner check", f"exit {rc_check} in {t_check:.0f} s: {last[0][:150]}"))
    else:
        rows.append(("runner check", "skipped (--device cpu)"))

    left = args.budget_s - (time.monotonic() - start) - AFTER_GATE_S
    gate_budget = max(left, 20.0)
    cmd = gate_command(args, out, gate_budget)
    # the gate kills pytest at budget + 60 s; past that this script gives up on the gate itself
    rc_gate, t_gate = _run(cmd, timeout=gate_budget + 90.0, log=out / "gate_stdout.log", env=env)
    rows.append(("gate command", " ".join(cmd[1:]).replace(str(REPO) + "/", "")))
    verdict = VERDICTS.get(rc_gate, "could not run") if rc_gate is not None else "killed"
    rows.append(("gate exit", f"{rc_gate} ({verdict}) in {t_gate:.0f} s"))
    verdict_file = out / "gate" / "gate.json"
    if verdict_file.is_file():
        rows += summary_rows(json.loads(verdict_file.read_text()))
    else:
        tail = (out / "gate_stdout.log").read_text().strip().splitlines()[-5:]
        rows.append(("verdict", "no gate.json written; last lines: " + " | ".join(tail)[:300]))
    present = [f for f in SAMPLE_FILES if (out / f).is_file()]
    rows.append(("sample report", f"cp {' '.join(present)} -> docs/sample_report/ (from {out})"))
    rows.append(("wall", f"{time.monotonic() - start:.0f} s of {args.budget_s:.0f} s"))

    width = max(len(k) for k, _ in rows)
    print("\n== fixbits gate on this machine")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return rc_gate if rc_gate in VERDICTS else 2


if __name__ == "__main__":
    raise SystemExit(main())
