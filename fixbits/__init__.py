"""fixbits: a reproducibility test suite and regression gate for the bitwise behaviour of GPU kernels."""

from __future__ import annotations

from fixbits.desc import EpilogueOp, GEMMDesc, KCut

__all__ = ["EpilogueOp", "GEMMDesc", "KCut", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str):  # lazy: importing fixbits must not import torch or triton
    if name == "matmul":
        from fixbits.kernels.matmul import matmul

        return matmul
    raise AttributeError(name)
