"""ArchProfile YAML: round trip, lookup by heuristic answer, clear errors, never a guess."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from fixbits.desc import GEMMDesc, KCut
from fixbits.probe.profile import (
    ArchProfile,
    NotInProfile,
    ProfileEntry,
    ProfileError,
    answer_key,
    available,
    load,
    profile_filename,
)

pytestmark = pytest.mark.unit

SPLIT = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16",
                 k_cuts=(KCut("contiguous", count=9, granule=64),))
PLAIN = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16")


def _profile() -> ArchProfile:
    return ArchProfile(
        "sm_90", "cublaslt", "130100", "fp16", "fp32",
        {
            "a66-t10-s9-r2-w0-c0-g0": ProfileEntry("a66-t10-s9-r2-w0-c0-g0", SPLIT, (1, 8, 11528), 3, 40),
            "a66-t20-s1-r0-w0-c0-g0": ProfileEntry("a66-t20-s1-r0-w0-c0-g0", PLAIN, (256, 4096, 4096), 3, 900),
        },
        {"a13-t0-s1-r0-w0-c0-g0": "ambiguous at (1, 2, 1032)"},
    )


class _Answer:
    def key_str(self) -> str:
        return "a66-t10-s9-r2-w0-c0-g0"


def test_round_trip_and_lookup(tmp_path: Path) -> None:
    prof = _profile()
    path = prof.save(tmp_path)
    assert path.name == profile_filename("sm_90", "130100", "fp16", "fp32") == "sm_90_cublaslt130100_fp16_fp32.yaml"
    back = load(path)
    assert back == prof
    assert back.lookup(_Answer()) == SPLIT
    assert back.lookup((66, 20, 1, 0, 0, 0, 0)) == PLAIN
    assert back.lookup({"algo_id": 66, "tile_id": 20, "splitk_num": 1, "reduction_scheme": 0,
                        "cta_swizzling": 0, "custom_option": 0, "stages_id": 0}) == PLAIN
    assert available(tmp_path) == [path]


def test_not_in_profile_names_the_answer() -> None:
    prof = _profile()
    with pytest.raises(NotInProfile, match="a1-t2-s3-r4-w5-c6-g7"):
        prof.lookup((1, 2, 3, 4, 5, 6, 7))
    with pytest.raises(NotInProfile, match="probing it failed: ambiguous"):
        prof.lookup("a13-t0-s1-r0-w0-c0-g0")


def test_answer_key_rejects_short_tuples() -> None:
    with pytest.raises(ValueError, match="7 fields"):
        answer_key((1, 2, 3))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("arch"), "missing key 'arch'"),
        (lambda d: d.update(entries=[1]), "'entries' must map"),
        (lambda d: d["entries"]["a66-t10-s9-r2-w0-c0-g0"].pop("shape"), r"entries.a66-t10-s9-r2-w0-c0-g0: missing key 'shape'"),
        (lambda d: d["entries"]["a66-t10-s9-r2-w0-c0-g0"].update(shape=[1, 2]), r"\.shape: expected \[m, n, k\]"),
        (lambda d: d["entries"]["a66-t10-s9-r2-w0-c0-g0"]["desc"].update(instruction="xmma"), r"entries.a66-t10-s9-r2-w0-c0-g0.desc: instruction"),
        (lambda d: d["entries"]["a66-t10-s9-r2-w0-c0-g0"]["desc"].update(in_dtype="bf16"), "differ from the profile"),
        (lambda d: d["entries"]["a66-t10-s9-r2-w0-c0-g0"].update(verified_shapes=-1), "verified_shapes"),
    ],
)
def test_load_errors_name_file_and_key(tmp_path: Path, mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = _profile().to_dict()
    mutate(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=message) as exc:
        load(path)
    assert str(path) in str(exc.value)


def test_load_errors_for_missing_and_non_yaml(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read"):
        load(tmp_path / "absent.yaml")
    bad = tmp_path / "x.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ProfileError, match="not YAML"):
        load(bad)


def test_committed_profiles_load() -> None:
    """Every profile committed under matrices/profiles/ parses and keys on answer strings."""
    for path in available():
        prof = load(path)
        assert path.name == prof.filename, path
        for key, entry in prof.entries.items():
            # SPLITK_NUM can be -1 (cuBLASLt's a42 on bf16->bf16 answers 's-1')
            assert re.fullmatch(r"a\d+-t\d+-s-?\d+-r\d+-w\d+-c\d+-g\d+", key), (path, key)
            assert entry.desc.in_dtype == prof.dtype, (path, key)
