"""Every autotune config of every kernel family, and every fused epilogue, compiles for sm_90.

The launches go through the real host code (fixbits.kernels.*_matmul) and Triton's own
runtime launch path (tests/_kernels_aot.Sm90Driver: binder, compile for sm_90, the shared-memory
check of the H200's 227 KB; only the cubin launch is recorded), so a signature or argument-order
mistake, or a config over the shared memory, fails here as it would on the GPU. The fast tier covers every config of the tensor-core
space on the single-pass kernel (both B layouts for the TMA ones, a pointer-reading epilogue)
and every epilogue op on every kernel; the `slow` tier runs a deterministic
sixth of config x family x dtype (every config, families alternating, dtypes rotating).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from _kernels_aot import Sm90Driver  # noqa: E402

from fixbits.desc import EpilogueOp, GEMMDesc, KCut  # noqa: E402
from fixbits.kernels.epilogue import EP_CODES  # noqa: E402

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32")
FP8 = dict(in_dtype="fp8_e4m3", instruction_k=32, k_loop_step=128)

TC_FAMILIES: dict[str, GEMMDesc] = {
    "single_pass": TC,
    "per_mma": TC.replace(use_fast_accum=False, promotion_interval=4, residue="first"),
    "splitk": TC.replace(k_cuts=(KCut("contiguous", count=4),)),
    "splitk_per_mma": TC.replace(
        k_cuts=(KCut("contiguous", count=3, granule=64),), use_fast_accum=False, promotion_interval=2
    ),
    "mma_k8": TC.replace(instruction="mma", instruction_k=8),
}
IN_DTYPES = ("fp16", "bf16", "fp8_e4m3")
# the epilogue that reads every tensor argument (bias, gate, residual) plus a scale
POINTER_EP = (EpilogueOp("bias"), EpilogueOp("silu_gate"), EpilogueOp("residual"), EpilogueOp("scale", 0.5))
M, N, K = 192, 320, 1024


def _desc_for(base: GEMMDesc, in_dtype: str, out_dtype: str, ep: tuple[EpilogueOp, ...]) -> GEMMDesc:
    if in_dtype.startswith("fp8") and base.instruction != "fma":
        return base.replace(
            **FP8, out_dtype=out_dtype, epilogue=ep, promotion_interval=base.promotion_interval and 4
        )
    return base.replace(in_dtype=in_dtype, out_dtype=out_dtype, epilogue=ep)


def _operands(desc: GEMMDesc, *, b_t: bool = False, m: int = M, n: int = N, k: int = K) -> dict[str, Any]:
    from fixbits.kernels._host import torch_dtype

    dt, ot = torch_dtype(desc.in_dtype), torch_dtype(desc.out_dtype)
    a = torch.zeros((m, k), dtype=dt)
    b = torch.zeros((n, k), dtype=dt).t() if b_t else torch.zeros((k, n), dtype=dt)
    return dict(
        a=a, b=b, bias=torch.zeros((n,), dtype=ot), gate=torch.zeros((m, n), dtype=ot),
        residual=torch.zeros((m, n), dtype=ot),
    )  # fmt: skip


def _compile(
    desc: GEMMDesc, config: Any = None, *, b_t: bool = False, strict: bool | None = True, **shape: int
) -> int:
    """Run the family launcher of ``desc`` under Sm90Driver; return how many kernels launched.
    ``strict``: the config must fit the shared memory as given (SharedMemoryStepDown raises);
    False: a step-down is allowed; None: the caller's warning filters apply."""
    import warnings

    import fixbits.kernels.single_pass as sp
    from fixbits.kernels._host import SharedMemoryStepDown
    from fixbits.kernels.dispatch import choose_kernel

    ops = _operands(desc, b_t=b_t, **shape)
    a, b = ops.pop("a"), ops.pop("b")
    fn = choose_kernel(desc, a.shape[0], b.shape[1]).load()
    kw: dict[str, Any] = {k: v for k, v in ops.items()}
    if config is not None:
        kw["config"] = config
    orig = sp.tma_descriptors
    sp.tma_descriptors = functools.partial(orig, require_cuda=False)  # type: ignore[assignment]
    orig_sms = sp.num_sms
    sp.num_sms = lambda device: 132  # type: ignore[assignment]
    try:
        # Triton's real launch path: a kernel over the H200's shared memory raises OutOfResources
        with Sm90Driver() as drv, warnings.catch_warnings():
            if strict is not None:
                warnings.simplefilter("error" if strict else "ignore", SharedMemoryStepDown)
            fn(a, b, desc, **kw)
    finally:
        sp.tma_descriptors = orig  # type: ignore[assignment]
        sp.num_sms = orig_sms  # type: ignore[assignment]
    assert drv.launches, "no kernel was launched"
    return len(drv.launches)


