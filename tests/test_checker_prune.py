"""The autotuner pruning predicate, driven the way Triton's Autotuner drives it (CPU compiles).

Compiles for sm_90 ahead of time, so it runs without a GPU. The Triton 3.9 variant runs the same
script under another interpreter and only when FIXBITS_TRITON39_PYTHON names one that has
triton==3.9 installed (CI installs 3.6 only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    import triton, triton.language as tl
    from fixbits.checker.prune import EquivalencePrune
    from fixbits.checker.compile import gpu_target

    class FakeTensor:
        # what the JIT binder reads from a device tensor: data_ptr() and dtype
        def __init__(self, dtype):
            self.dtype = dtype
        def data_ptr(self):
            return 1 << 20

    prune = EquivalencePrune(target=gpu_target("sm_90"))
    configs = [triton.Config({"BLOCK": b}, num_warps=w, num_stages=1) for b in (256, 1024) for w in (2, 4)]
    configs.append(triton.Config({"BLOCK": 256}, num_warps=2, num_stages=3))

    @triton.autotune(configs, key=["N"], prune_configs_by={"early_config_prune": prune})
    @triton.jit
    def rowsum(x_ptr, y_ptr, N, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
        tl.store(y_ptr + row, tl.sum(acc, axis=0))

    x = FakeTensor(tl.float32)
    rowsum.nargs = dict(zip(rowsum.arg_names, (x, x, 4096)))
    kept = rowsum.prune_configs({})  # exactly what Autotuner.run calls before benchmarking
    print("KEPT", ";".join(f"{c.kwargs['BLOCK']}/{c.num_warps}/{c.num_stages}" for c in kept))
    print("REPORT", prune.last.total, prune.last.kept, prune.last.dropped, prune.last.failed)
    """
)


def run_script(python: str, tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "prune_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton-cache"), TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.run(
        [python, str(script), str(ROOT)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {}
    for line in proc.stdout.splitlines():
        k, _, v = line.partition(" ")
        out[k] = v
    return out


def check(out: dict[str, str]) -> None:
    # the reference is the first config (BLOCK 256, 2 warps); only its num_stages twin matches
    assert out["KEPT"] == "256/2/1;256/2/3", out
    assert out["REPORT"] == "5 2 3 0", out


def test_prune_keeps_the_reference_class_triton_current(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    check(run_script(sys.executable, tmp_path))


def test_prune_keeps_the_reference_class_triton_39(tmp_path: Path) -> None:
    py = os.environ.get("FIXBITS_TRITON39_PYTHON")
    if not py:
        pytest.skip("FIXBITS_TRITON39_PYTHON not set: no Triton 3.9 interpreter to test against")
    ver = subprocess.run(
        [py, "-c", "import triton; print(triton.__version__)"], capture_output=True, text=True
    )
    if ver.returncode != 0 or not ver.stdout.startswith("3.9"):
        pytest.skip(f"{py} has no triton 3.9 ({ver.stdout.strip() or ver.stderr.strip()[-200:]})")
    check(run_script(py, tmp_path))


def test_prune_without_a_bound_kernel_says_so() -> None:
    pytest.importorskip("triton")
    from fixbits.checker.prune import EquivalencePrune

    class Cfg:
        def all_kwargs(self) -> dict[str, int]:
            return {}

    with pytest.raises(RuntimeError, match="no kernel bound"):
        EquivalencePrune()([Cfg(), Cfg()], {})
