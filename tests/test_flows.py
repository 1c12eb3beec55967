"""Flows that finish (seed 003's dynamic workload, docs/fct.md): sizes, arrivals, FCT and
slowdown, on hand-computed cases of the simulator and against the size distributions."""

from __future__ import annotations

import csv
import json
import math
import random
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.flows import (
    FLOW_CSV_COLUMNS,
    FLOW_HEADER_BYTES,
    FLOW_SIZE_MAX,
    MAX_FLOWS,
    MIN_FRAME_BYTES,
    EmpiricalCdf,
    FlowArrival,
    FlowFieldError,
    FlowPath,
    FlowRecord,
    FlowSizeError,
    Seed003Mix,
    check_host_flow,
    check_transport,
    draw_arrivals,
    flow_frames,
    ideal_fct_s,
    plot_slowdown,
    read_cdf,
    records_from_logs,
    size_distribution,
    slowdown_bins,
    summarize_flows,
    wire_bytes,
    write_flows_csv,
)
from qcn.core.publish import PARTIAL_MARKER
from qcn.core.scenario import ScenarioError, SourceHost
from qcn.simulator.engine import Simulation
from tests.kit import assert_one_line_error, qcn

RATE = 1e9
FRAME = 1500
PAYLOAD = FRAME - FLOW_HEADER_BYTES
RTT = 40e-6
RTO = 2e-3
GAP = 8 * FRAME / RATE


def network(**overrides: object) -> scenarios.Scenario:
    """fct's scenario on a 1 Gb/s link and host links, with ``overrides``."""
    base: dict[str, object] = {
        "duration_s": 0.01,
        "network.sources": 2,
        "network.line_rate_bps": RATE,
        "qcn.rp.line_rate_bps": RATE,
        "network.bottleneck_rate_bps": RATE,
        "network.rtt_s": RTT,
        "workload.rto_s": RTO,
    }
    return scenarios.load("fct").with_overrides({**base, **overrides})


def run(
    sc: scenarios.Scenario, arrivals: list[FlowArrival], *, qcn: bool = False
) -> list[FlowRecord]:
    return Simulation(sc, qcn=qcn, arrivals=arrivals).run().flows


# -- frames and the ideal FCT ---------------------------------------------------------------


def test_a_flow_is_cut_into_full_frames_and_a_padded_last_one() -> None:
    assert flow_frames(1, FRAME) == (1, MIN_FRAME_BYTES)
    assert flow_frames(PAYLOAD, FRAME) == (1, FRAME)
    assert flow_frames(PAYLOAD + 1, FRAME) == (2, FLOW_HEADER_BYTES + 1 + 1)  # padded to 60
    assert flow_frames(2 * PAYLOAD + 100, FRAME) == (3, FLOW_HEADER_BYTES + 100)
    assert wire_bytes(2 * PAYLOAD + 100, FRAME) == 2 * FRAME + FLOW_HEADER_BYTES + 100
    assert ideal_fct_s(PAYLOAD, FRAME, RATE, 20e-6) == 20e-6 + GAP


# -- the simulator's flows, computed by hand ---------------------------------------------------


@pytest.mark.parametrize("with_qcn", [False, True])
def test_a_flow_alone_takes_exactly_its_ideal_fct(with_qcn: bool) -> None:
    size = 10 * PAYLOAD + 7
    (flow,) = run(network(), [FlowArrival(1e-3, 0, size)], qcn=with_qcn)
    assert flow.finished
    assert flow.start_s == 1e-3
    assert flow.fct_s == pytest.approx(RTT / 2 + 8 * wire_bytes(size, FRAME) / RATE, rel=1e-12)
    assert flow.fct_s == pytest.approx(flow.ideal_fct_s, rel=1e-12)
    assert flow.slowdown == pytest.approx(1.0, rel=1e-12)
    assert flow.retransmitted_frames == 0


