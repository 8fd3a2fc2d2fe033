"""Compile a Triton kernel ahead of time exactly as its JIT launch would (imports triton).

The JIT specialises every argument (16-byte divisibility of pointers and integers, integers equal
to 1 become constants) and takes fp-fusion and the rest of its options from the call; a
prediction about a kernel is only worth something if it is about *that* compilation, so this
module runs the JIT's own binder against a chosen target instead of re-deriving the rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TARGETS = {
    "sm_90": ("cuda", 90, 32),
    "sm_100": ("cuda", 100, 32),
    "gfx942": ("hip", "gfx942", 64),
}


def gpu_target(name: str) -> Any:
    from triton.backends.compiler import GPUTarget

    try:
        backend, arch, warp = TARGETS[name]
    except KeyError:
        raise ValueError(f"unknown target {name!r}; supported: {sorted(TARGETS)}") from None
    return GPUTarget(backend, arch, warp)


@dataclass(frozen=True)
class Compiled:
    """One compiled kernel: its name and assembly text."""

    name: str
    isa: str  # "ptx" | "amdgcn"
    asm: str
    num_warps: int
    num_stages: int
    params: tuple[str, ...] = ()  # the arguments that are PTX parameters, in order (not constexprs)


def _pack(fn: Any, backend: Any, bound_args: dict[str, Any], specialization: list[Any]) -> tuple[Any, ...]:
    from triton.runtime.jit import find_paths_if, get_iterable_path

    sigkeys = [p.name for p in fn.params]
    sigvals = [s[0] for s in specialization]
    signature = dict(zip(sigkeys, sigvals, strict=False))
    cpaths = find_paths_if(sigvals, lambda _, v: v == "constexpr")
    constexprs = {p: get_iterable_path(list(bound_args.values()), p) for p in cpaths}
    attrvals = [s[1] for s in specialization]
    apaths = find_paths_if(attrvals, lambda _, x: isinstance(x, str))
    attrs = {k: backend.parse_attr(get_iterable_path(attrvals, k)) for k in apaths}
    return signature, constexprs, attrs


def aot_compile(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: Any) -> Compiled:
    """Compile ``fn(*args, **kwargs)`` (kwargs: constexprs and launch options) for ``target``."""
    import triton
    from triton import knobs
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature

    kwargs = dict(kwargs)
    kwargs.pop("grid", None)
    kwargs.pop("warmup", None)
    # the same option knobs JITFunction.run adds before binding (3.6: debug, instrumentation_mode;
    # 3.9 also fpsan_homomorphic_casts)
    kwargs["debug"] = kwargs.get("debug", getattr(fn, "debug", None)) or knobs.runtime.debug
    for knob in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, knob):
            kwargs[knob] = getattr(knobs.compilation, knob)
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(*args, **kwargs)
    if hasattr(fn, "_pack_args"):  # the JIT's own packing: signature, constexprs, attributes
        opts, signature, constexprs, attrs = fn._pack_args(
            backend, kwargs, bound_args, specialization, options
        )
    else:
        opts = backend.parse_options(options)
        signature, constexprs, attrs = _pack(fn, backend, bound_args, specialization)
    src = ASTSource(fn, signature, constexprs, attrs)
    k = triton.compile(src, target=target, options=opts.__dict__)
    isa = "ptx" if "ptx" in k.asm else "amdgcn"
    params = tuple(n for n, t in signature.items() if t != "constexpr") if isinstance(signature, dict) else ()
    return Compiled(k.name, isa, k.asm[isa], opts.num_warps, opts.num_stages, params)


@contextlib.contextmanager
def capture_launches(target: Any) -> Iterator[list[Compiled]]:
    """Inside the block, every ``kernel[grid](...)`` compiles for ``target`` and launches nothing.

    Lets an ordinary host launcher (CPU tensors as arguments) produce the exact compilations it
    would launch on a GPU, on a machine without one.
    """
    from triton.runtime.jit import JITFunction

    got: list[Compiled] = []
    orig = JITFunction.run

    def run(self: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> None:
        got.append(aot_compile(self, args, kwargs, target))
        return None

    JITFunction.run = run  # type: ignore[method-assign]
    try:
        yield got
    finally:
        JITFunction.run = orig  # type: ignore[method-assign]
