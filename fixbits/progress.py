"""A progress line for long sweeps: shapes done, rate, and how many matched so far.

Reconstruction sweeps, fuzz runs and checker corpora take minutes to hours on a runner; a
person watching one wants to know early whether bytes are drifting, not only how far it got,
so the line carries the match count next to the shape count. On a terminal it is one line
rewritten in place; in a CI log (not a TTY) it is a plain line every ``interval_s`` seconds,
because carriage returns turn a log into one unreadable line. No third-party progress library
is required (neither rich nor tqdm is a fixbits dependency); the output is plain text.

    with Progress("fuzz sm_90", total=len(shapes)) as p:
        for shape in shapes:
            p.step(matched=run_one(shape))
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class ProgressState:
    """A snapshot of a sweep: counts, elapsed time and rate (items per second)."""

    label: str
    done: int
    total: int | None
    matched: int
    mismatched: int
    errors: int
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.done / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        if self.total is None or self.done == 0 or self.rate == 0:
            return None
        return max(self.total - self.done, 0) / self.rate

    def line(self, unit: str = "shapes") -> str:
        """'fuzz: 120/390 shapes (30.8%) 4.20/s eta 1m04s | matched 118, drift 2, errors 0'."""
        if self.total:
            head = f"{self.label}: {self.done}/{self.total} {unit} ({100.0 * self.done / self.total:.1f}%)"
        else:
            head = f"{self.label}: {self.done} {unit}"
        parts = [head, f"{self.rate:.2f}/s", f"elapsed {_duration(self.elapsed_s)}"]
        eta = self.eta_s
        if eta is not None:
            parts.append(f"eta {_duration(eta)}")
        tail = f"matched {self.matched}, drift {self.mismatched}"
        if self.errors:
            tail += f", errors {self.errors}"
        return " ".join(parts) + " | " + tail


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


class Progress:
    """Counts items of a sweep and reports them on ``stream`` (stderr by default).

    ``tty`` defaults to ``stream.isatty()``. On a TTY the line is redrawn at most every
    ``redraw_s`` seconds; otherwise a plain line is written at most every ``interval_s``
    seconds. ``close`` (or leaving the ``with`` block) always writes the final line.
    ``clock`` is injectable so tests need no sleeping.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        unit: str = "shapes",
        stream: TextIO | None = None,
        tty: bool | None = None,
        interval_s: float = 30.0,
        redraw_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"Progress total must be >= 0 or None, got {total}")
        self.label = label
        self.total = total
        self.unit = unit
        self._stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self._stream, "isatty", None)
            tty = bool(isatty()) if callable(isatty) else False
        self.tty = tty
        self._every = redraw_s if tty else interval_s
        self._clock = clock
        self._start = clock()
        self._last_emit = self._start
        self._done = 0
        self._matched = 0
        self._mismatched = 0
        self._errors = 0
        self._closed = False
        self._drawn_width = 0

    # -- counting ---------------------------------------------------------------------------
    def step(self, matched: bool | None = None, *, n: int = 1, error: bool = False) -> None:
        """``n`` items done; ``matched`` True/False counts them as matching/drifting, None as
        neither (e.g. skipped); ``error`` counts them as crashed."""
        if n < 0:
            raise ValueError(f"Progress.step n must be >= 0, got {n}")
        self._done += n
        if error:
            self._errors += n
        elif matched is True:
            self._matched += n
        elif matched is False:
            self._mismatched += n
        self._maybe_emit()

    def state(self) -> ProgressState:
        return ProgressState(
            label=self.label,
            done=self._done,
            total=self.total,
            matched=self._matched,
            mismatched=self._mismatched,
            errors=self._errors,
            elapsed_s=max(self._clock() - self._start, 0.0),
        )

    # -- output -----------------------------------------------------------------------------
    def _maybe_emit(self) -> None:
        now = self._clock()
        if now - self._last_emit >= self._every:
            self._last_emit = now
            self._emit(final=False)

    def _emit(self, *, final: bool) -> None:
        text = self.state().line(self.unit)
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            text = text[:width] if width > 10 else text
            pad = " " * max(self._drawn_width - len(text), 0)  # erase a longer previous line
            self._stream.write("\r" + text + pad + ("\n" if final else ""))
            self._drawn_width = len(text)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()

    def close(self) -> ProgressState:
        """Write the final line once and return the final state."""
        if not self._closed:
            self._closed = True
            self._emit(final=True)
        return self.state()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