def test_flows_of_one_host_take_turns_a_frame_each() -> None:
    # A and B (two frames each) start together at host 0: A0 B0 A1 B1 leave at 1..4 gaps.
    two = 2 * PAYLOAD
    a, b = run(network(), [FlowArrival(0.0, 0, two), FlowArrival(0.0, 0, two)])
    assert a.fct_s == pytest.approx(3 * GAP + RTT / 2, rel=1e-12)
    assert b.fct_s == pytest.approx(4 * GAP + RTT / 2, rel=1e-12)
    assert b.slowdown == pytest.approx((4 * GAP + RTT / 2) / (2 * GAP + RTT / 2), rel=1e-12)


def test_a_lost_frame_is_sent_again_after_the_timeout() -> None:
    # A one-frame buffer: host 1's frame finds host 0's there and is dropped; it is sent
    # again RTO after it was sent and leaves one frame time later.
    one = PAYLOAD
    sc = network(**{"network.buffer_pkts": 1, "workload.rto_s": RTO})
    first, second = run(sc, [FlowArrival(0.0, 0, one), FlowArrival(0.0, 1, one)])
    assert (first.retransmitted_frames, second.retransmitted_frames) == (0, 1)
    assert first.fct_s == pytest.approx(GAP + RTT / 2, rel=1e-12)
    assert second.fct_s == pytest.approx(2e-3 + GAP + RTT / 2, rel=1e-12)


def test_a_flow_that_cannot_finish_is_recorded_unfinished() -> None:
    big = 1000 * PAYLOAD  # 12 ms at 1 Gb/s, in a 10 ms run
    sc = network(**{"workload.drain_fraction": 0.5})
    small, large = run(sc, [FlowArrival(0.0, 0, 100), FlowArrival(0.0, 1, big)])
    assert small.finished
    assert not large.finished
    assert math.isnan(large.slowdown)
    summary = summarize_flows([small, large], 100_000)
    assert (summary["started"], summary["finished"], summary["unfinished"]) == (2, 1, 1)
    assert summary["unfinished_bytes"] == big
    assert summary["slowdown_long"]["flows"] == 0


def test_every_flow_of_a_loaded_run_is_accounted_for() -> None:
    sc = network(**{"duration_s": 0.1, "workload.drain_fraction": 0.2, "network.buffer_pkts": 20})
    trace = Simulation(sc, seed=3).run()
    flows = trace.flows
    assert len(flows) > 100
    assert [f.flow_id for f in flows] == list(range(len(flows)))
    # Every drop is sent again once its timeout has passed (those in the last RTO pending).
    assert 0 < sum(f.retransmitted_frames for f in flows) <= trace.drops
    assert sum(f.finished for f in flows) > 0.9 * len(flows)
    for f in flows:
        if f.finished:
            assert f.fct_s >= f.ideal_fct_s * (1 - 1e-12)


def test_per_flow_reaction_points_get_the_sampled_frames_cnms() -> None:
    # A full bottleneck: QCN's CNMs go to the flows (their limiters) and cut their drops.
    sc = network(**{"duration_s": 0.05, "workload.drain_fraction": 0.2, "workload.load": 0.9})
    without = Simulation(sc, qcn=False, seed=2).run()
    with_qcn = Simulation(sc, qcn=True, seed=2).run()
    assert with_qcn.cnms > 0
    assert with_qcn.drops < without.drops / 2
    assert len(with_qcn.flows) == len(without.flows)


# -- sizes and arrivals ------------------------------------------------------------------------


def ks_distance(draws: list[float], cdf: Callable[[float], float]) -> float:
    ordered, n = sorted(draws), len(draws)
    return max(max(abs((i + 1) / n - cdf(x)), abs(i / n - cdf(x))) for i, x in enumerate(ordered))


# Kolmogorov-Smirnov at 10^5 draws: 1.95 / sqrt(n) is the 0.1 % critical distance.
KS_DRAWS = 100_000
KS_BOUND = 1.95 / math.sqrt(KS_DRAWS)


