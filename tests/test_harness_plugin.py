"""The plugin proved on generated test files (pytester): it must fail when it should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import hypothesis  # noqa: F401  # imported before pytester's in-process runs snapshot sys.modules
import numpy  # noqa: F401
import pytest

from fixbits import plugin, predicates
from fixbits.env import fingerprint

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parent.parent

INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider
junit_family = xunit1
"""


@pytest.fixture(scope="module", autouse=True)
def warm_fingerprint() -> None:
    """Probe torch once, outside the in-process runs (their sys.modules is restored after each)."""
    fingerprint()


@pytest.fixture
def tree(pytester: pytest.Pytester) -> pytest.Pytester:
    """A miniature fixbits checkout: one suite, one unit test directory."""
    pytester.makeini(INI)
    pytester.mkdir("suites")
    pytester.mkdir("suites/enforcement")
    pytester.mkdir("tests")
    return pytester


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predicates, "gpu_arch", lambda: None)


@pytest.fixture
def hopper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predicates, "gpu_arch", lambda: "sm_90")


@pytest.mark.parametrize(
    ("option", "value", "allowed"),
    [
        ("--arch", "sm_95", "sm_80, sm_90, sm_100, sm_103, gfx942, gfx950, auto"),
        ("--dtype", "fp7", "fp16, bf16, fp8_e4m3, all"),
        ("--mode", "slowest", "quick, full, fuzz"),
        ("--seed", "tomorrow", "an integer or 'date'"),
        ("--cublas", "latest", "a library version (e.g. 13.1.0) or 'installed'"),
    ],
)
def test_bad_option_value_is_a_usage_error_naming_the_choices(
    tree: pytest.Pytester, option: str, value: str, allowed: str
) -> None:
    tree.makepyfile(test_x="def test_x(): pass")
    result = tree.runpytest(f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    assert f"{option} {value!r}" in result.stderr.str()
    assert allowed in result.stderr.str()


def test_missing_matrix_file_names_what_exists(tree: pytest.Pytester) -> None:
    tree.mkdir("matrices")
    (tree.path / "matrices" / "pr.yaml").write_text("archs: [sm_90]\ndtypes: [fp16]\n")
    tree.makepyfile(test_x="def test_x(): pass")
    result = tree.runpytest("--matrix=nope.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--matrix 'nope.yaml': no such file" in result.stderr.str()
    assert "available: pr.yaml" in result.stderr.str()


def test_options_are_parsed_into_the_frozen_fixture(tree: pytest.Pytester, hopper: None) -> None:
    tree.makepyfile(
        test_opts="""
        import dataclasses, pytest
        def test_opts(fixbits_options, seed, arch, mode):
            assert fixbits_options.arch_requested == "sm_90" and arch == "sm_90"
            assert fixbits_options.dtypes == ("bf16",) and fixbits_options.cublas == "13.1.0"
            assert seed == 1234 and mode == "full"
            with pytest.raises(dataclasses.FrozenInstanceError):
                fixbits_options.seed = 1
        """
    )
    result = tree.runpytest("--arch=SM_90", "--dtype=bf16", "--cublas=13.1.0", "--seed=1234", "--mode=full")
    result.assert_outcomes(passed=1)


def test_seed_date_is_todays_utc_date(tree: pytest.Pytester) -> None:
    import datetime

    tree.makepyfile(test_s="def test_s(seed): assert len(str(seed)) == 8 and str(seed).startswith('20')")
    today = int(datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d"))
    result = tree.runpytest("--seed=date", "-s")
    result.assert_outcomes(passed=1)
    assert plugin.parse_seed("date") in (today, today + 1)  # a run straddling midnight


def test_dtype_fixture_runs_once_per_selected_dtype(tree: pytest.Pytester) -> None:
    tree.makepyfile(
        test_d="""
        import pytest
        def test_d(dtype):
            assert dtype in ("fp16", "bf16", "fp8_e4m3")
        @pytest.mark.parametrize("dtype", ["fp16"])
        def test_own(dtype):
            assert dtype == "fp16"
        """
    )
    tree.runpytest().assert_outcomes(passed=4)
    tree.runpytest("--dtype=fp8_e4m3").assert_outcomes(passed=2)


def test_a_suites_own_dtype_fixture_is_left_alone(tree: pytest.Pytester) -> None:
    tree.makepyfile(
        test_own="""
        import pytest
        @pytest.fixture(params=["fp32"])
        def dtype(request):
            return request.param
        def test_d(dtype):
            assert dtype == "fp32"
        """
    )
    tree.runpytest().assert_outcomes(passed=1)


def test_gpu_tests_skip_on_cpu_with_the_reason(tree: pytest.Pytester, no_gpu: None) -> None:
    tree.makepyfile(
        **{
            "suites/enforcement/test_g": """
            import pytest
            @pytest.mark.gpu
            @pytest.mark.nvidia
            def test_on_gpu():
                raise AssertionError("must not run without a GPU")
            def test_cpu_part():
                pass
            """
        }
    )
    result = tree.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*no CUDA GPU visible (*torch.cuda.is_available() is False)*"])
    result = tree.runpytest("-rs", "--arch=sm_90")
    result.stdout.fnmatch_lines(["*--arch sm_90 selected but no CUDA GPU visible*"])


def test_gpu_test_skips_when_arch_differs_from_the_visible_gpu(tree: pytest.Pytester, hopper: None) -> None:
    tree.makepyfile(
        test_g="""
        import pytest
        @pytest.mark.gpu
        def test_any(): pass
        @pytest.mark.gpu("sm_100", "sm_103")
        def test_blackwell_only(): pass
        @pytest.mark.amd
        def test_rocm(): pass
        """
    )
    result = tree.runpytest("-rs", "--arch=gfx942")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*--arch gfx942 selected but an NVIDIA sm_90 GPU is present*"])
    result = tree.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        ["*needs one of sm_100, sm_103, but an NVIDIA sm_90 GPU is present*", "*needs an AMD GPU*sm_90*"]
    )


def test_bad_arch_in_gpu_marker_is_a_usage_error(tree: pytest.Pytester, hopper: None) -> None:
    tree.makepyfile(test_g="import pytest\n@pytest.mark.gpu('sm_99')\ndef test_x(): pass\n")
    result = tree.runpytest()
    assert result.ret != 0
    assert "'sm_99' is not one of" in result.stdout.str() + result.stderr.str()


def test_unknown_markers_are_errors(tree: pytest.Pytester) -> None:
    tree.makepyfile(test_m="import pytest\n@pytest.mark.gpuu\ndef test_x(): pass\n")
    result = tree.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'gpuu' not found in `markers` configuration option*"])


def test_suite_and_unit_markers_are_added_from_the_path(tree: pytest.Pytester) -> None:
    tree.makepyfile(
        **{
            "suites/enforcement/test_s": "def test_s(request): assert request.node.get_closest_marker('enforcement')",
            "tests/test_u": "def test_u(request): assert request.node.get_closest_marker('unit')",
        }
    )
    tree.runpytest().assert_outcomes(passed=2)
    result = tree.runpytest("-m", "enforcement")
    result.assert_outcomes(passed=1)
    result = tree.runpytest("-m", "unit")
    result.assert_outcomes(passed=1)


def test_an_unregistered_suite_directory_fails_collection(tree: pytest.Pytester) -> None:
    tree.mkdir("suites/brand_new")
    tree.makepyfile(**{"suites/brand_new/test_n": "def test_n(): pass"})
    result = tree.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "suites/brand_new/ has no registered marker 'brand_new'" in result.stderr.str()


def test_fuzz_tests_run_only_when_asked(tree: pytest.Pytester) -> None:
    tree.makepyfile(test_f="import pytest\n@pytest.mark.fuzz\ndef test_f(): pass\ndef test_plain(): pass\n")
    tree.runpytest().assert_outcomes(passed=1, deselected=1)
    tree.runpytest("--mode=fuzz").assert_outcomes(passed=2)
    tree.runpytest("-m", "fuzz").assert_outcomes(passed=1, deselected=1)


def test_planted_bitwise_mismatch_fails_with_drift_report_and_junit_properties(tree: pytest.Pytester) -> None:
    tree.makepyfile(
        **{
            "suites/enforcement/test_drift": """
            import numpy as np
            def test_planted(drift):
                expected = np.linspace(-2, 2, 64, dtype=np.float32).astype(np.float16).reshape(8, 8)
                actual = expected.copy()
                actual.view(np.uint16)[3, 5] ^= 1  # one last-place bit flipped
                drift.context(shape=(8, 8, 32), dtype="fp16", desc="0123456789ab")
                drift.assert_equal(actual, expected)
            def test_equal(drift):
                a = np.arange(16, dtype=np.float32)
                drift.assert_equal(a, a.copy(), shape=(4, 4, 1), dtype="fp32")
            """
        }
    )
    xml = tree.path / "junit.xml"
    result = tree.runpytest(f"--junitxml={xml}", "--seed=77")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*bitwise mismatch: 1 of 64 elements differ (float16, shape (8, 8))*",
            "*first difference at index (3, 5): actual 0x* expected 0x*, 1 ulp*",
            "*context: shape=(8, 8, 32), dtype=fp16, desc_hash=0123456789ab, seed=77*",
            "*fixbits environment*",
        ]
    )
    root = ElementTree.parse(xml).getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    props = {p.get("name"): p.get("value") for p in cases["test_planted"].iter("property")}
    assert props["fixbits.shape"] == "8x8x32"
    assert props["fixbits.dtype"] == "fp16"
    assert props["fixbits.desc_hash"] == "0123456789ab"
    assert props["fixbits.n_diff"] == "1"
    assert props["fixbits.first_diff"].startswith("index (3, 5): actual 0x")
    assert props["fixbits.seed"] == "77"
    assert "fixbits.libraries" in props and "fixbits.env_hash" in props
    ok_props = {p.get("name"): p.get("value") for p in cases["test_equal"].iter("property")}
    assert ok_props["fixbits.n_diff"] == "0" and "fixbits.first_diff" not in ok_props


