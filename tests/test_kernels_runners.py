"""The GPU scripts run end to end on the CPU (TRITON_INTERPRET=1 dry runs), so the one device
call they get is never spent on a Python error. Bits are not checked here (no tensor cores)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=600, cwd=tmp
    )


def test_gemm_bench_dry_run_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    args = [str(REPO / "runners/device/kernels_bench.py"), "--out", str(out), "--dry-run", "--per-cell", "1",
            "--limit", "2", "--no-compile", "--tune-limit", "2"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = list(csv.DictReader((out / "gemm_bench.csv").open()))
    main = [r for r in rows if r["layer"] != "fused"]
    fused = [r for r in rows if r["layer"] == "fused"]
    assert len(main) == 2
    assert {r["layer"] for r in main} == {"attention", "lm_head"}, main  # cells interleave
    assert all(r["t_cublas_ms"] and r["t_cublas_gpu_ms"] and r["t_ours_gpu_ms"] for r in rows), rows
    assert all(r["t_fused_gpu_ms"] for r in fused), fused
    tuned = json.loads((out / "tuned_configs.json").read_text())["entries"]
    assert {(e["m"], e["n"], e["k"]) for e in tuned} >= {
        (int(r["m"]), int(r["n"]), int(r["k"])) for r in main
    }
    assert all(len(e["times_ms"]) <= 2 for e in tuned), tuned
    assert not [r for r in rows if r.get("error")], [r["error"] for r in rows if r.get("error")]
    assert {r["epilogue"] for r in fused} >= {"bias", "relu", "residual", "scale"}, fused
    assert all(r["t_fused_ms"] and r["t_pair_ms"] for r in fused), fused
    md = (out / "gemm_bench.md").read_text()
    assert "speed relative to cuBLAS" in md and "split-K tail shapes" in md and "GPU-time geomean" in md


def test_gemm_bench_subset_covers_every_cell_in_rounds() -> None:
    sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    shapes = bench.shapes_list()
    picked = bench.subset(shapes, 3)
    cells = {(s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) for s in shapes}
    first_round = picked[: len(cells)]
    assert {(s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) for s in first_round} == cells
    assert len(picked) == len(set(picked)) == sum(min(3, sum(1 for s in shapes if
               (s[3], 2 * s[0] * s[1] * s[2] >= bench.SPLIT_FLOP) == c)) for c in cells)  # fmt: skip
    assert bench.subset(shapes, 3) == picked


def test_kernels_check_dry_run_catches_the_planted_defects(tmp_path: Path) -> None:
    out = tmp_path / "check"
    args = [str(REPO / "runners/device/kernels_check.py"), "--out", str(out), "--device", "cpu", "--small",
            "--sections", "ce", "--budget-s", "300"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "kernels_check.json").read_text())
    planted = [r for r in results if r["section"] == "c"]
    assert len(planted) == 4 and all(r["status"] == "PASS" and r["caught"] for r in planted), planted
    summary = [r for r in results if r["section"] == "e" and r["case"].startswith("epilogue summary")]
    assert {r["case"].split()[2] for r in summary} >= {"bias", "relu", "residual"}, summary
    assert all("ordinary" in r and "wide" in r for r in summary), summary
    assert not [r for r in results if r["status"] == "ERROR"], [r for r in results if r["status"] == "ERROR"]


def test_gemm_bench_with_no_budget_still_writes_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "bench0"
    args = [str(REPO / "runners/device/kernels_bench.py"), "--out", str(out), "--dry-run", "--per-cell", "2",
            "--no-compile", "--budget-s", "0"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (
        "stopping the main pass after 0 shapes" in proc.stdout and "stopping the fused sweep" in proc.stdout
    )
    assert (out / "gemm_bench.md").exists() and (out / "gemm_bench.csv").exists()


def test_kernels_check_cases_filter_section_a(tmp_path: Path) -> None:
    out = tmp_path / "check_a"
    args = [str(REPO / "runners/device/kernels_check.py"), "--out", str(out), "--device", "cpu", "--small",
            "--sections", "a", "--cases", "single_pass fp16->fp32", "--budget-s", "300"]  # fmt: skip
    proc = _run(args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "kernels_check.json").read_text())
    assert results and all(r["case"].startswith("single_pass fp16->fp32 ") for r in results), results
    assert not [r for r in results if r["status"] == "ERROR"], results


def _runner(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"runner_{name}", REPO / "runners/device" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there (importlib's own recipe)
    spec.loader.exec_module(mod)
    return mod


def test_matmul_check_tables_count_every_outcome(tmp_path: Path) -> None:
    """The GPU-free parts of runners/device/matmul_check.py: seeded shape sets, the CSV, the summary."""
    mc = _runner("matmul_check")
    shapes = mc.shape_sets(40, 3e8, 4e12)
    assert shapes == mc.shape_sets(40, 3e8, 4e12)
    assert sum(1 for s in shapes if s[0] == "realistic") == 390
    assert 0 < sum(1 for s in shapes if s[0] == "fuzz") <= 40
    assert all(m * n <= 3e8 and 2 * m * n * k <= 4e12 for w, m, n, k, _ in shapes if w == "fuzz")
    assert (
        mc.case_seed("fp16->fp16", 1, 2, 3)
        == mc.case_seed("fp16->fp16", 1, 2, 3)
        != mc.case_seed("bf16->bf16", 1, 2, 3)
    )
    rows = [
        {"pair": "fp16->fp16", "set": "realistic", "m": 1, "n": 2, "k": 3, "outcome": "match", "draws": 10,
         "elements": 20, "family": "single_pass", "_desc": object()},
        {"pair": "fp16->fp16", "set": "realistic", "m": 4, "n": 2, "k": 3, "outcome": "not_in_profile"},
        {"pair": "fp16->fp16", "set": "fuzz", "m": 5, "n": 2, "k": 3, "outcome": "tail_defect", "draws": 10,
         "elements": 100, "family": "splitk"},
    ]  # fmt: skip
    mc.write(rows, tmp_path)
    back = list(csv.DictReader((tmp_path / "matmul_check.csv").open()))
    assert [r["outcome"] for r in back] == ["match", "not_in_profile", "tail_defect"]
    table = mc.summarize(rows)["fp16->fp16"]
    assert table["realistic"] == {"shapes": 2, "match": 1, "not_in_profile": 1, "draws": 10,
                                  "elements_compared": 20, "families": {"single_pass": 1}}  # fmt: skip
    assert table["fuzz"]["tail_defect"] == 1 and "match" not in table["fuzz"]
    assert (
        mc.summarize_csv(tmp_path / "matmul_check.csv")["fp16->fp16"] == table
    )  # a cut run's CSV, read back


def test_matmul_check_resume_takes_over_finished_rows(tmp_path: Path) -> None:
    """--resume: an earlier run's finished rows, read back from its CSV, are taken over when the
    answer and descriptor are still the plan's; the rest run again; the summary still adds up."""
    mc = _runner("matmul_check")

    def planned(m: int, which: str = "realistic", answer: str = "A1", desc: str = "d1") -> dict:
        return {"pair": "fp16->fp16", "set": which, "m": m, "n": 8, "k": 16, "layer": "", "seed": m,
                "answer": answer, "desc_hash": desc, "family": "single_pass", "tail_loss": 0,
                "_in": "fp16", "_out": "fp16", "_desc": object()}  # fmt: skip

    done = {"outcome": "match", "draws": 10, "elements": 80 * 10, "ndiff": 0, "nonzero_share": 0.5,
            "cublas_kernels": "nvjet_x", "cublas_family": "nvjet_single_pass", "t_s": 0.25}  # fmt: skip
    old = [
        {**planned(1), **done},  # taken over
        {**planned(2), **done, "outcome": "mismatch", "ndiff": 3},  # taken over, ndiff kept
        {**planned(3), **done, "answer": "A2"},  # the heuristic answers otherwise now: run again
        {**planned(4), **done, "desc_hash": "d2"},  # the profile's descriptor changed: run again
        {**planned(5), "outcome": "not_run", "note": "budget"},  # not finished: run again
        {**planned(6, "fuzz"), **done, "outcome": "tail_defect", "tail_loss": 7},
        {**planned(7), **done, "outcome": "error", "draws": "", "elements": "", "note": "OOM"},
        {**planned(1, "fuzz"), **done, "cublas_kernels": "nvjet_fuzz"},  # another set, another row
    ]
    mc.write(old, tmp_path)
    back = mc.read_csv(tmp_path / "matmul_check.csv")
    plan = [planned(m) for m in range(1, 6)] + [planned(6, "fuzz"), planned(7)]
    plan.append({**planned(8), "outcome": "not_in_profile"})  # decided by the plan: left alone
    assert mc.take_over(plan, back) == 4
    assert sorted(r["m"] for r in plan if r.get("_resumed")) == [1, 2, 6, 7]
    r1, r2, r6, r7, r8 = plan[0], plan[1], plan[5], plan[6], plan[7]
    assert (r1["draws"], r1["elements"], r1["ndiff"], r1["m"]) == (10, 800, 0, 1)  # typed back
    assert r1["nonzero_share"] == 0.5 and r1["cublas_kernels"] == "nvjet_x"
    assert r2["outcome"] == "mismatch" and r2["ndiff"] == 3
    assert r6["outcome"] == "tail_defect" and r6["tail_loss"] == 7
    assert "draws" not in r7 and r7["note"] == "OOM"  # empty CSV cells are absent, not ""
    assert r8["outcome"] == "not_in_profile" and "_resumed" not in r8
    assert all("outcome" not in r for r in plan[2:5])
    table = mc.summarize(plan)["fp16->fp16"]
    assert table["realistic"]["draws"] == 20 and table["realistic"]["elements_compared"] == 1600


