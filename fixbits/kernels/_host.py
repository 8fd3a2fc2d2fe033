"""Host-side helpers shared by the family launchers: dtypes, checks, configs, epilogue tensors.

A ``KernelConfig`` holds only speed knobs (tile sizes, GROUP_M, warps, stages, promotion
groups per turn); the arithmetic comes from the GEMMDesc alone, so every config of a
family must return the same bytes (suites/reconstruction checks that on the GPU).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fixbits.desc import GEMMDesc
from fixbits.kernels.epilogue import EP_CODES, OUT_CODES, EpilogueError, EpiloguePlan, plan_epilogue

R = TypeVar("R")

EP_BIAS = EP_CODES["bias"]
EP_RESIDUAL = EP_CODES["residual"]

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class KernelConfig:
    """Speed knobs of one launch; never part of the arithmetic."""

    BLOCK_M: int = 128
    BLOCK_N: int = 128
    BLOCK_K: int = 64
    GROUP_M: int = 8
    num_warps: int = 4
    num_stages: int = 3
    GROUPS: int = 1  # per-MMA: promotion groups per main-loop turn
    USE_TMA: int = 0  # load whole turns through tensor descriptors (sm_90 TMA) when possible
    PERSISTENT: int = 0  # with USE_TMA: a persistent grid of PERSISTENT programs per SM
    SWAP_AB: int = 0  # compute C^T = B^T A^T (BLOCK_M then tiles N): thin-M shapes get wgmma's M=64
    # with USE_TMA: write the output tile by one TMA bulk store (a descriptor of the output)
    # instead of a masked st.global; the same values. Its BLOCK_M x BLOCK_N staging tile reuses
    # the K loop's shared memory, except in the persistent kernel (one more tile there)
    TMA_STORE: int = 0
    # with USE_TMA, opt-in per process (single_pass.ws_route): Triton's warp specialization of the TMA turn
    # loop (tl.range(warp_specialize=)) on sm_90: a producer warpgroup issues the loads and the
    # tile's rows go to consumer warpgroups, which run the same dots on their own rows. Each
    # element keeps its dots in order: the same bytes
    WARP_SPEC: int = 0

    def label(self) -> str:
        return (
            f"{self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K}_g{self.GROUP_M}_w{self.num_warps}"
            f"_s{self.num_stages}_G{self.GROUPS}"
            + ("_tma" if self.USE_TMA else "")
            + (f"_p{self.PERSISTENT}" if self.PERSISTENT else "")
            + ("_swap" if self.SWAP_AB else "")
            + ("_ts" if self.TMA_STORE else "")
            + ("_ws" if self.WARP_SPEC else "")
        )

    @classmethod
    def from_label(cls, label: str) -> KernelConfig:
        """The config ``label()`` names (label() keeps every field, so this round-trips)."""
        import re

        m = re.fullmatch(
            r"(\d+)x(\d+)x(\d+)_g(\d+)_w(\d+)_s(\d+)_G(\d+)(_tma)?(?:_p(\d+))?(_swap)?(_ts)?(_ws)?", label
        )
        if m is None:
            raise ValueError(f"{label!r} is not a KernelConfig label")
        bm, bn, bk, g, w, st, gr, tma, p, swap, ts, ws = m.groups()
        return cls(BLOCK_M=int(bm), BLOCK_N=int(bn), BLOCK_K=int(bk), GROUP_M=int(g), num_warps=int(w),
                   num_stages=int(st), GROUPS=int(gr), USE_TMA=int(bool(tma)), PERSISTENT=int(p or 0),
                   SWAP_AB=int(bool(swap)), TMA_STORE=int(bool(ts)), WARP_SPEC=int(bool(ws)))  # fmt: skip

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, where: str = "config") -> KernelConfig:
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"{where}: unknown key(s) {bad}; known: {sorted(known)}")
        return cls(**{k: int(v) for k, v in d.items()})


@functools.cache
def torch_dtype(name: str) -> torch.dtype:
    import torch

    table = {
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
        "fp32": torch.float32,
        "fp8_e4m3": torch.float8_e4m3fn,
        "fp8_e5m2": torch.float8_e5m2,
    }
    if name not in table:
        raise ValueError(f"dtype {name!r} not supported; supported: {', '.join(table)}")
    return table[name]


@functools.cache
def dtype_name(dt: torch.dtype) -> str:
    import torch

    table = {
        torch.float16: "fp16",
        torch.bfloat16: "bf16",
        torch.float32: "fp32",
        torch.float8_e4m3fn: "fp8_e4m3",
        torch.float8_e5m2: "fp8_e5m2",
    }
    if dt not in table:
        raise ValueError(f"torch dtype {dt} not supported; supported: {', '.join(map(str, table))}")
    return table[dt]


def k_major(b: torch.Tensor) -> torch.Tensor:
    """B (K, N) with K contiguous (a copy only where it is not): the layout of an nn.Linear
    weight's transpose, the only one fp8 wgmma reads B in and the TN form cuBLASLt's fp8 path
    takes. The values, hence the bytes of any product, are B's."""
    return b if b.stride(0) == 1 else b.t().contiguous().t()


