"""Record golden outputs on a GPU and check the CPU emulator against them, bit for bit.

    python3 runners/device/capture_golden.py --out DIR [--budget-s 170] [--quick]
    python3 runners/device/capture_golden.py --out DIR --set second     # only the cases added since run 1

Files: golden_*.yaml (bit-exact; copy into matrices/golden/), mismatch_*.yaml (the emulator missed:
GPU bytes inlined for diagnosis), measure_*.yaml (transcendental epilogues: not owed exact bits).
    python3 runners/device/capture_golden.py --out DIR --dry-run        # CPU: records from the emulator
    python3 runners/device/capture_golden.py --out DIR --interpret      # CPU: TRITON_INTERPRET kernels
    python3 runners/device/capture_golden.py --out DIR --compile-check  # CPU: sm_90 PTX structure

Cases whose descriptor is known by construction (issue 2, item 5):
* block: one ``tl.dot`` over K = 16 (fp16, bf16) or 32 (fp8 e4m3) on a 64x64 tile with 4 warps
  (one wgmma chain on sm_90), from zero and from an incoming fp32 accumulator;
* gemm: our own Triton loop over K in a fixed order, fp32 accumulator, residue last:
  single pass (``acc = tl.dot(a, b, acc)``), per-MMA (``acc = acc + tl.dot(a, b)`` through an
  inline-asm add.rn.f32 so the compiler cannot fold the add into the MMA), and split-K (contiguous
  parts of SPAN elements, each chained from zero into an fp32 workspace, then a second kernel
  summing the parts in order from +0).

For every case the GPU output is compared bit for bit with ``fixbits.emulate`` of the case's
descriptor on the same inputs (regenerated from kind and seed by ``fixbits.inputs.draw``), and a
GoldenRecord holding the GPU bytes' sha256 is written to DIR/golden_<case>_<dtype>.yaml (GPU
bytes inlined when they disagree with the emulator, for diagnosis on a CPU). DIR/summary.yaml
holds per-case counts; the table printed last summarises them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fixbits.desc import EpilogueOp, GEMMDesc, KCut  # noqa: E402
from fixbits.emulate import emulate  # noqa: E402
from fixbits.golden import GoldenRecord, pack_output, save_file, sha256_of, side_inputs_for  # noqa: E402
from fixbits.inputs import draw, stream_digest  # noqa: E402
from fixbits.numerics import formats  # noqa: E402

SUITE = "capture_golden"
IK = {"fp16": 16, "bf16": 16, "fp8_e4m3": 32, "fp8_e5m2": 32}
BASE_DTYPES = ("fp16", "bf16", "fp8_e4m3")  # the first capture's loops (their seeds are fixed)
# epilogue op lists whose eager-PyTorch result the emulator should reproduce bit for bit, and
# those with transcendentals (CUDA expf/erff/tanhf use ex2.approx): measured, not recorded
EXACT_EPILOGUES: tuple[tuple[EpilogueOp, ...], ...] = (
    (EpilogueOp("bias"),),
    (EpilogueOp("relu"),),
    (EpilogueOp("scale", 0.1),),
    (EpilogueOp("residual"),),
    (EpilogueOp("bias"), EpilogueOp("relu"), EpilogueOp("scale", 0.3), EpilogueOp("residual")),
)
TRANSCENDENTAL_EPILOGUES: tuple[tuple[EpilogueOp, ...], ...] = (
    (EpilogueOp("gelu"),),
    (EpilogueOp("gelu_tanh"),),
    (EpilogueOp("silu_gate"),),
    (EpilogueOp("bias"), EpilogueOp("gelu")),
)
KINDS = ("ordinary", "wide", "tiny", "subnormal", "cancel")
INLINE_MISMATCH_LIMIT = 1 << 16
SECOND_SEED = 5000  # cases added after the first H200 capture start here


@dataclass(frozen=True)
class Case:
    """One capture: ``variant`` picks the kernel ('block', 'single', 'per_mma', 'splitk', 'fma');
    ``epilogue`` ops run as eager PyTorch on the single-pass kernel's output; ``partial`` is the
    split-K workspace type; ``lanes`` (fma) deals K round-robin to that many chains."""

    case: str
    variant: str
    dtype: str
    out_dtype: str
    m: int
    n: int
    k: int
    kind: str
    seed: int
    bk: int = 64
    span: int = 0
    has_acc: bool = False
    epilogue: tuple[EpilogueOp, ...] = ()
    partial: str = "fp32"
    lanes: int = 1
    mma_sync: bool = False  # a tile Triton lowers to mma.sync m16n8k16 instead of wgmma

    @property
    def id(self) -> str:
        extra = f"_bk{self.bk}" if self.case == "gemm" else ("_acc" if self.has_acc else "")
        extra += f"_span{self.span}" if self.variant == "splitk" else ""
        extra += f"_partial{self.partial}" if self.partial != "fp32" else ""
        extra += f"_lanes{self.lanes}" if self.variant == "fma" else ""
        extra += "_mmasync" if self.mma_sync else ""
        if self.epilogue:
            extra += "_ep_" + "+".join(
                op.kind if op.value is None else f"{op.kind}{op.value}" for op in self.epilogue
            )
        return f"{self.variant}_{self.dtype}_{self.out_dtype}_{self.m}x{self.n}x{self.k}{extra}_{self.kind}_s{self.seed}"

    @property
    def exact(self) -> bool:
        """Whether the emulator owes this case exact bits (no transcendental epilogue op)."""
        return not any(op.kind in ("gelu", "gelu_tanh", "silu_gate") for op in self.epilogue)

    def desc(self) -> GEMMDesc:
        ik = IK[self.dtype]
        base = dict(
            arch="sm_90",
            instruction="mma" if self.mma_sync else "wgmma",
            instruction_k=ik,
            in_dtype=self.dtype,
            out_dtype=self.out_dtype,
        )
        if self.variant == "block":
            return GEMMDesc(**base, k_loop_step=ik)
        if self.variant == "single":
            return GEMMDesc(**base, k_loop_step=self.bk, epilogue=self.epilogue)
        if self.variant == "fma":
            cuts = (KCut("strided", count=self.lanes, span=1),) if self.lanes > 1 else ()
            return GEMMDesc(
                arch="sm_90",
                instruction="fma",
                instruction_k=1,
                in_dtype=self.dtype,
                out_dtype=self.out_dtype,
                k_cuts=cuts,
            )
        if self.variant == "per_mma":
            return GEMMDesc(
                **base, k_loop_step=self.bk, use_fast_accum=False, promotion_interval=self.bk // ik
            )
        if self.variant == "splitk":
            return GEMMDesc(
                **base,
                k_loop_step=self.bk,
                k_cuts=(KCut("contiguous", span=self.span),),
                partial_dtype=self.partial,
            )
        raise ValueError(f"unknown variant {self.variant}")


def build_cases(quick: bool) -> list[Case]:
    cases: list[Case] = []
    seed = 1000
    kinds = KINDS[:2] if quick else KINDS
    for dtype in BASE_DTYPES:
        for kind in kinds:
            for has_acc in (False, True):
                seed += 10
                cases.append(
                    Case("block", "block", dtype, "fp32", 64, 64, IK[dtype], kind, seed, has_acc=has_acc)
                )
    shapes = [(64, 64, 256), (33, 17, 777), (96, 80, 1000)] if not quick else [(33, 17, 777)]
    for dtype in BASE_DTYPES:
        ik = IK[dtype]
        variants = [
            ("single", 64, 0, "fp32"),
            ("single", 32, 0, "fp32"),
            ("per_mma", ik, 0, "fp32"),
            ("per_mma", 64, 0, "fp32"),
            ("splitk", 64, 256, "fp32"),
            ("single", 64, 0, "fp16" if dtype != "bf16" else "bf16"),
        ]
        for m, n, k in shapes:
            for variant, bk, span, out in variants:
                for kind in kinds:
                    seed += 10
                    cases.append(Case("gemm", variant, dtype, out, m, n, k, kind, seed, bk=bk, span=span))
    if not quick:
        for dtype in ("fp16", "bf16"):
            for kind in ("ordinary", "wide"):
                seed += 10
                cases.append(Case("gemm", "single", dtype, "fp32", 128, 128, 4096, kind, seed, bk=64))
                seed += 10
                cases.append(
                    Case("gemm", "splitk", dtype, "fp32", 128, 96, 4100, kind, seed, bk=64, span=1024)
                )
    # -- second capture: appended so the first capture's ids and seeds stay as recorded --------
    seed = SECOND_SEED
    for kind in kinds[:4] if not quick else kinds:  # fp8 e5m2 blocks and GEMMs
        for has_acc in (False, True):
            seed += 10
            cases.append(Case("block", "block", "fp8_e5m2", "fp32", 64, 64, 32, kind, seed, has_acc=has_acc))
    for m, n, k in [(33, 17, 777), (64, 64, 256)][: 1 if quick else 2]:
        for variant, bk in (("single", 64), ("per_mma", 32)):
            for kind in ("ordinary", "wide", "tiny"):
                seed += 10
                cases.append(Case("gemm", variant, "fp8_e5m2", "fp32", m, n, k, kind, seed, bk=bk))
    for dtype in ("fp16", "bf16"):  # split-K with partials stored at the output type
        for m, n, k in [(33, 17, 777), (96, 80, 1000)][: 1 if quick else 2]:
            for kind in ("ordinary", "wide"):
                seed += 10
                cases.append(
                    Case("gemm", "splitk", dtype, dtype, m, n, k, kind, seed, bk=64, span=256, partial=dtype)
                )
    for dtype in ("fp16", "bf16"):  # the scalar path: fma chains, one lane or two dealt round-robin
        for lanes in (1, 2):
            for kind in ("ordinary", "wide", "cancel")[: 2 if quick else 3]:
                seed += 10
                cases.append(Case("gemm", "fma", dtype, "fp32", 33, 17, 301, kind, seed, lanes=lanes))
    pairs = [
        ("fp16", "fp16", ("ordinary", "cancel")),
        ("bf16", "bf16", ("ordinary", "cancel")),
        ("fp16", "fp32", ("ordinary", "wide")),
    ]
    for dtype, out, ep_kinds in pairs:  # eager PyTorch epilogues after the single-pass kernel
        for ops in EXACT_EPILOGUES + TRANSCENDENTAL_EPILOGUES:
            for kind in ep_kinds[: 1 if quick else 2]:
                seed += 10
                cases.append(Case("gemm", "single", dtype, out, 64, 48, 256, kind, seed, bk=64, epilogue=ops))
    # non-finite inputs: NaN in -> canonical NaN, inf*0 and inf-inf -> NaN, inf propagates
    for dtype in ("fp16", "bf16", "fp8_e4m3", "fp8_e5m2"):
        for has_acc in (False, True):
            seed += 10
            cases.append(
                Case("block", "block", dtype, "fp32", 64, 64, IK[dtype], "special", seed, has_acc=has_acc)
            )
    special = [
        ("single", "fp16", "fp32", 64, 0, 1),
        ("single", "fp16", "fp16", 64, 0, 1),
        ("single", "bf16", "bf16", 64, 0, 1),
        ("single", "fp8_e4m3", "fp32", 64, 0, 1),
        ("per_mma", "fp16", "fp32", 16, 0, 1),
        ("per_mma", "fp8_e5m2", "fp32", 64, 0, 1),
        ("splitk", "fp16", "fp32", 64, 256, 1),
        ("fma", "fp16", "fp32", 64, 0, 2),
    ]
    for variant, dtype, out, bk, span, lanes in special[: 3 if quick else len(special)]:
        seed += 10
        cases.append(
            Case(
                "gemm",
                variant,
                dtype,
                out,
                33,
                17,
                301 if variant == "fma" else 777,
                "special",
                seed,
                bk=bk,
                span=span,
                lanes=lanes,
            )
        )
    # mma.sync m16n8k16 (Triton's choice for 16- and 32-row tiles on 1-2 warps): the same block model
    # as wgmma is assumed; no hardware A/B of the two is published
    for dtype in ("fp16", "bf16"):
        for kind in ("ordinary", "wide", "tiny", "cancel"):
            for has_acc in (False, True):
                seed += 10
                cases.append(
                    Case(
                        "block",
                        "block",
                        dtype,
                        "fp32",
                        16,
                        64,
                        16,
                        kind,
                        seed,
                        has_acc=has_acc,
                        mma_sync=True,
                    )
                )
        for variant, bk in (("single", 64), ("per_mma", 16)):
            for kind in ("ordinary", "wide"):
                seed += 10
                cases.append(
                    Case("gemm", variant, dtype, "fp32", 33, 17, 777, kind, seed, bk=bk, mma_sync=True)
                )
    # products below fp32's normal range (bf16 only): e_zero as e_max, subnormal and signed-zero results
    for has_acc in (False, True):
        seed += 10
        cases.append(Case("block", "block", "bf16", "fp32", 64, 64, 16, "underflow", seed, has_acc=has_acc))
    for variant, bk, span, lanes in (
        ("single", 64, 0, 1),
        ("per_mma", 16, 0, 1),
        ("splitk", 64, 256, 1),
        ("fma", 64, 0, 2),
    ):
        seed += 10
        k = 301 if variant == "fma" else 777
        cases.append(
            Case("gemm", variant, "bf16", "fp32", 33, 17, k, "underflow", seed, bk=bk, span=span, lanes=lanes)
        )
    return cases


def inputs_of(c: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Same convention as fixbits.golden.regenerate_inputs: A seed, B seed + 1, acc seed + 2."""
    a = draw((c.m, c.k), c.dtype, c.kind, c.seed)
    b = draw((c.k, c.n), c.dtype, c.kind, c.seed + 1)
    acc = draw((c.m, c.n), "fp32", c.kind, c.seed + 2) if c.has_acc else None
    return a, b, acc


