"""Store-to-load forwarding through shared memory (fixbits/checker/forward.py): an ldmatrix read
after a barrier takes the value its one writer stored, so what earlier generations staged in
shared memory (the K-loop's operand staging, whose shape is the pipeline depth) no longer parts
two kernels; a read that sees other data, or a slot the last generation did not write, stays apart."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_walker

from fixbits.checker.api import certified_equal, signature
from fixbits.checker.forms import Poly
from fixbits.checker.forward import bit_op

pytestmark = pytest.mark.unit

# one warp; thread t loads x[SRC(t)], adds 1 and stores it as word DST(t) of shared memory; after
# a barrier ldmatrix.x1 gives lane i word i (row i/4 from lane i/4's row address 16*(i/4)) and
# lane i writes it to out[i]. STAGE is what an earlier generation put in shared memory.
KERNEL = """.version 8.0
.target sm_90
.address_size 64
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
.reqntid 32, 1, 1
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<40>;
\t.reg .b64 %rd<20>;
\tld.param.u64 %rd1, [k_param_0];
\tld.param.u64 %rd2, [k_param_1];
\tmov.u32 %r1, %tid.x;
\tmov.b32 %r30, global_smem;
STAGE
\tSRC
\tmul.wide.u32 %rd3, %r2, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r4, [%rd4];
\tadd.f32 %r5, %r4, 0f3F800000;
\tDST
\tshl.b32 %r7, %r6, 2;
\tadd.s32 %r8, %r30, %r7;
\tPRED st.shared.b32 [%r8], %r5;
\tbar.sync 0;
\tshl.b32 %r9, %r1, 4;
\tadd.s32 %r10, %r30, %r9;
\tldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r11}, [%r10];
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.b32 [%rd6], %r11;
\tret;
}
"""
IDENT_SRC = "mov.b32 %r2, %r1;"
IDENT_DST = "mov.b32 %r6, %r1;"
SWZ_SRC = "xor.b32 %r2, %r1, 5;"
SWZ_DST = "xor.b32 %r6, %r1, 5;"
STAGE_ONE = """\tmul.wide.u32 %rd10, %r1, 4;
\tadd.s64 %rd11, %rd1, %rd10;
\tld.global.b32 %r20, [%rd11];
\tshl.b32 %r21, %r1, 2;
\tadd.s32 %r22, %r30, %r21;
\tst.shared.b32 [%r22], %r20;
\tbar.sync 0;"""
STAGE_TWO = (
    STAGE_ONE
    + """
