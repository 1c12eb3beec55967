"""Experiment scenarios: one TOML file each in ``scenarios/``, shared by every backend.

A scenario is the seeds' single-bottleneck experiment shape: N sources, each behind its own
reaction point on a host link, all sending through one switch port (the congestion point)
whose service rate can change on a schedule::

    name = "transient"
    seed = "000"
    title = "..."
    duration_s = 6.0
    qcn_preset = "2-qcn"             # base parameter set (qcn.core.params.Preset)

    [qcn.cp]                         # overrides of qcn.core.params.CpParams
    [qcn.rp]                         # overrides of qcn.core.params.RpParams

    [network]
    sources = 10
    line_rate_bps = 10e9             # each host link (the RPs' line rate)
    bottleneck_rate_bps = 10e9       # the CP port's initial service rate
    rtt_s = 40e-6                    # source -> CP -> source
    buffer_pkts = 100                # the CP port's buffer
    frame_bytes = 1500
    topology = "single"              # a generator or a file (qcn.core.topology, below)
    fabric_rate_bps = 0.0            # leaf-spine: leaf-spine links (0: the line rate)
    innocent_sources = 0             # multihop: senders to the innocent sink
    innocent_rate_bps = 40e9         # multihop: the innocent sink port's service rate
    cp_ports = ""                    # "congestible", "all", "none" ("": the topology's)
    cp_on = []                       # ports that run a CP besides ("s1:3"), or not:
    cp_off = []
    pause = false                    # 802.3x PAUSE per input on watermarks (docs/pause.md)
    pause_hi_bytes = 130_000         # seed 001's watermarks
    pause_lo_bytes = 110_000

    [workload]
    pattern = "bernoulli"            # "bernoulli" | "constant" | "onoff" | "tcp" | "udp" | "flows"
    max_rate_bps = 0.85e9            # each source's offered load
    stagger_s = 0.0                  # source i starts at i * stagger_s
    onoff_sources = []               # sources that follow the on/off pattern
    mean_on_s = 0.020
    mean_off_s = 0.020
    hotspot_start_s = 0.0            # tcp, udp: the hot-spot flows' episode
    hotspot_duration_s = 0.0         # (0: the whole run)
    hotspot_period_s = 0.0           # > 0: the episode repeats with this period
    flow_sizes = "seed003"           # flows: "seed003", "web-search", "hadoop" or a CDF file
    load = 0.8                       # flows: of the bottleneck's rate, in flow bytes
    ipc_fraction = 0.5               # flows, seed003: the share of IPC flows
    flow_size_scale = 1.0            # flows: sizes are drawn, then multiplied by this
    drain_fraction = 0.0             # flows: no flow starts in this last part of the run
    rto_s = 1e-3                     # flows: a lost frame is sent again this long after
    transport = "frames"             # flows: "frames" (both backends) or "tcp" (BMv2 only)
    tcp_connections = "kept"         # tcp: "kept" for the next flow, or "per-flow"
    traffic = "topology"             # who sends to whom: "topology" (its own pairs),
                                     # "incast", "permutation", "all-to-all" (flows)
    incast_sink = ""                 # incast: the host all send to ("": the last)

A topology (docs/topology.md) is the network as data: ``single`` (N = network.sources
sources and a sink on one switch, the sink's link the bottleneck), ``multihop`` (seed 001,
below), ``parking-lot:H``, ``leaf-spine:S,L,H``, ``fat-tree:K``, ``hpcc-fat-tree``, or a
topology file (TOML, or p4lang/tutorials' topology.json; a relative path starts at the
scenario file's folder).
A generator's host links run at line_rate_bps, as a file's links that give no rate (a
file's own rates are taken as they are, never scaled for BMv2); a generator's bottleneck
(the sink's link, the parking lot's hops) at bottleneck_rate_bps; every link's one-way
delay is rtt_s / 2, so a source's loop through its first switch is rtt_s; every switch
port's buffer is buffer_pkts.  Sources are the traffic's source hosts, in order.

The multihop topology is seed 001's output-generated hot spot two hops away: the sources
(hot-spot senders) and the innocent senders share switch s1 and the s1 -> s2 link; on s2
the hot-spot sink's port is the bottleneck (the CP), the innocent sink has its own port.
The "tcp" workload runs real TCP (iperf3, NewReno) through the reaction points' kernel
limiters, so it needs the Mininet backend; "udp" runs iperf3's UDP at the senders' rate
through them instead (seed 001's QCN + PAUSE).  Both go with the multihop topology only.
The "flows" workload is seed 003's dynamic one: flows that finish, measured by their
completion time and slowdown (qcn.core.flows, docs/fct.md).

    [[schedule]]                     # bottleneck service rate changes
    at_s = 2.0
    bottleneck_rate_bps = 0.5e9

    [bmv2]                           # how the run is scaled for BMv2 (see Bmv2Scale)
    rate_scale = 1e-3                # 10 Gb/s -> 10 Mb/s
    time_scale = 10                  # 6 s -> 60 s
    [bmv2.set]                       # then these overrides, as with `qcn run --set`
    "qcn.cp.p_base" = 0.1

Validation names the file and the field.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Collection
from dataclasses import MISSING, dataclass, field, fields, replace
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any, Literal, get_args

from qcn.core import patterns as traffic_patterns
from qcn.core.ecmp import ECMP_MODES, SOURCE_PORT, EcmpMode, flow_port
from qcn.core.errors import QcnError
from qcn.core.flows import (
    FLOW_SIZE_MAX,
    FRAME_BYTES_MAX,
    FRAME_BYTES_MIN,
    MAX_CUT_FRACTION,
    MAX_FLOWS,
    TCP_CONNECTIONS,
    TRANSPORTS,
    FlowArrival,
    FlowPath,
    FlowSizeError,
    draw_arrivals,
    draw_destinations,
    expected_flows,
    size_distribution,
)
from qcn.core.params import (
    PORT_CP_FIELDS,
    CpParams,
    ParamError,
    QcnParams,
    RpParams,
    port_cp_values,
    scheme_def,
    scheme_names,
)
from qcn.core.patterns import Kind, TrafficPattern
from qcn.core.tomlfile import read_toml
from qcn.core.topology import (
    CP_MODES,
    MAX_BUFFER_PKTS,
    TRAFFIC,
    LinkDefaults,
    PortRef,
    Topology,
    TopologyError,
    Traffic,
    is_generator_spec,
)
from qcn.core.topology import load as load_topology
from qcn.core.units import (
    UNIT,
    Unit,
    numeric_fields,
    plain,
    rate,
    scaled_fields,
    seconds,
    size,
    unit_of,
    volume,
)

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
PortService = Literal["bytes", "bmv2"]
SOURCE_TOPOLOGIES = ("single", "multihop")
"""The generators a scenario's ``network.sources`` (and ``innocent_sources``) size; every
other topology's sources are its traffic's."""


class ScenarioError(QcnError, ValueError):
    """An invalid or unknown scenario; the message names the file and the field."""


@dataclass(frozen=True)
class Network:
    sources: int = plain(10)
    line_rate_bps: float = rate(10e9)
    bottleneck_rate_bps: float = rate(10e9)
    rtt_s: float = seconds(40e-6)
    buffer_pkts: int = size(100)
    frame_bytes: int = size(1500)
    topology: str = "single"
    """A generator (``single``, ``multihop``, ``parking-lot:H``, ``leaf-spine:S,L,H``,
    ``fat-tree:K``, ``hpcc-fat-tree``) or a topology file (qcn.core.topology)."""
    fabric_rate_bps: float = rate(0.0)
    """leaf-spine: the leaf-spine links; the fat-trees: every link between switches (0: line
    rate); multihop: the s1-s2 link (0: the faster of the line and innocent rates)."""
    innocent_sources: int = plain(0)
    innocent_rate_bps: float = rate(40e9)
    cp_ports: str = ""
    """Which egress ports run a CP: "congestible", "all", "none"; "": the topology's own
    choice (every port that can congest; seed 001's hot spot alone for multihop)."""
    cp_on: tuple[str, ...] = ()
    """Ports ("s1:3") that run a CP besides."""
    cp_off: tuple[str, ...] = ()
    """Ports that do not."""
    file_rate_scale: float = plain(1.0)
    """The rates a topology file gives its links are multiplied by this (1: as the file
    says).  BMv2's scaling leaves it: a file's rates are the network's own, scaled once
    by whoever wrote them (a link without a rate takes ``line_rate_bps``, which scales)."""
    file_time_scale: float = plain(1.0)
    """The delays a topology file gives its links are multiplied by this (1: as it says)."""
    port_service: PortService = "bytes"
    """How a port serves its frames: "bytes", as an Ethernet port (each frame on the wire for
    its own length at the port's rate, then the next); "bmv2", as BMv2's queues, shaped in
    frames per second: a frame leaves at the later of its arrival and the previous
    departure plus a full frame's time, whatever its length, and a port BMv2 does not shape
    passes frames on at once.  Scaling for BMv2 sets "bmv2" (docs/fct.md, "BMv2's drops")."""
    ecmp: EcmpMode = "per-destination"
    """Where a destination has equal-cost paths: "per-destination", each destination takes
    one and equal-cost paths carry destinations in turn; "per-flow", each flow takes the
    one its 5-tuple's hash chooses, the same on both backends (qcn.core.ecmp)."""
    pause: bool = False
    """802.3x PAUSE hop by hop, as seed 001's switch: memory partitioned per input port
    (each input may hold its link's ``buffer_pkts`` frames in the switch; no output queue
    limit), an input above ``pause_hi_bytes`` pauses its upstream sender (a source or a
    switch port), below ``pause_lo_bytes`` resumes it (simulator: docs/topology.md)."""
    pause_hi_bytes: int = size(130_000)
    pause_lo_bytes: int = size(110_000)


@dataclass(frozen=True)
class Workload:
    pattern: str = "bernoulli"
    """Its traffic: one of the patterns qcn.core.patterns declares (its kind, and what
    generates it)."""
    max_rate_bps: float = rate(10e9)
    stagger_s: float = seconds(0.0)
    onoff_sources: tuple[int, ...] = plain(())
    mean_on_s: float = seconds(0.020)
    mean_off_s: float = seconds(0.020)
    hotspot_start_s: float = seconds(0.0)
    hotspot_duration_s: float = seconds(0.0)
    hotspot_period_s: float = seconds(0.0)
    """> 0: the hot-spot episode repeats every period, as long as one fits in the run."""
    flow_sizes: str = "seed003"
    """flows: the size distribution (qcn.core.flows.size_distribution)."""
    load: float = plain(0.8)
    """flows: what the sources offer together, as a fraction of the bottleneck's initial
    rate, counting the flows' bytes (as HPCC's traffic generator; headers come on top)."""
    ipc_fraction: float = plain(0.5)
    """flows, seed003: the share of flows that are IPC (the seed gives none)."""
    flow_size_scale: float = volume(1.0)
    """flows: drawn sizes are multiplied by this (BMv2's scaling sets it to k * tau)."""
    drain_fraction: float = plain(0.0)
    """flows: no flow starts in this last fraction of the run, so the last ones can finish."""
    rto_s: float = seconds(1e-3)
    """flows: a lost frame is sent again this long after it was sent."""
    transport: str = "frames"
    """flows: "frames", acknowledged datagrams sent again after ``rto_s`` (both backends,
    docs/fct.md); "tcp", one kernel TCP connection per flow (Mininet only)."""
    tcp_congestion: str = "cubic"
    """flows over tcp: the kernel's congestion control of every flow's socket
    (TCP_CONGESTION): Linux's default, whatever the machine's own default is."""
    tcp_connections: str = "kept"
    """flows over tcp (qcn.core.flows.TCP_CONNECTIONS): "kept", a host's next flow to a
    receiver goes on an idle connection to it; "per-flow", a connection opened and closed
    for each flow (docs/fct.md, "Real TCP")."""
    traffic: str = "topology"
    """Who sends to whom (qcn.core.topology.TRAFFIC): the topology's own pairs, every host
    into one (incast), a random derangement (permutation), or, for flows, each flow to a
    host drawn uniformly among the others (all-to-all)."""
    incast_sink: str = ""
    """incast: the host every other sends to ("": the topology's last host)."""

    @property
    def declared(self) -> TrafficPattern:
        """Its pattern as qcn.core.patterns declares it (its kind, what generates it)."""
        return traffic_patterns.pattern(self.pattern)


@dataclass(frozen=True)
class SourceHost:
    """A host that sends: the stream's destination, or the hosts its flows go to."""

    host: str
    destinations: tuple[str, ...]

    @property
    def receiver(self) -> str:
        """Who receives what it sends, as the results name it (sources.csv's ``receiver``,
        summary.json's ``sources``): its destination; a flows source's, separated by spaces."""
        return " ".join(self.destinations)

    @property
    def label(self) -> str:
        """The source in a plot's legend: sender and receiver (past two receivers, their
        count: all-to-all's would fill the legend; sources.csv names them)."""
        shown = self.receiver if len(self.destinations) <= 2 else f"{len(self.destinations)} hosts"
        return f"{self.host} → {shown}"


@dataclass(frozen=True)
class RateChange:
    at_s: float
    bottleneck_rate_bps: float


@dataclass(frozen=True)
class Bmv2Scale:
    """How a scenario is scaled to what BMv2 in Mininet carries (tens of Mb/s, not 10 Gb/s).

    Rates scale by ``rate_scale`` (k) and times by ``time_scale`` (tau); byte quantities
    (BC_LIMIT, the CP's sampling intervals) by k * tau, so an RP cycle lasts tau times as
    long as in the original, like everything else.  Frame sizes and queue lengths in packets
    do not scale, so a run with k * tau < 1 sees k * tau times as many frames per (scaled)
    event as the original: ``set`` holds the compensating overrides (typically a higher
    sampling probability), stated in each scenario file.
    """

    rate_scale: float = 1e-3
    time_scale: float = 1.0
    set: dict[str, Any] = field(default_factory=dict)


def unit_roots() -> dict[str, type[Any]]:
    """The dataclasses whose fields a scenario's dict holds, by dotted prefix (every
    registered scheme's parameters included), for :func:`fields_in`."""
    roots: dict[str, type[Any]] = {"": Scenario, "network": Network, "workload": Workload}
    roots |= {"qcn.cp": CpParams, "qcn.rp": RpParams}
    for name in scheme_names():  # (read through the module: a test registers its own)
        own = scheme_def(name).params
        if own is not None:
            roots[f"qcn.rp.{name}"] = own
    return roots


def fields_in(unit: Unit) -> tuple[str, ...]:
    """The scenario's fields (dotted) declared in ``unit`` (qcn.core.units): what BMv2
    scaling multiplies by the rate scale (RATE), the time scale (TIME) or both (VOLUME)."""
    return scaled_fields(unit_roots(), unit)


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: str
    title: str
    duration_s: float = field(metadata={UNIT: Unit.TIME})  # (no default: mypy reads field())
    params: QcnParams
    network: Network = field(default_factory=Network)
    workload: Workload = field(default_factory=Workload)
    schedule: tuple[RateChange, ...] = ()
    notes: str = ""
    bmv2: Bmv2Scale = field(default_factory=Bmv2Scale)
    preset: str = "qcn"
    """The parameter set ``params`` was built on (qcn.core.params.Preset)."""
    schemes: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    """How this scenario configures another scheme than its own (``[schemes.dcqcn.rp]``):
    per scheme, its ``qcn.SECTION.FIELD`` values over the scheme's preset, which
    :func:`scheme_overrides` applies when the scenario runs under it."""
    port_cp: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    """CP fields of one port over ``params.cp`` (``[port_cp."s2:3"]``, :data:`PORT_CP_FIELDS`):
    a network of several CPs need not hold every queue at one q_eq."""

    def cp_for(self, port: str) -> CpParams:
        """The CP parameters of the port named ``port`` (``params.cp`` unless overridden)."""
        own = dict(self.port_cp).get(port)
        return replace(self.params.cp, **port_cp_values(dict(own))) if own else self.params.cp

    @cached_property
    def topology(self) -> Topology:
        """The network, carrying this scenario's traffic (qcn.core.topology): which ports
        congest, and so run a CP by default, is judged on that traffic."""
        net, wl = self.network, self.workload
        base = network_topology(net)
        pairs: list[tuple[str, str]] = []
        if not (wl.declared.kind is Kind.FLOWS and wl.traffic == "all-to-all"):
            pairs = base.traffic_pairs(_traffic(wl.traffic), sink=wl.incast_sink)
        topo = base.with_traffic(pairs)
        if net.cp_ports or net.cp_on or net.cp_off:
            topo = topo.with_overrides(
                cp_mode=_cp_mode(net.cp_ports) if net.cp_ports else None,
                cp_on=[_port_ref(x) for x in net.cp_on],
                cp_off=[_port_ref(x) for x in net.cp_off],
            )
        return topo

    @property
    def network_title(self) -> str:
        """The network a run used, as a plot's title names it: its generator or file, and
        its size.  (``title`` names the network the scenario was written for, which
        ``--set network.topology=...`` replaces: a triangle's plot said "on a leaf-spine".)"""
        topo = self.topology
        switches, hosts = len(topo.switches), len(topo.hosts)
        return (
            f"{topo.name} ({switches} switch{'es' if switches != 1 else ''}, "
            f"{hosts} host{'s' if hosts != 1 else ''})"
        )

    @cached_property
    def sources(self) -> tuple[SourceHost, ...]:
        """The hosts that send, in source order (the trace's columns, the RP daemons)."""
        wl = self.workload
        if wl.declared.kind is Kind.FLOWS:
            return tuple(
                SourceHost(h, d)
                for h, d in self.topology.flow_destinations(
                    _traffic(wl.traffic), sink=wl.incast_sink
                )
            )
        return tuple(SourceHost(src, (dst,)) for src, dst in self.topology.pairs)

    @property
    def bottleneck_port(self) -> PortRef:
        """The port the schedule changes and whose queue is the run's queue."""
        topo = self.topology
        if topo.bottleneck is not None:
            return topo.bottleneck
        if topo.cp_ports:
            return topo.cp_ports[0]
        raise ScenarioError(f"{self.name}: the topology has no congestible port to measure")

    @property
    def initial_capacity_bps(self) -> float:
        """The bottleneck port's rate before the schedule changes it."""
        return self.topology.link_at(self.bottleneck_port).rate_bps

    @property
    def restore_at_s(self) -> float | None:
        """When the bottleneck's capacity is last raised (recovery is measured from it)."""
        rate = self.initial_capacity_bps
        restore = None
        for change in self.schedule:
            if change.at_s > self.duration_s:
                break
            if change.bottleneck_rate_bps > rate:
                restore = change.at_s
            rate = change.bottleneck_rate_bps
        return restore

    @property
    def flows_until_s(self) -> float:
        """The flows workload: no flow starts after this (``workload.drain_fraction``)."""
        return self.duration_s * (1 - self.workload.drain_fraction)

    def draw_flows(self, seed: int) -> list[FlowArrival]:
        """The flows workload's flows for random seed ``seed`` (the same on every backend:
        qcn.core.flows.draw_arrivals with this scenario's workload and network)."""
        wl = self.workload
        arrivals = draw_arrivals(
            size_distribution(wl.flow_sizes, wl.ipc_fraction),
            sources=len(self.sources),
            load=wl.load,
            rate_bps=self.flows_capacity_bps,
            until_s=self.flows_until_s,
            size_scale=wl.flow_size_scale,
            seed=seed,
        )
        return draw_destinations(arrivals, [len(s.destinations) for s in self.sources], seed)

    @property
    def flows_capacity_bps(self) -> float:
        """What ``workload.load`` is a fraction of: what the flows' destinations can
        receive together (each one's link; the single bottleneck's sink: its rate)."""
        topo = self.topology
        destinations = set(chain.from_iterable(s.destinations for s in self.sources))
        return sum(topo.access_link(d).rate_bps for d in sorted(destinations))

    def flow_path(self, flow_id: int, arrival: FlowArrival) -> FlowPath:
        """What flow ``flow_id``'s (``arrival``'s) ideal completion time depends on
        (qcn.core.flows.FlowPath): the slowest link from its source to its destination (the
        bottleneck at its initial rate), the delay of every link after its source's own
        (the model's convention, docs/topology.md), and the switches it crosses."""
        topo, src = self.topology, self.sources[arrival.source].host
        refs = self.flow_refs(flow_id, arrival)
        return FlowPath(
            min([topo.access_link(src).rate_bps, *(topo.link_at(r).rate_bps for r in refs)]),
            sum(topo.link_at(r).delay_s for r in refs),
            len(refs),
        )

    def flow_refs(self, flow_id: int, arrival: FlowArrival) -> list[PortRef]:
        """The switch egress ports flow ``flow_id`` (``arrival``) leaves through: its
        destination's path, or with per-flow ECMP its 5-tuple's (qcn.core.ecmp)."""
        topo, src = self.topology, self.sources[arrival.source].host
        dst = self.flow_destination(arrival)
        return topo.path(src, dst, topo.flow_hash(src, dst, flow_port(flow_id)))

    def stream_refs(self, source: int) -> list[PortRef]:
        """The switch egress ports source ``source``'s stream (not flows) leaves through,
        to its first destination, from its port (qcn.core.ecmp.SOURCE_PORT)."""
        topo, host = self.topology, self.sources[source]
        src, dst = host.host, host.destinations[0]
        return topo.path(src, dst, topo.flow_hash(src, dst, SOURCE_PORT))

    def flow_destination(self, arrival: FlowArrival) -> str:
        """The host ``arrival``'s flow goes to."""
        return self.sources[arrival.source].destinations[arrival.destination]

    def congested_episode_s(self) -> tuple[float, float] | None:
        """(start, end) of the congestion episode, if the run has one: the bottleneck's last
        reduced-capacity period, or a TCP workload's hot-spot flows."""
        restore = self.restore_at_s
        if restore is not None:
            return max(c.at_s for c in self.schedule if c.at_s < restore), restore
        episodes = self.hotspot_episodes_s()
        if episodes:
            return episodes[0][0], episodes[-1][1]
        return None

    def hotspot_episodes_s(self) -> list[tuple[float, float]]:
        """(start, end) of each hot-spot episode of an iperf3 workload (none: always on)."""
        w = self.workload
        if w.declared.kind is not Kind.PROGRAM or w.hotspot_duration_s <= 0:
            return []
        if w.hotspot_period_s <= 0:
            return [(w.hotspot_start_s, w.hotspot_start_s + w.hotspot_duration_s)]
        out, begin = [], w.hotspot_start_s
        while begin + w.hotspot_duration_s <= self.duration_s + 1e-9:
            out.append((begin, begin + w.hotspot_duration_s))
            begin += w.hotspot_period_s
        return out

    def offered_bps(self, t: float) -> float:
        """What the sources offer at time ``t`` on average (on/off sources by their duty
        cycle; staggered sources once started)."""
        w = self.workload
        if w.declared.kind is Kind.FLOWS:
            return w.load * self.flows_capacity_bps if t < self.flows_until_s else 0.0
        duty = w.mean_on_s / (w.mean_on_s + w.mean_off_s)
        # A source sends no faster than its host link (a topology file's may be slower
        # than the line rate that bounds max_rate_bps).
        return sum(
            min(w.max_rate_bps, self.topology.access_link(s.host).rate_bps)
            * (duty if i in w.onoff_sources or w.declared.duty_cycled else 1.0)
            for i, s in enumerate(self.sources)
            if i * w.stagger_s <= t
        )

    def capacity_at(self, t: float) -> float:
        rate = self.initial_capacity_bps
        for change in self.schedule:
            if change.at_s <= t:
                rate = change.bottleneck_rate_bps
        return rate

    def with_overrides(self, overrides: dict[str, Any], given_by: str = "--set") -> Scenario:
        """Apply ``{"qcn.rp.fb_hat": True, "duration_s": 2.0, ...}``-style overrides
        (``given_by``: where they come from, as an error names it)."""
        data = self.to_dict()
        preset = overrides.get("qcn_preset", self.preset)
        if preset != self.preset:
            # Another base set: keep only what the scenario chose over its own preset, so
            # the new preset's values take effect everywhere else.
            data["qcn"] = _deviations(self.params, self.preset)
            # Its table for the new scheme is applied (scheme_overrides): the scheme is now
            # its own, whose parameters are its [qcn] table.
            data.get("schemes", {}).pop(preset, None)
            if not data.get("schemes", True):
                del data["schemes"]
        _set_dotted(data, overrides)
        if data["network"].get("topology") not in SOURCE_TOPOLOGIES:
            # Another topology's sources are its traffic's: the old size goes unless set.
            for key in ("sources", "innocent_sources"):
                if f"network.{key}" not in overrides:
                    data["network"].pop(key, None)
        return parse(data, where=f"{self.name} (with {given_by})")

    def scaled_for_bmv2(self, keep: Collection[str] = ()) -> Scenario:
        """This scenario in BMv2's units (see :class:`Bmv2Scale`); itself a scenario that
        the simulator can run too, to predict the BMv2 run.  Fields named in ``keep`` (the
        user's ``--set``) keep their values where ``[bmv2.set]`` would override them."""
        k, tau = self.bmv2.rate_scale, self.bmv2.time_scale
        data = self.to_dict()
        _scale_fields(data, k, tau)
        for table in data.get("schemes", {}).values():  # (each scheme's parameters too)
            _scale_fields({"qcn": table}, k, tau, prefix="qcn.")
        for change in data["schedule"]:
            change["at_s"] *= tau
            change["bottleneck_rate_bps"] *= k
        data["bmv2"] = {"rate_scale": 1.0, "time_scale": 1.0, "set": {}}
        if "network.port_service" not in keep:
            data["network"]["port_service"] = "bmv2"  # BMv2's queues (Simulation: Port.paced)
        # The compensations before the checks: a timeout that only they make long enough
        # (buffers in frames drain longer when scaled) would fail them otherwise.
        _set_dotted(data, {k: v for k, v in self.bmv2.set.items() if k not in keep})
        scaled = parse(data, where=f"{self.name} (scaled for BMv2)")
        too_fast = links_beyond_bmv2(scaled)
        if too_fast:
            raise ScenarioError(too_fast)
        return scaled

    def _network_dict(self) -> dict[str, Any]:
        """The network table; sources are a generator's size only where they size it."""
        net = dict(vars(self.network))
        net["cp_on"], net["cp_off"] = list(net["cp_on"]), list(net["cp_off"])
        if self.network.topology not in SOURCE_TOPOLOGIES:
            del net["sources"], net["innocent_sources"]
        return net

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "title": self.title,
            "duration_s": self.duration_s,
            "notes": self.notes,
            "qcn_preset": self.preset,
            "qcn": self.params.to_dict(),
            "network": self._network_dict(),
            "workload": {**vars(self.workload), "onoff_sources": list(self.workload.onoff_sources)},
            "schedule": [dict(vars(c)) for c in self.schedule],
            "bmv2": {**vars(self.bmv2), "set": dict(self.bmv2.set)},
            # (only when set: the runs recorded before it existed keep their keys)
            **({"port_cp": {p: dict(f) for p, f in self.port_cp}} if self.port_cp else {}),
            **({"schemes": _schemes_dict(self.schemes)} if self.schemes else {}),
        }


