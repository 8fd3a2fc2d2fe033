"""The steady-state host path builds nothing twice: index tables go to the device once per
(descriptor, K), plans are cached, a profile file is parsed once per version of the file."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from fixbits.desc import GEMMDesc, KCut

FMA = GEMMDesc(arch="sm_90", instruction="fma", instruction_k=1, in_dtype="fp16", out_dtype="fp32")


def test_device_table_copies_once_per_key() -> None:
    from fixbits.kernels._host import device_table

    builds: list[int] = []

    def build() -> np.ndarray:
        builds.append(1)
        return np.arange(7, dtype=np.int64)

    key = ("test_device_table", FMA, 7)
    first = device_table(key, build, "cpu")
    again = device_table(key, build, "cpu")
    other = device_table(("test_device_table", FMA, 8), build, "cpu")
    assert first is again and other is not first
    assert len(builds) == 2
    assert str(first.dtype) == "torch.int32" and first.tolist() == list(range(7))


def test_plans_are_cached_and_their_tables_read_only() -> None:
    from fixbits.kernels.plan import scalar_nest, tensor_core_plan

    d = FMA.replace(k_cuts=(KCut("contiguous", count=4), KCut("contiguous", span=3)))
    nest = scalar_nest(d, 301)
    assert scalar_nest(d, 301) is nest
    with pytest.raises(ValueError):
        nest.index[0, 0] = 5
    tc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32",
                  k_cuts=(KCut("contiguous", count=3),))  # fmt: skip
    assert tensor_core_plan(tc, 4136) is tensor_core_plan(tc, 4136)


def test_a_profile_is_parsed_once_per_version_of_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixbits.kernels import matmul as mm
    from fixbits.probe import profile as profiles

    src = profiles.PROFILE_DIR / profiles.profile_filename("sm_90", "130100", "fp16", "fp16")
    shutil.copy(src, tmp_path / src.name)
    monkeypatch.setattr(profiles, "PROFILE_DIR", tmp_path)
    monkeypatch.setattr(mm, "_PROFILE_CACHE", {})
    parsed: list[Path] = []
    real_load = profiles.load

    def counting_load(path: str | Path) -> profiles.ArchProfile:
        parsed.append(Path(path))
        return real_load(path)

    monkeypatch.setattr(profiles, "load", counting_load)
    first = mm._load_profile(profiles, "sm_90", "130100", "fp16", "fp16")
    assert mm._load_profile(profiles, "sm_90", "130100", "fp16", "fp16") is first
    assert len(parsed) == 1
    st = (tmp_path / src.name).stat()
    os.utime(tmp_path / src.name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # an edited file
    assert mm._load_profile(profiles, "sm_90", "130100", "fp16", "fp16") is not first
    assert len(parsed) == 2
    with pytest.raises(FileNotFoundError, match="present: "):
        mm._load_profile(profiles, "sm_90", "130100", "bf16", "fp16")


def test_evidence_names_keep_output_dtypes_apart() -> None:
    from fixbits.probe.reconstruct import evidence_name

    key = "a14-t0-s496-r2-w0-c0-g0"
    names = {evidence_name("bf16", od, key) for od in ("fp32", "bf16", "fp16")}
    assert len(names) == 3
    assert evidence_name("bf16", "fp32", key) == f"bf16_{key}.json"  # the files committed before