def test_gpu_crash_is_an_error_with_the_fingerprint_and_the_run_goes_on(tree: pytest.Pytester) -> None:
    tree.makepyfile(
        test_c="""
        def test_crash():
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        def test_after():
            pass
        def test_real_failure():
            assert 1 == 2
        """
    )
    xml = tree.path / "junit.xml"
    result = tree.runpytest(f"--junitxml={xml}", "-rA")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    out = result.stdout.str()
    assert "fixbits environment" in out and "ERROR" in out
    root = ElementTree.parse(xml).getroot()
    crash = next(c for c in root.iter("testcase") if c.get("name") == "test_crash")
    props = {p.get("name"): p.get("value") for p in crash.iter("property")}
    assert props["fixbits.crash"].startswith("RuntimeError: CUDA error")
    assert len(props["fixbits.env_hash"]) == 12


def test_runs_under_xdist(tree: pytest.Pytester, no_gpu: None) -> None:
    tree.makepyfile(
        **{
            "suites/enforcement/test_x": """
            import pytest
            @pytest.mark.parametrize("i", range(6))
            def test_i(i, seed, request):
                assert request.node.get_closest_marker("enforcement") and seed == 5
            @pytest.mark.gpu
            def test_gpu(): pass
            """
        }
    )
    result = tree.runpytest_subprocess("-n", "2", "--seed=5", "--arch=auto", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=6, skipped=1)


