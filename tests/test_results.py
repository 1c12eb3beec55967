"""What a run's results say and how they are written (qcn/core/results.py), on traces
made by hand: every figure below is worked out from the trace."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from qcn.core import scenario as scenarios
from qcn.core.results import jain, json_safe, pstdev, recovery_ms, write
from qcn.core.trace import Trace


def test_jain_is_one_for_equal_shares_and_one_over_n_for_one_taker() -> None:
    assert jain([3.0, 3.0, 3.0]) == pytest.approx(1.0)
    assert jain([5.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain([1.0, 2.0]) == pytest.approx(9 / 10)
    assert jain([0.0, 0.0]) == 1.0  # nothing to share: nobody treated unfairly


def test_pstdev_is_the_population_deviation() -> None:
    assert pstdev([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(2.0)
    assert pstdev([7]) == 0.0


def test_recovery_is_the_first_full_sample_after_the_restore() -> None:
    sc = scenarios.load("transient")  # restored at 4 s; 10 sources of 0.85 Gb/s
    assert sc.restore_at_s == pytest.approx(4.0)
    target = 0.9 * min(10e9, 10 * 0.85e9)  # 7.65 Gb/s
    tr = Trace(times_s=[3.9, 4.0, 4.05, 4.1, 4.2], throughput_bps=[0.5e9, 1e9, 7e9, target, 9e9])
    assert recovery_ms(sc, tr) == pytest.approx(100.0)
    never = Trace(times_s=[4.1, 4.2], throughput_bps=[1e9, 2e9])
    assert recovery_ms(sc, never) == math.inf
    assert recovery_ms(scenarios.load("bursty"), tr) is None  # no restore in it


def test_json_safe_turns_non_numbers_into_nulls() -> None:
    value = {"a": math.inf, "b": [1.0, math.nan, (2, -math.inf)], "c": "x", "d": 0.5}
    assert json_safe(value) == {"a": None, "b": [1.0, None, [2, None]], "c": "x", "d": 0.5}
    json.dumps(json_safe(value), allow_nan=False)  # valid JSON


def test_write_puts_every_sample_and_source_in_the_csvs(tmp_path: Path) -> None:
    sc = scenarios.load("bursty").with_overrides({"network.sources": 2})  # h1, h2 -> h3
    tr = Trace(
        times_s=[0.001, 0.002],
        queue_pkts=[3, 4],
        throughput_bps=[1e9, 2e9],
        capacity_bps=[10e9, 10e9],
        source_current_rate_bps=[[5e9, 6e9], [5.5e9, 6e9]],
        source_target_rate_bps=[[8e9, 8e9], [8e9, 7e9]],
        source_throughput_bps=[[1e9, 0.0], [1e9, 1e9]],
    )
    assert write(tmp_path, sc, tr, {"x": math.nan}, plots=False) == []
    with (tmp_path / "queue.csv").open() as f:
        assert list(csv.reader(f)) == [
            ["time_s", "queue_pkts", "throughput_bps", "capacity_bps"],
            ["0.001000", "3", "1000000000", "10000000000"],
            ["0.002000", "4", "2000000000", "10000000000"],
        ]
    with (tmp_path / "sources.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert rows[2] == {
        "time_s": "0.002000",
        "source": "0",
        "sender": "h1",
        "receiver": "h3",
        "current_rate_bps": "5500000000",
        "target_rate_bps": "8000000000",
        "throughput_bps": "1000000000",
    }
    assert json.loads((tmp_path / "summary.json").read_text()) == {"x": None}
