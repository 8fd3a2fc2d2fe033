"""Launch-shape specialisation (fixbits/checker/launch.py): masked loads decided for the launch,
+0.0 padding folded out of fp32 add trees with a canon marker, the digest tagged."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_entry

from fixbits.checker.api import signature
from fixbits.checker.launch import LaunchShape

# 64 threads; thread t loads K registers at column t + 64 k of row ctaid.x, each masked by
# column < N (the register pre-set to +0.0, as Triton emits), sums them and stores its partial.
HEAD = ptx_entry(["ptr", "ptr", "u32"], 64, regs=(40, 200, 100)) + """\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
\tmul.lo.s32 %r4, %r3, 4096;
\tmov.b32 %r5, 0;
"""
TAIL = """\tmul.lo.s32 %r190, %r3, 64;
\tadd.s32 %r191, %r190, %r2;
\tmul.wide.u32 %rd90, %r191, 4;
\tadd.s64 %rd91, %rd2, %rd90;
\tst.global.b32 [%rd91], %rOUT;
\tret;
}
"""


def masked_loads(k: int) -> str:
    out = []
    for j in range(k):
        out.append(f"\tadd.s32 %r{10 + j}, %r2, {64 * j};")  # column
        out.append(f"\tsetp.lt.s32 %p{j}, %r{10 + j}, %r1;")
        out.append(f"\tadd.s32 %r{50 + j}, %r4, %r{10 + j};")
        out.append(f"\tmul.wide.s32 %rd{10 + j}, %r{50 + j}, 4;")
        out.append(f"\tadd.s64 %rd{50 + j}, %rd1, %rd{10 + j};")
        out.append(f"\tmov.u32 %r{100 + j}, %r5;")
        out.append(f"\t@%p{j} ld.global.b32 {{ %r{100 + j} }}, [ %rd{50 + j} + 0 ];")
    return "\n".join(out) + "\n"


def chain(k: int, op: str = "add.f32") -> tuple[str, int]:
    lines, cur = [], 100
    for j in range(1, k):
        lines.append(f"\t{op} %r{140 + j}, %r{cur}, %r{100 + j};")
        cur = 140 + j
    return "\n".join(lines) + "\n", cur


def kernel(k: int, op: str = "add.f32", body: str | None = None, out: int | None = None) -> str:
    if body is None:
        body, out = chain(k, op)
    return HEAD + masked_loads(k) + body + TAIL.replace("%rOUT", f"%r{out}")


def at(n: int) -> LaunchShape:
    return LaunchShape.of({"k_param_2": n})


def sig(text: str, launch: LaunchShape | None = None) -> str:
    s = signature(text, "ptx", launch=launch)
    assert s.fallback is None, s.fallback
    return s.digest


def test_wider_padding_merges_under_specialisation_only():
    # N = 100: registers 2.. are beyond every thread's column (>= 128): pads. K = 4 and K = 8 are
    # both canon(r0 + r1) per thread; unspecialised they stay apart
    assert sig(kernel(4), at(100)) == sig(kernel(8), at(100))
    assert sig(kernel(4)) != sig(kernel(8))


def test_canon_marker_keeps_a_tree_without_padding_apart():
    # K = 2 sums r0 + r1 (both real for some thread: may be -0); K = 4 adds +0: canon(r0 + r1)
    assert sig(kernel(2), at(100)) != sig(kernel(4), at(100))


def test_other_values_and_unspecialised_are_apart():
    assert sig(kernel(4), at(100)) != sig(kernel(4), at(101))
    assert sig(kernel(4), at(100)) != sig(kernel(4))
    # index and name are one specialisation
    assert sig(kernel(4), LaunchShape.of({2: 100})) == sig(kernel(4), at(100))


def test_fma_and_other_adds_do_not_fold():
    # a pad in fma's addend or in an add of another rounding is not folded: the trees keep
    # their length
    for op in ("add.rz.f32", "add.ftz.f32"):
        assert sig(kernel(4, op), at(100)) != sig(kernel(8, op), at(100)), op
    # max is a set (maxsets.py): one +0 pad or five is the same set of values, so the chains
    # meet for this launch, and stay apart unspecialised (every register a masked load)
    assert sig(kernel(4, "max.f32"), at(100)) == sig(kernel(8, "max.f32"), at(100))
    assert sig(kernel(4, "max.f32")) != sig(kernel(8, "max.f32"))
    # fma(a, b, +0) is not a * b (a * b = -0 gives +0): a pad addend stays in the fma
    fma = "\tfma.rn.f32 %r151, %r100, %r101, %r102;\n"
    mul = "\tmul.rn.f32 %r151, %r100, %r101;\n"
    assert sig(kernel(4, body=fma, out=151), at(100)) != sig(kernel(4, body=mul, out=151), at(100))


def test_folding_does_not_move_a_real_leaf():
    # ((r0 + r1) + pad) + ... vs (r0 + pad) + r1: both canon(r0 + r1) = equal values; but
    # (r0 + (r1 + r0)) + pad keeps its own shape
    a = "\tadd.f32 %r150, %r100, %r101;\n\tadd.f32 %r151, %r150, %r102;\n"
    b = "\tadd.f32 %r150, %r100, %r102;\n\tadd.f32 %r151, %r150, %r101;\n"
    c = "\tadd.f32 %r150, %r101, %r100;\n\tadd.f32 %r152, %r150, %r100;\n\tadd.f32 %r151, %r152, %r102;\n"
    d = "\tadd.f32 %r150, %r101, %r100;\n\tadd.f32 %r152, %r150, %r101;\n\tadd.f32 %r151, %r152, %r102;\n"
    sa, sb = sig(kernel(3, body=a, out=151), at(100)), sig(kernel(3, body=b, out=151), at(100))
    assert sa == sb
    assert sig(kernel(3, body=c, out=151), at(100)) != sig(kernel(3, body=d, out=151), at(100))
    assert sig(kernel(3, body=c, out=151), at(100)) != sa


def test_decided_and_undecided_masks():
    from fixbits.checker.node import render

    def root(text: str, launch: LaunchShape) -> str:
        return render(signature(text, "ptx", launch=launch).outputs[0].roots[0].value, 8)

    # N = 32: register 0 is real for threads < 32 only (kept as today's masked load), register 1
    # is a pad everywhere: canon(masked r0), apart from r0 alone
    assert root(kernel(2), at(32)).startswith("canon(masked(")
    assert sig(kernel(1), at(32)) != sig(kernel(2), at(32))
    # N = 64: register 0 is real everywhere: the plain load
    assert root(kernel(2), at(64)).startswith("canon(load")


@pytest.mark.parametrize(
    "launch, needle",
    [
        (LaunchShape.of({"k_param_9": 1}), "'k_param_9' is not a parameter"),
        (LaunchShape.of({7: 1}), "index 7 out of range"),
        (LaunchShape.of({"k_param_0": 1}), "'k_param_0' is not an integer scalar"),
        (LaunchShape.of({"k_param_2": 1 << 40}), "'k_param_2': 1099511627776 does not fit 32 bits"),
    ],
)
def test_malformed_launch_names_the_parameter(launch, needle):  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        signature(kernel(2), "ptx", launch=launch)


def test_malformed_values_are_rejected_at_construction():
    with pytest.raises(ValueError, match="'N'.*not an integer"):
        LaunchShape.of({"N": 1.5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="grid"):
        LaunchShape.of({}, grid=(0,))


def test_unspecialised_signature_unchanged_by_the_module():
    # the walk without a launch takes no specialised path: same digest as a walk that never
    # heard of one (the digest recorded for this text before launch.py existed)
    base = signature(kernel(4), "ptx")
    again = signature(kernel(4), "ptx", launch=None)
    assert base.digest == again.digest


@pytest.mark.parametrize("block_m", [1, 2])
def test_real_triton_row_sum_wider_tiles_merge(tmp_path, monkeypatch, block_m):  # type: ignore[no-untyped-def]
    """Triton's own sm_90 PTX of the corpus row sum at N = 1000: BLOCK_N = 1024, 2048 and 4096
    (N_MULT 1, 2, 4) are one class for this launch, apart unspecialised. 2048 and 4096 pad whole
    registers (canon(partial)); 1024 has none, but its last register is a pad for threads
    104..127, so the row's sum is provably never -0 and the wider tiles' canon marker drops.
    BLOCK_M = 2 stores select(tx0 == 0, row 0, shfl(select(tx0 == 0, row 1, row 0), 1)): each
    arm is proven only at the threads that take it (Session 8c)."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests, corpus_family_inputs

    fam, mod, shape, inputs = corpus_family_inputs("row_sum", "fp32", monkeypatch, tmp_path)
    blocks = [(("BLOCK_M", block_m), ("N_MULT", m)) for m in (1, 2, 4)]
    spec, plain = corpus_digests(mod, fam.module, inputs, shape, "fp32", False, blocks)
    assert spec[0] == spec[1] == spec[2]
    assert plain[0] != plain[1] and plain[1] != plain[2]


