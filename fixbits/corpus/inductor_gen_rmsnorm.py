"""TorchInductor-generated looped RMSNorm (``x * rsqrt(mean(x^2) + eps) * w``, bf16), verbatim
from the GPU machine. Its first loop accumulates an (XBLOCK, R0_BLOCK) buffer chunk by chunk
(the kernel's own algorithm, left as written: R0_BLOCK stays fixed); the final ``tl.sum`` is
pinned. Shapes baked in: 4096 x 4096. rsqrt is approximate: invariance and golden bytes only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton

from fixbits.corpus.common import Config, draw, kernel_for, launch_opts
from fixbits.corpus.inductor_load import SRC_DIR, load_kernel

FILE = "rms_norm_bf16__triton_red_fused_add_mean_mul_pow_rsqrt_0.py"
_CACHE: dict[str, Any] = {}
CPU_REPLAY: tuple[str, ...] = ()
NO_MODEL_REASON = "the sum is internal (not stored) and the stored output passes through rsqrt, which the CPU does not reproduce"
SHAPE = (4096, 4096)
R0_BLOCK = 1024


def kernel() -> Any:
    if "k" not in _CACHE:
        _CACHE["k"] = load_kernel(SRC_DIR / FILE)
    return _CACHE["k"]


def __getattr__(name: str) -> Any:
    if name == "KERNELS":
        return (kernel(),)
    raise AttributeError(name)


def make_inputs(shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, np.ndarray]:
    if (shape["M"], shape["N"]) != SHAPE or dtype != "bf16":
        raise ValueError(f"inductor_gen_rmsnorm: the generated kernel is fixed at {SHAPE} bf16, got {shape} {dtype}")
    return {"x": draw(SHAPE, dtype, kind, seed), "w": draw((SHAPE[1],), dtype, "ordinary", seed + 1)}


def launch(inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool, aux: bool = False) -> dict[str, Any]:
    x, w = inputs["x"], inputs["w"]
    M, N = x.shape
    out = x.new_empty((M, N))
    xb = cfg.block("XBLOCK")
    kernel_for(kernel(), pinned)[(triton.cdiv(M, xb),)](x, w, out, M, N, XBLOCK=xb, R0_BLOCK=R0_BLOCK,
                                                       **launch_opts(cfg))
    return {"out": out}


def reference(inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {}


def aot(shape: dict[str, int], dtype: str, cfg: Config) -> list[tuple[Any, dict[str, str], dict[str, Any]]]:
    sig = {"in_ptr0": "*bf16", "in_ptr1": "*bf16", "out_ptr1": "*bf16", "xnumel": "i32", "r0_numel": "i32",
           "XBLOCK": "constexpr", "R0_BLOCK": "constexpr"}
    return [(kernel(), sig, {"XBLOCK": cfg.block("XBLOCK"), "R0_BLOCK": R0_BLOCK})]
