"""sweep.csv keeps one short row per shape: a case with no entry records how many draws were
collected, not the draw specs (run s2b's csv carried them: 2.6 MB for 4,541 rows)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fixbits.probe.sweep import Checker


def test_not_in_profile_row_keeps_the_draw_count(tmp_path: Path) -> None:
    draws = [
        {"kind": "ordinary", "seeds": [2 * i, 2 * i + 1], "rows": [0, 3], "cols": [1, 4]} for i in range(10)
    ]
    rec = {
        "dtype": "fp16",
        "out_dtype": "fp32",
        "set": "fuzz",
        "m": 5,
        "n": 6,
        "k": 121,
        "key": "a1-t1-s1-r0-w0-c0-g0",
        "draws": draws,
        "got": [0] * 40,
    }
    ck = Checker(tmp_path, {}, workers=1)
    ck.submit([rec])
    stats = ck.finish(None)
    assert stats["fp16->fp32"]["not_in_profile"] == 1
    with (tmp_path / "sweep.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["draws"] == "10"
    assert rows[0]["outcome"] == "not_in_profile"


def test_check_only_unchecked_keeps_the_devices_rows(tmp_path: Path) -> None:
    """--check --only-unchecked: rows the device finished keep their outcome and note; only the
    'unchecked' ones are emulated again (from the recorded seeds and cells)."""
    import gzip
    import json

    import numpy as np

    from fixbits.desc import GEMMDesc
    from fixbits.emulate import emulate
    from fixbits.probe.profile import ArchProfile, ProfileEntry
    from fixbits.probe.sweep import check, sampled_operands

    desc = GEMMDesc(arch="sm_90", instruction="wgmma", instruction_k=16, in_dtype="fp16", out_dtype="fp32")
    key = "a1-t1-s1-r0-w0-c0-g0"
    recs = []
    for m in (5, 7):
        draws = [{"kind": ("ordinary", "wide")[i % 2], "seeds": [40 + 2 * i, 41 + 2 * i], "rows": [0, m - 1],
                  "cols": [1, 4]} for i in range(4)]  # fmt: skip
        rec = {
            "dtype": "fp16",
            "out_dtype": "fp32",
            "set": "fuzz",
            "m": m,
            "n": 6,
            "k": 121,
            "key": key,
            "draws": draws,
        }
        a, b, sizes = sampled_operands(rec)
        em = np.asarray(emulate(desc, a, b), dtype=np.float32)
        got, r0, c0 = [], 0, 0
        for r, c in sizes:
            got += em[r0 : r0 + r, c0 : c0 + c].reshape(-1).view(np.uint32).tolist()
            r0, c0 = r0 + r, c0 + c
        recs.append({**rec, "got": got})
    (tmp_path / "sweep_samples").mkdir()
    (tmp_path / "sweep_samples" / "fp16_fp32_0000.json.gz").write_bytes(
        gzip.compress(json.dumps(recs).encode())
    )
    prof = ArchProfile("sm_90", "cublaslt", "130100", "fp16", "fp32",
                       entries={key: ProfileEntry(key, desc, (5, 6, 121), 1)})  # fmt: skip
    fields = ["dtype", "out_dtype", "set", "m", "n", "k", "answer", "outcome", "draws", "comparisons", "mismatches",
              "note"]  # fmt: skip
    with (tmp_path / "sweep.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerow(dict(zip(fields, ["fp16", "fp32", "fuzz", 5, 6, 121, key, "match", 4, 16, 0, "from the device"],
                            strict=True)))  # fmt: skip
        w.writerow(
            dict(
                zip(fields, ["fp16", "fp32", "fuzz", 7, 6, 121, key, "unchecked", 4, "", "", ""], strict=True)
            )
        )
    seen: list[str] = []
    stats = check(tmp_path, {("fp16", "fp32"): prof}, only_unchecked=True, log=seen.append)
    assert stats["fp16->fp32"] == {"shapes": 2, "match": 2, "comparisons": 32}
    assert seen == ["check: 1 rows kept from sweep.csv, 1 to emulate"]
    with (tmp_path / "sweep.csv").open() as fh:
        rows = {int(r["m"]): r for r in csv.DictReader(fh)}
    assert rows[5]["note"] == "from the device"
    assert rows[7]["outcome"] == "match" and rows[7]["comparisons"] == "16"


def test_answer_shapes_reads_several_sweeps_once_each(tmp_path: Path) -> None:
    """Every dash part of a wanted key must occur; too_large rows never ran; a shape is listed once."""
    head = ["dtype", "out_dtype", "set", "m", "n", "k", "answer", "outcome"]
    rows_a = [
        ["fp16", "fp16", "fuzz", 1, 84, 4304, "a14-t0-s31-r2-w0-c0-g0", "match"],
        ["fp16", "fp16", "fuzz", 2, 8, 512, "a1-t14-s1-r0-w0-c0-g0", "match"],
        ["fp16", "fp16", "fuzz", 9, 1, 99999, "a14-t0-s64-r2-w0-c0-g0", "too_large"],
        ["fp16", "fp16", "fuzz", 3, 5, 700, "a66-t12-s10-r2-w0-c1-g35", "wrong_entry"],
    ]
    rows_b = [
        ["bf16", "bf16", "fuzz", 1, 84, 4304, "a14-t0-s31-r2-w0-c0-g0", "not_in_profile"],
        ["bf16", "bf16", "fuzz", 60, 1, 7753, "a14-t0-s32-r2-w0-c0-g0", "match"],
        ["bf16", "bf16", "fuzz", 4, 4, 64, "a66-t12-s11-r2-w0-c1-g35", "match"],
    ]
    paths = []
    for name, rows in (("a.csv", rows_a), ("b.csv", rows_b)):
        path = tmp_path / name
        with open(path, "w", newline="") as fh:
            csv.writer(fh).writerows([head, *rows])
        paths.append(str(path))
    from fixbits.probe.sweep import answer_shapes

    assert answer_shapes(paths, ["a14"]) == [(1, 84, 4304), (60, 1, 7753)]
    assert answer_shapes(paths, ["a66-t12-s10,a1-t14"]) == [(2, 8, 512), (3, 5, 700)]
    assert answer_shapes(paths, ["a66", "s10"]) == [(3, 5, 700), (4, 4, 64)]
    assert answer_shapes(paths, ["a99"]) == []


def test_key_selector_needs_every_part_of_one_pattern() -> None:
    from fixbits.probe.profile import key_selector

    sel = key_selector(["a14", "a13-c10,a41-s-1"])
    assert sel("a14-t0-s64-r2-w0-c0-g0")
    assert sel("a13-t0-s1-r0-w0-c10-g0")
    assert not sel("a13-t0-s1-r0-w0-c11-g0")
    assert sel("a41-t21-s-1-r2-w0-c0-g35")
    assert not sel("a41-t21-s1-r0-w0-c0-g35")
    with pytest.raises(ValueError, match="no answer-key pattern"):
        key_selector([""])
