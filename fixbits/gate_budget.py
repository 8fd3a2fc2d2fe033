"""A budgeted slice for `fixbits gate`: a deterministic sample per test, families interleaved,
and a soft deadline after which the remaining tests skip instead of the run being killed.

A gate on a short device budget must still end with a report: killed at its timeout it says
only "could not run". Loaded with ``-p fixbits.gate_budget`` (the gate adds it), so the
everyday plugin is untouched. Under pytest-xdist every worker computes the same sample (it
depends on the collection only) and reads the same wall-clock deadline.

  --fixbits-sample N       keep N evenly spaced items of each test function (0: keep all)
  --fixbits-deadline T     Unix time; a test that has not started by T skips, reason named
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TypeVar

import pytest

T = TypeVar("T")
BUDGET_SKIP = "fixbits gate: the device budget was spent before this test started"


def evenly_spaced(n_items: int, keep: int) -> list[int]:
    """Indices of ``keep`` items spread over ``n_items`` (first and last included), ascending."""
    if keep <= 0 or keep >= n_items:
        return list(range(n_items))
    if keep == 1:
        return [0]
    return sorted({round(i * (n_items - 1) / (keep - 1)) for i in range(keep)})


def function_of(nodeid: str) -> str:
    """'path::test_f[param]' -> 'path::test_f': items of one parametrized test share it."""
    return nodeid.split("[", 1)[0]


def interleave(groups: Sequence[Sequence[T]]) -> list[T]:
    """Round robin over groups: every test function gets its first item run before any gets a second."""
    out: list[T] = []
    depth = max((len(g) for g in groups), default=0)
    for i in range(depth):
        out += [g[i] for g in groups if i < len(g)]
    return out


def sample_and_order(nodeids: Sequence[str], keep: int) -> list[int]:
    """Positions (into ``nodeids``) of the kept items, in the order to run them."""
    by_function: dict[str, list[int]] = {}
    for pos, nid in enumerate(nodeids):
        by_function.setdefault(function_of(nid), []).append(pos)
    groups = [[g[i] for i in evenly_spaced(len(g), keep)] for g in by_function.values()]
    return interleave(groups)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fixbits-gate", "fixbits gate: budgeted slices")
    group.addoption("--fixbits-sample", type=int, default=0, metavar="N", help="items kept per test function")
    group.addoption(
        "--fixbits-deadline", type=float, default=None, metavar="UNIX_TIME", help="soft deadline (skip after)"
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = int(config.getoption("--fixbits-sample") or 0)
    if keep <= 0 and config.getoption("--fixbits-deadline") is None:
        return
    order = sample_and_order([i.nodeid for i in items], keep)
    kept = set(order)
    dropped = [it for pos, it in enumerate(items) if pos not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = [items[pos] for pos in order]


def pytest_runtest_setup(item: pytest.Item) -> None:
    deadline = item.config.getoption("--fixbits-deadline")
    if deadline is not None and time.time() >= deadline:
        pytest.skip(BUDGET_SKIP)