def _scale_fields(data: dict[str, Any], k: float, tau: float, prefix: str = "") -> None:
    """Scale the rates (by ``k``), times (by ``tau``) and byte counts (by both) of a
    scenario's dict in place, those under ``prefix`` only (:class:`Bmv2Scale`)."""

    def scale(dotted: str, factor: float) -> None:
        if not dotted.startswith(prefix):
            return
        *path, last = dotted.split(".")
        node = data
        for key in path:
            node = node.get(key, {})  # (a scheme's table the dict does not hold)
        value = node.get(last)
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[last] = round(value * factor) if isinstance(value, int) else value * factor
        # (a list, the CP's sampling intervals, is scaled below with its floor)

    factors = {Unit.RATE: k, Unit.TIME: tau, Unit.VOLUME: k * tau}
    for name, f in numeric_fields(unit_roots()):
        unit = unit_of(f)
        if unit is not None and unit in factors:
            scale(name, factors[unit])
    cp, rp = data["qcn"].get("cp", {}), data["qcn"].get("rp", {})  # (a [schemes] table's
    if "sample_intervals_bytes" in cp:  # may hold either or neither)
        cp["sample_intervals_bytes"] = [
            max(64, round(n * k * tau)) for n in cp["sample_intervals_bytes"]
        ]
    if "bc_limit_bytes" in rp:
        rp["bc_limit_bytes"] = max(64, rp["bc_limit_bytes"])


