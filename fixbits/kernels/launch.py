"""Direct launches of an already-compiled Triton kernel (the steady state of fixbits.matmul).

``kernel[grid](*args, **constexprs)`` costs tens of microseconds of Python per call in
Triton 3.6 (the binder, the cache key's str(options), device and global checks, the launch
metadata). ``DirectLaunch`` pays that once per argument specialisation: its first call goes
through ``kernel[grid]`` and keeps the CompiledKernel Triton returns; later calls whose
specialisation is the same call that kernel's launcher (``CompiledKernel.run``) with exactly
the arguments ``JITFunction.run`` would pass (grid, stream, function, packed metadata, launch
metadata, hooks, then every parameter in signature order, constexprs included).

What the binder would specialise on and may change between calls of one launch site: the
tensors' dtypes and 16-byte alignment, and the current device. They form the key of the
kept kernels; any other change (int arguments, constexprs, descriptor block shapes) needs a
new DirectLaunch, which fixbits.matmul's launch cache ensures (those are in its key). Launch
hooks (profilers; Triton 3.6 keeps them as HookChains, idle when empty), pre-run hooks, or a result that is not a CompiledKernel (the interpreter,
async compilation) send the call through ``kernel[grid]`` (the safe path). Not seen here:
a global a kernel reads changing after its first compile, or debug/instrumentation knobs
switched after the first call (both are fixed for fixbits' kernels in a process).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from triton import knobs
from triton.runtime.driver import driver as _driver

_MAX_KERNELS = 16
_MAX_MAPS = 64
# FIXBITS_DIRECT_LAUNCH=0: every launch through kernel[grid] (read when a launch site is built)
ENABLED = os.environ.get("FIXBITS_DIRECT_LAUNCH", "1") != "0"
# FIXBITS_RAW_RUN=0: every cached launch through kernel.run (TMA descriptors re-encoded per call)
RAW_RUN = os.environ.get("FIXBITS_RAW_RUN", "1") != "0"
# FIXBITS_INT_POINTERS=0: cached launches hand the launcher tensors, not their addresses
INT_POINTERS = os.environ.get("FIXBITS_INT_POINTERS", "1") != "0"
# tests only: CPU tensors stand in for CUDA ones, so their addresses go to the launcher too
ADDRESS_ANY_DEVICE = False


def _current_device_stream() -> tuple[int, int]:
    """(current device index, its current raw stream), read as JITFunction.run reads them."""
    drv = _driver.active
    dev = drv.get_current_device()
    return dev, drv.get_current_stream(dev)


def _idle(hook: Any) -> bool:
    """No launch hook to call: None, or Triton 3.6's HookChain with no calls (then the launcher
    calling it, with launch metadata built for it, does nothing)."""
    return hook is None or (type(hook).__name__ == "HookChain" and not hook.calls)


class DescForm:
    """The fixed fields of a tensor descriptor at one launch site (shape, strides, block shape,
    padding, as TensorDescriptor holds them). Compared by identity: RawRun keys encoded maps on
    (form, address), and a key holds its form, so an identity is never reused while keyed."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = dict(fields)


class DescAt:
    """A launch argument: the descriptor of ``form`` over ``base``, whose address the caller has
    read. RawRun encodes its map from (form, address) alone, once; every other path gets the
    TensorDescriptor itself (``descriptor()``), so building this per call costs one small object
    instead of a TensorDescriptor."""

    __slots__ = ("form", "base", "ptr")

    def __init__(self, form: DescForm, base: Any, ptr: int) -> None:
        self.form, self.base, self.ptr = form, base, ptr

    def descriptor(self) -> Any:
        """The TensorDescriptor, without from_tensor's validation: the launch site validated the
        form once (from_tensor built it) and checks each base's 16-byte alignment itself."""
        from triton.tools.tensor_descriptor import TensorDescriptor

        d = TensorDescriptor.__new__(TensorDescriptor)
        d.__dict__.update(self.form.fields)
        d.base = self.base
        return d


def _descriptors(args: Sequence[Any]) -> tuple[Any, ...]:
    """``args`` with each DescAt as the TensorDescriptor it stands for (Triton's own paths)."""
    return tuple(x.descriptor() if type(x) is DescAt else x for x in args)


