"""fixbits.matmul's profile route passes K to the lookup: an answer split by K in the committed
sm_90 fp16 profile (a11, the gemmSN chain) gets the variant of the call's K (CPU, no GPU)."""

from __future__ import annotations

import pytest

from fixbits.kernels.matmul import MatmulUnavailable, lookup_desc
from fixbits.probe.profile import PROFILE_DIR, load

KEY = "a11-t0-s1-r0-w0-c0-g0"


@pytest.fixture(scope="module")
def fp16_profile():  # type: ignore[no-untyped-def]
    prof = load(PROFILE_DIR / "sm_90_cublaslt130100_fp16_fp32.yaml")
    entry = prof.entries[KEY]
    assert len(entry.variants) == 2, "the test needs an answer split by K"
    return prof


def test_low_k_gets_the_low_variant(fp16_profile) -> None:  # type: ignore[no-untyped-def]
    low, high = fp16_profile.entries[KEY].variants
    got = lookup_desc(fp16_profile, KEY, 2, 8192, low.k_max, "fp16", "fp32", "sm_90")
    assert got == low.desc
    assert len(got.k_cuts) == 1


def test_deep_k_gets_the_high_variant(fp16_profile) -> None:  # type: ignore[no-untyped-def]
    low, high = fp16_profile.entries[KEY].variants
    got = lookup_desc(fp16_profile, KEY, 3, 9274, 4096, "fp16", "fp32", "sm_90")
    assert got == high.desc
    assert got != low.desc
    assert got.k_cuts[1].span == 256


def test_k_between_the_ranges_is_not_guessed(fp16_profile) -> None:  # type: ignore[no-untyped-def]
    low, high = fp16_profile.entries[KEY].variants
    k = low.k_max + 1
    assert k < high.k_min
    with pytest.raises(MatmulUnavailable, match="outside the probed"):
        lookup_desc(fp16_profile, KEY, 2, 64, k, "fp16", "fp32", "sm_90")
