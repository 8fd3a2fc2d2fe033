"""Run `fixbits gate` on a GPU machine within a time budget and keep its report files.

    python3 runners/device/gate_run.py --out DIR [--budget-s 420] [--mode quick|auto|full] [--workers auto]

Runs runners/check_runner.py first (its verdict and the fingerprint go to DIR/runner.yaml; a
failing check is reported, the gate still runs so the report shows what this machine could do),
then `python3 -m fixbits.cli gate --out DIR/gate --timeout-s <budget less a margin>`. DIR/gate
holds gate.html (read it first), gate.md, gate.json, junit.xml and pytest.log. The table
printed last gives the runner check, the gate's verdict and exit code (0 no drift, 1 drift,
2 could not run), the counts and what changed. Needs PYTHONPATH=<repo> only.
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
MARGIN_S = 45  # fingerprint, report writing and the runner check fit in this


def _run(cmd: list[str], *, timeout: float, log: Path) -> tuple[int | None, float]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "PYTHONUNBUFFERED": "1",
    }
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument(
        "--mode",
        default="quick",
        choices=("quick", "auto", "full"),
        help="gate --mode (default quick: fits a short device budget)",
    )
    ap.add_argument("--workers", default="auto", help="pytest-xdist workers for the gate")
    args = ap.parse_args()
    start = time.monotonic()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    rows: list[tuple[str, str]] = []
    try:
        rc_check, t_check = _run(
            [
                sys.executable,
                str(REPO / "runners" / "check_runner.py"),
                "--record",
                str(out / "runner.yaml"),
                "--print",
            ],
            timeout=min(120.0, args.budget_s / 4),
            log=out / "check_runner.log",
        )
        last = (out / "check_runner.log").read_text().strip().splitlines()[-1:] or ["(no output)"]
        rows.append(("runner check", f"exit {rc_check} in {t_check:.0f} s: {last[0][:150]}"))
    except Exception as exc:  # the check is advisory here: the gate still runs
        rows.append(("runner check", f"crashed: {type(exc).__name__}: {exc}"))

    left = args.budget_s - (time.monotonic() - start)
    gate_timeout = max(left - MARGIN_S, 30.0)
    cmd = [
        sys.executable,
        "-m",
        "fixbits.cli",
        "gate",
        "--out",
        str(out / "gate"),
        "--mode",
        args.mode,
        "-n",
        args.workers,
        "--timeout-s",
        f"{gate_timeout:.0f}",
    ]
    rc_gate, t_gate = _run(cmd, timeout=gate_timeout + MARGIN_S - 5, log=out / "gate_stdout.log")
    rows.append(("gate command", " ".join(cmd[1:])))
    rows.append(
        (
            "gate exit",
            f"{rc_gate} ({VERDICTS.get(rc_gate, 'killed') if rc_gate is not None else 'killed'}) "
            f"in {t_gate:.0f} s",
        )
    )
    verdict_file = out / "gate" / "gate.json"
    if verdict_file.is_file():
        v = json.loads(verdict_file.read_text())
        rows.append(("verdict", f"{v['verdict']}: {v['reason']}"))
        c = v.get("counts") or {}
        rows.append(
            (
                "tests",
                ", ".join(f"{k} {c[k]}" for k in ("tests", "passed", "failed", "errors", "skipped") if k in c)
                or "none",
            )
        )
        rows.append(
            (
                "changed",
                "; ".join(f"{x['field']} {'/'.join(x['recorded'])} -> {x['current']}" for x in v["changes"])
                or "nothing (" + "; ".join(v["notes"]) + ")",
            )
        )
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
    else:
        tail = (out / "gate_stdout.log").read_text().strip().splitlines()[-5:]
        rows.append(("verdict", "no gate.json written; last lines: " + " | ".join(tail)[:300]))
    rows.append(("files", " ".join(sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()))))
    rows.append(("wall", f"{time.monotonic() - start:.0f} s of {args.budget_s:.0f} s"))

    width = max(len(k) for k, _ in rows)
    print("\n== fixbits gate on this machine")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
