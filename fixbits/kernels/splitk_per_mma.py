"""Split-K with per-MMA accumulation inside each part: the split-K part kernel compiled with
PROMO = promotion_interval, then the same ordered merge (fixbits.kernels.splitk)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels.splitk import check_family, splitk_core

if TYPE_CHECKING:
    import torch

FAMILY = "splitk_per_mma"


def splitk_per_mma_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(ordered merge of parts), each part promoting every promotion_interval wgmmas."""
    check_family(desc, (FAMILY,))
    return splitk_core(a, b, desc, **kw)
