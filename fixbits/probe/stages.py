"""The K-loop step a heuristic answer's STAGES_ID implies, where the kernels follow it.

The sm80-style cutlass kernels cuBLASLt 13.1 runs on the H200 for ALGO_ID 23 and 24 walk K one
shared-memory stage at a time, and their descriptors' ``k_loop_step`` is that stage's depth: all
probed entries of those algos agree (e.g. ``..._s161616gemm_f16_32x32_128x2`` under STAGES_ID 20,
128x2, steps 128), and the two entries found wrong by matmul_check s15 had carried another
tile's step (fixed by taking the depth; benchmarks/reconstruction/h200/README.md, session 15).
Draws alone often cannot tell the steps apart (split spans shorter than the step, narrow outputs),
so the depth settles what they leave open; it never overrides a reading the draws reject.
"""

from __future__ import annotations

import re
from typing import Any

from fixbits.cublas.enums import stage_depth

# algos whose K-loop step is the stage depth (H200, cuBLASLt 13.1)
STAGE_STEP_ALGOS = frozenset({23, 24})

_KEY = re.compile(r"a(?P<a>\d+)-t\d+-s-?\d+-r\d+-w\d+-c\d+-g(?P<g>\d+)$")
# cutlass kernel names carry the CTA tile and the stage: ..._<M>x<N>_<K>x<stages>_...
_CUTLASS_TILE = re.compile(r"cutlass_\d+\w*?_(\d+)x(\d+)_(\d+)x(\d+)_")


def implied_step(answer: Any) -> int | None:
    """The step an answer (anything fixbits.probe.profile.answer_key takes) implies, or None when
    its algo does not follow the rule or its STAGES_ID has no depth."""
    from fixbits.probe.profile import answer_key

    m = _KEY.match(answer_key(answer))
    if m is None:
        return None
    return stage_depth(int(m["g"])) if int(m["a"]) in STAGE_STEP_ALGOS else None


def kernel_depth(kernel_names: str) -> int | None:
    """The stage depth in the name of the cutlass kernel a call launched (e.g. ``..._32x32_128x2_nn``
    -> 128), or None when no cutlass kernel with a tile is named (nvjet, gemv, reduce kernels)."""
    m = _CUTLASS_TILE.search(kernel_names)
    return int(m.group(3)) if m else None


def prefer_step(readings: list[Any], answer: Any) -> list[Any]:
    """Of several readings the draws leave, those whose K-loop step is the answer's implied step
    (all of them when none is, or when the answer implies none)."""
    step = implied_step(answer)
    if step is None:
        return readings
    kept = [d for d in readings if d.k_loop_step == step]
    return kept or readings


def disagreements(profile: Any) -> list[tuple[str, str, int, int]]:
    """(answer key, which descriptor, its step, the implied step) for every descriptor of a
    profile (variants included) whose step is not the one its answer implies."""
    out = []
    for key, entry in sorted(profile.entries.items()):
        step = implied_step(key)
        if step is None:
            continue
        for where, desc in [("entry", entry.desc)] + [
            (f"K [{v.k_min}, {v.k_max}]", v.desc) for v in entry.variants
        ]:
            if desc.k_loop_step != step:
                out.append((key, where, desc.k_loop_step, step))
    return out
