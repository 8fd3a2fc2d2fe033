"""Issue 9 on the CPU: one GPU per pytest-xdist worker, `-n auto` = one worker per GPU on the GPU
suites, fuzz shape i on worker i mod n, and `fixbits report --check-shapes`. GPU lists are
simulated through CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and injected probes; the pinning
itself is checked in real xdist workers (they report the variable they ended up with)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fixbits.report.junit import CaseResult, shape_coverage
from fixbits.shapes import fuzz_index_of, fuzz_param_id, shard, shard_of
from fixbits.workers import (
    NO_GPU,
    GpuSet,
    auto_workers,
    gpu_for_worker,
    parse_visible,
    pin_environment,
    selects_gpu_suites,
    visible_gpus,
    worker_index,
)

pytestmark = pytest.mark.unit


def none() -> tuple[str, ...]:
    return ()


# -- which GPUs, which worker owns which ------------------------------------------------------


def test_parse_visible_stops_at_the_first_invalid_entry_as_cuda_does() -> None:
    assert parse_visible("0,1, 3") == ("0", "1", "3")
    assert parse_visible("2,-1,3") == ("2",)
    assert parse_visible("") == () and parse_visible("-1") == ()
    assert parse_visible("GPU-8f2a,MIG-1c") == ("GPU-8f2a", "MIG-1c")


def test_a_set_variable_wins_over_probing() -> None:
    def boom() -> tuple[str, ...]:
        raise AssertionError("probed although the variable was set")

    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "4,6"}, nvidia=boom, amd=boom).entries == ("4", "6")
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, nvidia=boom, amd=boom).entries == ()
    hip = visible_gpus({"HIP_VISIBLE_DEVICES": "1,2"}, nvidia=boom, amd=boom)
    assert (hip.vendor, hip.var, hip.entries) == ("amd", "HIP_VISIBLE_DEVICES", ("1", "2"))
    rocr = visible_gpus({"ROCR_VISIBLE_DEVICES": "5,7,9"}, nvidia=boom, amd=boom)
    assert (rocr.var, rocr.entries) == ("HIP_VISIBLE_DEVICES", ("0", "1", "2"))  # positions in ROCR's list


def test_probes_when_nothing_is_set() -> None:
    g = visible_gpus({}, nvidia=lambda: ("0", "1", "2", "3", "4", "5", "6", "7"), amd=none)
    assert (g.vendor, len(g), g.source) == ("nvidia", 8, "nvidia-smi")
    assert visible_gpus({}, nvidia=none, amd=lambda: ("0", "1")).vendor == "amd"
    assert visible_gpus({}, nvidia=none, amd=none) == NO_GPU


def test_worker_ids() -> None:
    assert worker_index("gw0") == 0 and worker_index("gw12") == 12
    with pytest.raises(ValueError, match="not an xdist worker id"):
        worker_index("master")


@given(st.integers(1, 16), st.integers(1, 64))
def test_n_workers_on_n_gpus_own_one_each_and_more_workers_round_robin(gpus: int, workers: int) -> None:
    g = GpuSet("nvidia", "CUDA_VISIBLE_DEVICES", tuple(str(10 + i) for i in range(gpus)), "test")
    owned = [gpu_for_worker(g, f"gw{w}") for w in range(workers)]
    assert set(owned) == set(g.entries[: min(gpus, workers)])
    for e in set(owned):  # as even as it gets
        assert owned.count(e) in (workers // gpus, -(-workers // gpus))
    if workers == gpus:
        assert len(set(owned)) == workers


def test_pin_environment_sets_the_vendor_variable_only() -> None:
    cuda = GpuSet("nvidia", "CUDA_VISIBLE_DEVICES", ("2", "3"), "test")
    assert pin_environment(cuda, "gw1") == {"CUDA_VISIBLE_DEVICES": "3", "FIXBITS_WORKER_GPU": "nvidia:3"}
    amd = GpuSet("amd", "HIP_VISIBLE_DEVICES", ("0", "1"), "test")
    assert pin_environment(amd, "gw2") == {"HIP_VISIBLE_DEVICES": "0", "FIXBITS_WORKER_GPU": "amd:0"}
    assert pin_environment(NO_GPU, "gw0") == {}


def test_gpu_set_survives_the_trip_to_the_worker() -> None:
    g = GpuSet("amd", "HIP_VISIBLE_DEVICES", ("0", "1"), "KFD topology")
    assert GpuSet.from_workerinput(g.to_workerinput()) == g


def test_auto_is_one_worker_per_gpu_on_gpu_suites_only(tmp_path: Path) -> None:
    (tmp_path / "suites" / "x").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    assert selects_gpu_suites(["suites/x/test_a.py::t"], tmp_path, tmp_path)
    assert selects_gpu_suites([str(tmp_path)], tmp_path, tmp_path)  # the root holds suites/
    assert not selects_gpu_suites(["tests", "tests/test_b.py::t"], tmp_path, tmp_path)  # config.args: paths only
    eight = GpuSet("nvidia", "CUDA_VISIBLE_DEVICES", tuple("01234567"), "test")
    assert auto_workers(eight, gpu_suites=True) == 8
    assert auto_workers(eight, gpu_suites=False) is None  # xdist's CPU count
    assert auto_workers(NO_GPU, gpu_suites=True) is None


# -- sharding fuzz shapes -----------------------------------------------------------------------


@given(st.integers(0, 3000), st.integers(1, 64))
def test_shards_partition_the_seeded_set(count: int, workers: int) -> None:
    shards = [list(shard(count, w, workers)) for w in range(workers)]
    flat = [i for s in shards for i in s]
    assert sorted(flat) == list(range(count))  # union is the set, and no index twice
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    for w, s in enumerate(shards):
        assert all(shard_of(i, workers) == w for i in s)


def test_shard_rejects_a_worker_out_of_range() -> None:
    with pytest.raises(ValueError):
        shard(10, 2, 2)
    with pytest.raises(ValueError):
        shard_of(3, 0)


@given(st.integers(0, 10**6), st.sampled_from(["", "fp16-", "a-b-"]), st.sampled_from(["", "-bf16"]))
def test_fuzz_ids_round_trip(index: int, before: str, after: str) -> None:
    nodeid = f"suites/x/test_a.py::test_f[{before}{fuzz_param_id(index)}{after}]"
    assert fuzz_index_of(nodeid) == index
    assert fuzz_index_of("suites/x/test_a.py::test_f[fuzzy3]") is None
    assert fuzz_index_of("suites/x/test_a.py::test_f[7]") is None


# -- fixbits report --check-shapes -----------------------------------------------------------------


def _case(name: str) -> CaseResult:
    return CaseResult(f"suites.x.test_a::{name}", "passed")


def test_shape_coverage_names_duplicates_missing_and_unexpected() -> None:
    good = [_case(f"test_f[fp16-fuzz{i}]") for i in range(5)]
    assert shape_coverage(good, 5).ok
    cov = shape_coverage([*good[:3], good[1], _case("test_f[fp16-fuzz7]")], 5)
    assert cov.duplicates == (("suites.x.test_a::test_f[fp16-fuzz*]", 1, 2),)
    assert cov.missing == (
        ("suites.x.test_a::test_f[fp16-fuzz*]", 3),
        ("suites.x.test_a::test_f[fp16-fuzz*]", 4),
    )
    assert cov.unexpected == (("suites.x.test_a::test_f[fp16-fuzz*]", 7),)
    assert not shape_coverage([_case("test_plain")]).ok  # nothing to check is not a pass


# -- in real xdist workers ---------------------------------------------------------------------------

SUITE = """
import os, pytest
from fixbits.shapes import fuzz_param_id

