"""This checkout's checker against the byte classes an H200 run measured, on CPU only.

    python benchmarks/checker/h200_eval.py [--cases benchmarks/checker/h200_s2/checker_soundness_cases.jsonl.gz]
        [--ptx-dir .aot/ptx ...] [--only row_sum,softmax] [--out FILE.json] [--md FILE.md]

The device run recorded, per config, the sha of every PTX file it launched and the bytes of its
outputs on each draw. Here each of those PTX files (kept by the AOT build under --ptx-dir, the
very text the device ran) is signed again with the checker of this checkout; configs are
partitioned by the new signatures and compared with the byte classes: false-equal pairs (two
configs certified equal whose bytes differed on some draw: must be 0), checker classes, true
classes and the over-split factor per (kernel, dtype). A config whose PTX is not kept here is
left out and counted. Exit status 1 on any false-equal pair.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_CASES = ROOT / "benchmarks/checker/h200_s2/checker_soundness_cases.jsonl.gz"


@dataclass(frozen=True)
class Row:
    """One (kernel, dtype) group of the device run, partitioned by this checkout's checker."""

    kernel: str
    dtype: str
    family: str
    configs: int
    left_out: int
    true_classes: int
    checker_classes: int
    over_split: float
    false_equal_pairs: int
    fallbacks: int
    physical: int


def config_signature(digests: list[str | None], case_id: object) -> str:
    """One digest per config: a run-dependent kernel (None) makes the config a class of its own."""
    parts = [d if d is not None else f"nondet:{case_id}" for d in digests]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def _find(dirs: list[Path], sha: str) -> Path | None:
    for d in dirs:
        p = d / f"{sha}.ptx"
        if p.exists():
            return p
    return None


def evaluate(
    cases_path: Path, ptx_dir: Path | list[Path], only: set[str] | None = None, launch: bool = False
) -> tuple[list[Row], dict[str, float]]:
    """With ``launch``, each config is signed specialised to the launch it ran with (the family's
    shape in the soundness matrix, the module's ``launch_ints``), where the module gives it."""
    from fixbits.checker.api import signature
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import device_cases, load_families, partition

    fams = {f.name: f for f in load_families()}
    family = {f.name: f.family for f in fams.values()}
    dirs = [ptx_dir] if isinstance(ptx_dir, Path) else list(ptx_dir)
    sigs: dict[str, tuple[str | None, bool, bool]] = {}
    secs = 0.0
    groups: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    left: dict[tuple[str, str], int] = defaultdict(int)
    fb: dict[tuple[str, str], int] = defaultdict(int)
    phys: dict[tuple[str, str], int] = defaultdict(int)
    for r in device_cases(cases_path):
        if only and r["kernel"] not in only:
            continue
        if "error" in r or not r.get("bytes") or not r.get("ptx_sha"):
            continue
        g = (r["kernel"], r["dtype"])
        found = [_find(dirs, sha) if sha else None for sha in r["ptx_sha"]]
        if any(p is None for p in found):
            left[g] += 1
            continue
        paths = [p for p in found if p is not None]
        spec = None
        if launch and r["kernel"] in fams:
            f = fams[r["kernel"]]
            spec = corpus_launch(f.module, dict(f.shape), r["label"])
        digests = []
        anyfb = anyphys = False
        for sha, p in zip(r["ptx_sha"], paths, strict=True):
            key = f"{sha}|{spec.key() if spec is not None else ''}"
            got = sigs.get(key)
            if got is None:
                text = p.read_text()
                t0 = time.process_time()
                s = signature(text, "ptx", launch=spec)
                secs += time.process_time() - t0
                got = (s.digest if s.deterministic else None, s.fallback is not None, s.physical)
                sigs[key] = got
            digests.append(got[0])
            anyfb |= got[1]
            anyphys |= got[2]
        groups[g].append((config_signature(digests, r["id"]), r["bytes"]))
        fb[g] += anyfb
        phys[g] += anyphys
    rows = []
    for g in sorted(set(groups) | set(left)):
        items = groups.get(g, [])
        chk, true, pairs, _ = partition(items)
        rows.append(
            Row(g[0], g[1], family.get(g[0], "?"), len(items), left[g], true or 0, chk,
                round(chk / true, 3) if true else 0.0, pairs or 0, fb[g], phys[g])
        )  # fmt: skip
    speed = {"files": len(sigs), "cpu_s": round(secs, 2), "files_per_s": round(len(sigs) / max(secs, 1e-9), 1)}
    return rows, speed


