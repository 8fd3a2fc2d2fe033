"""The operand key of the K-loop exemption (mma_operands.py): Triton's sm_90 PTX, compiled here.
Configs of one GEMM source still meet; a loop that multiplies other operands (a scaled tile, a
tile of another pointer, the operands' pointers swapped, a tile read 8 columns on) or walks K
otherwise (every other tile, half of K), or multiplies the tiles of A and B the other way round
from their load order, stays apart. A tile whose rows are permuted in registers before the store
is the exemption's documented gap (a strict xfail): the fold names no element."""

from __future__ import annotations

from typing import Any

import pytest
from test_checker_helpers import FakePtr, aot_variants, modelled

pytestmark = pytest.mark.unit
triton = pytest.importorskip("triton")
tl = triton.language


@triton.jit
def _gemm_variant(
    A,
    B,
    C,
    D,
    M,
    N,
    K,
    VAR: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # VAR 0: C = A @ B; 1: C = A @ (2 B); 2: C = B @ A (square); 3: B read 8 columns on; 4: C = A @ D;
    # 5: the tiles of A and B loaded as in 0, multiplied B-tile @ A-tile (square tiles);
    # 6: C = A @ B with the tile's rows interleaved before the store (row 2i <- i, 2i + 1 <- BLOCK_M / 2 + i)
    # 7: every other K tile only (which tiles depends on BLOCK_K); 8: the first half of K only;
    # 9: A read 8 along K
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    shift = 8 if VAR == 3 else 0
    a_ptr = A + offs_m[:, None] * K + (offs_k + (8 if VAR == 9 else 0))[None, :]
    b_ptr = B + offs_k[:, None] * N + (offs_n + shift)[None, :]
    if VAR == 2:
        a_ptr = B + offs_m[:, None] * K + offs_k[None, :]
        b_ptr = A + offs_k[:, None] * N + offs_n[None, :]
    if VAR == 4:
        b_ptr = D + offs_k[:, None] * N + offs_n[None, :]
    step = 2 * BLOCK_K if VAR == 7 else BLOCK_K
    stop = K // 2 if VAR == 8 else K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, stop, step):
        a = tl.load(a_ptr)
        b = tl.load(b_ptr)
        if VAR == 1:
            b = b * 2.0
        if VAR == 5:
            acc = tl.dot(b, a, acc)
        else:
            acc = tl.dot(a, b, acc)
        a_ptr += step
        b_ptr += step * N
    if VAR == 6:
        acc = tl.reshape(
            tl.permute(tl.reshape(acc, (2, BLOCK_M // 2, BLOCK_N)), (1, 0, 2)), (BLOCK_M, BLOCK_N)
        )
    tl.store(C + offs_m[:, None] * N + offs_n[None, :], acc)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[int, int, int, int, int], str]:
    """PTX per (VAR, BLOCK_M, BLOCK_K, num_warps, num_stages)."""
    plan = [(0, 64, 32, 4, 2), (0, 64, 64, 4, 3), (5, 64, 64, 4, 3), (5, 64, 64, 8, 2)]
    plan += [(v, 64, 32, 4, 3) for v in (0, 1, 2, 3, 4, 6, 7, 8, 9)] + [(7, 64, 64, 4, 3)]
    plan += [(v, *c) for v in (0, 3) for c in [(64, 32, 4, 1), (128, 32, 8, 3)]]
    args = (FakePtr(tl.float16), FakePtr(tl.float16), FakePtr(tl.float32), FakePtr(tl.float16), 512, 512, 512)
    cache = str(tmp_path_factory.mktemp("triton-cache"))
    return aot_variants(
        _gemm_variant,
        args,
        ("VAR", "BLOCK_M", "BLOCK_K", "num_warps", "num_stages"),
        plan,
        {"BLOCK_N": 64},
        cache,
    )


@pytest.mark.parametrize("var", [0, 3], ids=["plain", "shifted-tile"])
def test_configs_of_one_source_meet(compiled: dict, var: int) -> None:
    sigs = [modelled(compiled[k]) for k in [(var, 64, 32, 4, 1), (var, 64, 32, 4, 3), (var, 128, 32, 8, 3)]]
    assert not sigs[0].physical
    assert len({s.digest for s in sigs}) == 1


@pytest.mark.parametrize(
    "var",
    [1, 2, 3, 4, 9, 7, 8],
    ids=[
        "scaled-operand",
        "swapped-pointers",
        "shifted-tile",
        "other-pointer",
        "a-read-8-along-k",
        "every-other-tile",
        "half-of-k",
    ],
)
def test_other_operands_stay_apart(compiled: dict, var: int) -> None:
    from fixbits.checker.api import compare

    base, other = modelled(compiled[(0, 64, 32, 4, 3)]), modelled(compiled[(var, 64, 32, 4, 3)])
    verdict = compare(base, other)
    assert not verdict.equal
    assert base.digest != other.digest


def test_tiles_multiplied_against_their_load_order_stay_apart(compiled: dict) -> None:
    """A, B loaded in that order and multiplied B-tile @ A-tile: the wgmma descriptors name the
    staged tiles the other way round (square tiles, so the shapes agree); its configs meet."""
    swapped = [modelled(compiled[k]).digest for k in [(5, 64, 64, 4, 3), (5, 64, 64, 8, 2)]]
    assert swapped[0] == swapped[1] != modelled(compiled[(0, 64, 64, 4, 3)]).digest


def test_a_loop_that_skips_tiles_keeps_its_chunk(compiled: dict) -> None:
    """Every other K tile at BLOCK_K 32 and 64 sums different elements: not one class."""
    assert modelled(compiled[(7, 64, 32, 4, 3)]).digest != modelled(compiled[(7, 64, 64, 4, 3)]).digest


def test_the_difference_is_named(compiled: dict) -> None:
    from fixbits.checker.api import compare

    verdict = compare(modelled(compiled[(0, 64, 32, 4, 3)]), modelled(compiled[(1, 64, 32, 4, 3)]))
    assert "operands" in verdict.reason, verdict.reason


_GAPS = [
    pytest.param(base, other, id=name, marks=pytest.mark.xfail(strict=True, reason=f"known gap, {why}"))
    for base, other, name, why in [
        (
            (0, 64, 32, 4, 3),
            (6, 64, 32, 4, 3),
            "rows-interleaved-epilogue",
            "the paper's K-loop exemption: a fold names no accumulator element, so a tile whose "
            "rows are permuted among a thread's own accumulator registers before the store signs "
            "like the tile stored as computed",
        ),
    ]
]


@pytest.mark.parametrize(("base", "other"), _GAPS)
def test_known_gaps_stay_apart(compiled: dict, base: tuple, other: tuple) -> None:
    assert modelled(compiled[base]).digest != modelled(compiled[other]).digest


def test_check_says_what_it_trusts(compiled: dict, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`fixbits check` on two configs of one GEMM: equal, with the exemption named as trusted."""
    import json

    from fixbits.cli import main

    a, b = tmp_path / "a.ptx", tmp_path / "b.ptx"
    a.write_text(compiled[(0, 64, 32, 4, 2)])
    b.write_text(compiled[(0, 128, 32, 8, 3)])
    assert main(["check", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "equal" and out[1].startswith("note: tensor-core K loops"), out
    assert main(["check", str(a), str(b), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["equal"] is True and len(rec["trusts"]) == 1


def _load(terms: dict[tuple[str, ...], int]) -> Any:
    from fixbits.checker.forms import Poly
    from fixbits.checker.node import Node, int_node

    return Node("load", ("global",), (int_node(Poly(terms)),))


@pytest.mark.parametrize(
    ("loads", "want"),
    [
        # thread bits, blocks and opaque tokens drop out; the least start is kept; the move per MMA
        # is the iteration term over the MMAs an iteration chains (2 here)
        (
            [{("p:1",): 1, (): 16, ("tx0",): 32}, {("p:1",): 1, (): 16, ("p:5",): 32, ("IT1", "p:5"): 64}],
            ("p:1@16+32*p:5",),
        ),
        # a prefetched iteration starts further on: the prologue's start is the least
        ([{("p:0",): 1, (): 64, ("IT1",): 64}, {("p:0",): 1}], ("p:0@0+32",)),
        # no single least start (a negative stride term): every minimal one is kept
        ([{("p:0",): 1, ("p:5",): -2, (): 8}, {("p:0",): 1, (): 4}], ("p:0@4|8 + -2*p:5+",)),
        # two pointers, each its own start; another loop's iteration symbol is not this loop's move
        ([{("p:0",): 1, ("IT2",): 8}, {("p:1",): 1, ("p:5",): 16}], ("p:0@0+", "p:1@16*p:5+")),
    ],
    ids=["shifted", "prefetched", "no-least", "two-pointers"],
)
def test_addresses(loads: list[dict], want: tuple[str, ...]) -> None:
    from fixbits.checker.mma_operands import addresses, load_addresses

    assert addresses(load_addresses([_load(t) for t in loads]), "IT1", 2) == want


@pytest.mark.parametrize(
    ("x", "steps", "want"),
    [
        # K index steps 32 (the constant 33 holds the step too): the bound is K (p:5)
        ({(): 33, ("IT1",): 32, ("p:5",): -1}, 2, "('le', 's'):-1*p:5"),
        # a loop that steps two chunks for one chunk of MMAs: the chunk joins the key
        ({(): 65, ("IT1",): 64, ("p:5",): -1}, 2, "('le', 's'):-1*p:5 step 2 of chunk 32"),
        # a bound computed with an opaque token (cdiv(K, BLOCK_K), K // 2): not read
        ({(): 2, ("IT1",): 1, ("Ti:ab",): -1}, 2, "opaque"),
    ],
    ids=["k-index", "skips-tiles", "opaque-bound"],
)
def test_bound(x: dict, steps: int, want: str) -> None:
    from fixbits.checker.forms import Poly
    from fixbits.checker.mma_operands import bound
    from fixbits.checker.node import Node, int_node

    cond = Node("cmp", ("le", "s"), (int_node(Poly(x)), int_node(Poly.const(0))))
    assert bound(cond, "IT1", ("wgmma", "k16"), steps) == want
