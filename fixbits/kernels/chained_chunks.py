"""Chained chunks: the scalar path cut twice (or more) inside one program: an outer cut gives
each thread a chunk, an inner cut closes an accumulator every span elements; every merge is
an in-order chain.

The kernel is fixbits.kernels._scalar's nest kernel: the leaf table fixes every product's
chain and the fold order, so the output tile and warps are speed knobs only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels._scalar import check_family, scalar_nest_matmul

if TYPE_CHECKING:
    import torch

FAMILIES = ("chained_chunks",)


def chained_chunks_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(A @ B) with the chained_chunks arithmetic of ``desc``."""
    check_family(desc, FAMILIES)
    return scalar_nest_matmul(a, b, desc, **kw)
