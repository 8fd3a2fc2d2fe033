"""`fixbits gate`: what changed under the kernels, which suites that can move, run them, report.

A driver or cuBLAS upgrade should not need a person to decide what to retest. The gate takes
this machine's environment fingerprint, compares it with the fingerprints stored next to the
arch profiles (matrices/profiles/*.yaml) and golden records (matrices/golden/*.yaml), names
each field that moved, picks the slice of the suites that change can affect (the mapping is
data: ``gate.slices`` in matrices/pins.yaml), runs pytest on it and writes JUnit XML plus a
drift report (Markdown and a self-contained HTML page) for a person to read first.

Exit codes (documented in README.md):
  0  no drift: every test that ran returned the recorded bytes (GPU tests may have skipped)
  1  drift: at least one test failed (its drift is named in the report)
  2  could not run: bad pins, unreadable fingerprint, pytest usage/internal error, no test
     collected, a timeout or test errors without any failure. Never for a missing GPU: without
     one the CPU part of the slice runs and the GPU tests skip with their reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import glob
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXIT_NO_DRIFT = 0
EXIT_DRIFT = 1
EXIT_COULD_NOT_RUN = 2
VERDICTS = {EXIT_NO_DRIFT: "no drift", EXIT_DRIFT: "drift", EXIT_COULD_NOT_RUN: "could not run"}

REPO_ROOT = Path(__file__).resolve().parent.parent
# fingerprint field -> the kind of change it is (the keys of gate.slices in pins.yaml)
FIELD_KIND: dict[str, str] = {
    "gpu_name": "gpu",
    "sm": "gpu",
    "sm_count": "gpu",
    "driver": "driver",
    "cuda_runtime": "cuda",
    "cublas": "cublas",
    "cublaslt": "cublas",
    "triton": "triton",
    "torch": "torch",
}
KINDS: tuple[str, ...] = ("gpu", "driver", "cuda", "cublas", "triton", "torch")
BUDGET_REPORT_S = 8.0  # --budget-s: kept for pytest's teardown and the report after the soft deadline
BUDGET_GRACE_S = 60.0  # --budget-s: a test running at the deadline may finish; killed after this
# fields only a machine with a GPU can know; on a CPU machine they are 'unknown here', not changed
GPU_FIELDS: frozenset[str] = frozenset({"gpu_name", "sm", "sm_count", "driver", "cublas", "cublaslt"})
ENV_KEYS: tuple[str, ...] = ("environment", "fingerprint", "env")
_PYTEST_RC_MEANING = {
    2: "pytest was interrupted",
    3: "pytest hit an internal error",
    4: "pytest usage error (bad option, or a conftest/plugin failed to import)",
    5: "pytest collected no test in the slice",
}


class GateError(ValueError):
    """The gate cannot run: the message says why (file and key for YAML)."""


# -- pins.yaml -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunnerClass:
    """One self-hosted runner class: the arch it gates and the labels a job asks for."""

    arch: str
    vendor: str
    labels: tuple[str, ...]
    gpus: str = ""


@dataclass(frozen=True)
class Pins:
    """matrices/pins.yaml: pinned versions, runner classes and the gate's change -> slice map."""

    versions: Mapping[str, Any]
    runners: tuple[RunnerClass, ...]
    slices: Mapping[str, tuple[str, ...]]
    unchanged: tuple[str, ...]