@pytest.mark.parametrize("name", ["web-search", "hadoop"])
def test_the_cdf_sampler_matches_its_cdf(name: str) -> None:
    dist = size_distribution(name)
    assert isinstance(dist, EmpiricalCdf)
    rng = random.Random(5)
    draws = [dist.draw(rng.random) for _ in range(KS_DRAWS)]
    assert ks_distance(draws, dist.cdf) < KS_BOUND


def test_seed003s_mix_matches_uniform_ipc_and_pareto_data() -> None:
    mix = Seed003Mix(ipc_fraction=0.3)
    low = mix.data_min_bytes
    assert low == 50_000

    def cdf(x: float) -> float:
        ipc = min(1.0, math.floor(x) / 10_000) if x >= 1 else 0.0
        data = 1 - (low / x) ** 2 if x >= low else 0.0
        return 0.3 * ipc + 0.7 * data

    rng = random.Random(6)
    draws = [mix.draw(rng.random) for _ in range(KS_DRAWS)]
    assert ks_distance(draws, cdf) < KS_BOUND
    assert mix.mean_bytes == pytest.approx(0.3 * 5000.5 + 0.7 * 100_000)


def test_arrivals_offer_the_load_asked_for() -> None:
    dist = size_distribution("hadoop")
    arrivals = draw_arrivals(dist, sources=4, load=0.5, rate_bps=1e9, until_s=20.0, seed=9)
    offered = 8 * sum(a.size_bytes for a in arrivals) / 20.0
    assert offered == pytest.approx(0.5e9, rel=0.1)
    assert {a.source for a in arrivals} == {0, 1, 2, 3}
    assert all(0 <= a.start_s < 20 for a in arrivals)
    assert arrivals == sorted(arrivals, key=lambda a: a.start_s)
    again = draw_arrivals(dist, sources=4, load=0.5, rate_bps=1e9, until_s=20.0, seed=9)
    assert again == arrivals


def test_cdf_files_with_mistakes_name_the_line(tmp_path: Path) -> None:
    cases = {
        "one number": ("0 0\n5000\n9000 1\n", ":2:"),
        "decreasing": ("0 0\n5000 0.5\n4000 0.7\n9000 1\n", ":3: sizes and cdf values"),
        "cdf above 1": ("0 0\n9000 1.5\n", ":2:"),
        "not ending at 1": ("0 0\n9000 0.9\n", "last line's cdf must be 1"),
        "empty": ("# nothing\n", "last line's cdf must be 1"),
    }
    for label, (text, expected) in cases.items():
        path = tmp_path / f"{label.replace(' ', '-')}.cdf"
        path.write_text(text)
        with pytest.raises(FlowSizeError, match=expected):
            read_cdf(path)
    with pytest.raises(FlowSizeError, match="no flow size distribution"):
        size_distribution("nosuch")


# -- analysis ----------------------------------------------------------------------------------


def test_slowdown_bins_follow_hpccs_analysis() -> None:
    # 100 finished flows of sizes 1..100 whose slowdown is their size: bins of 5 flows; in
    # each, p50 is the value at index int(5 * 0.5) = 2, p95 and p99 at index 4.
    records = [
        FlowRecord(i, 0, 0, size, 0.0, 1.0, finish_s=float(size))
        for i, size in enumerate(range(100, 0, -1))
    ]
    bins = slowdown_bins(records)
    assert len(bins) == 20
    for k, b in enumerate(bins):
        assert b["size_max_bytes"] == 5 * k + 5
        assert (b["flows"], b["p50"], b["p95"], b["p99"]) == (5, 5 * k + 3, 5 * k + 5, 5 * k + 5)
    summary = summarize_flows(records, short_bytes=50)
    assert summary["slowdown_short"]["flows"] == 49
    assert summary["slowdown_long"]["p50"] == 50 + int(51 * 0.5)
    # Slowdown is floored at 1.
    assert FlowRecord(0, 0, 0, 1, 0.0, 2.0, finish_s=1.0).slowdown == 1.0