\tst.shared.b32 [%r22+128], %r20;
\tcp.async.ca.shared.global [%r22+256], [%rd11], 4;
\tcp.async.wait_group 0;
\tbar.sync 0;"""
)


def kernel(src: str, dst: str, stage: str = "", pred: str = "") -> str:
    return KERNEL.replace("STAGE", stage).replace("SRC", src).replace("DST", dst).replace("PRED", pred)


def eq(a: str, b: str) -> bool:
    sa, sb = signature(a, "ptx"), signature(b, "ptx")
    assert sa.fallback is None and sb.fallback is None, (sa.fallback, sb.fallback)
    return certified_equal(sa, sb)


def test_xor_of_thread_bits_is_exact():
    a = Poly.bits("tx", 3)
    r = bit_op("xor", [a, Poly.const(5)])
    assert r is not None
    for t in range(8):
        env = {f"tx{i}": t >> i & 1 for i in range(3)}
        v = sum(c * (1 if not m else __import__("math").prod(env[s] for s in m)) for m, c in r.terms.items())
        assert v == t ^ 5


def test_swizzled_layout_forwards_to_the_same_value():
    plain = kernel(IDENT_SRC, IDENT_DST)
    assert eq(plain, kernel(SWZ_SRC, SWZ_DST))


def test_earlier_generations_do_not_part_when_every_read_slot_is_rewritten():
    plain = kernel(IDENT_SRC, IDENT_DST)
    assert eq(plain, kernel(IDENT_SRC, IDENT_DST, STAGE_ONE))
    assert eq(kernel(IDENT_SRC, IDENT_DST, STAGE_ONE), kernel(IDENT_SRC, IDENT_DST, STAGE_TWO))


def test_other_data_in_the_slot_stays_apart():
    # the writer of word i loaded x[i], but the slot read is word i^5: out[i] = x[i^5] + 1
    assert not eq(kernel(IDENT_SRC, IDENT_DST), kernel(IDENT_SRC, SWZ_DST))
    assert not eq(kernel(IDENT_SRC, IDENT_DST, STAGE_ONE), kernel(IDENT_SRC, SWZ_DST, STAGE_ONE))


def test_slot_not_rewritten_reads_the_staged_value_and_stays_apart():
    # only lanes below 16 store: words 16..31 still hold what the staging generation wrote
    half = "setp.lt.u32 %p1, %r1, 16;\n\t@%p1"
    a = kernel(IDENT_SRC, IDENT_DST, STAGE_ONE, half)
    b = kernel(IDENT_SRC, IDENT_DST, STAGE_TWO, half)
    assert not eq(a, b)
    assert not eq(a, kernel(IDENT_SRC, IDENT_DST, STAGE_ONE))


def test_copy_not_waited_for_keeps_the_history():
    # a cp.async not waited for may land after the barrier: no forwarding, the staging counts
    nowait = STAGE_TWO.replace("\tcp.async.wait_group 0;\n", "")
    assert not eq(kernel(IDENT_SRC, IDENT_DST, nowait), kernel(IDENT_SRC, IDENT_DST, STAGE_ONE))


DIRECT = KERNEL.replace("STAGE", "").replace("SRC", IDENT_SRC).replace("DST", IDENT_DST).replace("PRED", "")
DIRECT = DIRECT.replace(
    "\tldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r11}, [%r10];", "\tmov.b32 %r11, %r5;"
).replace("\tPRED st.shared.b32 [%r8], %r5;\n\tbar.sync 0;\n", "")
# stmatrix.x1: lane i's register goes to row i/4 (address from lane i/4), byte 4 (i mod 4)
ST_ROUNDTRIP = kernel(IDENT_SRC, IDENT_DST, pred="#").replace(
    "\t# st.shared.b32 [%r8], %r5;",
    "\tshl.b32 %r12, %r1, 4;\n\tadd.s32 %r13, %r30, %r12;\n"
    "\tstmatrix.sync.aligned.m8n8.x1.shared.b16 [%r13], {%r5};",
)


def test_stmatrix_then_ldmatrix_is_the_direct_value():
    assert "stmatrix" in ST_ROUNDTRIP and "ldmatrix" not in DIRECT
    assert eq(ST_ROUNDTRIP, DIRECT)
    assert eq(kernel(SWZ_SRC, SWZ_DST, STAGE_TWO), DIRECT)


def test_stmatrix_rows_swapped_stays_apart():
    # rows written at address (lane ^ 1) * 16: lane i reads what lane i ^ 4 stored
    assert "\tshl.b32 %r12, %r1, 4;" in ST_ROUNDTRIP
    swapped = ST_ROUNDTRIP.replace(
        "\tshl.b32 %r12, %r1, 4;", "\txor.b32 %r14, %r1, 1;\n\tshl.b32 %r12, %r14, 4;"
    )
    assert not eq(swapped, DIRECT)


def test_interpolation_takes_every_value_it_was_given():
    import random

    from fixbits.checker.forward import moebius

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 5)
        syms = [f"tx{i}" for i in range(n)]
        if rng.random() < 0.5:  # affine (the fast path) or anything
            c = [rng.randint(-5, 5) for _ in range(n + 1)]
            vals = [Poly.const(c[0] + sum(c[i + 1] * (x >> i & 1) for i in range(n))) for x in range(1 << n)]
        else:
            vals = [
                Poly.const(rng.randint(-9, 9)) + Poly.sym("p:1").scale(rng.randint(0, 2))
                for _ in range(1 << n)
            ]
        m = moebius(syms, vals)
        for x in range(1 << n):
            at = Poly({})
            for mono, cf in m.terms.items():
                if all(x >> int(s[2:]) & 1 for s in mono if s.startswith("tx")):
                    at = at + Poly({tuple(s for s in mono if not s.startswith("tx")): cf})
            assert at == vals[x]


def butterfly(off: int) -> str:
    """Each lane adds its partner's value (lane ^ off) before the store: a full-warp butterfly."""
    return (
        "add.f32 %r5, %r4, 0f3F800000;\n"
        f"\tshfl.sync.bfly.b32 %r12, %r5, {off}, 31, -1;\n"
        "\tadd.f32 %r5, %r5, %r12;"
    )