def test_matmul_check_profiles_pending_calls_in_chunks() -> None:
    """After a pair's sweep: pending calls cut into sessions by bytes; each row gets its own
    launch when its bytes differ, else its answer's; a failed profile leaves a note."""
    mc = _runner("matmul_check")
    big = mc.Redo(1000, 1000, 1000, "fp16", "fp32", 1)
    assert big.nbytes == 2 * 2_000_000 + 4_000_000
    pending = {("p", "A", ""): big, ("p", "B", ""): big, ("p", "A", "fuzz:1x1x1"): big}
    assert mc.profile_chunks(pending, 2 * big.nbytes) == [
        [("p", "A", ""), ("p", "B", "")],
        [("p", "A", "fuzz:1x1x1")],
    ]
    assert mc.profile_chunks(pending, 1) == [[k] for k in pending]  # never an empty chunk
    assert mc.profile_chunks({}, 1) == []

    def row(m: int, answer: str, outcome: str = "match") -> dict:
        return {"pair": "p", "set": "fuzz", "m": m, "n": 1, "k": 1, "answer": answer, "draws": 10,
                "outcome": outcome}  # fmt: skip

    group = [
        row(1, "A", "mismatch"),
        row(2, "A"),
        row(3, "B"),
        {**row(4, "A"), "_resumed": True},
        row(5, "C"),
    ]
    del group[4]["draws"]  # not run: nothing to fill
    found = {("p", "A", ""): ("k_a", "fa"), ("p", "A", "fuzz:1x1x1"): ("k_own", "fo")}
    mc.fill_kernels(group, found, {("p", "B", ""): "profile_error: boom"})
    assert [(r.get("cublas_kernels"), r.get("note")) for r in group] == [
        ("k_own", None), ("k_a", None), (None, "profile_error: boom"), (None, None), (None, None)
    ]  # fmt: skip


