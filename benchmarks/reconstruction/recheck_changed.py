#!/usr/bin/env python3
"""Re-check a device sweep's recorded cells against the profiles as they are now, emulating only
the rows the profile changes since a git revision can move (CPU).

    .venv/bin/python benchmarks/reconstruction/recheck_changed.py RUN_DIR FROM.csv OUT.csv \
        --base-rev REV [--workers 2]

RUN_DIR holds the sweep's ``sweep_samples/``; FROM.csv is the sweep's table as last checked (the
device's sweep.csv or an earlier re-check). A row is emulated again when its answer's entry was
added or changed since REV (its descriptor, K variants or removal), or when its last outcome was
not a match (an entry withdrawn before REV leaves a stale wrong_entry); every match of an
unchanged entry keeps its outcome. Writes OUT.csv in sweep.csv's
format (benchmarks/reconstruction/sweep_table.py makes the table).
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "runners" / "device"))

import yaml  # noqa: E402
from reconstruct import load_profiles  # noqa: E402

from fixbits.probe import profile as profiles  # noqa: E402
from fixbits.probe.sweep import check  # noqa: E402

AGAIN = frozenset({"not_in_profile", "unchecked", "check_error", "wrong_entry", "tail_defect"})  # no match


def changed_keys(rev: str) -> set[tuple[str, str, str]]:
    """(in dtype, out dtype, answer key) of every entry added, changed or removed since ``rev``."""
    out: set[tuple[str, str, str]] = set()
    for path in profiles.available():
        rel = path.relative_to(ROOT).as_posix()
        shown = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], capture_output=True, text=True
        )
        old = yaml.safe_load(shown.stdout).get("entries", {}) if shown.returncode == 0 else {}
        doc = yaml.safe_load(path.read_text())
        now = doc.get("entries", {})
        for key in set(old) | set(now):
            a, b = old.get(key) or {}, now.get(key) or {}
            if (a.get("desc"), a.get("variants")) != (b.get("desc"), b.get("variants")):
                out.add((doc["dtype"], doc["out_dtype"], key))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("from_csv", type=Path)
    ap.add_argument("out_csv", type=Path)
    ap.add_argument("--base-rev", required=True)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    moved = changed_keys(args.base_rev)
    with args.from_csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    again = 0
    for r in rows:
        if r["outcome"] in AGAIN or (r["dtype"], r["out_dtype"], r["answer"]) in moved:
            r["outcome"] = "unchecked"
            again += 1
    print(
        f"{len(moved)} entries changed since {args.base_rev}; {again} of {len(rows)} rows to emulate",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "sweep_samples").symlink_to((args.run_dir / "sweep_samples").resolve())
        with (work / "sweep.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        stats = check(
            work, load_profiles(Path(profiles.PROFILE_DIR), print), workers=args.workers, only_unchecked=True
        )
        shutil.copy(work / "sweep.csv", args.out_csv)
    print(yaml.safe_dump(stats, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
