"""The simulator over any topology: every generator and file format runs, frames are
conserved, CPs on one path act on their own (two-point) or through one Fb tag
(three-point), PAUSE works hop by hop, and flows with PAUSE time out held frames."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.cp_model import CpPortConfig, FbTag
from qcn.core.flows import ideal_fct_s
from qcn.core.params import CpParams, CpSignal
from qcn.core.results import summarize, write_csvs
from qcn.core.scenario import Scenario
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.simulator.engine import CNM, CNP, FRESH_TAG, Frame, Route, Simulation

STREAMS = {"workload.max_rate_bps": 10e9, "schedule": []}
"""The transient's sources at line rate, no schedule: every topology congests at once."""


def network(
    topology: str, overrides: dict[str, Any] | None = None, duration: float = 0.005
) -> Scenario:
    return scenarios.load("transient").with_overrides(
        {"duration_s": duration, "network.topology": topology, **STREAMS, **(overrides or {})}
    )


def delivered_frames(sim: Simulation, tr: Trace) -> int:
    """Frames of the stream sources that reached their destination (each one frame_bytes
    long): the sampled windows and what the last, unsampled one holds."""
    dt = sim.sample_interval_s
    sampled = sum(round(bps * dt / 8) for row in tr.source_delivered_bps for bps in row)
    return (sampled + sum(s.delivered_window_bytes for s in sim.sources)) // sim.frame_bytes


def held_frames(sim: Simulation) -> int:
    return sum(len(p.queue) + len(p.pipe) for p in sim.ports)


def run_and_check(sc: Scenario, **kwargs: Any) -> tuple[Simulation, Trace]:
    """Run ``sc``; every frame sent was delivered, dropped, or is still in the network."""
    sim = Simulation(sc, seed=2, **kwargs)
    tr = sim.run()
    assert tr.frames_in > 0
    assert delivered_frames(sim, tr) > 0
    assert tr.frames_in == delivered_frames(sim, tr) + tr.drops + held_frames(sim)
    assert tr.drops == sum(p.drops for p in sim.ports)
    assert tr.cnms == sum(p.cnms for p in sim.ports)
    return sim, tr


CHAIN_TOML = """
bottleneck = "s2:2"
traffic = [["h1", "h3"], ["h2", "h3"]]
[defaults]
rate_bps = 10e9
delay_s = 1e-6
buffer_pkts = 100
[[switch]]
name = "s1"
[[switch]]
name = "s2"
[[host]]
name = "h1"
[[host]]
name = "h2"
[[host]]
name = "h3"
[[link]]
a = "h1"
b = "s1"
[[link]]
a = "h2"
b = "s1"
[[link]]
a = "s1"
b = "s2"
[[link]]
a = "s2"
b = "h3"
rate_bps = 1e9
"""
"""Two switches in a row: h1 and h2 on s1 send to h3 on s2, whose 1 Gb/s link is the
bottleneck (s2:2); s1's 10 Gb/s uplink (s1:3) congests too (two 10 Gb/s inputs)."""

TUTORIALS_JSON = {
    "hosts": {
        "h1": {
            "ip": "10.0.1.1/24",
            "mac": "08:00:00:00:01:11",
            "commands": ["route add default gw 10.0.1.10 dev eth0"],
        },
        "h2": {"ip": "10.0.2.2/24", "mac": "08:00:00:00:02:22"},
        "h3": {"ip": "10.0.3.3/24", "mac": "08:00:00:00:03:33"},
    },
    "switches": {"s1": {}, "s2": {}, "s3": {}},
    "links": [
        ["h1", "s1-p1"],
        ["h2", "s2-p1"],
        ["s1-p2", "s2-p2", "0.1ms", 10],
        ["s1-p3", "s3-p2", 0, 10],
        ["s3-p3", "s2-p3"],
        ["h3", "s3-p1", "0.2ms", 10],
    ],
}
"""p4lang/tutorials' triangle (basic's pod topology, shortened): a loop, links with and
without latency (0: frames go on at once), with the tutorials' 10 Mb/s and without a
bandwidth (the scenario's line rate)."""


