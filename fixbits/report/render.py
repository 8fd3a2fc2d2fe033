"""Render a Summary as a plain-text table (terminal) or Markdown (a PR comment, a job summary)."""

from __future__ import annotations

from typing import Any

from fixbits.report.junit import CaseResult, Summary

_DRIFT_COLUMNS = ("test", "outcome", "shape", "dtype", "desc hash", "first difference")


def _row(case_outcome: str, case: CaseResult) -> tuple[str, ...]:
    first = case.prop("first_diff") or (case.message.splitlines()[0] if case.message else "")
    return (case.test, case_outcome, case.prop("shape"), case.prop("dtype"), case.prop("desc_hash"), first)


def _counts_line(s: Summary) -> str:
    return (
        f"{s.passed} passed, {s.failed} failed, {s.skipped} skipped, {s.errors} errors (of {s.tests} tests)"
    )


def text(s: Summary, *, width: int = 60) -> str:
    lines = ["fixbits report", "", _counts_line(s)]
    if len(s.by_suite) > 1:
        lines += ["", f"  {'suite':<20} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}"]
        lines += [f"  {n:<20} {p:>7} {f:>7} {e:>7} {k:>8}" for n, p, f, e, k in s.by_suite]
    if s.skip_reasons:
        lines += ["", "skipped, by reason:"]
        lines += [f"  {n:>5}  {reason}" for reason, n in s.skip_reasons]
    if s.problems:
        lines += ["", "failures and errors:"]
        for case in s.problems:
            test, outcome, shape, dtype, desc, first = _row(case.outcome, case)
            lines.append(f"  {outcome.upper():<6} {test}")
            facts = ", ".join(
                f"{k}={v}" for k, v in (("shape", shape), ("dtype", dtype), ("desc", desc)) if v
            )
            if facts:
                lines.append(f"         {facts}")
            if case.prop("n_diff"):
                lines.append(
                    f"         {case.prop('n_diff')} elements differ, max {case.prop('ulp_max')} ulp"
                )
            if first:
                lines.append(f"         first: {first[:200]}")
            if case.prop("libraries"):
                lines.append(f"         libraries: {case.prop('libraries')}")
    # the closing line CI readers look for (errors count as failures there)
    lines += ["", f"report: {s.passed} passed, {s.failed + s.errors} failed, {s.skipped} skipped"]
    return "\n".join(lines)


def _md_cell(v: str) -> str:
    return v.replace("|", "\\|").replace("\n", " ")[:200]


def markdown(s: Summary) -> str:
    lines = [
        "## fixbits report",
        "",
        "| tests | passed | failed | skipped | errors |",
        "|---:|---:|---:|---:|---:|",
        f"| {s.tests} | {s.passed} | {s.failed} | {s.skipped} | {s.errors} |",
    ]
    if len(s.by_suite) > 1:
        lines += ["", "| suite | passed | failed | errors | skipped |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {n} | {p} | {f} | {e} | {k} |" for n, p, f, e, k in s.by_suite]
    if s.skip_reasons:
        lines += ["", "### Skipped, by reason", "", "| count | reason |", "|---:|---|"]
        lines += [f"| {n} | {_md_cell(reason)} |" for reason, n in s.skip_reasons]
    if s.problems:
        lines += [
            "",
            "### Drift: failures and errors",
            "",
            "| " + " | ".join(_DRIFT_COLUMNS) + " |",
            "|" + "---|" * len(_DRIFT_COLUMNS),
        ]
        for case in s.problems:
            lines.append("| " + " | ".join(_md_cell(c) for c in _row(case.outcome, case)) + " |")
    return "\n".join(lines)


def coverage(cov: Any) -> str:
    """`fixbits report --check-shapes`: shapes per fuzz test, then each duplicate and missing shape."""
    if not cov.families:
        return "fuzz shapes: none found (no test id carries fuzz<i>): FAILED"
    lines = [f"fuzz shapes: {'each exactly once' if cov.ok else 'FAILED'}"]
    lines += [f"  {fam}: {seen} of {n}" for fam, seen, n in cov.families]
    lines += [f"  duplicate: {fam} shape {i} appears {c} times" for fam, i, c in cov.duplicates[:50]]
    lines += [f"  missing:   {fam} shape {i}" for fam, i in cov.missing[:50]]
    lines += [f"  unexpected: {fam} shape {i} (beyond the seeded set)" for fam, i in cov.unexpected[:50]]
    more = sum(max(len(x) - 50, 0) for x in (cov.duplicates, cov.missing, cov.unexpected))
    if more > 0:
        lines.append(f"  ... and {more} more")
    return "\n".join(lines)
