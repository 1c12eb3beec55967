"""The progress line: at most one report a second, an ETA, silent when quiet."""

from __future__ import annotations

import io
import math

from qcn.core.progress import ProgressLine
from qcn.core.results import json_safe


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_reports_at_most_once_a_second_with_eta() -> None:
    clock, out = Clock(), io.StringIO()
    p = ProgressLine("sim", stream=out, clock=clock)
    for step in range(1, 31):  # 30 updates over 3 s of wall time
        clock.t = step * 0.1
        p.update(step / 10, 6.0)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    # At 1 s of wall time 1 of 6 simulated seconds is done: 5 s to go.
    assert lines[0] == "sim: 1/6 s (17 %), 1 s elapsed, ETA 5 s"


def test_quiet_is_silent() -> None:
    clock, out = Clock(), io.StringIO()
    p = ProgressLine("sim", stream=out, clock=clock, quiet=True)
    clock.t = 5
    p.update(1, 2)
    p.close()
    assert out.getvalue() == ""


def test_summary_json_has_no_nan() -> None:
    assert json_safe({"a": math.nan, "b": [1.0, math.inf], "c": "x"}) == {
        "a": None,
        "b": [1.0, None],
        "c": "x",
    }
