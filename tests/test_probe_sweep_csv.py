"""sweep.csv keeps one short row per shape: a case with no entry records how many draws were
collected, not the draw specs (run s2b's csv carried them: 2.6 MB for 4,541 rows)."""

from __future__ import annotations

import csv
from pathlib import Path

from fixbits.probe.sweep import Checker


def test_not_in_profile_row_keeps_the_draw_count(tmp_path: Path) -> None:
    draws = [{"kind": "ordinary", "seeds": [2 * i, 2 * i + 1], "rows": [0, 3], "cols": [1, 4]} for i in range(10)]
    rec = {"dtype": "fp16", "out_dtype": "fp32", "set": "fuzz", "m": 5, "n": 6, "k": 121,
           "key": "a1-t1-s1-r0-w0-c0-g0", "draws": draws, "got": [0] * 40}
    ck = Checker(tmp_path, {}, workers=1)
    ck.submit([rec])
    stats = ck.finish(None)
    assert stats["fp16->fp32"]["not_in_profile"] == 1
    with (tmp_path / "sweep.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["draws"] == "10"
    assert rows[0]["outcome"] == "not_in_profile"