def markdown(rows: list[Row], before: dict[tuple[str, str], dict] | None = None) -> str:
    """Paper Table 3 style; with ``before`` (a device run's summary table by (kernel, dtype)) the
    checker classes and over-split that run's checker reported sit beside this checkout's."""
    before = before or {}
    out = [
        "| kernel | dtype | family | configs | true classes | checker classes (run) | over-split (run) "
        "| checker classes (now) | over-split (now) | false equal (now) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        b = before.get((r.kernel, r.dtype), {})
        bc, bs = b.get("checker_classes", "-"), b.get("over_split")
        out.append(
            f"| {r.kernel} | {r.dtype} | {r.family} | {r.configs}{f' (+{r.left_out} left out)' if r.left_out else ''} "
            f"| {r.true_classes} | {bc} | "
            f"{f'{bs:.2f}' if isinstance(bs, (int, float)) else '-'} | {r.checker_classes} | "
            f"{r.over_split:.2f} | {r.false_equal_pairs} |"
        )
    fams: dict[str, list[Row]] = {}
    for r in rows:
        fams.setdefault(r.family, []).append(r)
    out += ["", "| family | configs | over-split (now): min - max | false equal |", "|---|---:|---|---:|"]
    for fam, rs in sorted(fams.items()):
        splits = [r.over_split for r in rs if r.true_classes]
        out.append(
            f"| {fam} | {sum(r.configs for r in rs)} | {min(splits):.2f} - {max(splits):.2f} | "
            f"{sum(r.false_equal_pairs for r in rs)} |"
        )
    out += ["", "Rows with configs left out (their PTX is not kept here) give classes of the configs kept only."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=str(DEFAULT_CASES))
    ap.add_argument(
        "--ptx-dir",
        action="append",
        default=[],
        help="where the PTX files are kept, by sha (repeatable; default .aot/ptx)",
    )
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--md", default="")
    ap.add_argument(
        "--launch",
        action="store_true",
        help="sign each config specialised to the launch it ran with (modules with launch_ints only)",
    )
    ap.add_argument("--before", default="", help="a device run's summary JSON: its checker's classes join the table")
    args = ap.parse_args(argv)
    only = {x for x in args.only.split(",") if x} or None
    dirs = [Path(d) for d in args.ptx_dir] or [ROOT / ".aot/ptx"]
    rows, speed = evaluate(Path(args.cases), dirs, only, launch=args.launch)
    print(f"{'kernel':22s} {'dtype':5s} {'cfgs':>5s} {'left':>4s} {'true':>4s} {'chk':>4s} {'split':>6s} {'FALSE=':>6s}")
    for r in rows:
        print(
            f"{r.kernel:22s} {r.dtype:5s} {r.configs:5d} {r.left_out:4d} {r.true_classes:4d} "
            f"{r.checker_classes:4d} {r.over_split:6.2f} {r.false_equal_pairs:6d}"
        )
    n = sum(r.configs for r in rows)
    bad = sum(r.false_equal_pairs for r in rows)
    print(
        f"{n} configs checked against the device's bytes, {sum(r.left_out for r in rows)} left out (PTX not kept); "
        f"{bad} false-equal pairs; {speed['files']} PTX files signed, {speed['files_per_s']} files/s (process time)"
    )
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(
            json.dumps({"cases": os.path.relpath(args.cases, ROOT), "configs": n, "false_equal_pairs": bad,
                        "speed": speed, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
        )  # fmt: skip
    if args.md:
        before = None
        if args.before:
            table = json.loads(Path(args.before).read_text())["table"]
            before = {(t["kernel"], t["dtype"]): t for t in table}
        Path(args.md).write_text(markdown(rows, before))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