class RawRun:
    """Triton 3.6's launcher minus its per-call Python: the scratch closures of
    ``CudaLauncher.__call__`` and the re-encoding of unchanged TMA descriptors.

    For a kernel with host tensor-descriptor parameters, ``CompiledKernel.run`` expands each
    TensorDescriptor into a CUtensorMap (``cuTensorMapEncodeTiled``) plus its shape and strides
    on every call, in a Python loop over every argument. The map is a pure function of the base
    pointer, shape, strides, padding and the kernel's descriptor metadata (block, swizzle, element
    type), so it is kept per those values and the raw C launcher is called with the same final
    arguments ``run`` would build. Built only when the launcher has exactly the structure of
    Triton 3.6 (``of`` returns None otherwise, and the caller keeps ``kernel.run``).
    """

    __slots__ = ("raw", "coop", "pdl", "slots", "meta", "encode", "maps")

    def __init__(
        self, raw: Any, coop: Any, pdl: Any, slots: tuple[int, ...], meta: list[Any], encode: Any
    ) -> None:
        self.raw, self.coop, self.pdl = raw, coop, pdl
        self.slots, self.meta, self.encode = slots, meta, encode
        self.maps: dict[tuple[Any, ...], list[Any]] = {}

    @staticmethod
    def of(kernel: Any) -> RawRun | None:
        run = getattr(kernel, "run", None)
        inner = getattr(run, "launch", None)
        code, cells = getattr(inner, "__code__", None), getattr(inner, "__closure__", None)
        if run is None or inner is None or type(run).__name__ != "CudaLauncher":
            return None
        if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
            return None  # scratch buffers are allocated per call by run itself
        if code is None:  # no descriptor parameter: 3.6 keeps the C launcher itself
            if type(inner).__name__ != "builtin_function_or_method":
                return None
            env = {"launcher": inner, "tensordesc_indices": set(), "tensordesc_meta": []}
        else:
            env = dict(zip(code.co_freevars, (c.cell_contents for c in cells or ()), strict=True))
            if set(env) != {"launcher", "tensordesc_indices", "tensordesc_meta"}:
                return None  # not 3.6's wrap_handle_tensordesc
        try:
            from triton.backends.nvidia import driver as nv
        except ImportError:
            return None
        if getattr(nv, "_BASE_ARGS_FORMAT", None) != "iiiKKppOOOOOO" or not hasattr(
            nv, "make_tensordesc_arg"
        ):
            return None  # the C launcher's leading arguments as 3.6 passes them
        meta = list(env["tensordesc_meta"] or [None] * len(env["tensordesc_indices"]))
        slots = tuple(sorted(env["tensordesc_indices"]))
        if len(meta) != len(slots):
            return None
        return RawRun(
            env["launcher"], run.launch_cooperative_grid, run.launch_pdl, slots, meta, nv.make_tensordesc_arg
        )

    def expand(self, args: tuple[Any, ...]) -> Any:
        """The kernel arguments as Triton's wrapper passes them to the C launcher."""
        if not self.slots:
            return args
        out = list(args)
        for j in range(len(self.slots) - 1, -1, -1):
            i, d, meta = self.slots[j], args[self.slots[j]], self.meta[j]
            at = type(d) is DescAt
            if meta is None:  # decomposed in the frontend: the base tensor itself is an argument
                out[i : i + 1] = self.encode(d.descriptor() if at else d, meta)
                continue
            if at:
                key: tuple[Any, ...] = (j, d.ptr, d.form)
            else:
                key = (j, d.base.data_ptr(), tuple(d.shape), tuple(d.strides), d.padding)
            hit = self.maps.get(key)
            if hit is None:
                if len(self.maps) >= _MAX_MAPS:
                    self.maps.clear()
                hit = self.maps[key] = self.encode(d.descriptor() if at else d, meta)
            out[i : i + 1] = hit
        return out

    def launch(self, g: tuple[int, int, int], stream: int, kernel: Any, args: tuple[Any, ...]) -> None:
        self.raw(g[0], g[1], g[2], stream, kernel.function, self.coop, self.pdl, None, None,
                 kernel.packed_metadata, None, None, None, *self.expand(args))  # fmt: skip


