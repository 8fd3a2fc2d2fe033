"""K-group GEMM loops (tile t of the K loop into accumulator t mod G): Triton's sm_90 PTX,
compiled here. Configs of one (G, BLOCK_K) agree on bytes whatever the tile, warps and stages;
the checker must meet them and keep other BLOCK_K, G = 1, and every combination of the groups
that is not symmetric apart (it cannot see which group holds which K chunk)."""

from __future__ import annotations

import pytest
from test_checker_helpers import FakePtr, aot_variants, modelled, ptx_walker

pytestmark = pytest.mark.unit
triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _kgroup_mix(
    A, B, C, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, MIX: tl.constexpr
):
    # two accumulators over alternate K tiles; MIX picks how they reach C
    pid = tl.program_id(0)
    tn = tl.cdiv(N, BLOCK_N)
    offs_m = (pid // tn) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (pid % tn) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptr = A + offs_m[:, None] * K + offs_k[None, :]
    b_ptr = B + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, 2 * BLOCK_K):
        a = tl.load(a_ptr, mask=(k0 + offs_k)[None, :] < K, other=0.0)
        b = tl.load(b_ptr, mask=(k0 + offs_k)[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
        a2 = tl.load(a_ptr + BLOCK_K, mask=(k0 + BLOCK_K + offs_k)[None, :] < K, other=0.0)
        b2 = tl.load(b_ptr + BLOCK_K * N, mask=(k0 + BLOCK_K + offs_k)[:, None] < K, other=0.0)
        acc2 = tl.dot(a2, b2, acc2)
        a_ptr += 2 * BLOCK_K
        b_ptr += 2 * BLOCK_K * N
    if MIX == 0:
        out = acc + acc2
    elif MIX == 1:
        out = acc
    elif MIX == 2:
        out = acc2
    elif MIX == 3:
        out = 2.0 * acc + acc2
    else:
        out = acc + 2.0 * acc2
    tl.store(C + offs_m[:, None] * N + offs_n[None, :], out)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int, int, int, int], str]:
    """PTX per (MIX, BLOCK_M, BLOCK_K, num_warps, num_stages)."""
    plan = [(0, 64, 32, 4, 2), (0, 128, 32, 8, 3), (0, 64, 64, 4, 2), (1, 64, 32, 4, 2), (2, 64, 32, 4, 2),
            (3, 64, 32, 4, 2), (4, 64, 32, 4, 2)]  # fmt: skip
    args = (FakePtr(tl.float16), FakePtr(tl.float16), FakePtr(tl.float32), 512, 512, 1000)
    cache = str(tmp_path_factory.mktemp("triton-cache"))
    return aot_variants(
        _kgroup_mix,
        args,
        ("MIX", "BLOCK_M", "BLOCK_K", "num_warps", "num_stages"),
        plan,
        {"BLOCK_N": 64},
        cache,
    )


def test_one_chunk_width_meets_across_tiles_warps_and_stages(compiled: dict) -> None:
    a, b = modelled(compiled[(0, 64, 32, 4, 2)]), modelled(compiled[(0, 128, 32, 8, 3)])
    assert not a.physical and a.digest == b.digest


def test_other_chunk_width_stays_apart(compiled: dict) -> None:
    assert modelled(compiled[(0, 64, 32, 4, 2)]).digest != modelled(compiled[(0, 64, 64, 4, 2)]).digest


def test_asymmetric_combinations_keep_the_loop_whole(compiled: dict) -> None:
    """2 acc + acc2 and acc + 2 acc2 are different functions; which group the walk ranks first
    is not a fact about K, so neither may use the folds."""
    from fixbits.checker.api import settle_kgroups

    digests = {}
    for mix in (3, 4):
        walk = ptx_walker(compiled[(mix, 64, 32, 4, 2)])
        kept, loops = walk(None)
        assert loops == []
        folded, loops = walk(())
        assert loops == [2]
        swapped, _ = walk((1, 0))
        assert swapped.digest != folded.digest  # the label reaches the signature
        assert settle_kgroups(walk).digest == kept.digest
        digests[mix] = kept.digest
    assert len(set(digests.values())) == 2


def test_symmetric_sum_uses_the_folds(compiled: dict) -> None:
    from fixbits.checker.api import settle_kgroups

    walk = ptx_walker(compiled[(0, 64, 32, 4, 2)])

    folded, loops = walk(())
    assert loops == [2] and walk((1, 0))[0].digest == folded.digest
    assert settle_kgroups(walk).digest == folded.digest != walk(None)[0].digest


def test_a_chain_over_every_other_tile_stays_apart(compiled: dict) -> None:
    """acc alone (even tiles) against acc2 alone (odd tiles): the fold reads no tile order, but the
    operand key's addresses (mma_operands.py) see the odd tiles start BLOCK_K elements on."""
    assert modelled(compiled[(1, 64, 32, 4, 2)]).digest != modelled(compiled[(2, 64, 32, 4, 2)]).digest
