"""fixbits.gate without running pytest: pins, recorded fingerprints, what changed, which slice, verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from fixbits import gate
from fixbits.gate import Baseline, Comparison, GateError, PytestRun

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]

H200 = {
    "gpu_name": "NVIDIA H200",
    "sm": "sm_90",
    "sm_count": 132,
    "driver": "580.95.05 (CUDA 13.0)",
    "cuda_runtime": "13.0",
    "cublas": "13.1.0",
    "cublaslt": "13.1.0",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "numpy": "2.5.2",
    "python": "3.12.3",
    "host": "runner-1",
}


def baseline(source: str = "golden/g.yaml (records[0])", **over: object) -> Baseline:
    env = {**H200, **over}
    return Baseline(source, gate._env_fields(env))


def test_repo_pins_load_and_cover_every_runner_class() -> None:
    pins = gate.load_pins(REPO / "matrices" / "pins.yaml")
    assert {r.arch for r in pins.runners} == {"sm_90", "sm_100", "sm_103", "gfx942"}
    assert all("self-hosted" in r.labels and r.arch in r.labels for r in pins.runners)
    assert set(pins.slices) == set(gate.KINDS)
    assert pins.slices["cublas"] == ("suites/reconstruction", "suites/cublas_bugs")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["gate"]["slices"].pop("triton"), "gate.slices': missing kind(s) triton"),
        (lambda d: d["gate"]["slices"].update(cudnn=["suites"]), "gate.slices.cudnn"),
        (lambda d: d["runners"]["sm_90"].update(labels=["linux"]), "runners.sm_90.labels"),
        (lambda d: d["runners"].update(sm_95=d["runners"]["sm_90"]), "runners.sm_95"),
        (lambda d: d.update(extra=1), "'extra': unknown key"),
    ],
)
def test_bad_pins_name_file_and_key(tmp_path: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load((REPO / "matrices" / "pins.yaml").read_text())
    edit(data)
    p = tmp_path / "pins.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(GateError) as exc:
        gate.load_pins(p)
    assert "pins.yaml: key '" in str(exc.value) and message in str(exc.value), str(exc.value)


def test_version_matches_on_dot_boundaries() -> None:
    assert gate.version_matches("13.1", "13.1.0.3")
    assert gate.version_matches("2.11", "2.11.0+cu130")
    assert not gate.version_matches("13.1", "13.10.0")
    assert not gate.version_matches("3.6.0", "3.6.1")


def test_baselines_from_profiles_and_golden_records(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "golden").mkdir()
    (tmp_path / "profiles" / "p.yaml").write_text(yaml.safe_dump({"arch": "sm_90", "environment": H200}))
    (tmp_path / "profiles" / "no_env.yaml").write_text(yaml.safe_dump({"arch": "sm_90", "entries": {}}))
    recs = [{"id": f"r{i}", "env": H200} for i in range(3)] + [
        {"id": "old", "env": {**H200, "cublaslt": "13.0.2"}}
    ]
    (tmp_path / "golden" / "g.yaml").write_text(yaml.safe_dump({"records": recs}))
    (tmp_path / "golden" / "broken.yaml").write_text("records: [unclosed")
    found, warnings = gate.load_baselines(tmp_path)
    assert sorted(b.source for b in found) == [
        "golden/g.yaml (3 records)",
        "golden/g.yaml (records[3])",
        "profiles/no_env.yaml (profile)",  # an arch profile records its arch (and library version)
        "profiles/p.yaml (environment)",
    ]
    assert warnings == ["golden/broken.yaml: unreadable, its fingerprint is ignored (ParserError)"]
    assert all(b.get("host") is None for b in found)  # where a run happened is not what computed it


def test_a_profile_records_its_arch_and_cublaslt_version(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    prof = {"arch": "sm_90", "library": "cublaslt", "library_version": "130100", "entries": {}}
    (tmp_path / "profiles" / "sm_90_cublaslt130100_fp16_fp32.yaml").write_text(yaml.safe_dump(prof))
    found, _ = gate.load_baselines(tmp_path)
    assert [dict(b.fields) for b in found] == [{"sm": "sm_90", "cublaslt": "13.1.0"}]
    cmp = gate.compare({**H200, "cublaslt": "13.2.0"}, found)
    assert [(c.kind, c.recorded, c.current) for c in cmp.changes] == [("cublas", ("13.1.0",), "13.2.0")]


def test_committed_profiles_are_baselines_of_sm90_cublaslt_13_1() -> None:
    found, warnings = gate.load_baselines(REPO / "matrices")
    profiles = [dict(b.fields) for b in found if b.source.startswith("profiles/")]
    assert profiles and all(p == {"sm": "sm_90", "cublaslt": "13.1.0"} for p in profiles), profiles
    assert warnings == []


def test_an_unreadable_recorded_driver_is_noted_not_a_change() -> None:
    """Session 1 recorded the H200 driver as 'for (CUDA 13.0)': not a driver change on the H200."""
    bad = gate.Baseline("golden/x.yaml (3 records)", gate._env_fields({**H200, "driver": "for (CUDA 13.0)"}))
    cmp = gate.compare({**H200, "driver": "580.159.04 (CUDA 13.0)"}, [bad])
    assert cmp.changes == ()
    assert any("recorded driver 'for (CUDA 13.0)' is unreadable" in n for n in cmp.notes), cmp.notes


def test_absent_directories_are_tolerated(tmp_path: Path) -> None:
    assert gate.load_baselines(tmp_path / "nowhere") == ([], [])
    c = gate.compare(H200, [])
    assert c.changes == () and c.compared == 0 and "no fingerprint is recorded" in c.notes[0]


def test_same_stack_is_no_change() -> None:
    c = gate.compare({**H200, "host": "another-runner"}, [baseline()])
    assert c.changes == () and c.compared == 1


def test_cublas_upgrade_is_named() -> None:
    c = gate.compare({**H200, "cublaslt": "13.2.0", "cublas": "13.2.0"}, [baseline()])
    assert c.kinds == ("cublas",)
    assert [ch.describe() for ch in c.changes] == [
        "cublas: cublas 13.1.0 -> 13.2.0 (recorded in golden/g.yaml (records[0]))",
        "cublas: cublaslt 13.1.0 -> 13.2.0 (recorded in golden/g.yaml (records[0]))",
    ]


def test_driver_and_gpu_changes() -> None:
    c = gate.compare(
        {**H200, "driver": "590.1 (CUDA 13.1)", "gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132},
        [baseline()],
    )
    assert c.kinds == ("gpu", "driver")


def test_a_gpu_arch_never_recorded_is_a_gpu_change() -> None:
    b200 = {**H200, "sm": "sm_100", "gpu_name": "NVIDIA B200", "sm_count": 148}
    c = gate.compare(b200, [baseline()])
    assert "gpu" in c.kinds
    assert any("no fingerprint was recorded on sm_100" in n for n in c.notes)


def test_no_gpu_compares_only_what_a_cpu_can_know() -> None:
    cpu = {k: None for k in H200} | {"torch": "2.11.0+cu130", "triton": "3.7.0", "python": "3.11"}
    c = gate.compare(cpu, [baseline()])
    assert c.kinds == ("triton",)
    assert any("no GPU visible" in n for n in c.notes)


def _tree(tmp_path: Path) -> Path:
    for d in (
        "suites/reconstruction",
        "suites/cublas_bugs",
        "suites/enforcement",
        "suites/checker_soundness",
    ):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_kernels_plan.py").write_text("")
    return tmp_path


def test_selection_follows_the_change(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    pins = gate.load_pins(REPO / "matrices" / "pins.yaml")

    def sel(kinds: tuple[str, ...], **kw: object) -> gate.Selection:
        changes = tuple(gate.Change(k, k, ("a",), "b", ("x",)) for k in kinds)
        return gate.select(Comparison(changes, 1), pins, root, gpu_visible=True, **kw)  # type: ignore[arg-type]

    s = sel(("cublas",))
    assert s.paths == ("suites/reconstruction", "suites/cublas_bugs") and s.mode == "full"
    s = sel(("triton",))
    assert s.paths == ("suites/enforcement", "suites/checker_soundness", "tests/test_kernels_plan.py")
    s = sel(("driver", "cublas"))
    assert s.paths == ("suites",)  # the suites subdirectories are inside 'suites': not run twice
    s = sel(())
    assert s.paths == ("suites",) and s.mode == "quick" and s.reason == "no fingerprint field changed"
    s = sel(("cublas",), mode="fuzz")
    assert s.mode == "fuzz"
    no_gpu = gate.select(
        Comparison((gate.Change("triton", "triton", ("3.5",), "3.6.0", ("x",)),), 1),
        pins,
        root,
        gpu_visible=False,
    )
    assert no_gpu.mode == "quick" and no_gpu.kinds == ("triton",)
    with pytest.raises(GateError, match="--slice 'cudnn'"):
        sel((), slice_="cudnn")


def test_unmatched_globs_are_reported(tmp_path: Path) -> None:
    pins = gate.load_pins(REPO / "matrices" / "pins.yaml")
    s = gate.select(
        Comparison((gate.Change("triton", "triton", ("a",), "b", ("x",)),), 1),
        pins,
        tmp_path,
        gpu_visible=True,
    )
    assert s.paths == ()  # nothing at all under this root
    assert "tests/test_kernels_*.py" in s.unmatched
    (tmp_path / "suites" / "reconstruction").mkdir(parents=True)
    s = gate.select(
        Comparison((gate.Change("triton", "triton", ("a",), "b", ("x",)),), 1),
        pins,
        tmp_path,
        gpu_visible=True,
    )
    assert s.paths == ("suites",) and "every suite runs" in s.reason  # never "ran nothing" for a change


def _run(rc: int | None) -> PytestRun:
    return PytestRun(("pytest",), rc, 1.0, Path("j.xml"), Path("l.log"))


def _summary(**counts: int) -> SimpleNamespace:
    base = {"tests": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    base.update(counts)
    base["tests"] = sum(v for k, v in base.items() if k != "tests")
    return SimpleNamespace(**base)


@pytest.mark.parametrize(
    ("rc", "counts", "code", "words"),
    [
        (0, {"passed": 3, "skipped": 2}, 0, "3 test(s) returned the recorded bytes"),
        (0, {"skipped": 4}, 0, "all 4 test(s) skipped"),
        (1, {"passed": 3, "failed": 1}, 1, "1 test(s) drifted"),
        (1, {"passed": 3, "failed": 1, "errors": 2}, 1, "drifted"),
        (1, {"passed": 3, "errors": 1}, 2, "errored before comparing bytes"),
        (2, {"errors": 1}, 2, "interrupted"),
        (4, {}, 2, "usage error"),
        (5, {}, 2, "collected no test"),
        (None, {}, 2, "time budget"),
    ],
)
def test_exit_codes(rc: int | None, counts: dict[str, int], code: int, words: str) -> None:
    got, reason = gate.decide(_run(rc), _summary(**counts))
    assert got == code and words in reason, (rc, counts, reason)


def test_no_junit_is_could_not_run() -> None:
    assert gate.decide(_run(0), None)[0] == gate.EXIT_COULD_NOT_RUN


def test_family_of() -> None:
    assert gate.family_of("suites.reconstruction.test_x::test_a[fp16]", {}) == "reconstruction"
    assert gate.family_of("tests.test_desc::test_b", {}) == "unit"
    assert gate.family_of("suites.reconstruction.test_x::t", {"fixbits.family": "splitk"}) == "splitk"


def test_speed_ratios_from_junit_and_csv(tmp_path: Path) -> None:
    (tmp_path / "b.csv").write_text("kernel,dtype,ratio\nsum,fp32,0.97\nsum,fp16,1.03\nsoftmax,fp32,nan\n")
    (tmp_path / "g.csv").write_text("m,n,k,layer,speed_fixbits,speed_compile\n1,2,3,MLP,1.2,\n")
    case = SimpleNamespace(test="suites.x::test_speed[a]", properties=(("fixbits.speed_ratio", "0.9"),))
    perf = SimpleNamespace(test="suites.x::test_perf[b-1]", properties=(("pinned_over_free_speed", "0.97"),))
    got = sorted((s.label, s.ratio, s.source) for s in gate.speed_ratios([case, perf], [tmp_path]))
    assert got == [
        ("MLP (fixbits)", 1.2, "g.csv"),
        ("sum", 0.97, "b.csv"),
        ("sum", 1.03, "b.csv"),
        ("test_perf (pinned_over_free_speed)", 0.97, "junit (this run)"),
        ("test_speed (fixbits.speed_ratio)", 0.9, "junit (this run)"),
    ]


def test_emit_matrix_for_the_pr_gate() -> None:
    pins = gate.load_pins(REPO / "matrices" / "pins.yaml")
    m = gate.emit_matrix("pr.yaml", pins, REPO)
    arches = [j["arch"] for j in m["include"]]
    assert set(arches) == {"sm_90", "sm_100", "sm_103", "gfx942"}
    for job in m["include"]:
        assert job["labels"][0] == "self-hosted" and job["arch"] in job["labels"]
        assert job["mode"] == "quick"
    json.dumps(m)  # what the workflow's fromJSON reads


def test_emit_matrix_adds_a_label_per_extra_cublas_version(tmp_path: Path) -> None:
    pins = gate.load_pins(REPO / "matrices" / "pins.yaml")
    (tmp_path / "m.yaml").write_text(
        "archs: [sm_90, gfx942]\ndtypes: [fp16]\ncublas: [installed, '12.8.5']\n"
    )
    jobs = gate.emit_matrix(str(tmp_path / "m.yaml"), pins, REPO)["include"]
    sm90 = [j for j in jobs if j["arch"] == "sm_90"]
    assert [j["cublas"] for j in sm90] == ["installed", "12.8.5"]
    assert "cublas-12.8.5" in sm90[1]["labels"] and not any(
        x.startswith("cublas-") for x in sm90[0]["labels"]
    )
    assert [j["cublas"] for j in jobs if j["arch"] == "gfx942"] == ["installed"]  # no cuBLAS axis on AMD
    with pytest.raises(GateError, match="no such run matrix"):
        gate.emit_matrix("nope.yaml", pins, REPO)
