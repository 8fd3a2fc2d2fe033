"""Fused epilogues computed exactly as eager PyTorch computes them after a library GEMM.

The GEMM value is first rounded to the output dtype; each op then reads that rounded value
as fp32, computes in fp32 with the same formula and libdevice function PyTorch's CUDA kernel
uses (aten/src/ATen/native/cuda/Activation*Kernel.cu), and rounds back to the output dtype.
Op codes are ``tl.constexpr`` so an absent op compiles away. Every kernel compiles with
``enable_fp_fusion=False``, so a multiply feeding an add is never contracted unless written as
an fma (gelu_tanh's, where nvcc contracts PyTorch's source the same way).

Formulas (opmath = fp32):
  bias       y = x + bias[n]
  relu       y = x if (x > 0 or x is NaN) else +0
  silu_gate  s = round(x / (1 + expf(-x)));  y = s * gate[m, n]   (eager: silu, then a multiply)
  gelu       y = (x * 0.5f) * (1 + erff(x * float(M_SQRT1_2)))   (erff: CUDA 13.0's, erf_cuda)
  gelu_tanh  y = (0.5f * x) * (1 + tanhf(kBeta * fma(kKappa, x*x*x, x)))   (nvcc contracts x + k*x^3)
  residual   y = x + residual[m, n]
  scale      y = x * float(value)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from fixbits.desc import EpilogueOp

EP_CODES: dict[str, int] = {
    "bias": 1,
    "relu": 2,
    "silu_gate": 3,
    "gelu": 4,
    "gelu_tanh": 5,
    "residual": 6,
    "scale": 7,
}
MAX_OPS = 4
OUT_CODES: dict[str, int] = {"fp32": 0, "fp16": 1, "bf16": 2}

# Constants rounded the way nvcc folds PyTorch's constexpr expressions (double, then float).
GELU_ALPHA = float(np.float32(math.sqrt(0.5)))
GELU_TANH_BETA = float(np.float32(math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5))
GELU_TANH_KAPPA = float(np.float32(0.044715))


class EpilogueError(ValueError):
    """An epilogue names an op fixbits cannot fuse, or lacks the tensor an op reads."""


@dataclass(frozen=True)
class EpiloguePlan:
    """Up to four op codes with their scale factors (fp32) and which tensors they read."""

    codes: tuple[int, int, int, int]
    scales: tuple[float, float, float, float]

    @property
    def needs_bias(self) -> bool:
        return EP_CODES["bias"] in self.codes

    @property
    def needs_residual(self) -> bool:
        return EP_CODES["residual"] in self.codes

    @property
    def needs_gate(self) -> bool:
        return EP_CODES["silu_gate"] in self.codes

    def kernel_kwargs(self) -> dict[str, object]:
        kw: dict[str, object] = {}
        for i in range(MAX_OPS):
            kw[f"EP{i}"] = self.codes[i]
            kw[f"ep_scale{i}"] = self.scales[i]
        return kw


def parse_epilogue(epilogue: object) -> tuple[EpilogueOp, ...]:
    """Accept None, 'gelu', 'bias+gelu', ('bias', 'relu'), EpilogueOp(s) or ('scale', 0.5) pairs."""
    if epilogue is None or epilogue == ():
        return ()
    if isinstance(epilogue, EpilogueOp):
        return (epilogue,)
    if isinstance(epilogue, str):
        items: list[object] = [s.strip() for s in epilogue.replace(",", "+").split("+") if s.strip()]
    else:
        items = list(epilogue)  # type: ignore[call-overload]
    ops: list[EpilogueOp] = []
    for it in items:
        if isinstance(it, EpilogueOp):
            ops.append(it)
        elif isinstance(it, str):
            ops.append(EpilogueOp(it))
        elif isinstance(it, tuple) and len(it) == 2:
            ops.append(EpilogueOp(str(it[0]), float(it[1])))
        else:
            raise EpilogueError(f"epilogue item {it!r} is not an op name, EpilogueOp or (kind, value)")
    return tuple(ops)


def plan_epilogue(ops: tuple[EpilogueOp, ...]) -> EpiloguePlan:
    if len(ops) > MAX_OPS:
        raise EpilogueError(f"at most {MAX_OPS} fused epilogue ops, got {len(ops)}")
    codes = [0] * MAX_OPS
    scales = [1.0] * MAX_OPS
    for i, op in enumerate(ops):
        if op.kind not in EP_CODES:
            raise EpilogueError(f"epilogue op {op.kind!r} is not fusable; known: {', '.join(EP_CODES)}")
        codes[i] = EP_CODES[op.kind]
        if op.value is not None:
            scales[i] = float(np.float32(op.value))
    return EpiloguePlan(codes=tuple(codes), scales=tuple(scales))  # type: ignore[arg-type]


@triton.jit
def round_to(x, OUT: tl.constexpr):
    """Round fp32 x to the output dtype (RN) and widen back, exactly."""
    if OUT == 1:
        return x.to(tl.float16).to(tl.float32)
    elif OUT == 2:
        return x.to(tl.bfloat16).to(tl.float32)
    else:
        return x


# erff of CUDA 13.0 (libdevice __nv_erff, which nvcc inlines into PyTorch's GeLU), as its PTX
# for sm_90 reads: a degree-6 polynomial in |t| (|t| >= ERF_SPLIT) or t*t (else), Horner by
# fma, then t + t*p for small |t| and copysign(1 - ex2.approx.ftz(-|t| - |t|*p), t) for large.
# Triton's bundled libdevice has an older erff (no copysign, a polynomial in t*t on both sides)
# that differs by an ulp near |erf| = 1: hence this explicit copy of the instruction sequence.
ERF_SPLIT = 1.0029599666595459  # 0x3f8060fe
_ERF_BIG = (0x38EB4C3A, 0xBAAE005B, 0x3C09919F, 0xBD24D99A, 0x3E235519, 0x3F69B4F9, 0x3F210A14)
_ERF_SMALL = (0x38B1E96A, 0xBA574D20, 0x3BAAD5EA, 0xBCDC1BE7, 0x3DE718AF, 0xBEC093AC, 0x3E0375D3)


def _f32(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


ERF_BIG = tuple(_f32(b) for b in _ERF_BIG)
ERF_SMALL = tuple(_f32(b) for b in _ERF_SMALL)


@triton.jit
def ex2_approx_ftz(x):
    """PTX ex2.approx.ftz.f32, the instruction libdevice's erff ends with."""
    return tl.inline_asm_elementwise(
        "ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def copysign(sign, mag):
    """PTX copysign.f32: |mag| with the sign of ``sign``."""
    return tl.inline_asm_elementwise(
        "copysign.f32 $0, $1, $2;", "=r,r,r", [sign, mag], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def erf_cuda(t):
    """erff(t) with CUDA 13.0's instruction sequence (see ERF_BIG / ERF_SMALL)."""
    a = tl.abs(t)
    big = a >= 1.002959966659546
    v = tl.where(big, a, t * t)
    p = tl.where(big, 0.00011219871521461755, 8.483494457323104e-05)
    p = libdevice.fma(p, v, tl.where(big, -0.0013275252422317863, -0.0008213091641664505))
    p = libdevice.fma(p, v, tl.where(big, 0.00839653518050909, 0.005213488824665546))
    p = libdevice.fma(p, v, tl.where(big, -0.04024658352136612, -0.026868773624300957))
    p = libdevice.fma(p, v, tl.where(big, 0.15950430929660797, 0.11284004896879196))
    p = libdevice.fma(p, v, tl.where(big, 0.9129176735877991, -0.37612664699554443))
    p = libdevice.fma(p, v, tl.where(big, 0.6290600299835205, 0.12837915122509003))
    s = tl.where(big, -a, t)
    r = libdevice.fma(p, s, s)
    e = copysign(t, 1.0 - ex2_approx_ftz(r))
    return tl.where(big, e, r)


@triton.jit
def apply_op(
    x,
    CODE: tl.constexpr,
    scale,
    bias_ptr,
    res_ptr,
    gate_ptr,
    rm,
    rn,
    mask,
    N,
    stride_rm,
    stride_rn,
    stride_gm,
    stride_gn,
    OUT: tl.constexpr,
    GELU_TANH_FMA: tl.constexpr,
):
    if CODE == 1:
        b = tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)
        x = round_to(x + b[None, :], OUT)
    elif CODE == 2:
        x = tl.where((x > 0) | (x != x), x, 0.0)
    elif CODE == 3:
        s = round_to(libdevice.div_rn(x, 1.0 + libdevice.exp(-x)), OUT)
        g = tl.load(gate_ptr + rm[:, None] * stride_gm + rn[None, :] * stride_gn, mask=mask, other=0.0)
        x = round_to(s * g.to(tl.float32), OUT)
    elif CODE == 4:
        x = round_to((x * 0.5) * (1.0 + erf_cuda(x * 0.7071067690849304)), OUT)
    elif CODE == 5:
        cube = (x * x) * x
        if GELU_TANH_FMA:
            inner = 0.7978845834732056 * libdevice.fma(0.044714998453855515, cube, x)
        else:
            inner = 0.7978845834732056 * (x + 0.044714998453855515 * cube)
        x = round_to((0.5 * x) * (1.0 + libdevice.tanh(inner)), OUT)
    elif CODE == 6:
        r = tl.load(res_ptr + rm[:, None] * stride_rm + rn[None, :] * stride_rn, mask=mask, other=0.0)
        x = round_to(x + r.to(tl.float32), OUT)
    elif CODE == 7:
        x = round_to(x * scale, OUT)
    return x


@triton.jit
def epilogue_ops(
    acc,
    mask,
    rm,
    rn,
    N,
    bias_ptr,
    res_ptr,
    gate_ptr,
    stride_rm,
    stride_rn,
    stride_gm,
    stride_gn,
    ep_scale0,
    ep_scale1,
    ep_scale2,
    ep_scale3,
    EP0: tl.constexpr,
    EP1: tl.constexpr,
    EP2: tl.constexpr,
    EP3: tl.constexpr,
    OUT: tl.constexpr,
    GELU_TANH_FMA: tl.constexpr,
):
    """Round the fp32 GEMM value to OUT and run the fused ops in order (values fp32, each
    already rounded to OUT); ``mask`` (rows < M, cols < N) guards the ops' tensor loads."""
    x = round_to(acc, OUT)
    x = apply_op(
        x,
        EP0,
        ep_scale0,
        bias_ptr,
        res_ptr,
        gate_ptr,
        rm,
        rn,
        mask,
        N,
        stride_rm,
        stride_rn,
        stride_gm,
        stride_gn,
        OUT,
        GELU_TANH_FMA,
    )
    x = apply_op(
        x,
        EP1,
        ep_scale1,
        bias_ptr,
        res_ptr,
        gate_ptr,
        rm,
        rn,
        mask,
        N,
        stride_rm,
        stride_rn,
        stride_gm,
        stride_gn,
        OUT,
        GELU_TANH_FMA,
    )
    x = apply_op(
        x,
        EP2,
        ep_scale2,
        bias_ptr,
        res_ptr,
        gate_ptr,
        rm,
        rn,
        mask,
        N,
        stride_rm,
        stride_rn,
        stride_gm,
        stride_gn,
        OUT,
        GELU_TANH_FMA,
    )
    x = apply_op(
        x,
        EP3,
        ep_scale3,
        bias_ptr,
        res_ptr,
        gate_ptr,
        rm,
        rn,
        mask,
        N,
        stride_rm,
        stride_rn,
        stride_gm,
        stride_gn,
        OUT,
        GELU_TANH_FMA,
    )
    return x


@triton.jit
def epilogue_value(
    acc,
    out_ptr,
    rm,
    rn,
    M,
    N,
    bias_ptr,
    res_ptr,
    gate_ptr,
    stride_rm,
    stride_rn,
    stride_gm,
    stride_gn,
    ep_scale0,
    ep_scale1,
    ep_scale2,
    ep_scale3,
    EP0: tl.constexpr,
    EP1: tl.constexpr,
    EP2: tl.constexpr,
    EP3: tl.constexpr,
    OUT: tl.constexpr,
    GELU_TANH_FMA: tl.constexpr,
):
    """The tile epilogue_store stores, in the output element type (``out_ptr`` only gives the
    type): for a store that clips at the bounds itself (a TMA store of the whole tile). Rows >=
    M and cols >= N hold values of wrapped rows that must not be written."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = epilogue_ops(
        acc, mask, rm, rn, N, bias_ptr, res_ptr, gate_ptr, stride_rm, stride_rn, stride_gm, stride_gn,
        ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
    )  # fmt: skip
    return x.to(out_ptr.dtype.element_ty)


@triton.jit
def epilogue_store(
    acc,
    out_ptr,
    rm,
    rn,
    M,
    N,
    stride_om,
    stride_on,
    bias_ptr,
    res_ptr,
    gate_ptr,
    stride_rm,
    stride_rn,
    stride_gm,
    stride_gn,
    ep_scale0,
    ep_scale1,
    ep_scale2,
    ep_scale3,
    EP0: tl.constexpr,
    EP1: tl.constexpr,
    EP2: tl.constexpr,
    EP3: tl.constexpr,
    OUT: tl.constexpr,
    GELU_TANH_FMA: tl.constexpr,
):
    """Round the fp32 GEMM value to OUT, run the fused ops in order, store (masked)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = epilogue_ops(
        acc, mask, rm, rn, N, bias_ptr, res_ptr, gate_ptr, stride_rm, stride_rn, stride_gm, stride_gn,
        ep_scale0, ep_scale1, ep_scale2, ep_scale3, EP0, EP1, EP2, EP3, OUT, GELU_TANH_FMA,
    )  # fmt: skip
    tl.store(
        out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, x.to(out_ptr.dtype.element_ty), mask=mask
    )