def _who(record_property):
    record_property("who", os.environ["PYTEST_XDIST_WORKER"] + "|" + os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))

@pytest.mark.fuzz
@pytest.mark.parametrize("index", range(30), ids=fuzz_param_id)
def test_shape(index, record_property):
    _who(record_property)

def test_other(record_property):
    _who(record_property)
"""


def _run_xdist(tmp_path: Path, *args: str, visible: str) -> tuple[str, dict[str, str]]:
    (tmp_path / "suites" / "demo").mkdir(parents=True, exist_ok=True)
    (tmp_path / "suites" / "demo" / "test_f.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    demo: demo suite\n")
    junit = tmp_path / "j.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", f"--junitxml={junit}", "suites"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": visible, "PYTHONPATH": str(Path(__file__).parents[1])},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    who = dict(re.findall(r'name="(test_[^"]+)".*?name="who" value="([^"]+)"', junit.read_text(), re.S))
    return proc.stdout, who


def test_auto_gives_one_worker_per_visible_gpu_each_pinned_and_shapes_by_index(tmp_path: Path) -> None:
    out, who = _run_xdist(tmp_path, "-n", "auto", "--mode", "fuzz", visible="3,5,7")
    assert re.search(r"\b3 workers \[31 items\]", out), out
    for i in range(30):
        assert who[f"test_shape[fuzz{i}]"] == f"gw{i % 3}|{'357'[i % 3]}", (i, who)
    worker, gpu = who["test_other"].split("|")
    assert gpu == "357"[int(worker[2:])]  # a non-fuzz test runs pinned too
    xml = (tmp_path / "j.xml").read_text()
    assert 'name="fixbits.gpu" value="nvidia:' in xml and 'name="fixbits.worker"' in xml
    rep = subprocess.run(
        [sys.executable, "-m", "fixbits.cli", "report", str(tmp_path / "j.xml"), "--check-shapes",
         "--expect-shapes", "30"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert rep.returncode == 0 and "each exactly once" in rep.stdout, rep.stdout + rep.stderr


def test_without_gpus_auto_falls_back_to_xdist_and_nothing_is_pinned(tmp_path: Path) -> None:
    out, who = _run_xdist(tmp_path, "-n", "2", "--mode", "fuzz", visible="")
    assert set(v.split("|")[1] for v in who.values()) == {""}  # the empty list stays as it was
    assert len(who) == 31