@pytest.mark.parametrize(
    ("topology", "overrides"),
    [
        ("single", {}),
        ("multihop", {"network.sources": 3, "network.innocent_sources": 2}),
        ("parking-lot:3", {}),
        (
            "leaf-spine:2,2,2",
            {"workload.traffic": "permutation", "network.fabric_rate_bps": 5e9},
        ),
        ("leaf-spine:2,2,2", {"workload.traffic": "incast"}),
        ("fat-tree:4", {"workload.traffic": "permutation"}),
    ],
)
def test_every_generator_runs_on_the_simulator(topology: str, overrides: dict[str, Any]) -> None:
    sc = network(topology, overrides)
    _, tr = run_and_check(sc)
    assert set(tr.port_queue_pkts) >= {str(r) for r in sc.topology.cp_ports}
    assert tr.queue_pkts == tr.port_queue_pkts[str(sc.bottleneck_port)]
    assert len(tr.source_delivered_bps) == len(tr.times_s)
    assert all(len(row) == len(sc.sources) for row in tr.source_delivered_bps)
    if len(sc.topology.cp_ports) > 1:
        summary = summarize(sc, tr, qcn=True, backend="sim", seed=2)
        assert set(summary["ports"]) >= set(tr.port_queue_pkts)
        assert [s["sender"] for s in summary["sources"]] == [s.host for s in sc.sources]


def test_flows_run_over_a_leaf_spine_with_their_hops(tmp_path: Path) -> None:
    sc = scenarios.load("fct").with_overrides(
        {
            "duration_s": 0.01,
            "network.topology": "leaf-spine:2,2,2",
            "workload.traffic": "all-to-all",
            "workload.drain_fraction": 0.5,
        }
    )
    tr = Simulation(sc, seed=1).run()
    assert {f.hops for f in tr.flows} == {1, 3}  # same leaf, or up to a spine and down
    for f in tr.flows:
        topo, src = sc.topology, sc.sources[f.source]
        assert f.hops == topo.hops(src.host, src.destinations[f.destination])
    assert sum(f.finished for f in tr.flows) > 0.9 * len(tr.flows)
    summary = summarize(sc, tr, qcn=True, backend="sim", seed=1)
    assert set(summary["flows"]["bins_by_hops"]) == {"1", "3"}
    # No one port's capacity and offered load describe a network of several CPs.
    assert len(sc.topology.cp_ports) > 1
    assert summary["phases"] == []
    write_csvs(tmp_path, sc, tr)
    header = (tmp_path / "flows.csv").read_text().splitlines()[0]
    assert header.endswith(",finished,hops")
    assert (tmp_path / "ports.csv").read_text().startswith("time_s,port,queue_pkts")
    assert "delivered_bps" in (tmp_path / "sources.csv").read_text().splitlines()[0]


def test_a_flows_ideal_fct_takes_its_own_path() -> None:
    """The slowest link and the one-way delay (first switch to destination) of its path."""
    sc = scenarios.load("fct").with_overrides(
        {"network.topology": "leaf-spine:2,2,2", "workload.traffic": "all-to-all"}
    )
    sim = Simulation(sc)
    topo = sc.topology
    # Only the pairs its flows join are routed.
    assert {key[:2] for s in sim.sources for key in s.routes if isinstance(key, tuple)} == {
        (a.source, a.destination) for a in sim.arrivals
    }
    for s, host in zip(sim.sources, sc.sources, strict=True):
        for key, route in s.routes.items():
            assert isinstance(key, tuple)
            dst = host.destinations[key[1]]
            assert route.last + 1 == topo.hops(host.host, dst)
            wire = topo.one_way_delay_s(host.host, dst) - topo.access_link(host.host).delay_s
            assert route.one_way_s == pytest.approx(wire)
            assert route.ideal_rate_bps == sc.network.line_rate_bps


