"""The kernels compile for sm_90 on a machine with no GPU, and their PTX says what the
arithmetic needs: wgmma for the tensor-core chain, explicit fma for the scalar chain, no
contracted multiply-add anywhere else (kernels compile with enable_fp_fusion=False)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")

from _kernels_aot import compile_ptx  # noqa: E402

EPN = dict(EP0=0, EP1=0, EP2=0, EP3=0, OUT=0, GELU_TANH_FMA=True)
NO_TMA = dict(USE_TMA=False, B_TRANS=False, TMA_STORE=False, WS=False, a_desc=None, b_desc=None, c_desc=None)


def _types(dt: str, out: str = "fp32") -> dict[str, str]:
    t = {"a_ptr": f"*{dt}", "b_ptr": f"*{dt}", "out_ptr": f"*{out}", "bias_ptr": f"*{out}", "res_ptr": f"*{out}",
         "gate_ptr": f"*{out}", "ws_ptr": "*fp32", "runs_ptr": "*i32", "offs_ptr": "*i32", "idx_ptr": "*i32"}  # fmt: skip
    t.update({f"ep_scale{i}": "fp32" for i in range(4)})
    return t


def test_single_pass_lowers_to_wgmma_k16_with_no_contraction() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=64, IK=16, HWK=16, PROMO=0, GROUPS=0, RES_FIRST=False, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
              GROUP_M=8, NUM_STAGES=3, **NO_TMA, **{**EPN, "OUT": 1, "EP0": 1, "EP1": 7})  # fmt: skip
    ptx = compile_ptx(_single_pass_kernel, _types("fp16", "fp16"), cx, num_warps=8)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.f16\.f16", ptx), "no fp16 wgmma k16"
    assert "fma.rn.f32" not in ptx, "a multiply-add was contracted in the epilogue"


def test_fp8_single_pass_uses_e4m3_wgmma_k32() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=128, IK=32, HWK=32, PROMO=4, GROUPS=1, RES_FIRST=False, BLOCK_M=64, BLOCK_N=64, BLOCK_K=128,
              GROUP_M=8, NUM_STAGES=3, **NO_TMA, **EPN)  # fmt: skip
    ptx = compile_ptx(_single_pass_kernel, _types("fp8e4nv"), cx, num_warps=4)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3", ptx), (
        "no e4m3 wgmma k32"
    )


def test_tma_body_keeps_the_wgmma_chain() -> None:
    from fixbits.kernels.single_pass import _single_pass_kernel

    cx = dict(STEP=64, IK=16, HWK=16, PROMO=0, GROUPS=0, RES_FIRST=True, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
              GROUP_M=8, NUM_STAGES=3, USE_TMA=True, B_TRANS=True, TMA_STORE=False, WS=False, c_desc=None, **EPN)  # fmt: skip
    types = {**_types("fp16"), "a_desc": "tensordesc<fp16[128,64]>", "b_desc": "tensordesc<fp16[128,64]>"}
    ptx = compile_ptx(_single_pass_kernel, types, cx, num_warps=8)
    assert "cp.async.bulk.tensor" in ptx and re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16", ptx)


def test_scalar_nest_is_an_fma_chain() -> None:
    from fixbits.kernels._scalar import _scalar_nest_kernel

    cx = dict(C0=4, C1=8, C2=1, C3=1, L0=2, L1=3, L2=0, L3=0, K0=0, K1=2, K2=0, K3=0, PARTIAL=1, MERGE=0,
              HAS_L0=True, BLOCK_M=1, BLOCK_N=16, **EPN)  # fmt: skip
    ptx = compile_ptx(_scalar_nest_kernel, _types("fp16"), cx, num_warps=4)
    assert "fma.rn.f32" in ptx and "mma" not in ptx


def test_splitk_parts_keep_the_k_contiguous_operand_on_cp_async_when_told_the_alignment(monkeypatch) -> None:
    """A part's K start comes from a device table: unless the kernel is told it divides by 64
    (RUN_ALIGN, TensorCorePlan.run_align), Triton must assume it odd and loads A (K-contiguous)
    with scalar ld.global inside the K loop instead of pipelined cp.async (H200 run 8b: split-K
    shapes at 0.34x cuBLAS GPU time). Compiled through Triton's own binder, as the GPU would."""
    import torch
    from _kernels_aot import Sm90Launches

    from fixbits.desc import GEMMDesc, KCut
    from fixbits.kernels import plan as plan_mod
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.plan import tensor_core_plan
    from fixbits.kernels.splitk import launch_parts

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16",
                    k_cuts=(KCut("contiguous", count=3, granule=64),))  # cuBLASLt's a66-t312-s3 on the H200
    m, n, k = 16, 2048, 8192
    a, b = torch.empty((m, k), dtype=torch.float16), torch.empty((k, n), dtype=torch.float16)
    ws = torch.empty((3, m, n), dtype=torch.float16)
    cfg = KernelConfig(BLOCK_M=16, BLOCK_N=32, BLOCK_K=256, GROUP_M=1, num_warps=4, num_stages=3)
    plan = tensor_core_plan(desc, k)
    assert plan.run_align(desc.k_loop_step) == 64
    ptx = {}
    for told in (True, False):
        if not told:
            monkeypatch.setattr(plan_mod.TensorCorePlan, "run_align", lambda self, step, cap=64: 1)
        with Sm90Launches() as got:
            launch_parts(desc, plan, a, b, ws, cfg)
        ptx[told] = got.kernels[0].asm["ptx"]
    assert ptx[True].count("ld.global") <= 8 < ptx[False].count("ld.global")
    assert ptx[True].count("cp.async.cg") > ptx[False].count("cp.async.cg")


