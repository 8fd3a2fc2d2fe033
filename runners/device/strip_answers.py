"""Copy arch profiles without the entries of some answers, so that a seeded reconstruct run
(``reconstruct.py --seed-profiles``) probes those answers afresh on the GPU and its result can be
compared with the entries that were taken out (``--compare``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def strip(src: Path, dst: Path, prefix: str) -> None:
    from fixbits.probe.profile import load

    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("sm_*.yaml")):
        prof = load(f)
        gone = [k for k in prof.entries if k.startswith(prefix)]
        for k in gone:
            del prof.entries[k]
        prof.save(str(dst))
        print(f"{f.name}: {len(gone)} {prefix} entries taken out")


def compare(kept: Path, probed: Path, prefix: str) -> int:
    """Each re-probed answer against the entry taken out: equal canonical trees at the entry's shape."""
    from fixbits.probe.plan import equivalent_on
    from fixbits.probe.profile import load

    bad = 0
    for f in sorted(kept.glob("sm_*.yaml")):
        p2 = probed / f.name
        if not p2.exists():
            continue
        a, b = load(f), load(p2)
        for key, e in sorted(a.entries.items()):
            if not key.startswith(prefix):
                continue
            got = b.entries.get(key)
            if got is None:
                print(f"{f.name} {key}: not recovered ({b.failed.get(key, 'not probed')})")
                continue
            k = got.shape[2]
            same = [equivalent_on(v.desc, got.desc, k) for v in e.variants
                    if v.n1 is None or bool(v.n1) == (got.shape[1] == 1)] or [equivalent_on(e.desc, got.desc, k)]
            ok = all(same)
            bad += not ok
            print(f"{f.name} {key}: probed {'EQUAL to' if ok else 'DIFFERENT from'} the entry at {got.shape}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--prefix", default="a14-")
    ap.add_argument("--compare", action="store_true", help="src: the full profiles, dst: the probed ones")
    a = ap.parse_args()
    if a.compare:
        return 1 if compare(a.src, a.dst, a.prefix) else 0
    strip(a.src, a.dst, a.prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main())
