"""cuBLASLt behind the GemmBackend Protocol: numpy in, numpy out, the GEMM on the GPU.

This is the black box the prober walks on a GPU machine. ``algo="own"`` passes algo NULL so the
library picks exactly as it does for torch.mm(out_dtype=float32) (FINDINGS.md); ``"heuristic"``
runs the heuristic's first answer explicitly, which must give the same bytes.
"""

from __future__ import annotations

import math
import os
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


# device memory one probe or verification call may take (the H200 has 139 GiB; other work,
# the workspace and fragmentation keep a wide margin). FIXBITS_MAX_CALL_GIB sets it per process:
# a runner with W probing processes gives each about 110/W GiB.
MAX_CALL_BYTES = int(float(os.environ.get("FIXBITS_MAX_CALL_GIB", "40")) * (1 << 30))


# device bytes per operand element: the operand itself (hashed draws and probe calls are built in
# place) plus fp8's transposed copy of B; a fixed 2 GiB covers the draw's chunked temporaries
DRAW_BYTES_PER_INPUT = 3
CALL_BYTES_PER_INPUT = 3


def call_bytes(m: int, n: int, k: int, per_input: int = DRAW_BYTES_PER_INPUT) -> int:
    return per_input * (m * k + k * n) + 4 * m * n + (2 << 30)


class TooLarge(RuntimeError):
    """A call would need more device memory than MAX_CALL_BYTES."""


def sparse_operand(shape: tuple[int, int], nz: tuple[np.ndarray, np.ndarray, np.ndarray], dtype: str,
                   device: str) -> Any:
    """A mostly-zero operand built in device memory from (row, col, value) triples, written as
    bits into an integer view (2 bytes an element for fp16/bf16, 1 for fp8; index_put_ needs no
    float8 kernel). The triples name each element once (the packer sums placements first)."""
    import torch

    from fixbits.cublas.torch_dtypes import torch_dtype

    i, j, v = nz
    np_int, torch_int = _UINT[np.dtype(_np_dtype(dtype)).itemsize]
    x = torch.zeros(shape, dtype=getattr(torch, torch_int), device=device)
    if len(v):
        vb = np.ascontiguousarray(np.asarray(v, dtype=np.float32).astype(_np_dtype(dtype))).view(np_int)
        idx = (torch.from_numpy(np.asarray(i, dtype=np.int64)).to(device),
               torch.from_numpy(np.asarray(j, dtype=np.int64)).to(device))
        x.index_put_(idx, torch.from_numpy(vb).to(device))
    return x.view(torch_dtype(dtype))


def cells_for(k: int, cells: int, work: float = 4e6) -> int:
    """Rows (and columns) to sample so that emulating them costs about ``work`` products."""
    return max(2, min(cells, int(math.sqrt(work / max(1, k)))))


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

    # the device-side paths: operands built or drawn on the device, only sampled cells come back
    device: str = "cuda"
    max_bytes: int = MAX_CALL_BYTES

    def _mm(self, ta: Any, tb: Any) -> Any:
        answer = None
        if self.algo == "heuristic":
            answer = self.lt.heuristic(int(ta.shape[0]), int(tb.shape[1]), int(ta.shape[1]), self.in_dtype,
                                       self.out_dtype, workspace_bytes=self.workspace_bytes)
        return self.lt.matmul(ta, tb, self.out_dtype, algo=answer, workspace_bytes=self.workspace_bytes)

    def _guard(self, m: int, n: int, k: int, per_input: int = CALL_BYTES_PER_INPUT) -> None:
        need = call_bytes(m, n, k, per_input)
        if need > self.max_bytes:
            raise TooLarge(f"{m}x{n}x{k} needs {need / 2**30:.0f} GiB of device memory "
                           f"(limit {self.max_bytes / 2**30:.0f} GiB)")

    def gemm_call(self, call: Any) -> np.ndarray:
        """A probe call (fixbits.probe.placements.Call) built on the device; its read cells back."""
        import torch

        self._guard(call.m, call.n, call.k)
        ta = sparse_operand((call.m, call.k), call.a_nz, self.in_dtype, self.device)
        tb = sparse_operand((call.k, call.n), call.b_nz, self.in_dtype, self.device)
        c = self._mm(ta, tb)
        del ta, tb
        ii = torch.tensor([i for i, _ in call.reads], dtype=torch.int64, device=c.device)
        jj = torch.tensor([j for _, j in call.reads], dtype=torch.int64, device=c.device)
        out = to_numpy(c[ii, jj], self.out_dtype)
        del c
        self._release(call.m, call.n, call.k)
        return out

    def _release(self, m: int, n: int, k: int) -> None:
        """Give a big call's memory back (several probing processes share one GPU)."""
        if self.device.startswith("cuda") and call_bytes(m, n, k) > (4 << 30):
            import torch

            torch.cuda.empty_cache()

    def draw_sampled(self, m: int, n: int, k: int, kind: str, seed: int, rows: list[int],
                     cols: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One random draw run on the device: (A's sampled rows, B's sampled columns, C there).
        Operands are the sweep's counter-hash draws (fixbits.probe.hashdraw), built in place."""
        import torch

        from fixbits.probe.sweep import device_operands

        self._guard(m, n, k, per_input=DRAW_BYTES_PER_INPUT)
        s = int(seed) & 0x7FFF_FFFF
        ta, tb = device_operands(m, n, k, self.in_dtype, kind, 2 * s, 2 * s + 1, self.device)
        c = self._mm(ta, tb)
        ri = torch.tensor(rows, dtype=torch.int64, device=c.device)
        ci = torch.tensor(cols, dtype=torch.int64, device=c.device)
        out = (to_numpy(ta[ri], self.in_dtype), to_numpy(tb[:, ci], self.in_dtype),
               to_numpy(c[ri][:, ci], self.out_dtype))
        del ta, tb, c
        self._release(m, n, k)
        return out

    def launcher(self, m: int, n: int, k: int) -> Any:
        """A callable running one GEMM of this shape on zero operands (for launch profiling)."""
        import torch

        from fixbits.cublas.torch_dtypes import torch_dtype

        self._guard(m, n, k, per_input=2)
        ta = torch.zeros((m, k), dtype=torch_dtype(self.in_dtype), device=self.device)
        tb = torch.zeros((k, n), dtype=torch_dtype(self.in_dtype), device=self.device)
        return lambda: self._mm(ta, tb)
