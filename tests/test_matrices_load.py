"""matrices/*.yaml load, agree with each other, and malformed files fail naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixbits import matrices
from fixbits.matrices import MatrixError, check_consistency, load_arches, load_libraries, load_run_matrix

REPO = Path(__file__).resolve().parent.parent


def test_committed_matrices_load_and_agree() -> None:
    arches, libs = load_arches(), load_libraries()
    assert set(arches) == {"sm_80", "sm_90", "sm_100", "sm_103", "gfx942", "gfx950"}
    assert arches["sm_90"].vendor == "nvidia" and "wgmma" in arches["sm_90"].instructions
    assert "tcgen05" in arches["sm_100"].instructions and arches["gfx942"].warp_size == 64
    assert "13.1.0" in libs.cublas and libs.knows_cublas("13.1") and not libs.knows_cublas("11.0")
    for path in (REPO / "matrices" / "pr.yaml", REPO / "matrices" / "nightly.yaml"):
        run = load_run_matrix(path)
        assert check_consistency(run, arches, libs, where=path.name) == []
        assert run.cells(arches), path.name


def test_run_matrix_cells_follow_arch_support() -> None:
    arches = load_arches()
    nightly = load_run_matrix(REPO / "matrices" / "nightly.yaml")
    cells = nightly.cells(arches)
    assert all(c.dtype in arches[c.arch].dtypes for c in cells)
    assert not any(c.arch == "sm_80" and c.dtype == "fp8_e4m3" for c in cells)
    assert all(c.cublas == "installed" for c in cells if c.arch.startswith("gfx"))
    hopper = nightly.restrict(arch="sm_90", dtypes=("fp16",))
    assert hopper.archs == ("sm_90",) and hopper.dtypes == ("fp16",)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "archs: [sm_90]\ndtypes: [fp16, bf16, fp7]\n",
            "key 'dtypes[2]': 'fp7' is not one of fp16, bf16, fp8_e4m3",
        ),
        (
            "archs: [sm_91]\ndtypes: [fp16]\n",
            "key 'archs[0]': 'sm_91' is not one of sm_80, sm_90, sm_100, sm_103, gfx942, gfx950",
        ),
        ("archs: sm_90\ndtypes: [fp16]\n", "key 'archs': expected a list, got str"),
        ("dtypes: [fp16]\n", "key 'archs': missing"),
        (
            "archs: [sm_90]\ndtypes: [fp16]\nmode: nightly\n",
            "key 'mode': 'nightly' is not one of quick, full, fuzz",
        ),
        (
            "archs: [sm_90]\ndtypes: [fp16]\ncublas: [thirteen]\n",
            "key 'cublas[0]': 'thirteen' is not a version",
        ),
        ("archs: [sm_90]\ndtypes: [fp16]\nshapes: all\n", "key 'shapes': unknown key; known: name, archs"),
        ("archs: [sm_90]\ndtypes: [fp16]\nfuzz_count: -1\n", "key 'fuzz_count': -1 is below the minimum 0"),
        ("- just\n- a list\n", "key '(top level)': expected a mapping, got list"),
        ("archs: [sm_90\n", "not valid YAML"),
    ],
)
def test_run_matrix_errors_name_file_key_and_allowed(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "x.yaml", text)
    with pytest.raises(MatrixError) as info:
        load_run_matrix(path)
    assert str(info.value).startswith(f"{path}: "), str(info.value)
    assert message in str(info.value)


def test_files_in_the_repo_are_named_relative_to_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(matrices, "REPO_ROOT", tmp_path)
    (tmp_path / "matrices").mkdir()
    path = write(tmp_path / "matrices", "x.yaml", "archs: [sm_90]\ndtypes: [fp16, bf16, fp7]\n")
    with pytest.raises(
        MatrixError, match=r"^matrices/x\.yaml: key 'dtypes\[2\]': 'fp7' is not one of fp16, bf16, fp8_e4m3$"
    ):
        load_run_matrix(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "archs:\n  sm_90: {vendor: amd, instructions: [mma], dtypes: [fp16], warp_size: 32}\n",
            "key 'archs.sm_90.vendor': 'amd' does not match the arch (expected 'nvidia')",
        ),
        (
            "archs:\n  sm_90: {vendor: nvidia, instructions: [hmma], dtypes: [fp16], warp_size: 32}\n",
            "key 'archs.sm_90.instructions[0]': 'hmma' is not one of mma, wgmma, tcgen05, mfma, fma",
        ),
        (
            "archs:\n  sm_90: {vendor: nvidia, instructions: [mma], dtypes: [fp16], warp_size: 48}\n",
            "key 'archs.sm_90.warp_size': 48 is not one of 32, 64",
        ),
        (
            "archs:\n  sm_90: {vendor: nvidia, instructions: [mma], dtypes: [fp16]}\n",
            "key 'archs.sm_90.warp_size': missing",
        ),
        (
            "archs:\n  sm_90: {vendor: nvidia, instructions: [mma], dtypes: [fp16], warp_size: 32, sms: 132}\n",
            "key 'archs.sm_90.sms': unknown key",
        ),
    ],
)
def test_arch_file_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(MatrixError, match=None) as info:
        load_arches(write(tmp_path, "arch.yaml", text))
    assert message in str(info.value)


def test_libraries_file_errors(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match=r"key 'cublas\[1\]': 'latest' is not a version like 13.1.0"):
        load_libraries(
            write(tmp_path, "libraries.yaml", "cublas: ['13.1.0', latest]\ntriton: []\ntorch: []\n")
        )
    with pytest.raises(MatrixError, match="key 'triton': missing"):
        load_libraries(write(tmp_path, "libraries.yaml", "cublas: []\ntorch: []\n"))


def test_consistency_reports_unknown_versions(tmp_path: Path) -> None:
    run = load_run_matrix(write(tmp_path, "r.yaml", "archs: [sm_90]\ndtypes: [fp16]\ncublas: ['11.0.1']\n"))
    problems = check_consistency(run, load_arches(), load_libraries(), where="r.yaml")
    assert problems == ["r.yaml: cuBLAS 11.0.1 is not listed in matrices/libraries.yaml"]
