"""Load a TorchInductor-generated Triton kernel file verbatim, as a plain @triton.jit function.

runners/device/gen_inductor.py saves the source Inductor emitted on the GPU machine into
fixbits/corpus/inductor_src/. The file's kernel is left exactly as generated; only the
``@triton_heuristics.<kind>(...)`` decorator (Inductor's own autotuning/launch wrapper) and the
``triton_helpers.set_driver_to_*()`` call are dropped when loading, so the corpus can launch the
@triton.jit function over its own config space like any other kernel.
"""

from __future__ import annotations

import ast
import hashlib
import linecache
from pathlib import Path
from typing import Any

SRC_DIR = Path(__file__).resolve().parent / "inductor_src"


def strip_inductor_wrapping(src: str) -> str:
    """The source without Inductor's heuristics decorators and driver-selection calls."""
    tree = ast.parse(src)
    drop: list[tuple[int, int]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                text = ast.get_source_segment(src, d) or ""
                if text.startswith("triton_heuristics."):
                    drop.append((d.lineno - 1, d.end_lineno or d.lineno))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            text = ast.get_source_segment(src, node) or ""
            if text.startswith("triton_helpers.set_driver_to_"):
                drop.append((node.lineno - 1, node.end_lineno or node.lineno))
    lines = src.splitlines(True)
    for a, b in sorted(drop, reverse=True):
        # the decorator line begins with '@', one column before the expression
        del lines[a:b]
    return "".join(lines)


def load_kernel(path: Path, name: str | None = None) -> Any:
    """The @triton.jit kernel of a generated file (the first function named triton_*)."""
    src = strip_inductor_wrapping(Path(path).read_text())
    digest = hashlib.sha256(src.encode()).hexdigest()[:12]
    filename = f"<fixbits-inductor {Path(path).name} {digest}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns: dict[str, Any] = {"__name__": f"fixbits_inductor_{Path(path).stem}", "__file__": filename}
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - a kernel file we generated and committed
    names = [k for k in ns if k.startswith("triton_") and hasattr(ns[k], "fn")]
    if name is None:
        if not names:
            raise ValueError(f"{path}: no triton_* kernel found")
        name = names[0]
    if name not in ns:
        raise ValueError(f"{path}: no kernel {name!r}; found {names}")
    return ns[name]