@dataclass(frozen=True)
class LaunchGeometry:
    """The product a tile kernel computes for a row-major C (m, n) = A B: C itself, or with
    SWAP_AB C^T = B^T A^T (a thin M then tiles N and gets wgmma's 64 rows). Every element keeps
    its products and their k order, only the program computing it moves. ``m``, ``n``: the
    kernel's M and N; the strides the kernel reads its A and B by; the strides its (M, N) result
    is written to C's memory by."""

    m: int
    n: int
    a_strides: tuple[int, int]
    b_strides: tuple[int, int]
    out_strides: tuple[int, int]


def launch_geometry(
    m: int, n: int, a_strides: tuple[int, int], b_strides: tuple[int, int], swap: bool
) -> LaunchGeometry:
    if swap:
        return LaunchGeometry(n, m, (b_strides[1], b_strides[0]), (a_strides[1], a_strides[0]), (1, n))
    return LaunchGeometry(m, n, tuple(a_strides), tuple(b_strides), (n, 1))  # type: ignore[arg-type]


def check_operands(desc: GEMMDesc, a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int]:
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    want = torch_dtype(desc.in_dtype)
    if a.dtype is not want or b.dtype is not want:
        raise ValueError(f"desc.in_dtype={desc.in_dtype} needs {want}; got a {a.dtype}, b {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"a on {a.device}, b on {b.device}")
    return int(a.shape[0]), int(b.shape[1]), int(a.shape[1])


@dataclass(frozen=True)
class EpilogueArgs:
    """The epilogue's plan and its tensors, ready for a kernel call."""

    plan: EpiloguePlan
    bias: Any
    residual: Any
    gate: Any

    def kernel_args(self, out: torch.Tensor) -> list[Any]:
        res = self.residual if self.residual is not None else out
        gate = self.gate if self.gate is not None else out
        bias = self.bias if self.bias is not None else out
        return [bias, res, gate, res.stride(0), res.stride(1), gate.stride(0), gate.stride(1)]


def swapped_epilogue(ep: EpilogueArgs, m: int, n: int) -> EpilogueArgs | None:
    """The epilogue of C^T = B^T A^T: 2-D tensors transposed, and bias (indexed by n, now the
    row) read as a residual-shaped broadcast view, since bias and residual compute the same
    round(x + value). None when both are present (the residual slot is taken)."""
    plan = ep.plan
    res = ep.residual.t() if ep.residual is not None else None
    gate = ep.gate.t() if ep.gate is not None else None
    if plan.needs_bias:
        if plan.needs_residual:
            return None
        res = ep.bias[None, :].expand(m, n).t()
        codes = tuple(EP_RESIDUAL if c == EP_BIAS else c for c in plan.codes)
        plan = EpiloguePlan(codes=codes, scales=plan.scales)  # type: ignore[arg-type]
    return EpilogueArgs(plan=plan, bias=None, residual=res, gate=gate)


def epilogue_args(
    desc: GEMMDesc, m: int, n: int, bias: Any = None, residual: Any = None, gate: Any = None
) -> EpilogueArgs:
    plan = _plan(desc.epilogue)
    if not desc.epilogue:
        return EpilogueArgs(plan=plan, bias=None, residual=None, gate=None)
    for need, name, tensor, shape in (
        (plan.needs_bias, "bias", bias, (n,)),
        (plan.needs_residual, "residual", residual, (m, n)),
        (plan.needs_gate, "gate", gate, (m, n)),
    ):
        if need and tensor is None:
            raise EpilogueError(f"epilogue {[e.kind for e in desc.epilogue]} reads {name}, none given")
        if need and tuple(tensor.shape) != shape:
            raise EpilogueError(f"{name} must have shape {shape}, got {tuple(tensor.shape)}")
    return EpilogueArgs(plan=plan, bias=bias, residual=residual, gate=gate)


def epilogue_check(desc: GEMMDesc, m: int, n: int) -> Callable[[Any, Any, Any], None]:
    """``check(bias, residual, gate)`` for a cached launcher: the shape tests the epilogue's plan
    needs (a few attribute reads per call), epilogue_args' precise error when one fails."""
    plan = _plan(desc.epilogue)
    need_bias, need_res, need_gate = plan.needs_bias, plan.needs_residual, plan.needs_gate
    mn, bias_shape = (m, n), (n,)

    def check(bias: Any, residual: Any, gate: Any) -> None:
        if (
            (need_bias and (bias is None or bias.shape != bias_shape))
            or (need_res and (residual is None or residual.shape != mn))
            or (need_gate and (gate is None or gate.shape != mn))
        ):
            epilogue_args(desc, m, n, bias, residual, gate)  # raises the precise error
            raise EpilogueError("epilogue tensors do not match the plan")

    return check


@functools.lru_cache(maxsize=1024)
def _plan(ops: tuple[Any, ...]) -> EpiloguePlan:
    return plan_epilogue(ops)


def out_code(desc: GEMMDesc) -> int:
    return OUT_CODES[desc.out_dtype]


def fit_config(desc: GEMMDesc, cfg: KernelConfig) -> KernelConfig:
    """Adjust knobs the descriptor's instruction needs (never the arithmetic).

    fp8 on sm_90: a tile under 64 rows or fewer than 4 warps lowers tl.dot to mma.sync rather
    than wgmma, and the two accumulate fp8 differently, so fp8 tiles are kept on wgmma.
    """
    import dataclasses

    if desc.in_dtype.startswith("fp8"):
        cfg = dataclasses.replace(
            cfg,
            BLOCK_M=max(64, cfg.BLOCK_M),
            BLOCK_K=max(32, cfg.BLOCK_K),
            num_warps=max(4, cfg.num_warps),
        )
    return cfg


class SharedMemoryStepDown(UserWarning):
    """A config's kernel needed more shared memory than the GPU has and ran with fewer stages."""


def fewer_stages(cfg: KernelConfig, exc: Exception) -> KernelConfig:
    """The config to run after ``exc``: one pipeline stage fewer when ``exc`` is Triton's
    shared-memory OutOfResources and a stage can go (at one stage, no TMA store), else ``exc``
    is raised. Stages only overlap loads with MMAs and the TMA store writes the values the
    masked store writes, so the bytes are the same; a body that holds more buffers per stage
    (instruction_k=8 on sm_90 keeps two copies of each turn) keeps the tuning space usable.
    Warns SharedMemoryStepDown so a test can insist that a config fits as given."""
    import dataclasses
    import warnings

    from triton.runtime.errors import OutOfResources

    if not isinstance(exc, OutOfResources) or "shared memory" not in str(exc):
        raise exc
    if cfg.num_stages > 1:
        smaller = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)
    elif cfg.TMA_STORE:
        # the store tile (BLOCK_M x BLOCK_N outputs) is the last shared buffer a knob can drop;
        # Triton reuses the pipeline's buffers for it, so this is rare (256x256 fp32 outputs)
        smaller = dataclasses.replace(cfg, TMA_STORE=0)
    else:
        raise exc
    warnings.warn(f"{cfg.label()}: {exc}; running {smaller.label()}", SharedMemoryStepDown, stacklevel=3)
    return smaller


