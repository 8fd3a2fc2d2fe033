"""One Protocol for everything that computes a GEMM: the emulator, cuBLAS and the Triton family.

The prober, the suites and the reports take a ``GemmBackend`` and never ask which one it is,
so the same walk recovers a descriptor from the CPU emulator in CI and from cuBLAS on a GPU.
Arrays cross this boundary as numpy arrays of the fixbits dtypes (fixbits.numerics.formats):
a backend that runs on a GPU copies in and out itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from fixbits.desc import GEMMDesc


@runtime_checkable
class GemmBackend(Protocol):
    """C = A @ B for row-major A (M, K) and B (K, N) of ``in_dtype``; C (M, N) of ``out_dtype``."""

    name: str
    in_dtype: str
    out_dtype: str

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class EmulatorBackend:
    """The CPU truth model run with one fixed descriptor (the prober's test double and CI's GPU)."""

    desc: GEMMDesc
    name: str = "emulator"

    @property
    def in_dtype(self) -> str:
        return self.desc.in_dtype

    @property
    def out_dtype(self) -> str:
        return self.desc.out_dtype

    def gemm(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        from fixbits.emulate import emulate

        return emulate(self.desc, a, b)
