"""The fixbits pytest plugin: options, fixtures, markers and GPU-aware collection.

Registered through the ``pytest11`` entry point when fixbits is installed; the repository's
root conftest.py loads it when it is not (the GPU runners use PYTHONPATH=<repo>). It decides,
once per session, what this machine can run and says so in every skip reason, so one command
(``pytest suites/ -n auto --arch sm_90``) runs the GPU gate on a runner and the CPU half of
the same suites everywhere else. It never reruns a test: a bitwise gate that retries hides
the nondeterminism it exists to catch.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fixbits import predicates
from fixbits.predicates import AMD_ARCHES, ARCHES, NVIDIA_ARCHES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from fixbits.matrices import RunMatrix
    from fixbits.testing import BitwiseDiff

ARCH_CHOICES: tuple[str, ...] = (*ARCHES, "auto")
DTYPE_CHOICES: tuple[str, ...] = ("fp16", "bf16", "fp8_e4m3", "all")
DTYPES: tuple[str, ...] = ("fp16", "bf16", "fp8_e4m3")
MODE_CHOICES: tuple[str, ...] = ("quick", "full", "fuzz")
DEFAULT_SEED = 2609_11356  # the paper's arXiv number: fixed, so two runs draw the same inputs
SUITES: tuple[str, ...] = ("reconstruction", "enforcement", "checker_soundness", "cublas_bugs")
GPU_MARKERS: tuple[str, ...] = ("gpu", "nvidia", "amd")

_MARKERS: dict[str, str] = {
    "gpu": "needs a GPU of the selected --arch; skipped with a reason elsewhere",
    "nvidia": "needs an NVIDIA GPU and its libraries",
    "amd": "needs an AMD GPU and ROCm",
    "fuzz": "seeded fuzz sweep (nightly); selected with -m fuzz or --mode fuzz",
    "slow": "long-running CPU or GPU work",
    "perf": "speed budget assertion (GPU only, ratio measured in one process)",
    "unit": "tests/: unit tests of fixbits itself",
    **{suite: f"suites/{suite}: a fixbits gate suite" for suite in SUITES},
}

_CUBLAS_VERSION = re.compile(r"^\d+(\.\d+){0,3}$")

# -- typed option parsers (argparse calls these; a UsageError names what is allowed) ---------


def _choice_parser(option: str, choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        v = value.strip().lower()
        if v not in choices:
            raise pytest.UsageError(f"{option} {value!r} is not one of: {', '.join(choices)}")
        return v

    parse.__name__ = option.lstrip("-")
    return parse


parse_arch = _choice_parser("--arch", ARCH_CHOICES)
parse_dtype = _choice_parser("--dtype", DTYPE_CHOICES)
parse_mode = _choice_parser("--mode", MODE_CHOICES)


def parse_seed(value: str) -> int:
    """An integer, or 'date' for today's UTC date as YYYYMMDD (one new seed per nightly)."""
    v = value.strip().lower()
    if v == "date":
        return int(_dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d"))
    try:
        seed = int(v, 0)
    except ValueError:
        raise pytest.UsageError(f"--seed {value!r} is not an integer or 'date'") from None
    if seed < 0:
        raise pytest.UsageError(f"--seed {value!r} must be a non-negative integer or 'date'")
    return seed


def parse_cublas(value: str) -> str:
    v = value.strip()
    if v != "installed" and not _CUBLAS_VERSION.match(v):
        raise pytest.UsageError(f"--cublas {value!r} is not a library version (e.g. 13.1.0) or 'installed'")
    return v


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fixbits", "fixbits: bitwise reproducibility gate")
    group.addoption(
        "--arch",
        type=parse_arch,
        choices=ARCH_CHOICES,
        default="auto",
        metavar="ARCH",
        help=f"target GPU architecture, one of {', '.join(ARCH_CHOICES)} (default: auto = detect)",
    )
    group.addoption(
        "--dtype",
        type=parse_dtype,
        choices=DTYPE_CHOICES,
        default="all",
        metavar="DTYPE",
        help=f"input dtype the dtype-parametrized tests run, one of {', '.join(DTYPE_CHOICES)} "
        "(default: all)",
    )
    group.addoption(
        "--cublas",
        type=parse_cublas,
        default="installed",
        metavar="VERSION",
        help="cuBLAS(Lt) version the suites expect, e.g. 13.1.0, or 'installed' (default)",
    )
    group.addoption(
        "--matrix",
        default=None,
        metavar="FILE",
        help="run matrix YAML under matrices/ (default: matrices/pr.yaml, nightly for --mode fuzz)",
    )
    group.addoption(
        "--mode",
        type=parse_mode,
        choices=MODE_CHOICES,
        default="quick",
        metavar="MODE",
        help=f"one of {', '.join(MODE_CHOICES)}: quick shrinks shape lists, full runs them "
        "all, fuzz also selects the seeded fuzz sweeps (default: quick)",
    )
    group.addoption(
        "--seed",
        type=parse_seed,
        default=DEFAULT_SEED,
        metavar="SEED",
        help=f"base seed for every drawn input: an integer or 'date' (default {DEFAULT_SEED})",
    )


# -- the options, resolved once ----------------------------------------------------------------


@dataclass(frozen=True)
class FixbitsOptions:
    """The session's fixbits options after parsing and detection."""

    arch_requested: str  # what --arch said ('auto' or an arch)
    dtypes: tuple[str, ...]
    cublas: str
    matrix_path: Path | None
    mode: str
    seed: int

    @property
    def arch_detected(self) -> str | None:
        """The visible GPU's arch, None on a CPU-only machine (asked on first use, then cached)."""
        return predicates.gpu_arch()

    @property
    def arch(self) -> str | None:
        """The arch the suites target: --arch when given, else the detected GPU (None: CPU only)."""
        return self.arch_detected if self.arch_requested == "auto" else self.arch_requested

    @property
    def dtype(self) -> str:
        """'all' or the single chosen dtype."""
        return "all" if len(self.dtypes) > 1 else self.dtypes[0]


_OPTIONS_KEY = pytest.StashKey[FixbitsOptions]()
_CRASH_KEY = pytest.StashKey[list[str]]()


def _detected_arch(config: pytest.Config) -> str | None:
    """Ask the GPU once per process, and only when something needs to know."""
    return predicates.gpu_arch()  # cached in predicates


def _resolve_matrix(config: pytest.Config, value: str | None, mode: str) -> Path | None:
    root = Path(str(config.rootpath))
    if value is None:
        default = root / "matrices" / ("nightly.yaml" if mode == "fuzz" else "pr.yaml")
        return default if default.is_file() else None
    candidates = [Path(value), root / value, root / "matrices" / value]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    available = (
        sorted(p.name for p in (root / "matrices").glob("*.yaml")) if (root / "matrices").is_dir() else []
    )
    raise pytest.UsageError(
        f"--matrix {value!r}: no such file (looked in ., {root}, {root / 'matrices'}); "
        f"available: {', '.join(available) or 'none'}"
    )


def options(config: pytest.Config) -> FixbitsOptions:
    """The session's FixbitsOptions (GPU detection happens on first access of ``arch``)."""
    if _OPTIONS_KEY not in config.stash:
        mode = config.getoption("--mode")
        dtype = config.getoption("--dtype")
        config.stash[_OPTIONS_KEY] = FixbitsOptions(
            arch_requested=config.getoption("--arch"),
            dtypes=DTYPES if dtype == "all" else (dtype,),
            cublas=config.getoption("--cublas"),
            matrix_path=_resolve_matrix(config, config.getoption("--matrix"), mode),
            mode=mode,
            seed=config.getoption("--seed"),
        )
    return config.stash[_OPTIONS_KEY]


@pytest.hookimpl(tryfirst=True)  # first: a worker owns its GPU before any plugin can open one
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        _pin_worker_gpu(config)
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[_CRASH_KEY] = []
    path = _resolve_matrix(config, config.getoption("--matrix"), config.getoption("--mode"))
    if path is not None:  # a malformed matrix stops the run before anything is collected
        from fixbits.matrices import MatrixError, load_run_matrix

        try:
            load_run_matrix(path)
        except MatrixError as exc:
            raise pytest.UsageError(f"--matrix: {exc}") from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The options, the GPU this run sees and, with a GPU, the environment it computes with."""
    o = config.getoption
    detected = _detected_arch(config)
    lines = [
        f"fixbits: arch={o('--arch')} (visible GPU: {detected or 'none'}) dtype={o('--dtype')} "
        f"cublas={o('--cublas')} mode={o('--mode')} seed={o('--seed')} matrix={o('--matrix') or 'default'}"
    ]
    if detected is not None:  # torch is imported for the GPU tests anyway; name the stack in the log
        from fixbits.env import fingerprint

        fp = fingerprint()
        libs = " ".join(f"{k}={v}" for k, v in fp.libraries())
        lines.append(f"fixbits env {fp.short_hash}: {fp.gpu_name} ({fp.sm}, {fp.sm_count} SMs) {libs}")
    return lines


# -- pytest-xdist: one GPU per worker, fuzz shapes sharded by index (fixbits/workers.py) --------

_GPUS_KEY = pytest.StashKey[Any]()
_PINNED_KEY = pytest.StashKey[str]()


def _controller_gpus(config: pytest.Config) -> Any:
    """The GPUs the controller sees (no CUDA context opened), once per session."""
    if _GPUS_KEY not in config.stash:
        from fixbits.workers import visible_gpus

        config.stash[_GPUS_KEY] = visible_gpus(os.environ)
    return config.stash[_GPUS_KEY]


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per visible GPU when suites/ is selected; else xdist's CPU count."""
    from fixbits.workers import auto_workers, selects_gpu_suites

    root = Path(str(config.rootpath))
    args = [str(a) for a in config.args]
    gpu_suites = selects_gpu_suites(args, root, Path(str(config.invocation_params.dir)))
    gpu_suites = gpu_suites or selects_gpu_suites(args, root, root)
    return auto_workers(_controller_gpus(config), gpu_suites=gpu_suites)  # type: ignore[no-any-return]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller side: every worker gets the controller's GPU list (it picks its own entry)."""
    from fixbits.workers import WORKERINPUT_KEY

    node.workerinput[WORKERINPUT_KEY] = _controller_gpus(node.config).to_workerinput()


def _pin_worker_gpu(config: pytest.Config) -> None:
    """Worker side: set CUDA/HIP_VISIBLE_DEVICES to this worker's GPU before CUDA starts."""
    import sys
    import warnings

    from fixbits.workers import WORKERINPUT_KEY, GpuSet, pin_environment, visible_gpus

    wi = config.workerinput  # type: ignore[attr-defined]
    gpus = GpuSet.from_workerinput(wi[WORKERINPUT_KEY]) if WORKERINPUT_KEY in wi else visible_gpus(os.environ)
    env = pin_environment(gpus, str(wi.get("workerid", "")))
    if not env:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        warnings.warn(
            f"fixbits: CUDA was initialised in {wi.get('workerid')} before its GPU could be pinned; "
            "this worker may share a GPU",
            stacklevel=1,
        )
    os.environ.update(env)
    config.stash[_PINNED_KEY] = env["FIXBITS_WORKER_GPU"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With fuzz shapes selected, shape i runs on worker i mod n (the rest load-balanced)."""
    markexpr = str(config.getoption("markexpr", "") or "")
    if config.getvalue("dist") != "load" or (config.getoption("--mode") != "fuzz" and "fuzz" not in markexpr):
        return None
    from fixbits.workers import _shard_scheduling

    return _shard_scheduling()(config, log)


# -- collection: suite markers, fuzz selection, GPU skips -------------------------------------


def _suite_of(item: pytest.Item, root: Path) -> str | None:
    """'reconstruction' for suites/reconstruction/..., 'unit' for tests/..., else None."""
    try:
        rel = Path(str(item.path)).resolve().relative_to(root)
    except ValueError:
        return None
    parts = rel.parts
    if len(parts) >= 3 and parts[0] == "suites":
        return parts[1]
    if len(parts) >= 2 and parts[0] == "tests":
        return "unit"
    return None


def gpu_skip_reason(item_markers: Mapping[str, Any], requested: str, detected: str | None) -> str | None:
    """Why a GPU-marked test cannot run here, or None when it can. Pure: unit-tested directly."""
    names = set(item_markers)
    if not names & set(GPU_MARKERS):
        return None
    wants_nvidia = "nvidia" in names or requested in NVIDIA_ARCHES
    wants_amd = "amd" in names or requested in AMD_ARCHES
    if detected is None:
        base = predicates.cpu_reason("GPU test").split(": ", 1)[1]
        prefix = f"--arch {requested} selected but " if requested != "auto" else ""
        return f"{prefix}{base}"
    vendor = "AMD" if detected in AMD_ARCHES or detected.startswith("gfx") else "NVIDIA"
    if requested != "auto" and requested != detected:
        return f"--arch {requested} selected but an {vendor} {detected} GPU is present"
    if "nvidia" in names and vendor != "NVIDIA":
        return f"needs an NVIDIA GPU, but an AMD {detected} GPU is present"
    if "amd" in names and vendor != "AMD":
        return f"needs an AMD GPU, but an NVIDIA {detected} GPU is present"
    if wants_nvidia and wants_amd:
        return "marked both nvidia and amd: no GPU is both"
    archs = item_markers.get("gpu")
    if archs:
        return (
            None
            if detected in archs
            else f"needs one of {', '.join(archs)}, but an {vendor} {detected} GPU is present"
        )
    return None


def _gpu_mark_archs(item: pytest.Item) -> tuple[str, ...]:
    """Archs named in @pytest.mark.gpu("sm_90", ...) or gpu(archs=[...]); empty = any."""
    archs: list[str] = []
    for m in item.iter_markers("gpu"):
        archs += [str(a) for a in m.args]
        archs += [str(a) for a in m.kwargs.get("archs", ())]
    for a in archs:
        if a not in ARCHES:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.gpu arch {a!r} is not one of {', '.join(ARCHES)}"
            )
    return tuple(archs)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add suite/unit markers first (tryfirst: before -m deselects), then drop fuzz, then skip GPU."""
    root = Path(str(config.rootpath)).resolve()
    registered = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    for item in items:
        suite = _suite_of(item, root)
        if suite is None or suite in {m.name for m in item.iter_markers()}:
            continue
        if suite not in registered:
            raise pytest.UsageError(
                f"{item.nodeid}: suites/{suite}/ has no registered marker {suite!r}; add "
                f'"{suite}: ..." to markers in [tool.pytest.ini_options] (every gate suite carries its marker)'
            )
        item.add_marker(getattr(pytest.mark, suite))

    markexpr = str(config.getoption("markexpr", "") or "")
    if config.getoption("--mode") != "fuzz" and "fuzz" not in markexpr:
        kept: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            (dropped if item.get_closest_marker("fuzz") else kept).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    gpu_items = [i for i in items if any(i.get_closest_marker(m) for m in GPU_MARKERS)]
    if not gpu_items:
        return
    requested = config.getoption("--arch")
    detected = _detected_arch(config)
    for item in gpu_items:
        markers: dict[str, Any] = {m: () for m in GPU_MARKERS if item.get_closest_marker(m)}
        if "gpu" in markers:
            markers["gpu"] = _gpu_mark_archs(item)
        reason = gpu_skip_reason(markers, requested, detected)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


# -- GPU crashes: an error with the environment attached; the run goes on ---------------------

_CRASH_PATTERN = re.compile(
    r"CUDA error|CUDA driver error|HIP error|hipError|cudaError|CUBLAS_STATUS|illegal memory access|"
    r"device-side assert|unspecified launch failure|out of memory|CUDA_ERROR",
    re.IGNORECASE,
)


def is_gpu_crash(exc: BaseException, *, gpu_test: bool) -> bool:
    """An exception that says the device (not the arithmetic) failed."""
    if isinstance(
        exc, AssertionError | pytest.skip.Exception | pytest.fail.Exception | pytest.xfail.Exception
    ):
        return False
    if type(exc).__name__ in ("OutOfMemoryError", "AcceleratorError", "CudaAPIError"):
        return True
    return gpu_test or bool(_CRASH_PATTERN.search(f"{type(exc).__name__}: {exc}"))


def _is_gpu_item(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in GPU_MARKERS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if call.when != "call" or call.excinfo is None or not report.failed:
        return report
    exc = call.excinfo.value
    if not is_gpu_crash(exc, gpu_test=_is_gpu_item(item)):
        if _is_gpu_item(item) or item.stash.get(_DRIFT_USED, False):
            _attach_env(item, report)
        return report
    crashes = item.config.stash.get(_CRASH_KEY, [])
    crashes.append(item.nodeid)
    crash = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    report.fixbits_crash = crash  # serialised by xdist with the report; read by pytest_report_teststatus
    item.user_properties.append(("fixbits.crash", crash))
    _attach_env(item, report)
    return report


def _attach_env(item: pytest.Item, report: pytest.TestReport) -> None:
    from fixbits.env import fingerprint

    try:
        fp = fingerprint()
    except Exception as exc:  # the fingerprint must never mask the failure it annotates
        report.sections.append(("fixbits environment", f"fingerprint unavailable: {exc!r}"))
        return
    report.sections.append(("fixbits environment", f"hash {fp.short_hash}\n{fp.to_yaml()}"))
    if not any(k == "fixbits.env_hash" for k, _ in item.user_properties):
        item.user_properties.append(("fixbits.env_hash", fp.short_hash))


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A GPU crash is an error (infrastructure), not a failure (a bitwise verdict)."""
    if getattr(report, "fixbits_crash", None) and report.when == "call" and report.failed:
        return "error", "E", ("ERROR", {"red": True})  # type: ignore[return-value]
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    """After a crash in this process, skip GPU tests if the device context is gone."""
    if pinned := item.config.stash.get(_PINNED_KEY, None):  # which worker and GPU ran it, in the JUnit
        item.user_properties.append(("fixbits.worker", str(item.config.workerinput["workerid"])))  # type: ignore[attr-defined]
        item.user_properties.append(("fixbits.gpu", pinned))
    crashes = item.config.stash.get(_CRASH_KEY, [])
    if not crashes or not _is_gpu_item(item):
        return
    try:
        import torch

        torch.cuda.synchronize()
    except Exception as exc:
        pytest.skip(
            f"the GPU context of this worker was lost after a crash in {crashes[0]} ({type(exc).__name__})"
        )


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fixbits_options(pytestconfig: pytest.Config) -> FixbitsOptions:
    """The parsed fixbits options (frozen)."""
    return options(pytestconfig)


@pytest.fixture(scope="session")
def seed(fixbits_options: FixbitsOptions) -> int:
    """The session seed (--seed); put it in every assertion message."""
    return fixbits_options.seed


@pytest.fixture(scope="session")
def arch(fixbits_options: FixbitsOptions) -> str | None:
    """The target arch: --arch, or the detected GPU's; None on a CPU-only machine with --arch auto."""
    return fixbits_options.arch


@pytest.fixture(scope="session")
def mode(fixbits_options: FixbitsOptions) -> str:
    return fixbits_options.mode


@pytest.fixture(scope="session")
def matrix(fixbits_options: FixbitsOptions) -> RunMatrix:
    """The run matrix (--matrix) restricted to --arch and --dtype."""
    from fixbits.matrices import load_run_matrix

    if fixbits_options.matrix_path is None:
        pytest.skip("no run matrix: pass --matrix FILE (no matrices/pr.yaml under the rootdir)")
    m = load_run_matrix(fixbits_options.matrix_path)
    return m.restrict(arch=fixbits_options.arch, dtypes=fixbits_options.dtypes)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test asking for ``dtype`` runs once per selected --dtype (unless it parametrizes it)."""
    if "dtype" not in metafunc.fixturenames:
        return
    if "dtype" in getattr(metafunc, "_arg2fixturedefs", {}):  # a suite's own `dtype` fixture wins
        return
    for m in metafunc.definition.iter_markers("parametrize"):
        names = m.args[0] if m.args else m.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "dtype" in names:
            return
    metafunc.parametrize("dtype", list(options(metafunc.config).dtypes), scope="session")


_DRIFT_USED = pytest.StashKey[bool]()


class Drift:
    """Bitwise assert that also records what the JUnit report needs to locate a drift.

    ``drift.context(shape=..., dtype=..., desc=...)`` sets what is recorded; ``drift.assert_equal``
    compares bits, records shape, dtype, descriptor hash, library versions and the first
    difference as JUnit properties, and raises the drift report on a mismatch.
    """

    def __init__(self, item: pytest.Item, record: Callable[[str, object], None], seed: int) -> None:
        self._item = item
        self._record = record
        self._seed = seed
        self._ctx: dict[str, Any] = {}
        item.stash[_DRIFT_USED] = True

    def context(
        self,
        *,
        shape: tuple[int, ...] | None = None,
        dtype: str | None = None,
        desc: Any = None,
        **extra: Any,
    ) -> None:
        if shape is not None:
            self._ctx["shape"] = tuple(int(s) for s in shape)
        if dtype is not None:
            self._ctx["dtype"] = str(dtype)
        if desc is not None:
            self._ctx["desc_hash"] = desc if isinstance(desc, str) else desc.short_hash
        self._ctx.update(extra)

    def assert_equal(self, actual: Any, expected: Any, **context: Any) -> BitwiseDiff:
        """Raise AssertionError (with the drift report) unless the bytes are equal; else the diff."""
        __tracebackhide__ = True
        from fixbits.env import fingerprint
        from fixbits.testing import DriftRecord, compare_bits, format_context

        self.context(**{k: context.pop(k) for k in ("shape", "dtype", "desc") if k in context})
        self._ctx.update(context)
        try:
            diff = compare_bits(actual, expected)
        except (TypeError, ValueError) as exc:
            raise AssertionError(f"{exc} (seed={self._seed})") from None
        fp = fingerprint()
        extra = {k: v for k, v in self._ctx.items() if k not in ("shape", "dtype", "desc_hash")}
        rec = DriftRecord(
            test=self._item.nodeid,
            shape=self._ctx.get("shape"),
            dtype=self._ctx.get("dtype", diff.dtype),
            desc_hash=self._ctx.get("desc_hash"),
            libraries=fp.libraries(),
            env_hash=fp.short_hash,
            diff=diff,
            extra=(("seed", str(self._seed)), *((k, str(v)) for k, v in extra.items())),
        )
        recorded = {k for k, _ in self._item.user_properties}
        for name, value in rec.to_properties():
            if name not in recorded or name.endswith(("n_diff", "first_diff", "ulp_max")):
                self._record(name, value)
        if not diff.equal:
            ctx = {
                **self._ctx,
                "seed": self._seed,
                "libraries": " ".join(f"{k}={v}" for k, v in rec.libraries),
            }
            raise AssertionError(diff.message(format_context(ctx)))
        return diff


@pytest.fixture
def drift(request: pytest.FixtureRequest, record_property: Callable[[str, object], None], seed: int) -> Drift:
    """A Drift recorder for this test (see ``Drift``)."""
    return Drift(request.node, record_property, seed)
