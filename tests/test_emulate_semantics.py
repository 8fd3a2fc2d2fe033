"""emulate() against the GEMMDesc docstring: hand-built cases per mode and algebraic properties."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixbits.desc import EpilogueOp, GEMMDesc, KCut
from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics import blocks, formats

pytestmark = pytest.mark.unit

WG16 = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", k_loop_step=16)
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", k_loop_step=1)


def bits_equal(x: np.ndarray, y: np.ndarray) -> bool:
    return (
        x.dtype == y.dtype and x.shape == y.shape and bool(np.array_equal(formats.bits(x), formats.bits(y)))
    )


def row(values: list[float], dtype: str = "fp16") -> tuple[np.ndarray, np.ndarray]:
    """A (1, K) of the values and B (K, 1) of ones: the output is the K-sum of the values."""
    a = formats.to_dtype(np.array([values], dtype=np.float64), dtype)
    b = formats.to_dtype(np.ones((len(values), 1)), dtype)
    return a, b


def scalar(x: np.ndarray) -> float:
    return float(x.reshape(-1)[0])


# -- properties over seeded draws (ordinary and wide) --------------------------------------------


KINDS2 = st.sampled_from(["ordinary", "wide", "tiny", "subnormal", "cancel"])
SEEDS = st.integers(0, 2**31)


@settings(max_examples=12, deadline=None)
@given(
    kind=KINDS2,
    seed=SEEDS,
    dtype=st.sampled_from(["fp16", "bf16"]),
    m=st.integers(1, 6),
    n=st.integers(1, 6),
    groups=st.integers(0, 5),
)
def test_single_pass_is_a_chain_of_blocks(
    kind: str, seed: int, dtype: str, m: int, n: int, groups: int
) -> None:
    k = 16 * groups
    a = draw((m, k), dtype, kind, seed)
    b = draw((k, n), dtype, kind, seed + 1)
    got = emulate(WG16.replace(in_dtype=dtype), a, b)
    acc = np.zeros((m, n), dtype=np.float32)
    for j in range(0, k, 16):
        acc = blocks.block_fold(a[:, None, j : j + 16], b[j : j + 16].T[None, :, :], acc, blocks.HOPPER_16BIT)
    assert bits_equal(got, acc), f"seed {seed} kind {kind}"


def test_single_pass_outputs_are_not_all_zero() -> None:
    for kind in ("ordinary", "wide"):
        out = emulate(WG16, draw((4, 64), "fp16", kind, 11), draw((64, 4), "fp16", kind, 12))
        assert np.count_nonzero(out) == out.size, f"seed 11 kind {kind}"


@settings(max_examples=12, deadline=None)
@given(
    kind=KINDS2,
    seed=SEEDS,
    k=st.integers(1, 300),
    step=st.sampled_from([16, 32, 64]),
    residue=st.sampled_from(["first", "last"]),
)
def test_split_with_one_part_equals_no_split(kind: str, seed: int, k: int, step: int, residue: str) -> None:
    a = draw((3, k), "fp16", kind, seed)
    b = draw((k, 4), "fp16", kind, seed + 1)
    base = WG16.replace(k_loop_step=step, residue=residue)
    plain = emulate(base, a, b)
    for cut in (
        KCut("contiguous", count=1),
        KCut("contiguous", span=1000),
        KCut("strided", count=1, span=48),
    ):
        assert bits_equal(emulate(base.replace(k_cuts=(cut,)), a, b), plain), f"seed {seed} kind {kind} {cut}"


@settings(max_examples=12, deadline=None)
@given(kind=KINDS2, seed=SEEDS, k=st.integers(2, 200), fma=st.booleans())
def test_butterfly_over_two_lanes_equals_chain(kind: str, seed: int, k: int, fma: bool) -> None:
    a = draw((3, k), "fp16", kind, seed)
    b = draw((k, 5), "fp16", kind, seed + 1)
    base = FMA if fma else WG16
    outs = [
        emulate(base.replace(k_cuts=(KCut("contiguous", count=2, merge=m),)), a, b)
        for m in ("chain", "butterfly_up", "butterfly_down")
    ]
    assert bits_equal(outs[0], outs[1]) and bits_equal(outs[0], outs[2]), f"seed {seed} kind {kind}"


@settings(max_examples=15, deadline=None)
@given(
    m=st.integers(1, 4),
    n=st.integers(1, 4),
    k=st.integers(0, 90),
    seed=st.integers(0, 2**31),
    kind=st.sampled_from(["ordinary", "wide", "tiny"]),
)
def test_fma_path_matches_fraction_chain(m: int, n: int, k: int, seed: int, kind: str) -> None:
    a = draw((m, k), "fp16", kind, seed)
    b = draw((k, n), "fp16", kind, seed + 1)
    got = emulate(FMA.replace(out_dtype="fp32"), a, b)
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for t in range(k):
                exact = Fraction(float(a[i, t])) * Fraction(float(b[t, j])) + Fraction(acc)
                acc = float(np.float32(float(exact)))  # float(Fraction) is correctly rounded to 53 bits...
                # ...and a 24-bit value of it: recompute exactly to be safe
                acc = _rn32(exact)
            assert formats.bits(got[i, j]) == formats.bits(np.float32(acc)), f"seed {seed} at {(i, j)}"


def _rn32(x: Fraction) -> float:
    if x == 0:
        return 0.0
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    q = Fraction(2) ** (max(e, -126) - 23)
    n = mag / q
    fl = math.floor(n)
    rem = n - fl
    r = fl + 1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2) else fl
    return math.copysign(float(r * q), x)


# -- hand-built cases: one per mode ------------------------------------------------------------------


def test_residue_first_and_last_group_differently() -> None:
    # +L at 0, -L at 3, r at 5; K = 20, step 16: 'last' puts all three in one block (r truncated
    # under e_max = 20), 'first' cancels +L/-L in the 4-element turn and keeps r
    vals = [0.0] * 20
    vals[0], vals[3], vals[5] = 2.0**10, -(2.0**10), 2.0**-16
    a = formats.to_dtype(np.array([vals]), "fp16")
    b = formats.to_dtype(np.full((20, 1), 2.0**10), "fp16")
    last = emulate(WG16.replace(residue="last"), a, b)
    first = emulate(WG16.replace(residue="first"), a, b)
    assert scalar(last) == 0.0 and scalar(first) == 2.0**-6


def test_per_mma_promotion_differs_from_fast_accumulation() -> None:
    # block 1 gives 1; block 2's product 1.25 * 2^-24 is truncated to 2^-24 on the accumulator's
    # 2^-25 grid (fast: 1 + 2^-24 -> RZ 1) but added by one RN fp32 add when promoted (1 + 2^-23)
    a = formats.to_dtype(np.array([[1.0] + [0.0] * 15 + [1.25 * 2.0**-12] + [0.0] * 15]), "fp16")
    b = formats.to_dtype(np.array([[1.0]] + [[0.0]] * 15 + [[2.0**-12]] + [[0.0]] * 15), "fp16")
    fast = emulate(WG16, a, b)
    per_mma = emulate(WG16.replace(use_fast_accum=False, promotion_interval=1), a, b)
    every2 = emulate(WG16.replace(use_fast_accum=False, promotion_interval=2), a, b)
    assert scalar(fast) == 1.0
    assert scalar(per_mma) == 1.0 + 2.0**-23
    assert scalar(every2) == 1.0  # both blocks in one zero-started temporary: as fast accumulation


def test_lane_folds_up_down_and_chain() -> None:
    # four lanes holding 1, 2^-24, -1, 2^-24 (strided deal, one element per lane)
    a, b = row([1.0, 2.0**-24, -1.0, 2.0**-24])

    def cut(merge: str) -> GEMMDesc:
        return FMA.replace(k_cuts=(KCut("strided", count=4, span=1, merge=merge),))

    assert scalar(emulate(cut("butterfly_up"), a, b)) == 2.0**-24  # (1 + 2^-24) + (-1 + 2^-24)
    assert scalar(emulate(cut("butterfly_down"), a, b)) == 2.0**-23  # (1 - 1) + (2^-24 + 2^-24)
    assert scalar(emulate(cut("chain"), a, b)) == 2.0**-24


def test_strided_deal_groups_tiles_round_robin() -> None:
    # span 2, count 2: lane 0 holds tiles 0, 2 = elements 0,1,4,5; lane 1 holds 2,3,6,7
    vals = [2.0**11, 1.0, -(2.0**11), -(2.0**11), 0.0, 0.0, 2.0**11, 0.0]
    a, b = row(vals)
    d = FMA.replace(out_dtype="fp32", k_cuts=(KCut("strided", count=2, span=2),))
    # lane 0: 2048 + 1 = 2049; lane 1: -2048 - 2048 + 2048 = -2048; chain: 0 + 2049 - 2048 = 1
    assert scalar(emulate(d, a, b)) == 1.0


def test_split_k_tail_dropped_and_span_rules() -> None:
    a, b = row([1.0] * 10)

    def split(rule: str) -> GEMMDesc:
        return WG16.replace(k_cuts=(KCut("contiguous", count=3, span_rule=rule),))

    assert scalar(emulate(split("tail_dropped"), a, b)) == 9.0  # parts of 3: element 9 never summed
    assert scalar(emulate(split("floor"), a, b)) == 10.0
    assert scalar(emulate(split("ceil"), a, b)) == 10.0


def test_partial_and_merge_dtypes() -> None:
    # two parts of value 1 + 2^-12 each: fp32 partials sum to 2 + 2^-11; fp16 partials round to 1
    a, b = row([1.0, 2.0**-12, 1.0, 2.0**-12])
    base = WG16.replace(out_dtype="fp32", k_cuts=(KCut("contiguous", count=2),))
    assert scalar(emulate(base, a, b)) == 2.0 + 2.0**-11
    assert scalar(emulate(base.replace(partial_dtype="fp16"), a, b)) == 2.0
    # merge in fp16: (0 + p0) rounds to fp16 first
    assert scalar(emulate(base.replace(merge_dtype="fp16"), a, b)) == 2.0
    # three parts 1, 2^-11, 2^-11 (fp32 partials) merged in bf16: 1 + 2^-11 -> 1, then 1 again
    a3, b3 = row([1.0, 2.0**-11, 2.0**-11])
    three = WG16.replace(out_dtype="fp32", k_cuts=(KCut("contiguous", count=3),))
    assert scalar(emulate(three, a3, b3)) == 1.0 + 2.0**-10
    assert scalar(emulate(three.replace(merge_dtype="bf16"), a3, b3)) == 1.0


def test_a_narrow_merge_rounds_the_fp32_sum_again() -> None:
    # parts 1 and 2^-11 + 2^-30 merged in fp16: the fp32 sum drops 2^-30 and leaves a tie at fp16,
    # which goes to even (1.0); one rounding of the exact sum would go up to 1 + 2^-10. cuBLAS's
    # in-place split-K adds a part to an fp16 C this way (H200 run n15, a24-t24-s8-r1, session 36)
    a, b = row([1.0, 2.0**-11, 2.0**-15])
    b[2, 0] = 2.0**-15
    desc = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32",
                    use_fast_accum=True, promotion_interval=None, k_cuts=(KCut("contiguous", span=1),))
    two = desc.replace(k_cuts=(KCut("contiguous", count=2, granule=1),))
    assert scalar(emulate(two, a, b)) == 1.0 + 2.0**-11  # the fp32 merge drops 2^-30
    assert scalar(emulate(two.replace(merge_dtype="fp16"), a, b)) == 1.0  # not 1 + 2^-10


def test_nested_cuts_chained_chunks() -> None:
    # outer 2 contiguous parts, inner chunks of 2 elements each closing an accumulator
    a, b = row([2.0**11, 1.0, -(2.0**11), 0.0, 1.0, 1.0, 1.0, 1.0])
    d = FMA.replace(out_dtype="fp32", k_cuts=(KCut("contiguous", count=2), KCut("contiguous", span=2)))
    assert scalar(emulate(d, a, b)) == 5.0
    # fp16 accumulation would have lost the 1 next to 2048; fp32 chains keep it
    assert scalar(emulate(d.replace(out_dtype="fp16"), a, b)) == 5.0


def test_incoming_accumulator_is_the_block_c() -> None:
    seed = 21
    a = draw((64, 16), "fp16", "wide", seed)
    b = draw((16, 64), "fp16", "wide", seed + 1)
    c = draw((64, 64), "fp32", "wide", seed + 2)
    got = emulate(WG16, a, b, acc=c)
    want = blocks.block_fold(a[:, None, :], b.T[None, :, :], c, blocks.HOPPER_16BIT)
    assert bits_equal(got, want), f"seed {seed}"
    a8 = draw((8, 32), "fp8_e4m3", "ordinary", seed)
    b8 = draw((32, 8), "fp8_e4m3", "ordinary", seed + 1)
    c8 = draw((8, 8), "fp32", "ordinary", seed + 2)
    d8 = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", k_loop_step=32)
    got8 = emulate(d8, a8, b8, acc=c8)
    assert (formats.bits(got8) & 0x3FF == 0).all(), "fp8 fast accumulation keeps 13 fraction bits"
    assert bits_equal(got8, blocks.block_fold(a8[:, None, :], b8.T[None, :, :], c8, blocks.HOPPER_FP8))


def test_ampere_k16_is_two_blocks_of_8() -> None:
    seed = 22
    a = draw((4, 48), "bf16", "wide", seed)
    b = draw((48, 4), "bf16", "wide", seed + 1)
    d = GEMMDesc(arch="sm_80", instruction="mma", instruction_k=16, in_dtype="bf16", k_loop_step=16)
    got = emulate(d, a, b)
    acc = np.zeros((4, 4), dtype=np.float32)
    for j in range(0, 48, 8):
        acc = blocks.block_fold(a[:, None, j : j + 8], b[j : j + 8].T[None, :, :], acc, blocks.AMPERE_16BIT)
    assert bits_equal(got, acc), f"seed {seed}"


# -- output rounding and epilogues ---------------------------------------------------------------


def test_output_rounding_is_nearest_even() -> None:
    a, b = row([1.0, 2.0**-11])  # 1 + 2^-11: halfway between fp16 1 and 1 + 2^-10 -> even (1)
    assert scalar(emulate(WG16.replace(out_dtype="fp16"), a, b)) == 1.0
    a, b = row([1.0, 2.0**-11, 2.0**-20])
    assert scalar(emulate(WG16.replace(out_dtype="fp16"), a, b)) == 1.0 + 2.0**-10


@pytest.mark.parametrize("out", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_epilogues_match_float32_reference(out: str, kind: str) -> None:
    seed = 31
    a = draw((6, 32), "fp16", kind, seed)
    b = draw((32, 8), "fp16", kind, seed + 1)
    bias = draw((8,), out, "ordinary", seed + 2)
    res = draw((6, 8), out, "ordinary", seed + 3)
    gate = draw((6, 8), out, "ordinary", seed + 4)
    odt = formats.np_dtype(out)
    base = WG16.replace(out_dtype=out)
    x = emulate(base, a, b).astype(np.float32)

    def back(y: np.ndarray) -> np.ndarray:
        # float32 -> fp16 / bf16 casts are single RN roundings; the GPU's NaN is canonical
        return formats.canonical_nan(y.astype(np.float32).astype(odt))

    cases = {
        (EpilogueOp("bias"),): back(x + bias.astype(np.float32)),
        (EpilogueOp("residual"),): back(x + res.astype(np.float32)),
        (EpilogueOp("scale", 0.1),): back(x * np.float32(0.1)),
        (EpilogueOp("relu"),): back(np.where(x > 0, x, np.float32(0))),
    }
    for ops, want in cases.items():
        got = emulate(base.replace(epilogue=ops), a, b, bias=bias, residual=res, gate=gate)
        assert bits_equal(got, want), f"seed {seed} {ops}"
    # bias then relu: two roundings, in order
    got = emulate(base.replace(epilogue=(EpilogueOp("bias"), EpilogueOp("relu"))), a, b, bias=bias)
    y = back(x + bias.astype(np.float32)).astype(np.float32)
    assert bits_equal(got, back(np.where(y > 0, y, np.float32(0)))), f"seed {seed}"
    # silu_gate: silu rounded to out, then times gate rounded to out
    with np.errstate(over="ignore", invalid="ignore"):
        t = np.exp(-x.astype(np.float64)).astype(np.float32)
        silu = back(x / (np.float32(1) + t))
        want = back(silu.astype(np.float32) * gate.astype(np.float32))
    got = emulate(base.replace(epilogue=(EpilogueOp("silu_gate"),)), a, b, gate=gate)
    assert bits_equal(got, want), f"seed {seed} silu_gate"
    erf = (
        np.array([math.erf(float(v)) for v in (x * np.float32(math.sqrt(0.5))).ravel()])
        .reshape(x.shape)
        .astype(np.float32)
    )
    with np.errstate(invalid="ignore"):  # inf * 0 on overflowed fp16 outputs: NaN both sides
        want = back((x * np.float32(0.5)) * (np.float32(1) + erf))
    got = emulate(base.replace(epilogue=(EpilogueOp("gelu"),)), a, b)
    assert bits_equal(got, want), f"seed {seed} gelu"


@pytest.mark.parametrize("out", ["fp32", "fp16", "bf16"])
def test_gelu_tanh_close_to_float64_formula(out: str) -> None:
    """tanh-GELU has no independent fp32 reference here (nvcc's contraction is the model's
    assumption), so check it against the float64 formula within a few output ulps."""
    seed = 32
    a = draw((6, 16), "fp16", "ordinary", seed)
    b = draw((16, 8), "fp16", "ordinary", seed + 1)
    base = WG16.replace(out_dtype=out)
    x = emulate(base, a, b).astype(np.float64)
    got = emulate(base.replace(epilogue=(EpilogueOp("gelu_tanh"),)), a, b).astype(np.float64)
    ref = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    tol = 4 * 2.0 ** -formats.fmt(out).frac * np.maximum(np.abs(x), 1.0)
    assert (np.abs(got - ref) <= tol).all(), f"seed {seed}"
    assert np.count_nonzero(got) > 0


def test_relu_of_negative_zero_is_positive_zero() -> None:
    a, b = row([1.0, -1.0])  # exact cancellation gives +0; make -0 by a negative tiny output
    a2, b2 = row([-(2.0**-24)])
    got = emulate(
        WG16.replace(out_dtype="bf16", epilogue=(EpilogueOp("scale", 2.0**-200), EpilogueOp("relu"))), a2, b2
    )
    assert int(formats.bits(got).reshape(-1)[0]) == 0
    assert int(formats.bits(emulate(WG16, a, b)).reshape(-1)[0]) == 0


# -- errors --------------------------------------------------------------------------------------------


def test_bad_inputs_raise_clear_errors() -> None:
    a = np.zeros((2, 16), dtype=np.float16)
    b = np.zeros((16, 3), dtype=np.float16)
    with pytest.raises(ValueError, match="in_dtype is bf16"):
        emulate(WG16.replace(in_dtype="bf16"), a, b)
    with pytest.raises(ValueError, match="inner dimensions"):
        emulate(WG16, a, np.zeros((8, 3), dtype=np.float16))
    with pytest.raises(ValueError, match="2-D numpy array"):
        emulate(WG16, a.tolist(), b)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs the bias= array"):
        emulate(WG16.replace(epilogue=(EpilogueOp("bias"),)), a, b)
    with pytest.raises(ValueError, match="without k_cuts"):
        emulate(WG16.replace(k_cuts=(KCut("contiguous", count=2),)), a, b, acc=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="no block model"):
        emulate(
            GEMMDesc(arch="sm_80", instruction="mma", instruction_k=32, in_dtype="fp8_e4m3"),
            np.zeros((1, 32), formats.np_dtype("fp8_e4m3")),
            np.zeros((32, 1), formats.np_dtype("fp8_e4m3")),
        )
    with pytest.raises(TypeError, match="GEMMDesc"):
        emulate({"arch": "sm_90"}, a, b)  # type: ignore[arg-type]


def test_empty_k_gives_positive_zero() -> None:
    a = np.zeros((2, 0), dtype=np.float16)
    b = np.zeros((0, 3), dtype=np.float16)
    out = emulate(WG16, a, b)
    assert out.shape == (2, 3) and (formats.bits(out) == 0).all()


def test_cli_prints_digest_and_rejects_bad_descriptor(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import argparse

    from fixbits.emulate import add_arguments, run

    good = tmp_path / "d.yaml"
    good.write_text(WG16.to_yaml())
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--desc",
            str(good),
            "--shape",
            "3",
            "4",
            "40",
            "--kind",
            "wide",
            "--seed",
            "8",
            "--save",
            str(tmp_path / "c.npy"),
        ]
    )
    assert run(args) == 0
    out = capsys.readouterr().out
    a = draw((3, 40), "fp16", "wide", 8)
    b = draw((40, 4), "fp16", "wide", 9)
    import hashlib

    want = hashlib.sha256(emulate(WG16, a, b).tobytes()).hexdigest()
    assert f"sha256 {want}" in out
    assert bits_equal(np.load(tmp_path / "c.npy"), emulate(WG16, a, b))
    bad = tmp_path / "bad.yaml"
    bad.write_text("arch: sm_75\n")
    assert run(parser.parse_args(["--desc", str(bad), "--shape", "1", "1", "1"])) == 2
    assert "bad.yaml" in capsys.readouterr().err


@pytest.mark.parametrize(
    "desc",
    [
        WG16,
        WG16.replace(use_fast_accum=False, promotion_interval=1),
        WG16.replace(k_cuts=(KCut("contiguous", count=2),)),
        FMA,
        FMA.replace(k_cuts=(KCut("strided", count=2, span=1, merge="butterfly_down"),)),
    ],
    ids=["fast", "per_mma", "splitk", "fma", "lanes"],
)
@pytest.mark.parametrize("out", ["fp32", "fp16"])
def test_non_finite_inputs_follow_ieee_with_canonical_nan(desc: GEMMDesc, out: str) -> None:
    inf, nan = np.inf, np.nan
    a = np.array([[inf, 1.0], [nan, 1.0], [1.0, 1.0], [inf, -inf]], dtype=np.float16)
    b = np.array([[1.0, -1.0], [1.0, 1.0]], dtype=np.float16)
    got = formats.bits(emulate(desc.replace(out_dtype=out), a, b))
    pinf, ninf, qnan = (0x7F800000, 0xFF800000, 0x7FFFFFFF) if out == "fp32" else (0x7C00, 0xFC00, 0x7FFF)
    two = int(formats.bits(formats.to_dtype(np.array(2.0), out)))
    assert [[int(v) for v in row] for row in got] == [[pinf, ninf], [qnan, qnan], [two, 0], [qnan, ninf]]