@pytest.mark.parametrize("swap", [0, 1], ids=["plain", "swap"])
@pytest.mark.parametrize("b_kmajor", [False, True], ids=["b_rowmajor", "b_kmajor"])
def test_fp8_splitk_parts_take_tma_turns_with_e4m3_wgmma(swap: int, b_kmajor: bool) -> None:
    """fp8 split-K per-MMA parts with USE_TMA load their aligned turns by TMA (swapped or not,
    B either way round) and keep e4m3 wgmma k32: cuBLASLt's a66-t312-s3 answer for the moe_up
    shape 16x2048x8192, whose parts took the pointer body up to session 26 (0.06-0.26 of cuBLAS
    on the H100). Without USE_TMA the same launch has no bulk tensor copy; swapped with B
    row-major, the kernel's A (B^T) has no unit stride, so no TMA either (the pointer body)."""
    import torch
    from _kernels_aot import Sm90Launches

    from fixbits.desc import GEMMDesc, KCut
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.plan import tensor_core_plan
    from fixbits.kernels.splitk import launch_parts

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", out_dtype="fp32",
                    use_fast_accum=False, promotion_interval=4, k_loop_step=128,
                    k_cuts=(KCut("contiguous", count=3, granule=128),))  # fmt: skip
    m, n, k = 16, 2048, 8192
    a = torch.empty((m, k), dtype=torch.float8_e4m3fn, device="meta")
    b = (torch.empty((n, k), dtype=torch.float8_e4m3fn, device="meta").t() if b_kmajor
         else torch.empty((k, n), dtype=torch.float8_e4m3fn, device="meta"))  # fmt: skip
    ws = torch.empty((3, m, n), dtype=torch.float32, device="meta")
    plan = tensor_core_plan(desc, k)
    ptx = {}
    for tma in (1, 0):
        cfg = KernelConfig(BLOCK_M=64, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4,
                           USE_TMA=tma, SWAP_AB=swap)  # fmt: skip
        with Sm90Launches() as got:
            launch_parts(desc, plan, a, b, ws, cfg)
        ptx[tma] = str(got.kernels[0].asm["ptx"])
    assert ("cp.async.bulk.tensor" in ptx[1]) == (b_kmajor or not swap)
    assert "cp.async.bulk.tensor" not in ptx[0]
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3", ptx[1])


def _tile_ptx(cfg: object, m: int, n: int, k: int, *, out_dtype: str = "fp16", b_t: bool = False,
              epilogue: tuple = ()) -> str:  # fmt: skip
    """PTX of the single-pass kernel that the reference host path (launch_tile_kernel) launches
    for meta tensors: Triton's own binder specialises the descriptors and pointers."""
    import torch
    from _kernels_aot import Sm90Launches

    from fixbits.desc import GEMMDesc
    from fixbits.kernels._host import epilogue_args, torch_dtype
    from fixbits.kernels.single_pass import launch_tile_kernel

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype=out_dtype,
                    epilogue=epilogue)  # fmt: skip
    odt = torch_dtype(out_dtype)
    a = torch.empty((m, k), dtype=torch.float16, device="meta")
    b = torch.empty((n, k) if b_t else (k, n), dtype=torch.float16, device="meta")
    b = b.t() if b_t else b
    out = torch.empty((m, n), dtype=odt, device="meta")
    side = {name: torch.empty(shape, dtype=odt, device="meta") for name, shape in
            (("bias", (n,)), ("residual", (m, n)), ("gate", (m, n)))}  # fmt: skip
    ep = epilogue_args(desc, m, n, **side)
    with Sm90Launches() as got:
        launch_tile_kernel(desc, a, b, out, ep, cfg)  # type: ignore[arg-type]
    assert len(got.kernels) == 1
    return str(got.kernels[0].asm["ptx"])


