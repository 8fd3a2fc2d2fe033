"""Block / thread split of a root's byte offset (fixbits/checker/coord_split.py): a row-scaled
store whose row stride is a number (launch specialisation, or a constant) is relative when its
thread part stays inside one row, and only then."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_entry

from fixbits.checker.api import signature
from fixbits.checker.coord_split import split_coordinate, split_group
from fixbits.checker.forms import Poly

ROW_SCALE = """\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
\tmul.wide.u32 %rd4, %r3, 4;
\tadd.s64 %rd5, %rd3, %rd4;
\tadd.s64 %rd5, %rd5, {srow};
\tld.global.b32 %r4, [%rd5];
\tmul.lo.s32 %r5, %r3, {row};
"""


def scale_rows(threads: int, regs: int, row: int = 64, srow: int = 0, width: int | None = None) -> str:
    """y[r, c] = x[r, c] * s[r + srow] for c < width (default: the row): ``threads`` threads,
    ``regs`` registers each (column t + threads * j), rows of ``row`` fp32 elements."""
    width = threads * regs if width is None else width
    out = [ptx_entry(["ptr", "ptr", "ptr"], threads) + ROW_SCALE.format(row=row, srow=4 * srow)]
    for j in range(regs):
        out.append(f"\tadd.s32 %r{10 + j}, %r2, {threads * j};")
        out.append(f"\tadd.s32 %r{20 + j}, %r5, %r{10 + j};")
        out.append(f"\tmul.wide.s32 %rd{10 + j}, %r{20 + j}, 4;")
        out.append(f"\tadd.s64 %rd{20 + j}, %rd1, %rd{10 + j};")
        out.append(f"\tld.global.b32 %r{30 + j}, [%rd{20 + j}];")
        out.append(f"\tmul.f32 %r{40 + j}, %r{30 + j}, %r4;")
        out.append(f"\tadd.s64 %rd{30 + j}, %rd2, %rd{10 + j};")
        out.append(f"\tst.global.b32 [%rd{30 + j}], %r{40 + j};")
    assert width == threads * regs
    return "\n".join(out) + "\n\tret;\n}\n"


def sig(text: str) -> tuple[str, bool]:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest, s.physical


def test_layouts_of_one_row_function_merge():
    # 64 threads x 1 register and 32 threads x 2 registers store the same y: relative, equal
    a, pa = sig(scale_rows(64, 1))
    b, pb = sig(scale_rows(32, 2))
    assert not pa and not pb
    assert a == b


def test_another_row_scalar_stays_apart():
    # s[r + 1] is another function of the element: apart, whatever the layout
    assert sig(scale_rows(64, 1))[0] != sig(scale_rows(64, 1, srow=1))[0]
    assert sig(scale_rows(32, 2))[0] != sig(scale_rows(64, 1, srow=1))[0]


def test_overlapping_rows_are_not_split():
    # row stride 32 elements but 64 columns per program: rows overlap, the thread part leaves
    # [0, 2^k), so the offset is not split and the root stays physical
    d, physical = sig(scale_rows(64, 1, row=32))
    assert physical
    assert d != sig(scale_rows(32, 2, row=32))[0]


def test_other_row_strides_stay_apart():
    # stride 64 vs 128 elements (the second program stores the first half of a wider row)
    assert sig(scale_rows(64, 1))[0] != sig(scale_rows(64, 1, row=128))[0]


def test_split_is_exact_or_refused():
    blk = Poly({("ctaid.x",): 256})
    thr = Poly({("tx0",): 4, ("tx1",): 8}) + Poly.const(16)
    sc = split_coordinate(blk + thr)
    assert sc is not None and sc.k == 8
    # a neighbour's row start and the element itself
    assert split_group(Poly({("ctaid.x",): 64}), sc) == Poly({("OUT[|blk8]/4",): 1})
    assert split_group(thr + Poly.const(4), sc) == Poly({("OUT[|thr8]/1",): 1}) + Poly.const(4)
    # the thread part reaches 2^k: refused
    assert split_coordinate(blk + Poly({("tx0",): 4, ("tx1",): 256})) is None
    # a product of a block id and a thread bit; a block id the coordinate lacks; thread terms
    # that are not a multiple of the thread part
    assert split_coordinate(Poly({("ctaid.x", "tx0"): 256}) + thr) is None
    assert split_group(Poly({("ctaid.y",): 256}), sc) is None
    assert split_group(Poly({("tx0",): 4}), sc) is None


@pytest.mark.parametrize("n_mult", [1])
def test_real_triton_pinned_rmsnorm_num_warps_merge_specialised(tmp_path, monkeypatch, n_mult):  # type: ignore[no-untyped-def]
    """Triton's sm_90 PTX of the pinned RMSNorm at N = 4096 (BLOCK_N = N): specialised, the row
    stride is a number and the stored y = x * rstd(row) * w needs the block / thread split to be
    relative; num_warps 2 and 4 then meet (they did unspecialised too)."""
    pytest.importorskip("triton")
    from test_checker_helpers import corpus_family_inputs

    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.checker.launch import LaunchShape
    from fixbits.corpus.common import Config

    fam, mod, shape, inputs = corpus_family_inputs("rmsnorm", "fp32", monkeypatch, tmp_path)
    n = shape["N"]
    launch = LaunchShape.of({"rmsnorm_kernel_param_4": n, "rmsnorm_kernel_param_5": n}, (shape["M"],))
    digests = []
    for w in (2, 4):
        with capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, Config((("N_MULT", n_mult),), w, 1), True)
        (c,) = got
        s = signature(c.asm, "ptx", launch=launch)
        assert s.fallback is None and not s.physical
        digests.append(s.digest)
    assert digests[0] == digests[1]
