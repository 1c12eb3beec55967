"""Which port a run's headline figures describe (qcn/core/results.py, docs/experiments.md
"The headline port"), on networks given as files: the congested port, named by the run,
every CP port that saw a queue drawn, ports.csv plotted; a live knob change in the results.
The networks run on the simulator; the rules are also checked on traces made by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from qcn.cli import main as cli
from qcn.cli.run import headline_line, phase_line, printed
from qcn.core import scenario as scenarios
from qcn.core.live import LiveFeed
from qcn.core.results import (
    Headline,
    capacity_lines,
    headline,
    jain,
    phase_figures,
    pyplot,
    q_eq_steps,
    queue_plot_ports,
    rate_panels,
    rates_figure,
)
from qcn.core.trace import Trace
from qcn.lab import backends
from qcn.topologies.traces import port_throughputs

DATA = Path(__file__).resolve().parent / "data"
TRIANGLE = DATA / "triangle-8g.json"
PARKING_LOT = DATA / "parking-lot.toml"
INCAST = {"workload.traffic": "incast"}
ALL_TO_ALL_FLOWS = {"workload.pattern": "flows", "workload.traffic": "all-to-all"}


def on_file(name: str, path: Path, traffic: dict[str, Any]) -> scenarios.Scenario:
    """A shipped scenario on the network in ``path`` with ``traffic``."""
    return scenarios.load(name).with_overrides({"network.topology": str(path), **traffic})


def run(sc: scenarios.Scenario, out: Path, **options: Any) -> tuple[Trace, dict[str, Any]]:
    return backends.run_and_record(sc, backends.SIMULATOR, out, backends.RunOptions(**options))


def hottest(summary: dict[str, Any]) -> str:
    """The CP port with the highest mean queue in summary.json's ports (one, not tied)."""
    means: dict[str, float] = {p: f["queue_mean_pkts"] for p, f in summary["ports"].items()}
    best = max(means, key=lambda p: means[p])
    assert sorted(means.values())[-2] < means[best]  # the case is not a tie
    return best


# -- on networks given as files -------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "congested"), [(TRIANGLE, "s3:4"), (PARKING_LOT, "s4:3")], ids=["triangle", "lot"]
)
def test_incast_on_a_file_headlines_the_congested_port_not_the_first(
    tmp_path: Path, path: Path, congested: str
) -> None:
    sc = on_file("long-lived", path, INCAST)
    first = str(sc.topology.cp_ports[0])
    assert len(sc.topology.cp_ports) == 3
    assert first != congested
    trace, summary = run(sc, tmp_path)
    assert summary["headline_port"] == hottest(summary) == congested
    assert summary["headline_reason"].startswith("highest mean queue after the warm-up")
    assert "of 3 CP ports" in summary["headline_reason"]
    assert summary["queue_mean_pkts"] == summary["ports"][congested]["queue_mean_pkts"]
    assert summary["queue_max_pkts"] == summary["ports"][congested]["queue_max_pkts"]
    # The sink's port carries at most its link's rate (the first CP port's is 8 Gb/s).
    assert 0.5 < summary["utilization"] <= 1.0
    drawn = queue_plot_ports(sc, trace, headline(sc, trace))
    assert congested in drawn
    assert {p for p, f in summary["ports"].items() if f["queue_max_pkts"] > 0} <= set(drawn)
    assert (tmp_path / "ports.png").stat().st_size > 0


@pytest.mark.parametrize("path", [TRIANGLE, PARKING_LOT], ids=["triangle", "lot"])
def test_all_to_all_flows_on_a_file_headline_the_port_with_the_highest_queue(
    tmp_path: Path, path: Path
) -> None:
    sc = on_file("leaf-spine-fct", path, ALL_TO_ALL_FLOWS).with_overrides({"duration_s": 0.1})
    trace, summary = run(sc, tmp_path)
    cps = {str(r) for r in sc.topology.cp_ports}
    assert len(cps) > 3
    assert set(summary["ports"]) == cps
    assert summary["headline_port"] == hottest(summary)
    queued = {p for p, f in summary["ports"].items() if f["queue_max_pkts"] > 0}
    assert len(queued) > 1
    assert queued <= set(queue_plot_ports(sc, trace, headline(sc, trace)))