def load_pins(path: Path | str) -> Pins:
    """Parse and validate pins.yaml; GateError names the file and the key."""
    from fixbits.matrices import MatrixError, Reader
    from fixbits.predicates import ARCHES

    try:
        r = Reader(path)
        top = r.mapping(r.data, "(top level)")
        r.only_keys(top, ("versions", "runners", "gate"), "")
        versions = r.mapping(r.get(top, "versions", "", default={}), "versions")
        runners: list[RunnerClass] = []
        for arch, spec in r.mapping(r.get(top, "runners", "", default={}), "runners").items():
            key = f"runners.{arch}"
            r.choice(arch, ARCHES, key)
            m = r.mapping(spec, key)
            r.only_keys(m, ("vendor", "labels", "gpus"), key)
            vendor = r.choice(r.get(m, "vendor", key), ("nvidia", "amd"), f"{key}.vendor")
            labels = tuple(str(x) for x in r.sequence(r.get(m, "labels", key), f"{key}.labels"))
            if "self-hosted" not in labels:
                raise r.error(f"{key}.labels", "a GPU runner class must ask for the 'self-hosted' label")
            runners.append(RunnerClass(str(arch), vendor, labels, str(m.get("gpus", ""))))
        gate = r.mapping(r.get(top, "gate", ""), "gate")
        r.only_keys(gate, ("slices", "unchanged"), "gate")
        slices_raw = r.mapping(r.get(gate, "slices", "gate"), "gate.slices")
        slices: dict[str, tuple[str, ...]] = {}
        for kind, paths in slices_raw.items():
            r.choice(kind, KINDS, f"gate.slices.{kind}")
            slices[str(kind)] = tuple(str(p) for p in r.sequence(paths, f"gate.slices.{kind}"))
        missing = [k for k in KINDS if k not in slices]
        if missing:
            raise r.error("gate.slices", f"missing kind(s) {', '.join(missing)}; every kind needs a slice")
        unchanged = tuple(str(p) for p in r.sequence(r.get(gate, "unchanged", "gate"), "gate.unchanged"))
    except MatrixError as exc:
        raise GateError(str(exc)) from None
    return Pins(dict(versions), tuple(runners), slices, unchanged)


def version_matches(pinned: str, actual: str) -> bool:
    """'13.1' accepts '13.1.0' and '13.1.0.3' (dot boundaries), not '13.10'; '+cu130' suffixes ignored."""
    a = actual.split("+")[0].split(" ")[0]
    return a == pinned or a.startswith(pinned + ".")


# -- recorded fingerprints -----------------------------------------------------------------------


@dataclass(frozen=True)
class Baseline:
    """A fingerprint recorded with a profile or golden file (only the fields it had)."""

    source: str
    fields: tuple[tuple[str, str], ...]

    def get(self, name: str) -> str | None:
        return dict(self.fields).get(name)


def _env_fields(data: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in data.items() if k in FIELD_KIND and v is not None))


