"""Ahead-of-time compile helpers for the kernel tests (no GPU: triton.compile to PTX for sm_90)."""

from __future__ import annotations

import inspect
from typing import Any

from fixbits.kernels.precompile import CompileOnlyDriver


def compile_ptx(fn: Any, types: dict[str, str], constexprs: dict[str, Any], *, num_warps: int = 4,
                num_stages: int = 3, arch: int = 90) -> str:  # fmt: skip
    """PTX of a @triton.jit kernel; ``types`` maps pointer/scalar args ('*fp16', 'i32', 'fp32')."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(inspect.signature(fn.fn).parameters)
    sig: dict[str, str] = {}
    cx: dict[Any, Any] = {}
    for i, name in enumerate(names):
        if name in constexprs:
            sig[name] = "constexpr"
            cx[(i,)] = constexprs[name]
        elif name in types:
            sig[name] = types[name]
        else:
            sig[name] = "i32"
    src = ASTSource(fn=fn, signature=sig, constexprs=cx)
    opts = {"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": False}
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=opts)
    return k.asm["ptx"]


class Sm90Launches:
    """While active, every ``kernel[grid](...)`` launch compiles for sm_90 instead of running.

    The arguments go through Triton's own runtime binder (the specialisation of ints equal to
    1, pointer alignment, None, tensor descriptors), so a kernel that compiles here compiles on
    the GPU with the same host code; the compiled kernels are kept in ``self.kernels``.
    """

    def __init__(self, arch: int = 90) -> None:
        self.arch = arch
        self.kernels: list[Any] = []
        self._saved: Any = None

    def __enter__(self) -> Sm90Launches:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend
        from triton.compiler import compile as tcompile
        from triton.runtime import jit

        target = GPUTarget("cuda", self.arch, 64)
        backend = make_backend(target)
        binders: dict[Any, Any] = {}
        sink = self.kernels

        def run(fn: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            kwargs["debug"] = False
            if fn not in binders:
                binders[fn] = jit.create_function_from_signature(fn.signature, fn.params, backend)
            bound, spec, options = binders[fn](*args, **kwargs)
            options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, spec, options)
            k = tcompile(ASTSource(fn, signature, constexprs, attrs), target=target, options=options.__dict__)
            sink.append(k)
            return k

        self._saved = jit.JITFunction.run
        jit.JITFunction.run = run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from triton.runtime import jit

        jit.JITFunction.run = self._saved  # type: ignore[method-assign]


class Sm90Driver(CompileOnlyDriver):
    """Triton's active driver on a machine without a GPU (fixbits.kernels.precompile's
    CompileOnlyDriver: device 0, stream 0, target sm_90), recording every launch.

    With it active, ``kernel[grid](...)`` runs Triton's real JITFunction.run (binder, kernel
    cache, triton.compile for sm_90, launch metadata, the launcher call) and so does a
    fixbits.kernels.launch.DirectLaunch; only the last step, the driver's launch of the
    cubin, is replaced: every launch is recorded in ``self.launches`` as
    (kernel hash, grid, stream, kernel arguments), launch hooks called as the C launcher
    calls them. Used to show that two launch paths launch the same compiled kernel with the
    same arguments, and to count host time with the launch itself stubbed.
    """

    active: Sm90Driver | None = None

    def __init__(self, arch: int = 90, *, record: bool = True) -> None:
        super().__init__(arch)
        self.record = record
        self.launches: list[tuple[str, tuple[int, int, int], int, tuple[Any, ...]]] = []

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    class launcher_cls(CompileOnlyDriver.launcher_cls):  # noqa: N801 (Triton's attribute name)
        def __call__(self, gx: int, gy: int, gz: int, stream: int, function: Any, *args: Any) -> None:
            metadata, enter, leave = args[1], args[2], args[3]
            if enter is not None:  # as the C launcher does around cuLaunchKernelEx
                enter(metadata)
            if leave is not None:
                leave(metadata)
            drv = Sm90Driver.active
            if drv is not None and drv.record:
                # args: packed metadata, launch metadata, enter hook, exit hook, then the kernel's
                drv.launches.append((self.hash, (gx, gy, gz), stream, tuple(args[4:])))

    def __enter__(self) -> Sm90Driver:
        super().__enter__()
        self._prev_active = Sm90Driver.active
        Sm90Driver.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        Sm90Driver.active = self._prev_active


class CudaLauncher:
    """A launcher with the structure of Triton 3.6's CudaLauncher (its ``launch`` is Triton's own
    ``wrap_handle_tensordesc`` around the C launcher), so fixbits.kernels.launch.RawRun takes it.
    The C launcher is ``RawSm90Driver.c_launcher``: by default a builtin that ignores its
    arguments (what RawRun needs to see for a kernel with no tensor descriptors); a recorder
    when a test sets one."""

    def __init__(self, src: Any, metadata: Any) -> None:
        from triton.backends.nvidia import driver as nv

        self.hash = metadata.hash
        signature = dict(src.signature)
        meta = getattr(metadata, "tensordesc_meta", None)
        c = RawSm90Driver.c_launcher
        if c is None or not any(isinstance(s, str) and s.startswith("tensordesc") for s in signature.values()):
            c = "".format  # a builtin taking any arguments: the C launcher's kind
        self.launch = nv.wrap_handle_tensordesc(c, signature, meta)
        self.global_scratch_size = metadata.global_scratch_size
        self.profile_scratch_size = metadata.profile_scratch_size
        self.launch_cooperative_grid = metadata.launch_cooperative_grid
        self.launch_pdl = metadata.launch_pdl

    def __call__(self, gx: int, gy: int, gz: int, stream: int, function: Any, *args: Any) -> None:
        self.launch(gx, gy, gz, stream, function, self.launch_cooperative_grid, self.launch_pdl, None, None, *args)


class RawSm90Driver(CompileOnlyDriver):
    """CompileOnlyDriver whose launcher is CudaLauncher-shaped, so the cached launches take
    RawRun's path as on the GPU; CUtensorMap encoding (a driver call) becomes a token
    ``("map", address, block shape)`` followed by the shape and strides, as Triton appends them.
    ``c_launcher``: a recorder of the C launcher's final argument lists for TMA kernels."""

    launcher_cls = CudaLauncher
    c_launcher: Any = None

    def __enter__(self) -> RawSm90Driver:
        from triton.backends.nvidia import driver as nv

        super().__enter__()
        self._encode = nv.make_tensordesc_arg

        def encode(arg: Any, meta: Any) -> list[Any]:
            if meta is None:
                return self._encode(arg, meta)
            return [("map", arg.base.data_ptr(), tuple(meta["block_size"])), *arg.shape, *arg.strides]

        nv.make_tensordesc_arg = encode
        return self

    def __exit__(self, *exc: object) -> None:
        from triton.backends.nvidia import driver as nv

        nv.make_tensordesc_arg = self._encode
        RawSm90Driver.c_launcher = None
        super().__exit__(*exc)
