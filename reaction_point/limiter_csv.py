"""The reaction-point daemon's per-limiter CSV time series, within a fixed budget of files.

The daemon's file descriptors are bounded whatever the number of limiters it holds: its
packet socket, its netlink sockets, its claim (all fixed in number), the status file
(written and closed), and at most :data:`MAX_OPEN_CSVS` limiter CSVs.  A daemon used to
keep one CSV open per limiter, and with ``--per-flow --csv-dir`` it died of EMFILE near
1,006 limiters under ``ulimit -n 1024`` (the default ``--max-limiters`` is 1,024; issue 42).
Now the CSVs open are the least recently written ones' complement: writing to a limiter
whose file is closed closes the least recently written one first and opens its own for
appending.

Nor does the daemon die of a write that fails (a full disk, a file limit someone lowered,
the directory removed): a CSV is bookkeeping, its limiters are the service.  A failed write,
flush, open or close is counted (:attr:`LimiterCsvs.errors`, the daemon's
``csv_write_errors``), the first one is reported in one line, and the file is closed (the
rows buffered in it are lost with it); the next row tries again.
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

MAX_OPEN_CSVS = 64
"""Limiter CSVs open at once: the daemon's whole budget of descriptors for them."""
CSV_COLUMNS = (
    "time_s",
    "current_rate_bps",
    "target_rate_bps",
    "stage",
    "sent_bytes",
    "monotonic_s",
)


def csv_name(iface: str, limiter: str) -> str:
    """A limiter's CSV file name (qcn.topologies.traces reads them by this pattern)."""
    safe = limiter.replace(":", "").replace("/", "_")
    return f"rp-{iface}-{safe}.csv"


class LimiterCsvs:
    """One CSV per limiter in ``directory``; at most ``max_open`` of them open at once.
    ``on_first_error`` is told the first failure, in words."""

    def __init__(
        self,
        directory: Path,
        iface: str,
        *,
        max_open: int = MAX_OPEN_CSVS,
        on_first_error: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.directory = directory
        self.iface = iface
        self.max_open = max_open
        self.on_first_error = on_first_error
        self.errors = 0
        """Writes, opens, flushes and closes that failed (their rows are lost)."""
        self._open: OrderedDict[str, tuple[IO[str], Any]] = OrderedDict()
        """Open files by limiter name, least recently written first, with their writers."""

    @property
    def open_files(self) -> int:
        return len(self._open)

    def path(self, limiter: str) -> Path:
        return self.directory / csv_name(self.iface, limiter)

    def write(self, limiter: str, row: Sequence[object]) -> None:
        """Append ``row`` to ``limiter``'s CSV (its header first if the file is new)."""
        entry = self._open.pop(limiter, None)
        try:
            if entry is None:
                while len(self._open) >= self.max_open:
                    self._close_least_recent()
                entry = self._open_file(limiter)
            entry[1].writerow(row)
        except OSError as e:
            self._failed(e)
            if entry is not None:
                self._discard(entry[0])
            return
        self._open[limiter] = entry

    def release(self, limiter: str) -> None:
        """``limiter`` is gone: its file is closed, so what it wrote is on disk (a new
        limiter of the same name appends to it)."""
        entry = self._open.pop(limiter, None)
        if entry is not None:
            self._close(entry[0])

    def close(self) -> None:
        """Close every file; failures are counted, never raised (teardown goes on)."""
        while self._open:
            self._close_least_recent()

    def _open_file(self, limiter: str) -> tuple[IO[str], Any]:
        path = self.path(limiter)
        f = path.open("a", newline="")
        try:
            writer = csv.writer(f)
            if os.fstat(f.fileno()).st_size == 0:
                writer.writerow(CSV_COLUMNS)
        except OSError:
            self._discard(f)
            raise
        return f, writer

    def _close_least_recent(self) -> None:
        _, (f, _writer) = self._open.popitem(last=False)
        self._close(f)

    def _close(self, f: IO[str]) -> None:
        try:
            f.close()  # (the descriptor is released even when the flush fails)
        except OSError as e:
            self._failed(e)

    @staticmethod
    def _discard(f: IO[str]) -> None:
        with contextlib.suppress(OSError):  # (already counted: the write that failed)
            f.close()

    def _failed(self, e: OSError) -> None:
        self.errors += 1
        if self.errors == 1:
            self.on_first_error(
                f"cannot write the limiter CSVs in {self.directory} ({e.strerror or e}); the "
                "rows are lost and counted (csv_write_errors), the limiters go on"
            )
