"""Order-free max / min trees signed as the set of elements they read (fixbits/checker/maxsets.py).

Hand-written warp reductions show what meets and what stays apart; Triton's own sm_90 PTX of the
corpus softmax shows the merge on a real kernel; a property test checks the one rewrite the sets
rely on (a butterfly pair as both values of a bit) against a brute-force evaluation."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_checker_helpers import modelled, ptx_entry

from fixbits.checker.forms import Poly
from fixbits.checker.maxsets import _runs, expand, is_set_combine

_LOADS = {
    # (element 0, element 1) of thread t in a 64-element row
    "contiguous": ("\tmul.lo.s32 %r6, %r2, 2;\n\tadd.s32 %r10, %r4, %r6;\n\tadd.s32 %r11, %r10, 1;\n"),
    "strided": ("\tadd.s32 %r10, %r4, %r2;\n\tadd.s32 %r11, %r10, 32;\n"),
}


def warp_reduce(
    layout: str = "contiguous", op: str = "max.f32", offsets: tuple[int, ...] = (16, 8, 4, 2, 1)
) -> str:
    """A 32-thread block reduces its 64-element row with ``op`` (two elements per thread, then a
    butterfly over ``offsets``) and every thread stores the result."""
    body = ptx_entry(["ptr", "ptr"], 32) + "\tmov.u32 %r2, %tid.x;\n\tmov.u32 %r3, %ctaid.x;\n"
    body += "\tmul.lo.s32 %r4, %r3, 64;\n" + _LOADS[layout]
    for j in (0, 1):
        body += f"\tmul.wide.s32 %rd{10 + j}, %r{10 + j}, 4;\n\tadd.s64 %rd{20 + j}, %rd1, %rd{10 + j};\n"
        body += f"\tld.global.b32 %r{20 + j}, [%rd{20 + j}];\n"
    body += f"\t{op} %r30, %r20, %r21;\n"
    cur = 30
    for i, off in enumerate(offsets):
        body += f"\tshfl.sync.bfly.b32 %r{40 + i}, %r{cur}, {off}, 31, -1;\n"
        body += f"\t{op} %r{50 + i}, %r{cur}, %r{40 + i};\n"
        cur = 50 + i
    body += "\tmul.lo.s32 %r60, %r3, 32;\n\tadd.s32 %r61, %r60, %r2;\n\tmul.wide.u32 %rd30, %r61, 4;\n"
    body += f"\tadd.s64 %rd31, %rd2, %rd30;\n\tst.global.b32 [%rd31], %r{cur};\n\tret;\n}}\n"
    return body


def sig(text: str) -> str:
    return str(modelled(text).digest)


def test_butterfly_order_and_layout_do_not_split_a_max():
    ref = sig(warp_reduce())
    assert sig(warp_reduce(offsets=(1, 2, 4, 8, 16))) == ref
    assert sig(warp_reduce("strided")) == ref
    assert sig(warp_reduce("strided", offsets=(2, 16, 1, 8, 4))) == ref


def test_min_and_the_nan_variant_are_sets_too():
    for op in ("min.f32", "max.NaN.f32", "max.ftz.f32"):
        assert sig(warp_reduce(op=op)) == sig(warp_reduce("strided", op=op, offsets=(1, 2, 4, 8, 16)))
    assert sig(warp_reduce(op="min.f32")) != sig(warp_reduce(op="max.f32"))
    assert sig(warp_reduce(op="max.NaN.f32")) != sig(warp_reduce(op="max.f32"))


def test_a_sum_keeps_its_order():
    # the same shapes with add: the order is the bits, so the layouts stay apart
    assert sig(warp_reduce(op="add.f32")) != sig(warp_reduce("strided", op="add.f32"))
    assert sig(warp_reduce(op="add.f32")) != sig(warp_reduce(op="add.f32", offsets=(1, 2, 4, 8, 16)))


def test_a_different_set_stays_apart():
    # without the 16-lane step each half-warp holds the max of its own half of the row
    assert sig(warp_reduce(offsets=(8, 4, 2, 1))) != sig(warp_reduce())
    assert sig(warp_reduce(offsets=(8, 4, 2, 1))) != sig(warp_reduce(offsets=(16, 4, 2, 1)))


def test_abs_xorsign_is_not_a_set():
    # max.xorsign.abs of an element with itself clears its sign: not idempotent, so it stays a tree
    op = "max.xorsign.abs.f32"
    assert not is_set_combine("max", ("xorsign.abs.f32",))
    assert sig(warp_reduce(op=op)) != sig(warp_reduce(op=op, offsets=(1, 2, 4, 8, 16)))


def test_runs():
    assert _runs([]) == ()
    assert _runs([0, 1, 2, 5, 7, 8]) == ((0, 3), (5, 1), (7, 2))


def _values(elems: frozenset, bits: list[str]) -> list[frozenset]:
    """The set's (template, index) values at every assignment of ``bits``."""
    out = []
    for vals in itertools.product((0, 1), repeat=len(bits)):
        env = dict(zip(bits, vals, strict=True))
        out.append(frozenset((t, p.assign_bits(env).const_value()) for t, p in elems))
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([b"a", b"b"]),
            st.integers(-8, 8),
            st.lists(st.integers(-4, 4), min_size=3, max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(0, 2), max_size=3),
)
def test_expand_keeps_the_set_at_every_thread(raw, flips):  # type: ignore[no-untyped-def]
    """expand() rewrites pairs {p, p with a bit flipped}; at every thread the set is unchanged.
    Butterfly partners are planted (``flips``) so that pairs exist to rewrite."""
    from fixbits.checker.balanced import _flip_bit

    bits = ["tx0", "tx1", "tx2"]
    elems = set()
    for t, c, coefs in raw:
        p = Poly.const(c)
        for b, k in zip(bits, coefs, strict=True):
            p = p + Poly.sym(b).scale(k)
        elems.add((t, p))
        for f in flips:
            q = _flip_bit(p, bits[f])
            assert q is not None
            elems.add((t, q))
    got = expand(elems)
    assert _values(got, bits) == _values(frozenset(elems), bits)