def test_prune_specialises_only_the_named_integer_arguments():
    from fixbits.checker.compile import Compiled
    from fixbits.checker.prune import EquivalencePrune

    c = Compiled("k", "ptx", "", 4, 1, ("X", "Y", "M", "N", "stride_m"))
    args = {"X": object(), "Y": object(), "M": 4096, "N": 1000, "stride_m": 1000}
    assert EquivalencePrune().launch_of(c, args) is None  # opt-in
    assert EquivalencePrune(specialise=("N",)).launch_of(c, args) == LaunchShape.of({3: 1000})
    assert EquivalencePrune(reference="text", specialise=("N",)).launch_of(c, args) is None


# the block reduction of the chained partials: a butterfly over each warp, lane 0 of each warp
# stores its total to shared memory, thread 0 adds the two warps' totals and stores the row
SMEM = ".shared .align 4 .b8 red_smem[8];\n"


def block_reduce(k: int, mask: str = "-1", every_lane_stores: bool = False) -> str:
    body, cur = chain(k)
    for j, off in enumerate((16, 8, 4, 2, 1)):
        m = mask if j == 0 else "-1"
        body += f"\tshfl.sync.bfly.b32 %r{160 + 2 * j}, %r{cur}, {off}, 31, {m};\n"
        body += f"\tadd.f32 %r{161 + 2 * j}, %r{cur}, %r{160 + 2 * j};\n"
        cur = 161 + 2 * j
    if every_lane_stores:
        return (
            HEAD.replace(".visible", SMEM + ".visible")
            + masked_loads(k)
            + body
            + TAIL.replace("%rOUT", f"%r{cur}")
        )
    body += f"""\tand.b32 %r180, %r2, 31;
\tsetp.eq.s32 %p30, %r180, 0;
\tshr.u32 %r181, %r2, 5;
\tshl.b32 %r182, %r181, 2;
\tmov.u32 %r183, red_smem;
\tadd.s32 %r184, %r183, %r182;
\t@%p30 st.shared.b32 [%r184], %r{cur};
\tbar.sync 0;
\tld.shared.b32 %r185, [red_smem];
\tld.shared.b32 %r186, [red_smem+4];
\tadd.f32 %r187, %r185, %r186;
\tsetp.eq.s32 %p31, %r2, 0;
\tmul.wide.u32 %rd90, %r3, 4;
\tadd.s64 %rd91, %rd2, %rd90;
\t@%p31 st.global.b32 [%rd91], %r187;
\tret;
}}
"""
    return HEAD.replace(".visible", SMEM + ".visible") + masked_loads(k) + body


