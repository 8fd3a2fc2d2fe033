"""GPU half of the checker's soundness gate: every pair the checker certifies equal returns the
same bytes on every draw (ordinary and wide exponents, several seeds).

The configs launch through the JIT exactly as a user's call would; the PTX the checker reads is
the PTX of the kernels that ran. True classes are measured by bytes; the over-split factor
(checker classes / true classes) is recorded per kernel, as in the paper's Table 3. The full
sweep (>= 5,000 configs) is runners/device/checker_soundness.py; this is its CI-sized slice.
"""

from __future__ import annotations

import hashlib
import importlib
from typing import Any

import pytest

from fixbits.checker.soundness import cases, gate_meta, load_families, partition

pytestmark = [pytest.mark.checker_soundness, pytest.mark.gpu, pytest.mark.nvidia]

FAMILIES = {f.name: f for f in load_families()}
SLICE = ("row_sum", "softmax", "layernorm_fwd", "gemm_plain", "gemm_bias_relu", "gemm_kgroup", "attn_fwd")


@pytest.fixture(scope="module")
def launched() -> Any:
    """The CompiledKernels of each launch, captured where the JIT fetches their launch metadata."""
    from triton.compiler.compiler import CompiledKernel

    got: list[Any] = []
    orig = CompiledKernel.launch_metadata

    def launch_metadata(self: Any, grid: Any, stream: Any, *args: Any) -> Any:
        got.append(self)
        return orig(self, grid, stream, *args)

    CompiledKernel.launch_metadata = launch_metadata  # type: ignore[method-assign]
    yield got
    CompiledKernel.launch_metadata = orig  # type: ignore[method-assign]


def _bytes_digest(outs: dict[str, Any]) -> tuple[str, bool]:
    import torch

    h = hashlib.sha256()
    nonzero = False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    for name in sorted(outs):
        t = outs[name].detach().contiguous()
        b = t.view(ints[t.element_size()])  # raw bits: +0/-0 and NaN payloads stay distinct
        nonzero = nonzero or bool((b != 0).any().item())
        h.update(name.encode())
        h.update(b.cpu().numpy().tobytes())
    return h.hexdigest(), nonzero


@pytest.mark.parametrize("family", SLICE)
def test_certified_equal_means_identical_bytes(
    family: str, seed: int, launched: Any, record_property: Any
) -> None:
    import torch

    from fixbits.checker.api import signature
    from fixbits.corpus.common import Config, to_device

    fam = FAMILIES[family]
    meta = gate_meta()
    mod = importlib.import_module(fam.module)
    shape = dict(fam.shape)
    draws = [(k, seed + s) for s in meta["seeds"] for k in meta["kinds"]]
    for dtype in fam.dtypes[:1]:
        inputs = {
            d: {k: to_device(v, "cuda") for k, v in mod.make_inputs(shape, dtype, *d).items()} for d in draws
        }
        items: list[tuple[str, str | None]] = []
        labels: list[str] = []
        for c in cases(fam, cpu=True):
            if c.dtype != dtype:
                continue
            cfg = Config(c.blocks, c.num_warps, c.num_stages)
            per_draw = []
            sig = None
            any_nonzero = False
            for d in draws:
                launched.clear()
                outs = mod.launch(inputs[d], shape, cfg, c.pinned, **dict(fam.launch_kwargs))
                torch.cuda.synchronize()
                if sig is None:
                    sig = "|".join(signature(k.asm["ptx"], "ptx").digest for k in launched)
                digest, nz = _bytes_digest(outs)
                per_draw.append(digest)
                any_nonzero = any_nonzero or nz
            assert any_nonzero, f"{family}/{dtype} {c.label()}: all-zero outputs on every draw (seed={seed})"
            items.append((sig or "", "/".join(per_draw)))
            labels.append(c.label())
        checker, true, pairs, impure = partition(items)
        record_property(f"{dtype}_configs", len(items))
        record_property(f"{dtype}_checker_classes", checker)
        record_property(f"{dtype}_true_classes", true)
        record_property(f"{dtype}_over_split", round(checker / true, 3) if true else None)
        bad = []
        if pairs:
            by_sig: dict[str, list[int]] = {}
            for i, (s, _) in enumerate(items):
                by_sig.setdefault(s, []).append(i)
            bad = [[labels[i] for i in idx] for idx in by_sig.values() if len({items[i][1] for i in idx}) > 1]
        assert pairs == 0, (
            f"{family}/{dtype}: the checker certified {pairs} pairs equal whose bytes differ "
            f"(seed={seed}, draws={draws}): {bad[:3]}"
        )
