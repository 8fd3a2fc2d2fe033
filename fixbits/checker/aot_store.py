"""A portable store of kernels compiled ahead of time, so the GPU only loads and launches.

Compiling is what costs the soundness gate its device time. The CPU here runs the same JIT
binder (fixbits.checker.compile) for the device's target and saves each kernel's binary and
metadata under a key that depends only on what the compiler was asked (source hash, target,
parsed options), not on where the cache lives. On the device a wrapper around triton.compile
looks the key up and builds the CompiledKernel from the stored files; a miss falls back to the
ordinary compile, so a stale or partial store costs time, never correctness of the gate (the
bytes are measured on whatever binary ran, and its PTX sha is recorded with the key).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_KEEP = (".json", ".cubin", ".hsaco")


def store_key(src: Any, target: Any, options: dict[str, Any] | None) -> str:
    """Key of one compilation request: source hash, target and the parsed backend options."""
    from triton.compiler.compiler import make_backend

    backend = make_backend(target)
    opts = backend.parse_options(dict(options or {}))
    raw = f"{src.hash()}|{target.backend}|{target.arch}|{target.warp_size}|{opts.hash()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _dir(root: Path, key: str) -> Path:
    return root / key[:2] / key


def save(root: Path, key: str, kernel: Any) -> None:
    """Write the binary and metadata of a compiled kernel (IR text stays behind: it is large)."""
    d = _dir(root, key)
    d.mkdir(parents=True, exist_ok=True)
    for name, path in kernel.metadata_group.items():
        if name.endswith(_KEEP):
            Path(d / name).write_bytes(Path(path).read_bytes())


def load(root: Path, key: str, src: Any) -> Any | None:
    """The stored kernel for ``key`` as a CompiledKernel, or None when the store lacks it."""
    from triton.compiler.compiler import CompiledKernel

    d = _dir(root, key)
    if not d.is_dir():
        return None
    group = {p.name: str(p) for p in d.iterdir()}
    if not any(n.endswith(".json") for n in group) or len(group) < 2:
        return None
    return CompiledKernel(src, group, key)


@contextlib.contextmanager
def recording(root: Path) -> Iterator[list[str]]:
    """Inside the block every triton.compile result is also saved to ``root``; yields the keys."""
    import triton
    import triton.compiler as tc

    keys: list[str] = []
    orig = tc.compile

    def compile(src: Any, target: Any = None, options: Any = None, **kw: Any) -> Any:  # noqa: A001
        k = orig(src, target=target, options=options, **kw)
        key = store_key(src, target, options)
        save(root, key, k)
        keys.append(key)
        return k

    tc.compile = compile
    triton.compile = compile
    try:
        yield keys
    finally:
        tc.compile = orig
        triton.compile = orig


def install(root: Path, stats: dict[str, int]) -> None:
    """Make every later triton.compile (the JIT's included) load from ``root`` when it can.

    Must run before the first launch: the JIT binds ``triton.compiler.compile`` lazily.
    ``stats`` counts hits and misses; the key of each hit is appended to ``stats_keys``.
    """
    import triton
    import triton.compiler as tc

    orig = tc.compile
    stats.setdefault("hit", 0)
    stats.setdefault("miss", 0)

    def compile(src: Any, target: Any = None, options: Any = None, **kw: Any) -> Any:  # noqa: A001
        try:
            key = store_key(src, target, options)
            k = load(root, key, src)
        except Exception:  # noqa: BLE001 - any trouble with the store means: compile instead
            k = None
        if k is not None:
            stats["hit"] += 1
            LAST_KEYS.append(key)
            return k
        stats["miss"] += 1
        return orig(src, target=target, options=options, **kw)

    tc.compile = compile
    triton.compile = compile


LAST_KEYS: list[str] = []


def write_manifest(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)
