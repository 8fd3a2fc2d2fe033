"""Compile a family's configs ahead of time on this machine and partition them by signature.

Used by the CPU half of suites/checker_soundness and by benchmarks/checker/partition.py. Imports
triton and torch inside functions (CPU tensors stand in for device ones: the launcher allocates
its outputs and the JIT binder reads pointers and dtypes, nothing runs).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

from fixbits.checker.soundness import Case, Family, cases


@dataclass(frozen=True)
class CompiledCase:
    """One config compiled for one target: its signature and the time the checker took."""

    case: Case
    target: str
    digest: str  # combined over the kernels one launch runs
    texts: tuple[str, ...]
    fallbacks: tuple[str, ...]
    physical: bool
    check_s: float
    compile_s: float


def compile_case(fam: Family, case: Case, target: str) -> CompiledCase:
    import hashlib

    from fixbits.checker.api import signature
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config, to_device

    mod = importlib.import_module(fam.module)
    shape = dict(fam.shape)
    host = mod.make_inputs(shape, case.dtype, "ordinary", 0)
    inputs = {k: to_device(v, "cpu") for k, v in host.items()}
    t0 = time.process_time()
    with capture_launches(gpu_target(target)) as got:
        mod.launch(
            inputs,
            shape,
            Config(case.blocks, case.num_warps, case.num_stages),
            case.pinned,
            **dict(fam.launch_kwargs),
        )
    t1 = time.process_time()  # CPU time: the speed of the checker, not of a shared machine's load
    sigs = [signature(c.asm, c.isa) for c in got]
    t2 = time.process_time()
    digest = hashlib.sha256("|".join(s.digest for s in sigs).encode()).hexdigest()[:24]
    return CompiledCase(
        case,
        target,
        digest,
        tuple(c.asm for c in got),
        tuple(s.fallback for s in sigs if s.fallback),
        any(s.physical for s in sigs),
        t2 - t1,
        t1 - t0,
    )


def compile_family(
    fam: Family,
    target: str,
    dtypes: Sequence[str] | None = None,
    pinned: Sequence[bool] | None = None,
    cpu: bool = True,
) -> list[CompiledCase]:
    out = []
    for c in cases(fam, cpu=cpu):
        if dtypes is not None and c.dtype not in dtypes:
            continue
        if pinned is not None and c.pinned not in pinned:
            continue
        out.append(compile_case(fam, c, target))
    return out
