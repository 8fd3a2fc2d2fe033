"""TMA stores through a descriptor the kernel built itself (tensormap.replace + cp_fenceproxy):
the box a store reads is known from the descriptor's fields, so when the latest barrier
generation wrote every byte of it with one coordinate-free tree the output is that tree, whatever
the box, the swizzle or the thread layout; a tile that is not proven so stays physical."""

from __future__ import annotations

import pytest
from test_checker_helpers import modelled, ptx_kernel

from fixbits.checker.api import certified_equal, signature
from fixbits.checker.signature import KernelSignature

pytestmark = pytest.mark.unit

# one warp: thread 0 fills a descriptor template at shared offset 0 and publishes it to the
# scratch pointer; after a barrier every thread stores one f32 word (x[0] + 1, or what VALUE says)
# at word DST of shared memory (over the template, as Triton reuses it); after a second barrier
# thread 0 stores the box at tile (32 * ctaid.x, ctaid.y) through the descriptor.
KERNEL = ptx_kernel(
    [".u64", ".u64", ".u64", ".u32", ".u32"],
    32,
    """\tld.param.u64 %rd1, [k_param_0];
\tld.param.u64 %rd2, [k_param_1];
\tld.param.u64 %rd3, [k_param_2];
\tld.param.u32 %r20, [k_param_3];
\tld.param.u32 %r21, [k_param_4];
\tmov.u32 %r1, %tid.x;
\tmov.b32 %r30, global_smem;
\tcvt.u64.u32 %rd4, %r30;
\tsetp.eq.s32 %p1, %r1, 0;
\tmul.wide.u32 %rd5, %r20, STRIDE;
\t@%p1 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd4 + 0], %rd2;
\t@%p1 tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd4 + 0], 0x1;
\t@%p1 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd4 + 0], 0x0, BOX0;
\t@%p1 tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd4 + 0], 0x1, BOX1;
\t@%p1 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd4 + 0], 0x0, %r20;
\t@%p1 tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd4 + 0], 0x1, %r21;
\t@%p1 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%rd4 + 0], 0x0, %rd5;
\t@%p1 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd4 + 0], 0x0, 0x1;
\t@%p1 tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd4 + 0], 0x1, 0x1;
\t@%p1 tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd4 + 0], 0x7;
\t@%p1 tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%rd4 + 0], 0x0;
\t@%p1 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd4 + 0], SWZ;
\t@%p1 tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%rd4 + 0], 0x0;
\t@%p1 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd3 + 0], [%rd4 + 0], 0x80;
\tmov.u32 %r9, %ctaid.x;
\tshl.b32 %r10, %r9, 5;
\tmov.u32 %r11, %ctaid.y;
\tmov.b32 %r31, 0;
EARLY
\tbar.sync 0;
LATE
\tVALUE
\tadd.f32 %r5, %r4, 0f3F800000;
\tDST
\tshl.b32 %r7, %r6, 2;
\tadd.s32 %r8, %r30, %r7;
\tst.shared.b32 [%r8], %r5;
\tbar.sync 0;
AFTER
\t@%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd3, {%r10, %r11}], [%r30];
\tcp.async.bulk.commit_group;
\tcp.async.bulk.wait_group.read 0;
\tret;
""",
    target="sm_90a",
    smem_align=1024,
)
UNIFORM = "ld.global.b32 %r4, [%rd1];"
PER_THREAD = """mul.wide.u32 %rd6, %r1, 4;
\tadd.s64 %rd7, %rd1, %rd6;
\tld.global.b32 %r4, [%rd7];"""
IDENT = "mov.b32 %r6, %r1;"
SWIZZLED = "xor.b32 %r6, %r1, 5;"
# a TMA load of 128 bytes into the box's bytes (completion on an mbarrier at offset 2048)
TMA_LOAD = """\tadd.s32 %r32, %r30, 2048;
\t@%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r30], [%rd3, {%r10, %r11}], [%r32];"""


def kernel(**kw: str) -> str:
    parts = {"STRIDE": "4", "BOX0": "0x20", "BOX1": "0x1", "SWZ": "0x0", "EARLY": "", "LATE": "",
             "VALUE": UNIFORM, "DST": IDENT, "AFTER": ""}  # fmt: skip
    parts.update(kw)
    text = KERNEL
    for k, v in parts.items():
        text = text.replace(k, v)
    return text


def sig(text: str) -> KernelSignature:
    s: KernelSignature = modelled(text)
    return s


def proven(s: KernelSignature) -> bool:
    """The store became one relative root: the tile's tree in the output's coordinates."""
    return not s.physical and [r.value.kind for o in s.outputs for r in o.roots] == ["tma_store"]


def test_uniform_tile_is_one_relative_root_through_the_descriptors_pointer():
    s = sig(kernel())
    assert proven(s)
    assert [o.param for o in s.outputs] == ["p:1"]  # the pointer inside the descriptor, not the scratch
    assert s.effects == ()  # descriptor fields are not effects (box sizes are speed knobs)


def test_thread_layout_and_swizzle_do_not_part():
    base = sig(kernel())
    assert certified_equal(base, sig(kernel(DST=SWIZZLED)))
    assert certified_equal(base, sig(kernel(SWZ="0x3")))  # 128-byte rows: a permutation within each row


