"""CPU dry runs of the enforcement device scripts (interpreter, small shapes): every output file
is written, one row per pair, budgets honoured structurally. Times on CPU mean nothing."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runners" / "device"))

import enforcement_bench  # noqa: E402


def _run(script: str, out: Path, *extra: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, f"runners/device/{script}", "--out", str(out), "--device", "cpu", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def test_priority_puts_never_timed_first_then_slowest() -> None:
    pairs = [("a", "fp32"), ("b", "fp32"), ("c", "fp16"), ("d", "bf16")]
    seen = {("a", "fp32"): 0.99, ("c", "fp16"): 0.6}
    assert enforcement_bench.priority(pairs, seen) == [("b", "fp32"), ("d", "bf16"), ("c", "fp16"), ("a", "fp32")]


def test_warm_parts_spreads_big_spaces_over_spare_workers() -> None:
    assert enforcement_bench.warm_parts(32, 8, 16) == 2  # a re-time of a few pairs: two workers each
    assert enforcement_bench.warm_parts(32, 35, 16) == 1  # the full corpus: one each
    assert enforcement_bench.warm_parts(5, 1, 16) == 1  # a small space is not split


def test_history_reads_committed_run(tmp_path: Path) -> None:
    p = tmp_path / "speed_x.csv"
    p.write_text("kernel,dtype,ratio\nrow_sum,fp32,0.9661\ncol_sum,fp16,bad\n")
    assert enforcement_bench.history([p]) == {("row_sum", "fp32"): 0.9661}


def test_bench_dry_run_writes_table_csv_yaml_plot(tmp_path: Path) -> None:
    log = _run("enforcement_bench.py", tmp_path, "--only", "row_sum_unaligned", "--budget-s", "120",
               "--screen-reps", "1", "--reps", "1", "--min-rounds", "1", "--max-rounds", "1")
    rows = list(csv.DictReader(open(tmp_path / "enforcement_bench.csv")))
    assert [(r["kernel"], r["dtype"]) for r in rows] == [("row_sum_unaligned", "fp32")], log[-2000:]
    assert float(rows[0]["ratio"]) > 0 and rows[0]["errors"] == "0", rows
    assert "chunks_in_regs:" in (tmp_path / "enforcement_bench.yaml").read_text()  # the variant was autotuned
    assert "| row_sum_unaligned | fp32 |" in (tmp_path / "enforcement_bench.md").read_text()
    assert (tmp_path / "enforcement_bench.png").stat().st_size > 0


def test_only_selects_kernels_and_kernel_dtype_pairs() -> None:
    from fixbits.corpus.registry import selected

    only = ["row_sum_unaligned:fp32,gemm_colsum:bf16", "softmax"]
    assert selected(only, "gemm_colsum", "bf16") and not selected(only, "gemm_colsum", "fp16")
    assert selected(only, "softmax", "fp16") and selected(only, "row_sum_unaligned", "fp32")
    assert not selected(only, "row_sum", "fp32") and selected(None, "row_sum", "fp32")


def test_bench_dry_run_only_kernel_dtype_pairs(tmp_path: Path) -> None:
    log = _run("enforcement_bench.py", tmp_path, "--only", "row_sum_unaligned:fp32,layernorm_fwd:bf16",
               "--budget-s", "300", "--screen-reps", "1", "--reps", "1", "--min-rounds", "1", "--max-rounds", "1")
    rows = list(csv.DictReader(open(tmp_path / "enforcement_bench.csv")))
    assert sorted((r["kernel"], r["dtype"]) for r in rows) == [("layernorm_fwd", "bf16"), ("row_sum_unaligned", "fp32")], \
        log[-2000:]
    assert all(r["errors"] == "0" for r in rows), rows
    details = (tmp_path / "enforcement_bench.yaml").read_text()
    assert "split_chunks:" in details and "thread_chunks:" in details and "split_top:" in details


def test_bench_dry_run_stops_at_budget(tmp_path: Path) -> None:
    log = _run("enforcement_bench.py", tmp_path, "--only", "col_sum", "--budget-s", "1")
    assert "budget reached" in log, log[-2000:]
    assert "Not measured" in (tmp_path / "enforcement_bench.md").read_text()


def test_check_dry_run_covers_variants_and_model(tmp_path: Path) -> None:
    log = _run("enforcement_check.py", tmp_path, "--only", "mid_axis_sum", "--kinds", "wide", "--workers", "1",
               "--budget-s", "300")
    rows = yaml.safe_load((tmp_path / "check.yaml").read_text())
    assert len(rows) == 1, log[-2000:]
    r = rows[0]
    assert r["pinned_invariant"] and r["model_equal"], r
    assert r["variant_configs"] > 0 and r["configs"] > r["variant_configs"], r
    assert r["golden"], r


def _sleep(s: float) -> float:
    import time

    time.sleep(s)
    return s


def _running(pid: int | None) -> bool:
    """The process exists and is not a zombie (/proc/PID/stat's state field)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_stop_pool_ends_running_workers() -> None:
    import concurrent.futures as cf
    import multiprocessing as mp

    import enforcement_check

    pool = cf.ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"))
    fut = pool.submit(_sleep, 60.0)
    procs = []
    for _ in range(200):  # wait until the worker exists
        procs = list((pool._processes or {}).values())
        if procs:
            break
        import time

        time.sleep(0.05)
    enforcement_check._stop_pool(pool)
    for p in procs:
        p.join(timeout=20)
        # asked of the OS: the pool's manager thread may reap the worker first, and then
        # Process.is_alive() can never learn its exit status
        assert not _running(p.pid), f"worker {p.pid} still running"
    assert procs, "the pool never started a worker"
    assert not fut.done() or fut.cancelled() or fut.exception() is not None
