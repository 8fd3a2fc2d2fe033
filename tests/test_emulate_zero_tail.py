"""The fp8 single-pass TMA body loads the chain's last turn past K and lets the copy engine fill
it with +0 (fixbits.kernels._tensorcore.chain_promoted_tma, TAIL_TMA). That appends all-zero
wgmma k32 blocks to the residue's promotion group (and whole all-zero groups when a turn holds
several). Under the emulator's sm_90 fp8 block model this must change no bit: emulating the
profile's fp8 descriptors on the operands as they are and on the operands padded with zeros to
whole turns gives the same bytes, on ordinary and wide-exponent draws (CPU; the GPU run of
matmul_check is the hardware's word)."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.emulate import emulate
from fixbits.inputs import draw
from fixbits.numerics import formats
from fixbits.probe.profile import PROFILE_DIR, load


def _fp8_descs() -> list:
    prof = load(PROFILE_DIR / "sm_90_cublaslt130100_fp8_e4m3_fp32.yaml")
    seen: dict[str, object] = {}
    for e in prof.entries.values():
        d = e.desc
        if not d.k_cuts and d.residue == "last" and not d.use_fast_accum:
            seen.setdefault(d.short_hash, d)
    return list(seen.values())


DESCS = _fp8_descs()


def test_the_fp8_profile_has_single_pass_per_mma_descriptors() -> None:
    assert DESCS, "no fp8 per-MMA single-pass descriptor with the residue last in the profile"


@pytest.mark.parametrize("desc", DESCS, ids=lambda d: d.short_hash)
@pytest.mark.parametrize("k", [16, 64, 208, 1856, 2880])
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
@pytest.mark.parametrize("turn", [128, 256])
def test_zero_filled_tail_turn_keeps_the_bytes(desc: object, k: int, kind: str, turn: int) -> None:
    m, n = 3, 5
    seed = k * 7 + turn + (1 if kind == "wide" else 0)
    a = draw((m, k), "fp8_e4m3", kind, seed)
    b = draw((k, n), "fp8_e4m3", kind, seed + 1)
    kp = -(-k // turn) * turn
    ap = np.zeros((m, kp), dtype=a.dtype)
    bp = np.zeros((kp, n), dtype=b.dtype)
    ap[:, :k], bp[:k, :] = a, b
    want = formats.bits(np.asarray(emulate(desc, a, b)))  # type: ignore[arg-type]
    got = formats.bits(np.asarray(emulate(desc, ap, bp)))  # type: ignore[arg-type]
    assert np.count_nonzero(want) > 0, f"all-zero output proves nothing (seed={seed})"
    assert np.array_equal(got, want), (desc, k, kind, turn, seed, np.argwhere(got != want)[:4])