def test_root_proven_not_minus_zero_drops_the_canon_marker():
    # N = 100: register 1 (columns 64..127) is a pad for threads 36..63 only (masked, lane-mixed);
    # K = 4 adds two all-pad registers: canon(partial). The row's sum holds a pad (warp 1's
    # total is +0 or more, never -0), so the root is never -0 and canon(root) = root: one class
    assert sig(block_reduce(2), at(100)) == sig(block_reduce(4), at(100))
    assert sig(block_reduce(2)) != sig(block_reduce(4))
    # other N: another specialisation (never equal to this one)
    assert sig(block_reduce(2), at(100)) != sig(block_reduce(2), at(101))


def test_root_that_may_be_minus_zero_keeps_the_marker():
    # N = 128: both registers of K = 2 are real for every thread, no pad reaches the root: the
    # row sum is -0 when every element is -0, where K = 4's padded sum is +0
    assert sig(block_reduce(2), at(128)) != sig(block_reduce(4), at(128))
    # every lane stores its warp's total: warp 0 (columns 0..31 and 64..95, all real) may be -0
    assert sig(block_reduce(2, every_lane_stores=True), at(100)) != sig(
        block_reduce(4, every_lane_stores=True), at(100)
    )


def test_shuffle_that_is_not_a_whole_warp_bit_move_keeps_the_marker():
    # membermask 0xffff: lanes 16..31 are not in the mask (their result is undefined): the canon
    # marker is not moved through the shuffle, the trees stay apart
    assert sig(block_reduce(2, mask="65535"), at(100)) != sig(block_reduce(4, mask="65535"), at(100))