def scaled_params(params: QcnParams, rate_scale: float, time_scale: float = 1.0) -> QcnParams:
    """``params`` in another network's units, as :meth:`Scenario.scaled_for_bmv2` scales a
    scenario's (``qcn net up`` gives a network at 10 Mb/s the seeds' 10 Gb/s parameters
    scaled by 1e-3: the rate cut's floor, increases and byte counter with it)."""
    data = {"qcn": params.to_dict()}
    _scale_fields(data, rate_scale, time_scale, prefix="qcn.")
    return QcnParams.from_dict(data["qcn"])


BMV2_MAX_LINK_RATE_BPS = 1e9
"""The fastest link a BMv2 run takes: what behavioral-model's performance guide quotes for
an optimised build on a large machine (docs/bmv2.md; this machine's carries about 140 Mb/s).
A faster one is a simulator's rate, not scaled for BMv2."""


def links_beyond_bmv2(sc: Scenario) -> str:
    """Why ``sc``'s network is not BMv2's ("" when it is): a link faster than BMv2 carries,
    which only a topology file's own rates can give (the scaling scales the rest)."""
    fastest = max(sc.topology.links, key=lambda lk: lk.rate_bps)
    if fastest.rate_bps <= BMV2_MAX_LINK_RATE_BPS:
        return ""
    a, b = (e.node if e.port == 0 else f"{e.node}:{e.port}" for e in fastest.ends())
    return (
        f"{sc.name}: the link {a} - {b} runs at {fastest.rate_bps / 1e6:g} Mb/s, more than "
        f"BMv2 carries ({BMV2_MAX_LINK_RATE_BPS / 1e6:g} Mb/s at most; docs/bmv2.md). A "
        "topology file's rates are taken as they are, not scaled for BMv2: give BMv2's "
        "rates, leave them out (the scenario's line rate, scaled), or set "
        "network.file_rate_scale"
    )


