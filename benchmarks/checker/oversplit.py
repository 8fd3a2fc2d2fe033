"""Over-split of the current checker against the GPU's true classes, on CPU only.

    python benchmarks/checker/oversplit.py --store .aot/store [--ptx-dir DIR [--launch]] \
        [--h200 benchmarks/checker/h200/checker_soundness.json] [--cases CASES.jsonl]

The checker side comes from the AOT store (runners/device/checker_soundness.py --build-aot): each
config's kernels, re-signed from their PTX with the checker of this checkout when --ptx-dir is
given. The GPU side is either a device run's per-config cases (--cases: bytes per config, so
false-equal pairs are counted exactly) or, failing that, the committed H200 summary, which holds
only counts: then the configs are those the run reached (the first N of each group in the
runner's order) and only the over-split factor can be given, not false-equal pairs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _labels_in_order() -> dict[tuple[str, str], list[str]]:
    from fixbits.checker.soundness import cases, interleave, load_families

    groups = []
    for f in load_families():
        by_dtype: dict[str, list] = {}
        for c in cases(f):
            by_dtype.setdefault(c.dtype, []).append(c)
        groups.extend(by_dtype.values())
    out: dict[tuple[str, str], list[str]] = {}
    for c in interleave(groups):
        out.setdefault((c.kernel, c.dtype), []).append(c.label())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=".aot/store")
    ap.add_argument("--ptx-dir", default="")
    ap.add_argument("--h200", default=str(ROOT / "benchmarks/checker/h200/checker_soundness.json"))
    ap.add_argument("--cases", default="")
    ap.add_argument("--out", default="")
    ap.add_argument(
        "--launch",
        action="store_true",
        help="with --ptx-dir: sign each config specialised to its launch (modules with launch_ints)",
    )
    args = ap.parse_args(argv)

    from fixbits.checker.api import signature
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import load_families, partition

    store = Path(args.store)
    kern = {}
    for line in (store / "kernels.jsonl").read_text().splitlines():
        k = json.loads(line)
        kern[k["key"]] = k
    resigned: dict[str, str | None] = {}
    if args.ptx_dir:
        for k in kern.values():
            if k["ptx_sha"] not in resigned:
                s = signature((Path(args.ptx_dir) / f"{k['ptx_sha']}.ptx").read_text(), "ptx")
                resigned[k["ptx_sha"]] = s.digest if s.deterministic else None
    fams = {f.name: f for f in load_families()} if args.launch else {}
    spec_sig: dict[str, str | None] = {}  # (file, launch) -> digest
    sig_of: dict[tuple[str, str, str], str] = {}
    text_of: dict[tuple[str, str, str], str] = {}
    for line in (store / "cases.jsonl").read_text().splitlines():
        r = json.loads(line)
        if "error" in r or not r.get("keys"):
            continue
        parts = []
        spec = None
        if args.launch and args.ptx_dir and r["kernel"] in fams:
            f = fams[r["kernel"]]
            spec = corpus_launch(f.module, dict(f.shape), r["label"])
        for key in r["keys"]:
            k = kern[key]
            d = resigned.get(k["ptx_sha"], k["digest"]) if args.ptx_dir else k["digest"]
            if spec is not None:
                ck = f"{k['ptx_sha']}|{spec.key()}"
                if ck not in spec_sig:
                    s = signature((Path(args.ptx_dir) / f"{k['ptx_sha']}.ptx").read_text(), "ptx", launch=spec)
                    spec_sig[ck] = s.digest if s.deterministic else None
                d = spec_sig[ck]
            parts.append(d if d is not None else f"nondet:{r['id']}")
        text_of[(r["kernel"], r["dtype"], r["label"])] = "|".join(kern[k]["ptx_sha"] for k in r["keys"])
        sig_of[(r["kernel"], r["dtype"], r["label"])] = hashlib.sha256("|".join(parts).encode()).hexdigest()[
            :24
        ]

    rows = []
    if args.cases:
        from fixbits.checker.soundness import device_cases

        by: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for r in device_cases(Path(args.cases)):
            s = sig_of.get((r["kernel"], r["dtype"], r["label"]))
            if "error" in r or s is None or not r.get("bytes"):
                continue
            by.setdefault((r["kernel"], r["dtype"]), []).append((s, r["bytes"]))
        for (kernel, dtype), items in sorted(by.items()):
            chk, true, pairs, _ = partition(items)
            rows.append((kernel, dtype, len(items), chk, true, pairs, None))
    else:
        order = _labels_in_order()
        table = json.loads(Path(args.h200).read_text())["table"]
        for t in table:
            labels = order[(t["kernel"], t["dtype"])][: t["configs"]]
            sigs = [sig_of.get((t["kernel"], t["dtype"], lab)) for lab in labels]
            have = [s for s in sigs if s is not None]
            if len(have) < len(labels):
                print(
                    f"  {t['kernel']} {t['dtype']}: {len(labels) - len(have)} configs missing from the store"
                )
            texts = {
                text_of[(t["kernel"], t["dtype"], lab)]
                for lab in labels
                if (t["kernel"], t["dtype"], lab) in text_of
            }
            rows.append(
                (t["kernel"], t["dtype"], len(have), len(set(have)), t["true_classes"], None, len(texts))
            )
    print(
        f"{'kernel':22s} {'dtype':5s} {'cfgs':>5s} {'ptx':>4s} {'chk':>4s} {'true':>4s} {'split':>6s} {'FALSE=':>6s}"
    )
    out = []
    for kernel, dtype, n, chk, true, pairs, ntext in rows:
        split = chk / true if true else None
        print(
            f"{kernel:22s} {dtype:5s} {n:5d} {ntext!s:>4s} {chk:4d} {true!s:>4s} "
            f"{(f'{split:.2f}' if split else '-'):>6s} {pairs!s:>6s}"
        )
        out.append(
            {"kernel": kernel, "dtype": dtype, "configs": n, "distinct_ptx": ntext, "checker_classes": chk,
             "true_classes": true,
             "over_split": round(split, 3) if split else None, "false_equal_pairs": pairs}
        )  # fmt: skip
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        Path(args.out).write_text(json.dumps({"rows": out}, indent=1))
    return 1 if any(r["false_equal_pairs"] for r in out) else 0


if __name__ == "__main__":
    raise SystemExit(main())
