"""cuBLASLt behind the GemmBackend Protocol: numpy in, numpy out, the GEMM on the GPU.

This is the black box the prober walks on a GPU machine. ``algo="own"`` passes algo NULL so the
library picks exactly as it does for torch.mm(out_dtype=float32) (FINDINGS.md); ``"heuristic"``
runs the heuristic's first answer explicitly, which must give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixbits.cublas.lt import DEFAULT_WORKSPACE_BYTES, check_dtypes

# same-width unsigned views used to move bits between numpy and torch without conversion
_UINT = {1: (np.uint8, "uint8"), 2: (np.int16, "int16"), 4: (np.int32, "int32")}


def _np_dtype(name: str) -> Any:
    import ml_dtypes

    return {
        "fp32": np.float32,
        "fp16": np.float16,
        "bf16": ml_dtypes.bfloat16,
        "fp8_e4m3": ml_dtypes.float8_e4m3fn,
        "fp8_e5m2": ml_dtypes.float8_e5m2,
    }[name]


def to_torch(x: np.ndarray, name: str, device: str = "cuda") -> Any:
    """Copy a numpy array of fixbits dtype ``name`` to the device, bits unchanged."""
    import torch

    from fixbits.cublas.torch_dtypes import torch_dtype

    x = np.ascontiguousarray(x, dtype=_np_dtype(name))
    np_int, torch_int = _UINT[x.dtype.itemsize]
    t = torch.from_numpy(x.view(np_int)).to(device)
    return t.view(getattr(torch, torch_int)).view(torch_dtype(name))


def to_numpy(t: Any, name: str) -> np.ndarray:
    """Copy a device tensor back as a numpy array of fixbits dtype ``name``, bits unchanged."""
    import torch

    np_int, torch_int = _UINT[t.element_size()]
    raw = t.contiguous().view(getattr(torch, torch_int)).cpu().numpy()
    return raw.view(np_int).view(_np_dtype(name))


@dataclass
class CublasBackend:
    """cuBLASLt C = A·B for row-major numpy A (M,K), B (K,N) of ``in_dtype``."""

    in_dtype: str = "fp16"
    out_dtype: str = "fp32"
    algo: str = "own"  # "own" (algo NULL) or "heuristic" (the first heuristic answer, explicit)
    workspace_bytes: int = DEFAULT_WORKSPACE_BYTES
    library: str | None = None  # a libcublasLt path; None: nvmath / the process's library
    name: str = "cublaslt"
    _lt: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_dtypes(self.in_dtype, self.out_dtype)
        if self.algo not in ("own", "heuristic"):
            raise ValueError(f"algo={self.algo!r} is not one of own, heuristic")

    @property
    def lt(self) -> Any:
        if self._lt is None:
            from fixbits.cublas.lt import CublasLt

            self._lt = CublasLt(self.library)
        return self._lt

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"shapes {a.shape} and {b.shape} do not multiply as (M,K)·(K,N)")
        ta, tb = to_torch(a, self.in_dtype), to_torch(b, self.in_dtype)
        answer = None
        if self.algo == "heuristic":
            m, k = a.shape
            answer = self.lt.heuristic(
                int(m),
                int(b.shape[1]),
                int(k),
                self.in_dtype,
                self.out_dtype,
                workspace_bytes=self.workspace_bytes,
            )
        c = self.lt.matmul(ta, tb, self.out_dtype, algo=answer, workspace_bytes=self.workspace_bytes)
        return to_numpy(c, self.out_dtype)
