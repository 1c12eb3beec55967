"""bench/hold_bench.py's own arithmetic: what it makes of the times h1 saw (no switch)."""

from __future__ import annotations

import pytest

from bench.hold_bench import Observed, analyse


def test_hold_and_resume_are_read_from_the_kernel_s_times() -> None:
    seen = Observed(
        # Two holds: PAUSE at 1.0, lifted at 1.02; PAUSE at 2.0, lifted at 2.02.
        pauses=[(1.0, 0xFFFF), (1.02, 0), (2.0, 0xFFFF), (2.02, 0)],
        data=[
            (0.5, 0.4999),  # not near a hold: a one-way latency of 0.1 ms
            (1.0003, 1.0),  # on its way when the first PAUSE left: held 0.3 ms after it
            (1.0215, 1.01),  # the first after the lift: resumed 1.5 ms after it
            (2.0225, 2.01),  # the second hold: nothing during it, resumed after 2.5 ms
            (3.0, 2.9998),
        ],
    )
    held, resumed, latency = analyse(seen)
    assert held == pytest.approx([0.0003, 0.0])
    assert resumed == pytest.approx([0.0015, 0.0025])
    assert latency == pytest.approx([0.0001, 0.0002])
