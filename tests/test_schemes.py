"""`qcn schemes`: seed 001's schemes and episodes as scenarios, and the tables they give."""

from __future__ import annotations

import pytest

from qcn.core import scenario as scenarios
from qcn.lab.schemes import EPISODES, FIGURES, SCHEMES, format_tables
from tests.kit import assert_one_line_error, qcn


def test_the_periodic_episode_is_100_ms_on_100_ms_off() -> None:
    sc = scenarios.load("tcp-multihop").with_overrides(EPISODES["periodic"])
    flat = [t for episode in sc.hotspot_episodes_s() for t in episode]
    assert flat == pytest.approx([0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95])
    assert sc.congested_episode_s() == pytest.approx((0.05, 0.95))
    scaled = sc.scaled_for_bmv2()
    assert scaled.hotspot_episodes_s()[1] == pytest.approx((5.0, 7.0))  # times x20


def test_the_500_ms_episode_is_the_scenarios_own() -> None:
    sc = scenarios.load("tcp-multihop").with_overrides(EPISODES["500ms"])
    assert sc.hotspot_episodes_s() == [(0.25, 0.75)]


def test_each_scheme_is_a_valid_scenario() -> None:
    base = scenarios.load("tcp-multihop")
    by_name = {s.name: s for s in SCHEMES}
    assert list(by_name) == ["tcp", "tcp+qcn", "tcp+qcn+pause", "qcn+pause"]
    assert not by_name["tcp"].qcn
    udp = base.with_overrides(by_name["qcn+pause"].overrides)
    assert (udp.network.pause, udp.workload.pattern) == (True, "udp")
    assert base.with_overrides(by_name["tcp+qcn+pause"].overrides).workload.pattern == "tcp"


def test_tables_are_in_the_seeds_units() -> None:
    row = dict.fromkeys(FIGURES, 0.0) | {
        "innocent_throughput_bps": 23.5e6,
        "innocent_ideal_bps": 24e6,
        "hotspot_throughput_bps": 1.5e6,
        "hotspot_ideal_bps": 1.75e6,
        "pause_frames_sent": 12,
        "switch_drops": 5,
        "frames_unplaced": 3,
    }
    text = format_tables({"500ms": {"tcp+qcn+pause": row}}, rate_scale=1e-3, runs=3)
    assert "### 500ms congestion (3 runs each)" in text
    assert "| switches' drops | frames not placed | PAUSEs |" in text
    assert "| tcp+qcn+pause | 23.50 | 24.00 | 1.50 | 1.75 | 5 | 3 | 12 |" in text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("transient",), "with real TCP or UDP (workload.pattern tcp or udp"),
        (("--runs", "0"), "--runs must be at least 1"),
        (("--episodes", "weekly"), "unknown episode 'weekly'"),
    ],
)
def test_schemes_mistakes_are_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(qcn("schemes", *args), expected)


def test_a_period_shorter_than_the_episode_is_refused() -> None:
    assert_one_line_error(
        qcn(
            "run",
            "tcp-multihop",
            "--set",
            "workload.hotspot_period_s=0.1",
            "--set",
            "workload.hotspot_duration_s=0.2",
        ),
        "workload.hotspot_period_s: must be longer than hotspot_duration_s",
    )
