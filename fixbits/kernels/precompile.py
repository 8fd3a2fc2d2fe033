"""Compile, ahead of the first call, the kernels a list of fixbits.matmul calls will launch.

Triton compiles a kernel the first time a launch needs it (seconds each) and keeps it in its
on-disk cache, keyed by the source, the target, the compile options and the specialisation of
the arguments. ``precompile`` runs the same calls in parallel processes on meta tensors (same
shapes, strides and dtypes, 16-byte aligned pointers, no memory) under ``CompileOnlyDriver``:
Triton's real JITFunction.run binds, specialises and compiles for the GPU's target and
writes its cache; the launch itself is skipped. The GPU process then finds each kernel on disk
(a load, not a compile). Only the cache is shared: a job that fails here is compiled on
demand by the GPU process, so precompiling can speed a run up but never change what it runs.
"""

from __future__ import annotations

import os
import time
import types
from dataclasses import dataclass
from typing import Any

from fixbits.desc import EpilogueOp, GEMMDesc


class CompileOnlyDriver:
    """Triton's active driver for compiling without a GPU: device 0, stream 0, target
    cuda:<arch> with 32-lane warps; a kernel whose shared memory exceeds ``max_shared``
    raises OutOfResources as on the GPU; launches do nothing (subclasses may record them)."""

    def __init__(self, arch: int = 90, *, max_shared: int = 232448, sms: int = 132) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)
        self.utils = types.SimpleNamespace(
            get_device_properties=lambda device: {"max_shared_mem": max_shared, "multiprocessor_count": sms},
            load_binary=lambda name, kernel, shared, device: (None, None, 0, 0, 1024),
        )
        self._saved: Any = None

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int) -> int:
        return 0

    def get_current_target(self) -> Any:
        return self.target

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("meta")

    class launcher_cls:  # noqa: N801 (Triton's attribute name)
        def __init__(self, src: Any, metadata: Any) -> None:
            self.hash = metadata.hash

        def __call__(self, gx: int, gy: int, gz: int, stream: int, function: Any, *args: Any) -> None:
            return None

    def __enter__(self) -> CompileOnlyDriver:
        from triton.runtime.driver import driver

        self._saved = driver._active
        driver.set_active(self)  # type: ignore[arg-type]
        return self

    def __exit__(self, *exc: object) -> None:
        from triton.runtime.driver import driver

        driver._active = self._saved


def epilogue_ops(name: str) -> tuple[EpilogueOp, ...]:
    """'scale+residual' -> ops (scale's value is a run-time argument: 0.5 compiles them all)."""
    if not name or name == "none":
        return ()
    return tuple(EpilogueOp(k, 0.5) if k == "scale" else EpilogueOp(k) for k in name.split("+"))


