"""Global switch: pin every Triton kernel's float sums without touching the kernel's code.

``install()`` wraps ``JITFunction.run`` (ordinary launches, autotuners, heuristics) and
``ASTSource.__init__`` (direct ``triton.compile`` as TorchInductor does) once; from then on each
launch/compile asks ``enabled()``, which reads ``FIXBITS_INNER_TREE`` from the environment *at
that call* (never at import) unless a ``pinned_reductions()`` block overrides it. Nothing is
patched at import time. Inductor compiles a kernel once and keeps the binary, so turn the switch
on before the first call of a compiled model (and disable Inductor's caches when comparing).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Iterator
from typing import Any

ENV_VAR = "FIXBITS_INNER_TREE"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
_OVERRIDE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("fixbits_inner_tree", default=None)
_LOCK = threading.Lock()
_ORIGINALS: dict[str, Any] = {}


def enabled() -> bool:
    """Is pinning on for this call: the innermost ``pinned_reductions`` block, else the env var."""
    ov = _OVERRIDE.get()
    if ov is not None:
        return ov
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r}: expected one of 1/0/true/false/on/off/yes/no")


def installed() -> bool:
    return bool(_ORIGINALS)


def install() -> None:
    """Route Triton launches and compiles through the switch (idempotent, reversible)."""
    from triton.compiler.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from fixbits.enforce.rewrite import _MARK, pin

    with _LOCK:
        if _ORIGINALS:
            return
        orig_run = JITFunction.run
        orig_init = ASTSource.__init__

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not getattr(self, _MARK, False) and enabled():
                twin = pin(self)
                if twin is not self:
                    return twin.run(*args, **kwargs)
            return orig_run(self, *args, **kwargs)

        def init(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
            if isinstance(fn, JITFunction) and not getattr(fn, _MARK, False) and enabled():
                fn = pin(fn)
            orig_init(self, fn, *args, **kwargs)

        _ORIGINALS["run"] = orig_run
        _ORIGINALS["init"] = orig_init
        JITFunction.run = run  # type: ignore[method-assign]
        ASTSource.__init__ = init  # type: ignore[method-assign]


def uninstall() -> None:
    """Put Triton's own ``JITFunction.run`` and ``ASTSource.__init__`` back."""
    from triton.compiler.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    with _LOCK:
        if not _ORIGINALS:
            return
        JITFunction.run = _ORIGINALS.pop("run")  # type: ignore[method-assign]
        ASTSource.__init__ = _ORIGINALS.pop("init")  # type: ignore[method-assign]


@contextlib.contextmanager
def pinned_reductions(on: bool = True) -> Iterator[None]:
    """Within the block, every launched/compiled Triton kernel has its float sums pinned (or not)."""
    install()
    token = _OVERRIDE.set(on)
    try:
        yield
    finally:
        _OVERRIDE.reset(token)
