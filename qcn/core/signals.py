"""Stopping on SIGTERM and SIGINT, written once for every command and helper process.

Two ways a process stops: a loop that polls a flag (the daemons, the agents, the sink) has
:func:`stop_on_signals` call its ``stop``; code that cleans up in ``finally`` blocks (a
Mininet run) treats SIGTERM as Ctrl-C inside :func:`sigterm_as_interrupt`.  Python lets
only the main thread set handlers; elsewhere (a Dask worker's task thread) both do nothing,
and the caller's own stop path applies.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def stop_on_signals(
    stop: Callable[[], object], signals: tuple[signal.Signals, ...] = STOP_SIGNALS
) -> None:
    """Call ``stop()`` when one of ``signals`` arrives (by default SIGTERM and SIGINT)."""
    if not _in_main_thread():
        return

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop()

    for s in signals:
        signal.signal(s, handler)


class InterruptBetweenSteps:
    """Ctrl-C (SIGINT) as KeyboardInterrupt, but never inside a step: one that arrives while
    ``busy`` is set is raised by :meth:`step_done`, so a step (a frame sent and counted) is
    never cut in half.  Use it as a context manager around the loop; the previous handler
    is back after it (outside the main thread it changes nothing)."""

    def __init__(self) -> None:
        self.busy = False
        self._pending = False
        self._previous: object = None

    def _handler(self, _signum: int, _frame: FrameType | None) -> None:
        if self.busy:
            self._pending = True
            return
        raise KeyboardInterrupt

    def step_done(self) -> None:
        self.busy = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def __enter__(self) -> InterruptBetweenSteps:
        if _in_main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if _in_main_thread():
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM is a Ctrl-C (KeyboardInterrupt), so one cleanup path serves
    both; the previous handler is back after it."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM inside the block wait until it ends, then raise KeyboardInterrupt:
    for a start-up that cannot be cut half-way and still be closed (a Dask cluster whose
    workers are still starting cannot be closed at all)."""
    if not _in_main_thread():
        yield
        return
    arrived: list[int] = []

    def remember(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    previous = {s: signal.signal(s, remember) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if arrived:
        raise KeyboardInterrupt
