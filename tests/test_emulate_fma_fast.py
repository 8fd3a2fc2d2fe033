"""The emulator's scalar fma chains run as numpy float32 adds where every product is exact in
fp32 (``fixbits.emulate._fma_chains_fp32``): a GEMV answer's phase B at K ~ 10^5 was minutes of
CPU per descriptor on the per-step fma (the H100 run s36 phaseb7 left three answers running at
its deadline). The fast path must give the per-step fma's bits exactly, on every fma descriptor
the profiles hold and on every input kind (the kinds that leave fp32's range take the slow path
by design, and must come out the same)."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits import emulate as E
from fixbits.desc import GEMMDesc, KCut
from fixbits.inputs import KINDS, draw
from fixbits.numerics import formats
from fixbits.probe.profile import PROFILE_DIR, load

K_VALUES = (1, 7, 64, 97, 161, 333)


def _fma_descs() -> list[GEMMDesc]:
    """Every fma descriptor of the profiles; of the workspace GEMVs (hundreds of blocks x 128
    lanes: seconds of plan per call at any K) only one per dtype pair, for CI's time."""
    seen: dict[str, GEMMDesc] = {}
    wide: set[tuple[str, str]] = set()
    for path in sorted(PROFILE_DIR.glob("sm_90_*.yaml")):
        for e in load(path).entries.values():
            d = e.desc
            if d.instruction != "fma" or d.short_hash in seen:
                continue
            if any(c.merge == "reduce_1block" for c in d.k_cuts):
                if (d.in_dtype, d.out_dtype) in wide:
                    continue
                wide.add((d.in_dtype, d.out_dtype))
            seen[d.short_hash] = d
    return list(seen.values())


DESCS = _fma_descs()


def _slow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E, "_fma_chains_fp32", lambda *a, **k: None)


def test_the_profiles_hold_fma_descriptors_of_both_dtypes() -> None:
    assert {d.in_dtype for d in DESCS} == {"fp16", "bf16"}, [d.in_dtype for d in DESCS[:5]]


@pytest.mark.parametrize("i", range(len(DESCS)), ids=lambda i: DESCS[i].short_hash)
def test_fast_chain_gives_the_per_step_fma_bits(i: int, monkeypatch: pytest.MonkeyPatch) -> None:
    desc = DESCS[i]
    kind = ("ordinary", "wide", *[k for k in KINDS if k not in ("ordinary", "wide")])[i % len(KINDS)]
    k = K_VALUES[i % len(K_VALUES)]
    seed = 9100 + i
    a = draw((3, k), desc.in_dtype, kind, seed)
    b = draw((k, 5), desc.in_dtype, kind, seed + 1)
    fast = formats.bits(np.asarray(E.emulate(desc, a, b)))
    _slow(monkeypatch)
    slow = formats.bits(np.asarray(E.emulate(desc, a, b)))
    assert np.array_equal(fast, slow), (desc.short_hash, kind, k, f"seed={seed}", np.argwhere(fast != slow)[:4])


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_fast_chain_is_taken_and_exact_on_a_deep_split_gemv(dtype: str, kind: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # the a13 GEMV shape of chains: K split in 33 contiguous chunks, each over 16 strided lanes
    desc = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype=dtype, out_dtype=dtype,
                    acc_dtype="fp32", use_fast_accum=True, promotion_interval=None, k_loop_step=64,
                    residue="last", k_cuts=(KCut("contiguous", count=33, merge="chain"),
                                            KCut("strided", count=16, span=4, merge="butterfly_down")))
    k, seed = 5003, 77 if kind == "ordinary" else 78
    a = draw((2, 1, k), dtype, kind, seed)
    b = draw((2, k, 3), dtype, kind, seed + 1)
    taken: list[bool] = []
    real = E._fma_chains_fp32

    def spy(*args: object) -> object:
        out = real(*args)  # type: ignore[arg-type]
        taken.append(out is not None)
        return out

    monkeypatch.setattr(E, "_fma_chains_fp32", spy)
    fast = formats.bits(np.asarray(E.emulate_draws(desc, a, b)))
    assert any(taken), f"the float32 path was never taken (seed={seed})"
    assert np.count_nonzero(fast) > 0, f"all-zero output proves nothing (seed={seed})"
    _slow(monkeypatch)
    slow = formats.bits(np.asarray(E.emulate_draws(desc, a, b)))
    assert np.array_equal(fast, slow), (dtype, kind, f"seed={seed}", np.argwhere(fast != slow)[:4])


def test_negative_zero_incoming_accumulator_keeps_its_sign(monkeypatch: pytest.MonkeyPatch) -> None:
    desc = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32",
                    acc_dtype="fp32", use_fast_accum=True, promotion_interval=None, k_loop_step=64,
                    residue="last", k_cuts=())
    a = np.zeros((2, 4), dtype=np.float16)
    b = -np.ones((4, 2), dtype=np.float16)  # products -0: -0 + -0 stays -0
    acc = np.array([[-0.0, 0.0], [-0.0, 1.5]], dtype=np.float32)
    fast = formats.bits(np.asarray(E.emulate(desc, a, b, acc=acc)))
    _slow(monkeypatch)
    slow = formats.bits(np.asarray(E.emulate(desc, a, b, acc=acc)))
    assert np.array_equal(fast, slow), (fast, slow)
    assert fast[0, 0] == 0x80000000, hex(int(fast[0, 0]))
