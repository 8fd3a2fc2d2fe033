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


@dataclass(frozen=True)
class PtxCounts:
    """What a reduction costs in one compiled kernel: shuffles, shared-memory traffic, barriers."""

    shfl: int
    st_shared: int
    ld_shared: int
    bar: int
    f32_add: int
    ld_global: int
    convert_layout: int

    @staticmethod
    def of(ptx: str, ttgir: str = "") -> PtxCounts:
        return PtxCounts(ptx.count("shfl.sync"), ptx.count("st.shared"), ptx.count("ld.shared"), ptx.count("bar.sync"),
                         ptx.count("add.f32") + ptx.count("add.rn.f32"), ptx.count("ld.global"),
                         ttgir.count("ttg.convert_layout"))


class _CompileOnlyDriver:
    """Stands in for the CUDA driver so a JIT launch compiles for ``arch`` and launches nothing."""

    def __init__(self, arch: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> object:
        return self.target


def compile_launch(entry: CorpusEntry, dtype: str, cfg: Config, how: bool | str, *, arch: int = 90,
                   shape: dict[str, int] | None = None) -> list[CompiledKernel]:
    """Compile exactly what ``launch(..., cfg, how)`` would compile on a GPU, on a CPU.

    Why not compile_entry: the JIT specialises on the arguments (16-byte divisible pointers and
    ints), which decides vector widths and layouts. Here the module's own launch() runs on torch
    "meta" tensors (data_ptr 0: aligned, like fresh CUDA allocations) with a driver that only
    compiles, so variants (``how`` = a variant name) and multi-kernel launches come out as the GPU
    sees them. Not thread-safe: it swaps Triton's active driver and JIT entry for the call.
    """
    import torch
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    from fixbits.corpus.common import torch_dtype

    mod = entry.load()
    shp = shape if shape is not None else entry.shape_dict()
    host = mod.make_inputs(shp, dtype, "ordinary", 0)
    meta = {}
    for k, v in host.items():
        name = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3",
                "float8_e5m2": "fp8_e5m2"}.get(v.dtype.name)
        tdt = torch_dtype(name) if name else getattr(torch, v.dtype.name)
        meta[k] = torch.empty(v.shape, dtype=tdt, device="meta")
    got: list[tuple[str, object]] = []
    orig_run = JITFunction.run
    saved = driver._active

    def run(self: JITFunction, *args: object, grid: object, warmup: bool, **kw: object) -> object:
        k = orig_run(self, *args, grid=grid, warmup=True, **kw)
        got.append((self.__name__, k))
        return k

    driver.set_active(_CompileOnlyDriver(arch))  # type: ignore[arg-type]
    JITFunction.run = run  # type: ignore[method-assign]
    try:
        mod.launch(meta, shp, cfg, how, aux=False)
    finally:
        JITFunction.run = orig_run  # type: ignore[method-assign]
        driver._active = saved
    label = cfg.label() if how in (True, False) else f"{how}:{cfg.label()}"
    return [CompiledKernel(entry.name, name, dtype, how is not False, label, k.asm["ptx"], k.asm.get("ttgir", ""))
            for name, k in got]
