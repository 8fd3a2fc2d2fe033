"""Ahead-of-time compiles of corpus kernels (no GPU needed): PTX for tests and the static checker."""

from __future__ import annotations

from dataclasses import dataclass

from fixbits.corpus.common import Config
from fixbits.corpus.registry import CorpusEntry


@dataclass(frozen=True)
class CompiledKernel:
    """One compiled kernel of a corpus entry: its name, mode, config label and assembly."""

    kernel: str
    function: str
    dtype: str
    pinned: bool
    config: str
    ptx: str
    ttgir: str


def compile_entry(entry: CorpusEntry, dtype: str, cfg: Config, pinned: bool, *, arch: int = 90,
                  cpu_shape: bool = False, shape: dict[str, int] | None = None) -> list[CompiledKernel]:
    """triton.compile(ASTSource, target=GPUTarget('cuda', arch, 32)) for every kernel the entry launches."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fixbits.corpus.common import kernel_for

    mod = entry.load()
    out = []
    shp = shape if shape is not None else entry.shape_dict(cpu=cpu_shape)
    for fn, sig, consts in mod.aot(shp, dtype, cfg):
        k = kernel_for(fn, pinned)
        src = ASTSource(k, signature=sig, constexprs=consts)
        ck = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                            options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
        out.append(CompiledKernel(entry.name, fn.__name__, dtype, pinned, cfg.label(), ck.asm["ptx"],
                                  ck.asm.get("ttgir", "")))
    return out
