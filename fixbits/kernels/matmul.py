"""fixbits.matmul: cuBLAS's bytes from a Triton kernel, with the epilogue fused.

The route: ask cuBLASLt's heuristic which algorithm it would run for the shape
(fixbits.cublas.lt.CublasLt.heuristic), look that answer up in the arch profile
(fixbits.probe.profile.load_profile(...).lookup -> GEMMDesc), and launch the kernel of that
descriptor's family. Outside the profile the call raises (``fallback="error"``) or runs
cuBLAS plus an eager PyTorch epilogue (``fallback="cublas"``), never a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels.dispatch import choose_kernel
from fixbits.kernels.epilogue import parse_epilogue
from fixbits.kernels.plan import UnsupportedDesc

if TYPE_CHECKING:
    import torch

FALLBACKS = ("error", "cublas")


class MatmulUnavailable(RuntimeError):
    """No descriptor is known for this shape/dtype/arch/library; the message says which step failed."""


def _arch_of(device: Any) -> str:
    import torch

    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def resolve_desc(m: int, n: int, k: int, in_dtype: str, out_dtype: str, device: Any) -> GEMMDesc:
    """cuBLASLt heuristic answer -> arch profile -> GEMMDesc, or MatmulUnavailable naming the step.

    The heuristic is asked for row-major A (m, k) and B (k, n), the layout profiles are built
    for; fixbits.matmul's kernels read any strides, but cuBLAS may pick another algorithm for
    a transposed B, so compare against cuBLAS with the same layout.
    """
    lt, arch, profile = arch_profile(in_dtype, out_dtype, device)
    try:
        answer = lt.heuristic(m, n, k, in_dtype, out_dtype)
    except Exception as exc:
        raise MatmulUnavailable(
            f"cuBLASLt heuristic failed for {m}x{n}x{k} {in_dtype}->{out_dtype}: {exc}"
        ) from exc
    return lookup_desc(profile, answer, m, n, k, in_dtype, out_dtype, arch)


def arch_profile(in_dtype: str, out_dtype: str, device: Any) -> tuple[Any, str, Any]:
    """(the cuBLASLt binding, the device's arch, its profile for this dtype pair), or
    MatmulUnavailable naming what is missing."""
    if getattr(device, "type", str(device)) != "cuda":
        raise MatmulUnavailable(f"the profile route needs a CUDA device, got {device}; pass desc= explicitly")
    try:
        from fixbits.cublas.lt import CublasLt
        from fixbits.probe import profile as profiles
    except ImportError as exc:
        raise MatmulUnavailable(f"profile route not installed ({exc}); pass desc= explicitly") from exc
    arch = _arch_of(device)
    lt = _lt_instance(CublasLt)
    versions = _lt_versions(lt)
    errors = []
    for version in versions:
        try:
            return lt, arch, _load_profile(profiles, arch, str(version), in_dtype, out_dtype)
        except Exception as exc:
            errors.append(str(exc))
    raise MatmulUnavailable(
        f"no arch profile for {arch}, cuBLASLt {versions}, {in_dtype}->{out_dtype}: {errors[-1] if errors else ''}"
    )


_PROFILE_CACHE: dict[tuple[str, int], Any] = {}


def _load_profile(profiles: Any, arch: str, version: str, in_dtype: str, out_dtype: str) -> Any:
    """The profile file, parsed once per file version (its mtime): parsing the YAML costs ~0.1 s,
    which every new shape's first call would otherwise pay."""
    path = Path(profiles.PROFILE_DIR) / profiles.profile_filename(arch, version, in_dtype, out_dtype)
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        return profiles.find(arch, version, in_dtype, out_dtype)  # raises, naming the profiles present
    hit = _PROFILE_CACHE.get(key)
    if hit is None:
        hit = _PROFILE_CACHE[key] = profiles.load(path)
    return hit


def lookup_desc(profile: Any, answer: Any, m: int, n: int, k: int, in_dtype: str, out_dtype: str,
                arch: str) -> GEMMDesc:
    """The profile's descriptor for this answer at this K: an answer whose arithmetic changes
    with K (split by K in the profile) needs K to pick its variant."""
    try:
        return profile.lookup(answer, k=k, n=n)
    except Exception as exc:  # NotInProfile and friends
        key = answer.key() if hasattr(answer, "key") else answer
        raise MatmulUnavailable(
            f"heuristic answer {key} for {m}x{n}x{k} {in_dtype}->{out_dtype} is not in the {arch} profile: {exc}"
        ) from exc


_LT: dict[str, Any] = {}


def _lt_instance(cls: Any) -> Any:
    if "lt" not in _LT:
        _LT["lt"] = cls()
    return _LT["lt"]


def _lt_versions(lt: Any) -> list[str]:
    """The spellings a profile may be filed under: '130100' (CublasLt.version) and '13.1.0'."""
    out: list[str] = []
    for name in ("version", "version_str", "library_version"):
        v = getattr(lt, name, None)
        v = v() if callable(v) else v
        if v is not None and str(v) not in out:
            out.append(str(v))
    return out


def eager_epilogue(c: torch.Tensor, desc: GEMMDesc, bias: Any, residual: Any, gate: Any) -> torch.Tensor:
    """The PyTorch reference: each op one eager kernel on the rounded GEMM output."""
    import torch.nn.functional as F

    for op in desc.epilogue:
        if op.kind == "bias":
            c = c + bias
        elif op.kind == "relu":
            c = F.relu(c)
        elif op.kind == "silu_gate":
            c = F.silu(c) * gate
        elif op.kind == "gelu":
            c = F.gelu(c)
        elif op.kind == "gelu_tanh":
            c = F.gelu(c, approximate="tanh")
        elif op.kind == "residual":
            c = c + residual
        elif op.kind == "scale":
            assert op.value is not None
            c = c * op.value
    return c


def cublas_matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: str) -> torch.Tensor:
    """torch.mm with the requested output dtype (cuBLASLt's own pick; FINDINGS.md)."""
    import torch

    from fixbits.kernels._host import k_major, torch_dtype

    odt = torch_dtype(out_dtype)
    if a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        one = torch.ones((), device=a.device, dtype=torch.float32)
        # (_scaled_mm takes B column-major only: the TN form cuBLASLt runs)
        return torch._scaled_mm(a.contiguous(), k_major(b), scale_a=one, scale_b=one, out_dtype=odt)
    if odt == a.dtype:
        return torch.mm(a, b)
    return torch.mm(a, b, out_dtype=odt)


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    epilogue: Any = None,
    bias: Any = None,
    residual: Any = None,
    gate: Any = None,
    out_dtype: str | None = None,
    fallback: str = "error",
    desc: GEMMDesc | None = None,
    config: Any = None,
) -> torch.Tensor:
    """C = epilogue(A @ B) with cuBLAS's bytes (see the module docstring for the route).

    ``desc`` skips the profile route (tests, and GPUs without a profile); its epilogue is
    replaced by ``epilogue`` when one is given. ``config`` pins the speed knobs.

    For fp8 pass B K-major (``w.t()`` of a row-major (N, K) weight, as torch._scaled_mm
    requires): fp8 wgmma reads B K-major only, so any other layout gets the same bytes at about
    a third of the speed (Triton transposes each B tile; benchmarks/gemm/h100/s26).
    """
    if fallback not in FALLBACKS:
        raise ValueError(f"fallback={fallback!r}; supported: {', '.join(FALLBACKS)}")
    # steady state: one dict lookup on cheap values, then the cached launch. desc, a non-string
    # epilogue and config are keyed by identity (their dataclass hashes walk every field) and
    # checked with `is`, so a recycled id never matches a stale entry
    ek = epilogue if epilogue is None or type(epilogue) is str else id(epilogue)
    key = (id(desc), ek, id(config), out_dtype, a.shape, b.shape, a.stride(), b.stride(), a.dtype, b.dtype,
           a.get_device(), b.get_device(), _TUNING.generation)  # fmt: skip
    hit = _LAUNCHES.get(key)
    if hit is not None and hit[0] is desc and hit[2] is config and (hit[1] is epilogue or ek is epilogue):
        return hit[3](a, b, bias, residual, gate)
    launch = _launcher(a, b, epilogue, out_dtype, desc, config)
    if launch is None:  # the profile does not cover the shape
        return _fallback(a, b, epilogue, bias, residual, gate, out_dtype, desc, fallback)
    if len(_LAUNCHES) >= _MAX_LAUNCHES:
        _LAUNCHES.clear()
    _LAUNCHES[key] = (desc, epilogue, config, launch)
    return launch(a, b, bias, residual, gate)


