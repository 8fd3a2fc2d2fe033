"""TorchInductor-generated persistent softmax (``torch.softmax(x, -1)``), verbatim from the GPU
machine: an online-softmax ``tl.reduce`` (custom combine: left as written) and a ``tl.sum`` of
the exponentials (pinned). Shapes baked in: 4096 x 1000. exp is a hardware approximation, so
there is no CPU model: the suite checks config invariance and golden bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts, ptr
from fixbits.corpus.inductor_load import SRC_DIR, load_kernel

FILES = {"fp32": "softmax_fp32__triton_per_fused__softmax_exp_prepare_softmax_online_sub_0.py",
         "fp16": "softmax_fp16__triton_per_fused__softmax_exp_prepare_softmax_online_sub_0.py"}
_CACHE: dict[str, Any] = {}
CPU_REPLAY: tuple[str, ...] = ()
NO_MODEL_REASON = "its float sum is over hardware exp values the CPU does not reproduce (checked for invariance and golden bytes)"
SHAPE = (4096, 1000)


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
        raise ValueError(f"inductor_gen_softmax: the generated kernel is fixed at {SHAPE}, got {shape}")
    return {"x": draw(SHAPE, dtype, "ordinary", seed, scale=4.0 if kind == "wide" else 1.0)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool, aux: bool = False) -> dict[str, Any]:
    import torch

    x = inputs["x"]
    dtype = {torch.float32: "fp32", torch.float16: "fp16"}[x.dtype]
    M, N = x.shape
    out = torch.empty_like(x)
    xb = cfg.block("XBLOCK")
    kernel_for(kernel(dtype), pinned)[(triton.cdiv(M, xb),)](x, out, M, N, XBLOCK=xb, **launch_opts(cfg))
    return {"out": out}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"in_ptr0": ptr(dtype), "out_ptr2": ptr(dtype), "xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr"}
    return [(kernel(dtype), sig, {"XBLOCK": cfg.block("XBLOCK")})]