# each thread stores select(p, partial, first element): at N = 96 register 1 (columns 64 + t) is
# a pad exactly for warp 1 (threads 32..63), so the partial is provably never -0 there; K = 4
# adds two all-pad registers (canon(partial)), K = 2 does not
def select_root(k: int, pred: str) -> str:
    body, cur = chain(k)
    body += pred + f"\tselp.b32 %r199, %r{cur}, %r100, %p35;\n"
    return HEAD + masked_loads(k) + body + TAIL.replace("%rOUT", "%r199")


WARP = "\tshr.u32 %r195, %r2, 5;\n\tsetp.eq.u32 %p35, %r195, {w};\n"


def test_select_arm_proven_only_where_it_is_taken():
    # p = (warp == 1): the partial is stored only by warp 1, where it is never -0: the marker
    # drops in that arm alone (the arm is proven over the threads that take it), one class
    assert sig(select_root(2, WARP.format(w=1)), at(96)) == sig(select_root(4, WARP.format(w=1)), at(96))
    # unspecialised: apart
    assert sig(select_root(2, WARP.format(w=1))) != sig(select_root(4, WARP.format(w=1)))
    # p = (warp == 0): warp 0 stores the partial, which is -0 when both its elements are: apart
    assert sig(select_root(2, WARP.format(w=0)), at(96)) != sig(select_root(4, WARP.format(w=0)), at(96))
    # N = 128: no pad in the partial for any thread: apart
    assert sig(select_root(2, WARP.format(w=1)), at(128)) != sig(select_root(4, WARP.format(w=1)), at(128))


def test_select_on_an_undecided_predicate_stays_conservative():
    # p = (ctaid.x == 0) with no grid given, or a data-dependent p: each arm is proven over every
    # storing thread, warp 0 may store a -0 partial: apart
    block = "\tsetp.eq.u32 %p35, %r3, 0;\n"
    assert sig(select_root(2, block), at(96)) != sig(select_root(4, block), at(96))
    data = "\tsetp.gt.f32 %p35, %r100, %r101;\n"
    assert sig(select_root(2, data), at(96)) != sig(select_root(4, data), at(96))
    # the same predicate over a wider thread-bit form (|a - b| may reach 2^16): not decided
    wide = "\tmul.lo.s32 %r196, %r2, 4096;\n\tsetp.eq.u32 %p35, %r196, 131072;\n"
    assert sig(select_root(2, wide), at(96)) != sig(select_root(4, wide), at(96))


# the two-rows-per-program idiom (row_sum BLOCK_M = 2): s = select(p, first, partial) is
# shuffled from lane t ^ 1 and selected again: at threads where p holds (warp 1, even lanes) the
# store is the partial of lane t ^ 1 (odd, warp 1: a pad there); elsewhere the first element
def shuffled_select_root(k: int, which: int, shfl_pred: str = "") -> str:
    body, cur = chain(k)
    body += f"\tand.b32 %r195, %r2, 33;\n\tsetp.eq.u32 %p35, %r195, {which};\n"
    body += f"\tselp.b32 %r197, %r100, %r{cur}, %p35;\n"
    body += f"\t{shfl_pred}shfl.sync.bfly.b32 %r198, %r197, 1, 31, -1;\n"
    body += "\tselp.b32 %r199, %r198, %r100, %p35;\n"
    return HEAD + masked_loads(k) + body + TAIL.replace("%rOUT", "%r199")


def test_select_arm_proven_through_a_shuffle_at_the_source_lanes():
    assert sig(shuffled_select_root(2, 32), at(96)) == sig(shuffled_select_root(4, 32), at(96))
    assert sig(shuffled_select_root(2, 32)) != sig(shuffled_select_root(4, 32))
    # p = (warp 0, even lane): the partial comes from warp 0's odd lanes, which may be -0: apart
    assert sig(shuffled_select_root(2, 0), at(96)) != sig(shuffled_select_root(4, 0), at(96))
    # a predicated shuffle (lanes that do not run keep their register): not passed through
    p = "@%p0 "
    assert sig(shuffled_select_root(2, 32, p), at(96)) != sig(shuffled_select_root(4, 32, p), at(96))


@pytest.mark.parametrize("warps", [1, 2])
def test_real_triton_row_sum_rows_per_block_merge_at_their_own_grids(tmp_path, monkeypatch, warps):  # type: ignore[no-untyped-def]
    """Triton's sm_90 row sum at N = 1000 with BLOCK_M = 1 and 4 rows per program, BLOCK_N = 1024
    and 2048, each signed for the launch it runs with (grid cdiv(M, BLOCK_M)): one class. Four
    rows hand their totals out through ``st.shared.v4`` + ``ldmatrix`` (the pads' canon marker is
    lifted through that read, PTXWalk._lift_ldmatrix), and the grid's numbers are not part of the
    digest. A grid one block too large (the row mask is then undecided in the last block) and
    another N stay apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_family_inputs

    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.checker.launch import corpus_launch
    from fixbits.checker.soundness import Case
    from fixbits.corpus.common import Config

    fam, mod, shape, inputs = corpus_family_inputs("row_sum", "fp32", monkeypatch, tmp_path)
    digests = []
    last = None
    for block_m in (1, 4):
        for n_mult in (1, 2):
            case = Case(fam.name, "fp32", False, (("BLOCK_M", block_m), ("N_MULT", n_mult)), warps, 1)
            with capture_launches(gpu_target("sm_90")) as got:
                mod.launch(inputs, shape, Config(case.blocks, warps, 1), False)
            (c,) = got
            launch = corpus_launch(fam.module, shape, case.label())
            assert launch is not None and launch.grid is not None
            digests.append(signature(c.asm, "ptx", launch=launch).digest)
            last = (c.asm, launch)
    assert len(set(digests)) == 1, digests
    assert last is not None
    asm, launch = last
    over = LaunchShape.of(dict(launch.ints), (launch.grid[0] + 1,))
    assert signature(asm, "ptx", launch=over).digest != digests[0]
    other_n = LaunchShape.of({**dict(launch.ints), 3: 999}, launch.grid)
    assert signature(asm, "ptx", launch=other_n).digest != digests[0]