def test_flows_are_also_binned_by_their_paths_length(tmp_path: Path) -> None:
    """A network's flows by hop count (a new key; a single switch's summary has none) and
    flows.csv's hops column (only where asked: a single switch's file is as before)."""
    records = [
        FlowRecord(i, 0, 0, 1000, 0.0, 1.0, finish_s=1.0 + i % 3, hops=1 + 2 * (i % 2))
        for i in range(10)
    ] + [FlowRecord(10, 0, 0, 1000, 0.0, 1.0, hops=5)]  # unfinished: in no bin
    summary = summarize_flows(records, short_bytes=50, by_hops=True)
    by_hops = summary["bins_by_hops"]
    assert set(by_hops) == {"1", "3"}
    assert by_hops["1"]["flows"] == by_hops["3"]["flows"] == 5
    evens = sorted(float(1 + i % 3) for i in range(0, 10, 2))  # slowdown = finish_s
    assert by_hops["1"]["mean"] == pytest.approx(sum(evens) / 5)
    plain = summarize_flows(records, short_bytes=50)
    assert "bins_by_hops" not in plain
    assert {k: v for k, v in summary.items() if k != "bins_by_hops"} == plain
    sources = [SourceHost("h1", ("h2",))]
    write_flows_csv(tmp_path / "plain.csv", records, sources)
    write_flows_csv(tmp_path / "hops.csv", records, sources, hops=True)
    plain_rows = (tmp_path / "plain.csv").read_text().splitlines()
    hop_rows = (tmp_path / "hops.csv").read_text().splitlines()
    assert plain_rows[0] == ",".join(FLOW_CSV_COLUMNS)
    assert [r.rsplit(",", 1)[0] for r in hop_rows] == plain_rows
    assert [r.rsplit(",", 1)[1] for r in hop_rows] == ["hops", *(str(r.hops) for r in records)]


def test_logs_join_into_records_and_every_flow_is_accounted_for() -> None:
    arrivals = [FlowArrival(0.5, 0, 1000), FlowArrival(0.7, 1, 3000), FlowArrival(9.0, 0, 200)]
    origin = 100.0
    sender = [
        {"flow": 0, "start": 100.5, "size": 1000, "sport": 1},
        {"flow": 1, "start": 100.71, "size": 3000, "sport": 2},
        {"flow": 0, "acked": 100.6, "retransmitted": 2},
        {"flow": 1, "stopped": 110.0, "retransmitted": 1},
    ]  # flow 2 never started: the run stopped first
    receiver = [{"src": "10.0.0.1", "flow": 0, "finish": 100.55, "size": 1000, "duplicates": 0}]
    first, second, third = records_from_logs(
        arrivals, sender, receiver, origin=origin, frame_bytes=FRAME,
        path=lambda _n, _a: FlowPath(RATE, 0.0),
    )  # fmt: skip
    assert first.finished
    assert first.fct_s == pytest.approx(0.05)
    assert first.retransmitted_frames == 2
    assert first.ideal_fct_s == pytest.approx(8 * wire_bytes(1000, FRAME) / RATE)
    assert second.start_s == pytest.approx(0.71)  # the sender's record, not the due time
    assert not second.finished
    assert second.retransmitted_frames == 1
    assert not third.finished
    assert third.start_s == 9.0
    assert summarize_flows([first, second, third], 100_000)["unfinished"] == 2


