"""Seeded fuzz shapes: reproducible, inside the paper's regimes, bounded when asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits import shapes

REPO = Path(__file__).resolve().parent.parent
SEEDS = st.integers(0, 2**63 - 1)


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, count=st.integers(0, 60))
def test_same_seed_same_shapes(seed: int, count: int) -> None:
    first = shapes.fuzz_shapes(seed, count)
    assert first == shapes.fuzz_shapes(seed, count), f"seed={seed}"
    assert len(first) == count
    assert shapes.fuzz_shapes(seed, count + 5)[:count] == first, f"seed={seed}: a longer draw must extend"


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS)
def test_shapes_stay_in_the_paper_regimes(seed: int) -> None:
    drawn = shapes.fuzz_shapes(seed, 70)
    for s in drawn:
        assert 1 <= s.m <= shapes.FUZZ_M_MAX and 1 <= s.n <= shapes.FUZZ_N_MAX, f"seed={seed} {s}"
        assert shapes.FUZZ_K_MIN <= s.k <= shapes.FUZZ_K_MAX, f"seed={seed} {s}"
        assert s.layer.removeprefix("fuzz:") in shapes.REGIMES and s.epilogue == "none"
    assert {s.layer for s in drawn} == {f"fuzz:{r}" for r in shapes.REGIMES}
    assert all(s.m == 1 for s in drawn if s.layer == "fuzz:gemv")
    assert all(s.k >= 16_384 for s in drawn if s.layer == "fuzz:deep_k")


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, cap=st.integers(8, 2**28))
def test_size_cap_bounds_every_operand(seed: int, cap: int) -> None:
    for s in shapes.fuzz_shapes(seed, 30, max_elements=cap):
        assert s.max_elements <= max(cap, shapes.FUZZ_K_MIN), f"seed={seed} cap={cap} {s}"


def test_different_seeds_differ_and_corners_are_reached() -> None:
    a, b = shapes.fuzz_shapes(1, 50), shapes.fuzz_shapes(2, 50)
    assert a != b
    many = shapes.fuzz_shapes(3, 2000)
    assert min(s.m for s in many) == 1 and max(s.k for s in many) > 200_000 and min(s.k for s in many) < 64
    assert max(s.m for s in many) > 50_000


def test_alignment_and_regime_selection() -> None:
    for s in shapes.fuzz_shapes(4, 40, align=16, regimes=("log_uniform", "odd")):
        assert s.n % 16 == 0 and s.k % 16 == 0
    with pytest.raises(ValueError, match="unknown regime\\(s\\) wide; known: log_uniform"):
        shapes.fuzz_shapes(1, 3, regimes=("wide",))
    with pytest.raises(ValueError, match="count must be >= 0"):
        shapes.fuzz_shapes(1, -1)


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["--fuzz", "7", "--count", "5", "--format", "csv"], "m,n,k,layer,epilogue,model,projection"),
        (["--mode", "quick"], "21 shapes"),
        (["--check"], "all          390"),
    ],
)
def test_shapes_cli(args: list[str], expect: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fixbits.cli", "shapes", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout
