"""A cross-warp read keyed on the stores it may see (fixbits/checker/walk.py, _visible_history):
stores that a later, unconditional, fully covering generation overwrote before the read, and the
window's offset, no longer split kernels (Triton's gemm_rowsum configs that the H200 showed equal,
session 38); a read that may still see an older copy, or reads other words, stays apart."""

from __future__ import annotations

import pytest
from test_checker_helpers import smem_head

from fixbits.checker.api import signature

pytestmark = pytest.mark.unit

HEAD = smem_head(64) + "\n".join([
    "\tmul.wide.u32 %rd3, %r2, 4;",
    "\tadd.s64 %rd4, %rd1, %rd3;",
    "\tld.global.b32 %r11, [%rd4];",
    "\tld.global.b32 %r30, [%rd4+256];",
    "\tmov.b32 %r8, global_smem;",
    "\tshl.b32 %r7, %r2, 2;",
]) + "\n"


def kernel(*, earlier: str = "", base: int = 0, store_pred: str = "", read_word: int = 0,
           looped: tuple[str, ...] = (), waited: bool = True) -> str:
    """64 threads: thread t stores x[t] at shared word base/4 + t, a barrier, then reads word
    base/4 + (t & 31) + read_word (warp 1 reads warp 0's words) and stores x[t] + it to y[t].
    ``earlier``: a shared store before that, then a barrier: "same" stores x[t + 64] at the same
    word, "elsewhere" at word 128 + t. ``looped``: cp.async copies of x[t + 64 (i + 1)] in a loop
    with a data trip count, to the same word or to word 128 (i + 1) + t, waited for after the loop
    unless not ``waited``. ``store_pred``: "upper" stores x[t] from threads 32..63 only."""
    out = [HEAD, f"\tadd.s32 %r9, %r8, {base};", "\tadd.s32 %r9, %r9, %r7;"]
    if looped:  # copies in a loop whose trip count is data (a K loop), waited after it
        out += ["\tld.global.b32 %r41, [%rd1];", "\tmov.u32 %r40, 0;", "$L__loop:"]
        for i, where in enumerate(looped):
            out.append(f"\tcp.async.ca.shared.global [%r9+{0 if where == 'same' else 512 * (i + 1)}], [%rd4+{256 * (i + 1)}], 4;")
        out += ["\tcp.async.commit_group;", "\tcp.async.wait_group 1;", "\tbar.sync 0;", "\tadd.s32 %r40, %r40, 1;",
                "\tsetp.lt.s32 %p3, %r40, %r41;", "\t@%p3 bra $L__loop;"]
        out += (["\tcp.async.wait_group 0;"] if waited else []) + ["\tbar.sync 0;"]
    if earlier == "same":
        out += ["\tst.shared.b32 [%r9], %r30;", "\tbar.sync 0;"]
    elif earlier == "elsewhere":
        out += ["\tst.shared.b32 [%r9+512], %r30;", "\tbar.sync 0;"]
    if store_pred in ("upper", "upper-signed", "lower-signed"):
        setp = {"upper": "setp.ge.u32 %p2, %r2, 32;", "upper-signed": "setp.ge.s32 %p2, %r2, 32;",
                "lower-signed": "setp.lt.s32 %p2, %r2, 32;"}[store_pred]
        out += ["\t" + setp, "\t@%p2 st.shared.b32 [%r9], %r11;"]
    else:
        out.append("\tst.shared.b32 [%r9], %r11;")
    out += [
        "\tbar.sync 0;",
        "\tand.b32 %r10, %r2, 31;",
        "\tshl.b32 %r12, %r10, 2;",
        f"\tadd.s32 %r13, %r8, {base + 4 * read_word};",
        "\tadd.s32 %r13, %r13, %r12;",
        "\tld.shared.b32 %r14, [%r13];",
        "\tmov.b32 %f1, %r14;",
        "\tmov.b32 %f2, %r11;",
        "\tadd.rn.f32 %f3, %f1, %f2;",
    ]
    out += ["\tadd.s64 %rd5, %rd2, %rd3;", "\tmov.b32 %r16, %f3;", "\tst.global.b32 [%rd5], %r16;", "\tret;", "}", ""]
    return "\n".join(out)