def _all_tc_configs() -> list[Any]:
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.tuning import equivalence_space, tensor_core_classes

    # (config, the input dtype it is for: None for every dtype, compiled as fp16 single-pass)
    seen: dict[tuple[str, str | None], tuple[Any, str | None]] = {}
    for cls in tensor_core_classes():
        pairs = [(cls.default, None), *((c, dt) for dt, c in cls.dtype_defaults)]
        for cfg, w in zip(cls.space, cls.when or [None] * len(cls.space), strict=True):
            pairs += [(cfg, dt) for dt in w.in_dtypes] if w is not None and w.in_dtypes else [(cfg, None)]
        for cfg, dt in pairs:
            seen.setdefault((cfg.label(), dt), (cfg, dt))
    for raw in equivalence_space("tensor_core"):
        cfg = KernelConfig.from_dict(raw)
        seen.setdefault((cfg.label(), None), (cfg, None))
    return [seen[k] for k in sorted(seen, key=str)]


def _label(case: Any) -> str:
    cfg, dt = case
    return str(cfg.label()) + (f"-{dt}" if dt else "")


CONFIGS = _all_tc_configs()


@pytest.mark.parametrize("case", CONFIGS, ids=_label)
def test_every_tensor_core_config_compiles_with_every_pointer_argument(case: Any) -> None:
    """A config kept for one input dtype (``when: in_dtypes``) compiles on that dtype's family:
    fp8 entries are per-MMA turns of one promotion group, K-major B (the TMA body)."""
    cfg, dt = case
    if dt is None:
        desc = _desc_for(TC, "fp16", "fp16", POINTER_EP)
    else:
        desc = _desc_for(TC_FAMILIES["per_mma"], dt, "fp32", POINTER_EP)
    _compile(desc, cfg)
    if cfg.USE_TMA:  # the B^T descriptor path too
        _compile(desc, cfg, b_t=True)


@pytest.mark.parametrize("op", sorted(EP_CODES))
def test_every_epilogue_op_compiles_on_the_single_pass_kernel(op: str) -> None:
    from fixbits.kernels._host import KernelConfig

    ep = (EpilogueOp(op, 0.25 if op == "scale" else None),)
    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3, USE_TMA=1)
    _compile(_desc_for(TC, "bf16", "bf16", ep), cfg)


@pytest.mark.parametrize(
    "family", ["splitk", "splitk_per_mma", "persistent", "gemv_contiguous", "gemv_workspace"]
)
def test_every_epilogue_kernel_compiles_with_every_pointer_argument(family: str) -> None:
    from fixbits.kernels._host import KernelConfig

    if family == "persistent":
        cfg = KernelConfig(
            BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3, USE_TMA=1, PERSISTENT=1
        )
        _compile(_desc_for(TC, "fp16", "fp16", POINTER_EP), cfg)
        return
    if family.startswith("gemv"):
        base = FMA.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=16)))
        shape = dict(m=4, n=64, k=512) if family == "gemv_workspace" else dict(m=4, n=4096, k=512)
        _compile(_desc_for(base, "fp16", "fp16", POINTER_EP), **shape)
        return
    _compile(_desc_for(TC_FAMILIES[family], "fp16", "bf16", POINTER_EP))


@pytest.mark.parametrize("in_dtype", IN_DTYPES)
@pytest.mark.parametrize("family", sorted(TC_FAMILIES))
def test_every_family_compiles_for_every_input_dtype(family: str, in_dtype: str) -> None:
    if family == "mma_k8" and in_dtype.startswith("fp8"):
        pytest.skip("instruction=mma has no fp8 form on sm_90 (dispatch refuses it)")
    out = "bf16" if in_dtype.startswith("fp8") else "fp32"
    _compile(_desc_for(TC_FAMILIES[family], in_dtype, out, ()))