def _profile_fields(data: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """An arch profile records its arch and library version, not a fingerprint: those two fields.

    ``library_version`` is the library's integer (cublasLtGetVersion 130100 = 13.1.0), the
    fingerprint's ``cublaslt`` is dotted; a profile of another library gives its arch only.
    """
    arch = data.get("arch")
    if not isinstance(arch, str) or "entries" not in data:
        return ()
    fields = [("sm", arch)]
    version = str(data.get("library_version", ""))
    if data.get("library") == "cublaslt" and version.isdigit():
        v = int(version)
        fields.append(("cublaslt", f"{v // 10000}.{v // 100 % 100}.{v % 100}"))
    return tuple(sorted(fields))


def readable(name: str, value: str) -> bool:
    """A recorded value the comparison can trust. Session 1 recorded the H200's driver as
    'for (CUDA 13.0)' (a parsing bug, fixed since): a driver must start with its release number."""
    return not (name == "driver" and not value[:1].isdigit())


def load_baselines(matrices_dir: Path | str) -> tuple[list[Baseline], list[str]]:
    """Fingerprints under profiles/ and golden/; unreadable files become warnings, not errors.

    A file may carry one top-level mapping under ``environment``/``fingerprint``/``env``; a
    golden file's records may each carry ``env``. Records with equal fingerprints are merged.
    """
    root = Path(matrices_dir)
    baselines: list[Baseline] = []
    warnings: list[str] = []
    for sub in ("profiles", "golden"):
        for path in sorted((root / sub).glob("*.yaml")):
            rel = f"{sub}/{path.name}"
            try:
                data = yaml.safe_load(path.read_text())
            except (OSError, yaml.YAMLError) as exc:
                warnings.append(f"{rel}: unreadable, its fingerprint is ignored ({type(exc).__name__})")
                continue
            if not isinstance(data, dict):
                continue
            found: dict[tuple[tuple[str, str], ...], list[str]] = {}
            if sub == "profiles" and (fields := _profile_fields(data)):
                found.setdefault(fields, []).append("profile")
            for key in ENV_KEYS:
                if isinstance(data.get(key), dict):
                    found.setdefault(_env_fields(data[key]), []).append(key)
            records = data.get("records")
            if isinstance(records, list):
                for i, rec in enumerate(records):
                    if isinstance(rec, dict) and isinstance(rec.get("env"), dict):
                        found.setdefault(_env_fields(rec["env"]), []).append(f"records[{i}]")
            for fields, where in found.items():
                if not fields:
                    continue
                what = where[0] if len(where) == 1 else f"{len(where)} records"
                baselines.append(Baseline(f"{rel} ({what})", fields))
    return baselines, warnings


# -- comparison ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One fingerprint field that differs from what was recorded."""

    kind: str
    field: str
    recorded: tuple[str, ...]
    current: str
    sources: tuple[str, ...]

    def describe(self) -> str:
        was = " / ".join(self.recorded)
        srcs = ", ".join(self.sources[:3]) + (f" (+{len(self.sources) - 3})" if len(self.sources) > 3 else "")
        return f"{self.kind}: {self.field} {was} -> {self.current} (recorded in {srcs})"


@dataclass(frozen=True)
class Comparison:
    changes: tuple[Change, ...]
    compared: int  # baselines compared with
    notes: tuple[str, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        seen = {c.kind for c in self.changes}
        return tuple(k for k in KINDS if k in seen)


def compare(current: Mapping[str, Any], baselines: Sequence[Baseline]) -> Comparison:
    """Changes of ``current`` (a fingerprint dict) against the baselines of the same GPU arch.

    A field this machine cannot know (None: no GPU, no cuBLAS) is not a change. With a GPU
    whose arch no baseline was recorded on, the GPU itself is the change.
    """
    notes: list[str] = []
    cur = {k: (None if v is None else str(v)) for k, v in current.items()}
    cur_sm = cur.get("sm")
    if not baselines:
        return Comparison((), 0, ("no fingerprint is recorded under matrices/profiles or matrices/golden",))
    if cur_sm is None:
        notes.append(
            "no GPU visible: GPU, driver and cuBLAS fields cannot be compared here; "
            "GPU tests skip and the CPU part of the slice runs"
        )
        relevant = list(baselines)
    else:
        relevant = [b for b in baselines if b.get("sm") in (None, cur_sm)]
    changes: list[Change] = []
    if cur_sm is not None and not any(b.get("sm") == cur_sm for b in baselines):
        sms = tuple(sorted({s for b in baselines if (s := b.get("sm"))}))
        changes.append(Change("gpu", "sm", sms, cur_sm, tuple(b.source for b in baselines if b.get("sm"))))
        notes.append(f"no fingerprint was recorded on {cur_sm}: everything it computes is new")
    for name, kind in FIELD_KIND.items():
        now = cur.get(name)
        if now is None:
            continue
        bad = sorted({str(v) for b in relevant if (v := b.get(name)) is not None and not readable(name, v)})
        if bad:
            notes.append(f"recorded {name} {' / '.join(repr(v) for v in bad)} is unreadable: not compared")
        differing = [b for b in relevant if (v := b.get(name)) is not None and readable(name, v) and v != now]
        if differing:
            was = tuple(sorted({str(b.get(name)) for b in differing}))
            changes.append(Change(kind, name, was, now, tuple(b.source for b in differing)))
    return Comparison(tuple(changes), len(relevant), tuple(notes))


# -- selection -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    """What the gate runs: pytest paths, mode, and why."""

    kinds: tuple[str, ...]
    paths: tuple[str, ...]
    mode: str
    reason: str
    unmatched: tuple[str, ...] = ()  # globs of the slice that matched nothing


def _expand(globs_: Iterable[str], root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    paths: list[str] = []
    unmatched: list[str] = []
    for g in globs_:
        hits = sorted(glob.glob(str(root / g)))
        if not hits:
            unmatched.append(g)
        for h in hits:
            rel = os.path.relpath(h, root)
            if rel not in paths:
                paths.append(rel)
    # drop a path already covered by a directory in the list (pytest would run it twice)
    keep = [p for p in paths if not any(p != d and p.startswith(d.rstrip("/") + os.sep) for d in paths)]
    return tuple(keep), tuple(unmatched)


def select(
    comparison: Comparison,
    pins: Pins,
    root: Path,
    *,
    mode: str = "auto",
    slice_: str = "auto",
    gpu_visible: bool,
) -> Selection:
    """The slice a change affects (union over kinds), or every suite in quick mode when nothing moved.

    ``mode`` auto: full when something moved and a GPU is here, quick otherwise (what a changed
    version can move runs on the GPU; the CPU half is the same in both modes).
    """
    if slice_ == "auto":
        kinds = comparison.kinds
    elif slice_ in ("all", "unchanged"):  # every suite (gate.unchanged), e.g. the nightly fuzz run
        kinds = ()
    else:
        kinds = tuple(k.strip() for k in slice_.split(","))
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise GateError(f"--slice {slice_!r}: {', '.join(bad)} not one of auto, all, {', '.join(KINDS)}")
    if kinds:
        globs_ = [g for k in kinds for g in pins.slices[k]]
        reason = "changed: " + ", ".join(kinds) if slice_ == "auto" else f"--slice {slice_}"
    else:
        globs_ = list(pins.unchanged)
        reason = (
            "nothing recorded to compare with" if comparison.compared == 0 else "no fingerprint field changed"
        )
        if slice_ != "auto":
            reason = f"--slice {slice_}"
    if mode == "auto":
        mode = "full" if kinds and gpu_visible else "quick"
    paths, unmatched = _expand(globs_, root)
    if not paths and kinds:  # a slice naming no existing path must not turn a change into "ran nothing"
        paths, more = _expand(pins.unchanged, root)
        unmatched += more
        reason += "; its slice matches no path, so every suite runs"
    return Selection(kinds, paths, mode, reason, unmatched)


# -- running pytest ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PytestRun:
    command: tuple[str, ...]
    returncode: int | None  # None: timed out
    wall_s: float
    junit: Path
    log: Path


def pytest_command(
    selection: Selection,
    *,
    junit: Path,
    arch: str,
    seed: str | None,
    workers: str,
    extra: Sequence[str] = (),
    sample: int = 0,
    deadline: float | None = None,
) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *selection.paths, f"--junitxml={junit}", "-p", "no:cacheprovider"]
    if sample > 0 or deadline is not None:  # a budgeted slice (fixbits/gate_budget.py)
        cmd += ["-p", "fixbits.gate_budget", f"--fixbits-sample={sample}"]
        if deadline is not None:
            cmd += [f"--fixbits-deadline={deadline:.0f}"]
    # xunit1 keeps record_property output (the drift properties) whatever the rootdir's ini says
    cmd += ["-o", "junit_family=xunit1", "--arch", arch, "--mode", selection.mode, "-rs"]
    if seed is not None:
        cmd += ["--seed", seed]
    if workers not in ("0", ""):
        import importlib.util

        if importlib.util.find_spec("xdist") is not None:
            cmd += ["-n", workers]
    return cmd + list(extra)


def run_pytest(
    cmd: Sequence[str], *, cwd: Path, junit: Path, log: Path, timeout_s: float | None
) -> PytestRun:
    """Run pytest, streaming its output to stdout and to ``log``; kill it past ``timeout_s``."""
    import threading

    start = time.monotonic()
    env = dict(os.environ)
    # the suites import fixbits from this checkout even where it is not installed (GPU runners)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    rc: int | None
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                fh.write(line)
                sys.stdout.write(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        reader.join(timeout=10)
        if rc is None:
            fh.write(f"\nfixbits gate: pytest killed after {timeout_s:.0f} s\n")
    sys.stdout.flush()
    return PytestRun(tuple(cmd), rc, time.monotonic() - start, junit, log)


# -- results: per family, speed ratios -----------------------------------------------------------


@dataclass(frozen=True)
class FamilyStat:
    """Tests of one family (the ``fixbits.family`` property, else the suite) that compared bytes."""

    family: str
    passed: int
    failed: int
    errors: int
    skipped: int

    @property
    def ran(self) -> int:
        return self.passed + self.failed

    @property
    def match_rate(self) -> float | None:
        return self.passed / self.ran if self.ran else None


@dataclass(frozen=True)
class SpeedRatio:
    """One speed ratio (>1: the bit-exact kernel is faster than the reference) and where it came from."""

    label: str
    ratio: float
    source: str


def family_of(test: str, properties: Mapping[str, str]) -> str:
    """'fixbits.family' if recorded, else the suite of 'suites.<suite>.test_x::...', else 'unit'/module."""
    fam = properties.get("fixbits.family")
    if fam:
        return fam
    module = test.split("::")[0]
    parts = module.replace("/", ".").split(".")
    if "suites" in parts and parts.index("suites") + 1 < len(parts):
        return parts[parts.index("suites") + 1]
    if "tests" in parts:
        return "unit"
    return parts[0] if parts else "?"


def family_stats(results: Sequence[Any]) -> tuple[FamilyStat, ...]:
    counts: dict[str, dict[str, int]] = {}
    for r in results:
        fam = family_of(r.test, dict(r.properties))
        c = counts.setdefault(fam, {"passed": 0, "failed": 0, "error": 0, "skipped": 0})
        c[r.outcome] = c.get(r.outcome, 0) + 1
    return tuple(
        FamilyStat(f, c["passed"], c["failed"], c["error"], c["skipped"]) for f, c in sorted(counts.items())
    )


def _float(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v == v and v > 0 else None


def _shown(path: Path) -> str:
    """A CSV as the report names it: relative to the checkout when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return path.name


def speed_ratios(results: Sequence[Any], csv_dirs: Sequence[Path]) -> tuple[SpeedRatio, ...]:
    """Ratios from JUnit properties named *speed_ratio or *_speed and from benchmark CSVs (columns 'ratio' or
    'speed*'), labelled by the CSV's kernel/family/layer/name column."""
    import csv

    out: list[SpeedRatio] = []
    for r in results:
        for name, value in r.properties:
            if name.endswith(("speed_ratio", "_speed")) and (v := _float(value)) is not None:
                func = r.test.split("::")[-1].split("[")[0]  # one group per test, its params pooled
                out.append(SpeedRatio(f"{func} ({name})", v, "junit (this run)"))
    for d in csv_dirs:
        for path in sorted(Path(d).glob("**/*.csv")) if Path(d).is_dir() else []:
            try:
                with open(path, newline="") as fh:
                    rows = list(csv.DictReader(fh))
            except (OSError, csv.Error, UnicodeDecodeError):
                continue
            if not rows:
                continue
            cols = [c for c in rows[0] if c and (c == "ratio" or c.startswith("speed"))]
            label_col = next((c for c in ("kernel", "family", "layer", "name") if c in rows[0]), None)
            for row in rows:
                for c in cols:
                    v = _float(row.get(c) or "")
                    if v is None:
                        continue
                    label = row.get(label_col, "") if label_col else path.stem
                    tag = "" if c in ("ratio", "speed") else f" ({c.removeprefix('speed_')})"
                    out.append(SpeedRatio(f"{label}{tag}", v, _shown(path)))
    return tuple(out)


# -- the outcome -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateOutcome:
    """Everything the report shows. ``exit_code`` is 0/1/2 (see the module docstring)."""

    exit_code: int
    reason: str
    started: str
    current: Mapping[str, Any]
    comparison: Comparison
    selection: Selection | None
    run: PytestRun | None
    summary: Any = None  # fixbits.report.junit.Summary
    families: tuple[FamilyStat, ...] = ()
    speeds: tuple[SpeedRatio, ...] = ()
    warnings: tuple[str, ...] = ()
    baselines: tuple[Baseline, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> str:
        return VERDICTS[self.exit_code]


def decide(run: PytestRun, summary: Any) -> tuple[int, str]:
    """Exit code and reason from pytest's return code and the JUnit summary."""
    if run.returncode is None:
        return EXIT_COULD_NOT_RUN, f"pytest did not finish within the time budget ({run.wall_s:.0f} s)"
    if run.returncode in _PYTEST_RC_MEANING and run.returncode != 1:
        return EXIT_COULD_NOT_RUN, f"{_PYTEST_RC_MEANING[run.returncode]} (exit {run.returncode})"
    if summary is None:
        return EXIT_COULD_NOT_RUN, f"pytest wrote no readable JUnit report (exit {run.returncode})"
    if summary.failed:
        return EXIT_DRIFT, f"{summary.failed} test(s) drifted"
    if summary.errors:
        return EXIT_COULD_NOT_RUN, f"{summary.errors} test(s) errored before comparing bytes, none drifted"
    if run.returncode != 0:
        return EXIT_COULD_NOT_RUN, f"pytest exited {run.returncode} without a failure in its report"
    ran = summary.passed
    if ran == 0:
        return EXIT_NO_DRIFT, f"nothing compared here: all {summary.skipped} test(s) skipped"
    return EXIT_NO_DRIFT, f"{ran} test(s) returned the recorded bytes"


# -- the command ---------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, default=Path("reports/gate"), help="report directory (default reports/gate)"
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="repository root holding suites/ and matrices/ (default: this checkout)",
    )
    parser.add_argument("--pins", type=Path, default=None, help="pins file (default ROOT/matrices/pins.yaml)")
    parser.add_argument(
        "--arch", default="auto", help="passed to pytest --arch (default auto = the visible GPU)"
    )
    parser.add_argument(
        "--mode",
        default="auto",
        choices=("auto", "quick", "full", "fuzz"),
        help="pytest --mode; auto = full when something changed and a GPU is here, else quick",
    )
    parser.add_argument(
        "--seed", default=None, help="pytest --seed: an integer or 'date' (default: the plugin's)"
    )
    parser.add_argument(
        "--slice",
        dest="slice_",
        default="auto",
        help="auto (from the changes), all (every suite), or a comma list of kinds: " + ", ".join(KINDS),
    )
    parser.add_argument(
        "-n", "--workers", default="auto", help="pytest-xdist workers (0 = none; default auto)"
    )
    parser.add_argument(
        "--timeout-s", type=float, default=None, help="kill pytest after this many seconds (exit 2)"
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="soft budget: tests not started by then skip (named in the report) and the run ends "
        "with a report; pytest is killed only at budget + 60 s (or --timeout-s)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="run N evenly spaced items of each test function of the slice, families interleaved (0: all)",
    )
    parser.add_argument(
        "--fingerprint",
        type=Path,
        default=None,
        help="YAML/JSON fingerprint to use instead of probing this machine (what-if runs)",
    )
    parser.add_argument(
        "--benchmarks",
        type=Path,
        action="append",
        default=None,
        help="directory of benchmark CSVs for the speed plot (repeatable; default OUT and ROOT/reports)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the changes and the pytest command, run nothing"
    )
    parser.add_argument(
        "--emit-matrix",
        metavar="RUN_MATRIX",
        default=None,
        help="print the GitHub Actions job matrix (JSON) for a run matrix (e.g. pr.yaml) and exit",
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: extra pytest arguments")


def _current_fingerprint(path: Path | None) -> dict[str, Any]:
    if path is None:
        from fixbits.env import fingerprint

        return fingerprint().to_dict()
    from fixbits.env import EnvFingerprint

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise GateError(f"--fingerprint {path}: unreadable ({exc})") from None
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k != "hash"}
    try:
        return EnvFingerprint.from_dict(data, where=f"--fingerprint {path}").to_dict()
    except (TypeError, ValueError) as exc:
        raise GateError(str(exc)) from None


def emit_matrix(run_matrix: str, pins: Pins, root: Path) -> dict[str, Any]:
    """The GitHub Actions ``strategy.matrix`` for a run matrix: one job per runner class (the
    fleet in pins.yaml: a pin change is gated on every class) and per cuBLAS version of the run
    matrix (NVIDIA only; a version other than 'installed' also asks for the label cublas-<v>)."""
    from fixbits.matrices import MatrixError, load_run_matrix

    candidates = [Path(run_matrix), root / run_matrix, root / "matrices" / run_matrix]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise GateError(
            f"--emit-matrix {run_matrix!r}: no such run matrix (looked in ., {root}, {root / 'matrices'})"
        )
    try:
        run = load_run_matrix(path)
    except MatrixError as exc:
        raise GateError(str(exc)) from None
    include = []
    for rc in pins.runners:
        versions = run.cublas if rc.vendor == "nvidia" else ("installed",)
        for v in versions:
            labels = list(rc.labels) + ([] if v == "installed" else [f"cublas-{v}"])
            include.append(
                {
                    "name": f"{rc.arch} ({rc.gpus or rc.vendor}) cuBLAS {v}"
                    if rc.vendor == "nvidia"
                    else f"{rc.arch} ({rc.gpus or rc.vendor})",
                    "arch": rc.arch,
                    "vendor": rc.vendor,
                    "labels": labels,
                    "cublas": v,
                    "mode": run.mode,
                }
            )
    uncovered = sorted(set(run.archs) - {rc.arch for rc in pins.runners})
    for a in uncovered:
        print(
            f"fixbits gate: {path.name} names {a}, which has no runner class in pins.yaml: not gated",
            file=sys.stderr,
        )
    return {"include": include}


def _read_summary(junit: Path) -> tuple[Any, list[Any]]:
    from fixbits.report.junit import ReportError, cases, merge, summarize

    if not junit.is_file() or junit.stat().st_size == 0:
        return None, []
    try:
        results = cases(merge([junit]))
    except ReportError:
        return None, []
    return summarize(results), results


def write_reports(outcome: GateOutcome, out: Path) -> dict[str, Path]:
    """gate.md, gate.html and gate.json under ``out``."""
    from fixbits.report import html

    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "gate.md", "html": out / "gate.html", "json": out / "gate.json"}
    paths["markdown"].write_text(html.markdown(outcome))
    paths["html"].write_text(html.page(outcome))
    paths["json"].write_text(json.dumps(html.as_json(outcome), indent=2) + "\n")
    return paths


def run(args: argparse.Namespace) -> int:
    t0 = time.time()
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    root = (args.root or REPO_ROOT).resolve()
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    extra = [a for a in (args.pytest_args or []) if a != "--"]
    try:
        pins = load_pins(args.pins or root / "matrices" / "pins.yaml")
        if args.emit_matrix:
            print(json.dumps(emit_matrix(args.emit_matrix, pins, root)))
            return 0
        current = _current_fingerprint(args.fingerprint)
    except GateError as exc:
        print(f"fixbits gate: could not run: {exc}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    except Exception as exc:  # a fingerprint probe that crashes is a broken environment
        print(
            f"fixbits gate: could not run: fingerprint failed: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return EXIT_COULD_NOT_RUN

    baselines, warnings = load_baselines(root / "matrices")
    comparison = compare(current, baselines)
    gpu_visible = current.get("sm") is not None
    try:
        selection = select(
            comparison, pins, root, mode=args.mode, slice_=args.slice_, gpu_visible=gpu_visible
        )
    except GateError as exc:
        print(f"fixbits gate: could not run: {exc}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    warnings += [f"slice glob {g!r} matched nothing" for g in selection.unmatched]

    print(f"fixbits gate: {len(baselines)} recorded fingerprint(s); {selection.reason}")
    for c in comparison.changes:
        print(f"  changed  {c.describe()}")
    for n in comparison.notes:
        print(f"  note     {n}")
    out.mkdir(parents=True, exist_ok=True)
    junit = out / "junit.xml"
    if junit.exists():
        junit.unlink()
    deadline = None
    timeout_s = args.timeout_s
    if args.budget_s is not None:
        deadline = t0 + max(args.budget_s - BUDGET_REPORT_S, 1.0)
        if timeout_s is None:
            timeout_s = args.budget_s + BUDGET_GRACE_S
    cmd = pytest_command(
        selection,
        junit=junit,
        arch=args.arch,
        seed=args.seed,
        workers=args.workers,
        extra=extra,
        sample=args.sample,
        deadline=deadline,
    )
    print(f"  slice    {' '.join(selection.paths) or '(empty)'}  mode={selection.mode}")
    if args.dry_run:
        print("  command  " + " ".join(cmd))
        return EXIT_NO_DRIFT

    outcome = GateOutcome(
        EXIT_COULD_NOT_RUN,
        "the selected slice matches no path under " + str(root),
        started=started,
        current=current,
        comparison=comparison,
        selection=selection,
        run=None,
        warnings=tuple(warnings),
        baselines=tuple(baselines),
    )
    if selection.paths:
        prun = run_pytest(cmd, cwd=root, junit=junit, log=out / "pytest.log", timeout_s=timeout_s)
        summary, results = _read_summary(junit)
        code, reason = decide(prun, summary)
        from fixbits.gate_budget import BUDGET_SKIP

        if summary is not None and (spent := dict(summary.skip_reasons).get(BUDGET_SKIP)):
            reason += f"; {spent} test(s) of the slice not started: --budget-s {args.budget_s:.0f} spent"
        csv_dirs = args.benchmarks if args.benchmarks is not None else [out, root / "reports"]
        outcome = dataclasses.replace(
            outcome,
            exit_code=code,
            reason=reason,
            run=prun,
            summary=summary,
            families=family_stats(results),
            speeds=speed_ratios(results, csv_dirs),
        )
    paths = write_reports(outcome, out)
    print(f"fixbits gate: {outcome.verdict.upper()} (exit {outcome.exit_code}): {outcome.reason}")
    print("  report   " + "  ".join(str(p) for p in (paths["html"], paths["markdown"], junit) if p.exists()))
    return outcome.exit_code
