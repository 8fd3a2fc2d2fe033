"""Move profile entries that the GPU showed wrong into the profile's ``failed`` table, with why.

An entry that mismatches cuBLAS on a fresh shape is a guess, and a profile never guesses
(fixbits.probe.profile): after withdrawal the answer raises NotInProfile naming the reason,
so a sweep reports its shapes as not in the profile and fixbits.matmul refuses or falls back.
A withdrawn answer is not probed again (the same evidence would predict the same entry); with
``--retry`` the cause is fixed in the prober and the next phase B probes the answer again.

    .venv/bin/python benchmarks/reconstruction/withdraw_entries.py PROFILE.yaml KEY [KEY ...] --why TEXT
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixbits.probe.profile import TO_PROBE_AGAIN, WITHDRAWN, load  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("keys", nargs="+", help="answer keys, e.g. a14-t0-s64-r2-w0-c0-g0")
    ap.add_argument("--why", required=True, help="the evidence, kept in the profile's failed table")
    ap.add_argument("--retry", action="store_true", help="the prober's cause is fixed: probe the answer again")
    args = ap.parse_args(argv)
    path = Path(args.profile)
    prof = load(path)
    missing = [k for k in args.keys if k not in prof.entries]
    if missing:
        ap.error(f"{path}: no entries {missing}; entries are {sorted(prof.entries)[:8]}...")
    entries = {k: e for k, e in prof.entries.items() if k not in args.keys}
    failed = dict(prof.failed)
    for k in args.keys:
        failed[k] = f"{TO_PROBE_AGAIN if args.retry else WITHDRAWN}{args.why} (was: {prof.entries[k].note})"
    dataclasses.replace(prof, entries=entries, failed=failed).save(path.parent)
    print(f"{path}: withdrew {len(args.keys)}; {len(entries)} entries, {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
