"""Speed budget (GPU only, marker perf): pinned vs free order of each corpus kernel, both
autotuned over the same config space in one process, medians of CUDA-graph replays over rotating
inputs, repeated until the ratio's spread is small. Ratio = free time / pinned time."""

from __future__ import annotations

import pytest

from fixbits.corpus.registry import budget, pairs
from fixbits.corpus.timing import measure_pair

pytestmark = [pytest.mark.gpu, pytest.mark.nvidia, pytest.mark.perf]

MAX_ROUNDS = 7
TARGET_SPREAD = 0.03


def pair_params() -> list:
    return [pytest.param(e, d, id=f"{e.name}-{d}") for e, d in pairs()]


@pytest.mark.parametrize(("entry", "dtype"), pair_params())
def test_pinned_within_budget_of_free(entry, dtype, record_property) -> None:
    ratios: list[float] = []
    res = None
    while len(ratios) < MAX_ROUNDS:
        res = measure_pair(entry, dtype, rounds=3 if not ratios else 1, reps=20)
        assert not res.errors, f"{entry.name}/{dtype}: timing errors {res.errors}"
        ratios += list(res.rounds)
        if max(ratios) - min(ratios) <= TARGET_SPREAD:
            break
    assert res is not None
    ratios.sort()
    ratio = ratios[len(ratios) // 2]
    spread = ratios[-1] - ratios[0]
    b = budget(entry.name, dtype)
    record_property("pinned_over_free_speed", round(ratio, 4))
    record_property("spread", round(spread, 4))
    record_property("rounds", len(ratios))
    record_property("pinned_best", res.pinned.best_config)
    record_property("free_best", res.free.best_config)
    assert ratio >= b, (f"{entry.name}/{dtype}: pinned/free speed {ratio:.3f} < budget {b} "
                        f"(spread {spread:.3f} over {len(ratios)} rounds; pinned best {res.pinned.best_config} "
                        f"{res.pinned.best_us:.2f}us, free best {res.free.best_config} {res.free.best_us:.2f}us)")
