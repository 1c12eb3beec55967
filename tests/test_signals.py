"""Stopping on SIGTERM and SIGINT (qcn/core/signals.py), with real signals to this process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from qcn.core.signals import (
    InterruptBetweenSteps,
    children_spared_ctrl_c,
    interrupts_deferred,
    interrupts_never_lost,
    sigterm_as_interrupt,
    stop_on_signals,
)


@pytest.fixture(autouse=True)
def handlers_restored() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_calls_stop(sig: signal.Signals) -> None:
    stopped = threading.Event()
    stop_on_signals(stopped.set)
    os.kill(os.getpid(), sig)
    assert stopped.wait(5)


def test_only_the_signals_named_stop() -> None:
    stopped = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    stop_on_signals(stopped.set, (signal.SIGTERM,))
    assert signal.getsignal(signal.SIGINT) is previous
    os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.wait(5)


def test_sigterm_is_a_ctrl_c_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    interrupted = False
    try:
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            threading.Event().wait(5)  # the handler raises before this returns
    except KeyboardInterrupt:
        interrupted = True
    assert interrupted
    assert signal.getsignal(signal.SIGTERM) is before


def test_outside_the_main_thread_nothing_is_installed() -> None:
    """Python refuses handlers there (a Dask worker runs points in a thread of its own)."""
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            stop_on_signals(lambda: None)
            with sigterm_as_interrupt():
                pass
        except BaseException as e:  # any of them fails the test
            errors.append(e)

    t = threading.Thread(target=elsewhere)
    t.start()
    t.join()
    assert errors == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_waits_for_the_step_to_end() -> None:
    before = signal.getsignal(signal.SIGINT)
    with InterruptBetweenSteps() as steps:
        steps.busy = True
        os.kill(os.getpid(), signal.SIGINT)  # inside a step: held back, nothing raised here
        with pytest.raises(KeyboardInterrupt):
            steps.step_done()
        steps.step_done()  # raised once only
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # between steps: at once
    assert signal.getsignal(signal.SIGINT) is before


def test_an_interrupt_inside_a_deferred_block_waits_for_its_end() -> None:
    """interrupts_deferred: the block runs to its end, then the Ctrl-C or SIGTERM is raised
    (a Dask cluster's start is never cut half-way: qcn/cli/sweep.py)."""
    finished = []

    def block() -> None:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            finished.append(True)

    with pytest.raises(KeyboardInterrupt):
        block()
    assert finished == [True]
    with interrupts_deferred():  # nothing arrived: nothing raised
        pass


def test_a_ctrl_c_python_drops_in_a_callback_is_raised_again() -> None:
    """A KeyboardInterrupt that falls in a weakref's callback is printed as "Exception
    ignored" and dropped (a sweep Ctrl-C'd at its end ran on and exited 0); within
    interrupts_never_lost it comes again in the main thread."""

    class Thing:
        pass

    def callback(_ref: object) -> None:
        raise KeyboardInterrupt  # (where a Ctrl-C fell)

    def dropped_then_waited() -> weakref.ref[Thing]:
        with interrupts_never_lost():
            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # (until it comes)
                time.sleep(0.001)
        return ref

    # Ctrl-C handled as `qcn` handles it, Python's own way (a test runner's worker process,
    # pytest-xdist's, ignores SIGINT, and an interrupt of an ignored signal does nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            dropped_then_waited()
    finally:
        signal.signal(signal.SIGINT, previous)


def sigint_blocked(pid: int) -> bool:
    found = re.search(r"SigBlk:\s*(\w+)", Path(f"/proc/{pid}/status").read_text())
    assert found is not None
    return bool(int(found[1], 16) & (1 << (signal.SIGINT - 1)))


def test_processes_started_in_the_block_never_see_ctrl_c() -> None:
    """A terminal's Ctrl-C reaches the whole process group: a Dask cluster's workers, each
    still importing, printed a traceback.  A process started in the block, and one a thread
    started in the block starts after it, has SIGINT blocked; this thread has it back."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    started: list[subprocess.Popen[str]] = []
    go = threading.Event()

    def start_later() -> None:
        go.wait(10)
        started.append(subprocess.Popen(["sleep", "30"], text=True))

    with children_spared_ctrl_c():
        started.append(subprocess.Popen(["sleep", "30"], text=True))
        later = threading.Thread(target=start_later)
        later.start()
    go.set()
    later.join()
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
    try:
        assert len(started) == 2
        assert [sigint_blocked(p.pid) for p in started] == [True, True]
    finally:
        for p in started:
            p.kill()
            p.wait()
