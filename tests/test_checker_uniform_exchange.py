"""Exchanges whose value is one tree at every thread (session 31: signature.uniform_exchanges).
A row's max or total that every lane reads after a butterfly is that tree; the rest of the root
keeps its lane, so a row stride kept as a parameter no longer leaves each thread's store a
constant column apart (per_thread's reading). Launch-specialised walks only. Hand-written PTX
for what it takes and refuses, real Triton PTX of the row softmax and the LayerNorm forward for
the merges the H200 measured."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_entry

from fixbits.checker.api import signature
from fixbits.checker.launch import LaunchShape

HEAD = ptx_entry(["ptr", "ptr", "u32"], 32) + """\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
\tmul.lo.s32 %r4, %r3, %r1;
\tadd.s32 %r5, %r4, %r2;
\tmul.wide.s32 %rd3, %r5, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r6, [%rd4];
"""

TAIL = """\tadd.s64 %rd5, %rd2, %rd3;
\tst.global.b32 [%rd5], %r30;
\tret;
}
"""


def _butterfly(lanes: tuple[int, ...]) -> str:
    """%r6 summed over the warp by xor shuffles in ``lanes`` order; the total in %r29."""
    out, src = [], "%r6"
    for i, lane in enumerate(lanes):
        out.append(f"\tshfl.sync.bfly.b32 %r{10 + 2 * i}, {src}, {lane}, 31, -1;")
        out.append(f"\tadd.f32 %r{11 + 2 * i}, {src}, %r{10 + 2 * i};")
        src = f"%r{11 + 2 * i}"
    out.append(f"\tmov.b32 %r29, {src};")
    return "\n".join(out) + "\n"


def _signed(text: str):  # type: ignore[no-untyped-def]
    """The kernel's signature under a launch of 64 rows of 32 (the rule reads launch-specialised
    walks only)."""
    s = signature(text, "ptx", launch=LaunchShape.of({2: 32}, (64,)))
    assert s.fallback is None, s.fallback
    return s


def _row_scale(lanes: tuple[int, ...]) -> str:
    """y[row * stride + lane] = x[row * stride + lane] / (the row's total): each lane's element
    is a form of its lane only while the lane stays a symbol."""
    return HEAD + _butterfly(lanes) + "\tdiv.rn.f32 %r30, %r6, %r29;\n" + TAIL


def test_a_total_every_lane_reads_leaves_the_root_relative():
    a = _signed(_row_scale((16, 8, 4, 2, 1)))
    assert not a.physical
    assert a.digest == _signed(_row_scale((16, 8, 4, 2, 1))).digest
    # another butterfly order is another total
    assert _signed(_row_scale((1, 2, 4, 8, 16))).digest != a.digest


def test_a_neighbours_value_is_no_uniform_exchange():
    """x + the value of lane ^ 1 differs from lane to lane: the exchange stays and so does the
    root's physical form."""
    text = HEAD + "\tshfl.sync.bfly.b32 %r10, %r6, 1, 31, -1;\n\tadd.f32 %r30, %r6, %r10;\n" + TAIL
    assert _signed(text).physical


def test_real_triton_free_softmax_meets_across_tile_widths(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the free-order row softmax (fp16, 4 warps): the H200 measured
    N_MULT 1 and 2 as one class. Under the launch they meet and are relative; 2 warps, which
    the H200 measured apart, stays apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import n_mult_digests

    spec, _ = n_mult_digests("softmax", "fp16", False, monkeypatch, tmp_path, mults=(1, 2))
    assert spec[0] == spec[1]
    other_w, _ = n_mult_digests("softmax", "fp16", False, monkeypatch, tmp_path, num_warps=2, mults=(1,))
    assert other_w[0] != spec[0]


def test_real_triton_layernorm_meets_across_warps_and_tile_widths_pinned(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the LayerNorm forward (fp32): the H200 measured every pinned
    config as one class. Under the launch, 4 and 8 warps with tiles of one and two times the
    row's power of two meet: the stored element's where() is the arm the store's own mask picks
    (ptx walk ``_unmask``) and a padded lane's square is +0 (``pads.zero_result``), so the
    wider tile's variance sum holds a +0 span the narrower one does not need. Free 4 and 8 warps,
    apart on the H200, stay apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("layernorm_fwd", "fp32", monkeypatch, tmp_path)
    tiles = [(("N_MULT", 1),), (("N_MULT", 2),)]
    pinned = [d for w in (4, 8) for d in corpus_digests(mod, fam.module, inputs, shape, "fp32", True, tiles, w)[0]]
    assert len(set(pinned)) == 1
    free = [corpus_digests(mod, fam.module, inputs, shape, "fp32", False, tiles[:1], w)[0][0] for w in (4, 8)]
    assert free[0] != free[1]


def test_a_widened_pad_and_a_padded_square_are_zero():
    """+0 widened from f16 / bf16 and +0 * +0 are +0 exactly; a widening of anything else, a
    narrowing, or a product with another operand is not folded."""
    from fixbits.checker.forms import Poly
    from fixbits.checker.node import Node, int_node
    from fixbits.checker.pads import zero_result

    zero, one = int_node(Poly.const(0)), int_node(Poly.const(0x3C00))
    assert zero_result("cvt", ("f32.f16",), (zero,)) and zero_result("cvt", ("f32.bf16",), (zero,))
    assert zero_result("mul", ("f32",), (zero, zero)) and zero_result("mul", ("rn.f32",), (zero, zero))
    assert not zero_result("cvt", ("f32.f16",), (one,))
    assert not zero_result("cvt", ("rn.f16.f32",), (zero,))
    assert not zero_result("mul", ("f32",), (zero, Node("leaf", ("global", 4, "p:0"))))


def test_real_triton_fp16_layernorm_meets_across_warps_pinned(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """fp16 LayerNorm forward, pinned, 2 and 4 warps: one class on the H200. The wider layout's
    variance sum holds a span of widened +0 pads, now a +0 span."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("layernorm_fwd", "fp16", monkeypatch, tmp_path)
    got = [corpus_digests(mod, fam.module, inputs, shape, "fp16", True, [(("N_MULT", 1),)], w)[0][0] for w in (2, 4)]
    assert got[0] == got[1]
