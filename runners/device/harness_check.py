"""Check the fixbits harness on a real GPU: detection, fingerprint, bit views of CUDA tensors,
the plugin's skips under --arch, xdist, JUnit drift properties, and (optionally) the gate itself.

    PYTHONPATH=<repo> python3 runners/device/harness_check.py --out DIR [--budget-s 240] [--suites]

Writes DIR/harness_check.yaml (one entry per case: ok / failed / error, with details),
DIR/env.yaml, the JUnit files and their `fixbits report` summaries; prints a summary table last.
Every case is independent: one that raises is recorded and the rest still run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

MINI_SUITE = """
import numpy as np
import pytest

@pytest.mark.gpu
@pytest.mark.nvidia
def test_matmul_repeats_bitwise(drift, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(256, 1024, device="cuda", dtype=torch.float16, generator=g)
    b = torch.randn(1024, 512, device="cuda", dtype=torch.float16, generator=g)
    drift.context(shape=(256, 512, 1024), dtype="fp16")
    drift.assert_equal(a @ b, a @ b)

@pytest.mark.gpu("sm_100", "sm_103")
def test_blackwell_only():
    pass

@pytest.mark.gpu
def test_planted_drift(drift):
    import torch
    x = torch.ones(64, device="cuda", dtype=torch.bfloat16)
    y = x.clone()
    y.view(torch.int16)[7] += 1
    drift.context(shape=(8, 8, 1), dtype="bf16", desc="planted00000")
    drift.assert_equal(y, x)

@pytest.mark.gpu
def test_simulated_crash():
    raise RuntimeError("CUDA error: simulated by harness_check (no real fault)")

@pytest.mark.parametrize("i", range(8))
def test_cpu_part(i, seed):
    assert seed == 4242
"""


def run_pytest(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)  # keep carried wheels
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=max(10.0, timeout),
    )


def junit_summary(xml: Path) -> dict[str, Any]:
    from fixbits.report.junit import cases, merge, summarize

    s = summarize(cases(merge([xml])))
    return {
        "tests": s.tests,
        "passed": s.passed,
        "failed": s.failed,
        "errors": s.errors,
        "skipped": s.skipped,
        "skip_reasons": [list(r) for r in s.skip_reasons],
        "problems": [
            {
                "test": p.test,
                "outcome": p.outcome,
                "shape": p.prop("shape"),
                "first_diff": p.prop("first_diff") or p.message[:200],
            }
            for p in s.problems
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=240.0)
    ap.add_argument(
        "--suites", action="store_true", help="also run `pytest suites/ -n auto --arch <detected>`"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    results: list[dict[str, Any]] = []

    def case(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        left = deadline - time.monotonic()
        if left < 5:
            results.append({"case": name, "status": "skipped", "detail": "time budget spent"})
            return
        t0 = time.monotonic()
        try:
            detail = fn()
            status = "failed" if detail.pop("_failed", False) else "ok"
        except Exception as exc:
            status, detail = (
                "error",
                {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-1500:]},
            )
        results.append({"case": name, "status": status, "seconds": round(time.monotonic() - t0, 1), **detail})

    def predicates_case() -> dict[str, Any]:
        from fixbits import predicates as p

        got = {
            "gpu_arch": p.gpu_arch(),
            "has_cuda": p.has_cuda(),
            "is_hopper": p.is_hopper(),
            "is_blackwell": p.is_blackwell(),
            "has_cublaslt": p.has_cublaslt(),
            "has_triton_gpu": p.has_triton_gpu(),
            "device_nodes_present": p.device_nodes_present(),
        }
        return {**got, "_failed": not (got["has_cuda"] and got["gpu_arch"] and got["has_cublaslt"])}

    def env_case() -> dict[str, Any]:
        from fixbits.env import fingerprint

        fp = fingerprint()
        (args.out / "env.yaml").write_text(
            yaml.safe_dump({"hash": fp.short_hash, **fp.to_dict()}, sort_keys=False)
        )
        missing = [
            k
            for k in ("gpu_name", "sm", "sm_count", "driver", "cuda_runtime", "cublas", "cublaslt", "torch")
            if getattr(fp, k) in (None, "")
        ]
        return {
            "fingerprint": fp.to_dict(),
            "hash": fp.short_hash,
            "missing": missing,
            "_failed": bool(missing),
        }

    def bits_case() -> dict[str, Any]:
        import torch

        from fixbits.testing import compare_bits

        out: dict[str, Any] = {}
        bad = False
        for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float8_e4m3fn):
            x = torch.linspace(-3, 3, 1000, device="cuda").to(dt)
            y = x.clone()
            y.view(torch.uint8 if dt.itemsize == 1 else {2: torch.int16, 4: torch.int32}[dt.itemsize]).view(
                -1
            )[123 * dt.itemsize if dt.itemsize == 1 else 123] += 1
            d = compare_bits(y, x)
            out[str(dt)] = {
                "n_diff": d.n_diff,
                "first_index": list(d.first_index or ()),
                "ulp_first": d.ulp_first,
            }
            bad |= d.n_diff != 1 or d.first_index != (123,)
        return {**out, "_failed": bad}

    def plugin_case(arch: str, expect: dict[str, int], extra: list[str]) -> Callable[[], dict[str, Any]]:
        def fn() -> dict[str, Any]:
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                (root / "suites" / "enforcement").mkdir(parents=True)
                (root / "pytest.ini").write_text(
                    "[pytest]\naddopts = --strict-markers -ra\njunit_family = xunit1\n"
                )
                (root / "conftest.py").write_text(
                    "import sys\npytest_plugins = [] if 'fixbits.plugin' in sys.modules else ['fixbits.plugin']\n"
                )
                (root / "suites" / "enforcement" / "test_mini.py").write_text(textwrap.dedent(MINI_SUITE))
                xml = args.out / f"mini_{arch}{'_xdist' if extra else ''}.xml"
                done = run_pytest(
                    ["--arch", arch, "--seed", "4242", f"--junitxml={xml}", *extra],
                    root,
                    deadline - time.monotonic(),
                )
                summary = junit_summary(xml)
                got = {k: summary[k] for k in expect}
                return {
                    "exit": done.returncode,
                    "expect": expect,
                    "got": got,
                    "summary": summary,
                    "tail": done.stdout[-1500:],
                    "_failed": got != expect,
                }

        return fn

    case("predicates", predicates_case)
    case("env_fingerprint", env_case)
    case("bit_views_of_cuda_tensors", bits_case)
    # sm_90 machine: matmul repeat passes; blackwell-only skips; planted drift fails; simulated crash is an error
    case("plugin_arch_match", plugin_case("sm_90", {"passed": 9, "failed": 1, "errors": 1, "skipped": 1}, []))
    case(
        "plugin_arch_mismatch",
        plugin_case("sm_100", {"passed": 8, "failed": 0, "errors": 0, "skipped": 4}, []),
    )
    case(
        "plugin_xdist",
        plugin_case("auto", {"passed": 9, "failed": 1, "errors": 1, "skipped": 1}, ["-n", "4"]),
    )
    if args.suites:

        def suites_case() -> dict[str, Any]:
            from fixbits.predicates import gpu_arch

            xml = args.out / "suites.xml"
            done = run_pytest(
                ["suites/", "-n", "auto", "--arch", gpu_arch() or "auto", f"--junitxml={xml}", "-q"],
                REPO,
                deadline - time.monotonic() - 5,
            )
            summary = junit_summary(xml)
            return {
                "exit": done.returncode,
                "summary": summary,
                "tail": done.stdout[-2000:],
                "_failed": done.returncode not in (0,),
            }

        case("gate_suites", suites_case)

    (args.out / "harness_check.yaml").write_text(yaml.safe_dump(results, sort_keys=False, width=120))
    print(f"{'case':<28} {'status':<8} {'s':>6}  detail")
    for r in results:
        detail = (
            r.get("error")
            or (f"got {r['got']}" if "got" in r else "")
            or (f"missing {r['missing']}" if r.get("missing") else "")
            or (f"arch {r.get('gpu_arch')}" if "gpu_arch" in r else "")
        )
        print(f"{r['case']:<28} {r['status']:<8} {r.get('seconds', 0):>6}  {str(detail)[:110]}")
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
