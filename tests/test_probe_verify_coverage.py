"""Verification shapes of a reconstructed answer cover its deepest K and a K that is a multiple
of 64: the two readings the H200 sweep of run s2b found wrong when only cheap, K % 8 != 0 shapes
verified an entry (bf16 a11 gemmSN chunks past K=512; split-K spans rounding to 64)."""

from __future__ import annotations

from fixbits.probe.reconstruct import DEEP_K_CAP, _verify_shapes

GROUP = [(2, 4096, 281), (3, 9274, 531), (2, 8192, 300), (4, 512, 1000), (2, 9413, 12843),
         (3, 10314, 166837), (4, 256, 4096)]


def task(prio: list[tuple[int, int, int]], group: list[tuple[int, int, int]]) -> dict[str, object]:
    return {"prio": prio, "group": group, "in_dtype": "bf16"}


def test_deepest_k_is_verified() -> None:
    shapes = _verify_shapes(task([], GROUP), 2)
    assert max(s[2] for s in shapes) == 12843  # the deepest up to DEEP_K_CAP (166837 is above it)
    assert max(s[2] for s in _verify_shapes(task([], [g for g in GROUP if g[2] < 10000] + [(2, 8, 30000)]), 2)) == 30000


def test_a_multiple_of_64_is_verified() -> None:
    shapes = _verify_shapes(task([], GROUP), 2)
    assert any(s[2] % 64 == 0 for s in shapes)
    assert len(shapes) <= 4


def test_nothing_added_when_covered() -> None:
    group = [(2, 64, 4096), (2, 64, 300)]
    shapes = _verify_shapes(task([], group), 2)
    assert sorted(shapes) == sorted(group)


def test_excluded_shape_counts_as_covered() -> None:
    rep = (3, 10314, 166837)
    shapes = _verify_shapes(task([], GROUP), 2, exclude=rep)
    assert rep not in shapes
    assert all(s[2] < rep[2] for s in shapes)
    assert DEEP_K_CAP >= 4096
