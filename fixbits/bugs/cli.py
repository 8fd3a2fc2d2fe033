"""`fixbits bug <name>`: reproduce a known cuBLAS defect on this machine and say whether the
library lost what the defect's condition predicts."""

from __future__ import annotations

import argparse
import re

from fixbits.cublas.lt import DEFAULT_WORKSPACE_BYTES

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*[xX×]\s*(\d+)\s*$")
DTYPES = ("fp16", "bf16")


def parse_shape(text: str) -> tuple[int, int, int]:
    """'32x32x11528' -> (32, 32, 11528); M, N, K positive."""
    m = _SHAPE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"shape {text!r} is not MxNxK (e.g. 32x32x11528)")
    dims = tuple(int(g) for g in m.groups())
    if min(dims) < 1:
        raise argparse.ArgumentTypeError(f"shape {text!r}: M, N and K must be positive")
    return dims  # type: ignore[return-value]


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from exc
    if v < 0:
        raise argparse.ArgumentTypeError(f"{v} must be >= 0")
    return v


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bug", required=True, metavar="BUG")
    p = sub.add_parser(
        "splitk-tail", help="cuBLASLt split-K tail loss (paper App. D): all-ones GEMM, fp32 out"
    )
    p.add_argument("--shape", type=parse_shape, default=(32, 32, 11528), help="MxNxK (default 32x32x11528)")
    p.add_argument("--dtype", choices=DTYPES, default="fp16", help="input dtype (default fp16)")
    p.add_argument(
        "--workspace", type=_nonneg, default=DEFAULT_WORKSPACE_BYTES, help="workspace bytes (default 32 MiB)"
    )
    p.add_argument(
        "--k-step", type=int, default=None, help="k step b (default: matrices/cublas_bugs/k_steps.yaml)"
    )
    p.add_argument(
        "--library",
        default=None,
        help="path of a libcublasLt to drive, or 'all' for every installed version (default: nvmath / torch's)",
    )
    p.add_argument(
        "--desc-out",
        default=None,
        help="write the losing launch's GEMMDesc YAML here (for `fixbits emulate`)",
    )


def format_reproduction(rep: object) -> str:
    from fixbits.bugs.splitk_tail import Reproduction, rounded

    assert isinstance(rep, Reproduction)
    k = rep.k
    pred = rep.prediction
    lines = [
        f"split-K tail loss, {rep.m}x{rep.n}x{k} {rep.in_dtype} on {rep.arch}, cuBLASLt {rep.library_version}"
        f" ({rep.library_path or 'library path unknown'})",
        f"heuristic: {rep.heuristic.to_dict()}",
        f"condition: {pred.explain()}",
        f"{'path':<22} {'out':<5} {'returned':>12} {'expected':>12} {'lost':>6}  note",
    ]
    for r in rep.results:
        expect = rounded(k, r.out_dtype)
        if r.error:
            lines.append(f"{r.path:<22} {r.out_dtype:<5} {'error':>12} {expect:>12g} {'':>6}  {r.error}")
            continue
        lost = r.lost(k)
        note = "" if r.uniform else f"not uniform: min {r.min:g} max {r.max:g}"
        if r.out_dtype != "fp32":
            note = (
                (note + " " if note else "")
                + f"(whole K reads {expect:g}; K-{pred.lost_span or pred.t} reads {rounded(k - (pred.lost_span or pred.t), r.out_dtype):g})"
            )
        lines.append(
            f"{r.path:<22} {r.out_dtype:<5} {r.value:>12g} {expect:>12g} {'' if lost is None else lost:>6}  {note}"
        )
    own = rep.result("lt-own")
    observed = own.lost(k) if own else None

    def verdict(predicted: int) -> str:
        if observed is None:
            return "cannot tell (own pick failed or is not uniform)"
        if observed == predicted:
            return "matches"
        return f"DIFFERS (observed {observed}, predicted {predicted})"

    lines.append(
        f"predicted loss: span rule {pred.lost_span}, paper's condition {pred.lost}; observed (cuBLASLt own "
        f"pick) {observed}: span rule {verdict(pred.lost_span)}, paper's condition {verdict(pred.lost)}"
    )
    if pred.lost_span:
        from fixbits.bugs.splitk_tail import tail_dropped_desc

        try:
            desc = tail_dropped_desc(pred, rep.in_dtype, rep.arch)
            cut = desc.k_cuts[0]
            lines.append(
                f"descriptor of the losing launch: {desc.short_hash} ({cut.count} contiguous parts of "
                f"{pred.k // pred.splitk_num}, last ends at {k - pred.lost_span}; "
                "`--desc-out F` writes it; `fixbits emulate --desc F --kind ones` replays it)"
            )
        except ValueError as exc:
            lines.append(f"no descriptor: {exc}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.bug != "splitk-tail":
        raise SystemExit(f"unknown bug {args.bug!r}")
    import sys

    from fixbits import predicates
    from fixbits.bugs.splitk_tail import reproduce
    from fixbits.cublas.lt import CublasLt

    if predicates.gpu_vendor() != "nvidia":
        print(
            f"fixbits bug splitk-tail: {predicates.cpu_reason('needs an NVIDIA GPU with cuBLASLt')}",
            file=sys.stderr,
        )
        return 2
    m, n, k = args.shape
    if args.library == "all":
        from fixbits.cublas.lib import discover, distinct_versions

        paths: list[str | None] = [x.path for x in distinct_versions(discover())]
        if not paths:
            print("fixbits bug splitk-tail: no cuBLASLt library found", file=sys.stderr)
            return 2
    else:
        paths = [args.library]
    rc = 0
    for path in paths:
        try:
            lt = CublasLt(path)
        except (OSError, ImportError) as exc:
            print(f"fixbits bug splitk-tail: cannot load cuBLASLt {path or ''}: {exc}", file=sys.stderr)
            return 2
        try:
            rep = reproduce(m, n, k, args.dtype, lt=lt, workspace_bytes=args.workspace, k_step=args.k_step)
        finally:
            lt.close()
        print(format_reproduction(rep))
        if args.desc_out and rep.prediction.lost_span:
            from fixbits.bugs.splitk_tail import tail_dropped_desc

            with open(args.desc_out, "w") as fh:
                fh.write(tail_dropped_desc(rep.prediction, rep.in_dtype, rep.arch).to_yaml())
            print(f"wrote {args.desc_out}")
        own = rep.result("lt-own")
        observed = own.lost(k) if own else None
        rc = rc or (0 if observed == rep.prediction.lost_span else 3)
    return rc
