"""`fixbits check A.ptx B.ptx`: are two compiled kernels bitwise equivalent, and if not, where not.

Exit status: 0 equal, 1 not equal (or not certifiable), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="first kernel: .ptx or .amdgcn file")
    parser.add_argument("b", nargs="?", help="second kernel (omit with --signature to print one signature)")
    parser.add_argument(
        "--isa", choices=("ptx", "amdgcn"), help="instruction set (default: from the suffix/text)"
    )
    parser.add_argument(
        "--signature", action="store_true", help="print the signature(s) instead of a verdict"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    return p.read_text(errors="replace")


def run(args: argparse.Namespace) -> int:
    from fixbits.checker.api import compare, signature
    from fixbits.checker.explain import trusted

    try:
        ta = _read(args.a)
        tb = _read(args.b) if args.b else None
    except (FileNotFoundError, OSError) as e:
        print(f"fixbits check: {e}", file=sys.stderr)
        return 2
    sa = signature(ta, args.isa, path=args.a)
    if tb is None or args.signature:
        sigs = [(args.a, sa)] + ([(args.b, signature(tb, args.isa, path=args.b))] if tb is not None else [])
        for path, s in sigs:
            if args.json:
                print(
                    json.dumps(
                        {
                            "file": path,
                            "isa": s.isa,
                            "entry": s.entry,
                            "signature": s.digest,
                            "outputs": {o.param: o.digest for o in s.outputs},
                            "physical": s.physical,
                            "deterministic": s.deterministic,
                            "fallback": s.fallback,
                        }
                    )
                )
            else:
                extra = f"  (text only: {s.fallback})" if s.fallback else ""
                print(f"{s.digest}  {path}  [{s.isa} {s.entry}]{extra}")
        return 0
    sb = signature(tb, args.isa, path=args.b)
    v = compare(sa, sb)
    trusts = trusted(sa) if v.equal else []
    if args.json:
        print(
            json.dumps(
                {"equal": v.equal, "reason": v.reason, "a": sa.digest, "b": sb.digest, "trusts": trusts}
            )
        )
    else:
        print("equal" if v.equal else f"not equal\n{v.reason}")
        for t in trusts:
            print(f"note: {t}")
    return 0 if v.equal else 1
