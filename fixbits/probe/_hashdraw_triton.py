"""The Triton kernel of fixbits.probe.hashdraw (module level: Triton resolves jit globals here)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _mix_t(x):  # type: ignore[no-untyped-def]
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


@triton.jit
def fill(out_ptr, total, seed_h, WIDE: tl.constexpr, FP8: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # noqa: N803
    """hashdraw._values for flat indices [pid*BLOCK, ...), stored in the operand's dtype."""
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < total
    lo = (offs & 0xFFFFFFFF).to(tl.uint32)
    hi = (offs >> 32).to(tl.uint32)
    h1 = _mix_t(lo ^ _mix_t(hi ^ seed_h.to(tl.uint32)))
    h2 = _mix_t(h1 ^ 0x5BD1E995)
    u = ((h1 & 0xFF) + ((h1 >> 8) & 0xFF) + ((h1 >> 16) & 0xFF) + ((h1 >> 24) & 0xFF)).to(tl.int32) - 510
    v = u * 16384 + (h2 & 0x3FFF).to(tl.int32)
    if WIDE:
        if FP8:
            e = ((h2 >> 14) % 13).to(tl.int32) - 27
        else:
            e = ((h2 >> 14) % 25).to(tl.int32) - 33
    else:
        e = tl.zeros_like(v) - 21
    scale = ((e + 127) << 23).to(tl.float32, bitcast=True)
    x = v.to(tl.float32) * scale
    if FP8:
        x = tl.minimum(tl.maximum(x, -448.0), 448.0)
    tl.store(out_ptr + offs, x.to(out_ptr.dtype.element_ty), mask=mask)
