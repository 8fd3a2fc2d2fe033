"""The automatic pinning: source rewrite of unmodified kernels and the global switch (CPU only:
rewritten sources are inspected and compiled ahead of time for sm_90, nothing is launched)."""

from __future__ import annotations

import os
import re

import pytest
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from fixbits.enforce import inner_tree, pin, pinned_source, report
from fixbits.enforce import switch as sw
from fixbits.enforce.tree import tree_sum


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def _mul_combine(a, b):
    return a * b


@triton.jit
def _helper_sum(v):
    return tl.sum(v, axis=0)


@triton.jit
def mixed_kernel(X, Y, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(X + o)
    a = tl.sum(x, axis=0) + x.sum(0) + tl.reduce(x, 0, _add_combine) + _helper_sum(x * x)
    b = tl.max(x, 0) + tl.min(x, 0) + tl.reduce(x, 0, _mul_combine)
    c = tl.cumsum(x, 0)
    tl.store(Y + o, c + a + b)


@triton.jit
def no_sum_kernel(X, Y, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(Y, tl.max(tl.load(X + o), 0))


@triton.jit
def row_kernel(X, Y, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(Y, tl.sum(tl.load(X + o), axis=0))


@triton.jit
def keepdims_kernel(X, Y, BLOCK: tl.constexpr):
    r = tl.arange(0, 4)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    x = tl.load(X + r * BLOCK + c)
    s = tree_sum(x, None, True)
    tl.static_assert(len(s.shape) == 2)
    tl.store(Y + r * 0 + c * 0, s + tree_sum(x, 1, True) * 0)


_SIG = {"X": "*fp32", "Y": "*fp32", "BLOCK": "constexpr"}
_SHFL = re.compile(r"shfl\.sync\.bfly\.b32\s+\S+,\s*\S+,\s*(\d+),")


def _ptx(fn, sig=_SIG, block=1024, warps=4) -> str:
    k = triton.compile(ASTSource(fn, signature=sig, constexprs={"BLOCK": block}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    return k.asm["ptx"]


def _offsets(ptx: str) -> list[int]:
    offs = [int(x) for x in _SHFL.findall(ptx)]
    return [o for i, o in enumerate(offs) if i == 0 or o != offs[i - 1]]


def test_report_names_what_is_pinned_and_what_is_left() -> None:
    rep = report(mixed_kernel)
    pinned = sorted((c.function.split(".")[-1], c.call) for c in rep.pinned)
    left = sorted(c.call for c in rep.left)
    assert pinned == sorted([("mixed_kernel", "tl.sum"), ("mixed_kernel", "x.sum"), ("mixed_kernel", "tl.reduce"),
                             ("_helper_sum", "tl.sum")]), pinned
    assert left == sorted(["tl.max", "tl.min", "tl.reduce", "tl.cumsum"]), left
    reasons = {c.call: c.reason for c in rep.left}
    assert "rounds nothing" in reasons["tl.max"] and "scan" in reasons["tl.cumsum"]
    assert "not a plain add" in reasons["tl.reduce"]


def test_rewrite_leaves_the_original_alone_and_caches_the_twin() -> None:
    src_before = mixed_kernel.src
    twin = inner_tree(mixed_kernel)
    assert twin is pin(mixed_kernel), "pin is not cached"
    assert pin(twin) is twin, "pinning a pinned kernel must be the identity"
    assert mixed_kernel.src == src_before
    assert twin.cache_key != mixed_kernel.cache_key, "pinned and free would share a cache entry"
    src = pinned_source(mixed_kernel)
    assert src.count("__fixbits_tree_sum_like(") == 3 and "__fixbits_dep_" in src, src
    assert "tl.max(x, 0)" in src and "tl.cumsum(x, 0)" in src, src


def test_kernel_without_float_sum_comes_back_as_itself() -> None:
    assert pin(no_sum_kernel) is no_sum_kernel


def test_pinned_kernel_compiles_with_count_up_shuffles_free_counts_down() -> None:
    p, f = _ptx(pin(row_kernel)), _ptx(row_kernel)
    assert _offsets(p)[:5] == [1, 2, 4, 8, 16], _offsets(p)
    assert _offsets(f)[:5] == [16, 8, 4, 2, 1], _offsets(f)
    assert "add.rn.f32" in p and "add.rn.f32" not in f


def test_tree_sum_keep_dims_compiles_for_axis_none_and_axis() -> None:
    assert "add.rn.f32" in _ptx(keepdims_kernel, block=64)


def test_integer_sums_stay_triton_sums() -> None:
    sig = {"X": "*i32", "Y": "*i32", "BLOCK": "constexpr"}
    p = _ptx(pin(row_kernel), sig=sig)
    assert "add.rn" not in p and "add.s32" in p
    assert _offsets(p)[:5] == _offsets(_ptx(row_kernel, sig=sig))[:5], "an integer sum was rewritten"


def test_fp16_sum_keeps_tl_sum_result_dtype() -> None:
    sig = {"X": "*fp16", "Y": "*fp16", "BLOCK": "constexpr"}
    p = _ptx(pin(row_kernel), sig=sig)
    assert "add.rn.f32" in p, "fp16 leaves were not widened to fp32"
    assert "cvt.rn.f16.f32" in p, "the fp32 tree result is not rounded back to fp16 (tl.sum's dtype)"


def test_autotune_wrapper_is_pinned_inside_with_its_own_cache() -> None:
    at = triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["BLOCK"])(row_kernel)
    twin = pin(at)
    assert twin is not at and twin.fn is pin(row_kernel)
    assert at.fn is row_kernel
    assert twin.cache is not at.cache


def test_non_kernels_are_refused_with_the_type_named() -> None:
    with pytest.raises(TypeError, match="expects a @triton.jit function"):
        pin(lambda x: x)


def test_switch_reads_the_environment_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sw.ENV_VAR, raising=False)
    assert sw.enabled() is False
    monkeypatch.setenv(sw.ENV_VAR, "1")
    assert sw.enabled() is True
    monkeypatch.setenv(sw.ENV_VAR, "off")
    assert sw.enabled() is False
    monkeypatch.setenv(sw.ENV_VAR, "maybe")
    with pytest.raises(ValueError, match="FIXBITS_INNER_TREE='maybe'"):
        sw.enabled()


def test_context_manager_overrides_env_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sw.ENV_VAR, "0")
    from triton.runtime.jit import JITFunction

    orig_run = JITFunction.run
    was_installed = sw.installed()
    try:
        with sw.pinned_reductions():
            assert sw.enabled() is True
            assert JITFunction.run is not orig_run or was_installed
            with sw.pinned_reductions(False):
                assert sw.enabled() is False
            assert sw.enabled() is True
        assert sw.enabled() is False
    finally:
        if not was_installed:
            sw.uninstall()
    if not was_installed:
        assert JITFunction.run is orig_run, "uninstall did not restore JITFunction.run"
    assert "FIXBITS_INNER_TREE" not in os.environ or os.environ["FIXBITS_INNER_TREE"] == "0"


def test_switch_pins_direct_triton_compile_as_inductor_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """TorchInductor compiles with triton.compile(ASTSource(fn, ...)): the switch swaps fn there."""
    monkeypatch.setenv(sw.ENV_VAR, "1")
    was_installed = sw.installed()
    sw.install()
    try:
        src = ASTSource(row_kernel, signature=_SIG, constexprs={"BLOCK": 1024})
        assert src.fn is pin(row_kernel)
        k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
        assert _offsets(k.asm["ptx"])[:5] == [1, 2, 4, 8, 16]
        monkeypatch.setenv(sw.ENV_VAR, "0")
        assert ASTSource(row_kernel, signature=_SIG, constexprs={"BLOCK": 1024}).fn is row_kernel
    finally:
        if not was_installed:
            sw.uninstall()


def test_importing_fixbits_enforce_imports_no_triton_and_patches_nothing() -> None:
    import subprocess
    import sys

    code = ("import sys, fixbits.enforce, fixbits.corpus, fixbits.corpus.registry;"
            "print('triton' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stdout + out.stderr


def test_module_runner_installs_switch_and_runs_the_script(tmp_path) -> None:
    import subprocess
    import sys

    script = tmp_path / "prog.py"
    script.write_text("import sys\nfrom fixbits.enforce import switch\n"
                      "print(switch.installed(), switch.enabled(), sys.argv[1:])\n")
    env = dict(os.environ, FIXBITS_INNER_TREE="1")
    out = subprocess.run([sys.executable, "-m", "fixbits.enforce", str(script), "a"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.stdout.split() == ["True", "True", "['a']"], out.stdout + out.stderr
    env["FIXBITS_INNER_TREE"] = "sometimes"
    out = subprocess.run([sys.executable, "-m", "fixbits.enforce", str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode != 0 and "FIXBITS_INNER_TREE='sometimes'" in out.stderr
