"""fixbits.matmul's steady state: after the first call of a (desc, shape, strides, epilogue,
config), a call is one cached closure that allocates the output and launches.

Counted, never timed: on the second call every function of the slow path (profile route,
dispatch, tuning lookups, checks, epilogue planning, descriptor hashing) is replaced by one
that raises. The launches go through Triton's real binder and compile for sm_90
(tests/_kernels_aot.Sm90Launches), so the cached path is also shown to compile exactly the
kernels (same hash: same constexprs and specialisation) the reference path tile_matmul does.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from _kernels_aot import Sm90Launches  # noqa: E402

from fixbits.desc import EpilogueOp, GEMMDesc  # noqa: E402
from fixbits.kernels._host import KernelConfig  # noqa: E402

TC = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp16")
M, N, K = 80, 192, 256


def _tensors(m: int = M, n: int = N, k: int = K, *, b_t: bool = False) -> dict[str, Any]:
    g = torch.Generator().manual_seed(11)
    a = torch.randn((m, k), generator=g).half()
    b = torch.randn((n, k), generator=g).half().t() if b_t else torch.randn((k, n), generator=g).half()
    return dict(
        a=a, b=b, bias=torch.zeros(n).half(), residual=torch.zeros(m, n).half(), gate=torch.zeros(m, n).half()
    )


class _Raise:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *a: Any, **k: Any) -> Any:
        raise AssertionError(f"the cached matmul path called {self.name}")


SLOW_PATH = [
    ("fixbits.kernels.matmul", "resolve_desc"),
    ("fixbits.kernels.matmul", "_route"),
    ("fixbits.kernels.matmul", "_launcher"),
    ("fixbits.kernels.matmul", "choose_kernel"),
    ("fixbits.kernels.matmul", "parse_epilogue"),
    ("fixbits.kernels.tuning", "best_config"),
    ("fixbits.kernels.tuning", "size_class"),
    ("fixbits.kernels.tuning", "shape_space"),
    ("fixbits.kernels.single_pass", "tile_launcher"),
    ("fixbits.kernels.single_pass", "check_operands"),
    ("fixbits.kernels.single_pass", "epilogue_args"),
    ("fixbits.kernels.single_pass", "fit_config"),
    ("fixbits.kernels.single_pass", "check_config"),
    ("fixbits.kernels.single_pass", "launch_tile_kernel"),
    ("fixbits.kernels._host", "plan_epilogue"),
    ("fixbits.kernels._host", "_plan"),
    ("fixbits.kernels.epilogue", "plan_epilogue"),
]


@pytest.mark.parametrize("swap", [0, 1])
def test_second_call_does_no_lookup_or_hashing(monkeypatch: pytest.MonkeyPatch, swap: int) -> None:
    import importlib

    from fixbits.kernels.matmul import matmul

    t = _tensors()
    desc = TC
    ops = (EpilogueOp("scale", 0.5), EpilogueOp("residual"))
    cfg = KernelConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3, SWAP_AB=swap)
    with Sm90Launches() as launches:
        matmul(t["a"], t["b"], desc=desc, epilogue=ops, residual=t["residual"], config=cfg)
        for mod, name in SLOW_PATH:
            monkeypatch.setattr(importlib.import_module(mod), name, _Raise(f"{mod}.{name}"))
        monkeypatch.setattr(GEMMDesc, "__hash__", _Raise("GEMMDesc.__hash__"))
        monkeypatch.setattr(GEMMDesc, "short_hash", property(_Raise("GEMMDesc.short_hash")))
        monkeypatch.setattr(KernelConfig, "__hash__", _Raise("KernelConfig.__hash__"))
        monkeypatch.setattr(EpilogueOp, "__hash__", _Raise("EpilogueOp.__hash__"))
        for _ in range(2):
            out = matmul(t["a"], t["b"], desc=desc, epilogue=ops, residual=t["residual"], config=cfg)
            assert tuple(out.shape) == (M, N) and out.dtype == torch.float16
    assert len(launches.kernels) == 3
    assert len({k.hash for k in launches.kernels}) == 1


def _kernel_hashes(fn: Any) -> list[str]:
    import fixbits.kernels.single_pass as sp

    orig, orig_sms = sp.tma_descriptors, sp.num_sms
    sp.tma_descriptors = functools.partial(orig, require_cuda=False)  # type: ignore[assignment]
    sp.num_sms = lambda device: 132  # type: ignore[assignment]
    try:
        with Sm90Launches() as launches:
            fn()
    finally:
        sp.tma_descriptors, sp.num_sms = orig, orig_sms  # type: ignore[assignment]
    return [k.hash for k in launches.kernels]


CONFIGS = {
    "plain": KernelConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3),
    "swap": KernelConfig(
        BLOCK_M=128, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4, SWAP_AB=1
    ),
    "tma": KernelConfig(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, USE_TMA=1
    ),
    "tma persistent": KernelConfig(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, USE_TMA=1, PERSISTENT=1
    ),
}
EPILOGUES = {
    "none": (),
    "bias": (EpilogueOp("bias"),),
    "silu_gate+residual": (EpilogueOp("silu_gate"), EpilogueOp("residual")),
    "bias+relu": (EpilogueOp("bias"), EpilogueOp("relu")),
}


@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("ep", list(EPILOGUES))
@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_cached_launch_compiles_what_the_reference_path_compiles(cfg: str, ep: str, b_t: bool) -> None:
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.single_pass import tile_matmul

    t = _tensors(m=16 if cfg == "swap" else M, b_t=b_t)
    desc = TC.replace(epilogue=EPILOGUES[ep])
    kw = {k: t[k] for k in ("bias", "residual", "gate")}
    kw["residual"] = kw["residual"][: t["a"].shape[0]]
    kw["gate"] = kw["gate"][: t["a"].shape[0]]
    ref = _kernel_hashes(lambda: tile_matmul(t["a"], t["b"], desc, config=CONFIGS[cfg], **kw))

    def twice() -> None:  # the second call reuses the first one's TMA descriptor fields
        for _ in range(2):
            matmul(t["a"], t["b"], desc=desc, config=CONFIGS[cfg], **kw)

    got = _kernel_hashes(twice)
    assert got == ref * 2 and len(ref) == 1


def test_a_new_tuning_result_reaches_the_cached_call(tmp_path: Path) -> None:
    from fixbits.kernels import tuning
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.single_pass import tile_matmul

    t = _tensors()
    key = ("single_pass", "fp16", "fp16")
    small = KernelConfig(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=2, num_stages=2)
    tuning.clear_tuned()
    try:
        first = _kernel_hashes(lambda: matmul(t["a"], t["b"], desc=TC))
        tuning.record(key, M, N, K, small, {small.label(): 0.01})
        second = _kernel_hashes(lambda: matmul(t["a"], t["b"], desc=TC))
        want = _kernel_hashes(lambda: tile_matmul(t["a"], t["b"], TC, config=small))
        assert second == want and first != second
        path = tmp_path / "tuned.json"
        tuning.save_tuned(path, {"gpu": "test"})
        data = json.loads(path.read_text())
        assert data["entries"][0]["config"] == small.to_dict() and data["entries"][0]["m"] == M
        tuning.clear_tuned()
        assert tuning.tuned(key, M, N, K) is None
        assert tuning.load_tuned(path) == 1
        assert tuning.tuned(key, M, N, K) == small
    finally:
        tuning.clear_tuned()
        tuning.STATE.loaded = False


def test_shape_candidates_follow_n_and_k() -> None:
    from fixbits.kernels.tuning import shape_space

    decode = shape_space(1, 248320, 8192)
    assert decode[0].SWAP_AB and decode[0].BLOCK_N == 16
    assert all(c.BLOCK_N <= 16 for c in decode if c.SWAP_AB)
    lora = shape_space(2048, 8192, 8)
    assert not any(c.USE_TMA for c in lora) and any(c.num_stages == 2 for c in lora)
    big = shape_space(16384, 8192, 16384)
    assert big[0].PERSISTENT and all(c.BLOCK_K == 64 for c in big)
    assert shape_space(16384, 8192, 16384, limit=3) == big[:3]
    for m, n, k in ((1, 4096, 4096), (64, 2048, 8192), (256, 18432, 8192), (1024, 2880, 2880), (80, 8192, 8)):
        labels = [c.label() for c in shape_space(m, n, k)]
        assert labels and len(labels) == len(set(labels)), (m, n, k, labels)
