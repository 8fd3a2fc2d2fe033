"""benchmarks/reconstruction/adopt_settled.py: a predicted entry a sweep showed wrong is replaced
by the one reading that fits every sampled cell, and only then (session 40: two fp8 split entries
predicted at granule 64 from shapes where 64 and 128 give one span)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from _scripts import load_script

from fixbits.probe.profile import PROFILE_DIR, load

pytestmark = pytest.mark.unit

KEY = "a66-t10-s19-r2-w0-c1-g36"


def _script() -> ModuleType:
    return load_script("benchmarks/reconstruction/adopt_settled.py", "adopt_settled")


def test_only_a_single_fit_replaces_the_entry(tmp_path: Path) -> None:
    name = "sm_90_cublaslt130100_fp8_e4m3_fp32.yaml"
    shutil.copy(PROFILE_DIR / name, tmp_path / name)
    entry = load(tmp_path / name).entries[KEY]
    assert entry.desc is not None
    cut = entry.desc.k_cuts[0]
    other = dataclasses.replace(entry.desc, k_cuts=(dataclasses.replace(cut, granule=cut.granule * 2),))
    base = {"pair": "fp8_e4m3->fp32", "verdict": "wrong", "entry_misses": ["2x4x48816"], "granule": str(cut.granule),
            "also_fit": [f"granule {cut.granule * 2}"], "fit_descs": [other.to_dict()], "run": "run"}
    rows = [{**base, "key": KEY},
            {**base, "key": "a66-t10-s57-r2-w0-c1-g36", "fit_descs": [other.to_dict(), other.to_dict()]}]
    settled = tmp_path / "settled.jsonl"
    settled.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = load(tmp_path / name)
    assert _script().main([str(settled), "--profiles", str(tmp_path)]) == 0
    after = load(tmp_path / name)
    assert after.entries[KEY].desc == other
    assert "2x4x48816" in (after.entries[KEY].note or "")
    assert after.entries["a66-t10-s57-r2-w0-c1-g36"] == before.entries["a66-t10-s57-r2-w0-c1-g36"]
    assert set(after.entries) == set(before.entries)