def test_a_port_served_as_bmv2s_paces_frames_and_puts_none_on_a_wire() -> None:
    """network.port_service "bmv2": a shaped port lets a frame leave at the later of its
    arrival and the previous departure plus a full frame's time (BMv2's queues, shaped in
    frames per second), so an idle port holds no frame for its length; "bytes" sends each
    frame for its own length."""
    bmv2 = network(**{"network.port_service": "bmv2"})
    # One flow alone: every frame leaves the bottleneck as it arrives (the host paces them).
    size = 10 * PAYLOAD + 7
    _, last = flow_frames(size, FRAME)
    (as_bytes,) = run(network(), [FlowArrival(1e-3, 0, size)])
    (paced,) = run(bmv2, [FlowArrival(1e-3, 0, size)])
    assert paced.ideal_fct_s == as_bytes.ideal_fct_s  # the ideal is the flow's bytes
    assert as_bytes.fct_s == pytest.approx(RTT / 2 + 10 * GAP + 8 * last / RATE, rel=1e-12)
    assert paced.fct_s == pytest.approx(RTT / 2 + 10 * GAP, rel=1e-12)
    # Two one-frame flows at once: the second waits a full frame's turn, not its length's.
    tiny, both = 100, [FlowArrival(1e-3, 0, 100), FlowArrival(1e-3, 1, 100)]
    _, short = flow_frames(tiny, FRAME)
    assert [f.fct_s for f in run(bmv2, both)] == pytest.approx([RTT / 2, RTT / 2 + GAP])
    assert [f.fct_s for f in run(network(), both)] == pytest.approx(
        [RTT / 2 + 8 * short / RATE, RTT / 2 + 2 * 8 * short / RATE]
    )


def test_scaling_for_bmv2_serves_ports_as_bmv2_unless_told_otherwise() -> None:
    sc = scenarios.load("fct")
    assert sc.network.port_service == "bytes"
    assert sc.scaled_for_bmv2().network.port_service == "bmv2"
    kept = sc.with_overrides({"network.port_service": "bytes"})
    assert kept.scaled_for_bmv2(keep=["network.port_service"]).network.port_service == "bytes"


# -- the scenario and the command line --------------------------------------------------------


