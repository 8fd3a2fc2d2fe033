"""TritonBackend: the GemmBackend Protocol over the fixbits kernel of one fixed descriptor.

The prober and the suites call ``gemm(a, b)`` on numpy arrays of the fixbits dtypes; this
backend copies them to the GPU, launches the descriptor's kernel and copies the result back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc

if TYPE_CHECKING:
    import numpy as np


def to_torch(x: np.ndarray, dtype_name: str, device: str) -> Any:
    """numpy array of a fixbits dtype -> torch tensor of the same bits on ``device``."""
    import numpy as np
    import torch

    from fixbits.kernels._host import torch_dtype

    size = np.dtype(x.dtype).itemsize
    signed = {1: (np.uint8, torch.uint8), 2: (np.int16, torch.int16), 4: (np.int32, torch.int32)}[size]
    raw = torch.from_numpy(np.ascontiguousarray(x).view(signed[0]).copy())
    return raw.to(device).view(torch_dtype(dtype_name))


def to_numpy(t: Any, dtype_name: str) -> np.ndarray:
    """torch tensor -> numpy array of the fixbits dtype, same bits."""
    import torch

    from fixbits.numerics.formats import np_dtype

    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.detach().contiguous().view(width).cpu().numpy().view(np_dtype(dtype_name))


@dataclass(frozen=True)
class TritonBackend:
    """GemmBackend realising ``desc`` with the fixbits Triton kernel of its family."""

    desc: GEMMDesc
    device: str = "cuda"
    config: Any = None
    name: str = field(default="triton")

    @property
    def in_dtype(self) -> str:
        return self.desc.in_dtype

    @property
    def out_dtype(self) -> str:
        return self.desc.out_dtype

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.kernels.matmul import matmul

        ta = to_torch(a, self.desc.in_dtype, self.device)
        tb = to_torch(b, self.desc.in_dtype, self.device)
        out = matmul(ta, tb, desc=self.desc, config=self.config)
        return to_numpy(out, self.desc.out_dtype)
