"""CPU partition table of the static checker: compile every cpu_space config ahead of time for
sm_90 / sm_100 / gfx942, partition by signature, report classes and the checker's speed.

    python benchmarks/checker/partition.py [--targets sm_90,sm_100,gfx942] [--full] [--out DIR]

--full uses the GPU space instead of cpu_space (slow). No bytes are measured here: true classes
need the GPU (runners/device/checker_soundness.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="sm_90,sm_100,gfx942")
    ap.add_argument("--only", default="")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    from fixbits.checker.partition import compile_case
    from fixbits.checker.soundness import cases, load_families

    rows = []
    only = {x for x in args.only.split(",") if x}
    for target in args.targets.split(","):
        for fam in load_families():
            if only and fam.name not in only:
                continue
            got = []
            for c in cases(fam, cpu=not args.full):
                try:
                    got.append(compile_case(fam, c, target))
                except Exception as e:  # noqa: BLE001 - a config that does not compile is reported
                    print(
                        f"  {target} {fam.name} {c.label()}: {type(e).__name__}: {str(e)[:120]}", flush=True
                    )
            by_dtype: dict[str, list] = defaultdict(list)
            for g in got:
                by_dtype[g.case.dtype].append(g)
            for dtype, gs in by_dtype.items():
                files = sum(len(g.texts) for g in gs)
                check_s = sum(g.check_s for g in gs)
                rows.append(
                    {
                        "target": target,
                        "kernel": fam.name,
                        "dtype": dtype,
                        "configs": len(gs),
                        "distinct_texts": len({g.texts for g in gs}),
                        "checker_classes": len({g.digest for g in gs}),
                        "fallbacks": sum(1 for g in gs if g.fallbacks),
                        "physical": sum(1 for g in gs if g.physical),
                        "files": files,
                        "files_per_s": round(files / max(check_s, 1e-9), 1),
                        "compile_s": round(sum(g.compile_s for g in gs), 1),
                    }
                )
                r = rows[-1]
                print(
                    f"{target:7s} {fam.name:22s} {dtype:5s} cfgs {r['configs']:3d} texts {r['distinct_texts']:3d} "
                    f"classes {r['checker_classes']:3d} fallback {r['fallbacks']:2d} {r['files_per_s']:7.1f} files/s",
                    flush=True,
                )
    tot_files = sum(r["files"] for r in rows)
    tot_s = sum(r["files"] / r["files_per_s"] for r in rows if r["files_per_s"])
    print(
        f"total {sum(r['configs'] for r in rows)} configs, {tot_files} files, "
        f"checker {tot_files / max(tot_s, 1e-9):.1f} files/s on one core"
    )
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "checker_partition_cpu.json"), "w") as fh:
            json.dump(
                {"rows": rows, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, fh, indent=1
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