def kernel_bfly(src: str, dst: str, off: int, stage: str = "") -> str:
    return kernel(src, dst, stage).replace("add.f32 %r5, %r4, 0f3F800000;", butterfly(off))


def test_butterfly_values_forward_at_the_partner_lane():
    """The stored value is x[s(t)] + 1 + (x[s(t ^ 1)] + 1): read through a layout conversion the
    shuffle leaves the tree and its operand is taken at the partner writer, so the swizzled
    layout (writer t ^ 5 of word t) meets the plain one, and the staged history drops out."""
    plain = kernel_bfly(IDENT_SRC, IDENT_DST, 1)
    assert eq(plain, kernel_bfly(SWZ_SRC, SWZ_DST, 1))
    assert eq(plain, kernel_bfly(IDENT_SRC, IDENT_DST, 1, STAGE_TWO))


def test_butterfly_of_another_distance_or_slot_stays_apart():
    plain = kernel_bfly(IDENT_SRC, IDENT_DST, 1)
    assert not eq(plain, kernel_bfly(IDENT_SRC, IDENT_DST, 2))
    assert not eq(plain, kernel_bfly(IDENT_SRC, SWZ_DST, 1))
    # a swizzled layout read as if plain: word t holds writer t ^ 5's pair, not lane t's
    assert not eq(kernel_bfly(SWZ_SRC, SWZ_DST, 1), kernel_bfly(SWZ_SRC, IDENT_DST, 1))


HALF_DST = "shr.u32 %r6, %r1, 1;"  # threads 2w and 2w + 1 write word w (and word 16 + w)
TWICE = "st.shared.b32 [%r8+64], %r5;\n\t"


def digest(text: str, has_mma: bool) -> str:
    """The signature as a kernel with (or without) tensor-core MMAs gets it: the forwarding of a
    slot several threads fill is taken in GEMM epilogues only (elsewhere the balanced collapse
    and thread_roots.read_at take such slots, for less time)."""
    sig, _ = ptx_walker(text, has_mma)(())
    assert sig.fallback is None, sig.fallback
    return sig.digest


def test_one_store_of_one_tree_by_several_threads_forwards():
    """Lanes 2w and 2w + 1 hold one butterfly total and both store it to word w: whichever lands
    last, the word holds that tree, so the read is forwarded and the staged history drops out."""
    a = kernel(IDENT_SRC, HALF_DST, "", TWICE).replace("add.f32 %r5, %r4, 0f3F800000;", butterfly(1))
    b = kernel(IDENT_SRC, HALF_DST, STAGE_TWO, TWICE).replace("add.f32 %r5, %r4, 0f3F800000;", butterfly(1))
    assert digest(a, True) == digest(b, True)
    assert digest(a, False) != digest(b, False)


def test_one_store_of_different_values_by_several_threads_is_not_forwarded():
    # without the butterfly lanes 2w and 2w + 1 store x[2w] + 1 and x[2w + 1] + 1 to one word:
    # which one the word holds is a race, so the read keeps its history
    a = kernel(IDENT_SRC, HALF_DST, "", TWICE)
    b = kernel(IDENT_SRC, HALF_DST, STAGE_TWO, TWICE)
    assert digest(a, True) != digest(b, True)
