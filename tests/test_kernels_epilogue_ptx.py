"""The fused gelu / gelu_tanh / silu arithmetic issues the instructions eager PyTorch's CUDA
kernels issue: nvcc (CUDA 13.0, the toolkit torch+cu130 is built with) compiles PyTorch's
formulas, Triton compiles fixbits.kernels.epilogue.apply_op, and the float instructions that
carry the rounding (fma, ex2, rcp, div, the constant multiplies and adds, the polynomial
coefficients) must be the same multiset. Skips without an nvcc for sm_90 on the machine.
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("triton")

# PyTorch's opmath formulas (aten/src/ATen/native/cuda/ActivationGeluKernel.cu, silu in
# ActivationSiluKernel.cu), written for float inputs.
CUDA_SRC = r"""
#define _USE_MATH_DEFINES
#include <cmath>
extern "C" __global__ void k4(const float* in, float* out) {
  const float kAlpha = M_SQRT1_2; float x = in[threadIdx.x];
  out[threadIdx.x] = x * 0.5f * (1.0f + ::erf(x * kAlpha));
}
extern "C" __global__ void k5(const float* in, float* out) {
  constexpr float kBeta = M_SQRT2 * M_2_SQRTPI * float(0.5); constexpr float kKappa = 0.044715;
  float x = in[threadIdx.x]; float cube = x * x * x; float inner = kBeta * (x + kKappa * cube);
  out[threadIdx.x] = 0.5f * x * (1.0f + ::tanhf(inner));
}
extern "C" __global__ void k3(const float* in, float* out) {
  float x = in[threadIdx.x]; out[threadIdx.x] = x / (1.0f + ::expf(-x));
}
"""

# copysign is left out: a sign transfer is exact however it is spelt (bit ops in Triton's
# libdevice tanhf, copysign.f32 in CUDA 13.0's); fma immediates are left out too (nvcc folds a
# constant into the fma, Triton moves it into a register first), selp keeps the coefficients.
ROUNDING_OPS = ("fma", "ex2", "rcp", "div", "mul", "add", "sub", "cvt.sat", "tanh", "lg2")


def _nvcc() -> str | None:
    for cand in [shutil.which("nvcc"), *sorted(glob.glob("/usr/local/cuda*/bin/nvcc"), reverse=True)]:
        if cand and Path(cand).exists():
            return cand
    return None


def _ops(ptx: str) -> Counter[str]:
    """Float instructions with their immediate constants; .rn dropped (PTX's default for
    mul/add/sub, and Triton spells it out to block contraction), register names dropped."""
    out: Counter[str] = Counter()
    for line in ptx.splitlines():
        line = line.strip()
        m = re.match(r"([a-z0-9.]+)\s+(.*);", line)
        if not m or ".f32" not in m.group(1) or not m.group(1).startswith(ROUNDING_OPS):
            continue
        op = (
            m.group(1).replace(".rn.f32", ".f32")
            if m.group(1).startswith(("mul", "add", "sub"))
            else m.group(1)
        )
        consts = "" if op.startswith("fma.rn") else ",".join(re.findall(r"0f[0-9A-F]{8}", m.group(2)))
        if op == "sub.f32" and not consts:
            continue  # Triton writes -a as 0 - a where nvcc writes neg.f32: the same value
        out[f"{op} {consts}".strip()] += 1
    return out


def _nvcc_ops(tmp_path: Path, nvcc: str) -> dict[int, Counter[str]]:
    src = tmp_path / "ep.cu"
    src.write_text(CUDA_SRC)
    ptx = tmp_path / "ep.ptx"
    subprocess.run(
        [nvcc, "-arch=sm_90", "-ptx", "-O3", str(src), "-o", str(ptx)], check=True, capture_output=True
    )
    text = ptx.read_text()
    out = {}
    for code in (3, 4, 5):
        body = text.split(f".entry k{code}(")[1].split("ret;")[0]
        out[code] = _ops(body)
    return out


def _triton_ops(code: int) -> Counter[str]:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fixbits.kernels._host import LAUNCH_OPTS
    from fixbits.kernels.epilogue import apply_op

    @triton.jit
    def k(x_ptr, y_ptr, CODE: tl.constexpr):
        rm = tl.arange(0, 16)
        rn = tl.arange(0, 16)
        x = tl.load(x_ptr + rm[:, None] * 16 + rn[None, :])
        mask = (rm[:, None] < 16) & (rn[None, :] < 16)
        # silu_gate: the gate multiply is its own eager kernel; a gate of ones isolates silu
        y = apply_op(x, CODE, 1.0, x_ptr, x_ptr, x_ptr, rm, rn, mask, 16, 16, 1, 0, 0, 0, True)
        tl.store(y_ptr + rm[:, None] * 16 + rn[None, :], y)

    src = ASTSource(
        fn=k, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "CODE": "constexpr"}, constexprs={(2,): code}
    )
    opts = {**LAUNCH_OPTS, "num_warps": 8}  # 256 threads: one element each
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 64), options=opts).asm["ptx"]
    ops = _ops(ptx)
    if code == 3:  # the gate multiply (gate loaded as zero-strided x here) is not part of silu
        ops["mul.f32"] -= 1
        ops += Counter()
    return ops


@pytest.mark.parametrize("code", [4, 5, 3], ids=["gelu", "gelu_tanh", "silu"])
def test_fused_activation_issues_eager_pytorchs_instructions(code: int, tmp_path: Path) -> None:
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("no nvcc on this machine: cannot compile PyTorch's formula for sm_90")
    want = _nvcc_ops(tmp_path, nvcc)[code]
    got = _triton_ops(code)
    if code == 3:
        # nvcc contracts expf's final scale (ex2 * 2^n, exact) into the 1 + ... add; the
        # product is exact for every non-subnormal result, so mul + add is the same value
        want = want - Counter({"fma.rn.f32": 1}) + Counter({"mul.f32": 1, "add.f32 0f3F800000": 1})
    assert got == want, f"missing {want - got}, extra {got - want}"
