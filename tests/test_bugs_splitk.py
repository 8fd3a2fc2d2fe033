"""The split-K tail condition on the recorded cases, its data files and the sweep bookkeeping."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.bugs.splitk_tail import (
    BugDataError,
    Confusion,
    expected_loss,
    load_case_files,
    load_k_steps,
    load_sweep,
    parse_case_file,
    parse_k_steps,
    parse_sweep,
    run_sweep,
    summary_table,
    tail_condition,
)

pytestmark = pytest.mark.unit


# FINDINGS.md (H200, cuBLAS 13.1.0) and the paper's App. D: (K, s, ALGO_ID, lost, lost without ALGO clause)
CASES = [
    (8648, 6, 66, 0, 0),  # 1x8x8648 whole: 135 mod 6 = 3
    (11528, 9, 66, 8, 8),  # 1x8 and 32x32/64x64/128x128 at 11528: q=180, t=8
    (57608, 45, 66, 8, 8),  # q=900
    (57616, 45, 66, 16, 16),  # t=16 < 45
    (1032, 1, 13, 0, 0),  # H200: ALGO 13, no split
    (1032, 16, 23, 0, 8),  # H100 (paper): the arithmetic holds, ALGO 23 (CUTLASS) loses nothing
    (8648, 9, 66, 8, 8),  # GB300 13.1 (paper Fig. 8): 9 CTAs x 960 = 8640
    (8640, 9, 66, 0, 0),  # t = 0: nothing to lose
    (8712, 9, 66, 0, 0),  # q=136 not a multiple of 9
    (576 + 40, 9, 66, 0, 0),  # q=9, t=40 >= s
]


# Measured on the H200 (cuBLASLt 13.1.0, cublas_probe sweep): splits past 64 lose more than
# K mod 64, which the span rule predicts and the paper's condition does not.
# (K, s, observed loss)
BEYOND_PAPER = [
    (114008, 89, 88),
    (223008, 129, 96),
    (190008, 129, 120),
    (262008, 132, 120),
    (129376, 101, 96),
    (256008, 129, 72),
]


@pytest.mark.parametrize("k,s,observed", BEYOND_PAPER)
def test_span_rule_on_losses_the_paper_misses(k: int, s: int, observed: int) -> None:
    p = tail_condition(k, 64, s, 66)
    assert p.lost == 0 and p.lost_span == observed, p.explain()
    assert observed == k - s * (k // s) and (k // s) % 64 == 0


@pytest.mark.parametrize("k,s,algo,lost,lost_no_algo", CASES)
def test_span_rule_agrees_with_the_paper_on_its_cases(
    k: int, s: int, algo: int, lost: int, lost_no_algo: int
) -> None:
    p = tail_condition(k, 64, s, algo)
    assert (p.lost_span, p.lost_span_without_algo) == (lost, lost_no_algo), p.explain()


@pytest.mark.parametrize("k,s,algo,lost,lost_no_algo", CASES)
def test_condition_on_recorded_cases(k: int, s: int, algo: int, lost: int, lost_no_algo: int) -> None:
    p = tail_condition(k, 64, s, algo)
    assert (p.lost, p.lost_without_algo) == (lost, lost_no_algo), p.explain()

    @dataclass(frozen=True)
    class A:
        algo_id: int
        splitk_num: int

    assert expected_loss(A(algo, s), k, 64) == lost
    assert expected_loss(A(algo, s), k, 64, require_algo_id=False) == lost_no_algo


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 400_000),
    st.sampled_from([16, 32, 64, 128]),
    st.integers(0, 128),
    st.sampled_from([66, 13, 23, 24]),
)
def test_condition_properties(k: int, b: int, s: int, algo: int) -> None:
    p = tail_condition(k, b, s, algo)
    assert p.lost in (0, k % b) and p.lost_without_algo in (0, k % b)
    assert p.lost <= p.lost_without_algo
    if s <= 1 or k % b == 0:
        assert p.lost_without_algo == 0
    if p.lost:  # the s ranges of whole steps end exactly at K - t
        assert s * (p.q // s) * b == k - p.lost
    # the span rule contains the paper's condition, and its loss is what s parts of floor(K/s) leave
    assert p.lost_span_without_algo in (0, k % (b * s) if s else 0)
    if p.lost_without_algo:
        assert p.lost_span_without_algo == p.lost_without_algo
    if p.lost_span_without_algo:
        assert (k // s) % b == 0 and k - s * (k // s) == p.lost_span_without_algo
    if s and s <= b and p.lost_span_without_algo:
        assert p.lost_without_algo == p.lost_span_without_algo  # the rules differ only past s = b


def test_condition_rejects_bad_input() -> None:
    for args in ((0, 64, 9), (100, 0, 9), (100, 64, -1)):
        with pytest.raises(ValueError):
            tail_condition(*args)


def test_recorded_files_agree_with_the_condition() -> None:
    """Every case with a recorded ALGO_ID and SPLITK_NUM must lose exactly what the condition says."""
    ks = load_k_steps()
    checked = 0
    for doc in load_case_files():
        for c in doc.cases:
            h = dict(c.heuristic)
            if "algo_id" not in h or "splitk_num" not in h:
                continue
            p = tail_condition(
                c.k, ks.lookup(doc.arch, c.in_dtype, h.get("tile_id")), h["splitk_num"], h["algo_id"]
            )
            assert p.lost_span == c.expected_lost, (
                f"{doc.where} {c.shape}: {p.explain()} vs recorded {c.expected_lost}"
            )
            checked += 1
    assert checked >= 8


def test_case_files_load_and_match() -> None:
    docs = load_case_files()
    h200 = [d for d in docs if d.matches("sm_90", "13.1.0")]
    assert len(h200) >= 1 and sum(len(d.cases) for d in h200) >= 8
    assert [d.library_version for d in docs if d.matches("sm_103", "13.1.7")] == ["13.1.*"]
    assert not [d for d in docs if d.matches("sm_80", "13.1.0")]
    for d in docs:
        for c in d.cases:
            assert 0 <= c.expected_lost < c.k and c.in_dtype in ("fp16", "bf16")


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d["cases"][0].update({"k": -3}), "cases[0].k"),
        (lambda d: d["cases"][1].update({"in_dtype": "fp64"}), "cases[1].in_dtype"),
        (lambda d: d["cases"][0].update({"colour": 1}), "cases[0]: unknown key(s) colour"),
        (lambda d: d["cases"][0].update({"heuristic": {"algo": 66}}), "cases[0].heuristic"),
        (lambda d: d.pop("arch"), "arch is missing"),
        (lambda d: d.update({"library": "rocblas"}), "library='rocblas'"),
        (lambda d: d["cases"][0].update({"expected_lost": 99999}), "cases[0].expected_lost"),
    ],
)
def test_bad_case_file_names_the_key(mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    path = Path(__file__).resolve().parents[1] / "matrices" / "cublas_bugs" / "sm_90-cublaslt-13.1.0.yaml"
    doc = yaml.safe_load(path.read_text())
    mutate(doc)
    with pytest.raises(BugDataError) as err:
        parse_case_file(doc, "x.yaml")
    assert needle in str(err.value) and "x.yaml" in str(err.value), str(err.value)


def test_k_steps() -> None:
    ks = load_k_steps()
    assert ks.lookup("sm_90", "fp16") == 64 and ks.condition_algo_ids == (66,)
    with pytest.raises(KeyError, match="sm_80"):
        ks.lookup("sm_80", "fp16")
    over = parse_k_steps(
        {"k_steps": [{"arch": "sm_90", "in_dtype": "fp16", "k_step": 64, "tile_ids": {20: 128}}]}
    )
    assert over.lookup("sm_90", "fp16", 20) == 128 and over.lookup("sm_90", "fp16", 10) == 64
    with pytest.raises(BugDataError, match="k_steps\\[0\\].k_step"):
        parse_k_steps({"k_steps": [{"arch": "sm_90", "in_dtype": "fp16", "k_step": 0}]})


def test_sweep_spec() -> None:
    full, quick = load_sweep(), load_sweep(quick=True)
    assert len(full.shapes()) > len(quick.shapes()) > 20_000
    assert full.shapes() == load_sweep().shapes()  # seeded
    m_max, n_max, k_max, mult = full.random_limits
    for m, n, k in full.random_shapes():
        assert 1 <= m <= m_max and 1 <= n <= n_max and k % mult == 0 and mult <= k <= k_max
    assert quick.k_deep is None and full.k_deep is not None
    deep = full.deep_random_ks(1, 8)
    assert len(deep) > 300 and all(k % 8 == 0 and 70008 <= k < 300000 for k in deep)
    assert deep == load_sweep().deep_random_ks(1, 8) and deep != full.deep_random_ks(32, 32)
    with pytest.raises(BugDataError, match="mn"):
        parse_sweep(
            {"seed": 1, "mn": [[1]], "k_grid": {"start": 8, "stop": 16, "step": 8}, "others_per_mn": 1}
        )
    with pytest.raises(BugDataError, match="k_grid"):
        parse_sweep(
            {"seed": 1, "mn": [[1, 8]], "k_grid": {"start": 80, "stop": 16, "step": 8}, "others_per_mn": 1}
        )


def test_confusion() -> None:
    c = Confusion()
    for pred, obs in ((8, 8), (8, 0), (0, 8), (0, 0), (8, 16), (0, 0)):
        c = c.add(pred, obs)
    assert c.as_dict() == {"tp": 2, "fp": 1, "fn": 1, "tn": 2, "wrong_amount": 1}
    assert c.total == 6 and not c.exact
    assert Confusion(tp=3, tn=4).exact


# --- the sweep loop with a fake black box -----------------------------------------------------


@dataclass(frozen=True)
class FakeAnswer:
    algo_id: int
    splitk_num: int
    tile_id: int = 10

    def key(self) -> tuple[int, ...]:
        return (self.algo_id, self.tile_id, self.splitk_num, 0, 0, 0, 0)


def fake_heuristic(m: int, n: int, k: int, dt: str) -> FakeAnswer:
    """A made-up cost model: splits grow with K, small N lands on a non-nvjet algorithm."""
    if k == 4242:
        raise RuntimeError("no algorithm")
    return FakeAnswer(66 if n >= 8 else 23, max(1, min(160, k // 1280)))


def fake_library(extra_loss: set[tuple[int, int, int]], fixed: set[tuple[int, int, int]]):  # type: ignore[no-untyped-def]
    def observe(m: int, n: int, k: int, dt: str) -> int:
        if (m, n, k) in extra_loss:
            return 8
        if (m, n, k) in fixed:
            return 0
        ans = fake_heuristic(m, n, k, dt)
        return tail_condition(k, 64, ans.splitk_num, ans.algo_id).lost_span

    return observe


class FakeClock:
    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


SHAPES = [
    (m, n, k, dt)
    for (m, n), k, dt in itertools.product(
        [(1, 8), (1, 2), (32, 32)], [*range(8, 70_000, 8), *range(80_008, 300_000, 1000)], ["fp16", "bf16"]
    )
]


def test_sweep_exact_on_a_library_that_has_exactly_the_bug() -> None:
    res = run_sweep(
        SHAPES + [(1, 8, 4242, "fp16")],
        fake_heuristic,
        fake_library(set(), set()),
        lambda dt, a: 64,
        seed=3,
        clock=FakeClock(0.0),
        deadline=1.0,
        max_others=500,
    )
    span, without = res.confusion("span"), res.confusion("span_no_algo")
    assert span.exact and span.tp > 0 and span.tn > 0, span
    paper = res.confusion("paper")
    assert paper.fp == 0 and paper.fn > 0, paper  # splits past 64 (K > 81920 here) lose more than K mod 64
    assert not res.mispredicted("span") and res.mispredicted("paper")
    assert without.fp > 0 and without.fn == 0, (
        without
    )  # 1x2 shapes: arithmetic holds, ALGO 23 keeps them whole
    assert res.heuristic_errors == 1 and res.queried == len(SHAPES) + 1 and not res.out_of_time
    assert res.ran == res.flagged + 500
    table = summary_table(res, ("fp16", "bf16"))
    assert "span_no_algo" in table and "paper" in table and len(table.splitlines()) == 1 + 3 * 4


def test_sweep_reports_a_new_loss_and_a_fix() -> None:
    flagged = [
        s
        for s in SHAPES
        if s[1] == 8 and tail_condition(s[2], 64, fake_heuristic(*s).splitk_num, 66).lost_span
    ]
    fixed = {flagged[0][:3]}
    new = {(32, 32, 6400 + 16)}  # s = 10, K mod 640 = 16 >= s: both rules say whole
    res = run_sweep(
        [s for s in SHAPES if s[3] == "fp16"],
        fake_heuristic,
        fake_library(new, fixed),
        lambda dt, a: 64,
        seed=3,
        clock=FakeClock(0.0),
        deadline=1.0,
    )
    c = res.confusion("span")
    assert (c.fp, c.fn) == (1, 1), c


def test_sweep_respects_the_deadline_and_records_failures() -> None:
    def broken(m: int, n: int, k: int, dt: str) -> int:
        raise RuntimeError("CUDA error")

    res = run_sweep(
        SHAPES[:2000], fake_heuristic, broken, lambda dt, a: 64, seed=1, clock=FakeClock(1.0), deadline=1500.0
    )
    assert res.out_of_time and res.queried < 2000
    assert res.run_errors > 0 and res.ran == 0
    assert all("CUDA error" in r.error for r in res.records if r.error and r.error.startswith("run"))


@pytest.mark.parametrize("k,s", [(11528, 9), (57616, 45), (8648, 9), (34 * 64 + 8, 17)])
def test_tail_dropped_descriptor_replays_the_loss(k: int, s: int) -> None:
    """The emulator run on the losing launch's descriptor returns K - t, like the GPU does."""
    import numpy as np

    from fixbits.bugs.splitk_tail import tail_dropped_desc
    from fixbits.emulate import emulate

    pred = tail_condition(k, 64, s, 66)
    assert pred.lost, pred.explain()
    desc = tail_dropped_desc(pred, "fp16")
    got = emulate(desc, np.ones((1, k), np.float16), np.ones((k, 8), np.float16))
    assert got.dtype == np.float32 and (got == np.float32(k - pred.lost)).all(), f"{pred.explain()}: {got}"
    with pytest.raises(ValueError, match="no tail"):
        tail_dropped_desc(tail_condition(8648, 64, 6, 66), "fp16")