def link_defaults(net: Network) -> LinkDefaults:
    """The rates, delay and buffer ``net`` gives a generator's links (and a file's that give
    none)."""
    return LinkDefaults(
        line_rate_bps=net.line_rate_bps,
        bottleneck_rate_bps=net.bottleneck_rate_bps,
        fabric_rate_bps=net.fabric_rate_bps,
        innocent_rate_bps=net.innocent_rate_bps,
        delay_s=net.rtt_s / 2,
        buffer_pkts=net.buffer_pkts,
    )


def network_topology(net: Network) -> Topology:
    """The topology ``net`` names, built from its rates, delay and buffer (the traffic's
    pairs not applied yet: :attr:`Scenario.topology`)."""
    defaults = link_defaults(net)
    spec = net.topology
    if not is_generator_spec(spec) and spec not in SOURCE_TOPOLOGIES:
        # A file's link without a rate runs at the line rate, and file_rate_scale scales
        # only the rates the file gives: it multiplies every link below, so the default
        # is given divided by it.
        defaults = replace(defaults, line_rate_bps=net.line_rate_bps / net.file_rate_scale)
    if spec == "single":
        spec = f"single:{net.sources}"
    elif spec == "multihop":
        spec = f"multihop:{net.sources},{net.innocent_sources}"
    try:
        topo = load_topology(spec, defaults)
    except TopologyError as e:
        raise ScenarioError(f"network.topology: {e}") from None
    if not is_generator_spec(spec):
        topo = topo.scaled(net.file_rate_scale, net.file_time_scale)
    return topo if topo.ecmp == net.ecmp else replace(topo, ecmp=net.ecmp)


