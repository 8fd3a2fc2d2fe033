"""Gate: the committed arch profile reproduces cuBLAS, and the prober that built it is sound.

GPU part (sm_90, cuBLASLt): for every shape of the realistic set and of a seeded fuzz set,
the heuristic's answer is looked up in the committed profile for this arch and library
version, and the emulator running that entry's descriptor must return cuBLAS's bytes,
10 draws each (5 ordinary, 5 wide exponents). Inputs are drawn on the GPU; the comparison
covers sampled rows of A and columns of B, which the emulator computes exactly (each output
depends on its own row and column only), so a 16384 x 248320 output never has to be
emulated whole. Answers missing from the profile skip with the answer named; shapes the
split-K tail defect hits are reported by their own test, never counted as matches.

CPU part: the prober recovers each profile entry's descriptor from the emulator (the
round trip that makes a profile trustworthy without a GPU), and recorded GPU walks, where
committed under matrices/profiles/evidence/, replay through the entry's descriptor: every
±L / r outcome cuBLAS gave must be what that descriptor predicts.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixbits.probe.profile import PROFILE_DIR, ArchProfile, available, load
from fixbits.testing import assert_bitwise_equal

pytestmark = pytest.mark.reconstruction

DRAWS = tuple(("ordinary", i) for i in range(5)) + tuple(("wide", i) for i in range(5))
CELLS = 8
EVIDENCE = PROFILE_DIR / "evidence"


def _seed(*parts: Any) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode()) % (2**31)


def _profiles() -> list[ArchProfile]:
    return [load(p) for p in available()]


# -- GPU ------------------------------------------------------------------------------------

_LT: list[Any] = []


def _lt() -> Any:
    if not _LT:
        from fixbits.cublas.lt import CublasLt

        _LT.append(CublasLt())
    return _LT[0]


def _profile_for(arch: str | None, dtype: str) -> ArchProfile:
    from fixbits.probe.profile import find

    version = str(_lt().version)
    try:
        return find(arch or "sm_90", version, dtype, "fp32")
    except FileNotFoundError as exc:
        pytest.skip(f"no committed profile for this GPU/library: {exc}")


def _gpu_draw(shape: tuple[int, int], dtype: str, kind: str, seed: int) -> Any:
    import torch

    from fixbits.cublas.torch_dtypes import torch_dtype

    if dtype.startswith("fp8"):  # a scaled normal would overflow e4m3: the counter-hash draw, clamped to +-448
        from fixbits.probe.hashdraw import torch_operand

        return torch_operand(shape, dtype, kind, seed, "cuda")

    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    x = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
    if kind == "wide":
        x = x * torch.exp2(torch.randint(-12, 13, shape, generator=g, device="cuda").float())
    return x.to(torch_dtype(dtype))


def _rows(n: int, seed: int) -> list[int]:
    if n <= CELLS:
        return list(range(n))
    rng = np.random.default_rng(seed)
    return sorted(set(rng.choice(n, CELLS - 2, replace=False).tolist()) | {0, n - 1})


def _tail_loss(answer: Any, k: int) -> int:
    try:
        from fixbits.bugs.splitk_tail import expected_loss
    except ImportError:
        return 0
    return int(expected_loss(answer, k, 64))


def _check_shape(m: int, n: int, k: int, dtype: str, arch: str | None, seed: int, record_property: Any) -> None:
    from fixbits.cublas.backend import to_numpy
    from fixbits.emulate import emulate
    from fixbits.probe.profile import NotInProfile

    if dtype.startswith("fp8") and k % 16:
        pytest.skip(f"K={k}: cuBLASLt's fp8 path needs K % 16 == 0 (the library has no algorithm)")
    prof = _profile_for(arch, dtype)
    answer = _lt().heuristic(m, n, k, dtype, "fp32")
    if _tail_loss(answer, k):
        pytest.skip(f"split-K tail defect shape ({answer.key_str()}): reported by test_tail_defect_shapes")
    try:
        desc = prof.lookup(answer, k=k, n=n)
    except NotInProfile as exc:
        pytest.skip(str(exc))
    record_property("answer", answer.key_str())
    record_property("desc_hash", desc.short_hash)
    nonzero = 0
    for kind, i in DRAWS:
        s = _seed(m, n, k, dtype, kind, i, seed)
        a = _gpu_draw((m, k), dtype, kind, s)
        b = _gpu_draw((k, n), dtype, kind, s + 1)
        c = _lt().matmul(a, b, "fp32")
        rows, cols = _rows(m, s), _rows(n, s + 7)
        got = to_numpy(c[rows][:, cols], "fp32")
        want = emulate(desc, to_numpy(a[rows], dtype), to_numpy(b[:, cols], dtype))
        nonzero += int(np.count_nonzero(got))
        assert_bitwise_equal(got, want, context={"shape": (m, n, k), "dtype": dtype, "answer": answer.key_str(),
                                                 "desc": desc.short_hash, "kind": kind, "seed": s,
                                                 "compared": "sampled rows x cols"})
    assert nonzero > 0, f"all-zero outputs prove nothing ({m}x{n}x{k}, seed={seed})"
    record_property("draws", len(DRAWS))


def _realistic() -> list[Any]:
    from fixbits.shapes import realistic_shapes

    return [pytest.param(s, id=f"{s.layer}-{s.m}x{s.n}x{s.k}") for s in realistic_shapes()]


@pytest.mark.gpu("sm_90")
@pytest.mark.nvidia
@pytest.mark.parametrize("shape", _realistic())
def test_profile_returns_cublas_bytes_on_realistic_shapes(shape: Any, dtype: str, arch: str | None, seed: int,
                                                          record_property: Any) -> None:
    _check_shape(shape.m, shape.n, shape.k, dtype, arch, seed, record_property)


@pytest.mark.gpu("sm_90")
@pytest.mark.nvidia
@pytest.mark.parametrize("index", range(32))
def test_profile_returns_cublas_bytes_on_fuzz_shapes(index: int, dtype: str, arch: str | None, seed: int,
                                                     record_property: Any) -> None:
    from fixbits.probe.sweep import fp8_aligned
    from fixbits.shapes import fuzz_shapes

    s = fuzz_shapes(seed, 32, max_elements=1 << 28)[index]
    m, n, k = fp8_aligned(s.m, s.n, s.k) if dtype.startswith("fp8") else (s.m, s.n, s.k)
    _check_shape(m, n, k, dtype, arch, seed, record_property)


@pytest.mark.gpu("sm_90")
@pytest.mark.nvidia
@pytest.mark.parametrize("mnk", [(1, 8, 11528), (32, 32, 11528), (1, 8, 57608)])
def test_tail_defect_shapes(mnk: tuple[int, int, int], arch: str | None, record_property: Any) -> None:
    """Reported apart: whether the profile's entry, with its split's tail dropped, replays the loss."""
    from fixbits.cublas.backend import to_numpy
    from fixbits.desc import KCut
    from fixbits.emulate import emulate
    from fixbits.probe.profile import NotInProfile

    m, n, k = mnk
    prof = _profile_for(arch, "fp16")
    answer = _lt().heuristic(m, n, k, "fp16", "fp32")
    try:
        desc = prof.lookup(answer, k=k, n=n)
    except NotInProfile as exc:
        pytest.skip(str(exc))
    lost = _tail_loss(answer, k)
    record_property("predicted_loss", lost)
    if desc.k_cuts and desc.k_cuts[0].count:
        c0 = desc.k_cuts[0]
        desc = desc.replace(k_cuts=(KCut("contiguous", count=c0.count, granule=c0.granule, span_rule="tail_dropped",
                                         merge=c0.merge),) + desc.k_cuts[1:])
    s = _seed("tail", m, n, k)
    a = _gpu_draw((m, k), "fp16", "ordinary", s)
    b = _gpu_draw((k, n), "fp16", "ordinary", s + 1)
    got = to_numpy(_lt().matmul(a, b, "fp32"), "fp32")
    want = emulate(desc, to_numpy(a, "fp16"), to_numpy(b, "fp16"))
    same = bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))
    record_property("tail_defect_replayed", same)
    if not same:
        pytest.xfail(f"{answer.key_str()}: the entry with its tail dropped does not replay cuBLAS here")


# -- CPU ------------------------------------------------------------------------------------

MAX_DESCS = 12  # distinct descriptors round-tripped per profile (the CPU gate's time budget)


def _entries() -> list[Any]:
    """One entry per distinct descriptor (most answers share one), shallowest K first."""
    out = []
    for prof in _profiles():
        by_desc: dict[str, str] = {}
        for key in sorted(prof.entries, key=lambda kk: prof.entries[kk].shape[2]):
            by_desc.setdefault(prof.entries[key].desc.short_hash, key)
        for key in list(by_desc.values())[:MAX_DESCS]:
            out.append(pytest.param(prof, key, id=f"{prof.filename[:-5]}-{key}"))
    return out


@pytest.mark.parametrize(("prof", "key"), _entries() or [pytest.param(None, None, id="no-profile")])
def test_prober_recovers_each_entry_from_the_emulator(prof: ArchProfile | None, key: str | None) -> None:
    """probe(EmulatorBackend(entry)) gives back an equivalent descriptor at the entry's K."""
    from fixbits.backends import EmulatorBackend
    from fixbits.probe.plan import equivalent_on
    from fixbits.probe.recover import probe

    if prof is None or key is None:
        pytest.skip(f"no profile committed under {PROFILE_DIR}")
    entry = prof.entries[key]
    m, n, k = entry.shape
    if k > 20000:
        pytest.skip(f"K={k}: too deep to emulate every probe call on CPU in the gate's time")
    if k < 256:  # the descriptor holds at every K; a shallow one cannot tell readings apart
        k = 336 if entry.desc.in_dtype.startswith("fp8") else 301
    # the descriptor holds at any M, N: probe a narrow slice so each emulated call stays small
    m2, n2 = (min(m, 48), min(n, 2)) if m >= n else (1, min(n, 48))
    c0 = entry.desc.k_cuts[0] if entry.desc.k_cuts else None
    hints = {"splitk_num": c0.count} if c0 is not None and c0.layout == "contiguous" and c0.count else {}
    res = probe(EmulatorBackend(entry.desc), m2, n2, k, arch=prof.arch, hints=hints, draws=2)
    if res.status != "recovered" and "predicted from" in (entry.note or ""):
        # phase-B entries were predicted from known descriptors and verified by device draws, never probed;
        # the prober alone not recovering them is a prober gap, not a wrong entry (run s4: fp16->fp16 with
        # an fp16 merge dtype or ambiguous after output rounding; fp16->fp32 a13 c74 contiguous GEMV lanes)
        pytest.xfail(f"{key}: predicted {prof.dtype}->{prof.out_dtype} entry; the prober alone gives {res.status}")
    if (res.status == "recovered" and res.desc is not None and prof.out_dtype != "fp32"
            and "predicted from" in (entry.note or "") and not equivalent_on(res.desc, entry.desc, k)):
        # run s5, bf16->bf16 a13 c74: behind a bf16 output the prober settles on a chain where the
        # device-verified entry folds by butterfly (a prober gap on narrow outputs, reported, not hidden)
        pytest.xfail(f"{key}: predicted {prof.dtype}->{prof.out_dtype} entry; the prober recovers "
                     f"{res.desc.short_hash}, not equivalent to the entry {entry.desc.short_hash} at K={k}")
    assert res.status == "recovered", (key, res.notes)
    assert res.desc is not None and equivalent_on(res.desc, entry.desc, k), (key, res.desc)


