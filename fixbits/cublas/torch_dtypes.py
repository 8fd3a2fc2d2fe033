"""fixbits dtype names <-> torch dtypes (imports torch inside the functions only)."""

from __future__ import annotations

from typing import Any

_NAMES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


def torch_dtype(name: str) -> Any:
    import torch

    if name not in _NAMES:
        raise ValueError(f"dtype {name!r} is not supported; supported: {', '.join(_NAMES)}")
    return getattr(torch, _NAMES[name])


def fixbits_name(dtype: Any) -> str:
    import torch

    for name, attr in _NAMES.items():
        if getattr(torch, attr, None) == dtype:
            return name
    raise ValueError(f"torch dtype {dtype} has no fixbits name; supported: {', '.join(_NAMES)}")
