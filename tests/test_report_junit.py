"""`fixbits report`: merges JUnit files and surfaces the drift properties of every failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite

from fixbits.report import render
from fixbits.report.junit import ReportError, cases, merge, summarize

REPO = Path(__file__).resolve().parent.parent
NO_GPU = "no CUDA GPU visible (torch.cuda.is_available() is False)"


def case(name: str, result: object = None, props: dict[str, str] | None = None) -> TestCase:
    c = TestCase(name, classname="suites.reconstruction.test_gemm")
    if result is not None:
        c.result = [result]
    if props:
        p = Properties()
        for k, v in props.items():
            p.add_property(Property(k, v))
        c.append(p)
    return c


def write(path: Path, *testcases: TestCase, bare_suite: bool = False) -> Path:
    suite = TestSuite(path.stem)
    for c in testcases:
        suite.add_testcase(c)
    suite.update_statistics()
    if bare_suite:
        suite.write(str(path))
    else:
        xml = JUnitXml()
        xml.add_testsuite(suite)
        xml.write(str(path))
    return path


DRIFT = {
    "fixbits.shape": "1x2x8648",
    "fixbits.dtype": "fp16",
    "fixbits.desc_hash": "3f2a9c1b0d4e",
    "fixbits.n_diff": "2",
    "fixbits.ulp_max": "8",
    "fixbits.first_diff": "index (0, 0): actual 0x4607 (8640.0) expected 0x4609 (8648.0), 2 ulp",
    "fixbits.libraries": "cublaslt=13.1.0 torch=2.11.0",
}


@pytest.fixture
def worker_files(tmp_path: Path) -> list[Path]:
    gw0 = write(
        tmp_path / "gw0.xml",
        case("test_ok"),
        case("test_drift", Failure("AssertionError: bitwise mismatch: 2 of 2 elements differ"), DRIFT),
        case("test_gpu_a", Skipped(NO_GPU)),
    )
    gw1 = write(
        tmp_path / "gw1.xml",
        case("test_ok2"),
        case("test_gpu_b", Skipped(NO_GPU)),
        case("test_hopper", Skipped("needs an sm_90 (Hopper) GPU, found none")),
        case(
            "test_crash",
            Failure("RuntimeError: CUDA error"),
            {
                "fixbits.crash": "RuntimeError: CUDA error: an illegal memory access",
                "fixbits.env_hash": "a" * 12,
            },
        ),
        case("test_fixture_broke", Error("failed on setup with ValueError")),
        bare_suite=True,
    )
    return [gw0, gw1]


def test_merge_keeps_every_case_and_recounts(worker_files: list[Path], tmp_path: Path) -> None:
    merged = merge(worker_files)
    assert sum(1 for suite in merged for _ in suite) == 8
    out = tmp_path / "merged.xml"
    merged.write(str(out))
    again = JUnitXml.fromfile(str(out))
    assert (again.tests, again.failures, again.errors, again.skipped) == (8, 2, 1, 3)


def test_summary_counts_groups_skips_and_keeps_drift(worker_files: list[Path]) -> None:
    s = summarize(cases(merge(worker_files)))
    assert (s.tests, s.passed, s.failed, s.errors, s.skipped) == (8, 2, 1, 2, 3)
    assert s.skip_reasons == ((NO_GPU, 2), ("needs an sm_90 (Hopper) GPU, found none", 1))
    drift = next(p for p in s.problems if p.test.endswith("test_drift"))
    assert (
        drift.outcome == "failed"
        and drift.prop("shape") == "1x2x8648"
        and drift.prop("desc_hash") == "3f2a9c1b0d4e"
    )
    assert s.by_suite == (("reconstruction", 2, 1, 2, 3),)
    crash = next(p for p in s.problems if p.test.endswith("test_crash"))
    assert crash.outcome == "error" and crash.message.startswith("RuntimeError: CUDA error: an illegal")
    assert not s.ok


def test_text_and_markdown_show_the_drift(worker_files: list[Path]) -> None:
    s = summarize(cases(merge(worker_files)))
    text = render.text(s)
    assert "2 passed, 1 failed, 3 skipped, 2 errors (of 8 tests)" in text
    assert f"      2  {NO_GPU}" in text
    assert "shape=1x2x8648, dtype=fp16, desc=3f2a9c1b0d4e" in text
    assert "2 elements differ, max 8 ulp" in text
    assert "first: index (0, 0): actual 0x4607 (8640.0) expected 0x4609 (8648.0), 2 ulp" in text
    assert text.splitlines()[-1] == "report: 2 passed, 3 failed, 3 skipped"
    md = render.markdown(s)
    assert "| 8 | 2 | 1 | 3 | 2 |" in md
    assert (
        "| suites.reconstruction.test_gemm::test_drift | failed | 1x2x8648 | fp16 | 3f2a9c1b0d4e | index (0, 0)"
        in md
    )
    assert f"| 2 | {NO_GPU} |" in md


def test_bad_inputs_are_named(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no such file"):
        merge([tmp_path / "missing.xml"])
    junk = tmp_path / "junk.xml"
    junk.write_text("not xml at all")
    with pytest.raises(ReportError, match=r"junk\.xml: not a JUnit XML file"):
        merge([junk])
    with pytest.raises(ReportError, match="no JUnit XML files given"):
        merge([])


def test_report_cli_writes_merged_file_and_markdown(worker_files: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out" / "merged.xml"
    cmd = [
        sys.executable,
        "-m",
        "fixbits.cli",
        "report",
        *map(str, worker_files),
        "--out",
        str(out),
        "--markdown",
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("## fixbits report") and out.is_file()
    strict = subprocess.run([*cmd, "--strict"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert strict.returncode == 1
    missing = subprocess.run(
        [sys.executable, "-m", "fixbits.cli", "report", str(tmp_path / "nope.xml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and "nope.xml: no such file" in missing.stderr


def test_breakdown_by_suite(tmp_path: Path) -> None:
    unit = TestCase("test_u", classname="tests.test_desc")
    gate = TestCase("test_g", classname="suites.enforcement.test_tree")
    gate.result = [Skipped(NO_GPU)]
    s = summarize(cases(merge([write(tmp_path / "a.xml", unit, gate)])))
    assert s.by_suite == (("enforcement", 0, 0, 0, 1), ("unit", 1, 0, 0, 0))
    assert "  enforcement                0       0       0        1" in render.text(s)
    assert "| unit | 1 | 0 | 0 | 0 |" in render.markdown(s)


def test_all_green_is_ok(tmp_path: Path) -> None:
    s = summarize(cases(merge([write(tmp_path / "a.xml", case("t1"), case("t2", Skipped("why")))])))
    assert s.ok and (s.passed, s.skipped) == (1, 1)
    assert not summarize([]).ok  # nothing ran is never green
