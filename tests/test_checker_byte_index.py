"""The byte index of long shared-memory histories (thread_roots._touching, session 33): a read
looks up the stores that may write its bytes instead of scanning every store of its history.
On Triton's PTX with long histories every signature is the one the scan gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_checker_helpers import corpus_family_inputs

from fixbits.checker.api import signature


def _texts(monkeypatch: Any, tmp_path: Any, kernel: str, points: list[tuple[dict, int]]) -> list[str]:
    """Triton's sm_90 PTX of the pinned (tree-order) variant, fp32, at (blocks, warps) points:
    its partials cross warps through shared memory level by level, so reads see long
    histories."""
    from fixbits.checker.compile import capture_launches, gpu_target
    from fixbits.corpus.common import Config

    _, mod, shape, inputs = corpus_family_inputs(kernel, "fp32", monkeypatch, tmp_path)
    out = []
    for blocks, warps in points:
        with capture_launches(gpu_target("sm_90")) as got:
            mod.launch(inputs, shape, Config(tuple(blocks.items()), warps, 1), True)
        (c,) = got
        out.append(c.asm)
    return out


def test_byte_index_gives_the_scan(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """Pinned middle-axis sums at 2 and 4 warps and column sums at 4 and 8 warps, whose shared
    histories are long: the index is used, and every signature is the one a scan of every store
    gives."""
    pytest.importorskip("triton")
    import fixbits.checker.thread_roots as tr

    mid = [
        ({"BLOCK_B": 2, "BLOCK_C": 16}, 2),
        ({"BLOCK_B": 1, "BLOCK_C": 16}, 2),
        ({"BLOCK_B": 2, "BLOCK_C": 16}, 4),
    ]
    texts = _texts(monkeypatch, tmp_path, "mid_axis_sum", mid)
    texts += _texts(monkeypatch, tmp_path, "col_sum", [({"BLOCK_N": 8}, 4), ({"BLOCK_N": 16}, 8)])
    looked_up = []
    real = tr.ThreadEval._prefix_of_index

    def counting(self: Any, hist: Any, stores: Any) -> int | None:
        got = real(self, hist, stores)
        looked_up.append(got is not None)
        return got

    monkeypatch.setattr(tr.ThreadEval, "_prefix_of_index", counting)
    indexed = [signature(t, "ptx") for t in texts]
    assert any(looked_up)
    for s in indexed:
        assert s.fallback is None, s.fallback
    monkeypatch.setattr(tr, "_INDEX_MIN", 10**9)
    assert [signature(t, "ptx").digest for t in texts] == [s.digest for s in indexed]
