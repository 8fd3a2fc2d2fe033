"""CPU gate on the installed Triton's code generation (no GPU): the pinned kernels compiled to PTX
for sm_90 keep the structural facts the tree relies on. The PTX does not fix the bytes by itself;
the GPU suites do. These catch a Triton release that changes the lowering under us."""

from __future__ import annotations

import re

import pytest

from fixbits.corpus.aot import compile_entry
from fixbits.corpus.common import Config
from fixbits.corpus.registry import entry

_SHFL = re.compile(r"shfl\.sync\.bfly\.b32\s+\S+,\s*\S+,\s*(\d+),")


def _shuffle_offsets(ptx: str) -> list[int]:
    return [int(x) for x in _SHFL.findall(ptx)]


@pytest.mark.parametrize("warps", [1, 4, 16])
def test_pinned_row_sum_shuffles_count_up(warps: int) -> None:
    """Row reduction: the butterfly offsets of the pinned tree run 1, 2, 4, 8, 16 (neighbours
    first); the free lowering runs them 16, 8, 4, 2, 1."""
    e = entry("row_sum")
    cfg = Config((("BLOCK_M", 1), ("N_MULT", 1)), warps, 1)
    shape = {"M": 64, "N": 4096}
    pinned = compile_entry(e, "fp32", cfg, True, shape=shape)[0].ptx
    free = compile_entry(e, "fp32", cfg, False, shape=shape)[0].ptx
    po = _shuffle_offsets(pinned)
    fo = _shuffle_offsets(free)
    assert po and fo, f"warps={warps}: no butterfly shuffles found (pinned {len(po)}, free {len(fo)})"
    first = [o for i, o in enumerate(po) if i == 0 or o != po[i - 1]]
    assert first[:5] == [1, 2, 4, 8, 16], f"warps={warps}: pinned offsets in order {first}"
    ffirst = [o for i, o in enumerate(fo) if i == 0 or o != fo[i - 1]]
    assert ffirst[:5] == [16, 8, 4, 2, 1], f"warps={warps}: free offsets in order {ffirst}"


def test_pinned_adds_are_rounded_and_uncontracted() -> None:
    """sum(x*x): the pinned tree adds with add.rn.f32 (never fused into an fma with a product, no
    flush-to-zero); the free lowering fuses products into fma.rn.f32."""
    e = entry("rmsnorm")
    cfg = e.configs()[0]
    pinned = compile_entry(e, "fp32", cfg, True, cpu_shape=True)[0].ptx
    free = compile_entry(e, "fp32", cfg, False, cpu_shape=True)[0].ptx
    assert "add.rn.f32" in pinned, "pinned rmsnorm has no add.rn.f32"
    assert "add.rn.ftz.f32" not in pinned, "pinned tree flushes subnormals"
    assert "fma.rn.f32" in free, "free rmsnorm shows no contraction: the test lost its contrast"


@pytest.mark.parametrize("name", ["col_sum", "mid_axis_sum", "layernorm_bwd", "gemm_colsum", "inductor_red_mean"])
def test_every_corpus_kernel_compiles_pinned_for_sm90(name: str) -> None:
    e = entry(name)
    for cfg in (e.configs()[0], e.configs()[-1]):
        ks = compile_entry(e, e.dtypes[-1], cfg, True)
        assert all(".entry" in k.ptx for k in ks), f"{name} {cfg.label()}: no entry point"
        assert all("add.rn.f32" in k.ptx for k in ks), (
            f"{name} {cfg.label()}: no pinned adds in {[k.function for k in ks if 'add.rn.f32' not in k.ptx]}")
