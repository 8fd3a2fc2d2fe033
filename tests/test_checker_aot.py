"""The AOT store of the soundness gate: the CPU pre-step writes kernels that load back by key,
and the install hook serves the JIT's compile request from the store instead of compiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "runners" / "device" / "checker_soundness.py"


def _build(tmp: Path) -> Path:
    store = tmp / "store"
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp / "cache"))
    cmd = [
        sys.executable,
        str(RUNNER),
        "--out",
        str(tmp / "o"),
        "--build-aot",
        str(store),
        "--only",
        "row_sum",
        "--max-cases",
        "2",
        "--workers",
        "1",
        "--budget-s",
        "300",
    ]
    subprocess.run(cmd, check=True, env=env, cwd=ROOT)
    return store


def test_store_round_trip_and_hit(tmp_path: Path) -> None:
    from fixbits.checker import aot_store
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.checker.soundness import cases, load_families
    from fixbits.corpus.common import Config, to_device

    store = _build(tmp_path)
    rows = [json.loads(x) for x in (store / "cases.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("error" not in r and len(r["keys"]) == 1 for r in rows)
    kern = [json.loads(x) for x in (store / "kernels.jsonl").read_text().splitlines()]
    assert {k["key"] for k in kern} == {r["keys"][0] for r in rows}
    assert all(k["digest"] for k in kern)
    k = aot_store.load(store, rows[0]["keys"][0], src=None)
    assert k is not None and "cubin" in k.asm and "ptx" not in k.asm
    assert aot_store.load(store, "0" * 32, src=None) is None

    # the same request again, through the hook: served from the store (the loaded kernel has no
    # PTX, so the CPU capture that wants PTX fails after the hit, which is what proves the hit)
    import triton
    import triton.compiler as tc

    fam = next(f for f in load_families() if f.name == "row_sum")
    case = next(c for c in cases(fam) if c.label() == rows[0]["label"] and c.dtype == rows[0]["dtype"])
    import importlib

    mod = importlib.import_module(fam.module)
    shape = dict(fam.shape)
    inputs = {n: to_device(v, "cpu") for n, v in mod.make_inputs(shape, case.dtype, "ordinary", 0).items()}
    stats: dict[str, int] = {}
    orig = tc.compile
    try:
        aot_store.install(store, stats)
        with pytest.raises(KeyError), capture_launches(gpu_target("sm_90")):
            mod.launch(inputs, shape, Config(case.blocks, case.num_warps, case.num_stages), case.pinned)
    finally:
        tc.compile = orig
        triton.compile = orig
    assert stats == {"hit": 1, "miss": 0}