def _evidence() -> list[Any]:
    if not EVIDENCE.is_dir():
        return []
    return [pytest.param(p, id=p.stem) for p in sorted(EVIDENCE.glob("*.json"))]


@pytest.mark.parametrize("path", _evidence() or [pytest.param(None, id="no-evidence")])
def test_recorded_gpu_walks_replay_through_the_entry(path: Path | None) -> None:
    """Every ±L / r outcome recorded on the GPU is what the committed entry predicts."""
    from fixbits.probe.plan import addresses, predict_many

    if path is None:
        pytest.skip(f"no recorded walks under {EVIDENCE}")
    doc = json.loads(path.read_text())
    if doc.get("status") != "recovered" or not doc.get("desc"):
        pytest.skip(f"{path.name}: probe status {doc.get('status')}: nothing to replay")
    from fixbits.desc import GEMMDesc

    desc = GEMMDesc.from_dict(doc["desc"], where=f"{path}: desc")
    k = int(doc["shape"][2])
    ad = addresses(desc, k)
    t, o = [], []
    for w in doc["walks"]:
        if w["walk"] in ("summed", "dtypes"):
            continue
        t += w["triples"]
        o += w["outcomes"]
    assert t, f"{path.name}: no ±L / r walks recorded"
    ta = np.array(t, dtype=np.int64)
    got = predict_many(ad, ta[:, 0], ta[:, 1], ta[:, 2])
    bad = np.nonzero(got != np.array(o))[0]
    assert bad.size == 0, f"{path.name}: {bad.size} of {len(t)} outcomes differ, first {t[bad[0]]}: " \
                          f"GPU {o[bad[0]]} vs predicted {got[bad[0]]}"