def _traffic(name: str) -> Traffic:
    if name not in TRAFFIC:
        raise ScenarioError(f"workload.traffic: must be one of {', '.join(TRAFFIC)}")
    return name


def _cp_mode(name: str) -> Any:
    if name not in CP_MODES:
        raise ScenarioError(f"network.cp_ports: must be one of {', '.join(CP_MODES)} (or '')")
    return name


def _port_ref(text: str) -> PortRef:
    switch, _, port = text.partition(":")
    if not switch or not port.isdigit():
        raise ScenarioError(f"network.cp_on/cp_off: {text!r} is not SWITCH:PORT")
    return PortRef(switch, int(port))


#: The reaction point's fields a scenario's network sets, which every scheme it runs under
#: keeps.
NETWORK_RP_FIELDS = ("line_rate_bps", "rate_unit_bps")
"""(The line rate is the host links'; the rate unit, the hosts' limiters' granularity: both
scale with the network's rates on BMv2.)"""


def scheme_overrides(sc: Scenario, scheme: str) -> dict[str, Any]:
    """The overrides that run ``sc`` under ``scheme`` (a name of qcn.core.params.SCHEMES):
    the scheme's own preset in place of what the scenario chose for its own scheme, on the
    scenario's network (docs/dcqcn.md, "One scenario, several schemes").  Under its own
    scheme a scenario runs as it is: no override.  Switching presets alone keeps the fields
    the scenario set over its own preset (``with_overrides``); here each of those goes back
    to the new preset's value, so a QCN scenario's R_AI does not become DCQCN's, except the
    fields of :data:`NETWORK_RP_FIELDS`."""
    if scheme == sc.preset:
        return {}
    try:
        base = QcnParams.preset(scheme).to_dict()
    except ParamError as e:
        raise ScenarioError(f"scheme {scheme!r}: {str(e).split(': ', 1)[1]}") from None
    out: dict[str, Any] = {"qcn_preset": scheme}
    for section, fields_ in _deviations(sc.params, sc.preset).items():
        for key in fields_:
            if not (section == "rp" and key in NETWORK_RP_FIELDS):
                out[f"qcn.{section}.{key}"] = base[section][key]
    out.update(copy.deepcopy(dict(dict(sc.schemes).get(scheme, ()))))
    return out


def _deviations(params: QcnParams, preset: str) -> dict[str, dict[str, Any]]:
    """The fields of ``params`` that differ from ``preset``'s, as a ``qcn`` table."""
    base, mine = QcnParams.preset(preset).to_dict(), params.to_dict()
    return {sec: {k: v for k, v in mine[sec].items() if base[sec][k] != v} for sec in mine}


