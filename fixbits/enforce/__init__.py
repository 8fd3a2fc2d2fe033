"""Inner-tree reductions: a pinned balanced tree for Triton sums, and the rewrite that applies it.

Importing this package imports neither triton nor torch; the names below load on first use.
* ``tree_sum`` / ``tree_reduce`` / ``tree_sum_like``: @triton.jit functions (fixbits.enforce.tree)
* ``inner_tree`` (decorator) / ``pin`` / ``report``: rewrite a kernel's float sums (rewrite.py)
* ``install`` / ``pinned_reductions`` / ``enabled``: global switch, env FIXBITS_INNER_TREE (switch.py)
* ``model``: the numpy spec of the tree's bits.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "tree_sum": "fixbits.enforce.tree",
    "tree_reduce": "fixbits.enforce.tree",
    "tree_sum_like": "fixbits.enforce.tree",
    "pin": "fixbits.enforce.rewrite",
    "report": "fixbits.enforce.rewrite",
    "pinned_source": "fixbits.enforce.rewrite",
    "PinReport": "fixbits.enforce.rewrite",
    "install": "fixbits.enforce.switch",
    "uninstall": "fixbits.enforce.switch",
    "enabled": "fixbits.enforce.switch",
    "pinned_reductions": "fixbits.enforce.switch",
}

__all__ = sorted([*_LAZY, "inner_tree"])


def inner_tree(kernel: Any) -> Any:
    """Decorator: the kernel with its float ``tl.sum``/add-``tl.reduce`` calls pinned to the tree."""
    from fixbits.enforce.rewrite import pin

    return pin(kernel)


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'fixbits.enforce' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)