_DEVICE_TABLES: dict[tuple[Any, ...], Any] = {}
_MAX_DEVICE_TABLES = 1024


def device_table(key: tuple[Any, ...], build: Callable[[], Any], device: Any) -> torch.Tensor:
    """An int32 index table on ``device``, copied there once per (key, device): a pageable
    host-to-device copy on every call costs more than a small GEMM and cannot be captured in
    a CUDA graph. ``key`` must determine ``build()`` (the descriptor and K do)."""
    import numpy as np
    import torch

    full = (*key, str(device))
    hit = _DEVICE_TABLES.get(full)
    if hit is None:
        if len(_DEVICE_TABLES) >= _MAX_DEVICE_TABLES:
            _DEVICE_TABLES.clear()
        hit = _DEVICE_TABLES[full] = torch.from_numpy(np.ascontiguousarray(build(), dtype=np.int32)).to(device)
    return hit


def fewer_stages_on_oom(run: Callable[[KernelConfig], R], cfg: KernelConfig) -> R:
    """``run(cfg)``, stepping the config down (fewer_stages) while the GPU lacks shared memory for it."""
    while True:
        try:
            return run(cfg)
        except Exception as exc:  # noqa: BLE001 - fewer_stages re-raises all but OutOfResources
            cfg = fewer_stages(cfg, exc)


