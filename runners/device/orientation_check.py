#!/usr/bin/env python3
"""GPU: do GEMV profile entries hold in the orientation they were not probed in?

    PYTHONPATH=<repo> python3 runners/device/orientation_check.py --out DIR [--budget-s 150]
        [--targets bf16:fp32:a13-t0-s1-r0-w0-c50-g0 ...] [--probe bf16:fp32:53823x1x61 ...]

A GEMV answer (cuBLASLt's gemv kernels, algo 13) may be reached both by M == 1 and by N == 1
shapes, and the two are different kernels' walks over K: an entry probed on one orientation says
nothing of the other (bf16->fp32 c50 mismatched at 53823x1x61 in session 27). For each target
pair and answer, this scans 1xNxK and Mx1xK shapes through the heuristic (cheap), keeps up to
--per-side shapes of each orientation whose answer is the target, runs cuBLASLt on them (10 draws,
ordinary and wide exponents), and compares the sampled cells with the emulator running the
profile's descriptor for that (answer, K, N) (fixbits.probe.sweep: the reconstruction sweep's own
collect and check). Shapes that mismatch, and every --probe shape, are then probed
(fixbits.probe.recover.probe against cuBLASLt), and the recovered descriptor is written out.
Writes DIR/orientation.yaml (everything), DIR/sweep.csv and DIR/sweep_samples/ (the sweep's).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

TARGETS = (
    "bf16:fp32:a13-t0-s1-r0-w0-c50-g0",
    "fp16:fp16:a13-t0-s1-r0-w0-c93-g0",
    "fp16:fp16:a13-t0-s33-r2-w0-c93-g0",
    "bf16:bf16:a13-t0-s33-r2-w0-c93-g0",
)
# the long side and K of the scan: odd and round sizes, from a few elements to very long vectors
LONG = (2, 3, 7, 8, 24, 61, 100, 255, 512, 1000, 2048, 4097, 8192, 12289, 16384, 32768, 53823, 65536,
        131072, 262144)
DEPTH = (16, 61, 96, 255, 343, 512, 937, 1024, 2048, 4112, 4096, 8192, 11528, 16384, 30000, 65536)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=150.0)
    p.add_argument("--targets", nargs="+", default=list(TARGETS), metavar="IN:OUT:ANSWER")
    p.add_argument("--probe", nargs="+", default=["bf16:fp32:53823x1x61"], metavar="IN:OUT:MxNxK",
                   help="shapes probed whatever the check finds")
    p.add_argument("--shapes", nargs="+", default=[], metavar="MxNxK",
                   help="scanned before the grid (e.g. the mirror image of an entry's probe shape)")
    p.add_argument("--per-side", type=int, default=6, help="shapes checked per target and orientation")
    p.add_argument("--draws", type=int, default=10)
    p.add_argument("--probe-s", type=float, default=40.0, help="longest probe of one shape")
    return p.parse_args(argv)


def _split(spec: str) -> tuple[str, str, str]:
    parts = spec.split(":")
    if len(parts) != 3:
        raise SystemExit(f"expected IN:OUT:X, got {spec!r}")
    return parts[0], parts[1], parts[2]


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.split("x"))
    return m, n, k


def scan(lt: Any, dt: str, od: str, keys: set[str], per_side: int, deadline: float,
         first: tuple[tuple[int, int, int], ...] = ()) -> dict[str, dict[str, list]]:
    """answer key -> orientation ('m1': 1xNxK, 'n1': Mx1xK) -> shapes answering it: ``first``,
    then the grid."""
    from fixbits.probe.profile import answer_key

    found: dict[str, dict[str, list]] = {key: {"m1": [], "n1": []} for key in keys}
    grid = [s for long in LONG for k in DEPTH for s in ((1, long, k), (long, 1, k))]
    for shape in [s for s in first if 1 in s[:2]] + grid:
        if time.time() > deadline:
            break
        side = "n1" if shape[1] == 1 else "m1"
        try:
            key = answer_key(lt.heuristic(*shape, dt, od))
        except Exception:  # noqa: BLE001  (no algorithm for a shape: not a target's)
            continue
        if key in found and len(found[key][side]) < per_side and list(shape) not in found[key][side]:
            found[key][side].append(list(shape))
    return found


def probe_shape(dt: str, od: str, shape: tuple[int, int, int], lt: Any, seconds: float) -> dict[str, Any]:
    from fixbits.cublas.backend import CublasBackend
    from fixbits.probe.profile import answer_key
    from fixbits.probe.recover import probe

    m, n, k = shape
    out: dict[str, Any] = {"shape": list(shape), "pair": f"{dt}->{od}"}
    try:
        out["answer"] = answer_key(lt.heuristic(m, n, k, dt, od))
        res = probe(CublasBackend(dt, od, _lt=lt), m, n, k, arch="sm_90", hints={"instruction": "fma"},
                    deadline=time.time() + seconds)
        out.update(status=res.status, summary=res.summary(), notes=list(res.notes),
                   desc=res.desc.to_dict() if res.desc is not None else None,
                   survivors=[d.to_dict() for d in res.survivors][:4])
    except Exception as exc:  # noqa: BLE001
        out.update(status="crashed", why=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(limit=4))
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.time()
    deadline = t0 + args.budget_s
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from fixbits.cublas.lt import CublasLt
    from fixbits.probe import sweep
    from fixbits.probe.profile import load

    lt = CublasLt()
    profiles = {(p.dtype, p.out_dtype): p for p in map(load, sorted((REPO / "matrices/profiles").glob("*.yaml")))}
    report: dict[str, Any] = {"cublaslt": str(lt.version), "targets": {}, "probes": []}
    by_pair: dict[tuple[str, str], set[str]] = {}
    for spec in args.targets:
        dt, od, key = _split(spec)
        by_pair.setdefault((dt, od), set()).add(key)
    for (dt, od), keys in by_pair.items():
        first = tuple(_shape(t) for t in args.shapes)
        found = scan(lt, dt, od, keys, args.per_side, t0 + 0.2 * args.budget_s, first)
        for key, sides in found.items():
            report["targets"][f"{dt}->{od} {key}"] = {"shapes": sides}
            print(f"[scan] {dt}->{od} {key}: m1 {sides['m1']} n1 {sides['n1']}", flush=True)
        todo = [sweep.Case("recheck", *s) for sides in found.values() for side in sides.values() for s in side]
        sweep.collect(lt, todo, [dt], od, args.draws, t0 + 0.55 * args.budget_s, out)
    stats = sweep.check(out, profiles, deadline=t0 + 0.7 * args.budget_s)
    report["check"] = stats
    with (out / "sweep.csv").open() as fh:
        rows = {(r["dtype"], r["out_dtype"], (int(r["m"]), int(r["n"]), int(r["k"]))): r for r in csv.DictReader(fh)}
    for tkey, entry in report["targets"].items():
        for side, shapes in entry["shapes"].items():
            dt, od = tkey.split(" ")[0].split("->")
            hits = [rows.get((dt, od, (m, n, k))) for m, n, k in shapes]
            entry[side] = [{"shape": s, **{f: r[f] for f in ("outcome", "mismatches", "note")}}
                           for s, r in zip(shapes, hits, strict=True) if r is not None]
    bad = [key for key, r in rows.items() if r["outcome"] not in ("match", "not_in_profile")]
    wanted = [(dt, od, _shape(s)) for dt, od, s in map(_split, args.probe)]
    for dt, od, shape in wanted + bad:
        if time.time() + 10 > deadline:
            report["probes"].append({"shape": list(shape), "pair": f"{dt}->{od}", "status": "no time left"})
            continue
        got = probe_shape(dt, od, shape, lt, min(args.probe_s, deadline - time.time() - 5))
        print(f"[probe] {got.get('summary', got.get('why', got['status']))}", flush=True)
        report["probes"].append(got)
    report["seconds"] = round(time.time() - t0, 1)
    (out / "orientation.yaml").write_text(yaml.safe_dump(report, sort_keys=False))
    print(yaml.safe_dump({"check": stats, "probes": [(p["shape"], p["status"]) for p in report["probes"]]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
