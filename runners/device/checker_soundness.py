"""GPU soundness gate of the static checker (paper §7.2, Table 3), for the lead to run on the H200.

    PYTHONPATH=<repo> python3 runners/device/checker_soundness.py --out DIR [--budget-s 300] [--aot STORE]

For every configuration in matrices/checker/soundness.yaml: launch it (worker processes share the
GPU), take the kernels that actually ran, compute the checker's signature, and hash the output
bytes on several input draws (ordinary and wide exponents, two seeds). Per (kernel, dtype): true
classes by bytes (with their member configs), checker classes by signature, every checker class
whose members' bytes differ (false equal; must be none), over-split factor. Writes
DIR/checker_soundness_cases.jsonl as it goes (one line per config, flushed), then
DIR/checker_soundness.json and .csv, and prints the table last. A case that fails is reported
and the rest go on.

Compiling is what costs device time, so the configs can be compiled here on CPU first:

    python3 runners/device/checker_soundness.py --out /tmp/x --build-aot .aot/store --ptx-dir .aot/ptx
    tar cJf .aot/store.tar.xz -C .aot store

(resumable; the store keeps only cubin + metadata, keyed by source hash, target and options, plus
each kernel's checker signature). On the device, ``--aot .aot/store.tar.xz`` unpacks it and
serves the JIT's compile requests from it; a miss compiles as before, so a stale store only
costs time. ``--resign`` re-signs the store from the kept PTX after a checker change; a store
whose signatures another version of the checker made is refused until it is re-signed. The
version is a digest of the modules ``signature()`` imports (``aot_build.signing_sources``), so
an edit to the walk after the last re-sign makes the store stale; check the archive here before
the device call carries it (rc 2 when stale):

    python3 runners/device/checker_soundness.py --out /tmp/x --aot .aot/store.tar.xz --preflight
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
import traceback
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_STATE: dict[str, Any] = {}
CHUNK = 6  # configs of one group a worker takes at a time


def _init_worker(aot: str = "", ptx_dir: str = "") -> None:
    import torch
    from triton.compiler.compiler import CompiledKernel

    launched: list[Any] = []
    orig = CompiledKernel.launch_metadata

    def launch_metadata(self: Any, grid: Any, stream: Any, *args: Any) -> Any:
        launched.append(self)
        return orig(self, grid, stream, *args)

    CompiledKernel.launch_metadata = launch_metadata  # type: ignore[method-assign]
    _STATE["launched"] = launched
    _STATE["inputs"] = {}
    _STATE["sigs"] = {}
    _STATE["poisoned"] = None
    _STATE["aot_stats"] = {}
    _STATE["aot_sigs"] = {}
    _STATE["ptx_dir"] = ptx_dir
    if aot:
        from pathlib import Path

        from fixbits.checker import aot_store

        aot_store.install(Path(aot), _STATE["aot_stats"])
        man = Path(aot) / "kernels.jsonl"
        if man.exists():
            for line in man.read_text().splitlines():
                r = json.loads(line)
                _STATE["aot_sigs"][r["key"]] = r
    torch.cuda.init()


def _inputs(mod: Any, name: str, shape: dict[str, int], dtype: str, kind: str, seed: int) -> dict[str, Any]:
    from fixbits.corpus.common import to_device

    key = (name, dtype, kind, seed)
    cache = _STATE["inputs"]
    if key not in cache:
        if len(cache) > 24:
            cache.clear()
        host = mod.make_inputs(shape, dtype, kind, seed)
        cache[key] = {k: to_device(v, "cuda") for k, v in host.items()}
    return cache[key]


def kernel_parts(
    kernels: list[Any],
    ptxs: list[str | None],
    case_id: int,
    aot_sigs: dict[str, dict[str, Any]],
    cache: dict[str, tuple[str | None, str | None, bool]],
    launch: Any = None,
    ptx_dir: str = "",
) -> tuple[list[str], list[str], list[str], bool]:
    """Per launched kernel: its signature part, PTX sha, fallback and physical flag.

    With ``launch`` (a ``LaunchShape``, single-kernel cases only) each kernel is signed
    specialised to that launch; the AOT store's signatures are unspecialised, so a kernel loaded
    from it is signed from its PTX kept under ``ptx_dir`` (by the store's PTX sha), and without
    that PTX gets a part of its own.

    A kernel loaded from the AOT store carries no PTX: its signature is the one the CPU
    pre-step computed under the same key. A kernel whose signature is unknown, or that is
    run-dependent (float atomics), gets a part of its own, so it is never certified equal.
    """
    from fixbits.checker.api import signature

    parts: list[str] = []
    shas: list[str] = []
    fallbacks: list[str] = []
    physical = False
    for k, ptx in zip(kernels, ptxs, strict=True):
        pre = aot_sigs.get(str(getattr(k, "hash", ""))) if ptx is None else None
        if pre is not None and launch is not None and ptx_dir:
            kept = os.path.join(ptx_dir, f"{pre['ptx_sha']}.ptx")
            if os.path.exists(kept):
                with open(kept) as fh:
                    ptx = fh.read()
        if ptx is None:
            if pre is None or launch is not None:
                parts.append(f"unknown:{case_id}:{len(parts)}")
                shas.append("")
                continue
            parts.append(pre["digest"] if pre["digest"] is not None else f"nondet:{case_id}")
            if pre["fallback"]:
                fallbacks.append(pre["fallback"])
            physical = physical or bool(pre["physical"])
            shas.append(pre["ptx_sha"])
            continue
        full = hashlib.sha256(ptx.encode()).hexdigest()
        shas.append(full[:16])
        ckey = full if launch is None else f"{full}|{launch.key()}"
        sig = cache.get(ckey)
        if sig is None:
            s = signature(ptx, "ptx", launch=launch)
            sig = (s.digest if s.deterministic else None, s.fallback, s.physical)
            cache[ckey] = sig
        parts.append(sig[0] if sig[0] is not None else f"nondet:{case_id}")
        if sig[1]:
            fallbacks.append(sig[1])
        physical = physical or sig[2]
    return parts, shas, fallbacks, physical


def _run_chunk(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_run_case(t) for t in tasks]


def _run_case(task: dict[str, Any]) -> dict[str, Any]:
    import importlib

    import torch

    from fixbits.corpus.common import Config

    out: dict[str, Any] = {
        "id": task["id"],
        "kernel": task["kernel"],
        "dtype": task["dtype"],
        "label": task["label"],
    }
    if _STATE["poisoned"]:
        out["error"] = f"worker unusable after: {_STATE['poisoned']}"
        return out
    t0 = time.time()
    try:
        mod = importlib.import_module(task["module"])
        cfg = Config(tuple(tuple(b) for b in task["blocks"]), task["num_warps"], task["num_stages"])
        shape = dict(task["shape"])
        hashes = []
        kernels_ptx: list[str | None] = []
        kernels_obj: list[Any] = []
        nonzero = False
        for i, (kind, seed) in enumerate(task["draws"]):
            inputs = _inputs(mod, task["kernel"], shape, task["dtype"], kind, seed)
            launched = _STATE["launched"]
            launched.clear()
            outs = mod.launch(inputs, shape, cfg, task["pinned"], **dict(task["launch_kwargs"]))
            torch.cuda.synchronize()
            if i == 0:
                kernels_obj = list(launched)
                kernels_ptx = [k.asm.get("ptx") for k in launched]
                out["aot_hits"] = sum(1 for k in launched if "ptx" not in k.asm)
                out["compile_s"] = round(time.time() - t0, 3)
            h = hashlib.sha256()
            for name in sorted(outs):
                t = outs[name].detach().contiguous()
                b = (
                    t.view(torch.uint8)
                    if t.element_size() == 1
                    else t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
                )
                nonzero = nonzero or bool((b != 0).any().item())
                h.update(name.encode())
                h.update(b.cpu().numpy().tobytes())
            hashes.append(h.hexdigest()[:24])
        t1 = time.time()
        spec = None
        if task.get("launch_spec") and len(kernels_obj) == 1:
            from fixbits.checker.launch import corpus_launch

            spec = corpus_launch(task["module"], shape, task["label"])
        parts, ptx_shas, fallbacks, physical = kernel_parts(
            kernels_obj, kernels_ptx, task["id"], _STATE["aot_sigs"], _STATE["sigs"], spec, _STATE["ptx_dir"]
        )
        out["check_s"] = round(time.time() - t1, 4)
        out["sig"] = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24] if parts else None
        out["ptx_sha"] = ptx_shas
        out["fallbacks"] = fallbacks
        out["physical"] = physical
        out["bytes"] = "/".join(hashes)
        out["nonzero"] = nonzero
        out["n_kernels"] = len(kernels_ptx)
    except Exception as e:  # noqa: BLE001 - a crashed case is reported, the rest go on
        msg = f"{type(e).__name__}: {str(e)[:300]}"
        out["error"] = msg
        out["trace"] = traceback.format_exc()[-1500:]
        if "CUDA" in msg and ("illegal" in msg or "unspecified launch" in msg):
            _STATE["poisoned"] = msg
    out["wall_s"] = round(time.time() - t0, 3)
    return out


def _unpacked(path: str, suffixes: tuple[str, ...], t_start: float) -> str:
    """A packed folder (tar cJf x.tar.xz x) unpacked to a temporary folder; a folder as it is."""
    if not path.endswith(suffixes):
        return path
    import tarfile
    import tempfile

    tmp = tempfile.mkdtemp(prefix="fixbits_aot_")
    with tarfile.open(path) as tf:
        tf.extractall(tmp, filter="data")
    subs = [d for d in os.listdir(tmp) if os.path.isdir(os.path.join(tmp, d))]
    got = os.path.join(tmp, subs[0]) if len(subs) == 1 else tmp
    print(f"{path} unpacked to {got} in {time.time() - t_start:.1f}s", flush=True)
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=300.0)
    ap.add_argument(
        "--workers", type=int, default=0, help="worker processes (default: cores - 1, at most 15)"
    )
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--max-cases", type=int, default=0)
    ap.add_argument("--dry-run", action="store_true", help="list the planned configs per kernel and exit")
    ap.add_argument(
        "--aot",
        default="",
        help="a store of kernels compiled ahead of time (--build-aot): the workers load them instead of compiling",
    )
    ap.add_argument(
        "--build-aot",
        default="",
        help="CPU pre-step: compile every planned config for sm_90 into this store and exit (resumable)",
    )
    ap.add_argument(
        "--ptx-dir",
        default="",
        help="with --build-aot: also keep each kernel's PTX here; with --aot and --launch-spec: the kept PTX "
        "(a folder or its .tar.xz), so kernels loaded from the store are signed specialised to their launch",
    )
    ap.add_argument(
        "--allow-stale-signatures",
        action="store_true",
        help="with --aot: run even when the store's signatures were made by another checker version",
    )
    ap.add_argument(
        "--launch-spec",
        action="store_true",
        help="sign each config specialised to its launch (corpus modules with launch_ints; needs the PTX)",
    )
    ap.add_argument(
        "--resign",
        action="store_true",
        help="with --build-aot and --ptx-dir: re-sign the store's kernels and exit",
    )
    ap.add_argument(
        "--preflight",
        action="store_true",
        help="with --aot: say whether this checkout's checker signed the store (or its archive) and exit; "
        "run it here before a device call",
    )
    args = ap.parse_args(argv)
    t_start = time.time()
    if args.preflight:
        from fixbits.checker.aot_build import stale_signatures

        if not args.aot:
            ap.error("--preflight needs --aot STORE (a folder or its .tar.xz)")
        stale, total = stale_signatures(args.aot)
        verdict = "current" if total and not stale else "STALE: re-sign and repack it" if stale else "EMPTY"
        print(f"{args.aot}: {total} kernels, {stale} signed by another checker version: {verdict}")
        return 0 if total and not stale else 2
    os.makedirs(args.out, exist_ok=True)

    from fixbits.checker.soundness import GroupStats, cases, gate_meta, interleave, load_families, partition

    meta = gate_meta()
    fams = {f.name: f for f in load_families()}
    only = [x for x in args.only.split(",") if x]
    groups = []
    for f in fams.values():
        if only and f.name not in only:
            continue
        cs = cases(f)
        by_dtype: dict[str, list[Any]] = {}
        for c in cs:
            by_dtype.setdefault(c.dtype, []).append(c)
        groups.extend(by_dtype.values())
    # round-robin over groups in runs of CHUNK configs: a worker takes a run of one group at a
    # time (its input draws stay cached), and a budget cut still leaves every group covered
    runs = interleave([[tuple(g[i : i + CHUNK]) for i in range(0, len(g), CHUNK)] for g in groups])  # type: ignore[misc]
    order = [c for run in runs for c in run]
    if args.max_cases:
        order = order[: args.max_cases]
    draws = [(k, s) for s in meta["seeds"] for k in meta["kinds"]]
    tasks = []
    for i, c in enumerate(order):
        f = fams[c.kernel]
        tasks.append(
            {
                "id": i,
                "kernel": c.kernel,
                "module": f.module,
                "dtype": c.dtype,
                "pinned": c.pinned,
                "blocks": c.blocks,
                "num_warps": c.num_warps,
                "num_stages": c.num_stages,
                "label": c.label(),
                "shape": f.shape,
                "launch_kwargs": f.launch_kwargs,
                "draws": draws,
                "launch_spec": args.launch_spec,
            }
        )
    if args.build_aot and args.resign:
        from fixbits.checker.aot_build import resign

        return resign(args.build_aot, args.ptx_dir)
    if args.build_aot:
        from fixbits.checker.aot_build import build

        return build(tasks, args.build_aot, args.ptx_dir or None, args.budget_s, args.workers or 2)
    if args.dry_run:
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t["kernel"]] = counts.get(t["kernel"], 0) + 1
        for k, n in counts.items():
            print(f"{k:24s} {n}")
        print(f"total {len(tasks)} configs x {len(draws)} draws")
        return 0
    workers = args.workers or max(1, min(15, (os.cpu_count() or 2) - 1))
    from fixbits.checker.aot_build import ARCHIVE_SUFFIXES

    aot = args.aot = _unpacked(args.aot, ARCHIVE_SUFFIXES, t_start)
    args.ptx_dir = _unpacked(args.ptx_dir, ARCHIVE_SUFFIXES, t_start)
    if aot:
        from fixbits.checker.aot_build import stale_signatures

        stale, total = stale_signatures(aot)
        if stale and not args.allow_stale_signatures:
            print(
                f"checker_soundness: {stale} of {total} signatures in the AOT store {aot} were made by "
                "another version of the checker; re-sign it first (--build-aot STORE --ptx-dir PTX "
                "--resign) or pass --allow-stale-signatures",
                file=sys.stderr,
                flush=True,
            )
            return 2
    print(
        f"checker_soundness: {len(tasks)} configs, {workers} workers, budget {args.budget_s:.0f}s", flush=True
    )
    results: list[dict[str, Any]] = []
    ctx = mp.get_context("spawn")
    deadline = t_start + args.budget_s - 15
    cut = False
    with open(os.path.join(args.out, "checker_soundness_cases.jsonl"), "w") as fh:
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(args.aot, args.ptx_dir))
        try:
            chunks, i = [], 0
            for run in runs:
                if i >= len(tasks):
                    break
                chunks.append(tasks[i : i + len(run)])
                i += len(run)
            it = pool.imap_unordered(_run_chunk, chunks, chunksize=1)
            while True:
                remaining = deadline - time.time()
                if remaining <= 0:
                    cut = True
                    break
                try:
                    rs = it.next(timeout=remaining)
                except StopIteration:
                    break
                except mp.TimeoutError:
                    cut = True
                    break
                for r in rs:
                    results.append(r)
                    slim = {k: v for k, v in r.items() if k != "trace"}
                    fh.write(json.dumps(slim) + "\n")
                    if len(results) % 250 == 0:
                        print(f"  {len(results)}/{len(tasks)} done, {time.time() - t_start:.0f}s", flush=True)
                fh.flush()  # partial results survive a kill
        finally:
            pool.terminate()
            pool.join()

    ok = [r for r in results if "error" not in r and r.get("sig")]
    errors = [r for r in results if "error" in r]
    table = []
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in ok:
        by_group.setdefault((r["kernel"], r["dtype"]), []).append(r)
    total_false = 0
    for (kernel, dtype), rs in sorted(by_group.items()):
        checker, true, pairs, impure = partition((r["sig"], r["bytes"]) for r in rs)
        st = GroupStats(kernel, dtype, len(rs), checker, true, pairs, impure)
        total_false += pairs or 0
        bad = []
        if pairs:
            by_sig: dict[str, set[str]] = {}
            for r in rs:
                by_sig.setdefault(r["sig"], set()).add(r["bytes"])
            # every impure checker class, its members split by their bytes: each cross pair is a false equal
            bad = [
                {b: [r["label"] for r in rs if r["sig"] == s and r["bytes"] == b] for b in sorted(bs)}
                for s, bs in by_sig.items()
                if len(bs) > 1
            ]
        true_members: dict[str, list[str]] = {}
        for r in rs:
            true_members.setdefault(r["bytes"][:24], []).append(r["label"])
        table.append(
            {
                "kernel": kernel,
                "dtype": dtype,
                "family": fams[kernel].family,
                "configs": st.configs,
                "checker_classes": checker,
                "true_classes": true,
                "over_split": round(st.over_split or 0, 3),
                "false_equal_pairs": pairs,
                "impure_classes": impure,
                "fallbacks": sum(1 for r in rs if r["fallbacks"]),
                "physical": sum(1 for r in rs if r["physical"]),
                "all_zero_outputs": sum(1 for r in rs if not r["nonzero"]),
                "impure_examples": bad,
                "true_class_members": true_members,
                "aot_hits": sum(r.get("aot_hits", 0) for r in rs),
                "kernels_launched": sum(r["n_kernels"] for r in rs),
                "check_files_per_s": round(
                    sum(r["n_kernels"] - r.get("aot_hits", 0) for r in rs)
                    / max(1e-9, sum(r["check_s"] for r in rs)),
                    1,
                ),
            }
        )
    summary = {
        "configs_planned": len(tasks),
        "configs_run": len(results),
        "configs_ok": len(ok),
        "errors": len(errors),
        "cut_by_budget": cut,
        "false_equal_pairs_total": total_false,
        "wall_s": round(time.time() - t_start, 1),
        "draws": draws,
        "workers": workers,
        "aot_store": args.aot or None,
        "aot_hits_total": sum(r.get("aot_hits", 0) for r in ok),
        "kernels_launched_total": sum(r.get("n_kernels", 0) for r in ok),
        "table": table,
        "error_examples": [{k: r.get(k) for k in ("kernel", "dtype", "label", "error")} for r in errors[:20]],
    }
    try:
        import torch
        import triton

        summary["env"] = {
            "torch": torch.__version__,
            "triton": triton.__version__,
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        }
    except Exception as e:  # noqa: BLE001
        summary["env"] = {"error": str(e)}
    with open(os.path.join(args.out, "checker_soundness.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    with open(os.path.join(args.out, "checker_soundness.csv"), "w") as fh:
        cols = [
            "kernel",
            "dtype",
            "family",
            "configs",
            "checker_classes",
            "true_classes",
            "over_split",
            "false_equal_pairs",
            "fallbacks",
            "physical",
            "all_zero_outputs",
            "check_files_per_s",
        ]
        fh.write(",".join(cols) + "\n")
        for row in table:
            fh.write(",".join(str(row[c]) for c in cols) + "\n")
    print(
        f"{'kernel':22s} {'dtype':5s} {'cfgs':>5s} {'chk':>4s} {'true':>4s} {'split':>6s} {'FALSE=':>6s} {'fb':>3s}"
    )
    for row in table:
        print(
            f"{row['kernel']:22s} {row['dtype']:5s} {row['configs']:5d} {row['checker_classes']:4d} "
            f"{str(row['true_classes']):>4s} {row['over_split']:6.2f} {str(row['false_equal_pairs']):>6s} "
            f"{row['fallbacks']:3d}"
        )
    print(
        f"configs run {len(results)}/{len(tasks)} ok {len(ok)} errors {len(errors)} cut={cut} "
        f"FALSE-EQUAL PAIRS TOTAL {total_false} wall {summary['wall_s']}s"
    )
    return 1 if total_false else 0


if __name__ == "__main__":
    raise SystemExit(main())