def _digest(text: str) -> str:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest


def test_a_predicated_store_covering_the_words_read_hides_older_copies() -> None:
    """Threads 0..31 (a signed compare of tid.x, decided per thread) overwrite words 0..31, which
    are all the exchange reads: where the waited copies landed before no longer matters."""
    same, elsewhere = kernel(looped=("same",), store_pred="lower-signed"), kernel(
        looped=("elsewhere",), store_pred="lower-signed")
    assert _digest(same) == _digest(elsewhere)


def test_hand_written_exchanges_keep_their_verdicts() -> None:
    """These small exchanges are settled by store-to-load forwarding before the history is read;
    they pin what the cut must not change: older generations and the window's offset do not
    split, other words stay apart."""
    base = _digest(kernel())
    assert _digest(kernel(earlier="same")) == _digest(kernel(earlier="elsewhere")) == base
    assert _digest(kernel(base=4096, looped=("same", "elsewhere"))) == base
    assert _digest(kernel(read_word=1)) != base


@pytest.mark.parametrize("case", ["unwaited", "partly-overwritten", "partly-overwritten-signed"])
def test_a_copy_the_read_may_still_see_stays_apart(case: str) -> None:
    """Exchanges that reach the history (forwarding gives up): a loop's cp.async copies never
    waited for before the exchange may land during it, and a store from threads 32..63 only
    (its predicate undecided, or decided per thread: it covers words 32..63, not the words
    read) leaves warp 0's words holding the copies; where the copies land must then split."""
    kw: dict[str, object] = {"waited": False} if case == "unwaited" else {
        "store_pred": "upper" if case == "partly-overwritten" else "upper-signed"}
    same, elsewhere = kernel(looped=("same",), **kw), kernel(looped=("elsewhere",), **kw)
    assert _digest(same) != _digest(elsewhere)


@pytest.fixture(scope="module")
def rowsum_ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int, int], str]:
    """Triton's sm_90 PTX of the corpus GEMM with per-tile row sums, per (BLOCK_N, BLOCK_K, stages)."""
    from test_checker_helpers import corpus_gemm_variants

    plan = [(64, 32, 2), (64, 32, 3), (64, 64, 2), (64, 64, 3), (32, 32, 3)]
    fixed = {"BLOCK_M": 64, "GROUP_M": 1, "KGROUPS": 1, "num_warps": 8}
    return corpus_gemm_variants("rowsum", (512,) * 6, ("BLOCK_N", "BLOCK_K", "num_stages"), plan, fixed,
                                str(tmp_path_factory.mktemp("triton-cache")))


def test_rowsum_configs_that_give_the_same_bytes_meet(rowsum_ptx: dict[tuple[int, int, int], str]) -> None:
    """gemm_rowsum fp16 on the H200 (run s21): BLOCK_K 32 / 64 and stages 2 / 3 at BLOCK_N 64, 8
    warps return the same bytes; the checker kept them apart through the pipeline's prologue
    copies in the row-sum exchange's history (session 38: 36 -> 16 classes, 0 false equal)."""
    digests = {k: _digest(v) for k, v in rowsum_ptx.items()}
    assert len({digests[k] for k in [(64, 32, 2), (64, 32, 3), (64, 64, 2), (64, 64, 3)]}) == 1, digests
    assert digests[(32, 32, 3)] != digests[(64, 32, 3)]  # another tile width sums other columns


def test_read_facts_follow_the_cut_history() -> None:
    """Sign facts name a read's writers by position in the kernel's shared-store list; a read keyed
    on the stores it may see holds fewer, so the facts are renumbered onto them, and facts naming
    a store the cut dropped are given up (never read against another store's value)."""
    from fixbits.checker.signs import ReadFacts

    facts = ReadFacts((((3, 0),), None, ((3, 1), (5, 0))))
    assert facts.renumbered((3, 5)) == ReadFacts((((0, 0),), None, ((0, 1), (1, 0))))
    assert facts.renumbered((5,)) is None
