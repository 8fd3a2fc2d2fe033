#!/usr/bin/env python3
"""Hold phase-B predicted entries to a device sweep's recorded cells, with their K-loop step and
residue-turn readings (or, with --readings granule, their split span granules) side by side.

Run s13/a2x showed why: phase B kept the first reading its two draws per shape could not reject,
and seven answers came out at step 32 where the kernel steps 64 (wrong on 1 to 5 of 10 sweep
draws). For every entry whose note says it was predicted, and every recorded case of its answer,
this emulates the entry and each step / residue variant that differs from it at the case's K
(fixbits.probe.reconstruct._step_variants) against cuBLAS's sampled cells (all draws):

- ``confirmed``: the entry matches and every differing variant misses somewhere;
- ``ambiguous``: the entry and at least one differing variant match every recorded cell;
- ``wrong``: the entry misses a recorded cell (``also_fit``: the variants that fit every cell);
- ``unswept``: no recorded case of the answer (or none where a variant differs).

    .venv/bin/python benchmarks/reconstruction/settle_steps.py benchmarks/reconstruction/h200/s13/a2x \\
        --keys 'a23-.*' --out /tmp/settle.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _differs(v: Any, desc: Any, k: int) -> bool:
    """The prober's own test (recover._signature): canonical trees up to K 4096, the address map
    past it, which can only call equal readings different (then the variant is emulated too)."""
    from fixbits.probe.recover import _signature

    return bool(_signature(v, k) != _signature(desc, k))


def _judge(job: tuple[str, str, dict[str, Any], list[dict[str, Any]], str]) -> dict[str, Any]:
    from fixbits.desc import GEMMDesc
    from fixbits.probe.reconstruct import _granule_variants, _step_variants, granule_reading
    from fixbits.probe.sweep import draw_mismatches, sampled_operands

    pair, key, desc_d, recs, readings = job
    desc = GEMMDesc.from_dict(desc_d)
    variants = [v for v in (_granule_variants(desc) if readings == "granule" else _step_variants(desc)) if v != desc]
    alive = {i: True for i in range(len(variants))}
    parted: set[int] = set()
    cases, entry_bad = 0, []
    for r in recs:
        k = r["k"]
        differ = [i for i, v in enumerate(variants) if alive[i] and _differs(v, desc, k)]
        a, b, sizes = sampled_operands(r)
        got = np.asarray(r["got"], dtype=np.uint32).view(np.float32)
        bad, _ = draw_mismatches(desc, a, b, sizes, got, r["out_dtype"])
        cases += 1
        if sum(bad):
            entry_bad.append(f"{r['m']}x{r['n']}x{k}")
            for i in range(len(variants)):  # equal to the entry at this K: they miss the same cells
                if i not in differ:
                    alive[i] = False
        for i in differ:
            parted.add(i)
            vb, _ = draw_mismatches(variants[i], a, b, sizes, got, r["out_dtype"])
            if sum(vb):
                alive[i] = False
    left = [variants[i] for i in parted if alive[i]]
    if entry_bad:
        verdict = "wrong"
    elif not parted:
        verdict = "unswept"
    else:
        verdict = "ambiguous" if left else "confirmed"
    return {"pair": pair, "key": key, "verdict": verdict, "cases": cases, "entry_misses": entry_bad,
            "step": desc.k_loop_step, "residue": desc.residue, "granule": granule_reading(desc),
            "also_fit": [f"step {v.k_loop_step}, residue {v.residue}, granule {granule_reading(v)}" for v in left],
            "fit_descs": [v.to_dict() for v in left]}



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, help="a device run directory with sweep_samples/")
    ap.add_argument("--keys", default=r"a2[34]-.*", help="regex the answer key must match in full")
    ap.add_argument("--note", default="predicted from", help="only entries whose note contains this")
    ap.add_argument("--out", type=Path, required=True, help="JSONL, one verdict per entry")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kmax", type=int, default=400_000, help="skip recorded cases deeper than this")
    ap.add_argument("--readings", choices=("step", "granule"), default="step",
                    help="the variants held against the entry: K-loop step / residue turn, or split span granule")
    args = ap.parse_args()

    from fixbits.probe.profile import available, load
    from fixbits.probe.sweep import load_samples

    by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in load_samples(args.run_dir):
        if "got" in r and r.get("key") and r["k"] <= args.kmax:
            by_key[(r["dtype"], r["out_dtype"], r["key"])].append(r)
    jobs = []
    for p in available():
        prof = load(p)
        for key, e in prof.entries.items():
            if e.desc is None or not re.fullmatch(args.keys, key) or args.note not in (e.note or ""):
                continue
            recs = sorted(by_key.get((prof.dtype, prof.out_dtype, key), []), key=lambda r: r["k"])
            jobs.append((f"{prof.dtype}->{prof.out_dtype}", key, e.desc.to_dict(), recs, args.readings))
    jobs.sort(key=lambda j: sum(r["k"] for r in j[3]))  # cheapest first: a cut-off run still says most
    counts: dict[str, int] = defaultdict(int)
    with args.out.open("w") as fh, ProcessPoolExecutor(args.workers) as ex:
        for res in ex.map(_judge, jobs):
            fh.write(json.dumps({**res, "run": str(args.run_dir)}) + "\n")
            fh.flush()
            counts[res["verdict"]] += 1
            if res["verdict"] in ("wrong", "ambiguous"):
                print(res["pair"], res["key"], res["verdict"], res["entry_misses"], "fit:", res["also_fit"], flush=True)
    print(dict(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