def test_root_conftest_loads_the_plugin_when_fixbits_is_not_installed(tmp_path: Path) -> None:
    """The GPU runners: no entry points, PYTHONPATH=<repo>; also no double registration when installed."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    args = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "--arch",
        "sm_90",
        str(REPO / "tests" / "test_harness_predicates.py"),
    ]
    bare = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stdout + bare.stderr
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    installed = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "already registered" not in installed.stdout + installed.stderr


def test_matrix_fixture_is_the_run_matrix_restricted_to_the_options(
    tree: pytest.Pytester, hopper: None
) -> None:
    tree.mkdir("matrices")
    (tree.path / "matrices" / "pr.yaml").write_text(
        "archs: [sm_90, sm_100]\ndtypes: [fp16, bf16]\ncublas: [installed, '13.1.0']\n"
    )
    (tree.path / "matrices" / "bad.yaml").write_text("archs: [sm_90]\ndtypes: [fp16, fp7]\n")
    tree.makepyfile(
        test_m="""
        def test_m(matrix):
            assert matrix.archs == ("sm_90",) and matrix.dtypes == ("bf16",)
            assert [c.cublas for c in matrix.cells()] == ["installed", "13.1.0"]
        """
    )
    tree.runpytest("--dtype=bf16").assert_outcomes(passed=1)
    result = tree.runpytest("--matrix=bad.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "key 'dtypes[1]': 'fp7' is not one of fp16, bf16, fp8_e4m3" in result.stderr.str()


def test_header_names_the_options_and_the_visible_gpu(tree: pytest.Pytester, hopper: None) -> None:
    tree.makepyfile(test_x="def test_x(): pass")
    result = tree.runpytest("--arch=sm_90", "--seed=3")
    result.stdout.fnmatch_lines(
        [
            "fixbits: arch=sm_90 (visible GPU: sm_90) dtype=all cublas=installed mode=quick seed=3 matrix=default",
            "fixbits env *",
        ]
    )
