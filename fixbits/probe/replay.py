"""Re-run the prober's reasoning on walks recorded on a GPU, with no GPU.

reconstruct writes every probe's walks (evidence/<dtype>_<answer>.json). ``explain`` rebuilds
what the window walks observed, regenerates the candidates and keeps those that predict every
recorded ±L / r outcome, so a failed or surprising answer can be studied on CPU, and a
committed profile entry can be checked against what cuBLAS actually returned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fixbits.desc import GEMMDesc
from fixbits.probe import candidates as C
from fixbits.probe.plan import addresses, predict_many
from fixbits.probe.walks import SURVIVES


@dataclass(frozen=True)
class Recorded:
    """One probe's recorded walks: the shape, (r, +L, -L) -> outcome, the summed prefix."""

    shape: tuple[int, int, int]
    dtype: str
    out_dtype: str
    seen: dict[tuple[int, int, int], int]
    keff: int
    hints: dict[str, Any]
    desc: GEMMDesc | None


def load_recorded(path: str | Path, *, dtype: str | None = None, out_dtype: str = "fp32") -> Recorded:
    doc = json.loads(Path(path).read_text())
    m, n, k = (int(x) for x in doc["shape"])
    seen: dict[tuple[int, int, int], int] = {}
    for w in doc.get("walks", []):
        if w["walk"] in ("summed", "dtypes", "rule"):
            continue
        for t, o in zip(w["triples"], w["outcomes"], strict=True):
            seen[(int(t[0]), int(t[1]), int(t[2]))] = int(o)
    desc = GEMMDesc.from_dict(doc["desc"], where=f"{path}: desc") if doc.get("desc") else None
    in_dtype = dtype or (desc.in_dtype if desc else Path(path).name.split("_a")[0])
    hints = {h: v for h, v in (doc.get("hints") or {}).items() if h != "extra_shapes"}
    return Recorded((m, n, k), in_dtype, out_dtype, seen, k - int(doc.get("dropped_tail", 0)), hints, desc)


def explains(desc: GEMMDesc, rec: Recorded) -> bool:
    """True when ``desc`` predicts every recorded ±L / r outcome."""
    if not rec.seen:
        return True
    t = np.array(list(rec.seen), dtype=np.int64)
    o = np.array(list(rec.seen.values()), dtype=np.int8)
    return bool(np.array_equal(predict_many(addresses(desc, rec.shape[2]), t[:, 0], t[:, 1], t[:, 2]), o))


def explain(rec: Recorded, arch: str = "sm_90", *, use_hints: bool = True, limit: int = 50) -> list[GEMMDesc]:
    """Candidates (partial/merge dtypes left at fp32) that explain every recorded outcome."""
    k = rec.shape[2]
    gseen = sorted(t[0] for t in rec.seen if t[1:] == (t[0] - 2, t[0] - 1))
    rseen = sorted(t[1] for t in rec.seen if t[0] == t[1] - 1 and t[2] == t[1] + 1)
    gt = [z for z in gseen if rec.seen[(z, z - 2, z - 1)] == SURVIVES]
    rt = [b for b in rseen if rec.seen[(b - 1, b, b + 1)] == SURVIVES]
    head = [z for z in gseen if z < min(rec.keff, 512)]
    scalar = bool(head) and sum(1 for z in head if z in set(gt)) >= 0.5 * len(head)
    obs = C.Observed(k, rec.keff, tuple(rt), tuple(rseen), tuple(gt), tuple(gseen), scalar)
    out: list[GEMMDesc] = []
    for d in C.generate(arch, rec.dtype, rec.out_dtype, obs, rec.hints if use_hints else {}):
        if explains(d, rec):
            out.append(d)
            if len(out) >= limit:
                break
    return out