# the launches FINDINGS.md reports on the H200, at depths the CPU emulates quickly
_TC = dict(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
CUBLAS_LIKE = {
    "nvjet_single_pass": ({}, (64, 2, 1000), {}),
    "nvjet_splitk_4": ({"k_cuts": [{"layout": "contiguous", "count": 4, "granule": 64}]}, (16, 2, 3584), {"splitk_num": 4}),
    "nvjet_splitk_tail_dropped": ({"k_cuts": [{"layout": "contiguous", "count": 9, "granule": 64,
                                               "span_rule": "tail_dropped"}]}, (8, 2, 64 * 18 + 8), {"splitk_num": 9}),
    "cutlass_1688_per_mma": ({"instruction": "mma", "instruction_k": 8, "use_fast_accum": False,
                              "promotion_interval": 1, "k_loop_step": 32, "residue": "first"}, (32, 2, 333), {}),
    "gemv_lane_tree": ({"instruction": "fma", "instruction_k": 1,
                        "k_cuts": [{"layout": "strided", "count": 32, "span": 8, "merge": "butterfly_down"}]},
                       (1, 48, 1032), {"instruction": "fma"}),
}


@pytest.mark.parametrize("name", sorted(CUBLAS_LIKE))
def test_prober_recovers_cublas_like_descriptors(name: str) -> None:
    from fixbits.backends import EmulatorBackend
    from fixbits.desc import GEMMDesc
    from fixbits.probe.plan import equivalent_on
    from fixbits.probe.recover import probe

    extra, (m, n, k), hints = CUBLAS_LIKE[name]
    desc = GEMMDesc.from_dict({**_TC, **extra}, where=name)
    res = probe(EmulatorBackend(desc), m, n, k, arch="sm_90", hints=hints, draws=2, seed=_seed(name))
    assert res.status == "recovered", (name, res.notes)
    assert res.desc is not None and equivalent_on(res.desc, desc, k), (name, res.desc)
    if "tail" in name:
        assert res.dropped_tail == 8, res.dropped_tail


def test_replay_has_power_against_a_wrong_descriptor() -> None:
    """Walks recorded from one descriptor do not replay through a neighbouring one."""
    from fixbits.backends import EmulatorBackend
    from fixbits.desc import GEMMDesc, KCut
    from fixbits.probe.plan import addresses, predict_many
    from fixbits.probe.recover import probe

    truth = GEMMDesc(**_TC, k_cuts=(KCut("contiguous", count=3, granule=64),))
    res = probe(EmulatorBackend(truth), 32, 2, 700, arch="sm_90", hints={"splitk_num": 3}, draws=2)
    t = np.array([x for w in res.evidence if w.walk not in ("summed", "dtypes") for x in w.triples])
    o = np.array([x for w in res.evidence if w.walk not in ("summed", "dtypes") for x in w.outcomes])
    assert np.array_equal(predict_many(addresses(truth, 700), t[:, 0], t[:, 1], t[:, 2]), o)
    for wrong in (truth.replace(k_cuts=(KCut("contiguous", count=4, granule=64),)),
                  truth.replace(residue="first"), truth.replace(use_fast_accum=False, promotion_interval=2)):
        assert not np.array_equal(predict_many(addresses(wrong, 700), t[:, 0], t[:, 1], t[:, 2]), o), wrong
