"""Spike draws separate readings that a narrow output hides from ordinary and wide draws.

The black box is the emulator with a known descriptor; the readings are the K-loop steps that
phase B left ambiguous for fp16->fp16 answers on the H200 (run s14/n14)."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.backends import EmulatorBackend
from fixbits.desc import GEMMDesc
from fixbits.probe import spikes
from fixbits.probe.recover import verify_draws


def _readings(dtype: str) -> list[GEMMDesc]:
    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype=dtype, out_dtype=dtype,
                    k_loop_step=64, residue="first")  # fmt: skip
    return [base, base.replace(k_loop_step=128), base.replace(k_loop_step=32)]


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_spike_draws_settle_the_k_loop_step_on_a_narrow_output(dtype: str) -> None:
    truth, *wrong = _readings(dtype)
    box = EmulatorBackend(truth)
    m, n, k = 24, 20, 741  # K mod 32, 64, 128: 5, 37, 101 (the three readings part here)
    ok, _ = verify_draws(box, [truth, *wrong], m, n, k, seed=3, draws=4, cells=16, kinds=(spikes.KIND,))
    assert ok == [True, False, False], f"seed 3: spike draws kept {ok}"


def test_the_plant_cancels_and_is_the_same_on_numpy_and_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 300)).astype(np.float16)
    b = rng.standard_normal((300, 4)).astype(np.float16)
    pa, pb = spikes.plant(a.copy(), b.copy(), 7, "fp16")
    ta, tb = spikes.plant(torch.from_numpy(a.copy()), torch.from_numpy(b.copy()), 7, "fp16")
    assert np.array_equal(pa.view(np.int16), ta.numpy().view(np.int16))
    assert np.array_equal(pb.view(np.int16), tb.numpy().view(np.int16))
    pairs = spikes.positions(300, 7)
    assert len(pairs) > 16 and all(0 < k2 - k1 <= 64 for k1, k2 in pairs)
    cols = [k for p in pairs for k in p]
    assert len(cols) == len(set(cols)), "a column planted twice breaks the cancellation"
    planted = sum(pa[:, k1].astype(np.float64)[:, None] * pb[k1].astype(np.float64)
                  + pa[:, k2].astype(np.float64)[:, None] * pb[k2].astype(np.float64) for k1, k2 in pairs)  # fmt: skip
    assert not np.any(planted), "the planted pairs must cancel exactly"


def test_unsupported_dtype_is_named() -> None:
    with pytest.raises(ValueError, match="fp32.*supported: fp16, bf16"):
        spikes.plant(np.zeros((1, 4)), np.zeros((4, 1)), 0, "fp32")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_sweep_redraws_a_spike_draw_cell_for_cell(dtype: str) -> None:
    """The CPU check rebuilds the sampled rows and columns of a device spike draw exactly."""
    pytest.importorskip("torch")
    from fixbits.probe.sweep import device_operands, draw_kinds, sampled_operands, seeds

    assert spikes.KIND in draw_kinds(dtype) and spikes.KIND not in draw_kinds("fp32")
    m, n, k = 9, 7, 333
    sa, sb = seeds(41, 2)
    a, b = device_operands(m, n, k, dtype, spikes.KIND, sa, sb, "cpu")
    rows, cols = [0, 3, 8], [1, 6]
    rec = {"m": m, "n": n, "k": k, "dtype": dtype,
           "draws": [{"kind": spikes.KIND, "seeds": [sa, sb], "rows": rows, "cols": cols}]}  # fmt: skip
    a_r, b_c, sizes = sampled_operands(rec)
    assert sizes == [(3, 2)]
    want_a, want_b = a[rows].float().numpy(), b[:, cols].float().numpy()
    assert np.array_equal(a_r.astype(np.float32).view(np.int32), want_a.view(np.int32))
    assert np.array_equal(b_c.astype(np.float32).view(np.int32), want_b.view(np.int32))
    assert np.count_nonzero(want_a == 2.0 ** (15 if dtype == "fp16" else 20)) >= 8 * 3, "no spike planted"


def _split_readings() -> tuple[GEMMDesc, GEMMDesc]:
    """An a24-like split-K answer (H100 s36: K-loop steps 32 and 64 with the residue first both
    survived 8 settling draws on each of two shapes): the steps part only in one split part's
    first few groups."""
    from fixbits.desc import KCut

    truth = GEMMDesc(arch="sm_90", instruction="mma", instruction_k=8, in_dtype="fp16", out_dtype="fp16",
                     use_fast_accum=True, promotion_interval=None, k_loop_step=64, residue="first",
                     k_cuts=(KCut("contiguous", count=7, granule=8, merge="chain"),), merge_dtype="fp16")
    return truth, truth.replace(k_loop_step=32)


def test_straddling_pairs_settle_what_random_spikes_leave() -> None:
    from fixbits.emulate import group_starts

    truth, wrong = _split_readings()
    box, k, seed = EmulatorBackend(truth), 3061, 3
    starts = [group_starts(d, k) for d in (truth, wrong)]
    assert len(starts[0] ^ starts[1]) == 8, sorted(starts[0] ^ starts[1])
    pairs = spikes.straddling(starts, k, 1)
    assert pairs and all(any(k1 < b <= k2 for b in starts[0] ^ starts[1]) for k1, k2 in pairs), pairs
    rand, _ = verify_draws(box, [truth, wrong], 8, 8, k, seed=seed, draws=4, cells=8, kinds=(spikes.KIND,))
    aimed, _ = verify_draws(box, [truth, wrong], 8, 8, k, seed=seed, draws=4, cells=8, kinds=(spikes.at_kind(pairs),))
    assert rand == [True, True], f"seed {seed}: random spikes already separate here ({rand}); pick another K"
    assert aimed == [True, False], f"seed {seed}: straddling pairs {pairs} kept {aimed}"


def test_a_spike_kind_with_pairs_plants_exactly_those_columns() -> None:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 40)).astype(np.float16)
    b = rng.standard_normal((40, 3)).astype(np.float16)
    kind = spikes.at_kind([(3, 5), (20, 31)])
    assert spikes.base_kind(kind) == "ordinary"
    pa, pb = spikes.finish(kind, a.copy(), b.copy(), 0, "fp16")
    changed = sorted(set(np.flatnonzero((pa != a).any(axis=0))))
    assert changed == [3, 5, 20, 31], changed
    assert np.array_equal(pb[5], pb[3]) and np.array_equal(pb[31], pb[20])


@pytest.mark.parametrize(("kind", "what"), [("spike@3-x", "expected spike@k1-k2"), ("spike@5-3", "0 <= k1 < k2")])
def test_a_malformed_spike_kind_is_named(kind: str, what: str) -> None:
    a, b = np.zeros((1, 8), dtype=np.float16), np.zeros((8, 1), dtype=np.float16)
    with pytest.raises(ValueError, match=what):
        spikes.finish(kind, a, b, 0, "fp16")


def test_pairs_sharing_a_column_or_past_k_are_refused() -> None:
    a, b = np.zeros((1, 8), dtype=np.float16), np.zeros((8, 1), dtype=np.float16)
    for pairs in ([(1, 2), (2, 4)], [(3, 8)]):
        with pytest.raises(ValueError, match="distinct and below K = 8"):
            spikes.plant_pairs(a, b, pairs, "fp16")


def test_settling_aims_spikes_only_where_readings_group_k_differently() -> None:
    from fixbits.probe.reconstruct import _settle_kinds

    truth, wrong = _split_readings()
    kinds = _settle_kinds([truth, wrong], 3061, 5)
    assert kinds[0].startswith(spikes.AT) and kinds[2].startswith(spikes.AT) and kinds[1] == spikes.KIND, kinds
    assert _settle_kinds([truth, truth.replace(merge_dtype="fp32")], 3061, 5)[0] == spikes.KIND  # same groups
    wide = [truth.replace(out_dtype="fp32"), wrong.replace(out_dtype="fp32")]
    assert _settle_kinds(wide, 3061, 5) == ("ordinary", "wide")


def test_settling_compares_readings_on_answers_deeper_than_64k() -> None:
    """H100 s37: every shape of a deep split-K answer had K > 65,536, the comparison skipped them
    all, and settling kept the first reading (residue last) where the kernel turns it first."""
    from fixbits.desc import KCut
    from fixbits.probe.reconstruct import _settle

    truth = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16",
                     use_fast_accum=True, promotion_interval=None, k_loop_step=128, residue="first",
                     k_cuts=(KCut("contiguous", count=66, granule=8, merge="chain", aligned_granule=64),))
    wrong = truth.replace(residue="last")
    seed, group = 7, [(2, 3, 70_001), (3, 2, 74_619)]
    task = {"prio": [], "group": group, "in_dtype": "fp16", "seed": seed}
    alive, used = _settle(EmulatorBackend(truth), [wrong, truth], task)
    assert used, f"seed {seed}: no settling shape drawn for K {[s[2] for s in group]}"
    assert alive == [truth], f"seed {seed}: settling on {used} kept {alive}"
