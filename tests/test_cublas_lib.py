"""Library discovery: frozen records, stubs never returned, empty without a GPU or library."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixbits.cublas import lib
from fixbits.cublas.lib import (
    CublasLtLibrary,
    candidate_paths,
    discover,
    distinct_versions,
    is_stub,
    version_string,
)

pytestmark = pytest.mark.unit


def test_version_string() -> None:
    assert version_string(130100) == "13.1.0"
    assert version_string(120805) == "12.8.5"
    assert version_string(130101) == "13.1.1"


def test_discover_runs_anywhere() -> None:
    libs = discover()
    assert isinstance(libs, tuple)
    for x in libs:
        assert not is_stub(x.path), x
        assert x.usable == (x.version is not None and x.error is None)


def test_stubs_and_fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stubs/ copy is never a candidate; a file that is not a library is reported, not used."""
    real = tmp_path / "cuda" / "lib64"
    stub = real / "stubs"
    stub.mkdir(parents=True)
    (stub / "libcublasLt.so.13").write_bytes(b"not a library")
    (real / "libcublasLt.so.13").write_bytes(b"not a library either")
    os.symlink(real / "libcublasLt.so.13", real / "libcublasLt.so.12")  # same real file: one record
    monkeypatch.setattr(lib, "_wheel_dirs", lambda: [])
    monkeypatch.setattr(lib, "_toolkit_dirs", lambda: [(str(stub), "cuda-toolkit")])
    found = candidate_paths((str(real),))
    assert [p for p, _ in found] == [str(real / "libcublasLt.so.13")], found
    (rec,) = discover((str(real),))
    assert rec.version is None and rec.error and not rec.usable
    assert is_stub(str(stub / "libcublasLt.so.13"))


def test_distinct_versions_keeps_first_usable_per_version() -> None:
    a = CublasLtLibrary("/w/libcublasLt.so.13", "/w/x", "torch-wheel", 130100)
    b = CublasLtLibrary("/usr/local/cuda/lib64/libcublasLt.so.13", "/u/x", "cuda-toolkit", 130100)
    c = CublasLtLibrary("/n/libcublasLt.so.12", "/n/x", "nvidia-wheel", 120805)
    bad = CublasLtLibrary("/s/libcublasLt.so.12", "/s/x", "env", None, "OSError")
    assert distinct_versions((bad, a, b, c)) == (a, c)
    with pytest.raises(AttributeError):
        a.version = 1  # type: ignore[misc]
