"""The PTX survey's summary keeps, per kernel and mode, the config with the least reduction traffic."""

from __future__ import annotations

from benchmarks.enforcement.ptx_survey import summary


def _row(mode: str, cfg: str, shfl: int, st: int, bar: int, error: str = "") -> dict:
    return {"kernel": "col_sum", "dtype": "fp16", "mode": mode, "config": cfg, "shfl": shfl, "st_shared": st,
            "ld_shared": st, "bar": bar, "f32_add": 0, "ld_global": 16, "error": error}


def test_summary_picks_cheapest_config_per_mode_and_lists_errors() -> None:
    md = summary([_row("free", "a", 25, 11, 4), _row("free", "b", 40, 11, 4), _row("rewrite", "a", 400, 146, 4),
                  _row("rows_in_regs", "c", 25, 11, 4), _row("rows_in_regs", "d", 0, 0, 0, error="boom")])
    lines = [ln for ln in md.splitlines() if ln.startswith("| col_sum")]
    assert [ln.split(" | ")[2:5] for ln in lines] == [["free", "a", "25"], ["rewrite", "a", "400"],
                                                       ["rows_in_regs", "c", "25"]]
    assert "1 configs did not compile" in md and "boom" in md
