"""Gate: cuBLASLt loses exactly the K tail the split-K span rule predicts, on every installed
library version, at the shapes recorded for this (arch, library version).

The span rule (fixbits.bugs.splitk_tail) contains the paper's four-clause condition and also
predicts the larger losses measured past 64 splits; the paper's condition is scored alongside.

A library fix (a recorded loss comes back whole) or a new loss fails the gate and says which:
either way the arch profiles and the bit-exact kernels that reproduce the loss need a look.
The fuzz sweep (``--mode fuzz``) measures both predictors over thousands of shapes, with and
without the ALGO_ID clause, and records TP/FP/FN/TN as JUnit properties; the span rule is gated.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from fixbits.bugs.splitk_tail import (
    GATED_VARIANT,
    VARIANTS,
    CaseFile,
    TailCase,
    load_case_files,
    load_k_steps,
    load_sweep,
    ones_lt,
    ones_torch,
    run_sweep,
    summary_table,
    tail_condition,
)
from fixbits.cublas.lib import CublasLtLibrary, discover, distinct_versions

pytestmark = [pytest.mark.gpu, pytest.mark.nvidia, pytest.mark.cublas_bugs]

_DOCS = load_case_files()
_CASES = [(doc, case) for doc in _DOCS for case in doc.cases]


def _libraries(config: pytest.Config) -> list[Any]:
    """One param per installed cuBLASLt version (filtered by --cublas), or one skipping param."""
    wanted = config.getoption("--cublas", default="installed")
    libs = [x for x in distinct_versions(discover()) if wanted in ("installed", x.version_str)]
    if libs:
        return [pytest.param(x, id=f"cublasLt-{x.version_str}") for x in libs]
    why = "no cuBLASLt library found" if wanted == "installed" else f"cuBLASLt {wanted} is not installed"
    return [pytest.param(None, id="no-cublaslt", marks=pytest.mark.skip(reason=why))]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "library" in metafunc.fixturenames:
        metafunc.parametrize("library", _libraries(metafunc.config), scope="module")
    if "doc_case" in metafunc.fixturenames:
        metafunc.parametrize(
            "doc_case",
            _CASES,
            ids=[f"{d.arch}-{d.library_version}-{c.shape}-{c.in_dtype}" for d, c in _CASES],
        )


@pytest.fixture(scope="module")
def lt(library: CublasLtLibrary) -> Any:
    from fixbits.cublas.lt import CublasLt

    with CublasLt(library.path) as handle:
        yield handle


def _applies(doc: CaseFile, arch: str | None, library: CublasLtLibrary) -> None:
    if arch is None:
        pytest.skip("no GPU arch (CPU-only machine)")
    if not doc.matches(arch, library.version_str):
        pytest.skip(
            f"recorded for {doc.arch} + cuBLASLt {doc.library_version} ({doc.source}); "
            f"this run is {arch} + {library.version_str}"
        )


def _verdict(case: TailCase, observed: int | None, predicted: int) -> str:
    """'ok', or what moved: a fix, a new loss, a changed loss, or a wrong prediction."""
    if observed is None:
        return "the output was not uniform (see the properties)"
    if case.expected_lost and observed == 0:
        return f"FIXED: the library now sums all of K={case.k} where it lost {case.expected_lost}"
    if not case.expected_lost and observed:
        return f"NEW LOSS: the library now loses {observed} terms where it summed all of K={case.k}"
    if observed != case.expected_lost:
        return f"CHANGED: the library now loses {observed} terms, recorded {case.expected_lost}"
    if observed != predicted:
        return f"the span rule predicts {predicted} but the library loses {observed}"
    return "ok"


def test_loss_is_exactly_predicted(
    library: CublasLtLibrary,
    lt: Any,
    doc_case: tuple[CaseFile, TailCase],
    arch: str | None,
    record_property: Any,
) -> None:
    doc, case = doc_case
    _applies(doc, arch, library)
    assert arch is not None
    answer = lt.heuristic(case.m, case.n, case.k, case.in_dtype, "fp32", workspace_bytes=doc.workspace_bytes)
    ks = load_k_steps()
    pred = tail_condition(
        case.k,
        ks.lookup(arch, case.in_dtype, answer.tile_id),
        answer.splitk_num,
        answer.algo_id,
        algo_ids=ks.condition_algo_ids,
    )
    res = ones_lt(lt, case.m, case.n, case.k, case.in_dtype, workspace_bytes=doc.workspace_bytes)
    observed = res.lost(case.k)
    drifted = case.heuristic_mismatch(answer)
    for key, value in (
        ("shape", case.shape),
        ("in_dtype", case.in_dtype),
        ("library", library.path),
        ("cublaslt_version", library.version_str),
        ("heuristic", answer.key_str()),
        ("heuristic_drift", "; ".join(drifted) or "none"),
        ("returned", res.value),
        ("observed_lost", observed),
        ("predicted_lost", pred.lost_span),
        ("paper_predicted_lost", pred.lost),
        ("recorded_lost", case.expected_lost),
    ):
        record_property(f"splitk_tail.{key}", value)
    verdict = _verdict(case, observed, pred.lost_span)
    assert verdict == "ok", (
        f"{case.shape} {case.in_dtype} on {arch} + cuBLASLt {library.version_str}: {verdict}. "
        f"Returned {res.value:g} (min {res.min:g}, max {res.max:g}); {pred.explain()}; "
        f"heuristic {answer.to_dict()}{'; heuristic changed: ' + '; '.join(drifted) if drifted else ''}; "
        f"recorded in {doc.where}"
    )


def test_zero_workspace_stays_whole(
    library: CublasLtLibrary, lt: Any, doc_case: tuple[CaseFile, TailCase], arch: str | None
) -> None:
    """Without a workspace cuBLASLt cannot split K, so the losing shapes come back whole."""
    doc, case = doc_case
    _applies(doc, arch, library)
    if not case.expected_lost:
        pytest.skip("the control is for shapes recorded as losing")
    res = ones_lt(lt, case.m, case.n, case.k, case.in_dtype, workspace_bytes=0)
    assert res.lost(case.k) == 0, (
        f"{case.shape} {case.in_dtype}: zero-workspace control returned {res.value:g}, K={case.k}"
    )


@pytest.mark.parametrize(
    "torch_case",
    [(d, c) for d, c in _CASES if c.torch_mm_out_fp32_lost is not None or c.torch_mm_fp16_value is not None],
    ids=lambda dc: f"{dc[0].arch}-{dc[0].library_version}-{dc[1].shape}",
)
def test_torch_mm_matches_record(
    torch_case: tuple[CaseFile, TailCase], arch: str | None, record_property: Any
) -> None:
    """torch.mm reaches the same defect through its own cuBLASLt (FINDINGS.md): the recorded
    returns must hold for the library torch loaded."""
    from fixbits.cublas.lib import version_string
    from fixbits.cublas.lt import CublasLt

    doc, case = torch_case
    with CublasLt() as torch_lt:
        version = version_string(torch_lt.version)
    if arch is None or not doc.matches(arch, version):
        pytest.skip(
            f"recorded for {doc.arch} + cuBLASLt {doc.library_version}; torch here uses {version} on {arch}"
        )
    if case.torch_mm_out_fp32_lost is not None:
        r = ones_torch(case.m, case.n, case.k, case.in_dtype, "mm_out_fp32")
        record_property("splitk_tail.torch_mm_out_fp32", r.value)
        assert r.lost(case.k) == case.torch_mm_out_fp32_lost, (
            f"torch.mm(out_dtype=float32) {case.shape}: returned {r.value:g}, recorded loss {case.torch_mm_out_fp32_lost}"
        )
    if case.torch_mm_fp16_value is not None:
        r = ones_torch(case.m, case.n, case.k, case.in_dtype, "mm")
        record_property("splitk_tail.torch_mm_value", r.value)
        assert r.uniform and r.value == case.torch_mm_fp16_value, (
            f"torch.mm {case.shape} {case.in_dtype}: returned {r.value:g} (min {r.min:g} max {r.max:g}), "
            f"recorded {case.torch_mm_fp16_value:g}"
        )


@pytest.mark.fuzz
def test_condition_over_a_sweep(
    library: CublasLtLibrary,
    lt: Any,
    arch: str | None,
    seed: int,
    mode: str,
    record_property: Any,
    request: pytest.FixtureRequest,
) -> None:
    """Seeded sweep: the span rule must predict every loss, with no false positive and no loss of
    another size; the paper's condition and both rules without ALGO_ID are measured, not gated."""
    from fixbits.bugs.splitk_tail import OnesPool

    if arch is None:
        pytest.skip("no GPU arch (CPU-only machine)")
    spec = load_sweep(quick=mode != "full")
    ks = load_k_steps()
    pool = OnesPool()
    shapes = [(m, n, k, dt) for (m, n, k) in spec.shapes() for dt in spec.in_dtypes]

    def observe(m: int, n: int, k: int, dt: str) -> int:
        r = ones_lt(lt, m, n, k, dt, workspace_bytes=32 << 20, pool=pool)
        lost = r.lost(k)
        if lost is None:
            raise RuntimeError(f"non-uniform output: min {r.min} max {r.max}")
        return lost

    res = run_sweep(
        shapes,
        lambda m, n, k, dt: lt.heuristic(m, n, k, dt, "fp32"),
        observe,
        lambda dt, ans: ks.lookup(arch, dt, ans.tile_id),
        seed=seed,
        clock=time.monotonic,
        deadline=time.monotonic() + spec.budget_s,
        algo_ids=ks.condition_algo_ids,
    )
    table = summary_table(res, spec.in_dtypes)
    for variant in VARIANTS:
        for key, value in res.confusion(variant).as_dict().items():
            record_property(f"splitk_tail.sweep.{variant}.{key}", value)
    for key, value in (
        ("queried", res.queried),
        ("ran", res.ran),
        ("losses", len(res.losses)),
        ("heuristic_errors", res.heuristic_errors),
        ("run_errors", res.run_errors),
        ("out_of_time", res.out_of_time),
        ("seed", seed),
        ("cublaslt_version", library.version_str),
    ):
        record_property(f"splitk_tail.sweep.{key}", value)
    record_property("splitk_tail.sweep.table", table)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"\nsplit-K tail sweep, {arch} + cuBLASLt {library.version_str} (seed {seed}):\n{table}"
        )
    bad = res.mispredicted(GATED_VARIANT)
    assert res.ran > 0, f"the sweep ran no GEMM (seed {seed}; {res.run_errors} run errors)"
    assert not bad, (
        f"the {GATED_VARIANT} rule mispredicts {len(bad)} of {res.ran} shapes (seed {seed}), first: "
        + "; ".join(
            f"{r.m}x{r.n}x{r.k} {r.in_dtype} answer {r.answer} predicted {r.prediction(GATED_VARIANT)} "
            f"observed {r.observed}"
            for r in bad[:10]
        )
        + f"\n{table}"
    )