def test_an_earlier_generations_tma_load_into_the_box_does_not_part():
    # the load lands before the second generation's stores (anything else is a race)
    assert certified_equal(sig(kernel()), sig(kernel(EARLY=TMA_LOAD)))


def test_per_thread_values_are_not_one_tree():
    s = sig(kernel(VALUE=PER_THREAD))
    assert not proven(s)
    assert not certified_equal(s, sig(kernel()))


def test_box_larger_than_what_the_generation_wrote_is_not_proven():
    s = sig(kernel(BOX1="0x2"))  # 256 bytes, 128 written
    assert not proven(s)
    assert not certified_equal(s, sig(kernel()))


def test_swizzle_span_other_than_the_row_is_not_proven():
    assert not proven(sig(kernel(SWZ="0x2")))  # 64-byte span over 128-byte rows


def test_different_global_stride_stays_apart():
    a, b = sig(kernel()), sig(kernel(STRIDE="8"))
    assert proven(a) and proven(b)
    assert not certified_equal(a, b)


def test_tma_load_in_the_latest_generation_is_not_proven():
    assert not proven(sig(kernel(LATE=TMA_LOAD)))


def test_store_after_the_last_barrier_is_not_proven():
    assert not proven(sig(kernel(AFTER="\tst.shared.b32 [%r30], %r5;")))


def test_store_without_a_descriptor_built_here_is_not_proven():
    text = kernel().replace(
        "\t@%p1 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
        "[%rd3 + 0], [%rd4 + 0], 0x80;\n",
        "",
    )
    assert not proven(sig(text))


def test_fields_of_an_earlier_publication_are_not_reused():
    # the template is published twice; the second time only the swizzle is replaced, so the
    # descriptor the store names has no box, no address: not followed
    publish = (
        "\t@%p1 tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned "
        "[%rd3 + 0], [%rd4 + 0], 0x80;\n"
    )
    again = "\t@%p1 tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd4 + 0], 0x0;\n" + publish
    text = kernel().replace(publish, publish + again)
    assert not proven(sig(text))


def test_real_triton_tma_gemm_configs_are_one_class(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Triton's own PTX for sm_90 (compiled here, no GPU): the TMA-store GEMM of the corpus at two
    tile shapes and two pipeline depths is one relative class (the H200 measured one byte class
    over all 140 of its configs per dtype)."""
    triton = pytest.importorskip("triton")
    from fixbits.checker.partition import compile_case
    from fixbits.checker.soundness import Case, load_families

    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path))
    fam = next(f for f in load_families() if f.name == "gemm_tma")
    got = []
    for bm, stages in ((64, 2), (128, 3)):
        blocks = (("BLOCK_M", bm), ("BLOCK_N", 64), ("BLOCK_K", 64), ("GROUP_M", 1))
        got.append(compile_case(fam, Case(fam.name, "fp16", False, blocks, 4, stages), "sm_90"))
    assert all(not g.fallbacks and not g.physical for g in got), [g.fallbacks for g in got]
    assert got[0].texts != got[1].texts  # different kernels
    assert got[0].digest == got[1].digest


def test_explanations_name_the_descriptor_field_and_the_unproven_store():
    from fixbits.checker.api import compare

    base = sig(kernel())
    stride = compare(base, sig(kernel(STRIDE="8"))).reason
    assert "descriptor differs in its global stride 0" in stride and "8*p:3" in stride
    unproven = compare(sig(kernel(VALUE=PER_THREAD)), base).reason
    assert unproven.startswith("B's TMA store is proven") and "A's is not" in unproven


def test_a_layout_field_not_replaced_is_not_proven():
    text = kernel().replace(
        "\t@%p1 tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%rd4 + 0], 0x0, %rd5;\n", ""
    )
    assert "global_stride" not in text
    assert not proven(sig(text))


_PUBLISH_ARGS = "[%rd3 + 0], [%rd4 + 0], 0x80"
_STORE_ARGS = "[%rd3, {%r10, %r11}], [%r30];"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("tensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd4 + 0], 0x1", "tensormap.replace.tile.rank.shared::cta.b1024.b32"),
        ("[%rd4 + 0], 0x0, 0x20", "[%rd4 + 0], %r1, 0x20"),
        ("[%rd4 + 0], 0x7", "[%rd4 + 0], 0x7, 0x1, 0x2"),
        ("tensormap.replace.tile.fill_mode.shared::cta.b1024.b32", "tensormap.replace"),
        (_PUBLISH_ARGS, "[%rd3 + 0]"),
        (_PUBLISH_ARGS, ""),
        (_STORE_ARGS, "[%rd3, {%r10, %r11}], [%r30 + %r1];"),
        (_STORE_ARGS, "[%rd3, {%r10, %r11}];"),
    ],
    ids=["replace-no-operands", "replace-register-index", "replace-extra-operands", "replace-no-field",
         "publish-one-operand", "publish-no-operands", "store-unreadable-source", "store-no-source"],
)  # fmt: skip
def test_malformed_descriptor_instructions_never_crash_nor_equal(old: str, new: str):
    base = kernel()
    assert old in base
    s = signature(base.replace(old, new), "ptx")  # a text fallback is allowed, a crash is not
    assert not certified_equal(s, sig(base))
