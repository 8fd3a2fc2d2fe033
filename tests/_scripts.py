"""Load a repository script (benchmarks/, runners/) as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(rel: str, name: str) -> ModuleType:
    """The script at ``rel`` (from the repository root) imported under ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
