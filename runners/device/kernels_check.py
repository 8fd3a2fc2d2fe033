"""GPU check of the fixbits Triton GEMM family (issue 4). Run by the lead on the H200:

    PYTHONPATH=<repo> python3 runners/device/kernels_check.py --out DIR [--budget-s 300]

Sections (--sections, in this order by default):
(c) planted defects (split-K partials merged backwards; residue turn moved) must be caught;
(b) the descriptors FINDINGS.md measured (256x4096x4096 one chain; 16x4096x14336 four parts of
    3584) against torch.mm bytes, both B layouts, with timings;
(e) fused epilogues against eager PyTorch on the same GEMM output (isolates each op's formula);
(a) every config of each family's equivalence space returns the same bytes (ordinary, wide,
    tiny inputs; fp16/bf16/fp8 in; fp32/fp16/bf16 out) and equals the CPU emulator on sampled
    outputs; the small first shape's outputs go to DIR/golden_kernels.yaml (fixbits.golden
    format: copy it to matrices/golden/ and tests/test_golden_replay.py replays it on CPU);
The profile route (fixbits.matmul against cuBLAS on realistic and fuzz shapes, every profiled
dtype pair, 10 draws) is runners/device/matmul_check.py.
Every case is caught on its own: a crash is reported and the rest go on. Summary table last.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
import time
import traceback
import zlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import yaml  # noqa: E402

RESULTS: list[dict] = []
T0 = time.time()
BUDGET = 300.0
DEVICE = "cuda"
SMALL = [False]


def left() -> float:
    return BUDGET - (time.time() - T0)


SECTION_END = [float("inf")]
MISMATCH: list = []
SHARES = {"c": 1.0, "b": 0.2, "e": 0.4, "a": 0.5}  # of the budget left when a section starts


def sec_left() -> float:
    """Seconds left to the current section (its share of what was left when it began)."""
    return min(SECTION_END[0] - time.time(), left() - 5)


OUT_DIR: list[Path] = []


def flush_results() -> None:
    """Rewrite DIR/kernels_check.json: a run cut short still leaves every case recorded so far."""
    if OUT_DIR:
        tmp = OUT_DIR[0] / "kernels_check.json.tmp"
        tmp.write_text(json.dumps(RESULTS, indent=1, default=str))
        tmp.replace(OUT_DIR[0] / "kernels_check.json")


def record(section: str, case: str, status: str, **info) -> None:
    row = {"section": section, "case": case, "status": status, "t_s": round(time.time() - T0, 1), **info}
    RESULTS.append(row)
    flush_results()
    extra = " ".join(f"{k}={v}" for k, v in info.items() if k not in ("trace",))
    print(f"[{section}] {status:5s} {case} {extra}"[:600], flush=True)
    if "trace" in info:
        print(info["trace"][-3000:], flush=True)


def draw(shape, dtype, kind, seed):
    """fixbits.inputs.draw when present; else a local reproducible draw (ordinary/wide/tiny)."""
    try:
        from fixbits.inputs import draw as fdraw
    except ImportError:
        fdraw = None
    if fdraw is not None:
        return fdraw(tuple(shape), dtype, kind, seed)
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if kind == "wide":
        lim = 6 if dtype.startswith("fp8") else 10
        x = x * torch.exp2(torch.randint(-lim, lim + 1, shape, generator=g).float())
    elif kind == "tiny":
        x = x * (2.0**-7 if not dtype.startswith("fp8") else 2.0**-4)
    if dtype.startswith("fp8"):
        x = x.clamp(-448, 448)
    from fixbits.kernels._host import torch_dtype

    return x.to(torch_dtype(dtype))


def as_torch(x, dtype):
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(DEVICE)
    from fixbits.kernels.backend import to_torch

    return to_torch(x, dtype, DEVICE)


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def bits(t):
    import torch

    w = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.contiguous().view(w)


def sha(t) -> str:
    return hashlib.sha256(bits(t).cpu().numpy().tobytes()).hexdigest()


def diff_info(x, y) -> dict:
    bx, by = bits(x), bits(y)
    ne = (bx != by).nonzero()
    if ne.numel() == 0:
        return {"ndiff": 0}
    i = tuple(int(v) for v in ne[0])
    return {
        "ndiff": int(ne.shape[0]),
        "first": i,
        "got": hex(int(bx[i]) & 0xFFFFFFFF),
        "want": hex(int(by[i]) & 0xFFFFFFFF),
        "got_val": float(x[i].float()),
        "want_val": float(y[i].float()),
    }


def emulator_check(desc, a, b, out, rows, cols):
    """Sampled outputs against fixbits.emulate (None when the emulator is absent)."""
    try:
        from fixbits.emulate import emulate
    except ImportError:
        return None
    from fixbits.kernels.backend import to_numpy

    an = to_numpy(a[rows], desc.in_dtype)
    bn = to_numpy(b[:, cols].contiguous(), desc.in_dtype)
    ref = emulate(desc, an, bn)
    got = to_numpy(out[rows][:, cols].contiguous(), desc.out_dtype)
    w = {1: np.uint8, 2: np.uint16, 4: np.uint32}[got.dtype.itemsize]
    bad = np.argwhere(got.view(w) != np.asarray(ref).view(w))
    return {"sampled": int(got.size), "emu_mismatch": int(len(bad)),
            "emu_first": None if not len(bad) else [int(v) for v in bad[0]]}  # fmt: skip


# ----------------------------------------------------------------------------- descriptors
def family_descs():
    from fixbits.desc import GEMMDesc, KCut

    def tc(in_dtype, out_dtype, **kw):
        ik = 32 if in_dtype.startswith("fp8") else 16
        step = 128 if in_dtype.startswith("fp8") else 64
        return GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=ik, in_dtype=in_dtype,
                        out_dtype=out_dtype, k_loop_step=kw.pop("k_loop_step", step), **kw)  # fmt: skip

    def fma(in_dtype, out_dtype, cuts, **kw):
        return GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype=in_dtype,
                        out_dtype=out_dtype, k_cuts=cuts, **kw)  # fmt: skip

    return [
        ("single_pass fp16->fp32", tc("fp16", "fp32")),
        ("single_pass fp16->fp16 residue first", tc("fp16", "fp16", residue="first")),
        ("single_pass bf16->bf16", tc("bf16", "bf16")),
        ("single_pass fp8->fp32", tc("fp8_e4m3", "fp32")),
        ("per_mma fp8 P4->fp16", tc("fp8_e4m3", "fp16", use_fast_accum=False, promotion_interval=4)),
        ("per_mma fp16 P1->fp32", tc("fp16", "fp32", use_fast_accum=False, promotion_interval=1)),
        ("per_mma bf16 P3->fp32 res-first", tc("bf16", "fp32", use_fast_accum=False, promotion_interval=3, residue="first")),
        ("splitk fp16 4 parts->fp32", tc("fp16", "fp32", k_cuts=(KCut("contiguous", count=4),))),
        ("splitk fp16 3 parts granule64 fp16 partials->fp16",
         tc("fp16", "fp16", k_cuts=(KCut("contiguous", count=3, granule=64),), partial_dtype="fp16", merge_dtype="fp16")),
        ("splitk fp16 4 parts butterfly_down->fp32",
         tc("fp16", "fp32", k_cuts=(KCut("contiguous", count=4, merge="butterfly_down"),))),
        ("splitk bf16 2 parts butterfly_down (profile a24 form)->fp32",
         tc("bf16", "fp32", k_cuts=(KCut("contiguous", count=2, merge="butterfly_down"),))),
        ("splitk bf16 span 1000 inner span 256->bf16",
         tc("bf16", "bf16", k_cuts=(KCut("contiguous", span=1000), KCut("contiguous", span=256)))),
        ("splitk_per_mma fp8 P4 2 parts->bf16",
         tc("fp8_e4m3", "bf16", use_fast_accum=False, promotion_interval=4, k_cuts=(KCut("contiguous", count=2),))),
        ("mma k8 fp16 step 32 res-first->fp32", GEMMDesc(arch="sm_90", instruction="mma", instruction_k=8,
         in_dtype="fp16", out_dtype="fp32", k_loop_step=32, residue="first")),
        ("mma k8 bf16 2 parts granule 8->bf16", GEMMDesc(arch="sm_90", instruction="mma", instruction_k=8,
         in_dtype="bf16", out_dtype="bf16", k_loop_step=32, residue="first",
         k_cuts=(KCut("contiguous", count=2, granule=8),))),
        ("scalar_chain fp16->fp32", fma("fp16", "fp32", ())),
        ("gemv_contiguous fp16 4 parts->fp16", fma("fp16", "fp16", (KCut("contiguous", count=4),))),
        ("chained_chunks bf16 8x span 16->fp32", fma("bf16", "fp32", (KCut("contiguous", count=8), KCut("contiguous", span=16)))),
        ("gemv_lane_tree fp16 32 lanes down->fp32", fma("fp16", "fp32", (KCut("strided", count=32, span=8, merge="butterfly_down"),))),
        ("gemvx bf16 32 lanes span 2 down->fp32", fma("bf16", "fp32", (KCut("strided", count=32, span=2, merge="butterfly_down"),))),
        ("gemv_lane_tree fp16 2 parts x 8 lanes up->fp16",
         fma("fp16", "fp16", (KCut("contiguous", count=2), KCut("strided", count=8, span=4, merge="butterfly_up")))),
    ]  # fmt: skip


def run_desc(desc, a, b, cfg=None, **kw):
    from fixbits.kernels.matmul import matmul

    return matmul(a, b, desc=desc, config=cfg, **kw)


def scalar_call(desc, a, b, knob):
    from fixbits.kernels._scalar import scalar_nest_matmul
    from fixbits.kernels.gemv_workspace import gemv_workspace_matmul

    if knob.get("workspace"):
        return gemv_workspace_matmul(
            a, b, desc, tile=(knob["BLOCK_M"], knob["BLOCK_N"]), num_warps=knob["num_warps"]
        )
    return scalar_nest_matmul(
        a, b, desc, tile=(knob["BLOCK_M"], knob["BLOCK_N"]), num_warps=knob["num_warps"]
    )


# ----------------------------------------------------------------------------- (a)
def section_a(out_dir: Path, golden: list) -> None:
    import torch

    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.tuning import equivalence_space

    tc_space = [KernelConfig.from_dict(c) for c in equivalence_space("tensor_core")]
    sc_space = equivalence_space("scalar") + [
        {"BLOCK_M": 1, "BLOCK_N": 32, "num_warps": 4, "workspace": True}
    ]
    # Compiles dominate the GPU time (one per desc x config x specialisation), so the full
    # space runs on the first descriptor and every 3rd config (plus the extremes) on the rest;
    # shapes have K off the k-loop step (a residue turn) and M, N off every tile size. The
    # first shape of each list is small: its outputs become golden records the CPU replays.
    shapes_tc = [(24, 40, 1000), (130, 200, 4136), (8, 200, 1000)]
    # fp8: one shape whose rows are 16-byte aligned, so the TMA configs take the TMA body (the
    # per-MMA one promotes inside Triton's dot); K off the k-loop step and the promotion group
    shapes_fp8 = shapes_tc + [(136, 208, 4160)]
    shapes_sc = [(2, 40, 777), (1, 96, 1000)]
    if SMALL[0]:
        shapes_tc, shapes_sc = [(20, 24, 200)], [(2, 20, 150)]
    # Two passes so a short budget still covers every family: pass 1 runs the small golden
    # shape (ordinary + wide) with three configs per family; pass 2 the larger shapes, all kinds,
    # more configs, until the section's share of the budget is spent.
    plan = []
    few = [tc_space[0], tc_space[len(tc_space) // 2], tc_space[-1]]
    for name, desc in family_descs():
        shapes = shapes_sc if desc.instruction == "fma" else shapes_tc
        for kind in ("ordinary", "wide"):
            plan.append((name, desc, shapes[0], kind, few))
    for di, (name, desc) in enumerate(family_descs()):
        fp8 = desc.in_dtype.startswith("fp8") and not SMALL[0]
        shapes = shapes_sc if desc.instruction == "fma" else shapes_fp8 if fp8 else shapes_tc
        more = (
            tc_space
            if di == 0
            else [c for j, c in enumerate(tc_space) if j % 3 == 0 or j == len(tc_space) - 1]
        )
        for shape in shapes[1:]:
            for kind in ("ordinary", "wide", "tiny"):
                plan.append((name, desc, shape, kind, more))
    if CASES:
        plan = [p for p in plan if any(c in p[0] for c in CASES)]
    for done, (name, desc, (m, n, k), kind, sub_tc) in enumerate(plan):
        scalar = desc.instruction == "fma"
        if sec_left() < 5:
            record("a", f"{len(plan) - done} of {len(plan)} cases", "SKIP", why="section budget spent")
            break
        seed = zlib.crc32(f"{name}|{m}x{n}x{k}|{kind}".encode()) % (2**31)
        case = f"{name} {m}x{n}x{k} {kind} seed={seed}"
        try:
            a = as_torch(draw((m, k), desc.in_dtype, kind, seed), desc.in_dtype)
            b = as_torch(draw((k, n), desc.in_dtype, kind, seed + 1), desc.in_dtype)
            outs, times, fails = {}, {}, {}
            space: list[Any] = sc_space if scalar else sub_tc
            for knob in space:
                label = json.dumps(knob) if scalar else knob.label()
                try:
                    if not scalar and desc.in_dtype.startswith("fp8") and knob.BLOCK_K < 32:
                        continue
                    if scalar and knob.get("workspace") and not desc.k_cuts:
                        continue
                    t = time.time()
                    o = scalar_call(desc, a, b, knob) if scalar else run_desc(desc, a, b, knob)
                    sync()
                    times[label] = round(time.time() - t, 2)
                    outs[label] = o
                except Exception as exc:
                    fails[label] = f"{type(exc).__name__}: {str(exc)[:300]}"
            hashes = {lab: sha(o) for lab, o in outs.items()}
            distinct = sorted(set(hashes.values()))
            first = next(iter(outs.values())) if outs else None
            nz = int((bits(first) != 0).sum()) if first is not None else 0
            info = {"configs": len(outs), "distinct": len(distinct), "failed": len(fails), "nonzero": nz,
                    "compile_s": times}  # fmt: skip
            if len(distinct) > 1:
                ref_lab = next(iter(outs))
                info["diffs"] = {
                    lab: diff_info(o, outs[ref_lab])
                    for lab, o in outs.items()
                    if hashes[lab] != hashes[ref_lab]
                }
            if fails:
                info["fail_msgs"] = fails
            g = torch.Generator().manual_seed(seed)
            rows = torch.randint(0, m, (min(m, 4),), generator=g).unique().tolist()
            cols = torch.randint(0, n, (min(n, 8),), generator=g).unique().tolist()
            if first is not None:
                try:
                    emu = emulator_check(desc, a, b, first, rows, cols)
                except Exception as exc:
                    emu = {"emu_error": f"{type(exc).__name__}: {exc}"[:300]}
                if emu is not None:
                    info.update(emu)
                if (m, n, k) == (shapes_sc if scalar else shapes_tc)[0] and len(distinct) == 1:
                    # the first config's bytes: GPU truth the CPU replays; a record the emulator
                    # disagrees with goes to mismatch_kernels.yaml for diagnosis, not to golden
                    rec = golden_record(name, desc, kind, seed, (m, n, k), first)
                    (MISMATCH if info.get("emu_mismatch", 0) else golden).append(rec)
            ok = len(distinct) == 1 and not fails and nz > 0 and info.get("emu_mismatch", 0) == 0
            record("a", case, "PASS" if ok else "FAIL", **info)
        except Exception:
            record("a", case, "ERROR", trace=traceback.format_exc())


def golden_record(name, desc, kind, seed, shape, out):
    """A fixbits.golden record (dict form) of one GPU output; inputs regenerate from the seeds."""
    from fixbits.kernels.backend import to_numpy

    o = to_numpy(out, desc.out_dtype)
    rec = {
        "id": f"kernels-{desc.short_hash}-{kind}-{shape[0]}x{shape[1]}x{shape[2]}",
        "suite": "reconstruction", "case": "gemm", "shape": list(shape),
        "in_dtype": desc.in_dtype, "out_dtype": desc.out_dtype, "input_kind": kind,
        "seed_a": seed, "seed_b": seed + 1, "descriptor": desc.to_dict(), "desc_hash": desc.short_hash,
        "sha256": hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest(), "elements": int(o.size),
        "note": f"fixbits Triton kernel '{name}' on the GPU (runners/device/kernels_check.py)",
    }  # fmt: skip
    try:
        from fixbits import golden

        rec["sha256"] = golden.sha256_of(o)
        rec["output_b64z"] = golden.pack_output(o)
        try:
            from fixbits.env import fingerprint

            fp = fingerprint()
            rec["env"] = fp.to_dict() if hasattr(fp, "to_dict") else {}
        except Exception:
            pass
        golden.record_from_dict(rec, where="kernels_check")  # validates the format
    except Exception as exc:
        rec["note"] += f" (fixbits.golden unavailable: {exc})"
    return rec


def _has_inputs() -> bool:
    try:
        import fixbits.inputs  # noqa: F401

        return True
    except ImportError:
        return False


# ----------------------------------------------------------------------------- (b)
def section_b(out_dir: Path) -> None:

    from fixbits.desc import GEMMDesc, KCut
    from fixbits.kernels.matmul import cublas_matmul, matmul

    def cublas(a, b, out_dtype):
        return cublas_matmul(a, b, out_dtype)

    # b1: FINDINGS.md facts
    single = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    facts = [
        ("256x4096x4096 fp16 single chain", 256, 4096, 4096, "fp16", single),
        ("256x4096x4096 bf16 single chain", 256, 4096, 4096, "bf16", single.replace(in_dtype="bf16")),
        ("16x4096x14336 fp16 4x3584 chain", 16, 4096, 14336, "fp16",
         single.replace(k_cuts=(KCut("contiguous", count=4),))),
    ]  # fmt: skip
    if SMALL[0]:
        facts = [(f"{nm} (small)", 16, 32, 300, dt, d) for nm, _, _, _, dt, d in facts]
    for name, m, n, k, dt, desc in facts:
        for kind in ("ordinary", "wide"):
            for layout in ("b row-major", "b = W.t()"):
                seed = 1234 + m + k
                try:
                    a = as_torch(draw((m, k), dt, kind, seed), dt)
                    if layout == "b row-major":
                        b = as_torch(draw((k, n), dt, kind, seed + 1), dt)
                    else:
                        b = as_torch(draw((n, k), dt, kind, seed + 1), dt).t()
                    ours = matmul(a, b, desc=desc)
                    ref = cublas(a, b, "fp32")
                    d = diff_info(ours, ref)
                    if DEVICE == "cuda" and kind == "ordinary":
                        from triton.testing import do_bench

                        d["t_ours_ms"] = round(
                            do_bench(functools.partial(matmul, a, b, desc=desc), rep=20), 4
                        )
                        d["t_cublas_ms"] = round(do_bench(functools.partial(cublas, a, b, "fp32"), rep=20), 4)
                    record(
                        "b", f"{name} {kind} {layout} seed={seed}", "PASS" if d["ndiff"] == 0 else "FAIL", **d
                    )
                except Exception:
                    record("b", f"{name} {kind} {layout}", "ERROR", trace=traceback.format_exc())


def section_e(out_dir: Path) -> None:
    """Fused epilogues against eager PyTorch on our own GEMM output (isolates each op's formula),
    ordinary and wide inputs; one summary row per epilogue says where it matches."""
    import torch

    from fixbits.desc import EpilogueOp, GEMMDesc
    from fixbits.kernels._host import KernelConfig, torch_dtype
    from fixbits.kernels.matmul import eager_epilogue, matmul
    from fixbits.kernels.single_pass import tile_matmul

    single = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    ep_cfg = KernelConfig(64, 64, 64, 8, 4, 3)
    singles = [
        ("bias",),
        ("relu",),
        ("silu_gate",),
        ("gelu",),
        ("gelu_tanh",),
        ("residual",),
        (("scale", 0.125),),
    ]
    summary: dict[str, dict[str, list[int]]] = {}
    m, n, k = (192, 320, 512) if not SMALL[0] else (16, 32, 64)
    for dt, odt in (("fp16", "fp16"), ("bf16", "bf16"), ("fp16", "fp32")):
        combos = (
            [("bias", "gelu_tanh"), ("bias", "relu", ("scale", 0.3), "residual")] if odt == "fp16" else []
        )
        base = single.replace(in_dtype=dt, out_dtype=odt)
        for kind in ("ordinary", "wide"):
            seed = zlib.crc32(f"e|{dt}|{odt}|{kind}".encode()) % (2**31)
            a = as_torch(draw((m, k), dt, kind, seed), dt)
            b = as_torch(draw((k, n), dt, kind, seed + 1), dt)
            gen = torch.Generator(device="cpu").manual_seed(seed + 2)
            spread = 64.0 if kind == "wide" else 4.0
            bias = (torch.randn(n, generator=gen) * spread).to(torch_dtype(odt)).to(DEVICE)
            resid = (torch.randn(m, n, generator=gen) * spread).to(torch_dtype(odt)).to(DEVICE)
            gate = torch.randn(m, n, generator=gen).to(torch_dtype(odt)).to(DEVICE)
            plain = matmul(a, b, desc=base, config=ep_cfg)
            for ops in singles + combos:
                name = "+".join(o if isinstance(o, str) else f"{o[0]}({o[1]})" for o in ops)
                label = f"epilogue {name} {dt}->{odt} {kind}"
                if sec_left() < 5:
                    record("e", label, "SKIP", why="budget")
                    continue
                if DEVICE == "cpu" and any(o in ("silu_gate", "gelu", "gelu_tanh") for o in ops):
                    record(
                        "e", label, "SKIP", why="Triton's interpreter runs no libdevice/inline PTX (dry run)"
                    )
                    continue
                eops = tuple(
                    EpilogueOp(o) if isinstance(o, str) else EpilogueOp(str(o[0]), float(o[1])) for o in ops
                )
                d_ep = base.replace(epilogue=eops)
                cell = summary.setdefault(name, {}).setdefault(kind, [0, 0])
                try:
                    want = eager_epilogue(plain, d_ep, bias, resid, gate)
                    got = tile_matmul(a, b, d_ep, bias=bias, residual=resid, gate=gate, config=ep_cfg)
                    d = diff_info(got, want)
                    cell[1] += 1
                    cell[0] += int(d["ndiff"] == 0)
                    record("e", label, "PASS" if d["ndiff"] == 0 else "FAIL", **d)
                except Exception:
                    record("e", label, "ERROR", trace=traceback.format_exc())
    for name, kinds in summary.items():
        cells = {kind: f"{c[0]}/{c[1]}" for kind, c in kinds.items()}
        if not any(c[1] for c in kinds.values()):
            continue
        ok = all(c[0] == c[1] and c[1] for c in kinds.values())
        record(
            "e",
            f"epilogue summary {name} (dtype pairs matching eager PyTorch)",
            "PASS" if ok else "FAIL",
            **cells,
        )


# ----------------------------------------------------------------------------- (c)
def section_c() -> None:
    from fixbits.desc import GEMMDesc, KCut
    from fixbits.kernels.splitk import splitk_core

    base = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    m, n, k = (64, 128, 4096 + 40) if not SMALL[0] else (16, 16, 300)
    for kind in ("ordinary", "wide"):
        seed = 4242
        a = as_torch(draw((m, k), "fp16", kind, seed), "fp16")
        b = as_torch(draw((k, n), "fp16", kind, seed + 1), "fp16")
        try:
            d = base.replace(k_cuts=(KCut("contiguous", count=4),))
            good = splitk_core(a, b, d)
            bad = splitk_core(a, b, d, reverse_merge=True)
            info = diff_info(bad, good)
            record("c", f"planted: split-K merged backwards {kind}", "PASS" if info["ndiff"] > 0 else "FAIL",
                   caught=info["ndiff"] > 0, **info)  # fmt: skip
        except Exception:
            record("c", "planted reverse merge", "ERROR", trace=traceback.format_exc())
        try:
            from fixbits.kernels.matmul import matmul

            good = matmul(a, b, desc=base)
            bad = matmul(a, b, desc=base.replace(residue="first"))
            info = diff_info(bad, good)
            record("c", f"planted: residue turn moved {kind}", "PASS" if info["ndiff"] > 0 else "FAIL",
                   caught=info["ndiff"] > 0, **info)  # fmt: skip
        except Exception:
            record("c", "planted residue moved", "ERROR", trace=traceback.format_exc())


CASES: list[str] = []  # --cases: section a's family-name filter (empty: all)


def main() -> int:
    global BUDGET, DEVICE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument(
        "--sections",
        default="cbea",
        help="c planted, b FINDINGS facts, a equivalence, e epilogues (the profile route: matmul_check.py)",
    )
    ap.add_argument(
        "--device", default="cuda", help="cpu: a dry run under TRITON_INTERPRET=1 (no bits checked)"
    )
    ap.add_argument("--small", action="store_true", help="tiny shapes (dry runs)")
    ap.add_argument(
        "--cases",
        default="",
        help="section a: only the families whose name contains one of these (comma list)",
    )
    args = ap.parse_args()
    CASES.extend(c.strip() for c in args.cases.split(",") if c.strip())
    BUDGET = args.budget_s
    DEVICE = args.device
    if args.small:
        SMALL[0] = True
    if os.environ.get("TRITON_INTERPRET") == "1":
        from fixbits.kernels._interp import patch

        patch()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    OUT_DIR.append(out)
    import torch

    if DEVICE == "cuda":
        print(
            f"torch {torch.__version__} cuda {torch.version.cuda} {torch.cuda.get_device_name()}", flush=True
        )
    import triton

    print(f"triton {triton.__version__}", flush=True)
    golden: list = []
    for s in args.sections:
        t = time.time()
        share = 1.0 if s == args.sections[-1] else SHARES.get(s, 1.0)  # the last section gets what is left
        SECTION_END[0] = t + share * max(0.0, left())
        try:
            {
                "a": lambda: section_a(out, golden),
                "b": lambda: section_b(out),
                "c": section_c,
                "e": lambda: section_e(out),
            }[s]()
        except Exception:
            record(s, "section", "ERROR", trace=traceback.format_exc())
        print(f"--- section {s} took {time.time() - t:.1f}s, {left():.0f}s left", flush=True)
    flush_results()
    try:
        from fixbits import golden as fg

        fg.save_file(
            out / "golden_kernels.yaml", [fg.record_from_dict(r, where="kernels_check") for r in golden]
        )
    except Exception as exc:
        print(f"golden: fixbits.golden.save_file failed ({exc}); writing plain YAML")
        (out / "golden_kernels.yaml").write_text(yaml.safe_dump(golden, sort_keys=False))
    print(f"golden records written: {len(golden)}")
    if MISMATCH:
        (out / "mismatch_kernels.yaml").write_text(yaml.safe_dump(MISMATCH, sort_keys=False))
        print(f"emulator-mismatch records (not golden): {len(MISMATCH)} -> mismatch_kernels.yaml")
    print("\n=== summary ===")
    from collections import Counter

    for sec in sorted({r["section"] for r in RESULTS}):
        c = Counter(r["status"] for r in RESULTS if r["section"] == sec)
        print(f"section {sec}: " + ", ".join(f"{k}={v}" for k, v in sorted(c.items())))
    for r in RESULTS:
        if r["status"] in ("FAIL", "ERROR"):
            print(f"  {r['status']} [{r['section']}] {r['case']}")
    print(f"total {time.time() - T0:.0f}s")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TRITON_PRINT_AUTOTUNING", "0")
    sys.exit(main())