def test_qcn_run_names_the_headline_port_and_plots_ports_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "triangle"
    args = ["run", "long-lived", "--backend", "sim", "--quiet", "--out", str(out)]
    sets = ["--set", f"network.topology={TRIANGLE}", "--set", 'workload.traffic="incast"']
    assert cli.main([*args, *sets]) == 0
    lines = capsys.readouterr().out.splitlines()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["headline_port"] == "s3:4"
    said = next(line for line in lines if "the figures below are port" in line)
    assert said == f"qcn run: {headline_line(summary)}"
    assert said.startswith("qcn run: the figures below are port s3:4's (highest mean queue")
    assert f"  plot: {out}/ports.png" in lines


# -- who is who: hosts named, each receiver's share, each port's capacity --------------------

ECN_TOPO = DATA / "ecn-topo.json"
"""Issue 63's file: p4lang/tutorials' format, h1 and h11 behind s1, whose link to s2 runs at
0.5 Mb/s; every other link gives no rate (10 Gb/s on the simulator)."""
INCAST_H2 = {**INCAST, "workload.incast_sink": "h2"}


@pytest.fixture(scope="module")
def incast_on_the_slow_link(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[scenarios.Scenario, Trace, dict[str, Any], Path]:
    """long-lived's incast into h2 on ECN_TOPO, as the issue ran it."""
    out = tmp_path_factory.mktemp("ecn-incast")
    sc = on_file("long-lived", ECN_TOPO, INCAST_H2)
    trace, summary = run(sc, out)
    return sc, trace, summary, out


@pytest.fixture(scope="module")
def incast_judging_admitted_frames(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[scenarios.Scenario, Trace]:
    """The same run with the CP judging only the frames its buffer admits, as the issue
    ran it before the CP judged arrivals: h1 and h11 at 10 Gb/s for the whole run."""
    sc = on_file("long-lived", ECN_TOPO, {**INCAST_H2, "qcn.cp.judge": "admitted"})
    trace, _summary = run(sc, tmp_path_factory.mktemp("ecn-incast-admitted"))
    return sc, trace


def test_the_results_name_each_sources_hosts_and_judge_each_receivers_share(
    incast_on_the_slow_link: tuple[scenarios.Scenario, Trace, dict[str, Any], Path],
) -> None:
    """h1 and h11 got 0.24 Mb/s each of the slow link and the others about 5 Gb/s, while the
    headline fairness (0.90, of what the sources sent) and sources.csv's "source 0..3" said
    nothing of who got what (issue 63)."""
    _sc, _trace, summary, out = incast_on_the_slow_link
    pairs = [("h1", "h2"), ("h11", "h2"), ("h22", "h2"), ("h3", "h2")]
    assert [(s["sender"], s["receiver"]) for s in summary["sources"]] == pairs
    with (out / "sources.csv").open() as f:
        named = {(r["source"], r["sender"], r["receiver"]) for r in csv.DictReader(f)}
    assert named == {(str(i), a, b) for i, (a, b) in enumerate(pairs)}
    # Max-min fair: the slow link split between h1 and h11, the rest of h2's 10 Gb/s link
    # between h22 and h3.
    fair = [s["fair_share_bps"] for s in summary["sources"]]
    assert fair == pytest.approx([0.25e6, 0.25e6, 5e9 - 0.25e6, 5e9 - 0.25e6], rel=1e-12)
    ratios = [s["delivered_bps"] / s["fair_share_bps"] for s in summary["sources"]]
    assert summary["jain_fairness"] == pytest.approx(jain(ratios), rel=1e-12)
    assert all(0.9 < r < 1.1 for r in ratios)  # each receiver got about its fair share
    assert summary["jain_fairness"] > 0.99
    # What they sent: h1 and h11 far above what their link carries, the others not.
    sent = [s["sent_bps"] for s in summary["sources"]]
    assert summary["jain_sent"] == pytest.approx(jain(sent), rel=1e-12)
    assert summary["jain_sent"] < 0.95
    # Utilization against the headline port's own 0.5 Mb/s.
    assert summary["headline_port"] == "s1:3"
    assert 0.9 < summary["utilization"] <= 1.0


def test_rates_png_draws_each_congested_ports_capacity_where_it_can_be_seen(
    incast_judging_admitted_frames: tuple[scenarios.Scenario, Trace],
) -> None:
    """The slow port's capacity was drawn at 0 on a Gb/s axis, its sources as "RP 0..3"."""
    sc, trace = incast_judging_admitted_frames
    plt = pyplot()
    fig = rates_figure(plt, sc, trace, headline(sc, trace))
    slow, sink = fig.axes[0], fig.axes[1]
    assert len(fig.axes) == 2  # (legends are not axes)
    assert (slow.get_title(), sink.get_title()) == ("through s1:3 (headline)", "through s2:2")
    assert [line.get_label() for line in slow.get_lines()] == [
        "h1 → h2", "h11 → h2", "capacity of s1:3: 500 kb/s",
    ]  # fmt: skip
    assert [line.get_label() for line in sink.get_lines()] == [
        "h1 → h2", "h11 → h2", "h22 → h2", "h3 → h2", "capacity of s2:2: 10 Gb/s",
    ]  # fmt: skip
    assert set(slow.get_lines()[-1].get_ydata()) == {0.5e6 / 1e9}  # in Gb/s, on a log axis
    assert (slow.get_yscale(), sink.get_yscale()) == ("log", "linear")
    assert set(sink.get_lines()[-1].get_ydata()) == {10.0}
    assert " ".join(fig.get_suptitle().split()) == (
        "long-lived: source rates (CR) against each port's capacity, on ecn-topo (3 switches, "
        "5 hosts)"
    )
    plt.close(fig)


def test_past_eight_congested_ports_rates_png_is_one_log_panel_of_every_capacity() -> None:
    sc = on_file("leaf-spine-fct", ECN_TOPO, {"workload.rto_s": 3.0})
    cps = [str(r) for r in sc.topology.cp_ports]
    assert len(cps) == 9
    trace = trace_of({p: [5] * 10 for p in cps}, {})
    # The scenario's bottleneck (its first CP port, s1:1) as a backend records it.
    trace.capacity_bps = [10e9] * 10
    (panel,), many = rate_panels(sc, trace, headline(sc, trace))
    assert many
    assert panel.sources == list(range(len(sc.sources)))
    assert capacity_lines(sc, trace, panel.ports) == [
        ("capacity of 7 ports (s1:1, ...): 10 Gb/s", [10e9] * 10),
        ("capacity of s1:3, s2:3: 500 kb/s", [0.5e6] * 10),
    ]


# -- the rule, on traces made by hand -------------------------------------------------------


def trace_of(queues: dict[str, list[int]], drops: dict[str, int]) -> Trace:
    n = len(next(iter(queues.values())))
    return Trace(
        times_s=[0.01 * (k + 1) for k in range(n)],
        port_queue_pkts=queues,
        port_counts={p: {"drops": d, "cnms": 0} for p, d in drops.items()},
    )


def test_a_tie_on_the_queue_goes_to_the_most_drops_then_to_the_first() -> None:
    sc = on_file("long-lived", TRIANGLE, INCAST).with_overrides({"duration_s": 0.1})
    full = [100] * 10
    tied = trace_of({"s1:3": full, "s2:3": full, "s3:4": full}, {"s1:3": 1, "s2:3": 5, "s3:4": 2})
    assert headline(sc, tied) == Headline(
        "s2:3", "highest mean queue after the warm-up (100 pkts) of 3 CP ports, tied with 2: "
        "the most drops (5)",
    )  # fmt: skip
    quiet = trace_of({"s1:3": [0] * 10, "s2:3": [0] * 10, "s3:4": [0] * 10}, {})
    assert headline(sc, quiet) == Headline(
        "s1:3", "no CP port saw a queue or a drop: the first of 3 CP ports"
    )
    # The warm-up (the first 10 % of the run) is left out of the mean.
    early = trace_of({"s1:3": [90] + [1] * 9, "s2:3": [0] + [2] * 9, "s3:4": [0] * 10}, {})
    assert headline(sc, early).port == "s2:3"


def test_a_named_bottleneck_or_a_schedule_keeps_the_headline_on_it() -> None:
    lot = scenarios.load("parking-lot")  # the generator names the long flow's first hop
    assert len(lot.topology.cp_ports) == 3
    busy = trace_of({str(r): [50] * 10 for r in lot.topology.cp_ports}, {})
    busy.port_queue_pkts[str(lot.topology.cp_ports[-1])] = [90] * 10
    assert headline(lot, busy) == Headline(
        str(lot.bottleneck_port), "the topology names it its bottleneck"
    )
    transient = scenarios.load("transient")
    assert headline(transient, Trace()) == Headline(
        "s1:11", "the scenario's schedule changes its rate and recovery is measured on it"
    )
    # A file that names no bottleneck, with a schedule: the schedule's port, and why.
    scheduled = on_file("transient", TRIANGLE, INCAST)
    assert headline(scheduled, busy).reason.endswith(
        "(the topology names no bottleneck: the schedule's is its first CP port)"
    )
    single = on_file("long-lived", TRIANGLE, {"workload.traffic": "incast", "network.cp_off":
                     ["s1:3", "s2:3"]})  # fmt: skip
    assert headline(single, Trace()) == Headline("s3:4", "the only CP port")


# -- a live knob change ---------------------------------------------------------------------


def test_a_live_q_eq_change_is_in_the_summary_and_drawn_as_its_step(tmp_path: Path) -> None:
    sc = on_file("long-lived", TRIANGLE, INCAST)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    asked: list[float] = []

    def turn_at_0_1_s(now: float, _end: float) -> None:
        """As the page does: ask for q_eq 44 at the headline port (applied at the sample)."""
        if now >= 0.1 and not asked:
            asked.append(now)
            feed.tune("s3:4", {"q_eq_pkts": 44})

    trace, summary = run(sc, tmp_path, live=feed, progress=turn_at_0_1_s)
    (change,) = summary["knob_changes"]
    assert change == {
        "t_s": change["t_s"], "port": "s3:4", "knob": "q_eq_pkts", "from": 22, "to": 44,
        "by": "page",
    }  # fmt: skip
    assert asked[0] <= change["t_s"] < asked[0] + 2e-3
    assert summary["q_eq_pkts"] == 22  # as the run began
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["knob_changes"] == summary["knob_changes"]
    steps = q_eq_steps(sc, trace)
    assert steps["s3:4"] == [(0.0, 22.0), (change["t_s"], 44.0)]
    assert steps["s1:3"] == steps["s2:3"] == [(0.0, 22.0)]
    # The queue followed the new q_eq (a settled mean far above the old one).
    assert summary["queue_mean_settled_pkts"] > 35


def test_a_run_that_was_not_live_has_no_knob_changes(tmp_path: Path) -> None:
    sc = on_file("long-lived", TRIANGLE, INCAST).with_overrides({"duration_s": 0.05})
    trace, summary = run(sc, tmp_path)
    assert trace.knob_changes is None
    assert "knob_changes" not in summary
    assert q_eq_steps(sc, trace)["s3:4"] == [(0.0, 22.0)]


def test_a_live_bytes_mode_change_steps_q_eq_in_frames() -> None:
    from qcn.core.live import KnobChange  # noqa: PLC0415

    sc = on_file("long-lived", TRIANGLE, INCAST).with_overrides({"qcn.cp.queue_unit": "bytes"})
    tr = Trace(
        knob_changes=[
            KnobChange(0.05, "s3:4", "q_eq_pkts", 22, 30, "page"),
            KnobChange(0.07, "s3:4", "q_eq_bytes", 0, 60000, "controller"),
            KnobChange(0.08, "s3:4", "w", 2.0, 1.0, "page"),  # q_eq as it was: no step
        ]
    )
    assert q_eq_steps(sc, tr)["s3:4"] == [(0.0, 22.0), (0.05, 30.0), (0.07, 40.0)]


# -- the printed figures and plots ----------------------------------------------------------


def test_printed_figures_are_rounded_and_summary_json_keeps_them_whole() -> None:
    figures = {"recovery_ms": 228.99999999974696, "drops": 70454, "utilization": 0.8806738,
               "jain_fairness": float("nan"), "queue_mean_pkts": 18.336296296296297}  # fmt: skip
    assert printed(figures) == {
        "recovery_ms": 229.0, "drops": 70454, "utilization": 0.8807, "jain_fairness": None,
        "queue_mean_pkts": 18.34,
    }  # fmt: skip


def test_a_phase_that_delivers_more_than_it_is_offered_says_why(tmp_path: Path) -> None:
    sc = scenarios.load("transient")
    trace, _summary = run(sc, tmp_path / "t")
    before, hot, after = phase_figures(sc, trace)
    # The sources queue what their limiters hold back in the hot spot (2-4 s): about
    # (8.5 - 0.5) Gb/s for 2 s, sent on top of their load once the capacity is back.
    assert 15e9 < after["undelivered_at_start_bits"] < 16.5e9
    assert after["delivered_offered"] > 1.05
    assert phase_line(after).endswith(
        "= 1.08 of offered (above 1: the sources also send the backlog their reaction points "
        f"held back before this phase, {after['undelivered_at_start_bits'] / 1e6:,.0f} Mb "
        "offered and not yet delivered at its start)"
    )
    assert "above 1" not in phase_line(before)
    assert "above 1" not in phase_line(hot)


def test_the_rates_legend_hides_nothing_drawn(tmp_path: Path) -> None:
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.5})
    trace, _summary = run(sc, tmp_path)
    plt = pyplot()
    fig = rates_figure(plt, sc, trace, headline(sc, trace))
    fig.canvas.draw()
    (ax,) = fig.axes
    legend = ax.get_legend().get_window_extent()
    assert not legend.overlaps(ax.get_window_extent())  # beside the axes, not on them
    plt.close(fig)


# -- BMv2: a port's throughput from what the sinks counted ----------------------------------


def test_bmv2_ports_throughput_is_the_sum_of_the_sources_crossing_them() -> None:
    sc = on_file("long-lived", TRIANGLE, INCAST)  # h1 via s1:3, h2 via s2:3, h3: s3 alone
    rows = [[1e9, 2e9, 4e9], [3e9, 0.0, 1e9]]
    got = port_throughputs(sc, ["s1:3", "s2:3", "s3:4", "s1:1"], rows)
    assert got == {
        "s1:3": [1e9, 3e9], "s2:3": [2e9, 0.0], "s3:4": [7e9, 4e9], "s1:1": [0.0, 0.0],
    }  # fmt: skip
    # All-to-all flows: a source some of whose destinations cross a port and others not.
    flows = on_file("leaf-spine-fct", TRIANGLE, ALL_TO_ALL_FLOWS)
    n = len(flows.sources)
    got = port_throughputs(flows, [str(r) for r in flows.topology.cp_ports], [[1e9] * n])
    # h4's port s3:4: every source but h4 itself sends there among others: not known.
    assert "s3:4" not in got
