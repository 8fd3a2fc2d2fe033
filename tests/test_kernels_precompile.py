"""fixbits.kernels.precompile: kernels compiled in spawned processes on meta tensors are the
kernels the launching process then launches (same compile hash, found in the shared on-disk
cache, nothing compiled anew). CPU only: the launching side is tests/_kernels_aot.Sm90Driver."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from _kernels_aot import Sm90Driver  # noqa: E402

from fixbits.desc import GEMMDesc  # noqa: E402
from fixbits.kernels._host import KernelConfig  # noqa: E402
from fixbits.kernels.precompile import CompileJob, epilogue_ops, precompile  # noqa: E402

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
JOBS = [
    (96, 320, 192, "silu_gate", KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8,
                                             num_stages=3, USE_TMA=1, PERSISTENT=1)),
    (8, 272, 160, "scale+residual", KernelConfig(BLOCK_M=64, BLOCK_N=16, BLOCK_K=64, GROUP_M=1, num_warps=4,
                                                 num_stages=3, SWAP_AB=1)),
    (48, 144, 112, "none", KernelConfig(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, GROUP_M=4, num_warps=4, num_stages=2)),
]  # fmt: skip


def _dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()} if root.exists() else set()


def test_precompiled_kernels_are_the_ones_launched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.cache import _base32

    import fixbits.kernels.single_pass as sp
    from fixbits.kernels.matmul import matmul

    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    jobs = [CompileJob(m, n, k, TC, ep, tuple(cfg.to_dict().items())) for m, n, k, ep, cfg in JOBS]
    report = precompile(jobs + jobs[:1], workers=1, timeout_s=600)
    assert report.errors == () and report.unique == len(JOBS) and report.compiled == len(JOBS)
    before = _dirs(cache)
    assert before

    g = torch.Generator().manual_seed(3)
    monkeypatch.setattr(sp, "tma_descriptors", functools.partial(sp.tma_descriptors, require_cuda=False))
    monkeypatch.setitem(sp._SMS, 0, 132)
    with Sm90Driver() as drv:
        for m, n, k, ep, cfg in JOBS:
            a = torch.randn((m, k), generator=g).half()
            b = torch.randn((k, n), generator=g).half()
            side = dict(bias=torch.randn(n, generator=g).half(), residual=torch.randn((m, n), generator=g).half(),
                        gate=torch.randn((m, n), generator=g).half())  # fmt: skip
            matmul(a, b, desc=TC, epilogue=epilogue_ops(ep), config=cfg, **side)
    hashes = [h for h, *_ in drv.launches]
    assert len(hashes) == len(JOBS) and len(set(hashes)) == len(JOBS)
    assert {_base32(h) for h in hashes} <= before
    assert _dirs(cache) == before  # the launching process compiled nothing new


def test_dedup_key_follows_the_binder() -> None:
    cfg = tuple(KernelConfig().to_dict().items())
    same = [CompileJob(256, 4096, 4096, TC, "none", cfg), CompileJob(512, 1024, 2048, TC, "none", cfg)]
    assert same[0].dedup_key() == same[1].dedup_key()
    for other in (CompileJob(1, 4096, 4096, TC, "none", cfg), CompileJob(256, 4096, 4100, TC, "none", cfg),
                  CompileJob(256, 4096, 4096, TC, "silu_gate", cfg)):  # fmt: skip
        assert other.dedup_key() != same[0].dedup_key()


def test_split_k_launches_are_precompiled_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cached split-K launcher (parts + merge, direct launches) compiles on meta tensors and
    then launches exactly those two kernels, with and without a fused epilogue."""
    from triton.runtime.cache import _base32

    from fixbits.desc import KCut
    from fixbits.kernels.matmul import matmul

    d = TC.replace(k_cuts=(KCut("contiguous", count=3),))
    cfg = KernelConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, num_warps=4, num_stages=3)
    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    jobs = [CompileJob(16, 128, 1000, d, ep, tuple(cfg.to_dict().items())) for ep in ("none", "bias")]
    report = precompile(jobs, workers=1, timeout_s=600)
    assert report.errors == () and report.compiled == 2
    before = _dirs(cache)
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn((16, 1000), generator=g).half(), torch.randn((1000, 128), generator=g).half()
    with Sm90Driver() as drv:
        for ep in ("none", "bias"):
            matmul(
                a, b, desc=d, epilogue=epilogue_ops(ep), config=cfg, bias=torch.randn(128, generator=g).half()
            )
    hashes = [h for h, *_ in drv.launches]
    assert len(hashes) == 4 and len(set(hashes)) == 3  # one part kernel, two merge kernels
    assert {_base32(h) for h in hashes} <= before
    assert _dirs(cache) == before


def test_kmajor_fp8_b_is_precompiled_as_its_own_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fp8 B K-major (an nn.Linear weight, w.t()) takes the TMA body that loads B^T: another
    kernel than B row-major. A ``b_kmajor`` job compiles exactly that one, so a benchmark that
    hands fixbits.matmul a K-major B finds its kernel compiled."""
    from triton.runtime.cache import _base32

    import fixbits.kernels.single_pass as sp
    from fixbits.kernels.matmul import matmul

    d = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", out_dtype="fp32",
                 use_fast_accum=False, promotion_interval=4, k_loop_step=128)  # fmt: skip
    cfg = KernelConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=4, num_stages=4, USE_TMA=1)
    m, n, k = 128, 256, 512
    jobs = [
        CompileJob(m, n, k, d, "none", tuple(cfg.to_dict().items()), "fp32", b_kmajor=kmaj)
        for kmaj in (False, True)
    ]
    assert jobs[0].dedup_key() != jobs[1].dedup_key()
    cache = tmp_path / "triton"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    report = precompile(jobs[1:], workers=1, timeout_s=600)
    assert report.errors == () and report.compiled == 1
    before = _dirs(cache)
    monkeypatch.setattr(sp, "tma_descriptors", functools.partial(sp.tma_descriptors, require_cuda=False))
    g = torch.Generator().manual_seed(11)
    a = torch.randn((m, k), generator=g).to(torch.float8_e4m3fn)
    w = torch.randn((n, k), generator=g).to(torch.float8_e4m3fn)
    with Sm90Driver() as drv:
        matmul(a, w.t(), desc=d, config=cfg, out_dtype="fp32")
    assert len(drv.launches) == 1 and _base32(drv.launches[0][0]) in before
    assert _dirs(cache) == before  # the K-major launch compiled nothing new


def test_k_major_copies_only_an_n_major_b() -> None:
    from fixbits.kernels._host import k_major

    w = torch.arange(12.0).reshape(3, 4)  # (N, K) row-major: w.t() is already K-major
    wt = w.t()
    assert k_major(wt) is wt
    b = w.t().contiguous()  # (K, N) row-major
    kb = k_major(b)
    assert kb.stride(0) == 1 and torch.equal(kb.view(torch.int32), b.view(torch.int32))
