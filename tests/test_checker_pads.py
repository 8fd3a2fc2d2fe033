"""+0.0 padding in launch-specialised walks beyond plain adds (fixbits/checker/pads.py): squares
through fma, stores the launch never makes, shuffles of a pad, and where a square's sum drops its
canon marker. Every merge is checked against the unspecialised walk, which must keep it apart."""

from __future__ import annotations

import pytest
from test_checker_launch import HEAD, TAIL, at, kernel, masked_loads, sig


def squares(k: int, fma: str = "fma.rn.f32", first: str = "mul.rn.f32") -> tuple[str, int]:
    """acc = r0 * r0, then acc = fma(rj, rj, acc) for the other registers (Triton's tl.sum(x * x)
    with the products fused)."""
    lines, cur = [f"\t{first} %r141, %r100, %r100;"], 141
    for j in range(1, k):
        lines.append(f"\t{fma} %r{141 + j}, %r{100 + j}, %r{100 + j}, %r{cur};")
        cur = 141 + j
    return "\n".join(lines) + "\n", cur


def squares_then_adds(k: int, mul: str, add: str) -> tuple[str, int]:
    """Each square rounded on its own, then a chain of adds (a pinned tree's products)."""
    lines = [f"\t{mul} %r{120 + j}, %r{100 + j}, %r{100 + j};" for j in range(k)]
    cur = 120
    for j in range(1, k):
        lines.append(f"\t{add} %r{160 + j}, %r{cur}, %r{120 + j};")
        cur = 160 + j
    return "\n".join(lines) + "\n", cur


def test_a_padded_square_in_an_fma_folds():
    # N = 100: registers 2.. of every thread are pads. fma(+0, +0, acc) = acc + +0
    body4, out4 = squares(4)
    body8, out8 = squares(8)
    assert sig(kernel(4, body=body4, out=out4), at(100)) == sig(kernel(8, body=body8, out=out8), at(100))
    assert sig(kernel(4, body=body4, out=out4)) != sig(kernel(8, body=body8, out=out8))


def test_an_fma_with_one_padded_factor_does_not_fold():
    # fma(+0, y, c) is -0 * ... for negative y: not c + +0 in general
    one = "\tfma.rn.f32 %r151, %r102, %r101, %r100;\n"
    plain = "\tadd.f32 %r151, %r100, %r102;\n"
    assert sig(kernel(3, body=one, out=151), at(100)) != sig(kernel(3, body=plain, out=151), at(100))


def test_rounded_squares_of_pads_are_pads():
    b4, o4 = squares_then_adds(4, "mul.rn.f32", "add.rn.f32")
    b8, o8 = squares_then_adds(8, "mul.rn.f32", "add.rn.f32")
    assert sig(kernel(4, body=b4, out=o4), at(100)) == sig(kernel(8, body=b8, out=o8), at(100))


def test_an_add_ptxas_may_fuse_with_a_product_does_not_fold():
    # add.f32 of a mul.f32 may become one fma in SASS: fma(a, b, +0) rounds a negative product
    # that underflows to -0, so (a * b + pad) is not canon(a * b) and a second pad changes it
    once = "\tmul.f32 %r120, %r100, %r101;\n\tadd.f32 %r151, %r120, %r102;\n"
    twice = once.replace("%r151", "%r150") + "\tadd.f32 %r151, %r150, %r103;\n"
    assert sig(kernel(4, body=once, out=151), at(100)) != sig(kernel(4, body=twice, out=151), at(100))
    # with add.rn (never fused) both are canon(a * b)
    rn_once, rn_twice = (b.replace("add.f32", "add.rn.f32") for b in (once, twice))
    assert sig(kernel(4, body=rn_once, out=151), at(100)) == sig(kernel(4, body=rn_twice, out=151), at(100))
    # a product of two pads is +0 either way
    b4, o4 = squares_then_adds(4, "mul.f32", "add.f32")
    b8, o8 = squares_then_adds(8, "mul.f32", "add.f32")
    assert sig(kernel(4, body=b4, out=o4), at(100)) == sig(kernel(8, body=b8, out=o8), at(100))


