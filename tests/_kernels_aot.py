"""Ahead-of-time compile helpers for the kernel tests (no GPU: triton.compile to PTX for sm_90)."""

from __future__ import annotations

import inspect
from typing import Any


def compile_ptx(fn: Any, types: dict[str, str], constexprs: dict[str, Any], *, num_warps: int = 4,
                num_stages: int = 3, arch: int = 90) -> str:  # fmt: skip
    """PTX of a @triton.jit kernel; ``types`` maps pointer/scalar args ('*fp16', 'i32', 'fp32')."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(inspect.signature(fn.fn).parameters)
    sig: dict[str, str] = {}
    cx: dict[Any, Any] = {}
    for i, name in enumerate(names):
        if name in constexprs:
            sig[name] = "constexpr"
            cx[(i,)] = constexprs[name]
        elif name in types:
            sig[name] = types[name]
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs=cx)
    opts = {"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": False}
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    return k.asm["ptx"]