def test_expand_removes_the_bits_of_a_whole_butterfly():
    p = Poly.sym("tx0").scale(2) + Poly.sym("tx1").scale(4)
    from fixbits.checker.balanced import _flip_bit

    s = {(b"a", p)}
    for b in ("tx0", "tx1"):
        s |= {(t, q) for t, x in s if (q := _flip_bit(x, b)) is not None}
    got = expand(s)
    assert all(q.is_const() for _, q in got)
    assert sorted(q.const_value() for _, q in got) == [0, 2, 4, 6]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_real_triton_pinned_softmax_num_warps_merge(tmp_path, monkeypatch, dtype):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the corpus softmax, pinned order: the row max is a free-layout
    tree, and the pinned sum reads it in every element. With the max as a set, num_warps 2, 4
    and 8 are one class (the H200 measured them equal); the free order stays apart by num_warps,
    as its bytes do."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_family_inputs

    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config

    _fam, mod, shape, inputs = corpus_family_inputs("softmax", dtype, monkeypatch, tmp_path)

    def digests(pinned: bool) -> list[str]:
        out = []
        for w in (2, 4, 8):
            with capture_launches(gpu_target("sm_90")) as got:
                mod.launch(inputs, shape, Config((("N_MULT", 1),), w, 1), pinned)
            (c,) = got
            out.append(sig(c.asm))
        return out

    pinned = digests(True)
    assert pinned[0] == pinned[1] == pinned[2]
    assert len(set(digests(False))) == 3


def _max_of_masked_registers(k: int) -> str:
    """test_checker_launch's kernel (64 threads, register j holds column tid + 64 j, loaded under
    column < N into a register that held +0) with the registers reduced by max.f32 over the
    thread and then over its warp."""
    from test_checker_launch import kernel

    lines, cur = [], 100
    for j in range(1, k):
        lines.append(f"\tmax.f32 %r{150 + j}, %r{cur}, %r{100 + j};")
        cur = 150 + j
    for i, off in enumerate((16, 8, 4, 2, 1)):
        lines.append(f"\tshfl.sync.bfly.b32 %r{170 + i}, %r{cur}, {off}, 31, -1;")
        lines.append(f"\tmax.f32 %r{180 + i}, %r{cur}, %r{170 + i};")
        cur = 180 + i
    return kernel(k, body="\n".join(lines) + "\n", out=cur)


def test_a_launch_padded_register_meets_the_padding_a_masked_load_reads():
    """At N = 90 every warp's set holds the +0 a masked load keeps (warp 0: columns 90..95 of
    register 1; warp 1: all of it), so registers 2 and 3, which the launch masks off wholly (+0),
    add nothing: K = 2 and K = 4 are one set for this launch. Unspecialised, or at N = 100 (warp
    0 reads no padding), they stay apart."""
    from test_checker_launch import at
    from test_checker_launch import sig as launch_sig

    two, four = _max_of_masked_registers(2), _max_of_masked_registers(4)
    assert launch_sig(two, at(90)) == launch_sig(four, at(90))
    assert launch_sig(two) != launch_sig(four)
    assert launch_sig(two, at(100)) != launch_sig(four, at(100))
