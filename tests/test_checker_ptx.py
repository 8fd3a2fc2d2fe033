"""The PTX walk on hand-written kernels: what it must merge, what it must keep apart."""

from __future__ import annotations

import pytest
import test_checker_helpers as S

from fixbits.checker.api import certified_equal, compare, signature

pytestmark = pytest.mark.unit


def eq(a: str, b: str) -> bool:
    return certified_equal(signature(a, "ptx"), signature(b, "ptx"))


def test_walk_models_snippets_without_falling_back():
    s = signature(S.ptx(S.SUM_LEFT), "ptx")
    assert s.fallback is None, s.fallback
    assert [o.param for o in s.outputs] == ["p:1"]


def test_commuted_operands_and_renamed_registers_are_equal():
    assert eq(S.ptx(S.SUM_LEFT), S.ptx(S.SUM_LEFT_COMMUTED))
    assert eq(S.ptx(S.SUM_LEFT), S.ptx(S.SUM_LEFT_RENAMED))
    assert eq(S.ptx(S.SUM_FMA_RN), S.ptx(S.SUM_FMA_SWAPPED))  # the product commutes


def test_reassociation_is_not_equal():
    assert not eq(S.ptx(S.SUM_LEFT), S.ptx(S.SUM_TREE))


def test_fma_rounding_mode_and_addend_matter():
    assert not eq(S.ptx(S.SUM_FMA_RN), S.ptx(S.SUM_FMA_RZ))
    assert not eq(S.ptx(S.SUM_FMA_RN), S.ptx(S.SUM_FMA_ADDEND))


def test_same_address_by_other_arithmetic_is_one_leaf():
    assert eq(S.ptx(S.SUM_LEFT, address=S.ADDR_MUL), S.ptx(S.SUM_LEFT, address=S.ADDR_SHL))
    assert not eq(S.ptx(S.SUM_LEFT, address=S.ADDR_MUL), S.ptx(S.SUM_LEFT, address=S.ADDR_OFF))


def test_shuffle_order_splits_and_is_explained():
    down = S.ptx_reduce([16, 8, 4, 2, 1])
    up = S.ptx_reduce([1, 2, 4, 8, 16])
    assert eq(down, S.ptx_reduce([16, 8, 4, 2, 1]))
    v = compare(signature(down, "ptx"), signature(up, "ptx"))
    assert not v.equal
    assert "16,8,4,2,1 (count down)" in v.reason and "1,2,4,8,16 (count up)" in v.reason, v.reason


def test_loop_fold_keyed_on_its_increment_not_on_register_names():
    assert eq(S.ptx_loop(64), S.ptx_loop(64, rename=True))
    assert not eq(S.ptx_loop(64), S.ptx_loop(128))


def test_float_atomics_are_never_certified_even_against_themselves():
    body = S.SUM_LEFT + "\n\tred.global.add.f32 [%rd4], %r8;"
    s = signature(S.ptx(body), "ptx")
    assert not s.deterministic
    assert not certified_equal(s, s)


def test_unmodelled_instruction_is_opaque_text():
    a = S.ptx(S.SUM_LEFT.replace("add.f32 %r8, %r7, %r5", "foo.bar.f32 %r8, %r7, %r5"))
    b = S.ptx(S.SUM_LEFT.replace("add.f32 %r8, %r7, %r5", "foo.baz.f32 %r8, %r7, %r5"))
    assert eq(a, a)
    assert not eq(a, b)
    assert not eq(a, S.ptx(S.SUM_LEFT))


def test_unmodelled_control_flow_falls_back_to_text():
    body = S.SUM_LEFT + "\n\tbrx.idx %r1, $Ltab;"
    s = signature(S.ptx(body), "ptx")
    assert s.fallback is not None and "brx" in s.fallback
    assert not eq(S.ptx(body), S.ptx(S.SUM_LEFT))


def test_frozen_gemm_k_loop_exemption_merges_block_k():
    a, b = S.frozen_signature("gemm_bk32.ptx"), S.frozen_signature("gemm_bk64.ptx")
    assert a.fallback is None and b.fallback is None
    assert certified_equal(a, b)
    assert not a.physical  # the tree is written in the output's own coordinates


def test_frozen_row_sum_warps_split_with_a_reason():
    a, b = S.frozen_signature("row_sum_w2.ptx"), S.frozen_signature("row_sum_w4.ptx")
    v = compare(a, b)
    assert not v.equal and v.reason.startswith("output 0"), v.reason


def test_signature_is_deterministic():
    assert S.frozen_signature("softmax_w4.ptx").digest == S.frozen_signature("softmax_w4.ptx").digest


def test_balanced_tree_collapses_across_warp_counts() -> None:
    """The pinned (balanced, neighbours-first) row sum over 1 and 4 warps is one tree: the
    collapse keeps combine, leaf, height and start and drops which lane or warp held what."""
    a, b = S.frozen_signature("row_sum_pinned_w1.ptx"), S.frozen_signature("row_sum_pinned_w4.ptx")
    assert a.fallback is None and b.fallback is None
    assert certified_equal(a, b)
    root = a.outputs[0].roots[0].value
    assert root.kind == "balanced" and root.attrs[1] == 10, root


def test_balanced_collapse_keeps_height_and_combine() -> None:
    """A free (unpinned) row sum is not the balanced tree: it must not join the pinned class."""
    pinned, free = S.frozen_signature("row_sum_pinned_w4.ptx"), S.frozen_signature("row_sum_w4.ptx")
    assert not certified_equal(pinned, free)


def test_store_order_to_one_place_matters() -> None:
    """The last store to an address wins: the same two stores in the other order differ."""
    first = S.SUM_LEFT + "\n\tst.global.b32 [%rd4], %r6;\n\tst.global.b32 [%rd4], %r7;"
    second = S.SUM_LEFT + "\n\tst.global.b32 [%rd4], %r7;\n\tst.global.b32 [%rd4], %r6;"
    assert eq(S.ptx(first), S.ptx(first))
    assert not eq(S.ptx(first), S.ptx(second))


def test_unmodelled_shared_write_is_seen_by_later_reads() -> None:
    """A shared-memory write the walk does not model (stmatrix) must reach every later read:
    the read may not assume the slot still holds what a modelled store put there."""
    base = (
        S.SUM_LEFT
        + "\n\tmov.u32 %r50, global_smem;\n\tst.shared.b32 [%r50], %r6;"
        + "{STM}\n\tbar.sync 0;\n\tld.shared.b32 %r9, [%r50];\n\tadd.f32 %r10, %r8, %r9;"
    )
    plain = S.ptx(base.replace("{STM}", ""), out=10)
    with_stm = S.ptx(
        base.replace("{STM}", "\n\tstmatrix.sync.aligned.m8n8.x1.shared.b16 [%r50], {%r7};"), out=10
    )
    assert not eq(plain, with_stm)
