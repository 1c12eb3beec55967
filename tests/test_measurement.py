"""The Mininet backend's measurement loop (topologies/measurement.py), driven by a stand-in
for the switch's Thrift client: the loop's own logic (schedule, samples, hooks, progress);
the loop on a real switch runs in tests/test_mininet_bmv2.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from qcn.core import scenario as scenarios
from qcn.core.topology import PortRef
from qcn.topologies import measurement
from qcn.topologies.measurement import Hooks, measure, rate_pps


def test_rates_are_frames_per_second_of_the_scenarios_frames() -> None:
    sc = scenarios.load("transient")  # 1500-byte frames
    assert rate_pps(sc, 12e6) == 1000
    assert rate_pps(sc, 100e6) == 8333
    assert rate_pps(sc, 1.0) == 1  # never a stopped queue


class FakeThrift:
    def __init__(self) -> None:
        self.rates: list[tuple[int, int]] = []
        self.reads = 0

    def set_queue_rate(self, pps: int, port: int) -> None:
        self.rates.append((pps, port))

    def ask_occupancies(self) -> None:
        self.reads += 1

    def asked_occupancies(self, ports: list[int]) -> list[tuple[int, int]]:
        assert ports == [11, 4]  # the bottleneck (transient's sink port) and another
        return [(self.reads % 7, 1500 * (self.reads % 7)), (2 * (self.reads % 7), 0)]


def test_the_loop_applies_the_schedule_and_samples_until_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(measurement, "SOURCE_START_DELAY_S", 0.0)
    sc = scenarios.load("transient").with_overrides(
        {"duration_s": 0.3, "schedule": [{"at_s": 0.1, "bottleneck_rate_bps": 12e6}]}
    )
    thrift = FakeThrift()
    started: list[float] = []
    samples: list[float | None] = []
    lines: list[str] = []
    hooks = Hooks(
        start_traffic=started.append,
        on_sample=lambda elapsed, _t: samples.append(elapsed),
        progress_detail=lambda depth: f"depth {depth}",
        check=lambda: None,
    )
    ports = [PortRef("s1", 11), PortRef("s1", 4)]
    rec = measure(
        sc, thrifts={"s1": thrift}, ports=ports, interval_s=0.01, hooks=hooks,
        progress=lines.append,
    )  # fmt: skip
    assert started == [rec.start]
    assert thrift.rates == [(1000, 11)]  # the schedule's change, once, on the bottleneck
    assert [q for _, q in rec.ports["s1:4"]] == [2 * q for _, q in rec.queue]
    assert [bps for _, bps in rec.capacity] == [10e9, 12e6]
    assert any("bottleneck -> 12 Mb/s" in line for line in lines)
    assert 20 <= len(rec.queue) <= 31  # every 10 ms for 0.3 s (fewer on a busy machine)
    assert [q for _, q in rec.queue] == [i % 7 for i in range(1, len(rec.queue) + 1)]
    times = [t for t, _ in rec.queue]
    assert times == sorted(times)
    assert samples[-1] is None  # the last one, after the drain
    assert all(s is not None and 0 <= s < 0.3 for s in samples[:-1])


def test_a_switch_that_stops_answering_is_one_error_naming_it() -> None:
    """A switch killed mid-run (another run once took it for a leftover) ended the run in a
    Thrift traceback; it is now an ExperimentError naming the switch and the time."""
    from thrift.transport.TTransport import TTransportException  # noqa: PLC0415

    from qcn.topologies.errors import ExperimentError  # noqa: PLC0415

    class DeadThrift(FakeThrift):
        def asked_occupancies(self, _ports: list[int]) -> list[tuple[int, int]]:
            raise TTransportException(TTransportException.END_OF_FILE, "TSocket read 0 bytes")

    live = measurement.read_depths({"s1": FakeThrift()}, {"s1": [11, 4]}, 3.0)
    assert set(live) == {PortRef("s1", 11), PortRef("s1", 4)}
    with pytest.raises(ExperimentError) as e:
        measurement.read_depths(
            {"s1": FakeThrift(), "s2": DeadThrift()}, {"s1": [11, 4], "s2": [3]}, 31.2
        )
    assert str(e.value) == (
        "switch s2 stopped answering at t=31.2 s (it crashed or was killed; its log is "
        "s2.log in the results)"
    )


def test_the_progress_line_shows_the_deepest_cp_port_where_nothing_names_a_bottleneck() -> None:
    """On a file's network the scenario's bottleneck is only its first CP port: the progress
    line showed that port's queue (empty) while another filled (a pod with incast)."""
    from qcn.topologies.measurement import progress_port  # noqa: PLC0415

    pod = Path(__file__).resolve().parent / "data" / "pod-topo.json"
    sc = scenarios.load("long-lived").with_overrides(
        {"network.topology": str(pod), "workload.traffic": "incast"}
    )
    first, sink = PortRef("s1", 4), PortRef("s2", 2)
    assert list(sc.topology.cp_ports) == [first, sink]
    assert progress_port(sc, {first: 0, sink: 22}) == sink
    assert progress_port(sc, {first: 3, sink: 1}) == first
    # A schedule names its port: the progress line follows it whatever the others hold.
    transient = scenarios.load("transient")
    assert progress_port(transient, {transient.bottleneck_port: 0}) == transient.bottleneck_port