BULK_STORE = re.compile(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group")


@pytest.mark.parametrize(
    ("tiles", "m", "n", "k"),
    [((128, 128, 64, 4, 1), 16384, 7168, 64), ((128, 256, 64, 8, 3), 4096, 4096, 4096)],
    ids=["lora_b_128x128x64_s1", "128x256x64_s3"],
)
def test_tma_store_writes_the_output_tile_by_one_bulk_tensor_store(
    tiles: tuple[int, ...], m: int, n: int, k: int
) -> None:
    """TMA_STORE: the output tile leaves through shared memory and one TMA bulk store (which clips
    at the descriptor's bounds) instead of masked st.global; without it, st.global and no bulk store."""
    from fixbits.kernels._host import KernelConfig

    bm, bn, bk, w, s = tiles
    cfg = KernelConfig(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=s, USE_TMA=1)
    plain = _tile_ptx(cfg, m, n, k)
    assert "st.global" in plain and not BULK_STORE.search(plain)
    ptx = _tile_ptx(KernelConfig(**{**cfg.to_dict(), "TMA_STORE": 1}), m, n, k)
    assert len(BULK_STORE.findall(ptx)) == 1 and "cp.async.bulk.wait_group" in ptx
    assert "st.global" not in ptx, "the output is still written by st.global"


def test_tma_store_keeps_the_epilogue_loads_and_the_persistent_grid() -> None:
    """A pointer-reading epilogue keeps its masked loads; the persistent kernel stores by TMA too."""
    import fixbits.kernels.single_pass as sp
    from fixbits.desc import EpilogueOp
    from fixbits.kernels._host import KernelConfig

    ep = (EpilogueOp("bias"), EpilogueOp("silu_gate"), EpilogueOp("residual"), EpilogueOp("scale", 0.5))
    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4, USE_TMA=1, TMA_STORE=1)
    ptx = _tile_ptx(cfg, 1000, 2048, 1024, epilogue=ep)
    assert len(BULK_STORE.findall(ptx)) == 1 and "st.global" not in ptx and "ld.global" in ptx
    orig = sp.num_sms
    sp.num_sms = lambda device: 132  # type: ignore[assignment]
    try:
        ptx = _tile_ptx(KernelConfig(**{**cfg.to_dict(), "PERSISTENT": 1}), 4096, 4096, 1024, epilogue=ep)
    finally:
        sp.num_sms = orig  # type: ignore[assignment]
    assert len(BULK_STORE.findall(ptx)) == 1 and "st.global" not in ptx


@pytest.mark.parametrize("case", ["unaligned_pitch", "swap_ab", "no_tma_route"])
def test_tma_store_falls_back_to_the_masked_store(case: str) -> None:
    """Where a TMA store cannot write the output as the masked store does (row pitch off 16 bytes,
    SWAP_AB writing C^T, no TMA route), TMA_STORE is ignored: same values, st.global."""
    from fixbits.kernels._host import KernelConfig

    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=3, USE_TMA=1, TMA_STORE=1)
    if case == "unaligned_pitch":  # B^T (N, K) is TMA-able, the (M, 1001) fp16 output is not
        ptx = _tile_ptx(cfg, 512, 1001, 256, b_t=True)
        assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx  # the loads still by TMA
    elif case == "swap_ab":
        ptx = _tile_ptx(KernelConfig(**{**cfg.to_dict(), "SWAP_AB": 1, "BLOCK_N": 16}), 16, 4096, 256)
    else:  # K pitch off 16 bytes: no operand descriptors, so no output descriptor either
        ptx = _tile_ptx(cfg, 512, 1024, 100)
    assert "st.global" in ptx and not BULK_STORE.search(ptx)