def test_a_sum_of_squares_drops_its_canon_marker():
    # N = 128: K = 2 has no pad (columns t, t + 64 < 128), K = 4 pads registers 2, 3:
    # canon(sum of squares) = the sum itself (never -0), so they meet; a plain sum may be -0
    b2, o2 = squares(2)
    b4, o4 = squares(4)
    assert sig(kernel(2, body=b2, out=o2), at(128)) == sig(kernel(4, body=b4, out=o4), at(128))
    assert sig(kernel(2), at(128)) != sig(kernel(4), at(128))


def test_an_fma_of_other_factors_keeps_the_marker():
    # r0 * r1 + ...: the exact sum may be a negative value that rounds to -0
    def body(k: int) -> tuple[str, int]:
        lines, cur = ["\tmul.rn.f32 %r141, %r100, %r101;"], 141
        for j in range(2, k):
            lines.append(f"\tfma.rn.f32 %r{140 + j}, %r{100 + j}, %r{100 + j}, %r{cur};")
            cur = 140 + j
        return "\n".join(lines) + "\n", cur

    b2, o2 = body(2)
    b4, o4 = body(4)
    assert sig(kernel(2, body=b2, out=o2), at(128)) != sig(kernel(4, body=b4, out=o4), at(128))


def test_a_store_the_launch_masks_off_everywhere_leaves_no_root():
    # a second store at column t + 192 under column < N: no thread stores it at N = 100
    extra = """\tadd.s32 %r195, %r2, 192;
\tsetp.lt.s32 %p7, %r195, %r1;
\tmul.wide.u32 %rd95, %r195, 4;
\tadd.s64 %rd96, %rd2, %rd95;
\t@%p7 st.global.b32 [%rd96], %r100;
"""
    body, out = squares(4)
    one = HEAD + masked_loads(4) + body + TAIL.replace("%rOUT", f"%r{out}")
    two = HEAD + masked_loads(4) + body + extra + TAIL.replace("%rOUT", f"%r{out}")
    assert sig(one, at(100)) == sig(two, at(100))
    assert sig(one, at(300)) != sig(two, at(300))  # stored by some thread there
    assert sig(one) != sig(two)


def test_a_butterfly_of_a_pad_is_the_pad():
    # the pad register r3 sent across lanes before the add: every lane sends +0
    via = "\tadd.f32 %r150, %r100, %r101;\n\tshfl.sync.bfly.b32 %r160, %r103, 1, 31, -1;\n\tadd.f32 %r151, %r150, %r160;\n"
    direct = "\tadd.f32 %r150, %r100, %r101;\n\tadd.f32 %r151, %r150, %r103;\n"
    assert sig(kernel(4, body=via, out=151), at(100)) == sig(kernel(4, body=direct, out=151), at(100))
    assert sig(kernel(4, body=via, out=151)) != sig(kernel(4, body=direct, out=151))