def test_the_bottleneck_capacity_is_its_own_links_and_utilization_is_taken_against_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 63's file on BMv2: the headline port s1:3 runs at the file's 0.5 Mb/s, but the
    loop recorded network.bottleneck_rate_bps scaled (the hosts' 10 Mb/s), so a run that
    filled the port had utilization 0.059 (the simulator: 0.99)."""
    from qcn.core.results import summarize  # noqa: PLC0415
    from qcn.topologies.traces import sink_trace  # noqa: PLC0415

    monkeypatch.setattr(measurement, "SOURCE_START_DELAY_S", 0.0)
    ecn = Path(__file__).resolve().parent / "data" / "ecn-topo.json"
    incast = {"network.topology": str(ecn), "workload.traffic": "incast",
              "workload.incast_sink": "h2"}  # fmt: skip
    sc = (
        scenarios.load("long-lived")
        .with_overrides(incast)
        .scaled_for_bmv2()
        .with_overrides({"duration_s": 0.3})
    )
    slow = sc.bottleneck_port
    assert str(slow) == "s1:3"

    class Full:
        def ask_occupancies(self) -> None:
            pass

        def asked_occupancies(self, ports: list[int]) -> list[tuple[int, int]]:
            return [(100, 150_000)] * len(ports)

    hooks = Hooks(start_traffic=lambda _t: None, on_sample=lambda _e, _t: None,
                  progress_detail=lambda _d: "", check=lambda: None)  # fmt: skip
    rec = measure(sc, thrifts={"s1": Full()}, ports=[slow], interval_s=0.01, hooks=hooks,
                  progress=lambda _line: None)  # fmt: skip
    assert [bps for _, bps in rec.capacity] == [0.5e6]  # the port's own, as the file says
    # h2's sink heard h1 and h11 (behind s1:3) at 0.25 Mb/s each, h22 and h3 at 4 Mb/s.
    rates = {"10.0.1.1": 0.25e6, "10.0.1.11": 0.25e6, "10.0.2.22": 4e6, "10.0.3.3": 4e6}
    rec.sinks = {
        "h2": [
            (
                rec.start + k * 0.005,
                {ip: [0, round(bps / 8 * k * 0.005), 0] for ip, bps in rates.items()},
            )
            for k in range(1, 80)
        ]
    }
    ips = [sc.topology.host_by_name[s.host].address for s in sc.sources]
    behind_it = [slow in sc.topology.path(s.host, "h2") for s in sc.sources]
    tr = sink_trace(sc, rec, 0.01, qcn=True, source_ips=ips, at_bottleneck=behind_it)
    summary = summarize(sc, tr, qcn=True, backend="mininet", seed=1)
    assert summary["headline_port"] == "s1:3"
    assert summary["utilization"] == pytest.approx(1.0, abs=0.05)