_MAX_LAUNCHES = 4096
# matmul's key -> (desc, epilogue, config, launch(a, b, bias, residual, gate))
_LAUNCHES: dict[tuple[Any, ...], tuple[Any, Any, Any, Any]] = {}


def _tuning_state() -> Any:
    from fixbits.kernels.tuning import STATE

    return STATE


_TUNING = _tuning_state()


def _out_dtype(a: Any, desc: GEMMDesc | None, out_dtype: str | None) -> tuple[str, str]:
    from fixbits.kernels._host import dtype_name

    in_dtype = dtype_name(a.dtype)
    if out_dtype is None:
        out_dtype = (
            desc.out_dtype if desc is not None else ("fp16" if in_dtype.startswith("fp8") else in_dtype)
        )
    return in_dtype, out_dtype


def _launcher(
    a: Any, b: Any, epilogue: Any, out_dtype: str | None, desc: GEMMDesc | None, config: Any
) -> Any:
    """The launch closure of one call's static arguments (None: no descriptor for the shape)."""
    from fixbits.kernels.tuning import best_config

    ops = parse_epilogue(epilogue)
    in_dtype, out_dtype = _out_dtype(a, desc, out_dtype)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    m, k = a.shape
    n = b.shape[1]
    route = _route(m, n, k, in_dtype, out_dtype, a.device, desc, ops)
    rdesc, fn, tuned = route
    if rdesc is None:
        return None
    if tuned is not None and config is None:
        config = best_config(tuned, m, n, k)
    if tuned is None:
        return lambda a, b, bias, residual, gate: fn(a, b, rdesc, bias=bias, residual=residual, gate=gate)
    # steady-state launchers (everything but the tensors settled once): single-pass and split-K
    if rdesc.family in ("single_pass", "per_mma") and not rdesc.k_cuts:
        from fixbits.kernels.single_pass import tile_launcher

        dev = a.get_device()

        def build(sa: Any, sb: Any, c: Any) -> Any:
            return tile_launcher(rdesc, m, n, k, sa, sb, dev, c)
    elif tuned[0] in ("splitk", "splitk_per_mma"):  # the kernel _route chose (a workspace GEMV is not split-K)
        from fixbits.kernels.splitk import splitk_launcher

        def build(sa: Any, sb: Any, c: Any) -> Any:
            return splitk_launcher(rdesc, m, n, k, sa, sb, c)
    else:
        return lambda a, b, bias, residual, gate: fn(
            a, b, rdesc, bias=bias, residual=residual, gate=gate, config=config
        )
    from fixbits.kernels._host import check_operands, launcher_on_fewer_stages

    check_operands(rdesc, a, b)
    sa, sb = tuple(a.stride()), tuple(b.stride())
    return launcher_on_fewer_stages(lambda c: build(sa, sb, c), config)


