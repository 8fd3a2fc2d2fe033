"""The AMDGCN walk: DPP lane folds, commutativity, and the shared verdict machinery."""

from __future__ import annotations

import pytest
import test_checker_helpers as S

from fixbits.checker.api import certified_equal, compare, signature

pytestmark = pytest.mark.unit


def sig(text: str):  # type: ignore[no-untyped-def]
    return signature(text, "amdgcn")


def test_gcn_snippet_is_modelled() -> None:
    s = sig(S.gcn_dpp([8, 4, 2, 1]))
    assert s.fallback is None, s.fallback
    assert s.ntid == (64, 1, 1)
    assert [o.param for o in s.outputs] == ["p:8"]


def test_dpp_row_shift_order_splits() -> None:
    down, up = sig(S.gcn_dpp([8, 4, 2, 1])), sig(S.gcn_dpp([1, 2, 4, 8]))
    assert certified_equal(down, sig(S.gcn_dpp([8, 4, 2, 1])))
    v = compare(down, up)
    assert not v.equal and v.reason


def test_commuted_vector_add_is_equal() -> None:
    assert certified_equal(sig(S.gcn_dpp([8, 4], commute=False)), sig(S.gcn_dpp([8, 4], commute=True)))


def test_lds_exchange_and_barrier_are_modelled() -> None:
    body = "\tds_write_b32 v1, v2\n\ts_waitcnt lgkmcnt(0)\n\ts_barrier\n\tds_read_b32 v2, v1 offset:4"
    a = sig(S.GCN.replace("BODY", body))
    b = sig(S.GCN.replace("BODY", body.replace("offset:4", "offset:8")))
    assert a.fallback is None
    assert not certified_equal(a, b)


def test_float_atomic_is_never_certified() -> None:
    s = sig(S.GCN.replace("BODY", "\tbuffer_atomic_add_f32 v2, v1, s[16:19], 0 offen"))
    assert not s.deterministic and not certified_equal(s, s)


def test_frozen_gfx942_row_sums() -> None:
    a, b = S.frozen_signature("row_sum_w1.amdgcn"), S.frozen_signature("row_sum_w4.amdgcn")
    assert a.fallback is None and b.fallback is None
    assert not certified_equal(a, b)
