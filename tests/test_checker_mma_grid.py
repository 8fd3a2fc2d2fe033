"""mma.sync tiles laid out as an M x N grid of accumulators fold as one K walk, and a softmax
epilogue's exchanges are keyed on what they may see (session 40: Triton's GEMM + row softmax at
BLOCK_M 32 runs mma.sync, whose accumulators share an A or a B operand only along a grid line;
the H200 returned one set of bytes for all 54 configs, the checker had made 30 classes)."""

from __future__ import annotations

import pytest

from fixbits.checker import forward as fwd
from fixbits.checker.api import signature
from fixbits.checker.forms import Poly
from fixbits.checker.node import Node, int_node
from fixbits.checker.walk import _joined_every_step

pytestmark = pytest.mark.unit


def _op(name: str) -> Node:
    return Node("load", ("shared", 4), (int_node(Poly.sym(name)),))


def test_a_grid_of_tiles_walks_one_k_slice() -> None:
    """(A0, B0) and (A1, B1) share no operand but both share one with (A0, B1): one K slice."""
    a0, a1, b0, b1 = _op("p:a0"), _op("p:a1"), _op("p:b0"), _op("p:b1")
    grid = [((a0, b0),), ((a0, b1),), ((a1, b0),), ((a1, b1),)]
    assert _joined_every_step(grid)


def test_k_groups_stay_apart() -> None:
    """Two chains that share nothing at a step (tile t into accumulator t mod 2) are not one walk,
    nor are chains of different lengths."""
    a0, a1, b0, b1 = _op("p:a0"), _op("p:a1"), _op("p:b0"), _op("p:b1")
    assert not _joined_every_step([((a0, b0),), ((a1, b1),)])
    assert not _joined_every_step([((a0, b0), (a1, b1)), ((a0, b1), (a0, b0))])
    assert not _joined_every_step([((a0, b0),), ((a0, b0), (a0, b0))])


def test_a_shared_read_renames_by_its_address_only() -> None:
    """Forwarding renames a stored tree's thread bits to the writer's: in a shared read only the
    address is the reader's, the history's bits are its writers' and stay as they are."""
    hist = Node("hist", (), (Node("st", ("st", 4, 0, 0), (
        int_node(Poly.sym("smem") + Poly.sym("tx0") * Poly.const(4)), int_node(Poly.sym("tx1")), Node("true"))),))
    read = Node("xwarp", (4, 1), (int_node(Poly.sym("smem") + Poly.sym("tx1") * Poly.const(4)), hist))
    assert fwd.renamable(read, {})
    at = fwd.concretize(read, {"tx0": 1, "tx1": 1})
    assert at.kids[1] is hist
    assert at.kids[0].poly == Poly.sym("smem") + Poly.const(4)


@pytest.fixture(scope="module")
def softmax_ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int, int], str]:
    """Triton's sm_90 PTX of the corpus GEMM + row softmax, per (BLOCK_M, num_warps, stages)."""
    from test_checker_helpers import corpus_gemm_variants

    plan = [(32, 4, 2), (32, 4, 3), (64, 8, 2), (64, 8, 3)]
    fixed = {"BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 1, "KGROUPS": 1}
    return corpus_gemm_variants("softmax", (512, 128, 512, 512, 128, 128), ("BLOCK_M", "num_warps", "num_stages"),
                                plan, fixed, str(tmp_path_factory.mktemp("triton-cache")))


def _digest(text: str) -> str:
    s = signature(text, "ptx")
    assert s.fallback is None, s.fallback
    return s.digest


def test_softmax_configs_that_give_the_same_bytes_meet(softmax_ptx: dict[tuple[int, int, int], str]) -> None:
    """gemm_softmax fp16 on the H200 (run s21): stages 2 and 3 return the same bytes at BLOCK_M 32
    (mma.sync, 4 warps) and at BLOCK_M 64 (8 warps, the output tile relaid through shared memory)."""
    d = {k: _digest(v) for k, v in softmax_ptx.items()}
    assert "mma.sync" in softmax_ptx[(32, 4, 2)]
    assert d[(32, 4, 2)] == d[(32, 4, 3)], d
    assert d[(64, 8, 2)] == d[(64, 8, 3)], d
