"""fixbits.kernels.launch.RawRun: the cached launch calls Triton 3.6's C launcher with exactly the
arguments ``CompiledKernel.run`` would pass it, TMA descriptors encoded once per distinct
(base pointer, shape, strides, padding).

No GPU: the C launcher is replaced by a recorder and the CUtensorMap encoder by a counting
stand-in (the real one needs a driver); Triton's own ``wrap_handle_tensordesc`` builds the
reference wrapper, so the reference argument list is Triton's, not ours.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
nv = pytest.importorskip("triton.backends.nvidia.driver")

from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from fixbits.kernels.launch import DescAt, DescForm, RawRun  # noqa: E402

pytestmark = pytest.mark.skipif(
    getattr(nv, "_BASE_ARGS_FORMAT", None) != "iiiKKppOOOOOO", reason="RawRun models Triton 3.6's launcher"
)

SIGNATURE = {0: "*fp16", 1: "tensordesc<fp16[64, 64]>", 2: "i32", 3: "tensordesc<fp16[64, 128]>", 4: "fp32"}
META = [{"swizzle": 3, "elem_size": 2, "elem_type": 1, "block_size": [64, 64], "fp4_padded": False},
        {"swizzle": 3, "elem_size": 2, "elem_type": 1, "block_size": [64, 128], "fp4_padded": False}]  # fmt: skip


class _Encoder:
    """Stands in for make_tensordesc_arg with metadata: one fresh token per call, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, arg: Any, meta: Any) -> list[Any]:
        self.calls += 1
        return [("map", arg.base.data_ptr(), tuple(meta["block_size"]), self.calls), *arg.shape, *arg.strides]


def _launcher(
    monkeypatch: pytest.MonkeyPatch, encoder: _Encoder, *, scratch: int = 0
) -> tuple[Any, list[Any]]:
    """A CudaLauncher-shaped object around Triton's real wrap_handle_tensordesc."""
    seen: list[Any] = []
    monkeypatch.setattr(nv, "make_tensordesc_arg", encoder)
    inner = nv.wrap_handle_tensordesc(lambda *a: seen.append(a), SIGNATURE, META)
    launcher = type("CudaLauncher", (), {})()
    launcher.launch = inner
    launcher.global_scratch_size = scratch
    launcher.profile_scratch_size = 0
    launcher.launch_cooperative_grid = False
    launcher.launch_pdl = False
    return launcher, seen


def _kernel(run: Any) -> Any:
    k = type("CompiledKernel", (), {})()
    k.run, k.function, k.packed_metadata = run, 1234, ("packed",)
    return k


def _args(a: Any, b: Any) -> tuple[Any, ...]:
    da = TensorDescriptor(a, list(a.shape), list(a.stride()), [64, 64])
    db = TensorDescriptor(b, list(b.shape), list(b.stride()), [64, 128])
    return (a, da, 7, db, 0.5)


def test_raw_run_passes_tritons_own_argument_list(monkeypatch: pytest.MonkeyPatch) -> None:
    enc = _Encoder()
    launcher, seen = _launcher(monkeypatch, enc)
    kernel = _kernel(launcher)
    raw = RawRun.of(kernel)
    assert raw is not None and raw.slots == (1, 3)
    a, b = torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 256, dtype=torch.float16)
    args = _args(a, b)
    # reference: what CudaLauncher.__call__ hands its wrapper (no scratch, no hooks)
    launcher.launch(2, 3, 1, 99, kernel.function, False, False, None, None, kernel.packed_metadata, None, None,
                    None, *args)  # fmt: skip
    ref = seen.pop()
    for _ in range(3):
        raw.launch((2, 3, 1), 99, kernel, _args(a, b))
        got = seen.pop()
        assert got[:13] == ref[:13]
        # the maps are tokens of the encoder's call: equal apart from the call counter
        assert [x[:3] if isinstance(x, tuple) else x for x in got[13:]] == [
            x[:3] if isinstance(x, tuple) else x for x in ref[13:]
        ]
    assert enc.calls == 2 + 2, "each descriptor encoded once for the reference and once for RawRun"
    c = torch.zeros(128, 64, dtype=torch.float16)  # another base: encoded again
    raw.launch((2, 3, 1), 99, kernel, _args(c, b))
    assert seen.pop()[14][1] == c.data_ptr() and enc.calls == 5


def test_raw_run_encodes_a_desc_at_as_its_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    """fixbits' launch sites pass DescAt (a fixed DescForm plus the base's address): RawRun must
    hand the launcher what the TensorDescriptor would give, encoding once per (form, address)."""
    enc = _Encoder()
    launcher, seen = _launcher(monkeypatch, enc)
    kernel = _kernel(launcher)
    raw = RawRun.of(kernel)
    assert raw is not None
    a, b = torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 256, dtype=torch.float16)
    ref_args = _args(a, b)
    launcher.launch(2, 3, 1, 99, kernel.function, False, False, None, None, kernel.packed_metadata, None, None,
                    None, *ref_args)  # fmt: skip
    ref = seen.pop()
    forms = [DescForm({k: v for k, v in vars(ref_args[i]).items() if k != "base"}) for i in (1, 3)]

    def at(x: Any, y: Any) -> tuple[Any, ...]:
        return (x, DescAt(forms[0], x, x.data_ptr()), 7, DescAt(forms[1], y, y.data_ptr()), 0.5)

    for _ in range(3):
        raw.launch((2, 3, 1), 99, kernel, at(a, b))
        got = seen.pop()
        assert got[:13] == ref[:13]
        assert [x[:3] if isinstance(x, tuple) else x for x in got[13:]] == [
            x[:3] if isinstance(x, tuple) else x for x in ref[13:]
        ]
    assert enc.calls == 2 + 2
    c = torch.zeros(128, 64, dtype=torch.float16)
    raw.launch((2, 3, 1), 99, kernel, at(c, b))
    assert seen.pop()[14][1] == c.data_ptr() and enc.calls == 5
    other = DescForm(forms[0].fields)  # equal fields, another site: its own maps
    raw.launch((2, 3, 1), 99, kernel, (a, DescAt(other, a, a.data_ptr()), 7, at(a, b)[3], 0.5))
    assert enc.calls == 6


def test_raw_run_refuses_what_it_does_not_model(monkeypatch: pytest.MonkeyPatch) -> None:
    enc = _Encoder()
    launcher, _ = _launcher(monkeypatch, enc, scratch=128)
    assert RawRun.of(_kernel(launcher)) is None, "a per-call scratch buffer needs CudaLauncher.__call__"
    other = type("HIPLauncher", (), {"launch": launcher.launch})()
    assert RawRun.of(_kernel(other)) is None
    assert RawRun.of(_kernel(lambda *a: None)) is None