def _config_family_dtype() -> list[tuple[Any, str, str]]:
    """A deterministic sixth of config x family x dtype, sized for 2-core CI: each config on
    every other family (alternating), the input dtype rotating (fp16, bf16, fp8), so every
    config meets two or three families and each family meets each dtype."""
    out = []
    for i, (cfg, only) in enumerate(CONFIGS):
        for j, family in enumerate(sorted(TC_FAMILIES)):
            if (i + j) % 2 or (only and family == "mma_k8"):
                continue
            dts = (only,) if only else IN_DTYPES[:2] if family == "mma_k8" else IN_DTYPES
            out.append((cfg, family, dts[(i + j) % len(dts)]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cfg", "family", "in_dtype"),
    _config_family_dtype(),
    ids=[f"{c.label()}-{f}-{d}" for c, f, d in _config_family_dtype()],
)
def test_every_config_of_every_family_compiles(cfg: Any, family: str, in_dtype: str) -> None:
    out = "fp16" if in_dtype == "fp16" else "bf16"
    # instruction_k=8 holds two copies of each turn in shared memory: the deepest configs step
    # down a stage (same bytes); every other family must fit the H200 as configured
    _compile(_desc_for(TC_FAMILIES[family], in_dtype, out, POINTER_EP), cfg, strict=family != "mma_k8")


def test_every_epilogue_kernel_takes_the_epilogue_arguments_in_kernel_args_order() -> None:
    """EpilogueArgs.kernel_args is splatted positionally: the kernels must name them in that order."""
    from fixbits.kernels import _scalar, gemv_workspace, single_pass, splitk

    want = ["bias_ptr", "res_ptr", "gate_ptr", "stride_rm", "stride_rn", "stride_gm", "stride_gn"]
    for kern in (
        single_pass._single_pass_kernel, single_pass._single_pass_persistent_kernel, splitk._splitk_merge_kernel,
        _scalar._scalar_nest_kernel, gemv_workspace._ws_merge_kernel,
    ):  # fmt: skip
        names = list(kern.arg_names)
        i = names.index("bias_ptr")
        assert names[i : i + len(want)] == want, f"{kern}: {names[i : i + len(want)]}"


def _profile_entries(limit: int = 40) -> list[tuple[str, Any, tuple[int, int, int]]]:
    """(id, desc, shape) of every distinct descriptor in matrices/profiles/ (the profile route's
    answers), capped deterministically (sorted by hash, every family kept) so CI stays short."""
    import glob

    from fixbits.probe import profile as profiles

    seen: dict[str, tuple[str, Any, tuple[int, int, int]]] = {}
    for path in sorted(glob.glob(str(profiles.PROFILE_DIR / "*.yaml"))):
        for key, entry in sorted(profiles.load(path).entries.items()):
            d = entry.desc
            m, n, k = (tuple(entry.shape) + (64, 64, 256))[:3] if entry.shape else (64, 64, 256)
            seen.setdefault(d.short_hash, (f"{d.family}-{d.in_dtype}-{key}", d, (int(m), int(n), int(k))))
    items = sorted(seen.values(), key=lambda t: t[1].short_hash)
    by_family: dict[str, list[Any]] = {}
    for it in items:
        by_family.setdefault(it[1].family, []).append(it)
    out: list[tuple[str, Any, tuple[int, int, int]]] = []
    while len(out) < min(limit, len(items)):
        for fam in sorted(by_family):
            if by_family[fam] and len(out) < limit:
                out.append(by_family[fam].pop(0))
    return out


PROFILE_ENTRIES = _profile_entries()


@pytest.mark.parametrize(
    ("desc", "shape"), [(d, s) for _, d, s in PROFILE_ENTRIES], ids=[i for i, _, _ in PROFILE_ENTRIES]
)
def test_every_profile_descriptor_compiles_through_its_family(desc: Any, shape: tuple[int, int, int]) -> None:
    """fixbits.matmul's profile route launches what these descriptors name: each must compile
    (at its recorded K, M and N capped for CPU memory), with the pointer-reading epilogue."""
    m, n, k = shape
    m, n = min(m, 256), min(n, 4096)
    out = "fp16" if desc.in_dtype == "fp16" else "bf16"
    ep = POINTER_EP if desc.instruction != "fma" or m * n > 1 else ()
    _compile(desc.replace(out_dtype=out, epilogue=ep), m=m, n=n, k=k)


def test_a_config_over_the_shared_memory_steps_down_a_stage_and_warns() -> None:
    """128x128x64 with 5 stages on the instruction_k=8 body needs 320 KB on sm_90 (227 KB there):
    the launch warns and runs with fewer stages; the same config on wgmma k16 fits as given."""
    from fixbits.kernels._host import KernelConfig, SharedMemoryStepDown

    cfg = KernelConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=5)
    with pytest.warns(SharedMemoryStepDown) as record:
        _compile(_desc_for(TC_FAMILIES["mma_k8"], "fp16", "fp16", ()), cfg, strict=None)
    steps = [str(w.message).split(": ")[0] + " -> " + str(w.message).rsplit("running ", 1)[1] for w in record]
    assert steps == [
        "128x128x64_g8_w8_s5_G1 -> 128x128x64_g8_w8_s4_G1",
        "128x128x64_g8_w8_s4_G1 -> 128x128x64_g8_w8_s3_G1",
    ]
    _compile(_desc_for(TC, "fp16", "fp16", ()), cfg)
