"""Per-thread roots (fixbits/checker/thread_roots.py) and leaf predicates over the leaf index
(fixbits/checker/leaf_pred.py): a block that stores several rows through selects on thread bits
and bit-move shuffles reaches the signature of one row per block; a thread that stores another
row's value, or a guard that picks other elements, stays apart."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_entry

from fixbits.checker.api import signature
from fixbits.checker.forms import Poly
from fixbits.checker.leaf_pred import relative_pred
from fixbits.checker.walk import icmp

HEAD = ptx_entry(["ptr", "ptr"], 64) + """\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
"""


def two_rows(store: str) -> str:
    """Rows 2c and 2c + 1 of block c: every thread loads both (a, b) and doubles them; thread t
    stores %r20 (set by ``store``) at y[2c + (t & 1)]."""
    return HEAD + f"""\tmul.wide.u32 %rd3, %r3, 8;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r4, [%rd4];
\tld.global.b32 %r5, [%rd4+4];
\tmul.f32 %r6, %r4, 0f40000000;
\tmul.f32 %r7, %r5, 0f40000000;
\tand.b32 %r8, %r2, 1;
\tsetp.eq.b32 %p1, %r8, 0;
{store}
\tshl.b32 %r9, %r3, 1;
\tor.b32 %r10, %r9, %r8;
\tmul.wide.u32 %rd5, %r10, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.b32 [%rd6], %r20;
\tret;
}}
"""


ONE_ROW = HEAD + """\tmul.wide.u32 %rd3, %r3, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r4, [%rd4];
\tmul.f32 %r6, %r4, 0f40000000;
\tadd.s64 %rd6, %rd2, %rd3;
\tst.global.b32 [%rd6], %r6;
\tret;
}
"""

SELECT = "\tselp.b32 %r20, %r6, %r7, %p1;"
WRONG_ROW = "\tselp.b32 %r20, %r6, %r6, %p1;"
SHUFFLED = """\tselp.b32 %r11, %r7, %r6, %p1;
\tshfl.sync.bfly.b32 %r12, %r11, {lane}, 31, -1;
\tselp.b32 %r20, %r6, %r12, %p1;"""


def sig(text: str) -> tuple[str, bool]:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest, s.physical


def test_rows_picked_by_a_thread_bit_meet_one_row_per_block():
    one, phys1 = sig(ONE_ROW)
    two, phys2 = sig(two_rows(SELECT))
    assert not phys1 and not phys2
    assert one == two


def test_rows_through_a_bit_move_shuffle_meet_one_row_per_block():
    # thread 1 stores what lane 0 sent: select(tx0 == 0, b, a) at lane 0 is b, row 1's value
    assert sig(two_rows(SHUFFLED.format(lane=1)))[0] == sig(ONE_ROW)[0]


def test_a_thread_storing_another_rows_value_stays_apart():
    assert sig(two_rows(WRONG_ROW))[0] != sig(ONE_ROW)[0]
    # lane ^ 2 keeps tx0: thread 1 receives lane 3's a (row 0) and stores it at row 1
    assert sig(two_rows(SHUFFLED.format(lane=2)))[0] != sig(ONE_ROW)[0]


def test_leaf_predicate_is_exact_at_every_leaf():
    # leaf index i = R + 4*tx0 + 8*tx1 + c, vector mask on the vector's first column:
    # q = 4*tx0 + 8*tx1 + (c - c % 4) + 1 - N; the template at IX = i gives q back
    r = Poly({("ctaid.x", "p:3"): 1})
    thr = Poly({("tx0",): 4, ("tx1",): 8})
    n = Poly.sym("p:3")
    forms = []
    for c in range(8):
        start = r + thr + Poly.const(c)
        q = thr + Poly.const(c - c % 4) - n  # col_base - N <= 0 as the walk writes col_base < N
        got = relative_pred(icmp("le", "s", q), start)
        assert got is not None
        form = got.kids[0]
        assert form.kind == "ixform" and form.attrs == (4, 1)
        g, a = form.attrs
        assert form.kids[0].poly == r
        e = form.kids[1].poly
        for bits in range(4):
            val = 4 * (bits & 1) + 8 * (bits >> 1) + c  # IX - R at this leaf
            at_leaf = q.substitute("tx0", Poly.const(bits & 1)).substitute("tx1", Poly.const(bits >> 1))
            assert Poly.const(a * (val - val % g)) + e == at_leaf
        forms.append(got.digest)
    # one template for every leaf of the vector mask
    assert len(set(forms)) == 1


def test_per_element_and_per_vector_masks_keep_other_templates():
    r = Poly({("ctaid.x", "p:3"): 1})
    thr = Poly({("tx0",): 4, ("tx1",): 8})
    n = Poly.sym("p:3")
    start = r + thr + Poly.const(1)
    per_vector = relative_pred(icmp("le", "s", thr + Poly.const(1) - n), start)  # col_base < N
    per_element = relative_pred(icmp("le", "s", thr + Poly.const(2) - n), start)  # col < N
    assert per_vector is not None and per_element is not None
    assert per_vector.digest != per_element.digest
    # a predicate on thread bits the leaf index does not move with: refused
    assert relative_pred(icmp("le", "s", Poly({("tx2",): 4}) - n), start) is None
    # a data-dependent bound: refused
    assert relative_pred(icmp("le", "s", thr + Poly.sym("D:x")), start) is None


@pytest.mark.parametrize("xblock", [1, 2])
def test_real_triton_inductor_persistent_sum(tmp_path, monkeypatch, xblock):  # type: ignore[no-untyped-def]
    """Inductor's pinned persistent sum (tl.where(rmask & xmask, x, 0) leaves) at M = 8192,
    N = 768: with the leaf predicate over the leaf index, XBLOCK = 1 collapses to one balanced
    tree for num_warps 1, 2 and 4 (one class). XBLOCK = 2 stays apart from XBLOCK = 1: Triton
    guards both rows with row 0's xmask (2*pid < xnumel), another function when M is odd."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_family_inputs

    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config

    fam, mod, shape, inputs = corpus_family_inputs("inductor_per_sum", "fp32", monkeypatch, tmp_path)

    def digest(xb: int, w: int) -> str:
        with capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, Config((("XBLOCK", xb),), w, 1), True)
        (c,) = got
        s = signature(c.asm, "ptx")
        assert s.fallback is None
        return s.digest

    if xblock == 1:
        assert digest(1, 1) == digest(1, 2) == digest(1, 4)
    else:
        assert digest(2, 1) != digest(1, 1)
