"""Values read back from another thread (session 32). Three rules, each tested on hand-written
PTX for what it takes and on Triton's own sm_90 PTX for the merges the H200 measured:

* a shared-memory read that one writer's store reaches is that writer's value, unspecialised
  too (thread_roots._same_at): a layout conversion's read-back (ldmatrix, ld.shared) of a
  middle-axis sum no longer leaves the root physical;
* ``shfl.sync.idx`` over the full warp with clamp 31 reads its operand at the lane its lane
  form names at each thread (thread_roots._idx_lane);
* an output whose block stores several rows is split at the bit that signs its roots with the
  fewest distinct trees (coord_split.split_bits): every row then reads as the first row, as a
  block of one row does.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_checker_helpers import corpus_family_inputs, modelled, ptx_entry

from fixbits.checker.api import signature

HEAD = (
    ptx_entry(["ptr", "ptr"], 32)
    + """\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
\tshl.b32 %r4, %r3, 5;
"""
)

TAIL = """\tmul.wide.s32 %rd5, %r3, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.b32 [%rd6], %r7;
\tret;
}
"""


def _from_lane(lane: int) -> str:
    """y[block] = x[32 block + lane], every thread storing the value lane ``lane`` loaded, which it
    receives through ``shfl.sync.idx``."""
    return (
        HEAD
        + f"""\tadd.s32 %r5, %r4, %r2;
\tmul.wide.s32 %rd3, %r5, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r6, [%rd4];
\tshfl.sync.idx.b32 %r7, %r6, {lane}, 31, -1;
"""
        + TAIL
    )


def _direct(lane: int) -> str:
    """y[block] = x[32 block + lane], every thread loading that element itself."""
    return (
        HEAD
        + f"""\tadd.s32 %r5, %r4, {lane};
\tmul.wide.s32 %rd3, %r5, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r7, [%rd4];
"""
        + TAIL
    )


def test_an_index_shuffle_reads_the_lane_it_names() -> None:
    a = modelled(_from_lane(31))
    assert not a.physical
    assert a.digest == modelled(_direct(31)).digest
    assert a.digest != modelled(_from_lane(30)).digest


def test_an_index_shuffle_with_a_clamp_stays_an_exchange() -> None:
    """With clamp 15 (two 16-lane segments) the lane read is not the lane operand alone: the
    root keeps its shuffle and its physical form."""
    text = _from_lane(31).replace("%r6, 31, 31, -1;", "%r6, 31, 15, -1;")
    assert modelled(text).physical


def _mid_axis_digests(monkeypatch: Any, tmp_path: Any, points: list[tuple[int, int, int]]) -> list[str]:
    """Unspecialised digests (mid_axis_sum has no launch_ints: launch mode signs it so) of the
    free-order middle-axis sum, fp32, at (BLOCK_B, BLOCK_C, warps) points, from Triton's PTX."""
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config

    _, mod, shape, inputs = corpus_family_inputs("mid_axis_sum", "fp32", monkeypatch, tmp_path)
    out = []
    for bb, bc, w in points:
        with capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, Config((("BLOCK_B", bb), ("BLOCK_C", bc)), w, 1), False)
        (c,) = got
        s = signature(c.asm, "ptx")
        assert s.fallback is None, s.fallback
        out.append(s.digest)
    return out


def test_real_triton_middle_axis_sum_meets_across_tile_shapes(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The H200 measured (BLOCK_B, BLOCK_C) = (1, 32) and (2, 16) as one class at 2 warps (the
    partials cross warps through shared memory and come back through ldmatrix) and at 1 warp
    (they come back through shfl.sync.idx); (1, 16) apart from them."""
    pytest.importorskip("triton")
    two = _mid_axis_digests(monkeypatch, tmp_path, [(1, 32, 2), (2, 16, 2), (1, 16, 2)])
    assert two[0] == two[1] and two[2] != two[0]
    one = _mid_axis_digests(monkeypatch, tmp_path, [(1, 64, 1), (2, 32, 1), (1, 32, 1)])
    assert one[0] == one[1] and one[2] != one[0]


def test_real_triton_inductor_softmax_meets_across_rows_per_block(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """TorchInductor's persistent softmax, fp32, 2 warps: the H200 measured XBLOCK 1, 2 and 4 as
    one class, pinned and free each; under the launch they meet (split at the row pitch's bit);
    pinned and free stay apart."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_digests

    fam, mod, shape, inputs = corpus_family_inputs("inductor_per_softmax", "fp32", monkeypatch, tmp_path)
    blocks = [(("XBLOCK", x),) for x in (1, 2, 4)]
    pinned, _ = corpus_digests(mod, fam.module, inputs, shape, "fp32", True, blocks, num_warps=2)
    free, _ = corpus_digests(mod, fam.module, inputs, shape, "fp32", False, blocks, num_warps=2)
    assert len(set(pinned)) == 1 and len(set(free)) == 1
    assert pinned[0] != free[0]
