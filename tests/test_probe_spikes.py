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
