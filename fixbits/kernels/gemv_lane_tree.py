"""Lane-tree GEMV: lanes take tiles dealt round-robin (STRIDED) or contiguous slices, each an
fma chain, then fold their totals as a butterfly whose offsets count up or down.

The kernel is fixbits.kernels._scalar's nest kernel: the leaf table fixes every product's
chain and the fold order, so the output tile and warps are speed knobs only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels._scalar import check_family, scalar_nest_matmul

if TYPE_CHECKING:
    import torch

FAMILIES = ("gemv_lane_tree",)


def gemv_lane_tree_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(A @ B) with the gemv_lane_tree arithmetic of ``desc``."""
    check_family(desc, FAMILIES)
    return scalar_nest_matmul(a, b, desc, **kw)
