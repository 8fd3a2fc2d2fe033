"""The K-loop step a STAGES_ID implies (fixbits.probe.stages) and the committed profiles' use of it."""

from __future__ import annotations

import pytest

from fixbits.cublas.enums import STAGES, stage_depth
from fixbits.cublas.lt import HeuristicAnswer
from fixbits.desc import GEMMDesc
from fixbits.probe import profile as profiles
from fixbits.probe.profile import ArchProfile, ProfileEntry
from fixbits.probe.stages import disagreements, implied_step, kernel_depth, prefer_step

BASE = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")


@pytest.mark.parametrize(
    ("stages_id", "depth"),
    [
        (1, 16),
        (6, 16),
        (7, 32),
        (15, 64),
        (20, 128),
        (24, 128),
        (25, 32),
        (26, 8),
        (30, 64),
        (0, None),
        (35, None),
    ],
)
def test_stage_depth_follows_the_cublaslt_enum(stages_id: int, depth: int | None) -> None:
    assert stage_depth(stages_id) == depth
    assert len(STAGES) == 30


@pytest.mark.parametrize(
    ("answer", "step"),
    [
        ("a23-t11-s52-r4-w0-c0-g20", 128),
        ("a24-t11-s29-r4-w0-c0-g14", 64),
        ("a23-t17-s-1-r2-w0-c0-g15", 64),
        ("a66-t10-s1-r0-w0-c1-g35", None),  # nvjet: not an algo of the rule
        ("a13-t0-s1-r0-w0-c56-g0", None),
        ("not a key", None),
        ({"algo_id": 23, "tile_id": 21, "splitk_num": 6, "reduction_scheme": 4, "cta_swizzling": 0,
          "custom_option": 0, "stages_id": 10}, 32),
        (HeuristicAnswer(24, 11, 4, 4, 0, 0, 19, 0), 128),
    ],
)
def test_implied_step_from_keys_dicts_and_answers(answer: object, step: int | None) -> None:
    assert implied_step(answer) == step


def test_prefer_step_keeps_only_the_implied_step_and_never_empties() -> None:
    readings = [BASE.replace(k_loop_step=s) for s in (32, 64, 128)]
    assert prefer_step(readings, "a23-t17-s4-r2-w0-c0-g15") == [readings[1]]
    assert prefer_step(readings[:1], "a23-t17-s4-r2-w0-c0-g15") == readings[:1]  # the draws' survivor stays
    assert prefer_step(readings, "a66-t10-s1-r0-w0-c1-g35") == readings


def test_disagreements_name_the_entry_and_the_steps() -> None:
    good = ProfileEntry("a23-t11-s52-r4-w0-c0-g20", BASE.replace(k_loop_step=128), (1, 2, 3), 2, 2, ())
    bad = ProfileEntry("a23-t17-s132-r2-w0-c0-g15", BASE.replace(k_loop_step=32), (1, 2, 3), 2, 2, ())
    prof = ArchProfile("sm_90", "cublaslt", "130100", "fp16", "fp32", {e.key: e for e in (good, bad)}, {})
    assert disagreements(prof) == [("a23-t17-s132-r2-w0-c0-g15", "entry", 32, 64)]


@pytest.mark.parametrize("path", profiles.available(), ids=lambda p: p.name)
def test_committed_entries_step_as_their_stages_id_implies(path: object) -> None:
    """Every algo-23/24 descriptor of the committed profiles steps by its STAGES_ID's depth: the
    probed ones all do, and the predicted ones that had carried another tile's step were
    corrected (benchmarks/reconstruction/stage_rule.py). A new entry that breaks the rule is
    either a wrong prediction or a counterexample to be looked at, never silently kept."""
    assert disagreements(profiles.load(path)) == []


def test_kernel_depth_reads_the_stage_of_cutlass_names_only() -> None:
    assert (
        kernel_depth(
            "void cutlass::Kernel2<cutlass_80_wmma_tensorop_s161616gemm_f16_32x32_128x2_nn_align2>(x)"
        )
        == 128
    )
    assert (
        kernel_depth("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_bf16_64x128_64x3_nn_align2>(x)")
        == 64
    )
    assert kernel_depth("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNN") is None
    assert (
        kernel_depth("void gemv2T_kernel_val<int, int, __half, __half, float, 128, 16, 4, 4, false>") is None
    )


def test_the_kernels_the_h200_ran_step_as_the_committed_entries() -> None:
    """matmul_check s15 recorded, per heuristic answer, the kernels cuBLAS launched: where that is a
    cutlass kernel, its stage depth is the committed entry's step (two rows broke this before the
    correction, and they were the two shapes whose bytes differed)."""
    import csv
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "benchmarks/gemm/h200/matmul_check_s15/matmul_check.csv"
    loaded = {(p.dtype, p.out_dtype): p for p in map(profiles.load, profiles.available())}
    seen = 0
    with run.open(newline="") as fh:
        for r in csv.DictReader(fh):
            depth = kernel_depth(r["cublas_kernels"])
            dt, od = r["pair"].split("->")
            if (
                depth is None
                or r["outcome"] not in ("match", "mismatch")
                or r["answer"] not in loaded[(dt, od)].entries
            ):
                continue
            desc = loaded[(dt, od)].lookup(r["answer"], k=int(r["k"]), n=int(r["n"]))
            assert desc.k_loop_step == depth, (
                r["pair"],
                r["answer"],
                r["m"],
                r["n"],
                r["k"],
                desc.k_loop_step,
                depth,
            )
            seen += 1
    assert seen >= 200, seen
