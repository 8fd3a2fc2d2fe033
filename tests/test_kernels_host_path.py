"""fixbits.matmul's steady state: after the first call of a (desc, shape, strides, epilogue,
config), a call is one cached closure that allocates the output and launches.

Counted, never timed: on the second call every function of the slow path (profile route,
dispatch, tuning lookups, checks, epilogue planning, descriptor hashing) is replaced by one
that raises. The launches go through Triton's real JITFunction.run and compile for sm_90
(tests/_kernels_aot.Sm90Driver: only the driver's cubin launch is recorded instead of run),
so the cached path, whose later calls skip kernel[grid] (fixbits.kernels.launch.DirectLaunch),
is shown to launch exactly the kernel (same hash: same constexprs and specialisation) and the
arguments the reference path tile_matmul launches through kernel[grid].
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from _kernels_aot import Sm90Driver  # noqa: E402

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
    with Sm90Driver() as drv:
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
    assert len(drv.launches) == 3
    assert len({h for h, *_ in drv.launches}) == 1


def _launches(fn: Any) -> list[tuple[str, tuple[int, int, int], int, tuple[Any, ...]]]:
    """(hash, grid, stream, arguments) of every kernel launch ``fn`` makes, compiled for sm_90."""
    import fixbits.kernels.single_pass as sp

    orig, orig_sms = sp.tma_descriptors, sp.num_sms
    sp.tma_descriptors = functools.partial(orig, require_cuda=False)  # type: ignore[assignment]
    sp.num_sms = lambda device: 132  # type: ignore[assignment]
    try:
        with Sm90Driver() as drv:
            fn()
    finally:
        sp.tma_descriptors, sp.num_sms = orig, orig_sms  # type: ignore[assignment]
    return drv.launches


def _kernel_hashes(fn: Any) -> list[str]:
    return [h for h, *_ in _launches(fn)]


def _arg_view(x: Any, names: dict[int, str]) -> Any:
    """A launch argument as the launcher reads it: a tensor by its pointer (named when it is one
    of the inputs; a fresh output otherwise) and dtype, a tensor descriptor by its fields."""
    if isinstance(x, torch.Tensor):
        return ("tensor", names.get(x.data_ptr(), "new"), x.dtype)
    if hasattr(x, "block_shape"):
        return (
            "tma",
            names.get(x.base.data_ptr(), "new"),
            tuple(x.shape),
            tuple(x.strides),
            tuple(x.block_shape),
        )
    return x


def _reference_and_three_calls(
    t: dict[str, Any], desc: GEMMDesc, cfg: str, kw: dict[str, Any]
) -> tuple[tuple[str, tuple[int, int, int], int, tuple[Any, ...]], list[Any]]:
    """(the one launch of the reference tile_matmul, the launches of three cached matmul calls)."""
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.single_pass import tile_matmul

    ref = _launches(lambda: tile_matmul(t["a"], t["b"], desc, config=CONFIGS[cfg], **kw))

    def thrice() -> None:
        for _ in range(3):
            matmul(t["a"], t["b"], desc=desc, config=CONFIGS[cfg], **kw)

    got = _launches(thrice)
    assert len(ref) == 1 and len(got) == 3
    return ref[0], got


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
    "tma store": KernelConfig(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=1, USE_TMA=1, TMA_STORE=1
    ),
    "tma store persistent": KernelConfig(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, USE_TMA=1, PERSISTENT=1,
        TMA_STORE=1,
    ),
    # WARP_SPEC runs the plain TMA kernel (single_pass.ws_route is opt-in)
    "warp spec": KernelConfig(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3, USE_TMA=1, WARP_SPEC=1
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


@pytest.mark.parametrize("b_t", [False, True])
@pytest.mark.parametrize("ep", ["none", "silu_gate+residual", "bias+relu"])
@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_direct_launch_passes_what_kernel_grid_passes(cfg: str, ep: str, b_t: bool) -> None:
    """The cached path's first call goes through kernel[grid]; its later calls launch the kept
    CompiledKernel directly. Both must equal the reference kernel[grid] launch: hash, grid,
    stream and every argument (pointers of the same tensors, the same ints and constexprs)."""

    t = _tensors(m=16 if cfg == "swap" else M, b_t=b_t)
    desc = TC.replace(epilogue=EPILOGUES[ep])
    given = {
        "bias": t["bias"],
        "residual": t["residual"][: t["a"].shape[0]],
        "gate": t["gate"][: t["a"].shape[0]],
    }
    # only what the epilogue reads (the reference passes a given but unread bias in its slot)
    kw = {k: v for k, v in given.items() if k in ep.replace("silu_gate", "gate")}
    names = {v.data_ptr(): k for k, v in (("a", t["a"]), ("b", t["b"]), *kw.items())}
    ref, got = _reference_and_three_calls(t, desc, cfg, kw)
    want = (ref[0], ref[1], ref[2], [_arg_view(x, names) for x in ref[3]])
    for launch in got:
        assert (launch[0], launch[1], launch[2], [_arg_view(x, names) for x in launch[3]]) == want


@pytest.mark.parametrize("cfg", ["plain", "swap", "tma", "tma store"])
def test_direct_launch_hands_the_launcher_addresses(monkeypatch: pytest.MonkeyPatch, cfg: str) -> None:
    """On CUDA tensors the direct path passes each tensor as the address its key read (the C
    launcher would otherwise call data_ptr() and query the driver per pointer). CPU tensors
    stand in here, declared CUDA: every later launch must carry, in each slot where the
    reference passes a tensor, that tensor's address (a fresh output: some address), and
    everything else unchanged."""
    import fixbits.kernels.launch as launch

    monkeypatch.setattr(launch, "ADDRESS_ANY_DEVICE", True)
    t = _tensors(m=16 if cfg == "swap" else M)
    desc = TC.replace(epilogue=EPILOGUES["silu_gate+residual"])
    kw = {"residual": t["residual"][: t["a"].shape[0]], "gate": t["gate"][: t["a"].shape[0]]}
    names = {v.data_ptr(): k for k, v in (("a", t["a"]), ("b", t["b"]), *kw.items())}
    want, got = _reference_and_three_calls(t, desc, cfg, kw)
    for launch_ in got[1:]:
        assert launch_[:3] == want[:3] and len(launch_[3]) == len(want[3])
        for x, w in zip(launch_[3], want[3], strict=True):
            if isinstance(w, torch.Tensor):
                assert type(x) is int
                assert names.get(x, "new") == names.get(w.data_ptr(), "new")
            else:
                assert _arg_view(x, names) == _arg_view(w, names)


@pytest.mark.parametrize("cfg", ["tma", "tma persistent", "tma store", "tma store persistent"])
def test_the_raw_path_hands_the_c_launcher_what_tritons_wrapper_builds(
    monkeypatch: pytest.MonkeyPatch, cfg: str
) -> None:
    """The GPU's steady state end to end: with a launcher shaped as Triton 3.6's CudaLauncher,
    matmul's later calls go through RawRun (tensors as addresses, DescAt maps kept per
    address). The C launcher must get what Triton's own wrapper builds for the reference
    kernel[grid] launch: grid, stream, function, flags, metadata, then every kernel argument
    (a tensor as its address; the same maps, shapes and strides), apart from the launch
    metadata and idle hooks, which RawRun leaves out."""
    from _kernels_aot import RawSm90Driver

    import fixbits.kernels.launch as launch
    import fixbits.kernels.single_pass as sp
    from fixbits.kernels.matmul import matmul

    monkeypatch.setattr(launch, "ADDRESS_ANY_DEVICE", True)
    monkeypatch.setattr(sp, "tma_descriptors", functools.partial(sp.tma_descriptors, require_cuda=False))
    monkeypatch.setattr(sp, "num_sms", lambda device: 132)
    raw_calls: list[int] = []
    orig = launch.RawRun.launch

    def counted(self: Any, *a: Any) -> None:
        raw_calls.append(1)
        orig(self, *a)

    monkeypatch.setattr(launch.RawRun, "launch", counted)
    t = _tensors()
    desc = TC.replace(epilogue=EPILOGUES["silu_gate+residual"])
    kw = {"residual": t["residual"][: t["a"].shape[0]], "gate": t["gate"][: t["a"].shape[0]]}
    names = {v.data_ptr(): k for k, v in (("a", t["a"]), ("b", t["b"]), *kw.items())}
    seen: list[tuple[Any, ...]] = []
    with RawSm90Driver():
        RawSm90Driver.c_launcher = lambda *a: seen.append(a)
        sp.tile_matmul(t["a"], t["b"], desc, config=CONFIGS[cfg], **kw)
        (ref,) = seen
        seen.clear()
        for _ in range(3):
            matmul(t["a"], t["b"], desc=desc, config=CONFIGS[cfg], **kw)
    assert len(seen) == 3 and len(raw_calls) == 2, "the first call through kernel[grid], then RawRun"

    def view(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return ("addr", names.get(x.data_ptr(), "new"))
        if type(x) is int and x in names:
            return ("addr", names[x])
        if isinstance(x, tuple) and x and x[0] == "map":
            return ("map", names.get(x[1], "new"), x[2])
        return x

    for got in seen[1:]:
        assert got[:10] == ref[:10] and got[10:13] == (None, None, None)
        want = [view(x) for x in ref[13:]]
        have = [view(x) for x in got[13:]]
        assert len(have) == len(want)
        for h, w in zip(have, want, strict=True):  # a fresh output: an address of its own
            assert h == w or (w == ("addr", "new") and type(h) is int)


def test_direct_launch_follows_a_new_specialisation() -> None:
    """Same shapes and strides (one cache entry of matmul), but A moved off 16-byte alignment:
    the binder specialises pointers on alignment, so the direct path must not launch the
    aligned kernel; it goes through kernel[grid] and launches what tile_matmul launches."""
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.single_pass import tile_matmul

    t = _tensors()
    store = torch.empty(M * K + 1, dtype=torch.float16)
    a_odd = store[1:].view(M, K)
    a_odd.copy_(t["a"])
    assert a_odd.data_ptr() % 16 and t["a"].data_ptr() % 16 == 0
    cfg = CONFIGS["plain"]
    aligned = _kernel_hashes(lambda: tile_matmul(t["a"], t["b"], TC, config=cfg))
    odd = _kernel_hashes(lambda: tile_matmul(a_odd, t["b"], TC, config=cfg))
    assert aligned != odd

    def mixed() -> None:
        for a in (t["a"], t["a"], a_odd, a_odd, t["a"]):
            matmul(a, t["b"], desc=TC, config=cfg)

    assert _kernel_hashes(mixed) == aligned * 2 + odd * 2 + aligned


def test_direct_launch_steps_aside_for_launch_hooks() -> None:
    """A launch hook (a profiler) sees every launch: the direct path hands those to kernel[grid]."""
    from triton import knobs

    from fixbits.kernels.matmul import matmul

    t = _tensors()
    seen: list[Any] = []

    def hook(metadata: Any) -> None:
        seen.append(metadata.get()["name"])

    def run() -> None:
        matmul(t["a"], t["b"], desc=TC, config=CONFIGS["plain"])
        knobs.runtime.launch_enter_hook.add(hook)
        try:
            for _ in range(2):
                matmul(t["a"], t["b"], desc=TC, config=CONFIGS["plain"])
        finally:
            knobs.runtime.launch_enter_hook.remove(hook)

    hashes = _kernel_hashes(run)
    assert len(hashes) == 3 and len(set(hashes)) == 1
    assert seen == ["_single_pass_kernel"] * 2


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
    # no TMA loads for LoRA (one residue turn): USE_TMA there only carries a TMA store's descriptor
    assert not any(c.USE_TMA and not c.TMA_STORE for c in lora) and any(c.num_stages == 2 for c in lora)
    assert any(c.TMA_STORE for c in shape_space(16384, 7168, 64))
    big = shape_space(16384, 8192, 16384)
    assert big[0].PERSISTENT and all(c.BLOCK_K == 64 for c in big)
    assert shape_space(16384, 8192, 16384, limit=3) == big[:3]
    for m, n, k in ((1, 4096, 4096), (64, 2048, 8192), (256, 18432, 8192), (1024, 2880, 2880), (80, 8192, 8)):
        labels = [c.label() for c in shape_space(m, n, k)]
        assert labels and len(labels) == len(set(labels)), (m, n, k, labels)


@pytest.mark.parametrize("cfg", ["tma", "tma persistent", "plain"])
def test_the_launch_cache_keeps_no_operand_alive(cfg: str) -> None:
    """fixbits.matmul caches one launch per shape: it must not hold the first call's tensors
    (a benchmark over hundreds of shapes would keep every operand on the GPU)."""
    import gc
    import weakref

    from fixbits.kernels.matmul import matmul

    def run() -> list[Any]:
        t = _tensors()
        for _ in range(2):
            matmul(t["a"], t["b"], desc=TC, config=CONFIGS[cfg])
        return [weakref.ref(t["a"]), weakref.ref(t["b"])]

    refs: list[Any] = []
    _launches(lambda: refs.extend(run()))
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_tma_store_launch_passes_an_output_descriptor_and_follows_its_alignment() -> None:
    """TMA_STORE: the cached path passes a descriptor of each call's fresh output (rebuilt from the
    first one's fields); an output whose row pitch is off 16 bytes gets the masked-store kernel,
    as on the reference path."""
    from fixbits.kernels.matmul import matmul
    from fixbits.kernels.single_pass import tile_matmul

    cfg = CONFIGS["tma store"]
    t = _tensors()
    got = _launches(lambda: [matmul(t["a"], t["b"], desc=TC, config=cfg) for _ in range(2)])
    descs = [[x for x in args if hasattr(x, "block_shape")] for _, _, _, args in got]
    assert [[tuple(d.block_shape) for d in ds] for ds in descs] == [[(128, 64), (64, 128), (128, 128)]] * 2
    assert all(tuple(ds[2].shape) == (M, N) and ds[2].base.shape == (M, N) for ds in descs)
    # N = 100: B^T (N, K) is TMA-able, the (M, 100) fp16 output's pitch (200 bytes) is not
    odd = _tensors(n=100, b_t=True)
    ref = _launches(lambda: tile_matmul(odd["a"], odd["b"], TC, config=cfg))
    got = _launches(lambda: [matmul(odd["a"], odd["b"], desc=TC, config=cfg) for _ in range(2)])
    assert [h for h, *_ in got] == [ref[0][0]] * 2
    assert [sum(hasattr(x, "block_shape") for x in args) for *_, args in ref + got] == [2, 2, 2]
    plain = _launches(
        lambda: tile_matmul(odd["a"], odd["b"], TC, config=KernelConfig(**{**cfg.to_dict(), "TMA_STORE": 0}))
    )
    assert plain[0][0] == ref[0][0]


def test_every_config_label_round_trips() -> None:
    from fixbits.kernels.tuning import equivalence_space, tensor_core_classes

    cfgs = [c for cls in tensor_core_classes() for c in (cls.default, *cls.space)]
    cfgs += [KernelConfig.from_dict(raw) for raw in equivalence_space("tensor_core")]
    cfgs.append(KernelConfig(64, 32, 128, 1, 2, 5, GROUPS=4, USE_TMA=1, PERSISTENT=2, SWAP_AB=1, TMA_STORE=1))
    cfgs.append(KernelConfig(64, 32, 128, 1, 2, 5, GROUPS=4, USE_TMA=1, TMA_STORE=1, WARP_SPEC=1))
    assert any(c.TMA_STORE for c in cfgs) and any(c.WARP_SPEC for c in cfgs)
    for c in cfgs:
        assert KernelConfig.from_label(c.label()) == c, c.label()
        assert c.label().removesuffix("_ws").endswith("_ts") == bool(c.TMA_STORE)
        assert c.label().endswith("_ws") == bool(c.WARP_SPEC)
    with pytest.raises(ValueError):
        KernelConfig.from_label("128x128x64_g8_w4_s1_G1_ts_tma")


def test_shared_memory_step_down_drops_the_tma_store_last() -> None:
    from triton.runtime.errors import OutOfResources

    from fixbits.kernels._host import SharedMemoryStepDown, fewer_stages

    oom = OutOfResources(300000, 232448, "shared memory")
    cfg = KernelConfig(BLOCK_M=256, BLOCK_N=256, num_stages=2, USE_TMA=1, TMA_STORE=1)
    with pytest.warns(SharedMemoryStepDown):
        one = fewer_stages(cfg, oom)
        assert (one.num_stages, one.TMA_STORE) == (1, 1)
        none = fewer_stages(one, oom)
        assert (none.num_stages, none.TMA_STORE) == (1, 0)
    with pytest.raises(OutOfResources):
        fewer_stages(none, oom)


def test_a_seeded_winner_competes_with_its_tma_store_twin() -> None:
    """Winners tuned before TMA_STORE existed are timed next to the same tile stored by TMA."""
    from fixbits.kernels._host import KernelConfig
    from fixbits.kernels.tuning import candidates

    seed = KernelConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=1)
    swapped = KernelConfig(BLOCK_M=128, BLOCK_N=16, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4, SWAP_AB=1)
    got = candidates(16384, 7168, 64, 2, (seed,))
    assert got[0] == seed and got[1].TMA_STORE == 1 and got[1].USE_TMA == 1
    assert got[1].BLOCK_M == 64 and got[1].BLOCK_N == 128
    got = candidates(16, 4096, 4096, 1, (swapped,))
    assert got[0] == swapped and not any(c.TMA_STORE and c.SWAP_AB for c in got), "a swapped call has no TMA store"


def test_a_turn_wider_than_one_tma_box_takes_the_pointer_body() -> None:
    """fp8 per-MMA turns are GROUPS groups of 128 elements; a TMA box holds at most 256 per
    dimension, so GROUPS = 4 must fall back to the pointer body (the same dots) instead of
    encoding a descriptor the driver refuses."""
    from fixbits.desc import GEMMDesc
    from fixbits.kernels.single_pass import tma_k, tma_route

    fp8 = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=32, in_dtype="fp8_e4m3", out_dtype="fp32",
                   use_fast_accum=False, promotion_interval=4, k_loop_step=64)  # fmt: skip
    cfg = KernelConfig(BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, num_warps=4, num_stages=3, USE_TMA=1)
    assert [tma_k(fp8, KernelConfig(**{**cfg.to_dict(), "GROUPS": g})) for g in (1, 2, 4)] == [128, 256, 512]
    assert tma_route(fp8, cfg) and tma_route(fp8, KernelConfig(**{**cfg.to_dict(), "GROUPS": 2}))
    assert not tma_route(fp8, KernelConfig(**{**cfg.to_dict(), "GROUPS": 4}))
    # 16-bit per-MMA has no promotion inside Triton's dot: the pointer body
    assert not tma_route(fp8.replace(in_dtype="fp16", instruction_k=16), cfg)
    assert tma_route(fp8.replace(use_fast_accum=True, promotion_interval=None), cfg)
