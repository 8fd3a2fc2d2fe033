"""`fixbits probe`: recover the GEMMDesc of one shape from cuBLAS (GPU) or from the emulator.

    fixbits probe --shape 16,4096,14336 --dtype fp16 --arch sm_90            # cuBLASLt's own pick
    fixbits probe --shape 64,8,300 --emulate desc.yaml --arch sm_90          # a CPU black box

With --emulate the black box is the emulator running the given descriptor, which is how the
prober is checked without a GPU: the printed descriptor should be equivalent to the file's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape wants M,N,K (three integers), got {text!r}") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"--shape entries must be positive, got {text!r}")
    return m, n, k


def _hint(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--hint wants NAME=VALUE, got {text!r}")
    name, value = text.split("=", 1)
    known = ("splitk_num", "instruction", "fast_accum", "granule")
    if name not in known:
        raise argparse.ArgumentTypeError(f"--hint {name!r} is not one of {', '.join(known)}")
    if name in ("splitk_num", "granule"):
        return name, int(value)
    if name == "fast_accum":
        return name, value.lower() in ("1", "true", "yes")
    return name, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", type=_shape, default=None, help="M,N,K (required unless --replay)")
    parser.add_argument("--replay", type=Path, default=None,
                        help="evidence JSON written by reconstruct: list the candidates that explain its walks")
    parser.add_argument("--arch", default="sm_90", choices=["sm_80", "sm_90", "sm_100", "sm_103"])
    parser.add_argument("--dtype", default="fp16", choices=["fp16", "bf16", "fp8_e4m3"])
    parser.add_argument("--out-dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--emulate", type=Path, default=None, help="descriptor YAML: probe the emulator running it")
    parser.add_argument("--hint", type=_hint, action="append", default=[], help="NAME=VALUE (repeatable)")
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from fixbits.desc import GEMMDesc
    from fixbits.probe.plan import equivalent_on
    from fixbits.probe.recover import probe

    if args.replay is not None:
        from fixbits.probe.replay import explain, explains, load_recorded

        rec = load_recorded(args.replay, dtype=args.dtype if args.dtype != "fp16" else None, out_dtype=args.out_dtype)
        print(f"{args.replay}: shape {rec.shape}, {len(rec.seen)} recorded outcomes, summed prefix {rec.keff}")
        if rec.desc is not None:
            print(f"  recorded descriptor {rec.desc.short_hash} explains them: {explains(rec.desc, rec)}")
        found = explain(rec, args.arch)
        if not found:
            found = explain(rec, args.arch, use_hints=False)
        print(f"  {len(found)} candidate(s) explain every outcome")
        for d in found[:10]:
            print("   ", d.family, d.short_hash, d.to_json())
        return 0 if found else 1
    if args.shape is None:
        raise SystemExit("fixbits probe: --shape M,N,K is required (or --replay FILE)")
    truth = None
    if args.emulate is not None:
        from fixbits.backends import EmulatorBackend

        truth = GEMMDesc.from_yaml(args.emulate.read_text(), where=str(args.emulate))
        backend = EmulatorBackend(truth)
    else:
        from fixbits.cublas.backend import CublasBackend

        backend = CublasBackend(args.dtype, args.out_dtype)
    m, n, k = args.shape
    res = probe(backend, m, n, k, arch=args.arch, hints=dict(args.hint), seed=args.seed, draws=args.draws)
    if args.json:
        print(json.dumps({"status": res.status, "desc": res.desc.to_dict() if res.desc else None,
                          "calls": res.calls, "candidates": res.candidates, "eliminated": res.eliminated,
                          "dropped_tail": res.dropped_tail, "notes": list(res.notes)}, indent=1))
    else:
        print(res.summary())
        for note in res.notes:
            print("  note:", note)
        if res.desc is not None:
            print(res.desc.to_yaml().rstrip())
    if truth is not None and res.desc is not None:
        same = equivalent_on(res.desc, truth, k)
        print(f"equivalent to {args.emulate} on K={k}: {same}")
        return 0 if same else 1
    return 0 if res.status == "recovered" else 1
