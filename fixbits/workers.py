"""One GPU per pytest-xdist worker: which GPUs the controller sees, which one each worker owns,
how many workers ``-n auto`` means, and a scheduler that sends fuzz shape i to worker i mod n.

A multi-GPU runner that lets every worker open GPU 0 runs the nightly fuzz set on one GPU
with n contexts fighting over it. The controller lists the visible GPUs once (without opening
a CUDA context: from CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES, else
nvidia-smi or the kernel's device lists), hands the list to every worker, and each worker sets
its own *_VISIBLE_DEVICES to one entry before anything in it initialises CUDA or HIP. Fixing
the shape-to-worker assignment (``fixbits.shapes.shard_of``) makes a nightly's drift on shape
i reproducible on the same GPU. Everything here is a pure function of its arguments, except
the two probes, so tests simulate any GPU list through the environment.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NVIDIA_VAR = "CUDA_VISIBLE_DEVICES"
HIP_VAR = "HIP_VISIBLE_DEVICES"
ROCR_VAR = "ROCR_VISIBLE_DEVICES"
WORKERINPUT_KEY = "fixbits_gpus"  # what the controller sends each worker (xdist workerinput)
_WORKER_ID = re.compile(r"^gw(\d+)$")


@dataclass(frozen=True)
class GpuSet:
    """The GPUs the controller sees: their vendor, the variable that selects among them, the entries."""

    vendor: str  # "nvidia", "amd" or "none"
    var: str  # the variable a worker sets to own one entry
    entries: tuple[str, ...]  # values for ``var``: indices, UUIDs or MIG ids, as the user gave them
    source: str  # where the list came from (for the report header)

    def __len__(self) -> int:
        return len(self.entries)

    def to_workerinput(self) -> dict[str, Any]:
        return {"vendor": self.vendor, "var": self.var, "entries": list(self.entries), "source": self.source}

    @classmethod
    def from_workerinput(cls, data: Mapping[str, Any]) -> GpuSet:
        return cls(
            str(data["vendor"]), str(data["var"]), tuple(str(e) for e in data["entries"]), str(data["source"])
        )


NO_GPU = GpuSet("none", NVIDIA_VAR, (), "no GPU found")


def parse_visible(value: str) -> tuple[str, ...]:
    """A *_VISIBLE_DEVICES list as CUDA reads it: entries up to the first invalid one ('-1', '')."""
    out: list[str] = []
    for raw in value.split(","):
        e = raw.strip()
        if not e or e.startswith("-"):
            break
        out.append(e)
    return tuple(out)


def _nvidia_smi(*args: str) -> list[str] | None:
    """The stripped output lines of ``nvidia-smi ARGS`` (no CUDA context), or None when it is
    missing, fails or hangs."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        proc = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in proc.stdout.splitlines()] if proc.returncode == 0 else None


def _nvidia_indices() -> tuple[str, ...]:
    """GPU indices from nvidia-smi (no CUDA context), else from the driver's /proc list."""
    lines = _nvidia_smi("--query-gpu=index", "--format=csv,noheader")
    if lines is not None:
        return tuple(line for line in lines if line.isdigit())
    gpus = Path("/proc/driver/nvidia/gpus")
    return tuple(str(i) for i in range(len(list(gpus.iterdir())))) if gpus.is_dir() else ()


def gpu_memory_gib(index: int = 0) -> float | None:
    """Total memory of one NVIDIA GPU from nvidia-smi, without a CUDA context: a runner sizes its
    probing processes' shares before any of them opens the GPU (an H100 has 80 GB, an H200 141)."""
    lines = _nvidia_smi(f"--id={index}", "--query-gpu=memory.total", "--format=csv,noheader,nounits")
    if not lines or not lines[0].isdigit():
        return None
    return int(lines[0]) / 1024  # MiB


def _amd_indices() -> tuple[str, ...]:
    """GPU nodes of the KFD topology (a CPU node has gpu_id 0)."""
    nodes = Path("/sys/class/kfd/kfd/topology/nodes")
    if not nodes.is_dir():
        return ()
    count = 0
    for node in sorted(nodes.iterdir()):
        try:
            if int((node / "gpu_id").read_text().strip() or 0) != 0:
                count += 1
        except (OSError, ValueError):
            continue
    return tuple(str(i) for i in range(count))


