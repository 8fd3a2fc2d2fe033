#!/usr/bin/env python3
"""GPU: the rows a matmul_check run found differing, redone with every output kept, so the
difference can be placed: the profile's descriptor (emulator != cuBLAS) or the kernel
(emulator == cuBLAS != fixbits.matmul).

    PYTHONPATH=<repo> python3 runners/device/matmul_replay.py --out DIR --csv RUN/matmul_check.csv
        [--outcomes mismatch] [--draws 10] [--budget-s 120]

Per row and draw: cuBLAS's output and fixbits.matmul's (the same seeded draws as matmul_check,
so the operands are redrawn on any machine by fixbits.probe.hashdraw), saved to
DIR/<pair>_<m>x<n>x<k>.npz; then (unless --no-emulate) the emulator runs the profile's descriptor
on the host copies, and DIR/replay.yaml counts, per draw, the elements where each pair of the
three differs. The row's answer is asked of the heuristic again (a row may carry a guess).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "runners" / "device"))

import numpy as np  # noqa: E402
import yaml  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--csv", required=True, help="a matmul_check run's matmul_check.csv")
    p.add_argument("--outcomes", default="mismatch", help="comma list of the outcomes to redo")
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--budget-s", type=float, default=120.0)
    p.add_argument(
        "--no-emulate",
        action="store_true",
        help="keep cuBLAS's and fixbits.matmul's outputs only (the host emulates later: fit_replay.py)",
    )
    p.add_argument(
        "--spike-draws",
        action="store_true",
        help="narrow outputs: every third draw a spike draw (what parts readings of fp16/bf16 outputs)",
    )
    p.add_argument(
        "--cublas-only",
        action="store_true",
        help="keep cuBLAS's outputs only: rows whose answer is not in the profile (step_candidates.py "
        "--ambiguous; fit_replay.py --readings settles them on the host)",
    )
    return p.parse_args(argv)


def replay_row(
    row: dict[str, Any], draws: int, out: Path, emulate_here: bool = True, cublas_only: bool = False,
    spike_draws: bool = False,
) -> dict[str, Any]:
    """cuBLAS, fixbits.matmul and the emulator on each draw of one row; counts of differing
    elements per comparison, by raw bits (``cublas_only``: cuBLAS's outputs alone)."""
    import torch
    from matmul_check import draw_operands, reference

    from fixbits.emulate import emulate
    from fixbits.kernels.backend import to_numpy
    from fixbits.kernels.matmul import arch_profile, lookup_desc, matmul
    from fixbits.probe.spikes import hides_ulps
    from fixbits.testing import compare_bits

    pair = row["pair"]
    dt, od = pair.split("->")
    m, n, k, seed = int(row["m"]), int(row["n"]), int(row["k"]), int(row["seed"])
    lt, arch, profile = arch_profile(dt, od, torch.device("cuda"))
    heard = lt.heuristic(m, n, k, dt, od)  # asked again: the row's answer may be a guess (step_candidates)
    answer = heard.key_str()
    desc = None if cublas_only else lookup_desc(profile, heard, m, n, k, dt, od, arch)
    saved: dict[str, np.ndarray] = {}
    counts: dict[str, list[int]] = {} if cublas_only else {"cublas_vs_matmul": []}
    if emulate_here and not cublas_only:
        counts.update(emulator_vs_cublas=[], emulator_vs_matmul=[])
    spiked = spike_draws and hides_ulps(od)
    for d in range(draws):
        a, b = draw_operands(m, n, k, dt, seed, d, spikes=spiked)
        ref = reference(a, b, dt, od)
        ref_np = to_numpy(ref.cpu(), od)
        saved[f"cublas_{d}"] = ref_np
        if cublas_only:
            continue
        ours = matmul(a, b, out_dtype=od)
        ours_np = to_numpy(ours.cpu(), od)
        counts["cublas_vs_matmul"].append(compare_bits(ours_np, ref_np).n_diff)
        saved[f"matmul_{d}"] = ours_np
        if emulate_here:
            emu = emulate(desc.replace(epilogue=()), to_numpy(a.cpu(), dt), to_numpy(b.cpu(), dt))
            counts["emulator_vs_cublas"].append(compare_bits(emu, ref_np).n_diff)
            counts["emulator_vs_matmul"].append(compare_bits(emu, ours_np).n_diff)
            saved[f"emulator_{d}"] = emu
    np.savez_compressed(out / f"{dt}_{od}_{m}x{n}x{k}.npz", **saved)
    return {
        "pair": pair,
        "shape": [m, n, k],
        "answer": answer,
        "row_answer": row["answer"],
        "desc_hash": row["desc_hash"],
        "seed": seed,
        "draws": draws,
        "spike_draws": spiked,
        "ndiff": {key: [int(x) for x in v] for key, v in counts.items()},
    }


def read_replay(out: Path) -> list[tuple[dict[str, Any], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]]:
    """(row of replay.yaml, [(A, B, cuBLAS's output) per draw]) for every row that ran: the host
    side of a replay, operands redrawn here by the same rule as on the device."""
    from matmul_check import draw_operands

    from fixbits.kernels.backend import to_numpy

    rows = []
    for row in yaml.safe_load((out / "replay.yaml").read_text()):
        if "ndiff" not in row:
            continue  # skipped for the budget, or an error
        dt, od = row["pair"].split("->")
        m, n, k = row["shape"]
        z = np.load(out / f"{dt}_{od}_{m}x{n}x{k}.npz")
        draws = []
        for d in range(row["draws"]):
            a, b = draw_operands(m, n, k, dt, row["seed"], d, device="cpu", spikes=row.get("spike_draws", False))
            draws.append((to_numpy(a, dt), to_numpy(b, dt), z[f"cublas_{d}"]))
        rows.append((row, draws))
    return rows


def main(argv: list[str] | None = None) -> int:
    import csv

    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    wanted = set(args.outcomes.split(","))
    with open(args.csv) as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("outcome") in wanted]
    print(f"{len(rows)} rows with outcome in {sorted(wanted)}", flush=True)
    results = []
    for r in rows:
        if time.time() > deadline:
            results.append({"pair": r["pair"], "shape": [r["m"], r["n"], r["k"]], "skipped": "budget"})
            continue
        t = time.time()
        try:
            res = replay_row(r, args.draws, out, emulate_here=not args.no_emulate, cublas_only=args.cublas_only,
                             spike_draws=args.spike_draws)  # fmt: skip
        except Exception as exc:  # noqa: BLE001  (reported; the other rows go on)
            res = {
                "pair": r["pair"],
                "shape": [r["m"], r["n"], r["k"]],
                "error": f"{type(exc).__name__}: {exc}",
            }
        res["t_s"] = round(time.time() - t, 1)
        print(yaml.safe_dump([res], sort_keys=False, width=200), flush=True)
        results.append(res)
    (out / "replay.yaml").write_text(yaml.safe_dump(results, sort_keys=False, width=200))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
