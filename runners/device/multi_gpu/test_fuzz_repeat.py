"""The fuzz sweep runners/device/multi_gpu_fuzz.py spreads over GPUs: for each seeded fuzz shape,
cuBLAS (torch.matmul, fp16) returns the same bytes on REPEATS calls with the same inputs.

One test per shape, id ``fuzz<i>``, so the xdist scheduler sends shape i to worker i mod n and
`fixbits report --check-shapes` can prove each shape ran exactly once. FIXBITS_FUZZ_COUNT,
FIXBITS_FUZZ_MAX_ELEMENTS and FIXBITS_FUZZ_DEVICE (cuda, or cpu for the dry run) set the sweep.
"""

from __future__ import annotations

import os

import pytest

from fixbits.shapes import fuzz_param_id, fuzz_shapes

COUNT = int(os.environ.get("FIXBITS_FUZZ_COUNT", "2000"))
MAX_ELEMENTS = int(os.environ.get("FIXBITS_FUZZ_MAX_ELEMENTS", str(1 << 22)))
DEVICE = os.environ.get("FIXBITS_FUZZ_DEVICE", "cuda")
REPEATS = int(os.environ.get("FIXBITS_FUZZ_REPEATS", "8"))


@pytest.mark.fuzz
@pytest.mark.parametrize("index", range(COUNT), ids=fuzz_param_id)
def test_matmul_repeats_bitwise(index: int, seed: int, drift, record_property) -> None:  # type: ignore[no-untyped-def]
    import torch

    if DEVICE == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to this worker")
    s = fuzz_shapes(seed, COUNT, max_elements=MAX_ELEMENTS)[index]
    g = torch.Generator(device=DEVICE).manual_seed(seed * 100_003 + index)
    a = torch.randn(s.m, s.k, device=DEVICE, dtype=torch.float16, generator=g)
    b = torch.randn(s.k, s.n, device=DEVICE, dtype=torch.float16, generator=g)
    first = torch.matmul(a, b)
    drift.context(shape=(s.m, s.n, s.k), dtype="fp16", fuzz_index=index)
    for _ in range(REPEATS - 1):
        drift.assert_equal(torch.matmul(a, b), first)
    if DEVICE == "cuda":  # the physical GPU (PCI bus) this worker computed on
        props = torch.cuda.get_device_properties(0)
        record_property("fixbits.device", str(getattr(props, "pci_bus_id", getattr(props, "uuid", "?"))))
