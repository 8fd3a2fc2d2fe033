"""Speed budget (GPU only, marker perf): pinned vs free order of each corpus kernel, each mode
autotuned over its own space in one process, finalists timed in rounds of CUDA-graph replays over
rotating inputs until the ratio's spread is small (fixbits.corpus.timing, the benchmark's code).
Ratio = free time / pinned time; the floor per pair is in matrices/enforcement/budgets.yaml."""

from __future__ import annotations

import pytest

from fixbits.corpus.registry import budget, pairs
from fixbits.corpus.timing import measure_pair

pytestmark = [pytest.mark.gpu, pytest.mark.nvidia, pytest.mark.perf]


def pair_params() -> list:
    return [pytest.param(e, d, id=f"{e.name}-{d}") for e, d in pairs()]


@pytest.mark.parametrize(("entry", "dtype"), pair_params())
def test_pinned_within_budget_of_free(entry, dtype, record_property) -> None:
    res = measure_pair(entry, dtype, min_rounds=3, max_rounds=9, target_spread=0.02, slice_s=30.0)
    b = budget(entry.name, dtype)
    record_property("pinned_over_free_speed", round(res.ratio, 4))
    record_property("spread", round(res.spread, 4))
    record_property("rounds", len(res.rounds))
    record_property("budget", b)
    record_property("rewrite_only_ratio", round(res.auto_ratio, 4))
    record_property("pinned_best", res.pinned.best_config)
    record_property("free_best", res.free.best_config)
    assert not res.errors, f"{entry.name}/{dtype}: timing errors {res.errors}"
    assert res.ratio >= b, (f"{entry.name}/{dtype}: pinned/free speed {res.ratio:.3f} < budget {b} "
                            f"(spread {res.spread:.3f} over {len(res.rounds)} rounds; pinned best "
                            f"{res.pinned.best_config} {res.pinned.best_us:.2f}us, free best "
                            f"{res.free.best_config} {res.free.best_us:.2f}us)")
