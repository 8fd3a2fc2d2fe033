"""The sweep's counter-hash operands: drawn whole by torch (any device), redrawn row by row and
column by column by numpy, bit for bit (the CPU check depends on it)."""

from __future__ import annotations

import numpy as np
import pytest

from fixbits.cublas.backend import to_numpy
from fixbits.numerics.formats import bits
from fixbits.probe import hashdraw as H

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8_e4m3"])
@pytest.mark.parametrize("kind", ["ordinary", "wide"])
def test_numpy_redraws_the_torch_operand(dtype: str, kind: str) -> None:
    shape = (29, 517)
    full = to_numpy(H.operand(shape, dtype, kind, 4242, "cpu"), dtype)
    rows, cols = [0, 7, 28], [0, 300, 516]
    assert np.array_equal(bits(full[rows]), bits(H.numpy_rows(shape, rows, dtype, kind, 4242)))
    assert np.array_equal(bits(full[:, cols]), bits(H.numpy_cols(shape, cols, dtype, kind, 4242)))
    f = full.astype(np.float64)
    assert np.isfinite(f).all() and 0.5 < f.std() and (f != 0).mean() > 0.95
    if kind == "wide":
        assert np.abs(f).max() > 16 * np.abs(full.astype(np.float64)).min() + 8  # exponents spread
    other = to_numpy(H.operand(shape, dtype, kind, 4243, "cpu"), dtype)
    assert (bits(other) != bits(full)).mean() > 0.5  # another seed, another draw