@pytest.mark.parametrize(("dtype", "pinned"), [("fp32", False), ("fp16", False), ("fp32", True), ("bf16", True)])
def test_real_triton_rmsnorm_wider_tiles_merge(tmp_path, monkeypatch, dtype, pinned):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the corpus RMSNorm at N = 4096: BLOCK_N = 4096, 8192 and 16384
    are one class for this launch (the H200 measured them equal), apart unspecialised. Free
    order: the wider tiles pad whole registers, fma(+0, +0, acc) folds, their masked-off columns
    of Y are never stored, and the sum of squares drops its canon marker. Pinned order: the
    partials of the padded half are +0 in shared memory, read as zero spans (for some lanes
    only, at the last fold), and the balanced tree over the real half is the exact-width one."""
    pytest.importorskip("triton")
    from test_checker_helpers import n_mult_digests

    spec, plain = n_mult_digests("rmsnorm", dtype, pinned, monkeypatch, tmp_path)
    assert spec[0] == spec[1] == spec[2]
    assert len(set(plain)) == 3


def _row_sum_digests(monkeypatch, tmp_path, n: int, pinned: bool) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    """(specialised, unspecialised) digests of the corpus row sum at N = n, N_MULT = 1, 2, 4."""
    import triton
    from test_checker_helpers import corpus_digests

    from fixbits.corpus import row_sum
    from fixbits.corpus.common import to_device

    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path))
    shape = {"M": 64, "N": n}
    inputs = {k: to_device(v, "cpu") for k, v in row_sum.make_inputs(shape, "fp32", "ordinary", 0).items()}
    blocks = [(("BLOCK_M", 1), ("N_MULT", m)) for m in (1, 2, 4)]
    return corpus_digests(row_sum, "fixbits.corpus.row_sum", inputs, shape, "fp32", pinned, blocks)


def test_real_triton_pinned_row_sum_padded_halves_merge(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Pinned row sum at N = 1000: BLOCK_N = 2048 and 4096 pad whole halves of the tree; for this
    launch both are canon(the tree over the first 1024 columns), apart unspecialised."""
    pytest.importorskip("triton")
    spec, plain = _row_sum_digests(monkeypatch, tmp_path, 1000, True)
    assert spec[1] == spec[2]
    assert len(set(plain)) == 3


def test_real_triton_pinned_row_sum_keeps_the_marker_of_a_sum_that_may_be_minus_zero(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """At N = 1024 the exact-width tile has no pad and its sum of an all -0 row is -0, while the
    padded tiles add +0 to it: canon(tree) is not the tree, so they stay apart (and the two
    padded ones meet)."""
    pytest.importorskip("triton")
    spec, _ = _row_sum_digests(monkeypatch, tmp_path, 1024, True)
    assert spec[1] == spec[2]
    assert spec[0] != spec[1]


def _span(start: str, live: tuple[tuple[str, int], ...] | None):  # type: ignore[no-untyped-def]
    from fixbits.checker.balanced import Span
    from fixbits.checker.forms import Poly
    from fixbits.checker.node import Node

    poly = Poly.const(0) if start == "0" else Poly.sym(start)
    return Span(Node("leaf", ("global", 4, "p:0")), 3, poly, ("add", ("rn.f32",)), False, live)


def test_complementary_live_sets_add_to_the_marked_tree():
    from fixbits.checker.balanced import _complementary

    got = _complementary(_span("0", (("tx3", 0), ("tx4", 0))), _span("0", (("tx3", 0), ("tx4", 1))))
    assert got is not None and got.canon and got.live == (("tx3", 0),)
    one = _complementary(_span("0", (("tx4", 0),)), _span("0", (("tx4", 1),)))
    assert one is not None and one.canon and one.live is None


def test_live_sets_that_are_not_complementary_stay_unproven():
    from fixbits.checker.balanced import _complementary

    # two bits differ: some threads would hold the tree twice, others not at all
    assert _complementary(_span("0", (("tx3", 0), ("tx4", 0))), _span("0", (("tx3", 1), ("tx4", 1)))) is None
    # the same live set is an ordinary combine, not this one
    assert _complementary(_span("0", (("tx4", 0),)), _span("0", (("tx4", 0),))) is None
    # other trees (starts) on the two sides
    assert _complementary(_span("0", (("tx4", 0),)), _span("tx5", (("tx4", 1),))) is None
    # the bit that picks the side moves the start: not one function of the thread's other bits
    assert _complementary(_span("tx4", (("tx4", 0),)), _span("tx4", (("tx4", 1),))) is None


def test_a_pad_is_a_span_only_in_a_specialised_collapse():
    from fixbits.checker.balanced import Collapser
    from fixbits.checker.node import const_bits

    pad = const_bits(0, 32)
    assert Collapser().span(pad) is None
    got = Collapser(pads=True).span(pad)
    assert got is not None and got.zero