def _fallback(a: Any, b: Any, epilogue: Any, bias: Any, residual: Any, gate: Any, out_dtype: str | None,
              desc: GEMMDesc | None, fallback: str) -> Any:  # fmt: skip
    ops = parse_epilogue(epilogue)
    in_dtype, out_dtype = _out_dtype(a, desc, out_dtype)
    m, k = a.shape
    n = b.shape[1]
    _, _, exc = _route(m, n, k, in_dtype, out_dtype, a.device, desc, ops)
    if fallback == "error":
        raise exc
    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16",
                    out_dtype=out_dtype, epilogue=ops)  # fmt: skip
    return eager_epilogue(cublas_matmul(a, b, out_dtype), base, bias, residual, gate)


def _route(
    m: int,
    n: int,
    k: int,
    in_dtype: str,
    out_dtype: str,
    device: Any,
    desc: GEMMDesc | None,
    ops: tuple[Any, ...],
) -> tuple[Any, Any, Any]:
    from_profile = desc is None
    if desc is None:
        try:
            desc = resolve_desc(m, n, k, in_dtype, out_dtype, device)
        except MatmulUnavailable as exc:
            return None, None, exc
    if ops:
        desc = desc.replace(epilogue=ops)
    if desc.out_dtype != out_dtype:
        raise ValueError(f"out_dtype={out_dtype} but desc.out_dtype={desc.out_dtype}")
    try:
        choice = choose_kernel(desc, m, n)
    except UnsupportedDesc as exc:
        if not from_profile:
            raise  # a caller's own descriptor: its error, unchanged
        # a profile entry no fixbits kernel realises yet (e.g. cuBLAS's reduce_1Block order):
        # like an answer outside the profile, never a near miss
        return None, None, MatmulUnavailable(f"{m}x{n}x{k} {in_dtype}->{out_dtype}: the profile's descriptor has no kernel: {exc}")
    tuned = (choice.family, desc.in_dtype, desc.out_dtype) if desc.instruction != "fma" else None
    return desc, choice.load(), tuned
