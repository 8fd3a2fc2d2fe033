"""Per-MMA kernels keep their zero-started temporaries after Triton's own IR passes.

The H200 found ``per_mma fp16 P1`` agreeing with itself across configs but not with the
emulator: Triton's combine pass had rewritten the promotion-group body ``acc + dot(a, b, 0)``
into ``dot(a, b, acc)``, the fast chain. The interpreter never runs that pass, so the
interpreter tests could not see it; this test compiles the real kernels for sm_90 and reads
their TTIR: every dot of a per-MMA chain must start from a zero constant or from the
zero-reset temporary, never from the accumulator.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from _kernels_aot import Sm90Launches  # noqa: E402

from fixbits.desc import GEMMDesc, KCut  # noqa: E402
from fixbits.kernels._host import KernelConfig, torch_dtype  # noqa: E402
from fixbits.kernels.per_mma import per_mma_matmul  # noqa: E402

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32",
              use_fast_accum=False, promotion_interval=1)  # fmt: skip
CASES = {
    "fp16 P1": TC.replace(promotion_interval=1),
    "fp16 P4 res-first": TC.replace(promotion_interval=4, residue="first"),
    "bf16 P2": TC.replace(in_dtype="bf16", promotion_interval=2),
    "splitk_per_mma fp16 P2 2 parts": TC.replace(promotion_interval=2, k_cuts=(KCut("contiguous", count=2),)),
    "fp8 P4": TC.replace(
        in_dtype="fp8_e4m3", instruction_k=32, k_loop_step=128, promotion_interval=4, out_dtype="fp16"
    ),  # fmt: skip
}
CONFIGS = {
    "16x16x16": KernelConfig(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, num_warps=1, num_stages=1),
    "128x64x256 G2": KernelConfig(
        BLOCK_M=128, BLOCK_N=64, BLOCK_K=256, GROUP_M=8, num_warps=4, num_stages=2, GROUPS=2
    ),  # fmt: skip
    "128x64x64 swap": KernelConfig(
        BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, num_warps=4, num_stages=4, SWAP_AB=1
    ),  # fmt: skip
}
_DOT = re.compile(r"= tt\.dot (%[\w#]+), (%[\w#]+), (%[\w#]+)")
_ZERO = re.compile(r"(%[\w#]+) = arith\.constant dense<0\.0+e\+00> : tensor<\d+x\d+xf32>")


def dot_accumulators(ttir: str) -> list[str]:
    return [m.group(3) for m in _DOT.finditer(ttir)]


def bad_dots(ttir: str) -> list[str]:
    """Accumulator operands of dots that are neither a zero constant nor the temporary."""
    zeros = set(_ZERO.findall(ttir))
    return [c for c in dot_accumulators(ttir) if c not in zeros and not re.match(r"%tmp(_\d+)?$", c)]


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
@pytest.mark.parametrize("case", list(CASES))
def test_per_mma_dots_start_from_zero(case: str, cfg_name: str) -> None:
    desc = CASES[case]
    dt = torch_dtype(desc.in_dtype)
    a, b = torch.zeros((24, 1000), dtype=dt), torch.zeros((1000, 40), dtype=dt)
    fn = per_mma_matmul
    if desc.k_cuts:
        from fixbits.kernels.splitk_per_mma import splitk_per_mma_matmul as fn
    with Sm90Launches() as launches:
        fn(a, b, desc, config=CONFIGS[cfg_name])
    ttir = "\n".join(k.asm["ttir"] for k in launches.kernels)  # split-K: the parts kernel and the merge
    assert dot_accumulators(ttir), "no tt.dot found in the TTIR"
    assert bad_dots(ttir) == [], f"{case} {cfg_name}: dots accumulate into {bad_dots(ttir)}"


def test_checker_flags_the_folded_form() -> None:
    """The TTIR the H200 run compiled (the fold) is what the check rejects."""
    folded = (
        "%cst = arith.constant dense<0.000000e+00> : tensor<64x64xf32>\n"
        "%tmp_59 = tt.dot %a_50, %b_58, %tmp, inputPrecision = tf32\n"
        "%acc_53 = tt.dot %a_46, %b_52, %acc_39, inputPrecision = tf32\n"
    )
    assert bad_dots(folded) == ["%acc_39"]


_DOT_FULL = re.compile(
    r"= tt\.dot (%[\w#]+), (%[\w#]+), (%[\w#]+),.*?maxNumImpreciseAcc = (\d+) : i32\} : tensor<\d+x(\d+)xf8"
)


@pytest.mark.parametrize("residue", ["last", "first"])
def test_fp8_tma_turns_promote_every_group(monkeypatch: pytest.MonkeyPatch, residue: str) -> None:
    """The fp8 TMA body folds each turn into the accumulator in one dot: Triton's sm_90 lowering
    then promotes a zero-started partial every maxNumImpreciseAcc elements, so that value must be
    the promotion group's width (PROMO * IK) and the turn a whole number of groups. Every other
    dot still starts from zero or from the temporary."""
    import functools

    import fixbits.kernels.single_pass as sp

    monkeypatch.setattr(sp, "tma_descriptors", functools.partial(sp.tma_descriptors, require_cuda=False))
    desc = CASES["fp8 P4"].replace(out_dtype="fp32", k_loop_step=64, residue=residue)
    a = torch.zeros((192, 1000 + 24), dtype=torch.float8_e4m3fn)
    b = torch.zeros((320, 1024), dtype=torch.float8_e4m3fn).t()  # K-major B, as cuBLAS's fp8 takes it
    cfg = KernelConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=4, GROUPS=2, USE_TMA=1)
    with Sm90Launches() as launches:
        per_mma_matmul(a, b, desc, config=cfg)
    ttir = "\n".join(k.asm["ttir"] for k in launches.kernels)
    assert "tt.descriptor_load" in ttir, "the TMA body was not taken"
    group = desc.promotion_interval * desc.instruction_k
    into_acc = [m for m in _DOT_FULL.finditer(ttir) if m.group(3) in bad_dots(ttir)]
    assert into_acc, "no dot folds a TMA turn into the accumulator"
    for m in into_acc:
        assert int(m.group(4)) == group, f"promotes every {m.group(4)} elements, not {group}"
        assert int(m.group(5)) == 2 * group, f"a turn of {m.group(5)} elements is not GROUPS=2 groups"
    assert len(into_acc) == len(bad_dots(ttir)), "a dot accumulates into acc without promoting"


@pytest.mark.parametrize("k, ws", [(1024, True), (1024 + 64, False)])
def test_fp8_warp_specialized_kernel_keeps_the_promotion(monkeypatch: pytest.MonkeyPatch, k: int, ws: bool) -> None:
    """A WARP_SPEC config takes the warp-specialized turn loop only where K is whole turns (else
    the pointer head/tail would precede or follow the turn loop, which Triton's sm_90 pass
    cannot partition): there the kernel must really be split into producer and consumers
    (setmaxnreg in the PTX, 12 warps), and its one dot must still promote every PROMO * IK
    elements."""
    import functools

    import fixbits.kernels.single_pass as sp

    monkeypatch.setattr(sp, "tma_descriptors", functools.partial(sp.tma_descriptors, require_cuda=False))
    monkeypatch.setenv(sp.WARP_SPEC_ENV, "1")  # (opt-in per process: ws_route)
    desc = CASES["fp8 P4"].replace(out_dtype="fp32", k_loop_step=64, residue="last")
    a = torch.zeros((256, k), dtype=torch.float8_e4m3fn)
    b = torch.zeros((256, k), dtype=torch.float8_e4m3fn).t()
    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=3, USE_TMA=1, WARP_SPEC=1)
    assert sp.ws_route(desc, cfg, k, b_trans=True) is ws
    with Sm90Launches() as launches:
        per_mma_matmul(a, b, desc, config=cfg)
    (kern,) = launches.kernels
    assert ("setmaxnreg" in kern.asm["ptx"]) is ws, "warp specialization not applied as routed"
    assert (kern.metadata.num_warps == 12) is ws, kern.metadata.num_warps
    group = desc.promotion_interval * desc.instruction_k
    into_acc = [m for m in _DOT_FULL.finditer(kern.asm["ttir"]) if m.group(3) in bad_dots(kern.asm["ttir"])]
    assert into_acc and all(int(m.group(4)) == group for m in into_acc)


def test_ws_route_is_opt_in_and_needs_whole_turns_and_k_major_fp8_b(monkeypatch: pytest.MonkeyPatch) -> None:
    """The route's conditions one by one: off unless the process opts in (its launches hung on
    an H100; a malformed switch is an error naming it), then off without WARP_SPEC or TMA, off
    for a persistent grid, off when K leaves a k-loop residue or a partial turn, and off for fp8
    with an N-major B."""
    import dataclasses

    import fixbits.kernels.single_pass as sp

    fp8 = CASES["fp8 P4"].replace(out_dtype="fp32", k_loop_step=64, residue="last")
    fp16 = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=3, USE_TMA=1, WARP_SPEC=1)
    monkeypatch.delenv(sp.WARP_SPEC_ENV, raising=False)
    assert not sp.ws_route(fp8, cfg, 4096, b_trans=True)  # not asked for: the plain branches
    assert not sp.ws_route(fp16, cfg, 4096, b_trans=False)
    monkeypatch.setenv(sp.WARP_SPEC_ENV, "yes")
    with pytest.raises(ValueError, match="FIXBITS_WARP_SPEC='yes'"):
        sp.ws_route(fp8, cfg, 4096, b_trans=True)
    monkeypatch.setenv(sp.WARP_SPEC_ENV, "1")
    assert sp.ws_route(fp8, cfg, 4096, b_trans=True)
    assert not sp.ws_route(fp8, dataclasses.replace(cfg, WARP_SPEC=0), 4096, b_trans=True)
    assert not sp.ws_route(fp8, dataclasses.replace(cfg, USE_TMA=0), 4096, b_trans=True)
    assert not sp.ws_route(fp8, dataclasses.replace(cfg, PERSISTENT=1), 4096, b_trans=True)
    assert not sp.ws_route(fp8.replace(k_loop_step=128), cfg, 4096 + 64, b_trans=True)  # residue under STEP
    assert sp.ws_route(fp16, cfg, 4096, b_trans=False)
    assert not sp.ws_route(fp16, cfg, 4096 + 32, b_trans=False)
    assert not sp.ws_route(fp8, cfg, 4096, b_trans=False)
    assert not sp.ws_route(fp8, cfg, 4096 + 64, b_trans=True)  # half a promotion group left
