"""The binding on a GPU: enum values against nvmath, own pick vs the heuristic's algo vs torch.

Skipped with a reason where there is no CUDA device or no cuBLASLt.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.nvidia,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
    ),
]


@pytest.fixture(scope="module")
def lt():  # type: ignore[no-untyped-def]
    from fixbits.cublas.lt import CublasLt

    with CublasLt() as handle:
        yield handle


def test_enum_values_match_nvmath() -> None:
    nv = pytest.importorskip("nvmath.bindings.cublasLt", reason="nvmath-python is not installed")
    from fixbits.cublas import enums as E

    for const, (cls, member) in E.NVMATH_NAMES.items():
        assert int(getattr(getattr(nv, cls), member)) == getattr(E, const), const


@pytest.mark.parametrize("in_dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(256, 512, 4096), (16, 256, 14336), (1, 8, 11528), (3, 5, 777)])
@pytest.mark.parametrize("wide", [False, True])
def test_own_pick_equals_chosen_algo_and_torch(lt, in_dtype: str, shape, wide: bool) -> None:  # type: ignore[no-untyped-def]
    from fixbits.cublas.torch_dtypes import torch_dtype

    seed = 1234 + shape[2]
    m, n, k = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=g)
    b = torch.randn(k, n, device="cuda", generator=g)
    if wide:
        a = a * torch.exp2(torch.randint(-8, 9, a.shape, device="cuda", generator=g).float())
        b = b * torch.exp2(torch.randint(-8, 9, b.shape, device="cuda", generator=g).float())
    a, b = a.to(torch_dtype(in_dtype)), b.to(torch_dtype(in_dtype))
    ans = lt.heuristic(m, n, k, in_dtype, "fp32")
    own = lt.matmul(a, b, "fp32")
    chosen = lt.matmul(a, b, "fp32", algo=ans)
    ref = torch.mm(a, b, out_dtype=torch.float32)
    ctx = f"seed={seed} shape={shape} {in_dtype} wide={wide} answer={ans.to_dict()}"
    assert int((own.view(torch.int32) != chosen.view(torch.int32)).sum()) == 0, (
        f"own pick != chosen algo: {ctx}"
    )
    assert int((own.view(torch.int32) != ref.view(torch.int32)).sum()) == 0, (
        f"own pick != torch.mm fp32: {ctx}"
    )
    assert bool((own != 0).any()), ctx


def test_backend_roundtrip_bits() -> None:
    import numpy as np

    from fixbits.cublas.backend import CublasBackend

    rng = np.random.default_rng(7)
    a = rng.standard_normal((8, 64)).astype(np.float16)
    b = rng.standard_normal((64, 16)).astype(np.float16)
    be = CublasBackend("fp16", "fp32")
    c1, c2 = be.gemm(a, b), CublasBackend("fp16", "fp32", algo="heuristic", _lt=be.lt).gemm(a, b)
    assert c1.dtype == np.float32 and c1.shape == (8, 16)
    assert (c1.view(np.uint32) == c2.view(np.uint32)).all(), "seed=7"


@pytest.mark.parametrize(
    "shape,family",
    [
        ((1, 8, 8648), "nvjet_splitk"),
        ((256, 4096, 4096), "nvjet_single_pass"),
        ((16, 4096, 14336), "nvjet_splitk"),
    ],
)
def test_profile_classifies_torch_mm(shape, family: str) -> None:  # type: ignore[no-untyped-def]
    """Families FINDINGS.md recorded for torch.matmul fp16 on an H200 with cuBLAS 13.1.0."""
    from fixbits.cublas.profile import profile_call
    from fixbits.predicates import gpu_arch

    if gpu_arch() != "sm_90":
        pytest.skip(f"recorded on sm_90, this GPU is {gpu_arch()}")
    m, n, k = shape
    a = torch.ones(m, k, dtype=torch.float16, device="cuda")
    b = torch.ones(k, n, dtype=torch.float16, device="cuda")
    prof = profile_call(lambda: torch.matmul(a, b))
    assert prof.count >= 1, "the profiler saw no kernel (CUPTI unavailable?)"
    assert prof.family == family, f"{shape}: {prof.to_dict()}"
    assert prof.splitk_reduce == (family == "nvjet_splitk"), prof.to_dict()


def test_cli_reproducer_matches_the_condition(capsys: pytest.CaptureFixture[str]) -> None:
    from fixbits.cli import main

    rc = main(["bug", "splitk-tail", "--shape", "32x32x11528"])
    out = capsys.readouterr().out
    assert "predicted loss" in out and "lt-own-no-workspace" in out, out
    assert rc == 0, out
