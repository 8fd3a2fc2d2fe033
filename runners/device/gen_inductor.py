"""Generate TorchInductor reduction kernels on the GPU, save their Triton source, and run each
compiled model free and with the fixbits global switch (pinned_reductions).

    PYTHONPATH=<repo> python3 runners/device/gen_inductor.py --out DIR [--budget-s 240]

Writes DIR/inductor/<case>__<kernel>.py (verbatim kernel source), DIR/inductor_cases.yaml (which
reductions the rewrite pinned or left in each kernel; free vs pinned digests; CPU-model equality
where the case is a plain sum) and prints a summary table last. Inductor compiles in-process
here (compile_threads=1) with its caches off, so the switch sees every compile.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

_KERNEL_RE = re.compile(r"async_compile\.triton\(\s*'(\w+)'\s*,\s*'''(.*?)'''", re.S)


def _cases():
    import torch
    import torch.nn.functional as F

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    g = torch.Generator(device="cuda").manual_seed(0)

    def r(*s, dt=torch.float32):
        return torch.randn(*s, device="cuda", generator=g, dtype=torch.float32).to(dt)

    return [
        ("sum_last_fp32", lambda x: x.sum(-1), (r(8192, 1000),), "sum_last"),
        ("sum_last_long_fp32", lambda x: x.sum(-1), (r(512, 16384),), "sum_last"),
        ("sum_last_fp16", lambda x: x.sum(-1, dtype=torch.float32), (r(8192, 1000, dt=torch.float16),), "sum_last"),
        ("col_sum_fp32", lambda x: x.sum(0), (r(4096, 512),), "sum_first"),
        ("mean_bf16", lambda x: x.float().mean(-1), (r(4096, 2048, dt=torch.bfloat16),), None),
        ("softmax_fp32", lambda x: torch.softmax(x, -1), (r(4096, 1000),), None),
        ("softmax_fp16", lambda x: torch.softmax(x, -1), (r(4096, 1000, dt=torch.float16),), None),
        ("log_softmax_fp32", lambda x: torch.log_softmax(x, -1), (r(4096, 1000),), None),
        ("layer_norm_fp32", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (r(4096, 1536), r(1536), r(1536)),
         None),
        ("rms_norm_bf16", rms, (r(4096, 4096, dt=torch.bfloat16), r(4096, dt=torch.bfloat16)), None),
    ]


def _digest(t) -> str:
    import torch

    t = t.detach().contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return hashlib.sha256(t.cpu().numpy().tobytes()).hexdigest()


def _compile_run(fn, args, pinned: bool):
    import torch
    from torch._inductor.utils import run_and_get_code

    from fixbits.enforce import pinned_reductions

    torch._dynamo.reset()
    cf = torch.compile(fn, dynamic=False)
    with pinned_reductions(pinned):
        out, codes = run_and_get_code(cf, *args)
    torch.cuda.synchronize()
    return out, "\n".join(codes)


def _report_for(path: Path):
    """Load a saved kernel file and ask the rewrite what it would pin."""
    import importlib.util

    from triton.runtime.jit import JITFunction

    from fixbits.enforce import report

    spec = importlib.util.spec_from_file_location(f"fixbits_gen_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = []
    for name, obj in vars(mod).items():
        fn = obj
        while fn is not None and not isinstance(fn, JITFunction):
            fn = getattr(fn, "fn", None)
        if isinstance(fn, JITFunction) and name.startswith("triton_"):
            rep = report(fn)
            out.extend({"kernel": name, "call": c.call, "line": c.line, "action": c.action, "reason": c.reason}
                       for c in rep.calls)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--budget-s", type=float, default=240.0)
    args = ap.parse_args()
    t0 = time.time()
    out_dir = args.out / "inductor"
    out_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(args.out / "inductor_cache"))
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

    import numpy as np
    import torch
    import torch._inductor.config as icfg
    import yaml

    icfg.compile_threads = 1
    icfg.force_disable_caches = True
    from fixbits.enforce import model

    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    rows = []
    for case, fn, a, kind in _cases():
        if time.time() - t0 > args.budget_s:
            print(f"budget reached before {case}", flush=True)
            break
        row: dict = {"case": case}
        try:
            free, code = _compile_run(fn, a, False)
            kernels = _KERNEL_RE.findall(code)
            (out_dir / f"{case}__wrapper.py").write_text(code)
            row["inputs"] = [{"shape": list(t.shape), "dtype": str(t.dtype)} for t in a]
            row["launches"] = re.findall(r"(triton_\w+)\.run\(([^\n]*)\)", code)
            row["kernels"] = []
            for kname, src in kernels:
                p = out_dir / f"{case}__{kname}.py"
                p.write_text(src)
                row["kernels"].append(kname)
            pinned, _ = _compile_run(fn, a, True)
            row["free_sha"] = _digest(free)
            row["pinned_sha"] = _digest(pinned)
            row["pinned_differs_from_free"] = row["free_sha"] != row["pinned_sha"]
            if kind is not None:
                x = a[0].float().cpu().numpy()
                want = model.tree_sum(x, axis=1 if kind == "sum_last" else 0)
                got = pinned.float().cpu().numpy()
                row["model_equal"] = bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))
                row["model_mismatches"] = int(np.sum(got.view(np.uint32) != want.view(np.uint32)))
            reps = []
            for kname in row["kernels"]:
                try:
                    reps.extend(_report_for(out_dir / f"{case}__{kname}.py"))
                except Exception as e:
                    reps.append({"kernel": kname, "error": f"{type(e).__name__}: {e}"})
            row["rewrite"] = reps
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["trace"] = traceback.format_exc()[-2500:]
            print(f"{case}: ERROR {row['error']}\n{row['trace']}", flush=True)
        rows.append(row)
        print(f"{case}: kernels={row.get('kernels')} pinned!=free={row.get('pinned_differs_from_free')} "
              f"model={row.get('model_equal')} rewrite={[(r.get('kernel'), r.get('call'), r.get('action')) for r in row.get('rewrite', [])]}",
              flush=True)
    (args.out / "inductor_cases.yaml").write_text(yaml.safe_dump(rows, sort_keys=False))
    print("\n=== summary ===")
    for r in rows:
        print(f"{r['case']:22s} kernels={len(r.get('kernels', []))} "
              f"pinned={sum(1 for x in r.get('rewrite', []) if x.get('action') == 'pinned')} "
              f"left={sum(1 for x in r.get('rewrite', []) if x.get('action') == 'left')} "
              f"differs={r.get('pinned_differs_from_free')} model={r.get('model_equal', '-')} "
              f"{'ERROR ' + r['error'] if 'error' in r else ''}")
    print(f"total {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