def available() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def load(name_or_path: str) -> Scenario:
    """A scenario by name (``transient``) or by path to a TOML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.toml"
    if not path.exists():
        raise ScenarioError(
            f"no scenario '{name_or_path}' (known: {', '.join(available())}; or give a file)"
        )
    data = read_toml(path, ScenarioError)
    net = data.get("network")
    if isinstance(net, dict) and isinstance(net.get("topology"), str):
        # A topology file is found beside the scenario file.
        spec = net["topology"]
        if not is_generator_spec(spec) and not Path(spec).is_absolute():
            net["topology"] = str((path.parent / spec).resolve())
    return parse(data, where=str(path))


MIN_RATE_BPS = 1e3
MIN_DURATION_S, MAX_DURATION_S = 1e-3, 3600.0
MAX_TIME_SCALE = 1e4
"""bmv2.time_scale's bound (and so a scaled simulation's ``scaled_by``)."""
MAX_RATE_SCALE = 1.0
"""bmv2.rate_scale's bound: BMv2 runs a scenario's rates slower, never faster."""
MIN_RATE_TEXT = f"must be at least {MIN_RATE_BPS:g} b/s (a slower rate's frame gaps overflow)"
SCENARIO_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


def parse(data: dict[str, Any], where: str = "scenario") -> Scenario:
    try:
        return _parse(data)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _parse(data: dict[str, Any]) -> Scenario:
    known = {
        "name",
        "seed",
        "title",
        "duration_s",
        "notes",
        "qcn_preset",
        "qcn",
        "network",
        "workload",
        "schedule",
        "bmv2",
        "port_cp",
        "schemes",
    }
    _unknown("", data, known)
    try:
        base = QcnParams.preset(data.get("qcn_preset", "qcn"))
        params = QcnParams.from_dict(data.get("qcn", {}), base)
    except ParamError as e:
        raise ScenarioError(f"qcn.{e}") from None
    raw_network = data.get("network", {})
    network = _table(Network, "network", raw_network)
    if network.topology not in SOURCE_TOPOLOGIES:
        for key in ("sources", "innocent_sources"):
            if key in raw_network:
                raise ScenarioError(
                    f"network.{key}: only single and multihop are sized by it; the "
                    f"sources of {network.topology} are its traffic's (workload.traffic)"
                )
    workload = _table(Workload, "workload", data.get("workload", {}))
    raw_schedule = data.get("schedule", [])
    if not isinstance(raw_schedule, list):
        raise ScenarioError(
            f"schedule: must be a list of tables ([[schedule]]), got {raw_schedule!r}"
        )
    schedule = tuple(_table(RateChange, f"schedule[{i}]", c) for i, c in enumerate(raw_schedule))
    bmv2 = _table(Bmv2Scale, "bmv2", data.get("bmv2", {}))
    name = _typed("name", data.get("name"), str)
    if not SCENARIO_NAME.fullmatch(name):
        # It names the results directory (results/NAME): no path, nothing hidden.
        raise ScenarioError(
            f"name: letters, digits, '.', '_' and '-', not starting with '.' (got {name!r})"
        )
    scenario = Scenario(
        name=name,
        seed=str(data.get("seed", "")),
        title=str(data.get("title", "")),
        duration_s=_finite(
            "duration_s", float(_typed("duration_s", data.get("duration_s"), (int, float)))
        ),
        params=params,
        network=network,
        workload=workload,
        schedule=tuple(sorted(schedule, key=lambda c: c.at_s)),
        notes=str(data.get("notes", "")),
        bmv2=bmv2,
        preset=str(data.get("qcn_preset", "qcn")),
        port_cp=_port_cp(data.get("port_cp", {})),
        schemes=_schemes(data.get("schemes", {}), str(data.get("qcn_preset", "qcn")), params),
    )
    _validate(scenario)
    _validate_port_cp(scenario)
    return scenario


def _schemes(
    raw: Any, own: str, params: QcnParams
) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """``[schemes.NAME]`` tables: each a ``qcn`` table (cp, rp) over NAME's preset, checked
    as that scheme's parameters on this scenario's line rate."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"schemes: must be a table of schemes' tables, got {raw!r:.40}")
    out = []
    for name, table in sorted(raw.items()):
        where = f"schemes.{name}"
        if name == own:
            raise ScenarioError(f"{where}: the scenario's own scheme is its [qcn] table")
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ScenarioError(f"{where}: must hold tables of parameters ([{where}.rp])")
        try:
            base = QcnParams.preset(name)
            network = {key: getattr(params.rp, key) for key in NETWORK_RP_FIELDS}
            QcnParams.from_dict({**table, "rp": {**network, **table.get("rp", {})}}, base)
        except ParamError as e:
            raise ScenarioError(f"{where}.{e}") from None
        flat = [
            (f"qcn.{section}.{key}", copy.deepcopy(value))
            for section, fields_ in sorted(table.items())
            for key, value in sorted(fields_.items())
        ]
        out.append((str(name), tuple(flat)))
    return tuple(out)


