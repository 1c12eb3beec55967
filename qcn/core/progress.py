"""A progress line for long runs: stderr, at most once a second, with an ETA."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

MIN_INTERVAL_S = 1.0


class ProgressLine:
    """Reports how far a run is (``update(done, total)``) and when it should end.

    On a terminal the line is redrawn in place; elsewhere (a log, CI) one line per report.
    ``quiet`` makes it silent.
    """

    def __init__(
        self,
        label: str,
        *,
        unit: str = "s",
        quiet: bool = False,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.unit = unit
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self._last = self.started
        self._drawn = False

    def update(self, done: float, total: float) -> None:
        if self.quiet:
            return
        now = self.clock()
        if now - self._last < MIN_INTERVAL_S:
            return
        self._last = now
        self.stream.write(self._line(done, total, now))
        self.stream.flush()
        self._drawn = True

    def _line(self, done: float, total: float, now: float) -> str:
        elapsed = now - self.started
        frac = min(1.0, done / total) if total > 0 else 1.0
        eta = f"ETA {elapsed * (1 - frac) / frac:.0f} s" if frac > 0 else "ETA ?"
        text = (
            f"{self.label}: {done:.6g}/{total:.6g} {self.unit} ({100 * frac:.0f} %), "
            f"{elapsed:.0f} s elapsed, {eta}"
        )
        return f"\r{text}\x1b[K" if self.stream.isatty() else f"{text}\n"

    def close(self) -> None:
        """End the line (a terminal's cursor goes to the next line)."""
        if self._drawn and not self.quiet and self.stream.isatty():
            self.stream.write("\n")
            self.stream.flush()
