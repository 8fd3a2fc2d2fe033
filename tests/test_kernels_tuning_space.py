"""The autotune space file (matrices/kernels/tensor_core.yaml): per-dtype entries and defaults,
and errors that name the file and the entry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixbits.kernels import tuning


@pytest.fixture
def space_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private space folder; the parsed classes are cached per process, so clear them around."""
    monkeypatch.setattr(tuning, "SPACE_DIR", tmp_path)
    tuning.tensor_core_classes.cache_clear()
    tuning.size_class.cache_clear()
    yield tmp_path
    tuning.tensor_core_classes.cache_clear()
    tuning.size_class.cache_clear()


SPACE = """
classes:
  - name: all
    max_m: null
    default: {BLOCK_M: 128, BLOCK_N: 256, BLOCK_K: 64, num_warps: 8, num_stages: 3}
    dtype_defaults:
      fp8_e4m3: {BLOCK_M: 64, BLOCK_N: 128, BLOCK_K: 128, num_warps: 4, num_stages: 4, USE_TMA: 1}
    space:
      - {BLOCK_M: 64, BLOCK_N: 128, BLOCK_K: 128, num_warps: 4, num_stages: 4, USE_TMA: 1, when: {in_dtypes: [fp8_e4m3]}}
      - {BLOCK_M: 128, BLOCK_N: 128, BLOCK_K: 64, num_warps: 8, num_stages: 4, when: {min_k: 128}}
"""


def test_entries_for_one_input_dtype_are_its_candidates_only(space_dir: Path) -> None:
    (space_dir / "tensor_core.yaml").write_text(SPACE)
    fp8 = [c.label() for c in tuning.shape_space(4096, 4096, 4096, in_dtype="fp8_e4m3")]
    fp16 = [c.label() for c in tuning.shape_space(4096, 4096, 4096, in_dtype="fp16")]
    unnamed = [c.label() for c in tuning.shape_space(4096, 4096, 4096)]
    assert fp8 == ["64x128x128_g8_w4_s4_G1_tma", "128x128x64_g8_w8_s4_G1"]
    assert fp16 == unnamed == ["128x128x64_g8_w8_s4_G1"]
    # no entry holds (K < 128): the class default of that dtype
    assert [c.label() for c in tuning.shape_space(4096, 4096, 64, in_dtype="fp8_e4m3")] == fp8[:1]
    assert tuning.shape_space(4096, 4096, 64, in_dtype="bf16")[0].label() == "128x256x64_g8_w8_s3_G1"
    # a tune without N and K times the class's whole space, still only the entries of its dtype
    cls = tuning.size_class(4096)
    assert [c.label() for c in cls.space_for("fp16")] == ["128x128x64_g8_w8_s4_G1"]
    assert len(cls.space_for("fp8_e4m3")) == 2


def test_untuned_calls_get_their_dtype_default(space_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (space_dir / "tensor_core.yaml").write_text(SPACE)
    monkeypatch.setattr(tuning.STATE, "loaded", True)  # no tuned files from the repository
    assert tuning.best_config(("per_mma", "fp8_e4m3", "fp32"), 8192, 1, 1).label() == "64x128x128_g8_w4_s4_G1_tma"
    assert tuning.best_config(("single_pass", "fp16", "fp16"), 8192, 1, 1).label() == "128x256x64_g8_w8_s3_G1"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("classes: [\n  - {name: x,\n", "tensor_core.yaml: not valid YAML"),
        (SPACE.replace("in_dtypes: [fp8_e4m3]", "in_dtypes: fp8_e4m3"), r"classes\[0\]: bad `when`.*in_dtypes"),
        (SPACE.replace("      fp8_e4m3: {BLOCK_M: 64,", "      fp8_e4m3: {BLOK_M: 64,"),
         r"classes\[0\]\.dtype_defaults\.fp8_e4m3: unknown key\(s\) \['BLOK_M'\]"),
    ],
)
def test_a_malformed_space_names_the_file_and_entry(space_dir: Path, text: str, match: str) -> None:
    (space_dir / "tensor_core.yaml").write_text(text)
    with pytest.raises(ValueError, match=match):
        tuning.tensor_core_classes()

