"""`fixbits report FILES... [--out merged.xml] [--format text|markdown]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fixbits.report import render
from fixbits.report.junit import ReportError, cases, merge, shape_coverage, summarize


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="JUnit XML files (e.g. one per worker)"
    )
    parser.add_argument("--out", type=Path, help="write the merged JUnit XML here")
    parser.add_argument("--format", choices=("text", "markdown"), default="text", help="summary format")
    parser.add_argument(
        "--markdown", dest="format", action="store_const", const="markdown", help="same as --format markdown"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when anything failed or errored, or no test ran"
    )
    parser.add_argument(
        "--check-shapes",
        action="store_true",
        help="exit 1 unless every fuzz shape (test id fuzz<i>) appears exactly once over the files",
    )
    parser.add_argument(
        "--expect-shapes",
        type=int,
        default=None,
        metavar="N",
        help="with --check-shapes: the seeded set is 0..N-1",
    )


def run(args: argparse.Namespace) -> int:
    try:
        xml = merge(args.files)
    except ReportError as exc:
        print(f"fixbits report: {exc}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        xml.write(str(args.out))
    summary = summarize(cases(xml))
    print(render.markdown(summary) if args.format == "markdown" else render.text(summary))
    rc = 1 if args.strict and not summary.ok else 0
    if args.check_shapes:
        cov = shape_coverage(cases(xml), args.expect_shapes)
        print(render.coverage(cov))
        rc = rc or (0 if cov.ok else 1)
    return rc