def launcher_on_fewer_stages(
    build: Callable[[KernelConfig], Callable[..., R]], cfg: KernelConfig
) -> Callable[..., R]:
    """``build(cfg)``'s launch, rebuilt by fewer_stages when a call compiles a kernel over the GPU's
    shared memory (the first call, or the first call of another specialisation, e.g. a B layout)."""
    state: list[Any] = [cfg, build(cfg)]

    def launch(*args: Any) -> R:
        try:
            return state[1](*args)  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001 - fewer_stages re-raises all but OutOfResources
            smaller = fewer_stages(state[0], exc)
            state[:] = [smaller, build(smaller)]
            return launch(*args)

    return launch


def check_config(desc: GEMMDesc, cfg: KernelConfig) -> None:
    """Reject knobs a kernel cannot compile with; none of these can change the bytes."""
    for name in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        v = getattr(cfg, name)
        if v < 16 or v & (v - 1):
            raise ValueError(f"{cfg.label()}: {name}={v} must be a power of two >= 16")
    if cfg.BLOCK_K % desc.instruction_k:
        raise ValueError(f"{cfg.label()}: BLOCK_K must be a multiple of instruction_k={desc.instruction_k}")


class _LaunchOpts(dict):  # type: ignore[type-arg]
    """Compile options of every fixbits kernel (a live mapping: set_math_options updates it).

    * enable_fp_fusion False: no mul+add contraction; the fmas the arithmetic wants are explicit.
    * enable_reflect_ftz False: libdevice's non-flushing paths, as nvcc builds PyTorch's kernels
      (its default is -ftz=false); Triton's default would flush subnormals inside erff/expf/tanhf.
    * extern_libs: which libdevice.10.bc the transcendental epilogues link (None: Triton's own).
    """


LAUNCH_OPTS: _LaunchOpts = _LaunchOpts(enable_fp_fusion=False, enable_reflect_ftz=False)


def set_math_options(*, ftz: bool | None = None, libdevice: str | None | bool = False) -> dict[str, Any]:
    """Change the libdevice flavour (diagnostics pick the one that matches eager PyTorch).

    ``libdevice``: a path to a libdevice.10.bc, None for Triton's bundled one, False to keep.
    Returns the previous options so a caller can restore them.
    """
    before = dict(LAUNCH_OPTS)
    if ftz is not None:
        LAUNCH_OPTS["enable_reflect_ftz"] = ftz
    if libdevice is None:
        LAUNCH_OPTS.pop("extern_libs", None)
    elif libdevice is not False:
        LAUNCH_OPTS["extern_libs"] = {"libdevice": str(libdevice)}
    return before


def restore_math_options(before: dict[str, Any]) -> None:
    LAUNCH_OPTS.clear()
    LAUNCH_OPTS.update(before)


def toolkit_libdevice() -> str | None:
    """The CUDA toolkit's libdevice matching torch's CUDA version, if installed."""
    import os

    try:
        import torch

        ver = torch.version.cuda
    except ImportError:
        ver = None
    for root in ([f"/usr/local/cuda-{ver}"] if ver else []) + ["/usr/local/cuda"]:
        path = os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
        if os.path.exists(path):
            return path
    return None
