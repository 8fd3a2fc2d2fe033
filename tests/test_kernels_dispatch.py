"""Descriptor -> kernel family, epilogue parsing and the speed-knob spaces (no GPU, no launch)."""

from __future__ import annotations

import importlib

import pytest

from fixbits.desc import EpilogueOp, GEMMDesc, KCut
from fixbits.kernels.dispatch import KERNEL_MODULES, choose_kernel
from fixbits.kernels.epilogue import EP_CODES, EpilogueError, parse_epilogue, plan_epilogue
from fixbits.kernels.plan import UnsupportedDesc

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16")

CASES = [
    (TC, "single_pass"),
    (TC.replace(in_dtype="fp8_e4m3", instruction_k=32, k_loop_step=128), "single_pass"),
    (TC.replace(use_fast_accum=False, promotion_interval=4), "per_mma"),
    (TC.replace(k_cuts=(KCut("contiguous", count=4),)), "splitk"),
    (
        TC.replace(k_cuts=(KCut("contiguous", count=4),), use_fast_accum=False, promotion_interval=1),
        "splitk_per_mma",
    ),
    (TC.replace(instruction="mma"), "single_pass"),
    (TC.replace(instruction="mma", instruction_k=8, k_loop_step=32, residue="first"), "single_pass"),
    (FMA, "scalar_chain"),
    (FMA.replace(k_cuts=(KCut("contiguous", count=4),)), "gemv_contiguous"),
    (FMA.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=8))), "chained_chunks"),
    (FMA.replace(k_cuts=(KCut("strided", count=32, span=8, merge="butterfly_down"),)), "gemv_lane_tree"),
]


@pytest.mark.parametrize("desc, family", CASES, ids=[f for _, f in CASES])
def test_dispatch_picks_the_family_kernel(desc: GEMMDesc, family: str) -> None:
    choice = choose_kernel(desc)
    assert choice.family == family, desc
    assert (choice.module, choice.function) == KERNEL_MODULES[family]


def test_long_gemv_with_nested_cut_runs_the_workspace_kernel() -> None:
    d = FMA.replace(
        k_cuts=(KCut("contiguous", count=8), KCut("strided", count=32, span=4, merge="butterfly_up"))
    )
    assert choose_kernel(d, 1, 4096).family == "gemv_workspace"
    assert choose_kernel(d, 4096, 4096).family == "gemv_lane_tree"


@pytest.mark.parametrize(
    "desc, why",
    [
        (GEMMDesc(arch="sm_100", instruction="tcgen05", instruction_k=16, in_dtype="fp16"), "tcgen05"),
        (GEMMDesc(arch="sm_80", instruction="mma", instruction_k=16, in_dtype="fp16"), "sm_80"),
        (TC.replace(k_cuts=(KCut("strided", count=4, span=16),)), "contiguous"),
    ],
)
def test_dispatch_refuses_with_a_reason(desc: GEMMDesc, why: str) -> None:
    with pytest.raises(UnsupportedDesc, match=why):
        choose_kernel(desc)


def test_every_kernel_module_exports_its_function() -> None:
    for family, (module, function) in KERNEL_MODULES.items():
        mod = importlib.import_module(module)
        assert callable(getattr(mod, function)), family


def test_parse_epilogue_forms() -> None:
    assert parse_epilogue(None) == ()
    assert parse_epilogue("bias+gelu") == (EpilogueOp("bias"), EpilogueOp("gelu"))
    assert parse_epilogue(["relu", ("scale", 0.5)]) == (EpilogueOp("relu"), EpilogueOp("scale", 0.5))
    assert parse_epilogue(EpilogueOp("residual")) == (EpilogueOp("residual"),)
    with pytest.raises(EpilogueError, match="not an op name"):
        parse_epilogue([3])


def test_epilogue_plan_codes_and_fp32_scale() -> None:
    plan = plan_epilogue((EpilogueOp("scale", 0.1), EpilogueOp("silu_gate")))
    assert plan.codes == (EP_CODES["scale"], EP_CODES["silu_gate"], 0, 0)
    assert plan.scales[0] == float.fromhex("0x1.99999ap-4")  # 0.1 rounded to fp32, as PyTorch does
    assert plan.needs_gate and not plan.needs_bias
    with pytest.raises(EpilogueError, match="at most 4"):
        plan_epilogue(tuple(EpilogueOp("relu") for _ in range(5)))


def test_autotune_spaces_load_and_cover_all_m() -> None:
    from fixbits.kernels.tuning import equivalence_space, size_class, tensor_core_classes

    classes = tensor_core_classes()
    assert classes[-1].max_m is None
    for m in (1, 16, 17, 64, 256, 257, 100000):
        assert size_class(m).space
    assert len(equivalence_space("tensor_core")) >= 6 and len(equivalence_space("scalar")) >= 3


def test_matmul_outside_the_profile_raises_or_falls_back_to_cublas() -> None:
    torch = pytest.importorskip("torch")
    from fixbits.kernels.matmul import MatmulUnavailable, matmul

    g = torch.Generator().manual_seed(5)
    a = torch.randn((4, 32), generator=g).half()
    b = torch.randn((32, 8), generator=g).half()
    gate = torch.randn((4, 8), generator=g).half()
    with pytest.raises(MatmulUnavailable, match="CUDA device"):
        matmul(a, b)
    got = matmul(a, b, epilogue="silu_gate", gate=gate, fallback="cublas")
    want = torch.nn.functional.silu(torch.mm(a, b)) * gate
    assert torch.equal(got.view(torch.int16), want.view(torch.int16)), "seed=5"
    assert int((got != 0).sum()) > 0, "seed=5"
    with pytest.raises(ValueError, match="fallback"):
        matmul(a, b, fallback="maybe")


def test_profile_entry_without_a_kernel_raises_or_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile descriptor no fixbits kernel realises (here cuBLAS's reduce_1Block merge moved to an
    inner level, which only level 0 of the workspace GEMV realises) is handled like an answer
    outside the profile: MatmulUnavailable naming why, or cuBLAS when asked to."""
    torch = pytest.importorskip("torch")
    import fixbits.kernels.matmul as mm
    from fixbits.probe.profile import find

    prof = find("sm_90", "130100", "fp16", "fp16")
    desc = next(
        v.desc
        for e in prof.entries.values()
        for v in (e.variants or ())
        if any(c.merge == "reduce_1block" for c in v.desc.k_cuts)
    )
    desc = desc.replace(k_cuts=(desc.k_cuts[1], desc.k_cuts[0], *desc.k_cuts[2:]))
    monkeypatch.setattr(mm, "resolve_desc", lambda *a, **k: desc)  # the route's lookup, stubbed
    g = torch.Generator().manual_seed(6)
    a = torch.randn((1, 64), generator=g).half()
    b = torch.randn((64, 8), generator=g).half()
    with pytest.raises(mm.MatmulUnavailable, match="has no kernel.*reduce_1block"):
        mm.matmul(a, b)
    got = mm.matmul(a, b, fallback="cublas")
    assert torch.equal(got.view(torch.int16), torch.mm(a, b).view(torch.int16)), "seed=6"
    assert int((got != 0).sum()) > 0, "seed=6"
