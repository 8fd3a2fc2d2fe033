"""step_candidates.parting_seed: the device replay of an ambiguous narrow answer needs a draw on
which its readings part; the seed search finds one at the recorded shape (found by emulating
the very spike draw matmul_replay makes), and says so when the readings are one class there."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _scripts import load_script

from fixbits.desc import GEMMDesc

pytestmark = pytest.mark.unit

# a24-like readings of a bf16->bf16 answer: K-loop step 32 or 64 with the residue turn first
BASE = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="bf16", out_dtype="bf16",
                residue="first")
READINGS = [BASE.replace(k_loop_step=32), BASE.replace(k_loop_step=64)]


def _module() -> Any:
    return load_script("benchmarks/reconstruction/step_candidates.py", "step_candidates")


def test_a_seed_parts_readings_the_recorded_cells_did_not() -> None:
    mod = _module()
    got = mod.parting_seed(READINGS, 40, 8, 1000, "bf16", 24)  # 1000 = 15 * 64 + 40: the turns differ
    assert got is not None and got[1] == got[2] == 2, got
    from matmul_check import draw_operands

    from fixbits.emulate import emulate
    from fixbits.kernels.backend import to_numpy
    from fixbits.numerics.formats import bits

    a, b = (to_numpy(x, "bf16") for x in draw_operands(40, 8, 1000, "bf16", got[0], 2, device="cpu", spikes=True))
    outs = [bits(emulate(r, a, b)) for r in READINGS]
    assert not np.array_equal(*outs), f"seed {got[0]}: the readings did not part on the full draw"


def test_no_seed_where_the_readings_are_one_class() -> None:
    """At K a multiple of both steps the residue turn is empty: one tree, nothing to search."""
    assert _module().parting_seed(READINGS, 40, 8, 1024, "bf16", 24) is None


@pytest.mark.parametrize("d", [0, 1, 2])
def test_the_searched_cells_are_the_replay_draws_cells(d: int) -> None:
    """parting_seed emulates draw_cells (A's first rows, B's first columns, rebuilt on the host);
    they are the bits of the same cells of the whole draw matmul_replay makes, spike draw included."""
    _module()  # puts runners/device on the path
    from matmul_check import draw_cells, draw_operands

    from fixbits.kernels.backend import to_numpy

    a, b = (to_numpy(x, "bf16") for x in draw_operands(300, 20, 1000, "bf16", 5, d, device="cpu", spikes=True))
    a_r, b_c = draw_cells(300, 20, 1000, "bf16", 5, d, 32, 8, spikes=True)
    assert np.array_equal(a[:32].view(np.uint16), a_r.view(np.uint16)), f"draw {d}: A's rows differ"
    assert np.array_equal(b[:, :8].view(np.uint16), b_c.view(np.uint16)), f"draw {d}: B's columns differ"