def test_fold_sweep_csv(tmp_path: Path) -> None:
    from fixbits.bugs.fold import fold

    csv_path = tmp_path / "splitk_sweep.csv"
    lines = [
        "m,n,k,in_dtype,algo_id,tile_id,splitk_num,reduction_scheme,k_step,predicted,predicted_without_algo,observed,error"
    ]
    lines += [
        "1,8,11528,fp16,66,10,9,2,64,8,8,8,",
        "32,32,11528,fp16,66,13,9,0,64,8,8,8,",
        "64,64,11528,fp16,66,13,9,0,64,8,8,8,",  # same answer and size as 32x32: not picked again
        "1,2,1032,fp16,23,0,16,0,64,0,8,0,",
        "1,8,8648,fp16,66,10,6,0,64,0,0,0,",
        "1,8,9000,fp16,66,10,6,0,64,0,0,,",  # not run
        "1,8,4242,fp16,,,,,,0,0,,heuristic: RuntimeError",
    ]
    csv_path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "sm_90-cublaslt-13.1.0-sweep.yaml"
    assert fold(csv_path, out, arch="sm_90", version="13.1.0", source="test") == 4
    doc = parse_case_file(yaml.safe_load(out.read_text()), str(out))
    assert [(c.shape, c.expected_lost) for c in doc.cases] == [
        ("1x8x11528", 8),
        ("32x32x11528", 8),
        ("1x2x1032", 0),
        ("1x8x8648", 0),
    ]
    assert dict(doc.cases[2].heuristic)["algo_id"] == 23
