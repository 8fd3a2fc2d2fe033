"""Sign every distinct PTX file of the AOT store and write one line per file, to prove that a
speed change keeps every signature bit-identical (not only the digest speed.py compares).

    python benchmarks/checker/cpu/sign_all.py --out before.jsonl [--root OTHER_CHECKOUT]
    python benchmarks/checker/cpu/sign_all.py --out after.jsonl --compare before.jsonl

Each line holds the digest, the flags (deterministic, physical), the fallback text and a hash of
every output's (param, digest), plus the process time. ``--launch`` signs instead every config of
a device run's cases file specialised to its launch (as ``h200_eval.py --launch`` does).
``--every K`` keeps every K-th file (a fixed subset while iterating).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path


def _setup(root: Path) -> None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


def _record(sig: object) -> dict:
    outs = "|".join(f"{o.param}:{o.digest}" for o in sig.outputs)  # type: ignore[attr-defined]
    return {
        "digest": sig.digest,  # type: ignore[attr-defined]
        "deterministic": sig.deterministic,  # type: ignore[attr-defined]
        "physical": sig.physical,  # type: ignore[attr-defined]
        "fallback": sig.fallback,  # type: ignore[attr-defined]
        "outputs": hashlib.blake2b(outs.encode(), digest_size=8).hexdigest(),
    }


def _plain_jobs(store: Path, ptx_dir: Path) -> list[tuple[str, Path, object]]:
    jobs, seen = [], set()
    for line in (store / "kernels.jsonl").read_text().splitlines():
        sha = json.loads(line)["ptx_sha"]
        if sha not in seen:
            seen.add(sha)
            jobs.append((sha, ptx_dir / f"{sha}.ptx", None))
    return jobs


def _launch_jobs(cases: Path, ptx_dir: Path) -> list[tuple[str, Path, object]]:
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import device_cases, load_families

    fams = {f.name: f for f in load_families()}
    jobs, seen = [], set()
    for r in device_cases(cases):
        if "error" in r or not r.get("bytes") or not r.get("ptx_sha") or r["kernel"] not in fams:
            continue
        f = fams[r["kernel"]]
        spec = corpus_launch(f.module, dict(f.shape), r["label"])
        for sha in r["ptx_sha"]:
            p = ptx_dir / f"{sha}.ptx"
            key = f"{sha}|{spec.key() if spec is not None else ''}"
            if p.exists() and key not in seen:
                seen.add(key)
                jobs.append((key, p, spec))
    return jobs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[3]))
    ap.add_argument("--store", default=".aot/store")
    ap.add_argument("--ptx-dir", default=".aot/ptx")
    ap.add_argument("--launch", default="", help="a device run's cases file (jsonl.gz)")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", default="")
    args = ap.parse_args(argv)
    _setup(Path(args.root))
    from fixbits.checker.api import signature

    ptx_dir = Path(args.ptx_dir)
    jobs = _launch_jobs(Path(args.launch), ptx_dir) if args.launch else _plain_jobs(Path(args.store), ptx_dir)
    jobs = jobs[:: args.every]
    total = 0.0
    with open(args.out, "w") as out:
        for key, path, spec in jobs:
            text = path.read_text()
            t0 = time.process_time()
            sig = signature(text, "ptx", launch=spec)  # type: ignore[arg-type]
            dt = time.process_time() - t0
            total += dt
            out.write(json.dumps({"key": key, **_record(sig), "s": round(dt, 4)}) + "\n")
    print(f"{len(jobs)} files, {total:.1f} s, {len(jobs) / max(total, 1e-9):.1f} files/s")
    if args.compare:
        return _compare(Path(args.compare), Path(args.out))
    return 0


def _compare(before: Path, after: Path) -> int:
    """Counts the files whose line differs in anything but the time."""
    old = {r["key"]: r for r in map(json.loads, before.read_text().splitlines())}
    diff = 0
    for r in map(json.loads, after.read_text().splitlines()):
        o = old.get(r["key"])
        if o is None:
            continue
        if any(o[k] != r[k] for k in ("digest", "deterministic", "physical", "fallback", "outputs")):
            diff += 1
            if diff <= 10:
                print("changed:", r["key"], o["digest"], r["digest"], r["fallback"])
    print(f"{diff} signatures changed")
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main())