class DirectLaunch:
    """``launch(*args)`` == ``fn[grid](*args, **kwargs)``, minus Triton's per-call dispatch.

    ``args`` are the leading (runtime) parameters in signature order; ``kwargs`` name every
    remaining parameter (the constexprs) plus the compile options (num_warps, ...).
    """

    __slots__ = ("fn", "grid", "kwargs", "_tail", "_slots", "_kernels", "_direct", "_g")

    def __init__(self, fn: Any, grid: tuple[int, ...], kwargs: dict[str, Any]) -> None:
        self.fn = fn
        self.grid = tuple(grid)
        self.kwargs = dict(kwargs)
        g = self.grid + (1,) * (3 - len(self.grid))
        self._g = (g[0], g[1], g[2])
        self._tail: tuple[Any, ...] | None = None
        self._slots: tuple[int, ...] = ()
        # specialisation key -> (the CompiledKernel, its RawRun or None where kernel.run is kept)
        self._kernels: dict[tuple[Any, ...], tuple[Any, RawRun | None]] = {}
        # Triton's interpreter hands out InterpretedFunctions (no params, no compiled kernel)
        self._direct = ENABLED and hasattr(fn, "params") and hasattr(fn, "pre_run_hooks")

    def _settle(self, args: tuple[Any, ...]) -> None:
        """The constexpr tail (parameters after the runtime ones) and the tensor positions."""
        names = [p.name for p in self.fn.params]
        rest = names[len(args) :]
        if any(n not in self.kwargs for n in rest):
            self._direct = False  # a defaulted parameter: leave it to the binder
            return
        self._tail = tuple(self.kwargs[n] for n in rest)
        self._slots = tuple(i for i, x in enumerate(args) if hasattr(x, "data_ptr") and hasattr(x, "dtype"))

    def addressed(self, args: tuple[Any, ...], device: int) -> tuple[tuple[Any, ...], list[Any]]:
        """(key, the arguments with each CUDA tensor replaced by its address). The key is what
        the binder specialises on that can differ between calls of this launch site.

        Triton's C launcher turns a tensor argument into its address by calling data_ptr() and
        then cuPointerGetAttribute, a driver query, per pointer per launch; an int it takes as
        the address. The key reads every address anyway (for the alignment bit), so the launcher
        gets those. For a CUDA tensor the driver's answer is that same address; a tensor not on
        a CUDA device goes in as itself, for the launcher's own error.
        """
        out = list(args)
        parts: list[Any] = [device]
        ints = INT_POINTERS
        for i in self._slots:
            t = args[i]
            p = t.data_ptr()
            parts.append((t.dtype, p & 15 == 0))
            if ints and (t.is_cuda or ADDRESS_ANY_DEVICE):
                out[i] = p
        return tuple(parts), out

    def __call__(self, *args: Any) -> Any:
        if self._direct:
            rt = knobs.runtime
            if self._tail is None:
                self._settle(args)
            if (
                self._direct
                and _idle(rt.launch_enter_hook)
                and _idle(rt.launch_exit_hook)
                and not self.fn.pre_run_hooks
            ):
                dev, stream = _current_device_stream()
                key, flat = self.addressed(args, dev)
                hit = self._kernels.get(key)
                if hit is not None:
                    kernel, raw = hit
                    g = self._g
                    if raw is not None:
                        raw.launch(g, stream, kernel, (*flat, *self._tail))
                        return kernel
                    kernel.run(g[0], g[1], g[2], stream, kernel.function, kernel.packed_metadata, None, None, None,
                               *_descriptors(flat), *self._tail)  # fmt: skip
                    return kernel
                kernel = self.fn[self.grid](*_descriptors(args), **self.kwargs)
                if kernel is None or not hasattr(kernel, "packed_metadata"):
                    self._direct = False  # interpreter or async compile: always the binder
                    return kernel
                if len(self._kernels) >= _MAX_KERNELS:
                    self._kernels.clear()
                self._kernels[key] = (kernel, RawRun.of(kernel) if RAW_RUN else None)
                return kernel
        return self.fn[self.grid](*_descriptors(args), **self.kwargs)