def test_a_topology_file_and_a_tutorials_json_run(tmp_path: Path) -> None:
    chain = tmp_path / "chain.toml"
    chain.write_text(CHAIN_TOML)
    sc = network(str(chain))
    assert [str(r) for r in sc.topology.cp_ports] == ["s1:3", "s2:2"]
    _, tr = run_and_check(sc)
    assert tr.capacity_bps[-1] == 1e9
    triangle = tmp_path / "triangle.json"
    triangle.write_text(json.dumps(TUTORIALS_JSON))
    sc = network(str(triangle), {"workload.traffic": "incast"}, duration=0.05)
    sim, tr = run_and_check(sc)
    # h1's and h2's links give no bandwidth: the scenario's line rate, so h1 congests the
    # file's 10 Mb/s link on its way (s1:3), and both h3's own (s3:1).
    assert [s.line_rate_bps for s in sim.sources] == [sc.network.line_rate_bps] * 2
    assert sorted(str(r) for r in sc.topology.cp_ports) == ["s1:3", "s3:1"]
    assert sc.topology.link_at(PortRef("s3", 1)).rate_bps == 10e6


def test_cnm_delays_follow_the_path() -> None:
    """A CNM from the k-th switch takes twice the source's link and the links from its
    first switch to that switch: the wire's round trip, less the way the frame came."""
    sc = network("parking-lot:3", {"network.rtt_s": 40e-6})
    sim = Simulation(sc)
    route = sim.sources[0].routes[0]  # the long flow: s1, s2, s3, s4
    assert route.cnm_delay_s == pytest.approx((40e-6, 60e-6, 80e-6, 100e-6))
    assert route.one_way_s == pytest.approx(4 * 20e-6)


def lowest(lo: int, _hi: int) -> int:
    """A draw below every threshold: always sampled, always reflected."""
    return lo


def highest(_lo: int, hi: int) -> int:
    """A draw above every threshold: never reflected."""
    return hi


def force_samples(route: Route) -> None:
    """Every frame the route's CPs see is sampled; no port reflects anything."""
    for port in route.ports:
        if port.cp is not None:
            port.cp._rand = lowest
        port.reflect_rand = highest


def frame_at(route: Route, hop: int, tag: FbTag = FRESH_TAG) -> Frame:
    return (0, 0, 1500, None, 0, route, hop, tag, False)


@pytest.mark.parametrize("worse_first", [False, True])
def test_three_point_the_frame_carries_the_worst_fb_of_its_path(worse_first: bool) -> None:
    sc = network(
        "parking-lot:2",
        {
            "qcn.cp.three_point": True,
            "qcn.cp.queue_unit": "packets",
            "qcn.cp.reflect_p_base": 0.0,
            "qcn.cp.reflect_p_scale": 1 / 63,
        },
    )
    sim = Simulation(sc)
    route = sim.sources[0].routes[0]
    first, second, end = route.ports
    assert first.cp is not None
    assert second.cp is not None
    assert end.cp is None
    force_samples(route)
    mild, severe = 30, 60  # q_eq is 22 packets: both congested, one more
    tag = sim._three_point_cp(first, first.cp, severe if worse_first else mild, frame_at(route, 0))
    after_first = tag.qntz_fb
    tag = sim._three_point_cp(
        second, second.cp, mild if worse_first else severe, frame_at(route, 1, tag)
    )
    worse = first if worse_first else second
    assert tag.qntz_fb == max(after_first, tag.qntz_fb) > 0
    assert tag.cpid == worse.index  # the worse CP wrote it, the other left it
    assert not tag.reflected  # the CPs reflected nothing
    assert sim.trace.cnms == 0
    # The end reflection point (the last port, no CP) reflects it: one CNM, the worst Fb,
    # from the end of the path.
    end.reflect_rand = lowest
    sim._end_reflection(end, 0, route.cnm_delay_s[-1], tag)
    cnms = [e for e in sim._heap if e[1] == CNM]
    assert [(e[0], e[4]) for e in cnms] == [(route.cnm_delay_s[-1], tag.qntz_fb)]
    assert sim.trace.extra["fb_reflections"] == 1
    assert end.fb_reflections == 1


