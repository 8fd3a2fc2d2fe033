"""fixbits.progress: counts, rate, the TTY single line and the periodic plain lines of a CI log."""

from __future__ import annotations

import io

import pytest

from fixbits.progress import Progress, ProgressState

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_counts_rate_and_eta() -> None:
    clock = FakeClock()
    p = Progress("sweep", total=10, stream=io.StringIO(), tty=False, clock=clock)
    for i in range(4):
        clock.t += 0.5
        p.step(matched=i != 2)
    p.step(error=True)
    s = p.state()
    assert (s.done, s.matched, s.mismatched, s.errors) == (5, 3, 1, 1)
    assert s.elapsed_s == 2.0
    assert s.rate == 2.5
    assert s.eta_s == 2.0
    line = s.line()
    assert line.startswith("sweep: 5/10 shapes (50.0%) 2.50/s")
    assert "eta 2s" in line and "matched 3, drift 1, errors 1" in line


def test_plain_lines_are_periodic_not_per_step() -> None:
    clock = FakeClock()
    out = io.StringIO()
    p = Progress("fuzz", total=100, stream=out, tty=False, interval_s=10.0, clock=clock)
    for _ in range(100):
        clock.t += 1.0  # 100 s in total: 10 periodic lines, then the final one
        p.step(matched=True)
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 11, lines
    assert lines[-1].startswith("fuzz: 100/100 shapes (100.0%)")
    assert lines[-1].endswith("matched 100, drift 0")


def test_tty_redraws_one_line_in_place() -> None:
    clock = FakeClock()
    out = io.StringIO()
    with Progress("corpus", total=None, unit="kernels", stream=out, tty=True, redraw_s=0.0, clock=clock) as p:
        for _ in range(3):
            clock.t += 1.0
            p.step(matched=False)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")  # one line, finished once
    assert text.count("\r") == 4  # three redraws + the final one
    assert text.rstrip().split("\r")[-1].startswith("corpus: 3 kernels 1.00/s")
    assert "drift 3" in text


def test_close_is_idempotent_and_returns_state() -> None:
    out = io.StringIO()
    p = Progress("x", total=2, stream=out, tty=False, clock=FakeClock())
    p.step(n=2)
    first = p.close()
    p.close()
    assert isinstance(first, ProgressState)
    assert first.done == 2 and first.matched == 0 and first.mismatched == 0
    assert len(out.getvalue().splitlines()) == 1


def test_default_tty_follows_the_stream() -> None:
    assert Progress("x", stream=io.StringIO()).tty is False

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Progress("x", stream=Tty()).tty is True


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="total must be >= 0"):
        Progress("x", total=-1)
    p = Progress("x", stream=io.StringIO(), tty=False)
    with pytest.raises(ValueError, match="n must be >= 0"):
        p.step(n=-1)


def test_durations_are_human() -> None:
    s = ProgressState("x", done=1, total=3601 * 2, matched=1, mismatched=0, errors=0, elapsed_s=1.0)
    assert "eta 2h00m" in s.line()
