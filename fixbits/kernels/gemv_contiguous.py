"""Contiguous-slice GEMV / scalar chain: K cut into contiguous slices (or none), each an fma
chain from +0, slices rounded to partial_dtype and summed in order in merge_dtype.

The kernel is fixbits.kernels._scalar's nest kernel: the leaf table fixes every product's
chain and the fold order, so the output tile and warps are speed knobs only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels._scalar import check_family, scalar_nest_matmul

if TYPE_CHECKING:
    import torch

FAMILIES = ("gemv_contiguous", "scalar_chain")


def gemv_contiguous_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(A @ B) with the gemv_contiguous arithmetic of ``desc``."""
    check_family(desc, FAMILIES)
    return scalar_nest_matmul(a, b, desc, **kw)