def _schemes_dict(schemes: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]) -> dict[str, Any]:
    """``Scenario.schemes`` back as its TOML tables."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, flat in schemes:
        for dotted, value in flat:
            _qcn, section, key = dotted.split(".", 2)
            # (a copy: a scheme's own table is a dict, which scaling would change in place)
            out.setdefault(name, {}).setdefault(section, {})[key] = copy.deepcopy(value)
    return out


def _port_cp(raw: Any) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    if not isinstance(raw, dict):
        raise ScenarioError(f"port_cp: must be a table of ports' tables, got {raw!r:.40}")
    out = []
    for port, fields_ in sorted(raw.items()):
        if not isinstance(fields_, dict):
            raise ScenarioError(f"port_cp.{port}: must be a table of CP fields")
        for name in fields_:
            if name not in PORT_CP_FIELDS:
                raise ScenarioError(
                    f"port_cp.{port}.{name}: a port's own CP fields are {', '.join(PORT_CP_FIELDS)}"
                )
        try:
            port_cp_values(fields_)
        except ParamError as e:
            raise ScenarioError(f"port_cp.{port}.{str(e).removeprefix('cp.')}") from None
        out.append((str(port), tuple(sorted(fields_.items()))))
    return tuple(out)


def _validate_port_cp(s: Scenario) -> None:
    if not s.port_cp:
        return
    cps = {str(p) for p in s.topology.cp_ports}
    for port, _own in s.port_cp:
        if port not in cps:
            raise ScenarioError(
                f"port_cp.{port}: not a CP port of the network (its CP ports: "
                f"{', '.join(sorted(cps)) or 'none'})"
            )
        try:
            s.cp_for(port).validate()
        except ParamError as e:
            raise ScenarioError(f"port_cp.{port}.{str(e).removeprefix('cp.')}") from None


def _validate(s: Scenario) -> None:
    n = s.network
    if n.topology in SOURCE_TOPOLOGIES and not 1 <= n.sources <= 1000:
        raise ScenarioError("network.sources: must be in [1, 1000]")
    for name, ok, message in _field_checks(s):
        if not ok:
            raise ScenarioError(f"{name}: {message}")
    _validate_structure(s)


def _field_checks(s: Scenario) -> list[tuple[str, bool, str]]:
    """Each field's own bounds: (its name, whether it is within them, what they are), in
    the order they are checked (the first out of bounds is the error)."""
    n, w = s.network, s.workload
    multihop = n.topology == "multihop"
    return [
        (
            "duration_s",
            MIN_DURATION_S <= s.duration_s <= MAX_DURATION_S,
            f"must be in [{MIN_DURATION_S:g}, {MAX_DURATION_S:g}]",
        ),
        ("network.line_rate_bps", n.line_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        ("network.bottleneck_rate_bps", n.bottleneck_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        ("network.rtt_s", 0 < n.rtt_s < 1, "must be in (0, 1)"),
        (
            "network.buffer_pkts",
            1 <= n.buffer_pkts <= MAX_BUFFER_PKTS,
            f"must be in [1, {MAX_BUFFER_PKTS:,}]",
        ),
        (
            "network.frame_bytes",
            FRAME_BYTES_MIN <= n.frame_bytes <= FRAME_BYTES_MAX,
            f"must be in [{FRAME_BYTES_MIN}, {FRAME_BYTES_MAX}]",
        ),
        (
            "workload.pattern",
            w.pattern in traffic_patterns.names(),
            f"must be one of {', '.join(traffic_patterns.names())}",
        ),
        ("network.ecmp", n.ecmp in ECMP_MODES, f"must be one of {', '.join(ECMP_MODES)}"),
        (
            "network.port_service",
            n.port_service in get_args(PortService),
            f"must be one of {', '.join(get_args(PortService))}",
        ),
        ("network.fabric_rate_bps", n.fabric_rate_bps >= 0, "must be >= 0 (0: the default)"),
        (
            "network.file_rate_scale",
            0 < n.file_rate_scale <= 1 and 0 < n.file_time_scale <= 1e4,
            "file_rate_scale must be in (0, 1] and file_time_scale in (0, 1e4]",
        ),
        (
            "network.innocent_sources",
            0 <= n.innocent_sources <= 100 and (n.innocent_sources == 0 or multihop),
            "must be in [0, 100], and 0 unless network.topology is multihop",
        ),
        ("network.innocent_rate_bps", n.innocent_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        (
            "network.pause_lo_bytes",
            not n.pause or 0 < n.pause_lo_bytes < n.pause_hi_bytes <= n.buffer_pkts * n.frame_bytes,
            "the watermarks need 0 < pause_lo_bytes < pause_hi_bytes <= the buffer's bytes "
            "(buffer_pkts * frame_bytes)",
        ),
        (
            "workload.hotspot_duration_s",
            w.hotspot_start_s >= 0
            and w.hotspot_duration_s >= 0
            and w.hotspot_start_s + w.hotspot_duration_s <= s.duration_s,
            "the hot-spot episode (hotspot_start_s, hotspot_duration_s) must lie in the run",
        ),
        (
            "workload.max_rate_bps",
            MIN_RATE_BPS <= w.max_rate_bps <= n.line_rate_bps or w.declared.kind is Kind.FLOWS,
            f"must be in [{MIN_RATE_BPS:g}, network.line_rate_bps]",  # (unused by flows)
        ),
        ("workload.stagger_s", w.stagger_s >= 0, "must be >= 0"),
        (
            "workload.mean_on_s",
            min(w.mean_on_s, w.mean_off_s) >= 1e-6,
            "on and off means must be at least 1 us (shorter ones leave the simulator "
            "drawing periods for ever)",
        ),
        ("workload.load", 0 < w.load <= 1, "must be in (0, 1]"),
        ("workload.transport", w.transport in TRANSPORTS, f"must be {' or '.join(TRANSPORTS)}"),
        (
            "workload.tcp_connections",
            w.tcp_connections in TCP_CONNECTIONS,
            f"must be {' or '.join(TCP_CONNECTIONS)}",
        ),
        (
            "workload.tcp_congestion",
            re.fullmatch(r"[a-z][a-z0-9_]{0,15}", w.tcp_congestion) is not None,
            "must be a kernel congestion control's name (cubic, reno, bbr, ...)",
        ),
        ("workload.ipc_fraction", 0 <= w.ipc_fraction <= 1, "must be in [0, 1]"),
        ("workload.flow_size_scale", 0 < w.flow_size_scale <= 1e6, "must be in (0, 1e6]"),
        (
            "workload.drain_fraction",
            0 <= w.drain_fraction < 1,
            "must be in [0, 1)",
        ),
    ]


def _validate_structure(s: Scenario) -> None:
    """What holds between fields: a topology with a bottleneck, sources that exist, a
    pattern its topology carries, the reaction points' line rate, the BMv2 scale."""
    n, w = s.network, s.workload
    multihop = n.topology == "multihop"
    try:
        sources = len(s.sources)
        s.bottleneck_port  # noqa: B018 - it checks that there is one
    except TopologyError as e:
        raise ScenarioError(f"network.topology: {e}") from None
    if not all(0 <= i < sources for i in w.onoff_sources):
        raise ScenarioError(
            "workload.onoff_sources: must list source indices below the number of sources"
        )
    if w.incast_sink and w.traffic != "incast":
        raise ScenarioError(
            f'workload.incast_sink: only with workload.traffic = "incast" (it is {w.traffic!r})'
        )
    _validate_bmv2_set(s)
    if w.declared.kind is Kind.PROGRAM and not multihop:
        raise ScenarioError(
            f"workload.pattern: {' and '.join(traffic_patterns.of_kind(Kind.PROGRAM))} go "
            "with network.topology = multihop"
        )
    if w.declared.kind is Kind.FLOWS:
        _validate_flows(s)
    if w.hotspot_period_s and w.hotspot_period_s <= w.hotspot_duration_s:
        raise ScenarioError(
            "workload.hotspot_period_s: must be longer than hotspot_duration_s (or 0)"
        )
    if abs(s.params.rp.line_rate_bps - n.line_rate_bps) > 1e-6 * n.line_rate_bps:
        raise ScenarioError(
            "qcn.rp.line_rate_bps must equal network.line_rate_bps (the RPs' host links)"
        )
    b = s.bmv2
    if not (0 < b.rate_scale <= MAX_RATE_SCALE and 0 < b.time_scale <= MAX_TIME_SCALE):
        raise ScenarioError(
            f"bmv2: rate_scale must be in (0, {MAX_RATE_SCALE:g}] and time_scale in "
            f"(0, {MAX_TIME_SCALE:g}]"
        )
    for i, c in enumerate(s.schedule):
        if c.at_s < 0 or c.bottleneck_rate_bps < MIN_RATE_BPS:
            raise ScenarioError(
                f"schedule[{i}]: needs at_s >= 0 and a rate of at least {MIN_RATE_BPS:g} b/s"
            )


def _validate_bmv2_set(s: Scenario) -> None:
    """Every ``[bmv2.set]`` key names a field of the scenario: it is applied only when the
    scenario is scaled for BMv2 (--scaled, a Mininet run), and a mistyped one was accepted
    until then (docs/reliability.md)."""
    fields_now = s.to_dict()
    for dotted in s.bmv2.set:
        node: Any = fields_now
        for key in dotted.split("."):
            if not isinstance(node, dict) or key not in node:
                raise ScenarioError(f"bmv2.set: {dotted!r} is no field of the scenario")
            node = node[key]


