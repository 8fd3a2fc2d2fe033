"""Descriptor -> kernel family. Pure Python: CPU tests check the choice without a GPU.

``desc.family`` names the paper's family; the dispatch adds one choice of its own: a scalar
descriptor whose level-0 cut has many parts on a short output (a long GEMV) can run as the
workspace GEMV, one program per level-0 part, because the arithmetic is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from fixbits.desc import GEMMDesc
from fixbits.kernels.plan import UnsupportedDesc, reduce_1block_at_level0

KERNEL_MODULES: dict[str, tuple[str, str]] = {
    "single_pass": ("fixbits.kernels.single_pass", "single_pass_matmul"),
    "per_mma": ("fixbits.kernels.per_mma", "per_mma_matmul"),
    "splitk": ("fixbits.kernels.splitk", "splitk_matmul"),
    "splitk_per_mma": ("fixbits.kernels.splitk_per_mma", "splitk_per_mma_matmul"),
    "scalar_chain": ("fixbits.kernels.gemv_contiguous", "gemv_contiguous_matmul"),
    "gemv_contiguous": ("fixbits.kernels.gemv_contiguous", "gemv_contiguous_matmul"),
    "chained_chunks": ("fixbits.kernels.chained_chunks", "chained_chunks_matmul"),
    "gemv_lane_tree": ("fixbits.kernels.gemv_lane_tree", "gemv_lane_tree_matmul"),
    "gemv_workspace": ("fixbits.kernels.gemv_workspace", "gemv_workspace_matmul"),
}

SUPPORTED_ARCHES: tuple[str, ...] = ("sm_90",)


@dataclass(frozen=True)
class KernelChoice:
    """Which module/function realises a descriptor, and why (for reports)."""

    family: str
    module: str
    function: str

    def load(self):
        fn = _LOADED.get((self.module, self.function))
        if fn is None:
            import importlib

            fn = getattr(importlib.import_module(self.module), self.function)
            _LOADED[(self.module, self.function)] = fn
        return fn


_LOADED: dict[tuple[str, str], object] = {}


def choose_kernel(desc: GEMMDesc, m: int | None = None, n: int | None = None) -> KernelChoice:
    """The kernel for ``desc`` (m, n only steer the workspace-GEMV choice; never the bytes)."""
    if desc.instruction == "tcgen05":
        raise UnsupportedDesc(
            "instruction=tcgen05 (sm_100/sm_103) has no fixbits kernel yet; supported: sm_90"
        )
    workspace_merge = reduce_1block_at_level0(desc)  # raises where no kernel realises that merge
    if desc.instruction in ("wgmma", "mma") and desc.arch not in SUPPORTED_ARCHES:
        raise UnsupportedDesc(
            f"arch={desc.arch}: tensor-core kernels are built for {', '.join(SUPPORTED_ARCHES)}"
        )
    if desc.instruction == "mma" and desc.in_dtype.startswith("fp8"):
        raise UnsupportedDesc("instruction=mma with fp8 inputs: Triton lowers fp8 dots to wgmma on sm_90")
    family = desc.family
    if family in ("single_pass", "per_mma", "splitk", "splitk_per_mma"):
        if any(c.layout != "contiguous" for c in desc.k_cuts):
            raise UnsupportedDesc(f"k_cuts {desc.k_cuts}: tensor-core kernels realise contiguous cuts only")
        if len(desc.k_cuts) > 2:
            raise UnsupportedDesc("k_cuts: tensor-core kernels realise at most two levels")
    if (
        family in ("gemv_contiguous", "gemv_lane_tree", "chained_chunks")
        and desc.k_cuts
        and desc.k_cuts[0].layout == "contiguous"
        and desc.k_cuts[0].count is not None
        and desc.k_cuts[0].count >= 2
        and len(desc.k_cuts) >= 2
        and m is not None
        and n is not None
        and m * n <= 4096
    ):
        family = "gemv_workspace"
    if workspace_merge:
        family = "gemv_workspace"  # cuBLAS's reduce_1Block merge: only the workspace kernel has it
    module, function = KERNEL_MODULES[family]
    return KernelChoice(family=family, module=module, function=function)
