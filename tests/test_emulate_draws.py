"""emulate_draws: D operand draws in one pass give, bit for bit, what D emulate calls give.

Why: the prober checks each candidate reading on several draws of one shape, and the emulator's
cost is its Python loop over K (s16 review); batching the draws is only allowed if the raw bits
of every draw are unchanged, for every family the prober emulates."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits import emulate as E
from fixbits.desc import GEMMDesc, KCut
from fixbits.inputs import draw
from fixbits.numerics.formats import bits

pytestmark = pytest.mark.unit

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16")
WORKSPACE = FMA.replace(
    k_cuts=(
        KCut("strided", count=3, span=256, merge="reduce_1block"),
        KCut("strided", count=128, span=2, merge="butterfly_down"),
        KCut("strided", count=2, span=1, merge="chain"),
    )
)
FAMILIES = {
    "single-pass": TC.replace(k_loop_step=128, residue="first"),
    "per-mma promotion": TC.replace(use_fast_accum=False, promotion_interval=4, k_loop_step=32),
    "split-K fp16 partials": TC.replace(
        out_dtype="fp16",
        partial_dtype="fp16",
        merge_dtype="fp16",
        k_cuts=(KCut("contiguous", count=3, granule=8, aligned_granule=64),),
    ),
    "split-K bf16 butterfly": TC.replace(
        in_dtype="bf16",
        out_dtype="bf16",
        k_cuts=(KCut("contiguous", count=4, granule=8, merge="butterfly_up"),),
    ),
    "wide instruction (sm_80 mma k16, L 8)": GEMMDesc(
        arch="sm_80", instruction="mma", instruction_k=16, in_dtype="fp16", k_loop_step=32
    ),
    "fp8 fast accumulation": GEMMDesc(
        arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3"
    ),
    "GEMV lane tree": FMA.replace(k_cuts=(KCut("strided", count=8, span=64, merge="butterfly_down"),)),
    "GEMV capped lanes, fp16 out": FMA.replace(
        out_dtype="fp16",
        k_cuts=(KCut("strided", count=16, span=64, span_rule="capped", merge="butterfly_down"),),
    ),
    "workspace GEMV (reduce_1block)": WORKSPACE,
    "scale + relu epilogue": TC.replace(
        epilogue=(
            GEMMDesc.from_dict(
                {**TC.to_dict(), "epilogue": [{"kind": "scale", "value": 0.5}, {"kind": "relu"}]}
            ).epilogue
        )
    ),
}


def _draws(
    desc: GEMMDesc, d: int, m: int, n: int, k: int, kinds: tuple[str, ...], seed: int
) -> tuple[np.ndarray, np.ndarray]:
    a = np.stack([draw((m, k), desc.in_dtype, kinds[i % len(kinds)], seed + 2 * i) for i in range(d)])
    b = np.stack([draw((k, n), desc.in_dtype, kinds[i % len(kinds)], seed + 2 * i + 1) for i in range(d)])
    return a, b


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seed", [3, 1017])
def test_batched_draws_equal_per_draw_bits(family: str, seed: int) -> None:
    desc = FAMILIES[family]
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    k = int(rng.integers(40, 900)) if desc.instruction != "fma" else int(rng.integers(40, 400))
    d = int(rng.integers(2, 5))
    a, b = _draws(desc, d, m, n, k, ("ordinary", "wide", "cancel"), seed)
    got = bits(np.ascontiguousarray(E.emulate_draws(desc, a, b)))
    for i in range(d):
        want = bits(np.ascontiguousarray(E.emulate(desc, a[i], b[i])))
        assert np.array_equal(got[i], want), f"seed={seed} family={family} draw={i} shape={m}x{n}x{k}"


@pytest.mark.parametrize("seed", [5, 77])
def test_batched_draws_equal_per_draw_bits_across_row_chunks(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache-sized row chunks cut through every draw at once (a tiny chunk forces many)."""
    monkeypatch.setattr(E, "_CHUNK_BYTES", 64)
    desc = FAMILIES["split-K fp16 partials"]
    a, b = _draws(desc, 3, 7, 5, 333, ("wide", "ordinary"), seed)
    got = bits(np.ascontiguousarray(E.emulate_draws(desc, a, b)))
    monkeypatch.setattr(E, "_CHUNK_BYTES", 1 << 21)
    for i in range(3):
        want = bits(np.ascontiguousarray(E.emulate(desc, a[i], b[i])))
        assert np.array_equal(got[i], want), f"seed={seed} draw={i}"


def test_emulate_draws_refuses_unpaired_shapes_and_side_arrays() -> None:
    a, b = _draws(TC, 2, 2, 3, 40, ("ordinary",), 1)
    with pytest.raises(ValueError, match="do not pair"):
        E.emulate_draws(TC, a, b[:1])
    with pytest.raises(ValueError, match="3-D"):
        E.emulate_draws(TC, a[0], b[0])
    with_bias = TC.replace(
        epilogue=GEMMDesc.from_dict({**TC.to_dict(), "epilogue": [{"kind": "bias"}]}).epilogue
    )
    with pytest.raises(ValueError, match="bias"):
        E.emulate_draws(with_bias, a, b)
