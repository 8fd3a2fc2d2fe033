"""Per-MMA accumulation GEMM (use_fast_accum false): single-pass tiles whose chain promotes a
zero-started temporary into the fp32 accumulator every ``promotion_interval`` instructions
with one round-to-nearest add (fixbits.kernels._tensorcore.chain_promoted).

The kernel is the single-pass one compiled with PROMO > 0; GROUPS (promotion groups loaded
per main-loop turn) is a speed knob like the block sizes. For fp8 inputs a USE_TMA config loads
each turn by TMA and issues it as one dot whose partial accumulator Triton's sm_90 lowering
promotes every PROMO instructions (chain_promoted_tma): the same adds in the same order as the
zero-started dot per group of the pointer body, without a register round trip per group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixbits.desc import GEMMDesc
from fixbits.kernels.single_pass import check_family, tile_matmul

if TYPE_CHECKING:
    import torch

FAMILY = "per_mma"


def per_mma_matmul(a: torch.Tensor, b: torch.Tensor, desc: GEMMDesc, **kw: Any) -> torch.Tensor:
    """C = epilogue(A @ B) with per-MMA promotion every ``desc.promotion_interval`` instructions."""
    check_family(desc, (FAMILY,))
    return tile_matmul(a, b, desc, **kw)