def test_two_point_each_cp_on_the_path_sends_its_own_cnm() -> None:
    sc = network("parking-lot:2", {"qcn.cp.queue_unit": "packets"})
    sim = Simulation(sc)
    route = sim.sources[0].routes[0]
    force_samples(route)
    for hop in (0, 1):
        port = route.ports[hop]
        port.queue.extend([frame_at(route, hop)] * 40)  # q = 40 > q_eq: Fb < 0
        port.sending = True  # (as if: no departure is scheduled here)
        sim._arrive(port, frame_at(route, hop))
    cnms = sorted((e[0], e[2]) for e in sim._heap if e[1] == CNM)
    assert cnms == [(route.cnm_delay_s[0], 0), (route.cnm_delay_s[1], 0)]
    assert [p.cnms for p in route.ports] == [1, 1, 0]


DCQCN = {"qcn_preset": "dcqcn"}


def test_dcqcn_a_port_marks_the_frames_it_admits_on_its_queue_in_bytes() -> None:
    """Below kmin no draw and no mark; on the ramp one draw (here always below the
    threshold); above kmax a mark without a draw; a frame the full buffer drops is not
    judged.  The queue is read in bytes (the deque is empty: in frames it would be 0)."""
    sim = Simulation(network("parking-lot:2", DCQCN))
    route = sim.sources[0].routes[0]
    port = route.ports[0]
    assert port.cp is not None
    cfg = port.cp.cfg
    draws: list[int] = []

    def lowest_counted(lo: int, _hi: int) -> int:
        draws.append(lo)
        return lo

    port.ecn_rand = lowest_counted
    port.sending = True  # (as if: no departure is scheduled here)
    marked = []
    for q_bytes in (cfg.kmin_bytes, (cfg.kmin_bytes + cfg.kmax_bytes) // 2, cfg.kmax_bytes + 1):
        port.queue.clear()
        port.queue_bytes = q_bytes
        sim._arrive(port, frame_at(route, 0))
        marked.append(port.queue[-1][8])
    assert marked == [False, True, True]
    assert len(draws) == 1
    assert port.marks == 2
    port.queue.extend([frame_at(route, 0)] * (port.buffer_pkts - len(port.queue)))
    port.queue_bytes = cfg.kmax_bytes + 1
    sim._arrive(port, frame_at(route, 0))  # dropped: the buffer is full
    assert (port.marks, port.drops, len(draws)) == (2, 1, 1)
    assert sim.trace.cnms == 0  # a marking port sends no CNM


def test_dcqcn_the_receiver_sends_a_limiter_one_cnp_per_interval_the_acks_way_back() -> None:
    """The first CE frame of a limiter always brings a CNP; another within cnp_interval_s
    of it does not.  The CNP reaches the sender when the frame's acknowledgement would:
    the CNM's way back from the last port, plus the receiver's link both ways."""
    sim = Simulation(network("parking-lot:2", {**DCQCN, "qcn.rp.dcqcn.cnp_interval_s": 50e-6}))
    source = sim.sources[0]
    route = source.routes[0]
    last = route.ports[-1]
    assert route.ack_after_depart_s == route.cnm_delay_s[-1] + 2 * last.delay_s
    for now in (1e-3, 1e-3 + 25e-6, 1e-3 + 51e-6, 1e-3 + 60e-6):
        sim.now = now
        sim._notify(source, last, route)
    cnps = sorted((e[0], e[2]) for e in sim._heap if e[1] == CNP)
    assert cnps == [
        (1e-3 + route.ack_after_depart_s, source.index),
        (1e-3 + 51e-6 + route.ack_after_depart_s, source.index),
    ]
    assert sim.cnps == 2


@pytest.mark.parametrize("interval_s", [0.0, 50e-6])
def test_dcqcn_runs_mark_notify_and_cut(interval_s: float) -> None:
    """A congested bottleneck with PAUSE (no frame lost): every CE frame that reached its
    receiver brought a CNP where the interval is 0, at most one per limiter per interval
    else; each CNP cut its source; the trace and the summary count both."""
    sc = network(
        "single",
        {
            **DCQCN,
            "network.pause": True,
            "workload.max_rate_bps": 0.85e9,
            "network.bottleneck_rate_bps": 2e9,
            "qcn.rp.dcqcn.cnp_interval_s": interval_s,
        },
        duration=0.02,
    )
    sim, tr = run_and_check(sc)
    marks, cnps = tr.extra["marks"], tr.extra["cnps"]
    assert tr.drops == 0
    assert tr.cnms == 0
    assert marks > 100
    assert tr.port_counts[sim.bottleneck.name]["marks"] == marks
    held_ce = sum(f[8] for p in sim.ports for f in (*p.queue, *p.pipe))
    if interval_s == 0:
        assert cnps == marks - held_ce
    else:
        assert 0 < cnps < marks - held_ce
        assert cnps <= len(sim.sources) * (sc.duration_s / interval_s + 1)
    cuts = [s.rules.cnms for s in sim.sources if s.rules is not None]
    assert len(cuts) == len(sim.sources)
    assert min(cuts) > 0
    assert sum(cuts) <= cnps  # (the last ones may still be on their way)
    summary = summarize(sc, tr, qcn=True, backend="sim", seed=2)
    assert (summary["marks"], summary["cnps"]) == (marks, cnps)


@pytest.mark.parametrize(
    ("topology", "overrides"),
    [
        ("multihop", {"network.sources": 3, "network.innocent_sources": 2}),
        ("parking-lot:3", {"network.pause": True}),
        ("leaf-spine:2,2,2", {"workload.traffic": "incast"}),
    ],
)
def test_dcqcn_runs_on_networks(topology: str, overrides: dict[str, Any]) -> None:
    """Every CP port marks, each its own; every frame is accounted for; each marking port's
    marks add up to the run's, and summary.json's ports show them."""
    sc = network(topology, {**DCQCN, **overrides})
    sim, tr = run_and_check(sc)
    marking = [p for p in sim.ports if p.ecn_rand is not None]
    assert {p.name for p in marking} == {str(r) for r in sc.topology.cp_ports}
    assert tr.extra["marks"] == sum(p.marks for p in marking) > 0
    assert tr.extra["cnps"] > 0
    assert tr.cnms == 0
    summary = summarize(sc, tr, qcn=True, backend="sim", seed=2)
    assert (summary["marks"], summary["cnps"]) == (tr.extra["marks"], tr.extra["cnps"])
    ports = summary.get("ports", {})  # (a network with more than one followed port)
    assert {name: ports[name]["marks"] for name in ports if "marks" in ports[name]} == (
        {p.name: p.marks for p in marking} if ports else {}
    )


def test_dcqcn_a_ports_signal_is_fixed_for_the_run() -> None:
    """The marking stream exists where a port marks from the start: a live change may move
    the marking curve, not turn marking on or off."""
    sim = Simulation(network("single", DCQCN))
    name = sim.bottleneck.name
    with pytest.raises(ValueError, match="whether a port marks ECN is fixed for the run"):
        sim.set_port_cp(name, CpPortConfig.from_params(CpParams()))
    ramp = CpPortConfig.from_params(CpParams(signal=CpSignal.ECN, kmax_bytes=100_000))
    sim.set_port_cp(name, ramp)
    assert sim.bottleneck.cp is not None
    assert sim.bottleneck.cp.cfg.kmax_bytes == 100_000


def test_pause_works_hop_by_hop_on_a_chain(tmp_path: Path) -> None:
    """Two 5 Gb/s sources through s1 and s2 into a 1 Gb/s link, no QCN: without PAUSE
    s2's port drops; with it s2's input from s1 pauses s1's uplink, whose queue then
    fills s1's inputs, which pause the sources: nothing is lost, and the bottleneck
    stays busy."""
    chain = tmp_path / "chain.toml"
    chain.write_text(CHAIN_TOML)
    base = {"workload.max_rate_bps": 5e9, "workload.pattern": "constant"}
    plain = Simulation(network(str(chain), base, duration=0.02), qcn=False).run()
    assert plain.port_counts["s2:2"]["drops"] > 0
    sc = network(str(chain), {**base, "network.pause": True}, duration=0.02)
    _, tr = run_and_check(sc, qcn=False)
    assert tr.drops == 0
    assert tr.extra["pauses_between_switches"] > 0
    assert tr.port_counts["s1:3"]["paused"] > 0  # s2 paused s1's uplink ...
    assert tr.extra["pauses_per_source_max"] > 0  # ... and s1 the sources
    assert max(tr.port_queue_pkts["s1:3"]) > 0.5 * sc.network.buffer_pkts  # held at s1
    assert min(tr.throughput_bps[5:]) > 0.95e9


def test_flows_with_pause_send_held_frames_again_and_count_each_frame_once() -> None:
    """A 1.5 Gb/s bottleneck with PAUSE: the ten inputs' partitions hold far more than
    the rto's worth, so frames time out while held and are sent again beside the lost
    ones; every finished flow got each of its frames once."""
    sc = scenarios.load("fct").with_overrides(
        {"duration_s": 0.03, "network.pause": True, "network.bottleneck_rate_bps": 1.5e9}
    )
    sim = Simulation(sc, seed=1, qcn=False)
    tr = sim.run()
    retransmitted = sum(f.retransmitted_frames for f in tr.flows)
    assert retransmitted > tr.drops  # held frames too, not only the lost ones
    assert any(f.finished for f in tr.flows)
    for f in tr.flows:
        assert f.finished == (f.flow_id not in sim.active)
        if f.finished:
            assert f.fct_s > 0
            assert not math.isnan(f.slowdown)


def test_the_single_bottlenecks_streams_keep_their_names() -> None:
    """The bottleneck port keeps the single bottleneck's random streams; others their own."""
    from qcn.simulator.engine import port_stream_names  # noqa: PLC0415

    sc = network("parking-lot:2")
    b = sc.bottleneck_port
    assert port_stream_names(7, b, b) == ("cp-7", "reflect-7")
    other = next(r for r in sc.topology.cp_ports if r != b)
    assert port_stream_names(7, other, b) == (f"cp-7-{other}", f"reflect-7-{other}")


def test_a_flows_ideal_is_the_same_on_both_backends() -> None:
    """The simulator's per-flow ideal completion (its routes) and the Mininet backend's
    (Scenario.flow_path, from the same topology) agree for every flow and hop count."""
    sc = scenarios.load("leaf-spine-fct").with_overrides({"duration_s": 0.01})
    trace = Simulation(sc, seed=1).run()
    arrivals = sc.draw_flows(1)
    assert trace.flows
    for record in trace.flows:
        a = arrivals[record.flow_id]
        path = sc.flow_path(record.flow_id, a)
        assert record.hops == path.hops
        assert record.ideal_fct_s == ideal_fct_s(
            a.size_bytes, sc.network.frame_bytes, path.rate_bps, path.one_way_s
        )


PEAK_OF_CHILD = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        # ~4,000 flows on 128 hosts; and the transient's 10,000 samples of 45 values.
        ("leaf-spine-fct", {"duration_s": 0.1, "network.topology": "leaf-spine:4,8,16"}),
        ("transient", {"duration_s": 10.0}),
    ],
)
def test_a_runs_memory_estimate_covers_what_it_holds(
    tmp_path: Path, name: str, overrides: dict[str, Any]
) -> None:
    """The estimate a run too large for the machine is refused by is above the peak a
    `qcn run` holds (plots included), and not so far above that it refuses runs that fit."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from qcn.simulator.engine import memory_estimate_bytes  # noqa: PLC0415

    sc = scenarios.load(name).with_overrides(overrides)
    sets = [a for k, v in overrides.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    run = [sys.executable, "-m", "qcn", "run", name, "--backend", "sim", *sets]
    got = subprocess.run(
        [sys.executable, "-c", PEAK_OF_CHILD, *run, "--out", str(tmp_path / "o"), "--quiet"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    peak = int(got.stdout) * 1024
    estimate = memory_estimate_bytes(sc, 1e-3)
    assert peak <= estimate <= 3 * peak
