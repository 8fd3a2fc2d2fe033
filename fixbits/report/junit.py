"""Merge JUnit XML files and read the fixbits drift properties back out of them.

A gate run is split across xdist workers, matrix cells and runners; each writes its own
JUnit file. The merged file is what CI archives, and the summary is what a reviewer reads:
for every failure, the shape, dtype, descriptor hash and first differing element that the
``drift`` fixture recorded, so a drift can be located without rerunning anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Properties, Skipped, TestCase, TestSuite
from junitparser.junitparser import JUnitXmlError

PREFIX = "fixbits."


class ReportError(ValueError):
    """An input file is missing or not JUnit XML; the message names it."""


def read(path: Path | str) -> JUnitXml:
    p = Path(path)
    if not p.is_file():
        raise ReportError(f"{p}: no such file")
    try:
        xml = JUnitXml.fromfile(str(p))
    except (JUnitXmlError, SyntaxError, ValueError) as exc:  # ElementTree raises ParseError (a SyntaxError)
        raise ReportError(f"{p}: not a JUnit XML file ({exc})") from None
    if isinstance(xml, TestSuite):  # a bare <testsuite> root
        wrapped = JUnitXml()
        wrapped.add_testsuite(xml)
        return wrapped
    return xml


def merge(paths: Sequence[Path | str]) -> JUnitXml:
    """One <testsuites> holding every suite of every file, with the totals recomputed."""
    if not paths:
        raise ReportError("no JUnit XML files given")
    merged = JUnitXml(name="fixbits")
    for path in paths:
        for suite in read(path):
            merged.add_testsuite(suite)
    merged.update_statistics()  # type: ignore[no-untyped-call]
    return merged


@dataclass(frozen=True)
class CaseResult:
    """One testcase as the summary needs it."""

    test: str
    outcome: str  # passed, failed, error, skipped
    message: str = ""
    properties: tuple[tuple[str, str], ...] = ()

    def prop(self, name: str) -> str:
        return dict(self.properties).get(PREFIX + name, "")


@dataclass(frozen=True)
class Summary:
    tests: int
    passed: int
    failed: int
    errors: int
    skipped: int
    skip_reasons: tuple[tuple[str, int], ...] = ()  # (reason, count), most frequent first
    problems: tuple[CaseResult, ...] = field(default_factory=tuple)  # failures and errors
    # (suite, passed, failed, errors, skipped) per gate suite ('unit' for tests/, 'other' else)
    by_suite: tuple[tuple[str, int, int, int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.errors == 0 and self.tests > 0


def _case_result(suite: TestSuite, case: TestCase) -> CaseResult:
    name = f"{case.classname}::{case.name}" if case.classname else str(case.name)
    props_el = case.child(Properties)  # type: ignore[no-untyped-call]
    props = tuple((str(p.name), str(p.value)) for p in props_el) if props_el is not None else ()
    results = list(case.result)
    crash = dict(props).get(PREFIX + "crash")
    for r in results:
        msg = (r.message or r.text or "").strip()
        if isinstance(r, Error):
            return CaseResult(name, "error", msg, props)
        if isinstance(r, Failure):
            # the plugin marks a GPU crash: an error (infrastructure), not a bitwise verdict
            return CaseResult(name, "error" if crash else "failed", crash or msg, props)
        if isinstance(r, Skipped):
            return CaseResult(name, "skipped", msg, props)
    return CaseResult(name, "passed", "", props)


def cases(xml: JUnitXml) -> list[CaseResult]:
    return [_case_result(suite, case) for suite in xml for case in suite]


def suite_of(test: str) -> str:
    """'reconstruction' for 'suites.reconstruction.test_x::t', 'unit' for 'tests.test_x::t'."""
    parts = test.split("::")[0].replace("/", ".").split(".")
    if len(parts) >= 3 and parts[0] == "suites":
        return parts[1]
    return "unit" if parts[0] == "tests" else "other"


def summarize(results: Iterable[CaseResult]) -> Summary:
    results = list(results)
    per: dict[str, Counter[str]] = {}
    for r in results:
        per.setdefault(suite_of(r.test), Counter())[r.outcome] += 1
    count = Counter(r.outcome for r in results)
    reasons = Counter(
        r.message.splitlines()[0] if r.message else "(no reason given)"
        for r in results
        if r.outcome == "skipped"
    )
    return Summary(
        tests=len(results),
        passed=count["passed"],
        failed=count["failed"],
        errors=count["error"],
        skipped=count["skipped"],
        skip_reasons=tuple(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        problems=tuple(r for r in results if r.outcome in ("failed", "error")),
        by_suite=tuple(
            (name, c["passed"], c["failed"], c["error"], c["skipped"]) for name, c in sorted(per.items())
        ),
    )


# -- fuzz shapes: each exactly once over the merged files ----------------------------------------


@dataclass(frozen=True)
class ShapeCoverage:
    """Per fuzz test (its node id with the shape index starred): shapes seen twice, missing, unexpected."""

    families: tuple[tuple[str, int, int], ...]  # (family, distinct shapes seen, expected count)
    duplicates: tuple[tuple[str, int, int], ...]  # (family, index, times seen)
    missing: tuple[tuple[str, int], ...]  # (family, index)
    unexpected: tuple[tuple[str, int], ...] = ()  # (family, index) beyond the seeded set

    @property
    def ok(self) -> bool:
        return bool(self.families) and not (self.duplicates or self.missing or self.unexpected)


def shape_coverage(results: Iterable[CaseResult], expect: int | None = None) -> ShapeCoverage:
    """Check that every fuzz shape (test id '...fuzz<i>...', fixbits.shapes.fuzz_param_id) appears
    exactly once. Expected per family: range(expect), or range(highest index seen + 1)."""
    from fixbits.shapes import fuzz_index_of, fuzz_param_id

    seen: dict[str, Counter[int]] = {}
    for r in results:
        idx = fuzz_index_of(r.test)
        if idx is None:
            continue
        tag = fuzz_param_id(idx)
        cut = r.test.rindex(tag)
        family = r.test[:cut] + fuzz_param_id(0).rstrip("0") + "*" + r.test[cut + len(tag) :]
        seen.setdefault(family, Counter())[idx] += 1
    families, dups, missing, unexpected = [], [], [], []
    for fam, counts in sorted(seen.items()):
        n = expect if expect is not None else max(counts) + 1
        families.append((fam, len(counts), n))
        dups += [(fam, i, c) for i, c in sorted(counts.items()) if c > 1]
        missing += [(fam, i) for i in range(n) if i not in counts]
        unexpected += [(fam, i) for i in sorted(counts) if i >= n]
    return ShapeCoverage(tuple(families), tuple(dups), tuple(missing), tuple(unexpected))
