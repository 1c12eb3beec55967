"""`qcn compare`: how two backends' figures are set side by side and judged."""

from __future__ import annotations

import math
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.lab.compare import FLOW_FIGURES, compare_rows, figures_for, figures_of, format_table
from tests.kit import assert_one_line_error, qcn


def summary(**kw: Any) -> dict[str, Any]:
    base = {
        "queue_mean_episode_pkts": 22.0,
        "queue_max_episode_pkts": 40,
        "drops": 1000,
        "drops_settled": 10,
        "jain_sent": 0.9,
        "utilization_episode": 1.0,
        "recovery_ms": 200.0,
        "delivered_offered_uncongested": 0.99,
    }
    return base | kw


def row(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(r for r in rows if r["figure"] == key)


def test_onset_drops_are_all_but_the_settled_ones() -> None:
    assert figures_of(summary())["onset_drops"] == 990
    assert math.isnan(figures_of(summary(recovery_ms=None))["recovery_ms"])


def test_targets_judge_ratios_and_differences() -> None:
    sim = [figures_of(summary()), figures_of(summary(queue_mean_episode_pkts=24.0))]
    bmv2 = [figures_of(summary(queue_mean_episode_pkts=30.0, drops=3000, jain_sent=0.75))]
    rows = compare_rows(sim, bmv2)
    q = row(rows, "queue_mean_episode_pkts")
    assert q["sim"] == [23.0, 22.0, 24.0]
    assert q["ratio"] == pytest.approx(30 / 23)
    assert q["ok"] is False  # 1.30 is outside [0.75, 1.25]
    assert row(rows, "onset_drops")["ok"] is False  # 2990 / 990 > 2
    assert row(rows, "jain_sent")["ok"] is False  # 0.15 apart
    assert row(rows, "recovery_ms")["ok"] is True
    assert row(rows, "drops_settled")["ok"] is None  # reported, no target
    table = format_table(rows, runs=2)
    assert "MISSED" in table
    assert "queue mean, episode (pkts)" in table


def test_the_flows_workload_compares_slowdown() -> None:
    assert figures_for(scenarios.load("fct")) == FLOW_FIGURES
    flows = {"slowdown_short_p50": 2.0, "slowdown_short_p99": 50.0, "slowdown_long_p50": 10.0}
    sim = [figures_of({**flows, "slowdown_long_p99": 100.0, "drops": 5}, FLOW_FIGURES)]
    bmv2 = [
        figures_of(
            {**flows, "slowdown_short_p50": 3.2, "slowdown_long_p99": 190.0, "drops": 9},
            FLOW_FIGURES,
        )
    ]
    rows = compare_rows(sim, bmv2, FLOW_FIGURES)
    assert row(rows, "slowdown_short_p50")["ok"] is False  # 1.6x: outside 1.5x
    assert row(rows, "slowdown_long_p99")["ok"] is True  # 1.9x: a p99 may be 2x
    assert row(rows, "slowdown_long_p50")["ok"] is True
    assert row(rows, "drops")["ok"] is None
    assert math.isnan(row(rows, "flows_unfinished")["sim"][0])  # no such figure: shown as -


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tcp-multihop",), "no TCP or iperf3 model"),
        (("transient", "--runs", "0"), "--runs must be at least 1"),
    ],
)
def test_compare_mistakes_are_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(qcn("compare", *args), expected)
