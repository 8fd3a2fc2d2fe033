"""Refuse to take gate jobs on a runner whose GPU or library stack is not what the gate expects.

    python3 runners/check_runner.py [--arch sm_90] [--record FILE] [--print] [--no-pins]

A bitwise gate that ran on the wrong GPU, with no GPU (every test skipped: green), or on an
unpinned cuBLAS says nothing true. This script runs before the runner service starts
(ExecStartPre in fixbits-runner.service) and as the first step of every GPU job. It checks:
fixbits imports from this checkout; the environment fingerprint (fixbits.env.fingerprint);
a GPU is visible and computes; it is the arch the runner's labels promise; the driver, CUDA or
HIP runtime, cuBLAS (NVIDIA) and Triton versions are recorded; each version pinned in
matrices/pins.yaml matches; pytest and pytest-xdist import. It prints one line per check and
exits 0 (ready) or 1 with the first failing check's reason on the last line. ``--record FILE``
writes the fingerprint and the checks as YAML (the gate job uploads it with the JUnit XML).
Needs only PYTHONPATH=<repo> (fixbits need not be installed).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class Check:
    """One readiness check: ``ok`` False makes the runner refuse jobs, with ``detail`` as the reason."""

    name: str
    ok: bool
    detail: str


def _pin_check(name: str, pinned: Any, actual: Any) -> Check:
    from fixbits.gate import version_matches

    if pinned is None:
        return Check(f"pin {name}", True, f"not pinned (installed: {actual})")
    if actual is None:
        return Check(f"pin {name}", False, f"pinned {pinned}, but no {name} version could be read here")
    ok = version_matches(str(pinned), str(actual).replace("hip ", ""))
    return Check(f"pin {name}", ok, f"pinned {pinned}, installed {actual}")


def evaluate(
    fp: dict[str, Any], *, arch: str | None, pins: dict[str, Any] | None, gpu_works: tuple[bool, str]
) -> list[Check]:
    """The checks on a fingerprint dict (pure apart from ``gpu_works``, measured by the caller)."""
    from fixbits.predicates import AMD_ARCHES, ARCHES

    out: list[Check] = []
    sm = fp.get("sm")
    out.append(
        Check(
            "GPU visible",
            sm is not None,
            f"{fp.get('gpu_name')} ({sm}, {fp.get('sm_count')} SMs)"
            if sm
            else "no GPU visible to torch (driver not loaded, CUDA_VISIBLE_DEVICES empty, or a CPU torch)",
        )
    )
    if sm is not None:
        out.append(Check("GPU computes", gpu_works[0], gpu_works[1]))
    if arch is not None:
        if arch not in ARCHES:
            out.append(Check("arch label", False, f"--arch {arch!r} is not one of {', '.join(ARCHES)}"))
        else:
            out.append(Check("arch label", sm == arch, f"runner labelled {arch}, GPU is {sm}"))
    vendor = "amd" if (sm or arch or "").startswith("gfx") or (arch in AMD_ARCHES) else "nvidia"
    runtime = fp.get("cuda_runtime")
    if vendor == "nvidia":
        out.append(Check("driver recorded", fp.get("driver") is not None, str(fp.get("driver"))))
        out.append(
            Check(
                "CUDA runtime recorded",
                runtime is not None and not str(runtime).startswith("hip"),
                str(runtime),
            )
        )
        out.append(
            Check(
                "cuBLASLt recorded",
                fp.get("cublaslt") is not None,
                f"cuBLAS {fp.get('cublas')}, cuBLASLt {fp.get('cublaslt')}",
            )
        )
    else:
        out.append(
            Check(
                "HIP runtime recorded", runtime is not None and str(runtime).startswith("hip"), str(runtime)
            )
        )
    out.append(Check("Triton recorded", fp.get("triton") is not None, str(fp.get("triton"))))
    out.append(Check("torch recorded", fp.get("torch") is not None, str(fp.get("torch"))))
    if pins is not None:
        driver_pins = pins.get("driver") or {}
        if not isinstance(driver_pins, dict):
            driver_pins = {"nvidia": driver_pins, "amd": driver_pins}
        driver = fp.get("driver")
        out.append(
            _pin_check("driver", driver_pins.get(vendor), None if driver is None else str(driver).split()[0])
        )
        if vendor == "nvidia":
            out.append(_pin_check("cuda", pins.get("cuda"), runtime))
            out.append(_pin_check("cublas", pins.get("cublas"), fp.get("cublaslt")))
        else:
            out.append(_pin_check("rocm", pins.get("rocm"), runtime))
        out.append(_pin_check("triton", pins.get("triton"), fp.get("triton")))
        out.append(_pin_check("torch", pins.get("torch"), fp.get("torch")))
    for mod, why in (("pytest", "the gate runs pytest"), ("xdist", "the gate runs pytest -n auto")):
        ok = importlib.util.find_spec(mod) is not None
        out.append(Check(f"{mod} importable", ok, why if ok else f"{mod} missing: {why}"))
    return out


def gpu_smoke() -> tuple[bool, str]:
    """Launch one tiny kernel: a GPU that is visible but cannot run work is not ready."""
    try:
        import torch

        x = torch.arange(1, 65, dtype=torch.float32, device="cuda")
        got = float(x.sum().item())
        torch.cuda.synchronize()
    except Exception as exc:
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return (got == 2080.0), f"sum(1..64) on the GPU = {got:g} (expected 2080)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--arch",
        default=os.environ.get("FIXBITS_RUNNER_ARCH"),
        help="the arch this runner's labels promise (default $FIXBITS_RUNNER_ARCH)",
    )
    ap.add_argument("--pins", type=Path, default=REPO / "matrices" / "pins.yaml", help="pins file")
    ap.add_argument("--no-pins", action="store_true", help="record versions without enforcing the pins")
    ap.add_argument("--record", type=Path, help="write the fingerprint and the checks here (YAML)")
    ap.add_argument("--print", dest="print_fp", action="store_true", help="also print the fingerprint")
    args = ap.parse_args(argv)

    import yaml

    try:
        from fixbits.env import fingerprint

        fp_obj = fingerprint()
        fp = fp_obj.to_dict()
    except Exception as exc:
        print(f"check_runner: NOT READY: the environment fingerprint failed: {type(exc).__name__}: {exc}")
        return 1
    pins = None
    if not args.no_pins:
        try:
            from fixbits.gate import GateError, load_pins

            pins = dict(load_pins(args.pins).versions)
        except GateError as exc:
            print(f"check_runner: NOT READY: {exc}")
            return 1
    smoke = gpu_smoke() if fp.get("sm") else (False, "no GPU")
    checks = evaluate(fp, arch=args.arch, pins=pins, gpu_works=smoke)
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<{width}}  {c.detail}")
    if args.print_fp:
        print(yaml.safe_dump({"hash": fp_obj.short_hash, **fp}, sort_keys=False), end="")
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(
            yaml.safe_dump(
                {
                    "fingerprint": fp,
                    "hash": fp_obj.short_hash,
                    "arch": args.arch,
                    "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
                },
                sort_keys=False,
            )
        )
    failed = [c for c in checks if not c.ok]
    if failed:
        print(
            f"check_runner: NOT READY: {failed[0].name}: {failed[0].detail}"
            + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")
        )
        return 1
    print(f"check_runner: ready ({fp.get('gpu_name')}, fingerprint {fp_obj.short_hash})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
