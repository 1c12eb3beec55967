"""Stopping on SIGTERM and SIGINT, written once for every command and helper process.

Two ways a process stops: a loop that polls a flag (the daemons, the agents, the sink) has
:func:`stop_on_signals` call its ``stop``; code that cleans up in ``finally`` blocks (a
Mininet run) treats SIGTERM as Ctrl-C inside :func:`sigterm_as_interrupt`.  Python lets
only the main thread set handlers; elsewhere (a Dask worker's task thread) both do nothing,
and the caller's own stop path applies.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, as this project's handlers raise it: a KeyboardInterrupt (caught
    wherever one is), but not of that very class.  CPython 3.11 takes a KeyboardInterrupt of
    that class that leaves an ``eval()`` (a namedtuple made while a module imports) for one
    nobody caught, and at exit ends the process by SIGINT (status -2, 2 of 20 Ctrl-Cs a
    second into ``qcn tune``) whatever status the command returned."""


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
        raise Interrupted

    def step_done(self) -> None:
        self.busy = False
        if self._pending:
            self._pending = False
            raise Interrupted

    def __enter__(self) -> InterruptBetweenSteps:
        if _in_main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if _in_main_thread():
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted


@contextmanager
def sigterm_as_interrupt(*, ctrl_c: bool = False) -> Iterator[None]:
    """Within the block SIGTERM is a Ctrl-C (:class:`Interrupted`), so one cleanup path
    serves both; with ``ctrl_c``, Ctrl-C raises :class:`Interrupted` too, where Python's own
    handler is (not where SIGINT is ignored: a shell's background job).  The previous
    handlers are back after it."""
    if not _in_main_thread():
        yield
        return
    mine = [signal.SIGTERM]
    if ctrl_c and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        mine.append(signal.SIGINT)
    previous = {s: signal.signal(s, _raise_interrupt) for s in mine}
    try:
        yield
    finally:
        for s, handler in previous.items():
            if signal.getsignal(s) is _raise_interrupt:  # (one set since stays: ignored)
                signal.signal(s, handler)


@contextmanager
def interrupts_never_lost() -> Iterator[None]:
    """Within the block, a KeyboardInterrupt that Python cannot raise where it fell (in a
    weakref's callback, a ``__del__``, a hook of the garbage collector: it prints "Exception
    ignored in ..." with its traceback and drops it, and a sweep Ctrl-C'd at its end ran on
    and exited 0) is raised again, in the main thread, at its next instruction: as if the
    signal came again, so that the handler in force (Ctrl-C's, or one deferring it) takes
    it."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # From another thread, which runs once this one lets the interpreter go (it
            # would raise inside this hook; threading's start waits for the thread, and the
            # interrupt fell in that wait).
            _thread.start_new_thread(_thread.interrupt_main, (signal.SIGINT,))
            return
        previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def ignore_stop_signals() -> None:
    """From now on, Ctrl-C and SIGTERM change nothing (a process whose work has ended)."""
    if _in_main_thread():
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)


@contextmanager
def children_spared_ctrl_c() -> Iterator[None]:
    """Threads and processes started inside the block (and whatever they start, at any time
    after) never see Ctrl-C from a terminal, which sends SIGINT to its whole foreground
    process group: a Dask local cluster's worker processes, importing or computing, each
    printed a traceback (32-159 lines of stderr, and "Nanny failed to start": exit 1).
    SIGINT is blocked in this thread for the block; a thread or a process inherits the mask
    of the thread that starts it, and keeps it through exec.  Their parent ends them.  A
    SIGINT that came meanwhile reaches this thread when the block ends (Python runs its
    handler there)."""
    if not _in_main_thread():
        yield
        return

    # Its start unblocks SIGINT in the thread that starts it: started before the block.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM inside the block wait until it ends, then raise Interrupted:
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
        raise Interrupted
