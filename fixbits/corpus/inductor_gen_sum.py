"""TorchInductor-generated persistent row sum (``x.sum(-1)``), verbatim from the GPU machine.

The sources (fixbits/corpus/inductor_src/sum_last_*) have their shapes baked in (8192 x 1000,
a row of 1000 elements: not 16-byte provable, so loads are scalar), so this entry's shape is fixed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts
from fixbits.corpus.inductor_load import SRC_DIR, load_kernel
from fixbits.enforce import model

FILES = {"fp32": "sum_last_fp32__triton_per_fused_sum_0.py", "fp16": "sum_last_fp16__triton_per_fused_sum_0.py"}
_CACHE: dict[str, Any] = {}
CPU_REPLAY = ("out",)
SHAPE = (8192, 1000)


def kernel(dtype: str) -> Any:
    if dtype not in _CACHE:
        _CACHE[dtype] = load_kernel(SRC_DIR / FILES[dtype])
    return _CACHE[dtype]


def __getattr__(name: str) -> Any:
    if name == "KERNELS":
        return tuple(kernel(d) for d in FILES)
    raise AttributeError(name)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    if (shape["M"], shape["N"]) != SHAPE:
        raise ValueError(f"inductor_gen_sum: the generated kernel is fixed at {SHAPE}, got {shape}")
    return {"x": draw(SHAPE, dtype, kind, seed)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool, aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    dtype = {torch.float32: "fp32", torch.float16: "fp16"}[x.dtype]
    M, N = x.shape
    out = torch.empty(M, dtype=torch.float32, device=x.device)
    xb = cfg.block("XBLOCK")
    kernel_for(kernel(dtype), pinned)[(triton.cdiv(M, xb),)](x, out, M, N, XBLOCK=xb, **launch_opts(cfg))
    return {"out": out}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"out": model.tree_sum(inputs["x"], axis=1)}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"in_ptr0": "*" + {"fp32": "fp32", "fp16": "fp16"}[dtype], "out_ptr0": "*fp32", "xnumel": "i32",
           "r0_numel": "i32", "XBLOCK": "constexpr"}
    return [(kernel(dtype), sig, {"XBLOCK": cfg.block("XBLOCK")})]
