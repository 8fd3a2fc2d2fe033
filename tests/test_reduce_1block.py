"""The ``reduce_1block`` level merge (cuBLAS's reduce_1Block_kernel<float, 128, 7>) and the
workspace-GEMV descriptor built on it, against a scalar float32 reference written from the
kernel description (one np.float32 operation at a time)."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.desc import DescError, GEMMDesc, KCut
from fixbits.emulate import emulate

F = np.float32


def _ref_reduce_1block(parts: list[F]) -> F:
    q = [F(0)] * 128
    for i, v in enumerate(parts):
        q[i % 128] = F(q[i % 128] + v)
    for off in (64, 32):
        q = [F(q[t] + q[t + off]) for t in range(off)]
    total = F(0)
    for j in range(4):
        u = F(0)
        for g in range(8):
            u = F(u + q[4 * g + j])
        total = F(total + u)
    return total


def _ref_dot(x: np.ndarray, y: np.ndarray, blocks: int, v: int) -> F:
    """dot_kernel: tiles of 128*v elements dealt to ``blocks`` blocks round-robin; thread t of a
    block keeps v lane chains over its tiles, joined left to right; the 128 thread values fold as
    a count-down butterfly (offsets 64..1); then reduce_1Block over the block partials."""
    k = len(x)
    tile = 128 * v
    partials = []
    for b in range(blocks):
        thr = []
        for t in range(128):
            lanes = []
            for s in range(v):
                acc = F(0)
                for i in range(b, -(-k // tile), blocks):
                    e = i * tile + t * v + s
                    if e < k:
                        acc = F(acc + F(x[e]) * F(y[e]))  # the product is exact in fp32
                lanes.append(acc)
            tv = F(0)
            for a in lanes:
                tv = F(tv + a)
            thr.append(tv)
        for off in (64, 32, 16, 8, 4, 2, 1):
            thr = [F(thr[t] + thr[t ^ off]) for t in range(128)]
        partials.append(thr[0])
    return _ref_reduce_1block(partials)


def _desc(blocks: int, v: int, dt: str) -> GEMMDesc:
    cuts = [KCut("strided", count=blocks, span=128 * v, merge="reduce_1block"),
            KCut("strided", count=128, span=v, merge="butterfly_down")]
    if v > 1:
        cuts.append(KCut("strided", count=v, span=1, merge="chain"))
    return GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype=dt, out_dtype="fp32",
                    k_cuts=tuple(cuts))


def test_reduce_1block_takes_any_count_and_butterflies_still_need_powers_of_two() -> None:
    KCut("strided", count=31, span=128, merge="reduce_1block")
    KCut("contiguous", count=496, granule=256, merge="reduce_1block")
    with pytest.raises(DescError):
        KCut("strided", count=31, span=128, merge="butterfly_down")


@pytest.mark.parametrize(("k", "blocks", "v", "dt"), [(700, 3, 2, "fp16"), (1000, 5, 1, "bf16"), (300, 200, 1, "fp16"),
                                                     (2600, 7, 2, "bf16")])
def test_workspace_gemv_descriptor_matches_the_scalar_reference(k: int, blocks: int, v: int, dt: str) -> None:
    rng = np.random.default_rng(k + blocks)
    np_dt = np.float16 if dt == "fp16" else None
    x = rng.standard_normal(k) * np.exp2(rng.integers(-6, 7, k))
    y = rng.standard_normal(k)
    if np_dt is None:
        from fixbits.numerics.formats import to_dtype

        a, b = to_dtype(x[None, :], "bf16"), to_dtype(y[:, None], "bf16")
    else:
        a, b = x[None, :].astype(np_dt), y[:, None].astype(np_dt)
    got = emulate(_desc(blocks, v, dt), a, b)[0, 0]
    want = _ref_dot(np.asarray(a, dtype=np.float32)[0], np.asarray(b, dtype=np.float32)[:, 0], blocks, v)
    assert np.float32(got).view(np.uint32) == want.view(np.uint32)


def test_reduce_1block_runs_in_the_workspace_gemv_only() -> None:
    """Level 0 of a scalar nest goes to the workspace GEMV (its merge kernel realises the order;
    tests/_kernels_interp_child.py checks the bytes); any other placement is refused."""
    from fixbits.kernels._scalar import nest_constexprs
    from fixbits.kernels.dispatch import choose_kernel
    from fixbits.kernels.plan import UnsupportedDesc, scalar_nest, tensor_core_plan

    d = _desc(4, 2, "fp16")
    assert choose_kernel(d, 1, 60).family == "gemv_workspace"
    assert choose_kernel(d, 4096, 4096).family == "gemv_workspace"  # whatever the output size
    nest = scalar_nest(d, 1000)
    assert nest_constexprs(nest, d, workspace=True)["K0"] == 3
    with pytest.raises(UnsupportedDesc, match="workspace GEMV"):
        nest_constexprs(nest, d)  # the one-launch nest kernel has no such merge
    with pytest.raises(UnsupportedDesc):
        tensor_core_plan(d, 1000)
    inner = d.replace(k_cuts=(d.k_cuts[1], d.k_cuts[0], *d.k_cuts[2:]))
    with pytest.raises(UnsupportedDesc, match="level 0"):
        choose_kernel(inner, 1, 60)
    with pytest.raises(UnsupportedDesc, match="level 0"):
        scalar_nest(inner, 1000)


def test_orientation_variants_round_trip_and_need_n(tmp_path) -> None:
    from fixbits.probe.profile import ArchProfile, KVariant, NotInProfile, ProfileEntry, load

    d2, d1 = _desc(31, 2, "fp16"), _desc(31, 1, "fp16")
    d2, d1 = d2.replace(out_dtype="fp16"), d1.replace(out_dtype="fp16")
    entry = ProfileEntry("a14-t0-s31-r2-w0-c0-g0", d2, (53, 1, 4000), 3,
                         variants=(KVariant(1, None, d2, (53, 1, 4000), True), KVariant(1, None, d1, (1, 60, 7753), False)))
    prof = ArchProfile("sm_90", "cublasLt", "130100", "fp16", "fp16", {entry.key: entry})
    back = load(prof.save(tmp_path))
    assert back.lookup(entry.key, k=5000, n=1) == d2
    assert back.lookup(entry.key, k=5000, n=60) == d1
    for kw in ({"k": 5000}, {}, {"n": 1}):
        with pytest.raises(NotInProfile):
            back.lookup(entry.key, **kw)
