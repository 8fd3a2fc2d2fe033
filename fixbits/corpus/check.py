"""Run one corpus (kernel, dtype) over its config space, pinned and free, and judge the bytes.

Used by suites/enforcement (GPU and interpreter) and runners/device/enforcement_check.py.
Digests are sha256 of the raw output bytes; model equality is a raw-bit comparison.
"""

from __future__ import annotations

import hashlib
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fixbits.corpus.common import Config, to_device, to_host
from fixbits.corpus.registry import CorpusEntry


@dataclass(frozen=True)
class ConfigRun:
    """Digests of every output of one config, pinned and free (error text if it crashed)."""

    config: str
    pinned: tuple[tuple[str, str], ...]
    free: tuple[tuple[str, str], ...]
    error: str = ""


@dataclass(frozen=True)
class ModelDiff:
    """Pinned output vs the CPU tree model for one output of one config."""

    output: str
    config: str
    equal: bool
    count: int
    first_index: int
    got_bits: str
    want_bits: str


@dataclass(frozen=True)
class PairCheck:
    """The verdict for one (kernel, dtype, kind, seed) over the whole config space."""

    kernel: str
    dtype: str
    kind: str
    seed: int
    shape: tuple[tuple[str, int], ...]
    runs: tuple[ConfigRun, ...]
    model: tuple[ModelDiff, ...] = field(default_factory=tuple)

    def classes(self, mode: str) -> dict[str, int]:
        """Distinct digests per output across configs that ran ('pinned' or 'free')."""
        seen: dict[str, set[str]] = {}
        for r in self.runs:
            if r.error:
                continue
            for name, dg in getattr(r, mode):
                seen.setdefault(name, set()).add(dg)
        return {k: len(v) for k, v in seen.items()}

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(f"{r.config}: {r.error}" for r in self.runs if r.error)

    @property
    def pinned_invariant(self) -> bool:
        c = self.classes("pinned")
        return bool(c) and all(v == 1 for v in c.values()) and not self.errors

    @property
    def model_equal(self) -> bool:
        return all(m.equal for m in self.model)

    def golden(self) -> dict[str, str]:
        """Pinned digests (one per output) when invariant; empty otherwise."""
        if not self.pinned_invariant:
            return {}
        ok = [r for r in self.runs if not r.error]
        return dict(ok[0].pinned)


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _uint_view(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def model_diff(name: str, cfg: str, got: np.ndarray, want: np.ndarray) -> ModelDiff:
    if got.shape != want.shape or got.dtype.itemsize != want.dtype.itemsize:
        return ModelDiff(name, cfg, False, -1, -1, f"{got.dtype}{got.shape}", f"{want.dtype}{want.shape}")
    g, w = _uint_view(got).reshape(-1), _uint_view(want).reshape(-1)
    bad = np.nonzero(g != w)[0]
    if bad.size == 0:
        return ModelDiff(name, cfg, True, 0, -1, "", "")
    i = int(bad[0])
    return ModelDiff(name, cfg, False, int(bad.size), i, f"{int(g[i]):#x} ({got.reshape(-1)[i]!r})",
                     f"{int(w[i]):#x} ({want.reshape(-1)[i]!r})")


def run_config(mod: Any, dev_inputs: dict[str, Any], shape: dict[str, int], cfg: Config, pinned: bool | str,
               aux: bool = True) -> dict[str, np.ndarray]:
    outs = mod.launch(dev_inputs, shape, cfg, pinned, aux=aux)
    return {k: to_host(v) for k, v in outs.items()}


def check_pair(entry: CorpusEntry, dtype: str, kind: str, seed: int, device: str, *, cpu_shape: bool = False,
               configs: tuple[Config, ...] | None = None, with_free: bool = True,
               with_variants: bool = False, variant_limit: int | None = None, log: Any = None) -> PairCheck:
    """Run every config pinned (and free), compare pinned bytes across configs and to the model.

    Pinned variants of the entry (kernels written for the tree) run over their own spaces when
    the full space is checked (``configs is None``) or ``with_variants``; their bytes join the
    pinned classes, so one class means every variant agrees with the rewrite too.
    """
    mod = entry.load()
    shape = entry.shape_dict(cpu=cpu_shape)
    inputs = mod.make_inputs(shape, dtype, kind, seed)
    dev_inputs = {k: to_device(v, device) for k, v in inputs.items()}
    runs: list[ConfigRun] = []
    diffs: list[ModelDiff] = []
    modeled = False
    for cfg in configs if configs is not None else entry.configs():
        try:
            p = run_config(mod, dev_inputs, shape, cfg, True)
            f = run_config(mod, dev_inputs, shape, cfg, False) if with_free else {}
            runs.append(ConfigRun(cfg.label(), tuple((k, digest(v)) for k, v in sorted(p.items())),
                                  tuple((k, digest(v)) for k, v in sorted(f.items()))))
            # The model check on every config would cost CPU time for nothing once the pinned bytes
            # agree; it runs on the first config and on any config whose bytes differ.
            first = not modeled
            differs = bool(runs[0].pinned != runs[-1].pinned)
            if first or differs:
                ref = mod.reference(inputs, p)
                for name, want in ref.items():
                    diffs.append(model_diff(name, cfg.label(), p[name], want))
                modeled = True
            if log is not None:
                log(f"  {entry.name}/{dtype}/{kind} {cfg.label()}: ok")
        except Exception as e:  # a crashed config is reported, the rest go on
            msg = f"{type(e).__name__}: {e}".splitlines()
            tail = traceback.format_exc().strip().splitlines()[-3:]
            runs.append(ConfigRun(cfg.label(), (), (), " | ".join(msg[:6] + tail)[:2000]))
            if log is not None:
                log(f"  {entry.name}/{dtype}/{kind} {cfg.label()}: ERROR {runs[-1].error[:600]}")
    # Pinned variants (the kernel written for the tree): pinned bytes only, same class required.
    for vname, _ in entry.variants if configs is None or with_variants else ():
        for cfg in entry.variant_configs(vname)[:variant_limit]:
            label = f"{vname}:{cfg.label()}"
            try:
                p = run_config(mod, dev_inputs, shape, cfg, vname)
                runs.append(ConfigRun(label, tuple((k, digest(v)) for k, v in sorted(p.items())), ()))
                if log is not None:
                    log(f"  {entry.name}/{dtype}/{kind} {label}: ok")
            except Exception as e:  # reported, the rest go on
                msg = f"{type(e).__name__}: {e}".splitlines()
                tail = traceback.format_exc().strip().splitlines()[-3:]
                runs.append(ConfigRun(label, (), (), " | ".join(msg[:6] + tail)[:2000]))
    return PairCheck(entry.name, dtype, kind, seed, tuple(sorted(shape.items())), tuple(runs), tuple(diffs))
