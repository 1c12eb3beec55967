"""Stopping on SIGTERM and SIGINT (qcn/core/signals.py), with real signals to this process."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from qcn.core.signals import (
    InterruptBetweenSteps,
    interrupts_deferred,
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