@dataclass(frozen=True)
class CompileJob:
    """One fixbits.matmul call to compile: row-major A (m, k) and B (k, n), or with b_kmajor B
    as the transpose of a row-major (n, k) (an nn.Linear weight; fp8's TN form): the TMA body
    then loads B^T, a kernel of its own."""

    m: int
    n: int
    k: int
    desc: GEMMDesc
    epilogue: str = "none"
    config: tuple[tuple[str, int], ...] = ()  # KernelConfig fields (empty: the tuned/default config)
    out_dtype: str = "fp16"
    b_kmajor: bool = False

    def dedup_key(self, sms: int = 132) -> tuple[Any, ...]:
        """Jobs with equal keys compile the same kernels: the binder sees an int only as ==1
        and %16 (m, n, k, the strides made of them, and the persistent grid's size)."""
        ints = [self.m, self.n, self.k]
        cfg = dict(self.config)
        if cfg.get("PERSISTENT"):
            bm, bn = cfg.get("BLOCK_M", 128), cfg.get("BLOCK_N", 128)
            km, kn = (self.n, self.m) if cfg.get("SWAP_AB") else (self.m, self.n)
            ints.append(min(-(-km // bm) * -(-kn // bn), sms * cfg["PERSISTENT"]))
        spec = tuple((v == 1, v % 16 == 0) for v in ints)
        return (
            self.desc.short_hash,
            self.epilogue,
            tuple(sorted(cfg.items())),
            spec,
            self.out_dtype,
            self.b_kmajor,
        )


def run_job(job: CompileJob) -> None:
    """The call of ``job`` on meta tensors (inside CompileOnlyDriver)."""
    import torch

    from fixbits.kernels._host import KernelConfig, torch_dtype
    from fixbits.kernels.matmul import matmul

    dt = torch_dtype(job.desc.in_dtype)
    odt = torch_dtype(job.out_dtype)
    a = torch.empty((job.m, job.k), dtype=dt, device="meta")
    if job.b_kmajor:
        b = torch.empty((job.n, job.k), dtype=dt, device="meta").t()
    else:
        b = torch.empty((job.k, job.n), dtype=dt, device="meta")
    side = dict(
        bias=torch.empty((job.n,), dtype=odt, device="meta"),
        residual=torch.empty((job.m, job.n), dtype=odt, device="meta"),
        gate=torch.empty((job.m, job.n), dtype=odt, device="meta"),
    )
    cfg = KernelConfig.from_dict(dict(job.config)) if job.config else None
    matmul(
        a, b, desc=job.desc, epilogue=epilogue_ops(job.epilogue), config=cfg, out_dtype=job.out_dtype, **side
    )


def _worker(jobs: list[CompileJob], arch: int, sms: int) -> tuple[int, list[str]]:
    from fixbits.kernels import single_pass

    single_pass._SMS[0] = sms  # the persistent grid's size, as the GPU reports it
    done, errors = 0, []
    with CompileOnlyDriver(arch, sms=sms):
        for job in jobs:
            try:
                run_job(job)
                done += 1
            except Exception as exc:  # compiled on demand by the GPU process instead
                errors.append(
                    f"{job.m}x{job.n}x{job.k} {job.epilogue} {job.config}: {type(exc).__name__}: {exc}"[:300]
                )
    return done, errors


@dataclass(frozen=True)
class PrecompileReport:
    """What ``precompile`` did: calls given, distinct kernels among them, compiled, errors."""

    jobs: int
    unique: int
    compiled: int
    errors: tuple[str, ...]
    seconds: float
    workers: int


def precompile(
    jobs: list[CompileJob],
    *,
    workers: int | None = None,
    arch: int = 90,
    sms: int = 132,
    timeout_s: float = 300.0,
) -> PrecompileReport:
    """Compile ``jobs`` (deduplicated) in ``workers`` spawned processes; returns when done or
    after ``timeout_s`` (unfinished work is then compiled on demand)."""
    import concurrent.futures as cf
    import multiprocessing as mp

    t0 = time.monotonic()
    unique: dict[tuple[Any, ...], CompileJob] = {}
    for j in jobs:
        unique.setdefault(j.dedup_key(sms), j)
    todo = list(unique.values())
    workers = max(1, min(workers or (os.cpu_count() or 2) - 2, len(todo) or 1))
    # small tasks, so a timeout leaves little running; strided, so each holds varied kernels
    n_tasks = min(len(todo), workers * 4)
    chunks = [todo[i::n_tasks] for i in range(n_tasks)]
    done, errors = 0, []
    if todo:
        pool = cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))
        futs = [pool.submit(_worker, c, arch, sms) for c in chunks]
        try:
            for f in cf.as_completed(futs, timeout=timeout_s):
                d, e = f.result()
                done += d
                errors += e
        except cf.TimeoutError:
            errors.append(f"precompile stopped after {timeout_s:.0f}s; the rest compiles on demand")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
    return PrecompileReport(len(jobs), len(todo), done, tuple(errors), time.monotonic() - t0, workers)
