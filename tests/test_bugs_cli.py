"""`fixbits bug splitk-tail` argument parsing and report, and the GPU probe's CPU-side parts."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from fixbits.bugs.cli import format_reproduction, parse_shape
from fixbits.bugs.splitk_tail import OnesResult, Reproduction, tail_condition
from fixbits.cli import build_parser
from fixbits.cublas.lt import HeuristicAnswer

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]


def test_parse_shape() -> None:
    assert parse_shape("32x32x11528") == (32, 32, 11528)
    assert parse_shape(" 1X8x57608 ") == (1, 8, 57608)
    for bad in ("32x32", "axbxc", "0x8x16", "1x8x-3", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_shape(bad)


def test_cli_arguments() -> None:
    argv = [
        "bug",
        "splitk-tail",
        "--shape",
        "1x8x11528",
        "--dtype",
        "bf16",
        "--workspace",
        "0",
        "--desc-out",
        "d.yaml",
    ]
    args = build_parser(argv).parse_args(argv)
    assert (args.shape, args.dtype, args.workspace, args.bug) == ((1, 8, 11528), "bf16", 0, "splitk-tail")
    assert args.desc_out == "d.yaml"
    argv = ["bug", "splitk-tail"]
    args = build_parser(argv).parse_args(argv)
    assert args.shape == (32, 32, 11528) and args.dtype == "fp16" and args.workspace == 32 << 20
    for bad in (["bug", "splitk-tail", "--dtype", "fp64"], ["bug", "splitk-tail", "--shape", "3x3"], ["bug"]):
        with pytest.raises(SystemExit):
            build_parser(bad).parse_args(bad)


def _rep(own_value: float) -> Reproduction:
    k = 11528
    ans = HeuristicAnswer(66, 13, 9, 2, 0, 0, 0, 1 << 20)
    return Reproduction(
        32,
        32,
        k,
        "fp16",
        "sm_90",
        "13.1.0",
        "/x/libcublasLt.so.13",
        ans,
        tail_condition(k, 64, 9, 66),
        (
            OnesResult("lt-own", "fp32", own_value, own_value, own_value),
            OnesResult("lt-own-no-workspace", "fp32", 11528.0, 11528.0, 11528.0),
            OnesResult("torch.mm", "fp16", 11520.0, 11520.0, 11520.0),
            OnesResult(
                "torch.matmul", "fp16", float("nan"), float("nan"), float("nan"), "RuntimeError: boom"
            ),
        ),
    )


def test_report_text() -> None:
    text = format_reproduction(_rep(11520.0))
    assert (
        "predicted loss: span rule 8, paper's condition 8; observed (cuBLASLt own pick) 8: "
        "span rule matches, paper's condition matches" in text
    )
    assert "'algo_id': 66" in text and "q=180 t=8 s=9" in text
    assert "RuntimeError: boom" in text
    assert "whole K reads 11528" in text  # 11528 is an fp16 value (step 8 above 8192)
    assert "DIFFERS" in format_reproduction(_rep(11528.0))
    assert "9 contiguous parts of 1280, last ends at 11520" in text


def _probe():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "cublas_probe", ROOT / "runners" / "device" / "cublas_probe.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_probe_arguments_and_summary(tmp_path: Path) -> None:
    probe = _probe()
    args = probe.parse_args(["--out", str(tmp_path), "--budget-s", "60", "--parts", "sweep,torch"])
    assert args.budget_s == 60 and args.parts == "sweep,torch"
    for bad in (["--out", "x", "--parts", "sweep,nope"], ["--out", "x", "--budget-s", "0"], []):
        with pytest.raises(SystemExit):
            probe.parse_args(bad)
    rep = probe.Report(str(tmp_path))
    rep.part(
        "sweep",
        lambda: {
            "queried": 3,
            "ran": 2,
            "losses_found": 1,
            "flagged_by_either_variant": 1,
            "out_of_time": False,
            "table": "T",
        },
    )
    rep.part("torch", lambda: 1 / 0)
    text = probe.summary(rep)
    assert (
        "sweep: 3 shapes queried, 2 run, 1 losses" in text and "PART torch FAILED: ZeroDivisionError" in text
    )
    assert (tmp_path / "cublas_probe.yaml").exists()


def test_probe_sweep_and_torch_parts_with_a_fake_black_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's glue (sweep -> CSV/YAML -> torch part -> summary) on CPU, with the GPU faked."""
    import fixbits.bugs.splitk_tail as st

    probe = _probe()

    class Lt:
        version_str = "13.1.0"

        def heuristic(self, m: int, n: int, k: int, dt: str, out: str) -> HeuristicAnswer:
            return HeuristicAnswer(66 if n >= 8 else 23, 10, max(1, min(64, k // 1280)), 0, 0, 0, 0, 0)

    def fake_ones_lt(lt, m, n, k, dt, *, workspace_bytes, pool=None, **kw):  # type: ignore[no-untyped-def]
        a = lt.heuristic(m, n, k, dt, "fp32")
        lost = tail_condition(k, 64, a.splitk_num, a.algo_id).lost if workspace_bytes else 0
        return OnesResult("lt-own", "fp32", float(k - lost), float(k - lost), float(k - lost))

    def fake_ones_torch(m, n, k, dt, how, pool=None):  # type: ignore[no-untyped-def]
        return OnesResult(
            f"torch.{how}", "fp32" if how == "mm_out_fp32" else dt, float(k), float(k), float(k)
        )

    small = st.parse_sweep(
        {
            "seed": 1,
            "in_dtypes": ["fp16", "bf16"],
            "mn": [[1, 8], [1, 2]],
            "k_grid": {"start": 8, "stop": 12000, "step": 8},
            "others_per_mn": 5,
            "random_shapes": {"count": 10, "m_max": 64, "n_max": 64, "k_max": 20000, "k_multiple": 8},
        }
    )
    monkeypatch.setattr(st, "device_arch", lambda: "sm_90")
    monkeypatch.setattr(st, "ones_lt", fake_ones_lt)
    monkeypatch.setattr(st, "ones_torch", fake_ones_torch)
    monkeypatch.setattr(st, "OnesPool", lambda: None)
    monkeypatch.setattr(st, "load_sweep", lambda quick=False: small)
    rep = probe.Report(str(tmp_path))
    rep.part("sweep", probe.part_sweep, Lt(), str(tmp_path), 30.0, True, 1)
    rep.part("torch", probe.part_torch, Lt(), rep.data["parts"].get("sweep"), 30.0)
    assert not rep.data["errors"], rep.data["errors"]
    sw = rep.data["parts"]["sweep"]
    assert sw["queried"] == len(small.shapes()) * 2 and not sw["out_of_time"]
    conf = sw["confusion"]
    assert conf["paper"]["all"]["fp"] == conf["paper"]["all"]["fn"] == 0 and sw["losses_found"] > 0
    assert conf["span"]["all"] == conf["paper"]["all"]  # splits stay below 64 in this fake: the rules agree
    assert conf["paper_no_algo"]["all"]["fp"] > 0  # the 1x2 shapes land on ALGO 23 in this fake
    rows = (tmp_path / "splitk_sweep.csv").read_text().splitlines()
    assert rows[0].startswith("m,n,k,in_dtype,algo_id") and len(rows) > sw["losses_found"]
    tp = rep.data["parts"]["torch"]
    assert tp["cases"] and tp["mm_out_fp32_loses"] == 0
    assert "span_no_algo" in probe.summary(rep)


def test_probe_replay_part_writes_golden_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay part with the emulator standing in for the GPU: records replay on CPU."""
    import numpy as np
    import torch

    import fixbits.bugs.splitk_tail as st
    import fixbits.cublas.backend as be
    from fixbits.emulate import emulate
    from fixbits.golden import load_file, replay

    probe = _probe()

    class Lt:
        version_str = "13.1.0"

        def heuristic(self, m: int, n: int, k: int, dt: str, out: str) -> HeuristicAnswer:
            return HeuristicAnswer(66, 10, 9 if k == 11528 else 45, 0, 0, 0, 0, 0)

        def matmul(self, a: np.ndarray, b: np.ndarray, out: str) -> np.ndarray:
            ans = self.heuristic(1, 1, a.shape[1], "", "")
            pred = tail_condition(a.shape[1], 64, ans.splitk_num, 66)
            return emulate(st.tail_dropped_desc(pred, "bf16" if a.dtype.name == "bfloat16" else "fp16"), a, b)

    monkeypatch.setattr(st, "device_arch", lambda: "sm_90")
    monkeypatch.setattr(be, "to_torch", lambda x, name: x)
    monkeypatch.setattr(be, "to_numpy", lambda x, name: x)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "fake")
    rep = probe.Report(str(tmp_path))
    rep.part("replay", probe.part_replay, Lt(), str(tmp_path), 7, 0.1)
    assert not rep.data["errors"], rep.data["errors"]
    rp = rep.data["parts"]["replay"]
    assert (
        rp["replayed"] >= 1
        and rp["replayed_equal"] == rp["replayed"]
        and rp["golden_records"] == 2 * rp["replayed"]
    )
    records = load_file(tmp_path / "golden_cublas_bugs_splitk.yaml")
    assert all(replay(r).ok for r in records[:2])


def test_cli_without_a_gpu_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    from fixbits import predicates
    from fixbits.cli import main

    if predicates.gpu_vendor() == "nvidia":
        pytest.skip(
            "an NVIDIA GPU is present: the reproducer runs instead (tests/test_cublas_gpu_binding.py)"
        )
    assert main(["bug", "splitk-tail", "--shape", "1x8x11528"]) == 2
    assert "needs an NVIDIA GPU with cuBLASLt" in capsys.readouterr().err