def _validate_flows(s: Scenario) -> None:
    """The ``flows`` workload: a size distribution that loads, and a timeout that never
    fires for a frame that was delivered without PAUSE (docs/fct.md, "Transport"; with
    PAUSE a held frame may time out, and is sent again: docs/topology.md)."""
    w = s.workload
    try:
        sizes = size_distribution(w.flow_sizes, w.ipc_fraction)
    except FlowSizeError as e:
        raise ScenarioError(f"workload.flow_sizes: {e}") from None
    if sizes.mean_bytes * w.flow_size_scale < 1:
        raise ScenarioError("workload.flow_sizes: the mean flow (times flow_size_scale) is < 1 B")
    cut = sizes.fraction_above(FLOW_SIZE_MAX / w.flow_size_scale)
    if cut > MAX_CUT_FRACTION:
        raise ScenarioError(
            f"workload.flow_sizes: {cut:.3g} of the flows (times flow_size_scale) would be "
            f"larger than the {FLOW_SIZE_MAX} bytes the flow header carries"
        )
    flows = expected_flows(sizes, w.load, s.flows_capacity_bps, s.flows_until_s, w.flow_size_scale)
    if flows > MAX_FLOWS:
        raise ScenarioError(
            f"workload: some {flows:.3g} flows (load x rate x time / mean size); at most "
            f"{MAX_FLOWS:,} (a larger workload.flow_size_scale, a lower load or a shorter run)"
        )
    worst_wait_s = worst_frame_wait_s(s)
    if w.rto_s <= worst_wait_s:
        raise ScenarioError(
            f"workload.rto_s: must exceed the RTT plus a full buffer's drain at every hop, "
            f"at the slowest bottleneck rate ({worst_wait_s:.3g} s), so that only lost frames "
            "are sent again"
        )


def _set_dotted(data: dict[str, Any], overrides: dict[str, Any]) -> None:
    """``{"qcn.rp.fb_hat": True, ...}`` into a scenario's table ``data``."""
    for dotted, value in overrides.items():
        node = data
        *path, last = dotted.split(".")
        for key in path:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ScenarioError(f"--set {dotted}: {key} is not a table")
        if isinstance(node.get(last), dict) and not isinstance(value, dict):
            # `--set network=1` replaced a table with a number: a traceback further on.
            raise ScenarioError(
                f"--set {dotted}: {dotted} is a table: set its fields ({dotted}.FIELD=VALUE)"
            )
        node[last] = value


def worst_frame_wait_s(s: Scenario) -> float:
    """The longest a delivered frame's acknowledgement can take, without PAUSE: the loop
    delay (twice the one-way delay, the source's link counted once each way) and a full
    buffer's drain at every port on the way, the bottleneck at its slowest rate."""
    topo, bottleneck = s.topology, s.bottleneck_port
    slowest = min([s.initial_capacity_bps, *(c.bottleneck_rate_bps for c in s.schedule)])
    frame_bits = 8 * s.network.frame_bytes
    # A path is its first switch's and its destination's (one route per destination), so
    # the wait from each switch to each destination is found once, walking the routes back
    # from where they are known: per destination, linear in the switches (path by path it
    # was quadratic in the hosts, 1.7 s at 512 hosts all-to-all).
    tails: dict[str, dict[str, float]] = {}
    """destination -> switch -> the drain of every port from it on, and twice the delay of
    every link from it on but the destination's own."""

    def tail(home: str, dst: str) -> float:
        known = tails.setdefault(dst, {})
        walked: list[tuple[str, float]] = []
        here = home
        while here not in known:
            port = topo.routes[here].get(dst)
            if port is None:
                raise TopologyError(f"{topo.name}: no path from {here} to {dst}")
            ref = PortRef(here, port)
            link = topo.link_at(ref)
            rate = slowest if ref == bottleneck else link.rate_bps
            far = topo.far_end(ref).node
            walked.append((here, link.buffer_pkts * frame_bits / rate))
            if far == dst:
                known[here] = walked.pop()[1]
                break
            walked[-1] = (here, walked[-1][1] + 2 * link.delay_s)
            here = far
        total = known[here]
        for switch, own in reversed(walked):
            total += own
            known[switch] = total
        return known[home]

    class Tails(dict[str, float]):
        """A switch's tail to each destination, found when first asked for."""

        def __init__(self, home: str) -> None:
            super().__init__()
            self.home = home

        def __missing__(self, dst: str) -> float:
            self[dst] = found = tail(self.home, dst)
            return found

    worst = 0.0
    by_home: dict[str, Tails] = {}
    for src in s.sources:
        home = topo.attachment(src.host).switch
        table = by_home.get(home)
        if table is None:
            table = by_home[home] = Tails(home)
        access = 2 * topo.access_link(src.host).delay_s
        worst = max(worst, access + max(map(table.__getitem__, src.destinations)))
    return worst


def _table(cls: type, name: str, values: Any) -> Any:
    """Build dataclass ``cls`` from a TOML table, type-checked against the field defaults."""
    if not isinstance(values, dict):
        raise ScenarioError(f"{name}: must be a table")
    defaults = {
        f.name: f.default
        if f.default is not MISSING
        else (f.default_factory() if f.default_factory is not MISSING else None)
        for f in fields(cls)
    }
    _unknown(f"{name}.", values, set(defaults))
    kinds = {f.name: f.type for f in fields(cls)}
    out = {}
    for key, raw in values.items():
        out[key] = _field_value(f"{name}.{key}", kinds[key], defaults[key], raw)
    missing = [k for k, d in defaults.items() if d is None and k not in out]
    if missing:
        raise ScenarioError(f"{name}: missing {', '.join(missing)}")
    return cls(**out)


def _field_value(name: str, kind: Any, default: Any, raw: Any) -> Any:
    """One TOML value checked against its field: a bool is not a number, numbers are finite,
    and a list holds what its field's annotation says."""
    if kind == "float" or isinstance(default, float):
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ScenarioError(f"{name}: must be a number (got {raw!r})")
        return _finite(name, float(raw))  # TOML 10 for a float field is fine
    if kind == "int" or (isinstance(default, int) and not isinstance(default, bool)):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ScenarioError(f"{name}: must be a whole number (got {raw!r})")
        return raw
    if kind == "tuple[str, ...]":
        if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
            raise ScenarioError(f"{name}: must be a list of strings (got {raw!r})")
        return tuple(raw)
    if kind == "tuple[int, ...]":
        if not isinstance(raw, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw
        ):
            raise ScenarioError(f"{name}: must be a list of whole numbers (got {raw!r})")
        return tuple(raw)
    if default is not None and not isinstance(raw, type(default)):
        raise ScenarioError(f"{name}: must be a {type(default).__name__} (got {raw!r})")
    return raw


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise ScenarioError(f"{name}: must be a finite number (got {value!r})")
    return value


def _typed(name: str, value: Any, kinds: type | tuple[type, ...]) -> Any:
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        raise ScenarioError(f"{name}: required, of type {kinds}")
    return value


def _unknown(prefix: str, data: dict[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            raise ScenarioError(f"{prefix}{key}: unknown field (known: {', '.join(sorted(known))})")
