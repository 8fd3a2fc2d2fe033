"""shfl.sync.idx from one fixed lane of the whole warp, on an integer made of thread bits: the
walk takes that lane's value exactly (the warp-uniform warp-id idiom of Hopper kernels), so it is
the same as computing it without the shuffle; anything else stays a shuffle."""

from __future__ import annotations

import pytest
from test_checker_helpers import ptx_kernel

from fixbits.checker.api import certified_equal, signature

pytestmark = pytest.mark.unit

# 128 threads; thread t stores x[W + (t & 31)] to out[t], W the warp's base computed by CALC
KERNEL = ptx_kernel(
    [".u64", ".u64"],
    128,
    """\tld.param.u64 %rd1, [k_param_0];
\tld.param.u64 %rd2, [k_param_1];
\tmov.u32 %r1, %tid.x;
\tshr.u32 %r2, %r1, 5;
CALC
\tshl.b32 %r4, %r3, 5;
\tand.b32 %r5, %r1, 31;
\tadd.s32 %r6, %r4, %r5;
\tmul.wide.u32 %rd3, %r6, 4;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.b32 %r7, [%rd4];
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.b32 [%rd6], %r7;
\tret;
""",
)
DIRECT = "\tmov.b32 %r3, %r2;"
BROADCAST = "\tshfl.sync.idx.b32 %r3, %r2, 0, 31, -1;"


def sig(calc: str):  # type: ignore[no-untyped-def]
    s = signature(KERNEL.replace("CALC", calc), "ptx")
    assert s.fallback is None, s.fallback
    return s


def test_broadcast_of_the_warp_id_is_the_warp_id():
    assert certified_equal(sig(DIRECT), sig(BROADCAST))


def test_broadcast_of_a_lane_dependent_value_takes_the_source_lane():
    # lane 3's (t & 31) is 3 in every lane: not the thread's own lane number
    lane = "\tand.b32 %r8, %r1, 31;\n\tshfl.sync.idx.b32 %r3, %r8, 3, 31, -1;"
    const = "\tmov.b32 %r3, 3;"
    own = "\tand.b32 %r3, %r1, 31;"
    assert certified_equal(sig(lane), sig(const))
    assert not certified_equal(sig(lane), sig(own))


@pytest.mark.parametrize(
    "calc",
    [
        "\tshfl.sync.idx.b32 %r3, %r2, 0, 31, 65535;",  # half the warp in the mask
        "\tshfl.sync.idx.b32 %r3, %r2, 0, 7199, -1;",  # segments of 4 lanes (c = 0x1c1f)
        "\tshfl.sync.idx.b32 %r3, %r2, %r1, 31, -1;",  # a lane-dependent source lane
    ],
)
def test_other_shuffles_are_not_taken_as_uniform(calc: str):
    assert not certified_equal(sig(DIRECT), sig(calc))