def visible_gpus(
    env: Mapping[str, str],
    *,
    nvidia: Callable[[], tuple[str, ...]] = _nvidia_indices,
    amd: Callable[[], tuple[str, ...]] = _amd_indices,
) -> GpuSet:
    """The GPUs a process with environment ``env`` would see. A set variable wins over probing
    (CUDA_VISIBLE_DEVICES='' means none); ROCR filters before HIP, so under ROCR a worker's HIP
    index is a position in the ROCR list."""
    if NVIDIA_VAR in env:
        return GpuSet(
            "nvidia", NVIDIA_VAR, parse_visible(env[NVIDIA_VAR]), f"{NVIDIA_VAR}={env[NVIDIA_VAR]!r}"
        )
    if HIP_VAR in env:
        return GpuSet("amd", HIP_VAR, parse_visible(env[HIP_VAR]), f"{HIP_VAR}={env[HIP_VAR]!r}")
    if ROCR_VAR in env:
        n = len(parse_visible(env[ROCR_VAR]))
        return GpuSet("amd", HIP_VAR, tuple(str(i) for i in range(n)), f"{ROCR_VAR}={env[ROCR_VAR]!r}")
    if found := nvidia():
        return GpuSet("nvidia", NVIDIA_VAR, found, "nvidia-smi")
    if found := amd():
        return GpuSet("amd", HIP_VAR, found, "KFD topology")
    return NO_GPU


def worker_index(worker_id: str) -> int:
    """'gw3' -> 3 (xdist names its workers gw0, gw1, ...)."""
    m = _WORKER_ID.match(worker_id)
    if m is None:
        raise ValueError(f"not an xdist worker id: {worker_id!r} (expected gw<N>)")
    return int(m.group(1))


def gpu_for_worker(gpus: GpuSet, worker_id: str) -> str | None:
    """The entry worker ``worker_id`` owns: round robin, so n workers on n GPUs own one each."""
    if not gpus.entries:
        return None
    return gpus.entries[worker_index(worker_id) % len(gpus.entries)]


def pin_environment(gpus: GpuSet, worker_id: str) -> dict[str, str]:
    """The variables worker ``worker_id`` sets before any CUDA/HIP initialisation ({} without GPUs)."""
    entry = gpu_for_worker(gpus, worker_id)
    if entry is None:
        return {}
    return {gpus.var: entry, "FIXBITS_WORKER_GPU": f"{gpus.vendor}:{entry}"}


def selects_gpu_suites(args: Sequence[str], rootpath: Path, invocation_dir: Path) -> bool:
    """Whether the command-line paths reach suites/ (the GPU gate), rather than only tests/."""
    suites = (rootpath / "suites").resolve()
    for a in args:
        if a.startswith("-"):
            continue
        p = Path(a.split("::", 1)[0])
        p = (p if p.is_absolute() else invocation_dir / p).resolve()
        if p == suites or suites in p.parents or p in suites.parents:
            return True
    return False


def auto_workers(gpus: GpuSet, *, gpu_suites: bool) -> int | None:
    """``-n auto``: one worker per visible GPU when GPU suites run there, else None (xdist's CPU count)."""
    if gpu_suites and len(gpus) > 0:
        return len(gpus)
    return None


def _shard_scheduling() -> Any:
    """LoadScheduling that first sends every fuzz shape item to its worker (shape i -> gw(i mod n)),
    then balances the other items as xdist does. Built lazily: xdist is imported only when used."""
    from xdist.scheduler import LoadScheduling

    from fixbits.shapes import fuzz_index_of, shard_of

    class ShardScheduling(LoadScheduling):  # type: ignore[misc]
        def schedule(self) -> None:
            if self.collection is not None or not self.collection_is_completed:
                return super().schedule()  # type: ignore[no-any-return]
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return None
            collection = next(iter(self.node2collection.values()))
            by_index = {worker_index(n.gateway.id): n for n in self.nodes if _WORKER_ID.match(n.gateway.id)}
            pinned: dict[Any, list[int]] = {}
            rest: list[int] = []
            for pos, nid in enumerate(collection):
                idx = fuzz_index_of(nid)
                node = by_index.get(shard_of(idx, len(self.nodes))) if idx is not None else None
                (pinned.setdefault(node, []) if node is not None else rest).append(pos)
            self.collection = collection
            self.pending[:] = rest
            if self.maxschedchunk is None:
                self.maxschedchunk = len(collection)
            for node, positions in pinned.items():
                self.node2pending[node].extend(positions)
                node.send_runtest_some(positions)
            for node in self.nodes:
                self.check_schedule(node)
            return None

    return ShardScheduling
