"""fixbits.matmul's profile route passes K to the lookup: an answer split by K (a profile
entry with K variants, as the prober writes for answers whose arithmetic changes with K) gets
the variant of the call's K, and a K between the probed ranges is not guessed (CPU, no GPU).

The profile is built here (the committed profiles change as the prober refines them; whether
one of their answers is split by K is theirs to say)."""

from __future__ import annotations

import pytest

from fixbits.desc import GEMMDesc, KCut
from fixbits.kernels.matmul import MatmulUnavailable, lookup_desc
from fixbits.probe.profile import ArchProfile, KVariant, ProfileEntry

KEY = "a11-t0-s1-r0-w0-c0-g0"
BASE = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32")
LOW = BASE.replace(k_cuts=(KCut("contiguous", count=2),))
HIGH = BASE.replace(k_cuts=(KCut("contiguous", count=2), KCut("contiguous", span=256)))


@pytest.fixture(scope="module")
def profile() -> ArchProfile:
    variants = (KVariant(1, 512, LOW, (2, 8192, 512)), KVariant(1024, None, HIGH, (3, 9274, 4096)))
    entry = ProfileEntry(KEY, LOW, (2, 8192, 512), verified_shapes=2, variants=variants)
    return ArchProfile("sm_90", "cublaslt", "130100", "fp16", "fp32", entries={KEY: entry})


def test_low_k_gets_the_low_variant(profile: ArchProfile) -> None:
    got = lookup_desc(profile, KEY, 2, 8192, 512, "fp16", "fp32", "sm_90")
    assert got == LOW and len(got.k_cuts) == 1


def test_deep_k_gets_the_high_variant(profile: ArchProfile) -> None:
    got = lookup_desc(profile, KEY, 3, 9274, 4096, "fp16", "fp32", "sm_90")
    assert got == HIGH and got != LOW
    assert got.k_cuts[1].span == 256


def test_k_between_the_ranges_is_not_guessed(profile: ArchProfile) -> None:
    with pytest.raises(MatmulUnavailable, match="outside the probed"):
        lookup_desc(profile, KEY, 2, 64, 513, "fp16", "fp32", "sm_90")


def test_committed_gemv_answer_is_held_to_the_orientation_it_was_verified_in() -> None:
    """bf16->fp32 a13-t0-s1-r0-w0-c50-g0 was probed and verified on M == 1 shapes (K 255 to 4112).
    On an H100 cuBLASLt also gives that answer for N == 1 shapes of small K, with other bytes
    (session 27, 53823x1x61). Session 28 probed N == 1 at K = 96 (a contiguous lane tree) and
    verified it at K = 61 and 96, so the entry answers each orientation only in the K it was
    verified in and reports any other shape of the answer as not in the profile."""
    from fixbits.probe.profile import PROFILE_DIR, load

    prof = load(PROFILE_DIR / "sm_90_cublaslt130100_bf16_fp32.yaml")
    key = "a13-t0-s1-r0-w0-c50-g0"
    got = lookup_desc(prof, key, 1, 39857, 1839, "bf16", "fp32", "sm_90")  # matched on the H100
    assert got.family == "gemv_lane_tree"
    assert got.k_cuts[0].layout == "strided"
    n1 = lookup_desc(prof, key, 53823, 1, 61, "bf16", "fp32", "sm_90")
    assert n1.family == "gemv_lane_tree"
    assert n1.k_cuts[0].layout == "contiguous"
    assert n1.short_hash != got.short_hash
    assert lookup_desc(prof, key, 53823, 1, 96, "bf16", "fp32", "sm_90").short_hash == n1.short_hash
    with pytest.raises(MatmulUnavailable, match="orientation"):
        lookup_desc(prof, key, 53823, 1, 200, "bf16", "fp32", "sm_90")
    with pytest.raises(MatmulUnavailable, match="outside the probed"):
        lookup_desc(prof, key, 1, 39857, 8192, "bf16", "fp32", "sm_90")
