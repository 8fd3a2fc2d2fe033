"""The checker's speed per kernel family on the corpus of the AOT store, on one core.

    python benchmarks/checker/speed.py --store .aot/store --ptx-dir .aot/ptx [--out FILE]

Signs every distinct PTX file once and reports files per second of CPU time (process time, so a
busy machine slows it less than wall time would) per kernel family and overall. It also counts
the files whose signature differs from the one stored at build time: after a pure speed change
that number must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=".aot/store")
    ap.add_argument("--ptx-dir", default=".aot/ptx")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    from fixbits.checker.api import signature
    from fixbits.checker.soundness import load_families

    family = {f.name: f.family for f in load_families()}
    store = Path(args.store)
    kernel_of: dict[str, str] = {}
    for line in (store / "cases.jsonl").read_text().splitlines():
        r = json.loads(line)
        for k in r.get("keys", []):
            kernel_of.setdefault(k, r["kernel"])
    secs: dict[str, float] = defaultdict(float)
    files: Counter[str] = Counter()
    seen: set[str] = set()
    changed = 0
    for line in (store / "kernels.jsonl").read_text().splitlines():
        k = json.loads(line)
        if k["ptx_sha"] in seen:
            continue
        seen.add(k["ptx_sha"])
        text = (Path(args.ptx_dir) / f"{k['ptx_sha']}.ptx").read_text()
        fam = kernel_of.get(k["key"], "?")
        t0 = time.process_time()
        s = signature(text, "ptx")
        secs[fam] += time.process_time() - t0
        files[fam] += 1
        changed += (s.digest if s.deterministic else None) != k["digest"]
    rows = []
    for fam in sorted(files):
        rows.append(
            {"kernel": fam, "family": family.get(fam, "?"), "files": files[fam],
             "files_per_s": round(files[fam] / max(secs[fam], 1e-9), 1)}
        )  # fmt: skip
        print(
            f"{fam:22s} {rows[-1]['family']:14s} {files[fam]:5d} files {rows[-1]['files_per_s']:7.1f} files/s"
        )
    total = sum(files.values()) / max(sum(secs.values()), 1e-9)
    print(f"total {sum(files.values())} files, {total:.1f} files/s on one core; {changed} signatures changed")
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(
            json.dumps(
                {"rows": rows, "files_per_s": round(total, 1), "signatures_changed": changed}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
