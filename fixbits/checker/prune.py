"""The checker as an autotuner pruning predicate: benchmark only configs bitwise-equal to a reference.

    prune = EquivalencePrune()                      # reference: the first config
    @triton.autotune(configs, key=["N"], prune_configs_by={"early_config_prune": prune})
    @triton.jit
    def kernel(...): ...
    prune.bind(kernel)                              # optional: found from the autotuner otherwise

Triton's Autotuner calls ``early_config_prune(configs, named_args, **kwargs)`` with the
positional arguments of the launch by name and the keyword arguments of the call. Each config is
compiled ahead of time with exactly the JIT's specialisation of those arguments and the config's
constexprs and launch options (``fixbits.checker.compile.aot_compile``), for the current device's
target unless one is given; the configs whose signature equals the reference's are kept.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("fixbits.checker.prune")


@dataclass(frozen=True)
class PruneReport:
    """What one call of the predicate decided."""

    total: int
    kept: int
    dropped: int
    failed: int  # configs that did not compile (dropped too: the autotuner could not run them)
    reference: str  # signature digest the kept configs share


class EquivalencePrune:
    """``early_config_prune`` keeping the configs the checker certifies bitwise-equal to a reference.

    reference: None (the first config of the list), a ``triton.Config`` to compile as reference,
    or compiled text (PTX/AMDGCN) the caller produced. target: a ``GPUTarget`` (default: the active
    device's).
    """

    def __init__(
        self, reference: Any = None, target: Any = None, fn: Any = None, specialise: Sequence[str] = ()
    ):
        self.reference = reference
        self.target = target
        self.fn = fn
        # integer arguments (by name) the configs are compared at their call's value: give the
        # autotuner's key, whose values every reuse of the chosen config shares (an argument
        # outside the key may differ on reuse, and configs equal at one value may not be at another)
        self.specialise = tuple(specialise)
        self.last: PruneReport | None = None

    def bind(self, kernel: Any) -> EquivalencePrune:
        """Attach the kernel (a JITFunction or the Autotuner wrapping one)."""
        self.fn = kernel
        return self

    def _jit_fn(self) -> Any:
        fn = self.fn
        if fn is None:
            # called from Autotuner.prune_configs: the autotuner is the caller's `self`
            frame = inspect.currentframe()
            try:
                f = frame.f_back.f_back if frame and frame.f_back else None
                while f is not None:
                    cand = f.f_locals.get("self")
                    if cand is not None and hasattr(cand, "configs") and hasattr(cand, "fn"):
                        fn = cand
                        break
                    f = f.f_back
            finally:
                del frame
        if fn is None:
            raise RuntimeError("EquivalencePrune: no kernel bound; call .bind(kernel) after defining it")
        from triton.runtime.jit import JITFunction

        while not isinstance(fn, JITFunction):
            fn = fn.fn
        return fn

    def _target(self) -> Any:
        if self.target is not None:
            return self.target
        from triton.runtime import driver

        return driver.active.get_current_target()

    def launch_of(self, compiled: Any, named_args: dict[str, Any]) -> Any:
        """The call's integer arguments named in ``specialise`` as a launch specialisation (PTX
        only): the configs are then certified equal for those values only."""
        from fixbits.checker.launch import LaunchShape

        if (
            not self.specialise
            or isinstance(self.reference, str)
            or compiled.isa != "ptx"
            or not compiled.params
        ):
            return None
        ints = {
            i: v
            for i, name in enumerate(compiled.params)
            if name in self.specialise
            and isinstance(v := named_args.get(name), int)
            and not isinstance(v, bool)
        }
        return LaunchShape.of(ints) if ints else None

    def signature_of(self, fn: Any, config: Any, named_args: dict[str, Any], kwargs: dict[str, Any]) -> str:
        from fixbits.checker.api import signature
        from fixbits.checker.compile import aot_compile

        call_kwargs = {**kwargs, **config.all_kwargs()}
        compiled = aot_compile(fn, tuple(named_args.values()), call_kwargs, self._target())
        sig = signature(compiled.asm, compiled.isa, launch=self.launch_of(compiled, named_args))
        return sig.digest if sig.deterministic else f"nondeterministic:{id(config)}"

    def __call__(self, configs: Sequence[Any], named_args: dict[str, Any], **kwargs: Any) -> list[Any]:
        configs = list(configs)
        if len(configs) <= 1:
            return configs
        fn = self._jit_fn()
        if isinstance(self.reference, str):
            from fixbits.checker.api import signature

            ref = signature(self.reference).digest
        else:
            ref_cfg = self.reference if self.reference is not None else configs[0]
            try:
                ref = self.signature_of(fn, ref_cfg, named_args, kwargs)
            except Exception as e:  # noqa: BLE001 - cannot judge: keep the autotuner's full list
                log.warning(
                    "fixbits prune: reference %s did not compile (%s); keeping all %d configs",
                    ref_cfg,
                    e,
                    len(configs),
                )
                return configs
        kept, failed = [], 0
        for c in configs:
            try:
                sig = self.signature_of(fn, c, named_args, kwargs)
            except Exception as e:  # noqa: BLE001 - a config that does not compile cannot be benchmarked
                log.info("fixbits prune: %s did not compile: %s", c, e)
                failed += 1
                continue
            if sig == ref:
                kept.append(c)
        if not kept:
            log.warning("fixbits prune: no config equals the reference; keeping all %d", len(configs))
            kept = configs
        self.last = PruneReport(len(configs), len(kept), len(configs) - len(kept), failed, ref)
        log.info(
            "fixbits prune: kept %d of %d configs bitwise-equal to the reference, dropped %d (%d did not compile)",
            len(kept),
            len(configs),
            len(configs) - len(kept),
            failed,
        )
        return kept


def equivalent_configs(
    reference: Any = None, target: Any = None, fn: Any = None, specialise: Sequence[str] = ()
) -> EquivalencePrune:
    """Shorthand for ``EquivalencePrune(reference, target, fn, specialise)``."""
    return EquivalencePrune(reference, target, fn, specialise)