def test_reconstruct_pairs_and_sweep_extension() -> None:
    rc = _runner("reconstruct")
    todo, weights = rc.explicit_pairs("bf16:bf16:2,fp16:fp32")
    assert todo == [("bf16", "bf16"), ("fp16", "fp32")] and weights == {
        ("bf16", "bf16"): 2.0,
        ("fp16", "fp32"): 1.0,
    }
    with pytest.raises(SystemExit, match="IN:OUT"):
        rc.explicit_pairs("fp16")
    first = rc.sweep_cases(60, 0)
    more = rc.sweep_cases(90, 0, 60)
    assert more and all(c.which == "fuzz" for c in more)
    assert not {(c.m, c.n, c.k) for c in more} & {(c.m, c.n, c.k) for c in first if c.which == "fuzz"}


def test_gemm_bench_pairs_say_which_shapes_cublas_cannot_run() -> None:
    """--pair picks the dtypes timed; fp8 shapes cuBLASLt 13.1 runs no algorithm for are listed
    as not timed (with the reason), never timed against a stand-in."""
    sys.path.insert(0, str(REPO / "benchmarks" / "gemm"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    fp8 = bench.Pair("fp8_e4m3", "fp32")
    assert fp8.fp8 and fp8.label == "fp8_e4m3->fp32"
    assert fp8.skip_reason(16, 4096, 4096) == ""
    assert "K % 16" in fp8.skip_reason(16, 4096, 4100) and "N % 4" in fp8.skip_reason(16, 4098, 4096)
    assert all(bench.Pair(*p.split(":")).skip_reason(3, 5, 7) == "" for p in bench.PAIRS if "fp8" not in p)
    assert bench.Pair() == bench.Pair("fp16", "fp16") and "fp8_e4m3:fp32" in bench.PAIRS


def test_replay_draws_plant_spikes_only_when_asked() -> None:
    """matmul_check.draw_operands: without spikes the ordinary/wide alternation of every earlier
    run (so recorded replays redraw the same bytes); with them every third draw is a spike draw,
    planted as fixbits.probe.spikes plants it (the pairs cancel: B's rows repeat)."""
    import numpy as np

    from fixbits.kernels.backend import to_numpy
    from fixbits.probe import spikes
    from fixbits.probe.hashdraw import operand

    mc = _runner("matmul_check")
    m, n, k, seed = 3, 4, 200, 11
    for d in range(4):
        a, b = (to_numpy(x, "fp16") for x in mc.draw_operands(m, n, k, "fp16", seed, d, device="cpu"))
        kind = "ordinary" if d % 2 == 0 else "wide"
        s = seed * 64 + 2 * d
        want_a = to_numpy(operand((m, k), "fp16", kind, s, "cpu"), "fp16")
        assert np.array_equal(a.view(np.uint16), want_a.view(np.uint16)), f"seed {seed} draw {d}"
        assert b.shape == (k, n)
    a, b = (to_numpy(x, "fp16") for x in mc.draw_operands(m, n, k, "fp16", seed, 2, device="cpu", spikes=True))
    pairs = spikes.positions(k, seed * 64 + 4)
    assert pairs and all(a[0, k1] == -a[0, k2] != 0 for k1, k2 in pairs)
    assert all(np.array_equal(b[k1].view(np.uint16), b[k2].view(np.uint16)) for k1, k2 in pairs)


def test_ptxas_report_reads_registers_spills_and_serialisation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/gemm/ptxas_report.py on fp8 per-MMA tiles (CPU, Triton's own ptxas): the
    default 64x128 tile fits the register file with room to spare (the whole-K chain's tail rides
    TMA, so no pointer-loaded tail and its second partial are compiled in), while 256x128 on two
    warpgroups (two 64x128 partials per warpgroup) has its wgmmas serialised (C7514)
    (benchmarks/gemm/h100/s27/fp8_ptxas.md)."""
    pytest.importorskip("triton")
    monkeypatch.syspath_prepend(str(REPO / "benchmarks/gemm"))
    import ptxas_report

    out = tmp_path / "report.md"
    assert ptxas_report.main(["--b-kmajor", "--out", str(out), "--shape", "4096x4096x4096",
                              "64x128x128_g8_w4_s4_G1_tma", "256x128x128_g8_w8_s3_G1_tma"]) == 0  # fmt: skip
    fits = ptxas_report.compile_row("fp8_e4m3", "64x128x128_g8_w4_s4_G1_tma", 4096, 4096, 4096, True)
    serial = ptxas_report.compile_row("fp8_e4m3", "256x128x128_g8_w8_s3_G1_tma", 4096, 4096, 4096, True)
    assert 0 < fits.registers < 200 and fits.spill_stores == 0 and not fits.wgmma_serialized, fits
    assert serial.wgmma_serialized, serial
    assert "| 64x128x128_g8_w4_s4_G1_tma |" in out.read_text()


def test_merge_runs_applies_partial_runs_in_order(tmp_path: Path) -> None:
    """benchmarks/gemm/merge_runs.py: each partial run replaces its shapes' rows in the order
    given (the later run wins), fused extra rows are left out, and a partial row that is not a
    shape of the full run stops the merge instead of being added."""
    cols = ["layer", "m", "n", "k", "epilogue", "gflop", "speed_ours", "speed_ours_gpu"]

    def write(name: str, rows: list[list[object]]) -> Path:
        p = tmp_path / name
        with p.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            w.writerows(rows)
        return p

    full = write("full.csv", [["moe_up", 16, 2048, 8192, "none", 0.5, 0.1, 0.2],
                              ["attention", 4096, 4096, 4096, "none", 137.4, 0.7, 0.7],
                              ["fused", 16, 2048, 8192, "silu_gate", 0.5, 0.9, 0.9]])  # fmt: skip
    first = write("p1.csv", [["moe_up", 16, 2048, 8192, "none", 0.5, 0.5, 0.5]])
    second = write("p2.csv", [["moe_up", 16, 2048, 8192, "none", 0.5, 0.8, 0.6]])
    md = tmp_path / "merged.md"
    proc = _run([str(REPO / "benchmarks/gemm/merge_runs.py"), str(full), str(first), str(second), "--md", str(md)],
                tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    assert "2 shapes from" in text and "1 replaced by" in text and "then 1 replaced by" in text
    assert "| moe_up | below | 1 | 0.800 | 0.600 |" in text and "| attention | above | 1 | 0.700 | 0.700 |" in text
    stray = write("p3.csv", [["lora_b", 1, 2, 3, "none", 0.1, 1.0, 1.0]])
    bad = _run([str(REPO / "benchmarks/gemm/merge_runs.py"), str(full), str(stray)], tmp_path)
    assert bad.returncode != 0 and "is not in the full run" in bad.stderr