def test_bmv2_scaling_scales_flow_sizes_by_k_tau() -> None:
    sc = scenarios.load("fct").with_overrides({"bmv2.rate_scale": 1e-3, "bmv2.time_scale": 500.0})
    scaled = sc.scaled_for_bmv2()
    assert scaled.workload.flow_size_scale == pytest.approx(0.5)
    assert scaled.workload.rto_s == pytest.approx(500 * sc.workload.rto_s)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"workload.load": 1.5}, "workload.load: must be in"),
        ({"workload.flow_sizes": "nosuch"}, "no flow size distribution"),
        ({"workload.rto_s": 10e-6}, "workload.rto_s: must exceed"),
        ({"workload.drain_fraction": 1.0}, "workload.drain_fraction"),
        ({"network.port_service": "cells"}, "network.port_service: must be one of bytes, bmv2"),
        ({"workload.tcp_congestion": "cubic; rm"}, "workload.tcp_congestion: must be a kernel"),
        ({"workload.tcp_connections": "pooled"}, "workload.tcp_connections: must be kept or"),
    ],
)
def test_flow_settings_are_checked(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        scenarios.load("fct").with_overrides(overrides)


def test_qcn_run_fct_writes_every_flow(tmp_path: Path) -> None:
    out = tmp_path / "fct"
    r = qcn(
        "run", "fct", "--backend", "sim", "--quiet", "--duration", "0.03",
        "--out", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "flows: " in r.stdout
    assert " started, " in r.stdout
    summary = json.loads((out / "summary.json").read_text())["flows"]
    with (out / "flows.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == summary["started"] > 100
    assert sum(int(r["finished"]) for r in rows) == summary["finished"]
    assert summary["finished"] + summary["unfinished"] == summary["started"]
    assert len(summary["bins"]) == 20
    assert (out / "slowdown.png").stat().st_size > 0


def test_a_mistake_in_the_flow_sizes_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cdf"
    bad.write_text("0 0\n100 x\n")
    r = qcn("run", "fct", "--backend", "sim", "--set", f'workload.flow_sizes="{bad}"')
    assert_one_line_error(r, "bad.cdf:2", "bytes cdf")


def test_tcp_transport_is_bmv2s_alone() -> None:
    r = qcn("run", "fct", "--backend", "sim", "--set", 'workload.transport="tcp"')
    assert_one_line_error(r, "no TCP model")
    with pytest.raises(ScenarioError, match=r"workload\.transport: must be frames or tcp"):
        scenarios.load("fct").with_overrides({"workload.transport": "udp"})


# -- what a flow's fields may be (docs/reliability.md) -------------------------------------


def test_no_finished_flow_is_an_empty_plot_and_complete_results(tmp_path: Path) -> None:
    """A run in which no flow finishes used to end in matplotlib's "Data cannot be
    log-scaled" traceback, its results left PARTIAL."""
    empty = summarize_flows([], short_bytes=100)
    assert plot_slowdown(tmp_path / "empty.png", "none", {"run": empty}).stat().st_size > 0
    # Flows started and none finished: a result.  No flow started: the run says so and
    # exits 1 (docs/reliability.md), its results complete all the same.
    for name, status, extra in (
        ("short", 0, ("--duration", "0.001", "--set", 'workload.flow_sizes="web-search"')),
        ("idle", 1, ("--duration", "0.01", "--set", "workload.load=1e-9")),
    ):
        out = tmp_path / name
        r = qcn("run", "fct", "--backend", "sim", "--quiet", "--out", str(out), *extra)
        assert r.returncode == status, r.stderr
        assert "Traceback" not in r.stderr
        assert " 0 finished" in r.stdout
        assert (out / "slowdown.png").stat().st_size > 0
        assert not (out / PARTIAL_MARKER).exists()


def test_flow_counts_are_estimated_and_bounded(tmp_path: Path) -> None:
    """A CDF of one 1-byte size, or sizes scaled down 10,000 times, drew ~76 M flows: 45 s
    and ~4 GB before the first line.  The expected count is refused past MAX_FLOWS."""
    one = tmp_path / "one.cdf"
    one.write_text("1 1\n")
    for overrides in (
        {"workload.flow_size_scale": 0.0001},
        {"workload.flow_sizes": str(one)},
    ):
        with pytest.raises(ScenarioError, match=f"flows .*; at most {MAX_FLOWS:,}"):
            scenarios.load("fct").with_overrides(overrides)
    r = qcn("run", "fct", "--backend", "sim", "--set", f'workload.flow_sizes="{one}"')
    assert_one_line_error(r, "at most 1,000,000")


def test_flow_sizes_fit_the_headers_field(tmp_path: Path) -> None:
    """A CDF reaching 1e11 bytes was accepted, and the BMv2 sender then died of
    struct.error; seed003's unbounded Pareto tail is cut at the field's largest value."""
    big = tmp_path / "big.cdf"
    big.write_text("1 0\n1e5 0.99\n1e11 1\n")
    with pytest.raises(ScenarioError, match=f"larger than the {FLOW_SIZE_MAX} bytes"):
        scenarios.load("fct").with_overrides({"workload.flow_sizes": str(big)})
    mix = Seed003Mix(0.5)
    assert mix.fraction_above(0) == 1.0
    assert mix.fraction_above(mix.data_min_bytes * 2) == pytest.approx(0.5 * 0.25)
    huge = EmpiricalCdf("huge", ((1e12, 1.0),))
    arrivals = draw_arrivals(huge, sources=1, load=1, rate_bps=8e12, until_s=50, seed=1)
    assert arrivals
    assert {a.size_bytes for a in arrivals} == {FLOW_SIZE_MAX}


@pytest.mark.parametrize(
    ("flow", "message"),
    [
        ((1, math.nan, 10), "start_s must be a finite time"),
        ((1, -1.0, 10), "start_s must be a finite time"),
        ((1, 0.0, 0), "size_bytes must be in"),
        ((1, 0.0, FLOW_SIZE_MAX + 1), "size_bytes must be in"),
        ((-1, 0.0, 10), "flow id -1"),
        ((1 << 32, 0.0, 10), "flow id"),
    ],
)
def test_a_flows_fields_are_checked(flow: tuple[int, float, int], message: str) -> None:
    with pytest.raises(FlowFieldError, match=message):
        check_host_flow(*flow)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"frame_bytes": 58}, "--frame-bytes must be in [64, 9216]"),
        ({"rto_s": 0.0}, "--rto must be in"),
        ({"rto_s": math.nan}, "--rto must be in"),
        ({"rto_s": -1.0}, "--rto must be in"),
        ({"port": 0}, "--port must be in [1, 65535]"),
        ({"port": 70000}, "--port must be in"),
        ({"interval_s": 0.0}, "--interval must be in"),
        ({"interval_s": -1.0}, "--interval must be in"),
    ],
)
def test_transport_settings_are_checked(setting: dict[str, float], message: str) -> None:
    with pytest.raises(FlowFieldError, match=re.escape(message)):
        check_transport(**setting)  # type: ignore[arg-type]


def tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip


def assert_tool_error(r: subprocess.CompletedProcess[str], who: str, *expected: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"{who}: error: "), r.stderr
    for text in expected:
        assert text in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("rows", "args", "expected"),
    [
        ("flow,start_s,size_bytes\n1,0.5,x\n", (), ("flows.csv:2", "a whole size")),
        ("flow,start_s,size_bytes\n1,nan,10\n", (), ("flows.csv:2", "must be a finite time")),
        ("flow,start_s,size_bytes\n1,0,99999999999\n", (), ("size_bytes must be in",)),
        ("flow,start\n1,0\n", (), ("no column start_s, size_bytes",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--dst", "not.an.ip"), ("not.an.ip",)),
        ("flow,start_s,size_bytes,dst\n1,0,1,10.0.0.300\n", (), ("flows.csv:2", "not an IPv4")),
        ("flow,start_s,size_bytes,dst\n1,0,1,\n", ("--dst", ""), ("no dst column and no --dst",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--port", "-1"), ("--port must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--port", "70000"), ("--port must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--port", "0"), ("--port must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--frame-bytes", "58"), ("--frame-bytes",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--rto", "0"), ("--rto must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--rto", "nan"), ("--rto must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--rto", "-1"), ("--rto must be in",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--origin", "nan"), ("--origin",)),
        ("flow,start_s,size_bytes\n1,0,1\n", ("--log", "{d}/no/such/log"), ("no/such/log",)),
        (None, (), ("flows.csv", "cannot read the flows")),
        ("DIR", (), ("flows.csv", "cannot read the flows")),
    ],
)
def test_the_flow_senders_mistakes_are_one_line(
    tmp_path: Path, rows: str | None, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    """Every one used to be a traceback or, worse, accepted (an --rto of 0 sent one flow's
    frames 2,308 times; a NaN start kept the sender waiting for ever)."""
    table = tmp_path / "flows.csv"
    if rows == "DIR":
        table.mkdir()
    elif rows is not None:
        table.write_text(rows)
    argv = [str(table), "--dst", "127.0.0.1", "--log", str(tmp_path / "log.jsonl")]
    argv += [a.format(d=tmp_path) for a in args]
    assert_tool_error(tool("qcn.reaction_point.flow_sender", *argv), "flow sender", *expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--port", "0"), ("--port must be in",)),
        (("--port", "70000"), ("--port must be in",)),
        (("--interval", "0"), ("--interval must be in",)),
        (("--interval", "-1"), ("--interval must be in",)),
        (("--frame-bytes", "58"), ("--frame-bytes must be in",)),
        (("--log", "{d}/no/such/log"), ("no/such/log", "No such file or directory")),
    ],
)
def test_the_flow_receivers_mistakes_are_one_line(
    tmp_path: Path, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    argv = ["--log", str(tmp_path / "log.jsonl"), *(a.format(d=tmp_path) for a in args)]
    assert_tool_error(tool("qcn.topologies.flow_receiver", *argv), "flow receiver", *expected)


def test_the_flow_receivers_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("0.0.0.0", 0))
        port = str(taken.getsockname()[1])
        r = tool("qcn.topologies.flow_receiver", "--port", port, "--log", str(tmp_path / "l"))
    assert_tool_error(r, "flow receiver", f"cannot listen on frames port {port}", "in use")


def test_the_slowdown_plot_names_the_network_the_run_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """leaf-spine-fct on a triangle's file: its plot said "on a leaf-spine" (the scenario's
    title), not the triangle it ran on."""
    import qcn.core.results  # noqa: PLC0415
    from qcn.cli import main as cli  # noqa: PLC0415

    titles: list[str] = []
    real = plot_slowdown

    def recorded(path: Path, title: str, curves: dict[str, dict[str, Any]]) -> Path:
        titles.append(title)
        return real(path, title, curves)

    monkeypatch.setattr(qcn.core.results, "plot_slowdown", recorded)
    triangle = Path(__file__).resolve().parent / "data" / "triangle.json"
    code = cli.main(
        ["run", "leaf-spine-fct", "--backend", "sim", "--quiet", "--duration", "0.01",
         "--out", str(tmp_path / "run"), "--set", f'network.topology="{triangle}"',
         "--set", "workload.rto_s=1.0"]
    )  # fmt: skip
    assert code == 0
    assert titles == ["leaf-spine-fct: slowdown by flow size, on triangle (3 switches, 4 hosts)"]
    assert (tmp_path / "run" / "slowdown.png").stat().st_size > 0


def test_unfinished_flows_are_counted_where_the_slowdown_is_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """leaf-spine-fct on issue 63's file with a 3 s timeout: 126 of 334 flows did not finish,
    and the slowdown line and plot, which cover the finished ones only, did not say so; its
    flows.csv named no host."""
    from qcn.cli import main as cli  # noqa: PLC0415
    from qcn.core.flows import slowdown_figure  # noqa: PLC0415
    from qcn.core.results import pyplot  # noqa: PLC0415

    ecn = Path(__file__).resolve().parent / "data" / "ecn-topo.json"
    out = tmp_path / "run"
    code = cli.main(
        ["run", "leaf-spine-fct", "--backend", "sim", "--quiet", "--out", str(out),
         "--set", f'network.topology="{ecn}"', "--set", "workload.rto_s=3.0"]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    flows = summary["flows"]
    with (out / "flows.csv").open() as f:
        rows = list(csv.DictReader(f))
    unfinished = [r for r in rows if r["finished"] == "0"]
    assert flows["unfinished"] == summary["flows_unfinished"] == len(unfinished) > 50
    short = flows["short_flow_bytes"]
    short_left = sum(int(r["size_bytes"]) < short for r in unfinished)
    assert flows["slowdown_short"]["unfinished"] == short_left > 0
    assert flows["slowdown_long"]["unfinished"] == len(unfinished) - short_left > 0
    assert flows["slowdown_all"]["unfinished"] == len(unfinished)
    # The line says what its slowdowns leave out, and how many of each size.
    s, lg = flows["slowdown_short"], flows["slowdown_long"]
    assert (
        f"  flows: {flows['started']} started, {flows['finished']} finished, "
        f"{len(unfinished)} unfinished; slowdown p50/p99 of the finished flows only: short "
        f"{s['p50']:.2f}/{s['p99']:.2f} ({s['flows']} flows, {short_left} more unfinished), "
        f"long {lg['p50']:.2f}/{lg['p99']:.2f} ({lg['flows']} flows, "
        f"{len(unfinished) - short_left} more unfinished)"
    ) in capsys.readouterr().out.splitlines()
    # So does the plot, under its title.
    plt = pyplot()
    fig = slowdown_figure(plt, "t", {"QCN": flows})
    assert fig.axes[0].get_title().splitlines() == [
        "t",
        f"{len(unfinished)} of {flows['started']} flows did not finish: the slowdown is the "
        f"{flows['finished']} finished flows'",
    ]
    plt.close(fig)
    # Every flow names its sender and its receiver.
    sc = scenarios.load("leaf-spine-fct").with_overrides(
        {"network.topology": str(ecn), "workload.rto_s": 3.0}
    )
    for r in rows:
        src = sc.sources[int(r["source"])]
        assert (r["sender"], r["receiver"]) == (src.host, src.destinations[int(r["destination"])])
    assert {r["sender"] for r in rows} == {"h1", "h11", "h2", "h22", "h3"}
