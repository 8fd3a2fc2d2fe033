"""Shared plumbing for the corpus kernels: dtypes, input draws, host<->device moves, configs.

Kept free of triton/torch imports at module level so the registry (YAML) loads on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "fp32": np.dtype(np.float32),
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
KINDS = ("ordinary", "wide")


def np_dtype(name: str) -> np.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; supported: {sorted(DTYPES)}") from None


def draw(shape: tuple[int, ...], dtype: str, kind: str, seed: int, scale: float = 1.0) -> np.ndarray:
    """Reproducible input: 'ordinary' N(0,1)*scale, 'wide' with exponents spread over the dtype's range."""
    rng = np.random.default_rng(seed)
    dt = np_dtype(dtype)
    base = rng.standard_normal(shape)
    if kind == "ordinary":
        x = base * scale
    elif kind == "wide":
        lo, hi = {"fp32": (-30, 30), "fp16": (-10, 10), "bf16": (-30, 30), "fp8_e4m3": (-5, 5),
                  "fp8_e5m2": (-8, 8)}[dtype]
        x = base * np.exp2(rng.integers(lo, hi + 1, size=shape)) * scale
    else:
        raise ValueError(f"unknown input kind {kind!r}; supported: {KINDS}")
    if dt.name.startswith("float8"):
        x = np.clip(x, -240.0, 240.0)
    out = x.astype(np.float32).astype(dt)
    if not np.any(out.astype(np.float32) != 0):
        raise AssertionError(f"draw({shape}, {dtype}, {kind}, seed={seed}) gave only zeros")
    return out


@dataclass(frozen=True)
class Config:
    """One point of a kernel's config space: block sizes plus launch options (speed knobs only)."""

    blocks: tuple[tuple[str, int], ...]
    num_warps: int
    num_stages: int

    def block(self, name: str) -> int:
        return dict(self.blocks)[name]

    def label(self) -> str:
        b = ",".join(f"{k}={v}" for k, v in self.blocks)
        return f"{b}{',' if b else ''}w={self.num_warps},s={self.num_stages}"


def to_device(arr: np.ndarray, device: str) -> Any:
    """numpy (incl. ml_dtypes) -> torch tensor with the same bytes."""
    import torch

    dt = arr.dtype
    tmap = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
            "int32": torch.int32, "int64": torch.int64}
    a = np.ascontiguousarray(arr)
    if dt.name in ("bfloat16",):
        t = torch.from_numpy(a.view(np.uint16).astype(np.int16, copy=False)).view(torch.bfloat16)
    elif dt.name.startswith("float8"):
        t = torch.from_numpy(a.view(np.uint8)).view(tmap[dt.name])
    else:
        t = torch.from_numpy(a)
    return t.to(device)


def to_host(t: Any) -> np.ndarray:
    """torch tensor -> numpy with the same bytes (bf16/fp8 as ml_dtypes)."""
    import torch

    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    if t.dtype == torch.float8_e5m2:
        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e5m2)
    return t.numpy()


def torch_dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
            "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[name]


def kernel_for(kernel: Any, pinned: bool) -> Any:
    """The free kernel or its pinned twin (the automatic rewrite, applied to unmodified code)."""
    if not pinned:
        return kernel
    from fixbits.enforce import inner_tree

    return inner_tree(kernel)


def launch_opts(cfg: Config) -> Mapping[str, int]:
    return {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def ptr(dtype: str) -> str:
    """Triton signature string of a pointer to ``dtype`` (for ahead-of-time compiles)."""
    return "*" + {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8_e4m3": "fp8e4nv", "fp8_e5m2": "fp8e5"}[dtype]


def rows_split(block_rows: int, block_cols: int, itemsize: int, num_warps: int) -> tuple[int, int]:
    """(R_HI, R_LO) for a tile loaded as (R_HI, R_LO, BLOCK_COLS), row = hi * R_LO + lo.

    Triton gives lanes to the contiguous dim, then to the other dims lowest index first, so the
    R_LO dim (the low bits of the reduced row index) lands in registers once R_HI covers the lanes
    and warps left over by the columns: the pinned tree's first levels then cost adds, not
    shuffles or shared-memory rounds. The tree is the same for every split (paper §5.2).
    """
    vec = max(1, 16 // itemsize)
    lanes_cols = max(1, min(32, block_cols // vec))
    r_hi = min(block_rows, (32 // lanes_cols) * num_warps)
    return r_hi, block_rows // r_hi