# -- GPU side (torch and triton imported only here) ------------------------------------------


class GpuRunner:
    def __init__(self, device: str) -> None:
        import torch
        import triton
        import triton.language as tl

        self.torch, self.triton, self.tl = torch, triton, tl
        self.device = device
        self.tdtype = {
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
            "fp8_e4m3": torch.float8_e4m3fn,
            "fp8_e5m2": torch.float8_e5m2,
            "fp32": torch.float32,
        }
        if device == "cpu":
            _patch_interpreter_index()
        self.kernels = _make_kernels(triton, tl)

    def to_torch(self, x: np.ndarray, dtype: str) -> Any:
        torch = self.torch
        raw = np.ascontiguousarray(x).view({1: np.uint8, 2: np.int16, 4: np.int32}[x.dtype.itemsize])
        return torch.from_numpy(raw.copy()).view(self.tdtype[dtype]).to(self.device)

    def from_torch(self, t: Any, dtype: str) -> np.ndarray:
        torch = self.torch
        width = t.element_size()
        signed = {1: torch.int8, 2: torch.int16, 4: torch.int32}[width]
        raw = t.contiguous().view(signed).cpu().numpy()
        return raw.view(formats.np_dtype(dtype))

    def run(
        self, c: Case, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None, side: dict[str, np.ndarray]
    ) -> np.ndarray:
        if not c.epilogue:
            return self.from_torch(self._run(c, a, b, acc), c.out_dtype)
        import torch.nn.functional as F

        torch = self.torch
        y = self._run(c, a, b, acc)
        t = {k: self.to_torch(v, c.out_dtype) for k, v in side.items()}
        for op in c.epilogue:  # eager PyTorch, one op (one kernel, one rounding) at a time
            if op.kind == "bias":
                y = y + t["bias"]
            elif op.kind == "residual":
                y = y + t["residual"]
            elif op.kind == "scale":
                y = y * op.value
            elif op.kind == "relu":
                y = torch.relu(y)
            elif op.kind == "gelu":
                y = F.gelu(y)
            elif op.kind == "gelu_tanh":
                y = F.gelu(y, approximate="tanh")
            elif op.kind == "silu_gate":
                y = F.silu(y) * t["gate"]
        return self.from_torch(y, c.out_dtype)

    def _run(self, c: Case, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None) -> Any:
        torch, tl = self.torch, self.tl
        ta = self.to_torch(a, c.dtype)
        tbt = self.to_torch(np.ascontiguousarray(b.T), c.dtype)  # B^T (N, K): K-major B
        out_tl = {"fp32": tl.float32, "fp16": tl.float16, "bf16": tl.bfloat16}[c.out_dtype]
        if c.variant == "block":
            tacc = (
                self.to_torch(acc, "fp32")
                if acc is not None
                else torch.zeros((c.m, c.n), dtype=torch.float32, device=self.device)
            )
            d = torch.empty((c.m, c.n), dtype=torch.float32, device=self.device)
            self.kernels["block"][(1,)](
                ta,
                tbt,
                tacc,
                d,
                c.n,
                K=c.k,
                BM=c.m,
                BN=64,
                HAS_ACC=c.has_acc,
                num_warps=1 if c.mma_sync else 4,
            )
            return d
        bm, bn = (32, 64) if c.mma_sync else (64, 64)
        grid_mn = (self.triton.cdiv(c.m, bm), self.triton.cdiv(c.n, bn))
        if c.variant == "fma":
            d = torch.empty((c.m, c.n), dtype=torch.float32, device=self.device)
            self.kernels["fma"][(self.triton.cdiv(c.m, 32), self.triton.cdiv(c.n, 32))](
                ta, tbt, d, c.m, c.n, c.k, BM=32, BN=32, LANES=c.lanes, num_warps=4
            )
            return d
        if c.variant in ("single", "per_mma"):
            d = torch.empty((c.m, c.n), dtype=self.tdtype[c.out_dtype], device=self.device)
            self.kernels["gemm"][grid_mn](
                ta,
                tbt,
                d,
                c.m,
                c.n,
                c.k,
                0,
                c.k,
                0,
                BM=bm,
                BN=bn,
                BK=c.bk,
                PER_MMA=c.variant == "per_mma",
                OUT=out_tl,
                ASM_ADD=c.variant == "per_mma" and self.device != "cpu",
                num_warps=2 if c.mma_sync else 4,
            )
            return d
        parts = max(1, -(-c.k // c.span))
        ws = torch.empty((parts, c.m, c.n), dtype=self.tdtype[c.partial], device=self.device)
        ws_tl = {"fp32": tl.float32, "fp16": tl.float16, "bf16": tl.bfloat16}[c.partial]
        for part in range(parts):  # one launch per part: each chained from zero over [k0, k1)
            k0, k1 = part * c.span, min(c.k, (part + 1) * c.span)
            self.kernels["gemm"][grid_mn](
                ta,
                tbt,
                ws,
                c.m,
                c.n,
                c.k,
                k0,
                k1,
                part,
                BM=bm,
                BN=bn,
                BK=c.bk,
                PER_MMA=False,
                OUT=ws_tl,
                ASM_ADD=False,
                num_warps=4,
            )
        d = torch.empty((c.m, c.n), dtype=self.tdtype[c.out_dtype], device=self.device)
        total = c.m * c.n
        self.kernels["merge"][(self.triton.cdiv(total, 1024),)](
            ws, d, total, parts, BLOCK=1024, OUT=out_tl, num_warps=4
        )
        return d


def _patch_interpreter_index() -> None:
    """The 3.6 interpreter turns a scalar into a 1-element array and ``int()``s it, which numpy >= 2.4
    refuses; use ``.item()`` instead (CPU checking mode only, never on a GPU)."""
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched


def _make_kernels(triton: Any, tl: Any) -> dict[str, Any]:
    @triton.jit
    def block_kernel(
        a_ptr,
        bt_ptr,
        c_ptr,
        d_ptr,
        N,
        K: tl.constexpr,
        BM: tl.constexpr,
        BN: tl.constexpr,
        HAS_ACC: tl.constexpr,
    ):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
        b = tl.load(bt_ptr + rn[None, :] * K + rk[:, None])
        if HAS_ACC:
            c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
            d = tl.dot(a, b, c)
        else:
            d = tl.dot(a, b)
        tl.store(d_ptr + rm[:, None] * N + rn[None, :], d)

    # sizes are not specialised (divisibility hints change vector widths, never the arithmetic):
    # fewer compiles on the GPU machine
    @triton.jit(do_not_specialize=["M", "N", "K", "K0", "K1", "PART"])
    def gemm_kernel(
        a_ptr,
        bt_ptr,
        d_ptr,
        M,
        N,
        K,
        K0,
        K1,
        PART,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        PER_MMA: tl.constexpr,
        OUT: tl.constexpr,
        ASM_ADD: tl.constexpr,
    ):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(K0, K1, BK):  # K order, the short turn last
            rk = kk + tl.arange(0, BK)
            mk = rk < K1
            a = tl.load(
                a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & mk[None, :], other=0.0
            )
            b = tl.load(
                bt_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & mk[:, None], other=0.0
            )
            if PER_MMA:
                step = tl.dot(a, b)
                if ASM_ADD:
                    acc = tl.inline_asm_elementwise(
                        "add.rn.f32 $0, $1, $2;",
                        "=r,r,r",
                        [acc, step],
                        dtype=tl.float32,
                        is_pure=True,
                        pack=1,
                    )
                else:  # the interpreter has no inline asm
                    acc = acc + step
            else:
                acc = tl.dot(a, b, acc)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(d_ptr + PART * M * N + rm[:, None] * N + rn[None, :], acc.to(OUT), mask=mask)

    @triton.jit(do_not_specialize=["total", "PARTS"])
    def merge_kernel(ws_ptr, d_ptr, total, PARTS, BLOCK: tl.constexpr, OUT: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < total
        s = tl.zeros((BLOCK,), dtype=tl.float32)
        for p in range(0, PARTS):
            s = s + tl.load(ws_ptr + p * total + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(d_ptr + offs, s.to(OUT), mask=mask)

    @triton.jit(do_not_specialize=["M", "N", "K"])
    def fma_kernel(a_ptr, bt_ptr, d_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, LANES: tl.constexpr):
        """The scalar path: each output a chain of fp32 fmas from +0 over K in order (LANES=1), or
        two chains over the even and odd k, summed (0 + lane 0) + lane 1 (LANES=2)."""
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        acc0 = tl.zeros((BM, BN), dtype=tl.float32)
        acc1 = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, LANES):
            a0 = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0).to(tl.float32)
            b0 = tl.load(bt_ptr + rn * K + k, mask=rn < N, other=0.0).to(tl.float32)
            acc0 = tl.fma(a0[:, None], b0[None, :], acc0)
            if LANES == 2:
                a1 = tl.load(a_ptr + rm * K + k + 1, mask=(rm < M) & (k + 1 < K), other=0.0).to(tl.float32)
                b1 = tl.load(bt_ptr + rn * K + k + 1, mask=(rn < N) & (k + 1 < K), other=0.0).to(tl.float32)
                acc1 = tl.fma(a1[:, None], b1[None, :], acc1)
        if LANES == 2:
            acc0 = (tl.zeros((BM, BN), dtype=tl.float32) + acc0) + acc1
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(d_ptr + rm[:, None] * N + rn[None, :], acc0, mask=mask)

    return {"block": block_kernel, "gemm": gemm_kernel, "merge": merge_kernel, "fma": fma_kernel}


# -- driver ------------------------------------------------------------------------------------


def environment(gpu: bool) -> dict[str, Any]:
    try:
        from fixbits.env import fingerprint

        fp = fingerprint()
        env = dataclasses.asdict(fp) if dataclasses.is_dataclass(fp) else dict(fp)
    except Exception as exc:  # the harness helper's module may be missing or fail: keep going
        env = {"fingerprint_error": f"{type(exc).__name__}: {exc}"}
        if gpu:
            import torch
            import triton

            env.update(
                torch=torch.__version__,
                triton=triton.__version__,
                gpu_name=torch.cuda.get_device_name(0),
                cuda_runtime=torch.version.cuda,
            )
        env["numpy"] = np.__version__
    return {k: v for k, v in env.items() if v is not None}


def compile_check() -> int:
    """CPU: compile every kernel variant for sm_90 ahead of time and show that each tl.dot became
    wgmma, that per-MMA dots start from a zero constant with the add kept apart (add.rn.f32),
    and that fp8 runs with unbounded imprecise accumulation (Triton's Hopper default)."""
    import re

    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ks = _make_kernels(triton, tl)
    target = GPUTarget("cuda", 90, 32)
    ptr = {"fp16": "*fp16", "bf16": "*bf16", "fp8_e4m3": "*fp8e4nv", "fp8_e5m2": "*fp8e5"}
    bad = 0
    for dtype, ik in IK.items():
        for has_acc in (False, True):
            sig = {"a_ptr": ptr[dtype], "bt_ptr": ptr[dtype], "c_ptr": "*fp32", "d_ptr": "*fp32", "N": "i32"}
            sig.update(K="constexpr", BM="constexpr", BN="constexpr", HAS_ACC="constexpr")
            src = ASTSource(
                fn=ks["block"], signature=sig, constexprs={"K": ik, "BM": 64, "BN": 64, "HAS_ACC": has_acc}
            )
            ptx = triton.compile(src, target=target, options={"num_warps": 4}).asm["ptx"]
            insts = sorted(set(re.findall(r"wgmma\.mma_async[.\w]*", ptx)))
            bad += not insts
            print(f"block {dtype:9s} acc={has_acc!s:5s} {insts}")
        for per_mma, bk in ((False, 64), (True, ik), (True, 64)):
            sig = {"a_ptr": ptr[dtype], "bt_ptr": ptr[dtype], "d_ptr": "*fp32"}
            sig.update({k: "i32" for k in ("M", "N", "K", "K0", "K1", "PART")})
            sig.update({k: "constexpr" for k in ("BM", "BN", "BK", "PER_MMA", "OUT", "ASM_ADD")})
            const = {"BM": 64, "BN": 64, "BK": bk, "PER_MMA": per_mma, "OUT": tl.float32, "ASM_ADD": per_mma}
            k = triton.compile(
                ASTSource(fn=ks["gemm"], signature=sig, constexprs=const),
                target=target,
                options={"num_warps": 4},
            )
            ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
            n_wgmma = len(re.findall(r"wgmma\.mma_async", ptx))
            from_zero = bool(re.search(r"warp_group_dot %\w+, %\w+, %cst", ttgir))
            imprecise = re.findall(r"maxNumImpreciseAcc = (\d+)", ttgir)
            ok = n_wgmma > 0 and from_zero == per_mma and (("add.rn.f32" in ptx) == per_mma)
            bad += not ok
            print(
                f"gemm  {dtype:9s} {'per_mma' if per_mma else 'single ':7s} BK={bk:<3d} wgmma x{n_wgmma} "
                f"dot-from-zero={from_zero} add.rn.f32={'add.rn.f32' in ptx} imprecise={imprecise[:1]} {'ok' if ok else 'UNEXPECTED'}"
            )
    for dtype in ("fp16", "bf16"):
        sig = {"a_ptr": ptr[dtype], "bt_ptr": ptr[dtype], "c_ptr": "*fp32", "d_ptr": "*fp32", "N": "i32"}
        sig.update(K="constexpr", BM="constexpr", BN="constexpr", HAS_ACC="constexpr")
        src = ASTSource(
            fn=ks["block"], signature=sig, constexprs={"K": 16, "BM": 16, "BN": 64, "HAS_ACC": True}
        )
        ptx = triton.compile(src, target=target, options={"num_warps": 1}).asm["ptx"]
        insts = sorted(set(re.findall(r"mma\.sync\.aligned\.[.\w]*", ptx)))
        bad += not insts or "wgmma" in ptx
        print(f"block {dtype:9s} 16x64 1 warp {insts}")
    for dtype in ("fp16", "bf16"):
        for lanes in (1, 2):
            sig = {
                "a_ptr": ptr[dtype],
                "bt_ptr": ptr[dtype],
                "d_ptr": "*fp32",
                "M": "i32",
                "N": "i32",
                "K": "i32",
            }
            sig.update(BM="constexpr", BN="constexpr", LANES="constexpr")
            src = ASTSource(fn=ks["fma"], signature=sig, constexprs={"BM": 32, "BN": 32, "LANES": lanes})
            ptx = triton.compile(src, target=target, options={"num_warps": 4}).asm["ptx"]
            n_fma = len(re.findall(r"fma\.rn\.f32", ptx))
            ok = n_fma > 0 and "wgmma" not in ptx and "mma.sync" not in ptx
            bad += not ok
            print(f"fma   {dtype:9s} lanes={lanes} fma.rn.f32 x{n_fma} {'ok' if ok else 'UNEXPECTED'}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument(
        "--budget-s", type=float, default=170.0, help="stop starting new cases after this many seconds"
    )
    p.add_argument("--quick", action="store_true", help="a few cases only (smoke test)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: the 'GPU' output is the emulator's (checks the plumbing)",
    )
    mode.add_argument(
        "--interpret",
        action="store_true",
        help="no GPU: run the kernels under TRITON_INTERPRET=1 (shapes/masks only)",
    )
    mode.add_argument(
        "--compile-check",
        action="store_true",
        help="no GPU: compile the kernels for sm_90 and check the wgmma / per-MMA structure",
    )
    p.add_argument(
        "--only", default="", help="comma-separated substrings; run only cases whose id contains one"
    )
    p.add_argument(
        "--set",
        choices=("all", "first", "second"),
        default="all",
        help="first: the cases of the first capture (seeds < 5000); second: the ones added after it",
    )
    args = p.parse_args(argv)
    if args.compile_check:
        return compile_check()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    runner: GpuRunner | None = None
    source = "emulator (dry run)"
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import
        runner = GpuRunner("cpu")
        source = "triton interpreter (CPU)"
    elif not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA device: use --dry-run or --interpret on a CPU machine", file=sys.stderr)
            return 2
        runner = GpuRunner("cuda")
        source = f"GPU {torch.cuda.get_device_name(0)}"
    env = environment(gpu=runner is not None and not args.interpret)
    env["capture_source"] = source

    cases = build_cases(args.quick)
    if args.set != "all":
        cases = [c for c in cases if (c.seed < SECOND_SEED) == (args.set == "first")]
    if args.only:
        keys = [s for s in args.only.split(",") if s]
        cases = [c for c in cases if any(s in c.id for s in keys)]
    records: dict[str, list[GoldenRecord]] = {}
    summary: list[dict[str, Any]] = []
    skipped = 0
    for c in cases:
        if time.perf_counter() - t_start > args.budget_s:
            skipped += 1
            continue
        row: dict[str, Any] = {"id": c.id, "compared": 0, "matched": 0, "status": "error"}
        try:
            desc = c.desc()
            a, b, acc = inputs_of(c)
            seed_side = c.seed + 3 if c.epilogue else None
            side = side_inputs_for(c.m, c.n, c.out_dtype, seed_side) if seed_side is not None else {}
            want = emulate(desc, a, b, acc=acc, **side)
            got = want if runner is None else runner.run(c, a, b, acc, side)
            if got.shape != want.shape or got.dtype != want.dtype:
                raise RuntimeError(f"output {got.dtype}{got.shape} != expected {want.dtype}{want.shape}")
            same = formats.bits(got) == formats.bits(want)
            status = "match" if same.all() else ("MISMATCH" if c.exact else "measured")
            row.update(compared=int(same.size), matched=int(same.sum()), status=status)
            if not same.all():
                i, j = (int(v) for v in np.argwhere(~same)[0])
                row["first"] = {
                    "index": [i, j],
                    "gpu": f"0x{int(formats.bits(got)[i, j]):x}",
                    "emulator": f"0x{int(formats.bits(want)[i, j]):x}",
                    "max_ulps": int(formats.ulp_distance(got, want).max()),
                }
                # classes of disagreement, to point at the part of the model that is off
                g32, w32 = got.astype(np.float32), want.astype(np.float32)
                diff = ~same
                tiny = np.float32(np.finfo(np.float32).tiny)
                row["diff_classes"] = {
                    "zero_sign": int((diff & (g32 == 0) & (w32 == 0)).sum()),
                    "subnormal_or_zero": int((diff & ((np.abs(g32) < tiny) | (np.abs(w32) < tiny))).sum()),
                    "one_ulp": int((diff & (formats.ulp_distance(got, want) == 1)).sum()),
                    "nan_or_inf": int((diff & ~(np.isfinite(g32) & np.isfinite(w32))).sum()),
                    "gpu_larger_magnitude": int((diff & (np.abs(g32) > np.abs(w32))).sum()),
                }
            # a plumbing check that does not depend on the arithmetic model: the error against the
            # exact float64 product relative to sum |a||b| (+|acc|) must be small
            row["max_rel_err"] = None if c.epilogue else _max_rel_err(got, a, b, acc)
            nonzero = int(np.count_nonzero(got.astype(np.float32)))
            row["nonzero"] = nonzero
            rec = GoldenRecord(
                id=c.id,
                suite=SUITE,
                case=c.case,
                shape=(c.m, c.n, c.k),
                in_dtype=c.dtype,
                out_dtype=c.out_dtype,
                input_kind=c.kind,
                seed_a=c.seed,
                seed_b=c.seed + 1,
                seed_acc=c.seed + 2 if c.has_acc else None,
                seed_side=seed_side,
                descriptor=desc.to_dict(),
                desc_hash=desc.short_hash,
                sha256=sha256_of(got),
                elements=int(got.size),
                env=env,
                output_b64z=pack_output(got)
                if (not same.all() and got.size <= INLINE_MISMATCH_LIMIT)
                else None,
                note=f"{c.variant} kernel, BLOCK_K={c.bk}"
                + (f", SPAN={c.span}" if c.span else "")
                + (", epilogue as eager PyTorch ops" if c.epilogue else "")
                + f"; source: {source}",
            )
            # transcendental epilogues are measurements (CUDA's ex2.approx is not modelled): kept
            # apart from golden_*.yaml, which CI replays and requires bit-exact
            # a case the emulator owes exact bits but missed goes to mismatch_*.yaml (GPU bytes
            # inlined) until the emulator is fixed: copying golden_*.yaml never turns CI red
            prefix = "measure" if not c.exact else ("golden" if same.all() else "mismatch")
            group = "epilogue" if c.epilogue else c.case
            # the second capture's cases get files of their own, so copying a run's files into
            # matrices/golden/ never replaces records of the other set
            suffix = "" if c.seed < SECOND_SEED else "_2"
            records.setdefault(f"{prefix}_{group}_{c.dtype}{suffix}.yaml", []).append(rec)
        except Exception as exc:  # report the crashed case, keep going
            row["error"] = f"{type(exc).__name__}: {exc}"
            row["trace"] = traceback.format_exc(limit=3)
        summary.append(row)

    for name, recs in records.items():
        save_file(out / name, recs)
    import yaml

    totals = {
        "source": source,
        "cases": len(summary),
        "skipped_for_budget": skipped,
        "cases_matched": sum(r["status"] == "match" for r in summary),
        "cases_mismatched": sum(r["status"] == "MISMATCH" for r in summary),
        "cases_measured_inexact": sum(r["status"] == "measured" for r in summary),
        "cases_crashed": sum(r["status"] == "error" for r in summary),
        "elements_compared": sum(r["compared"] for r in summary),
        "elements_matched": sum(r["matched"] for r in summary),
        "wall_s": round(time.perf_counter() - t_start, 1),
        "inputs_stream_digest": stream_digest()[:16],  # must equal the unit tests' pinned value
    }
    (out / "summary.yaml").write_text(
        yaml.safe_dump({"totals": totals, "cases": summary}, sort_keys=False, width=140)
    )

    # summary table last: one line per (variant, dtype), then totals
    groups: dict[tuple[str, str], list[int]] = {}
    for r in summary:
        variant = "per_mma" if r["id"].startswith("per_mma") else r["id"].split("_")[0]
        variant = "epilogue" if "_ep_" in r["id"] else variant
        key = (variant, _dtype_of(r["id"]))
        g = groups.setdefault(key, [0, 0, 0, 0, 0])
        g[0] += 1
        g[1] += r["status"] == "match"
        g[2] += r["status"] == "error"
        g[3] += r["compared"]
        g[4] += r["matched"]
    for r in summary:
        if r["status"] != "match":
            print(f"{r['status']:8s} {r['id']}  {r.get('first', r.get('error', ''))}")
    print(
        f"\n{'variant':10s} {'dtype':9s} {'cases':>5s} {'match':>5s} {'crash':>5s} {'elements':>10s} {'matched':>10s}"
    )
    for (variant, dtype), g in sorted(groups.items()):
        print(f"{variant:10s} {dtype:9s} {g[0]:5d} {g[1]:5d} {g[2]:5d} {g[3]:10d} {g[4]:10d}")
    print("  ".join(f"{k}={v}" for k, v in totals.items()))
    return 0 if totals["cases_mismatched"] == 0 and totals["cases_crashed"] == 0 else 1


def _max_rel_err(got: np.ndarray, a: np.ndarray, b: np.ndarray, acc: np.ndarray | None) -> float:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        exact = a64 @ b64 + (0.0 if acc is None else acc.astype(np.float64))
        scale = np.abs(a64) @ np.abs(b64) + (0.0 if acc is None else np.abs(acc.astype(np.float64)))
        rel = np.abs(got.astype(np.float64) - exact) / np.where(scale > 0, scale, 1.0)
    return float(np.nanmax(rel)) if rel.size else 0.0


def _dtype_of(case_id: str) -> str:
    for d in IK:
        if f"_{d}_" in case_id:
            return d
    return "?"


if __name__ == "__main__":
    raise SystemExit(main())
