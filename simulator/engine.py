"""A packet-level discrete-event simulator of a scenario, at full (unscaled) rates.

It runs the project's own code for both ends of the loop, imported, not rewritten:
:class:`qcn.core.cp_model.CongestionPoint` at every congestion point and one
:class:`qcn.reaction_point.rules.RateLimiterRules` per source (per flow with flows).

Model (docs/topology.md, "The simulator's network"): the scenario's network
(``Scenario.topology``) of output-queued switches.

- Source i (``Scenario.sources[i]``) offers frames (Bernoulli slots at its link's rate,
  constant rate, or exponential on/off) into an unbounded adapter queue; its rate limiter
  sends them paced at CR, to its destination over the topology's path.
- Every switch egress port on a frame's path is a FIFO served at its link's rate (the
  bottleneck port's rate follows the schedule), with its link's buffer in packets; a
  frame finding the buffer full is dropped.  Where the port is in ``topology.cp_ports``
  it runs its own CP, with its own random stream.  The CP sees each accepted frame on
  arrival with q = what the port's buffer holds, in bytes or frames (``queue_unit``): the
  seeds' CP, and BMv2's (``depth_at = "arrival"``, the pipeline counting its queue).
  Modelling BMv2's departure CP (``cp_at_departure`` with ``depth_at`` "enqueue" or
  "dequeue"), it sees each frame as it leaves, with q = the frames it found (BMv2's
  enq_qdepth) or the frames it leaves behind (deq_qdepth).
- Delays.  The seeds' single-bottleneck model put a source's whole round trip on the
  CNM's way back; generalised, a frame reaches its first switch as it leaves its source,
  and then travels each link's one-way delay: to the next switch, and from its last port
  to its destination.  Whatever goes back to a source (a CNM, an ECM CP's positive
  message as ``CNM_POSITIVE``, a PAUSE from its first switch) takes twice the source's
  access-link delay plus the inter-switch delays from its first switch to the sender's
  switch, so that source -> CP -> source is the wire's round trip.  A PAUSE between two
  switches takes that link's delay.  On the single bottleneck every link is rtt_s / 2
  long: a CNM takes rtt_s, a frame reaches its receiver rtt_s / 2 after leaving the
  bottleneck, as before.
- Two-point QCN: each CP on a path samples on its own and sends its own CNMs, to the
  sampled frame's source (with flows, its flow).
- Three-point QCN (``cp.three_point``, seed 003): each frame carries one Fb tag, fresh
  (Fb = 0) from its source.  Each CP on the path overwrites it when its own sampled Fb is
  more negative, and then reflects it itself with its reflection probability (an
  intermediate reflection point: its CNM goes back as any CNM from that CP); else the
  tag travels on.  As the frame leaves its last egress port, the end reflection point
  there reflects an unreflected Fb < 0 with that probability and Fb = 0 with P0, its CNM
  taking the way back from that port.  The same model functions as the pipeline's
  (qcn.core.cp_model.overwrite_fb_tag, end_reflection).
- With ``network.pause`` (seed 001's switch, hop by hop), a switch's memory is
  partitioned per input: each input port may hold its link's ``buffer_pkts`` frames in
  the switch, in whichever output queues, and there is no output queue limit.  When an
  input's bytes pass ``pause_hi_bytes``, the switch sends an 802.3x PAUSE upstream (to the
  source, or to the upstream switch's egress port on that link) for as long as the queue
  the frame joined takes to drain (at most 65535 quanta of 512 bit times at the link's
  rate), again whenever the last one runs out while the input is still above; below
  ``pause_lo_bytes`` it sends a pause of 0 (resume).  A paused source or port sends
  nothing new (a frame already being sent finishes); what was in flight still arrives.
- The ``flows`` workload (seed 003's dynamic flows, docs/fct.md): each source starts flows
  as a Poisson process, their sizes from the workload's distribution, each to its own
  destination (``Scenario.flow_destination``) and cut into frames of at most
  ``frame_bytes`` (qcn.core.flows.flow_frames).  As in seed 003, every flow has its own
  reaction point, which starts at line rate; a CNM goes to the sampled frame's flow.  A
  source's flows share its host link: the flows its limiters let send take turns, a frame
  each, at its link's rate.  A dropped frame is sent again ``rto_s`` after it was sent
  (its acknowledgement never came), in its flow's next turn.  With PAUSE, where a frame
  may be held for long, every frame whose acknowledgement (the wire's round trip after it
  was delivered) has not come ``rto_s`` after it was sent is sent again, lost or not; a
  copy arriving after another is ignored.  A flow finishes when its last frame has
  reached the receiver; its limiter goes with it.
- DCQCN (``cp.signal = "ecn"``, docs/simulator.md "DCQCN"): a CP port that marks ECN
  judges every frame it admits on its queue in bytes as the frame finds it
  (:func:`qcn.core.cp_model.ecn_marks`, its own stream) and marks it CE; a CE frame stays
  marked.  The receiver's notification point answers a CE frame with a CNP, at most one
  per ``cnp_interval_s`` per limiter (a source's, or a flow's), which reaches the sender
  as the frame's acknowledgement would and is taken as ``on_cnm(0)``.

Events are (time, kind, source, sequence, version) tuples in a heap; a source's pending
send or timer event is cancelled by bumping its version.  Port departures are kept apart,
in a heap of (time, port) with one entry per busy port, and handled before any other
event of the same time but a rate change.  The state is plain per-port, per-input and
per-source records (:class:`Port`, :class:`Input`, :class:`Source`) and frames are
tuples, so that the event core ports to compiled code as it stands.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heappop, heappush, heapreplace
from itertools import pairwise
from typing import Any, TypeAlias, TypedDict

from qcn.core import patterns as traffic_patterns
from qcn.core import resources
from qcn.core.cp_model import (
    CongestionPoint,
    CpDecision,
    CpPortConfig,
    FbTag,
    RandomInt,
    ecn_marks,
    end_reflection,
    overwrite_fb_tag,
)
from qcn.core.flows import (
    FlowArrival,
    FlowRecord,
    expected_flows,
    flow_frames,
    ideal_fct_s,
    size_distribution,
)
from qcn.core.live import QNTZ_LEVELS, LiveRow
from qcn.core.params import (
    PAUSE_QUANTA_MAX,
    PAUSE_QUANTUM_BITS,
    CpSignal,
    DcqcnParams,
    QueueDepth,
    QueueUnit,
)
from qcn.core.patterns import Kind
from qcn.core.scenario import Scenario, ScenarioError
from qcn.core.topology import PortRef, Topology
from qcn.core.trace import Trace
from qcn.reaction_point.rules import RateLimiterRules
from qcn.reaction_point.sources import empty_slots_before_frame

# Event kinds, in the order simultaneous events are handled (then by source): the
# bottleneck's rate changes and departures first, so a frame arriving at the instant one
# leaves finds it gone; the results never depend on the order events were scheduled in.
# DEPART is never in the heap (departures have their own, see the module doc).  A CNP
# (DCQCN's) is a notification as a CNM is, and is handled in the same place of the order.
(
    RATE, DEPART, ARRIVE, CNM, CNM_POSITIVE, CNP, PAUSE, RESUME, TIMER, RETRANSMIT, FLOW, SEND,
    SAMPLE,
) = range(13)  # fmt: skip

FRESH_TAG = FbTag()
"""The Fb tag a frame leaves its source with (Fb = 0); without three-point QCN it rides
along untouched."""

Frame: TypeAlias = "tuple[int, int, int, ActiveFlow | None, int, Route, int, FbTag, bool]"
"""A frame in a queue or on a link: (CNM target, the frames it found in the queue it is
in, its bytes, its flow or None, its index in its flow, its route, the hop it is at, its
Fb tag, whether it is marked CE).  The target is its source's index, or with flows its
flow's id.  The frames it found are kept only where a departure CP reads them (else 0): a
frame is one tuple from its source to its first queue."""


@dataclass(slots=True, eq=False)
class ActiveFlow:
    """A flow of the ``flows`` workload while it has frames to send or in flight, with its
    own reaction point (``rules``, None without QCN)."""

    record: FlowRecord
    frames: int
    last_frame_bytes: int
    rules: RateLimiterRules | None
    route: Route
    next_frame: int = 0
    """The next frame never sent."""
    resend: list[int] = field(default_factory=list)
    """Frames lost, due again (their timeout has passed)."""
    delivered: int = 0
    last_send: float = -math.inf
    last_bits: int = 0
    next_eligible: float = 0.0
    """When its limiter lets it send its next frame."""
    timer_version: int = 0
    timer_at: float | None = None
    timer_queued: float = math.inf
    """The earliest TIMER event of its in the heap (inf: none; see ``_schedule_timer``)."""
    acked_at: list[float] | None = None
    """With PAUSE: when each frame's acknowledgement reaches the source (inf: not yet
    delivered), so that a timeout tells a held frame from an acknowledged one and a later
    copy is not counted twice."""
    next_cnp_s: float = -math.inf
    """DCQCN: its receiver's notification point sends it no CNP before this time."""

    @property
    def index(self) -> int:
        """Its flow id: what CNMs and timer events name it by."""
        return self.record.flow_id

    def frame_bytes(self, index: int, full: int) -> int:
        return self.last_frame_bytes if index == self.frames - 1 else full

    @property
    def has_frames(self) -> bool:
        return self.next_frame < self.frames or bool(self.resend)


RouteKey = int | tuple[int, int, tuple[PortRef, ...]]
"""A stream's route: 0; a flow's: (source, destination index, path)."""


@dataclass(slots=True)
class Source:
    index: int
    rules: RateLimiterRules | None
    offered_bps: float
    pattern: str
    line_rate_bps: float
    """Its host link's rate: it never sends faster."""
    slot_s: float
    """A frame's time on its host link (a Bernoulli slot, the gap at line rate)."""
    quantum_s: float
    """A PAUSE quantum (512 bit times) on its host link."""
    routes: dict[RouteKey, Route] = field(default_factory=dict)
    """The routes its traffic takes (the others are never built): a stream's, as 0; the
    flows', as (source, index in ``SourceHost.destinations``, path)."""
    gap: FrameGap | None = None
    """Its pattern's generator (:data:`FRAME_GAPS`)."""
    onoff: bool = False
    """Its pattern is duty-cycled: on and off periods wrap its frames."""
    load: float = 0.0
    """Its share of its link's frame slots (offered / line rate): Bernoulli's probability."""
    backlog: int = 0
    next_arrival: float = math.inf
    on_until: float = math.inf
    last_send: float = -math.inf
    send_version: int = 0
    timer_version: int = 0
    timer_at: float | None = None
    timer_queued: float = math.inf
    """The earliest TIMER event of its in the heap (inf: none; see ``_schedule_timer``)."""
    sent_frames: int = 0
    window_bytes: int = 0
    delivered_window_bytes: int = 0
    """Bytes of its that reached their destination in this sample interval."""
    paused_until: float = 0.0
    """PAUSE: the source sends nothing before this time."""
    flows: deque[ActiveFlow] = field(default_factory=deque)
    """flows: the active flows with a frame to send, in turn order."""
    link_free_at: float = 0.0
    """flows: when the host link has finished sending the last frame."""
    next_cnp_s: float = -math.inf
    """DCQCN: its receiver's notification point sends it no CNP before this time."""

    @property
    def rate_bps(self) -> float:
        return self.rules.current_rate_bps if self.rules else math.inf


@dataclass(slots=True, eq=False)
class Port:
    """A switch egress port: its FIFO, its link, its CP."""

    index: int
    name: str
    """``str(PortRef)``: how the trace names it."""
    rate_bps: float
    """Its service rate: its link's (the bottleneck's follows the schedule)."""
    buffer_pkts: int
    delay_s: float
    """Its link's one-way delay, to the next switch or the destination."""
    cp: CongestionPoint | None
    """Its CP (None: none, or QCN off)."""
    arrival_cp: CongestionPoint | None
    """Its CP if it judges frames as they arrive (the seeds'; else as they leave)."""
    reflect_rand: RandomInt
    """Three-point: the reflection draws of its CP and of its end reflection point."""
    paced: bool = False
    """Served as BMv2 serves (``network.port_service`` "bmv2"): frames leave at the later of
    their arrival and the previous departure plus ``service_bits`` at the port's rate, with
    no time on the wire (else each frame is sent for its own length, then the next)."""
    service_bits: int = 0
    """Paced: the bits a frame's turn costs, a full frame's on a port BMv2 shapes in frames
    per second (the ports whose queue can build), 0 on one it does not shape."""
    last_depart: float = -math.inf
    """Paced: the previous departure."""
    queue: deque[Frame] = field(default_factory=deque)
    queue_bytes: int = 0
    sending: bool = False
    """One of its frames is in service: its departure is scheduled."""
    paused_until: float = 0.0
    """PAUSE from downstream: it starts no frame before this time."""
    resume_at: float = -math.inf
    """PAUSE: when its pending RESUME event is due (so one is pushed per pause)."""
    pipe: deque[Frame] = field(default_factory=deque)
    """Frames on its link to the next switch, in order (each with an ARRIVE event)."""
    window_bytes: int = 0
    drops: int = 0
    cnms: int = 0
    cp_reflections: int = 0
    fb_reflections: int = 0
    p0_reflections: int = 0
    qntz_counts: list[int] = field(default_factory=lambda: [0] * QNTZ_LEVELS)
    """CNMs sent by QntzFb (the live view's histogram)."""
    ecn_rand: RandomInt | None = None
    """DCQCN: its marking draws, where its CP marks ECN in place of sampling (None: it
    does not); a port's signal is fixed for the run."""
    marks: int = 0
    """DCQCN: the frames it marked CE."""


@dataclass(slots=True, eq=False)
class Input:
    """A switch's input port under PAUSE: its partition of the switch's memory, and whom
    its PAUSE stops (a source, or the upstream switch's egress port on the link)."""

    index: int
    """Sources' inputs first, numbered as the sources; PAUSE events name inputs by it."""
    name: str
    partition_bytes: int
    delay_s: float
    """How long its PAUSE takes to reach the upstream transmitter."""
    quantum_s: float
    source: Source | None = None
    upstream: Port | None = None
    buffered_bytes: int = 0
    """Bytes of the frames that entered by it and are still in its switch."""
    holds_until: float = -math.inf
    """Until when the last PAUSE it sent holds."""
    pauses: int = 0


@dataclass(slots=True, eq=False)
class Route:
    """A source's way to one destination: the egress ports in order, and per hop the input
    it enters the switch by and how long a CNM from there takes back to the source."""

    source: Source
    ports: tuple[Port, ...]
    inputs: tuple[Input, ...]
    cnm_delay_s: tuple[float, ...]
    last: int
    """The last hop's index (its port faces the destination)."""
    ideal_rate_bps: float
    """The slowest link on the way, the host link included (the bottleneck at its
    initial rate): a lone flow's rate."""
    one_way_s: float
    """From leaving the source to reaching the destination, in the model's convention."""
    ack_after_depart_s: float
    """From leaving the last port until the acknowledgement reaches the source."""


def fast_randint(rng: random.Random) -> Callable[[int, int], int]:
    """``rng.randint`` without its argument checks: the same draws, in the same order.

    CPython's randint(lo, hi) draws getrandbits(k) for the width's bit length k until the
    value is below the width; so does this.  The CP draws once per frame, and randint's
    layers (randint -> randrange -> _randbelow) were an eighth of the simulator's time.
    """
    getrandbits = rng.getrandbits

    def randint(lo: int, hi: int) -> int:
        width = hi - lo + 1
        k = width.bit_length()
        r = getrandbits(k)
        while r >= width:
            r = getrandbits(k)
        return lo + r

    return randint


def port_stream_names(seed: int, port: PortRef, bottleneck: PortRef) -> tuple[str, str]:
    """The seeds of a port's CP and reflection streams: the bottleneck keeps the single
    bottleneck's (``cp-SEED``, ``reflect-SEED``), so its runs are as before."""
    if port == bottleneck:
        return f"cp-{seed}", f"reflect-{seed}"
    return f"cp-{seed}-{port}", f"reflect-{seed}-{port}"


def ecn_stream_name(seed: int, port: PortRef, bottleneck: PortRef) -> str:
    """The seed of a port's ECN marking stream (DCQCN), named as its CP's."""
    return f"ecn-{seed}" if port == bottleneck else f"ecn-{seed}-{port}"


BASE_BYTES = 150 * 2**20
"""The interpreter, the project's modules and the plots' (what a short run's process held,
rounded up)."""
FLOW_BYTES = 3000
"""A flow: its arrival, its record, its route, the core's copy (2.1-2.5 KB measured at
10,000 to 50,000 flows; docs/simulator.md)."""
SAMPLE_VALUE_BYTES = 80
"""A value of a sample: the core's, its Python float in the trace, the CSV and plots'."""


def memory_estimate_bytes(sc: Scenario, sample_interval_s: float) -> float:
    """What a run of ``sc`` holds at its peak, estimated before it starts: its flows (their
    expected number) and its samples (each source's four rates, each measured port's four
    counts, every ``sample_interval_s``); routes exist only for pairs that flows join."""
    wl = sc.workload
    flows = 0.0
    if wl.declared.kind is Kind.FLOWS:
        sizes = size_distribution(wl.flow_sizes, wl.ipc_fraction)
        flows = expected_flows(
            sizes, wl.load, sc.flows_capacity_bps, sc.flows_until_s, wl.flow_size_scale
        )
    samples = sc.duration_s / sample_interval_s
    values = 4 * len(sc.sources) + 4 * (len(sc.topology.cp_ports) + 1) + 5
    return BASE_BYTES + FLOW_BYTES * flows + SAMPLE_VALUE_BYTES * samples * values


def check_memory(sc: Scenario, sample_interval_s: float) -> None:
    """A run this machine's memory cannot hold: one line with the estimate."""
    resources.check_memory(
        memory_estimate_bytes(sc, sample_interval_s),
        f"{sc.name}: a simulation of {sc.duration_s:g} s on {sc.network.topology}",
        "a shorter run, fewer hosts, or fewer flows (a lower workload.load)",
    )


FrameGap: TypeAlias = Callable[["Simulation", Source], float]
"""A host-source pattern's generator on this engine: the time from one frame the source
offers to its next (it may draw from the simulation's ``rng``, and read the source's
``offered_bps``, ``slot_s`` and ``load``)."""


def constant_gap(sim: Simulation, s: Source) -> float:
    return sim.frame_bits / s.offered_bps


def bernoulli_gap(sim: Simulation, s: Source) -> float:
    """Frame slots at line rate, each busy with probability offered / line rate."""
    return s.slot_s * (1 + empty_slots_before_frame(s.load, 1.0 - sim.rng.random()))


FRAME_GAPS: dict[str, FrameGap] = {
    "bernoulli": bernoulli_gap,
    "constant": constant_gap,
    "onoff": constant_gap,  # (in on periods: its declaration says it is duty-cycled)
}
"""This engine's generator of each host-source pattern it runs (qcn.core.patterns declares
which those are): a new pattern is its declaration and its entry here."""


def patterns() -> tuple[str, ...]:
    """The traffic patterns this engine generates, as qcn.core.patterns declares them (a
    source's frames: Bernoulli slots, a constant rate, on/off periods; or the flows
    workload).  Any other is refused: a pattern this engine did not know ran as a constant
    source without a word."""
    return traffic_patterns.generated_by(traffic_patterns.PYTHON_ENGINE)


def model_refusal(scenario: Scenario) -> str:
    """What of ``scenario`` the simulator's model has not, whichever engine ("" when
    none): real TCP and iperf3 are the kernel's, run on the Mininet backend only."""
    name, wl = scenario.name, scenario.workload
    if wl.declared.kind is Kind.PROGRAM:
        return (
            f"{name} runs real iperf3 flows through kernel limiters: the simulator has no "
            "TCP or iperf3 model (run it with --backend mininet)"
        )
    if wl.declared.kind is Kind.FLOWS and wl.transport == "tcp":
        return (
            f"{name}: workload.transport tcp runs the kernel's TCP: the simulator has no TCP "
            "model (run it with --backend mininet, or transport frames)"
        )
    return ""


def pattern_refusal(scenario: Scenario) -> str:
    """Why this engine cannot generate ``scenario``'s traffic ("" when it can)."""
    if scenario.workload.pattern in patterns():
        return ""
    return (
        f"{scenario.name}: the simulator's Python engine has no traffic pattern "
        f"{scenario.workload.pattern!r} (it generates {', '.join(patterns())})"
    )


class SimulationArgs(TypedDict, total=False):
    """A simulation's keyword arguments, whichever engine runs it: :class:`Simulation`
    declares them with their defaults, and the compiled core's constructor and
    ``qcn.simulator.compiled.make_simulation`` take them as they are."""

    seed: int
    qcn: bool
    sample_interval_s: float
    cp_at_departure: bool
    progress: Callable[[float, float], None] | None
    arrivals: list[FlowArrival] | None


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int = 1,
        qcn: bool = True,
        sample_interval_s: float = 1e-3,
        cp_at_departure: bool = False,
        progress: Callable[[float, float], None] | None = None,
        arrivals: list[FlowArrival] | None = None,
    ) -> None:
        refused = model_refusal(scenario) or pattern_refusal(scenario)
        if refused:
            raise ScenarioError(refused)
        check_memory(scenario, sample_interval_s)
        self.sc = scenario
        self.seed = seed
        self.rng = random.Random(seed)
        self.qcn = qcn
        self.sample_interval_s = sample_interval_s
        self.progress = progress
        """Told (simulated time, duration) at each sample, for a progress line."""
        self.now = 0.0
        net = scenario.network
        topo = scenario.topology
        self.topology: Topology = topo
        self.frame_bytes = net.frame_bytes
        self.frame_bits = 8 * net.frame_bytes
        cp_params = scenario.params.cp
        # Only a departure CP judges departing frames; the arrival CP is the same everywhere.
        self.cp_at_departure = cp_at_departure and cp_params.depth_at is not QueueDepth.ARRIVAL
        self.q_unit = net.frame_bytes if cp_params.queue_unit is QueueUnit.BYTES else 1
        """What one frame in the buffer adds to q (every frame has the scenario's size)."""
        self.pause = net.pause
        self.pause_hi_bytes = net.pause_hi_bytes
        self.pause_lo_bytes = net.pause_lo_bytes
        self.depth_left_behind = cp_params.depth_at is QueueDepth.DEQUEUE
        self._heap: list[tuple[float, int, int, int, int]] = []
        self.next_depart = math.inf
        """The earliest departure at any port (inf: no port is sending) ..."""
        self._dheap: list[tuple[float, int]] = []
        """(departure time, port index) of every other port sending a frame: the earliest
        is kept out of the heap, so that a network with one busy port (the single
        bottleneck) never touches it."""
        self._seq = 0
        self.three_point = qcn and cp_params.three_point
        self.cp_cfg = CpPortConfig.from_params(cp_params)
        self.cnp_interval_s = scenario.params.rp.own(DcqcnParams).cnp_interval_s
        """DCQCN: a notification point's least time between two CNPs to one limiter."""
        self.cnps = 0
        self._build_ports(scenario, seed)
        self._build_sources(scenario)
        self._build_routes(scenario, seed, arrivals)
        self.trace = Trace()
        self.flow_records: list[FlowRecord] = []
        self._lost: dict[int, tuple[ActiveFlow, int]] = {}
        """flows: frames due again by retransmission event token (with PAUSE: every frame
        sent, until its timeout)."""
        self.active: dict[int, ActiveFlow] = {}
        """flows: the unfinished flows by id (CNMs and timers of finished ones are void)."""

    def _build_ports(self, scenario: Scenario, seed: int) -> None:
        """Every switch port, each CP with its own generator, and the ports the trace
        follows."""
        net, topo, qcn = scenario.network, self.topology, self.qcn
        # A port's own CP fields (the scenario's port_cp), its CP configured with them.
        port_cfgs = {p: CpPortConfig.from_params(scenario.cp_for(p)) for p, _ in scenario.port_cp}
        self.ports: list[Port] = []
        self.port_by_ref: dict[PortRef, Port] = {}
        bottleneck = scenario.bottleneck_port
        cp_ports = set(topo.cp_ports)
        # BMv2 shapes only the ports whose queue can build; the others it serves as fast as
        # it can, which no frame waits for (topologies/network.py).
        paced, shaped = net.port_service == "bmv2", set(topo.shaped_ports)
        for ref in topo.port_refs():
            link = topo.link_at(ref)
            cp_stream, reflect_stream = port_stream_names(seed, ref, bottleneck)
            cfg = port_cfgs.get(str(ref), self.cp_cfg)
            # Each CP draws from its own generator, so where it samples does not change
            # the traffic the sources offer, nor another port's draws.
            cp = (
                CongestionPoint(cfg, fast_randint(random.Random(cp_stream)))
                if qcn and ref in cp_ports
                else None
            )
            port = Port(
                len(self.ports),
                str(ref),
                link.rate_bps,
                link.buffer_pkts,
                link.delay_s,
                cp,
                None if self.cp_at_departure else cp,
                fast_randint(random.Random(reflect_stream)),
                paced,
                self.frame_bits if paced and ref in shaped else 0,
            )
            if cp is not None and cfg.signal is CpSignal.ECN:
                ecn_stream = ecn_stream_name(seed, ref, bottleneck)
                port.ecn_rand = fast_randint(random.Random(ecn_stream))
            self.ports.append(port)
            self.port_by_ref[ref] = port
        self.ecn = any(p.ecn_rand is not None for p in self.ports)
        """DCQCN: some port marks ECN (the trace counts marks and CNPs)."""
        self.bottleneck = self.port_by_ref[bottleneck]
        self.next_port = self.bottleneck
        """... and its port."""
        self.measured = [
            self.port_by_ref[r] for r in topo.port_refs() if r in cp_ports or r == bottleneck
        ]
        """The ports the trace follows: the bottleneck and every CP port (with QCN or not)."""

    def _build_sources(self, scenario: Scenario) -> None:
        """The sources, each with its reaction point's rules, and their switch inputs."""
        net, wl, topo, qcn = scenario.network, scenario.workload, self.topology, self.qcn
        self.sources: list[Source] = []
        for i, host in enumerate(scenario.sources):
            rate = topo.access_link(host.host).rate_bps
            self.sources.append(
                Source(
                    i,
                    RateLimiterRules(scenario.params.rp, self._clock, self.rng.random)
                    if qcn
                    else None,
                    wl.max_rate_bps,
                    "onoff" if i in wl.onoff_sources else wl.pattern,
                    rate,
                    self.frame_bits / rate,
                    PAUSE_QUANTUM_BITS / rate,
                )
            )
        for s in self.sources:
            s.gap = FRAME_GAPS.get(s.pattern)  # (None: the flows workload, its own arrivals)
            s.onoff = traffic_patterns.pattern(s.pattern).duty_cycled
            s.load = s.offered_bps * s.slot_s / self.frame_bits
        self.inputs: list[Input] = []
        self._switch_inputs: dict[PortRef, Input] = {}
        for s, host in zip(self.sources, scenario.sources, strict=True):
            access = topo.access_link(host.host)
            self.inputs.append(
                Input(
                    s.index,
                    f"{topo.attachment(host.host)}",
                    access.buffer_pkts * net.frame_bytes,
                    2 * access.delay_s,
                    s.quantum_s,
                    source=s,
                )
            )

    def _build_routes(
        self, scenario: Scenario, seed: int, arrivals: list[FlowArrival] | None
    ) -> None:
        """The flows to start (flows workload), and the routes the run's traffic takes."""
        wl = scenario.workload
        self.flow_mode = wl.declared.kind is Kind.FLOWS
        self.arrivals: list[FlowArrival] = []
        """flows: every flow to start, in order (``arrivals``, else drawn from the seed)."""
        if self.flow_mode:
            self.arrivals = arrivals if arrivals is not None else scenario.draw_flows(seed)
        # Only the routes the run takes: every pair's was quadratic in the hosts (261,632
        # at 512 hosts all-to-all, most never used).  Built source by source, destinations in
        # order, as all were, so inputs keep their relative order (PAUSE events' ties); with
        # per-flow ECMP a pair's flows may take several paths, each built once.
        hosts = scenario.sources
        self.arrival_routes: list[Route] = []
        """flows: each arrival's route, by its number."""
        if self.flow_mode:
            per_flow = self.topology.spreads_flows
            paths: dict[tuple[int, int], tuple[PortRef, ...]] = {}
            """Per destination: each (source, destination)'s path, found once (per
            arrival, it was a tenth of hpcc-fat-tree's setup)."""
            keys = []
            for n, a in enumerate(self.arrivals):
                pair = (a.source, a.destination)
                path = None if per_flow else paths.get(pair)
                if path is None:
                    path = paths[pair] = tuple(scenario.flow_refs(n, a))
                keys.append((*pair, path))
            for key in sorted(set(keys)):
                i, _, path = key
                s = self.sources[i]
                s.routes[key] = self._route(s, hosts[i].host, path)
            self.arrival_routes = [self.sources[k[0]].routes[k] for k in keys]
        else:
            for i, host in enumerate(hosts):
                if host.destinations:
                    s = self.sources[i]
                    s.routes[0] = self._route(s, host.host, tuple(scenario.stream_refs(i)))

    def _route(self, s: Source, src: str, refs: tuple[PortRef, ...]) -> Route:
        topo = self.topology
        access = topo.access_link(src)
        ports = tuple(self.port_by_ref[r] for r in refs)
        inputs = [self.inputs[s.index]]
        cnm_delay = [2 * access.delay_s]
        for before, _ in pairwise(refs):
            far = topo.far_end(before)
            entry = PortRef(far.node, far.port)
            inp = self._switch_inputs.get(entry)
            if inp is None:
                link = topo.link_at(before)
                inp = Input(
                    len(self.inputs),
                    str(entry),
                    link.buffer_pkts * self.frame_bytes,
                    link.delay_s,
                    PAUSE_QUANTUM_BITS / link.rate_bps,
                    upstream=self.port_by_ref[before],
                )
                self.inputs.append(inp)
                self._switch_inputs[entry] = inp
            inputs.append(inp)
            cnm_delay.append(cnm_delay[-1] + topo.link_at(before).delay_s)
        one_way = sum(p.delay_s for p in ports)
        return Route(
            s,
            ports,
            tuple(inputs),
            tuple(cnm_delay),
            len(ports) - 1,
            min([access.rate_bps, *(topo.link_at(r).rate_bps for r in refs)]),
            one_way,
            cnm_delay[-1] + 2 * ports[-1].delay_s,
        )

    # Single-bottleneck views, as the model had before networks (tests and tools use them).
    @property
    def cp(self) -> CongestionPoint | None:
        """The bottleneck port's CP."""
        return self.bottleneck.cp

    @property
    def queue(self) -> deque[Frame]:
        """The bottleneck port's queue."""
        return self.bottleneck.queue

    def _clock(self) -> float:
        return self.now

    def _push(self, t: float, kind: int, src: int = 0, version: int = 0) -> None:
        self._seq += 1
        heappush(self._heap, (t, kind, src, self._seq, version))

    # -- the offered load --------------------------------------------------------------------

    def _arrivals_until(self, s: Source, t: float) -> None:
        """Move the frames the source offered up to ``t`` into its adapter queue."""
        gap = s.gap
        assert gap is not None
        while s.next_arrival <= t:
            if s.onoff and s.next_arrival > s.on_until:
                wl = self.sc.workload
                off = self.rng.expovariate(1 / wl.mean_off_s)
                start = s.on_until + off
                s.on_until = start + self.rng.expovariate(1 / wl.mean_on_s)
                s.next_arrival = start
                continue
            s.backlog += 1
            s.next_arrival += gap(self, s)

    # -- events ------------------------------------------------------------------------------

    def _send(self, s: Source) -> None:
        now = self.now
        if now < s.paused_until:
            self._push(s.paused_until, SEND, s.index, s.send_version)
            return
        if s.next_arrival <= now:
            self._arrivals_until(s, now)
        if s.backlog == 0:
            self._push(max(s.next_arrival, now), SEND, s.index, s.send_version)
            return
        s.backlog -= 1
        s.last_send = now
        frame_bytes = self.frame_bytes
        s.sent_frames += 1
        s.window_bytes += frame_bytes
        rules = s.rules
        if rules is not None:
            rules.on_transmit(frame_bytes)
            if rules.timer_deadline != s.timer_at:
                self._schedule_timer(s)
            rate = rules.current_rate_bps
            gap = self.frame_bits / rate if rate < s.line_rate_bps else s.slot_s
        else:
            gap = s.slot_s
        route = s.routes[0]
        self._arrive(route.ports[0], (s.index, 0, frame_bytes, None, 0, route, 0, FRESH_TAG, False))
        # With nothing left to send, the next send is when the next frame is offered: one
        # event where waking at now + gap only to find the adapter empty would take two.
        due = now + gap
        if s.backlog == 0 and s.next_arrival > due:
            due = s.next_arrival
        self._seq += 1
        heappush(self._heap, (due, SEND, s.index, self._seq, s.send_version))

    def _arrive(self, port: Port, frame: Frame) -> None:
        """A frame reaches ``port`` (its hop): judged by an arrival CP, then dropped or
        queued.  Its target is whom its CNMs go to: the source's limiter, or with the
        flows workload its flow's (the flow id)."""
        target, _, frame_bytes, flow, index, route, hop, tag, ce = frame
        queue = port.queue
        q = len(queue)
        full = False
        if self.pause:
            # (A frame its input's partition has no room for never reaches the port's CP.)
            inp = route.inputs[hop]
            if inp.buffered_bytes + frame_bytes > inp.partition_bytes:
                self._drop(port)
                return
            inp.buffered_bytes += frame_bytes
            if inp.buffered_bytes > self.pause_hi_bytes:
                self._send_pause(inp, port)
        else:
            full = q >= port.buffer_pkts
        cp = port.arrival_cp
        if cp is not None:
            # The CP judges the arriving frame before the tail drop (cp.judge = "arrivals"),
            # or only one the buffer admits; a port marking ECN judges the frames it admits,
            # on its queue in bytes.
            if port.ecn_rand is not None:
                if not full and ecn_marks(port.queue_bytes, cp.cfg, port.ecn_rand):
                    port.marks += 1
                    frame = (target, q, frame_bytes, flow, index, route, hop, tag, True)
            elif not full or cp.cfg.judge_dropped:
                depth = q if self.q_unit == 1 else port.queue_bytes
                if self.three_point:
                    new = self._three_point_cp(port, cp, depth, frame)
                    if new is not tag:
                        frame = (target, q, frame_bytes, flow, index, route, hop, new, ce)
                else:
                    decision = cp.sample(depth, frame_bytes)
                    if decision is not None:  # stage 1 let it through (a tenth of the frames)
                        self._feedback(decision, target, port, route.cnm_delay_s[hop])
        elif self.cp_at_departure:
            frame = (target, q, frame_bytes, flow, index, route, hop, tag, ce)
        if full:
            self._drop(port)
            if flow is not None:
                self._lose(flow, index, route.source.index)
            return
        queue.append(frame)
        port.queue_bytes += frame_bytes
        if not port.sending:
            if self.next_depart == math.inf and port.paused_until <= self.now:
                # No port is sending (the single bottleneck's idle link): _start, inline.
                port.sending = True
                self.next_depart = self._first_departure(port)
                self.next_port = port
            else:
                self._start(port)

    def _drop(self, port: Port) -> None:
        self.trace.drops += 1
        port.drops += 1

    def _first_departure(self, port: Port) -> float:
        """When the first frame of an idle port leaves."""
        if port.paced:
            return max(self.now, port.last_depart + port.service_bits / port.rate_bps)
        return self.now + 8 * port.queue[0][2] / port.rate_bps

    def _start(self, port: Port) -> None:
        """A port with frames and none in service starts sending its first, unless a
        PAUSE holds it (then it looks again when the pause ends)."""
        now = self.now
        if port.paused_until > now:
            if port.resume_at != port.paused_until:
                port.resume_at = port.paused_until
                self._push(port.paused_until, RESUME, port.index)
            return
        port.sending = True
        depart = self._first_departure(port)
        first = self.next_depart
        if depart < first or (depart == first and port.index < self.next_port.index):
            if first != math.inf:
                heappush(self._dheap, (first, self.next_port.index))
            self.next_depart, self.next_port = depart, port
        else:
            heappush(self._dheap, (depart, port.index))

    def _forward(self, port: Port, frame: Frame) -> None:
        """A frame left ``port`` for the next switch: on the link, or there at once."""
        if port.delay_s:
            port.pipe.append(frame)
            self._push(self.now + port.delay_s, ARRIVE, port.index)
        else:
            self._next_hop(frame)

    def _next_hop(self, frame: Frame) -> None:
        """A frame reaches the next switch on its route."""
        target, _, frame_bytes, flow, index, route, hop, tag, ce = frame
        self._arrive(
            route.ports[hop + 1], (target, 0, frame_bytes, flow, index, route, hop + 1, tag, ce)
        )

    def _left_partition(self, inp: Input, frame_bytes: int) -> None:
        """One of the input's frames left the switch: below lo, a paused upstream
        transmitter is resumed."""
        inp.buffered_bytes -= frame_bytes
        if inp.buffered_bytes < self.pause_lo_bytes and inp.holds_until > self.now:
            inp.holds_until = self.now
            self._push(self.now + inp.delay_s, PAUSE, inp.index, 0)

    def _send_pause(self, inp: Input, port: Port) -> None:
        """The input is above hi: a PAUSE upstream, unless the last one still holds when
        this one would arrive.  It lasts as long as ``port``'s queue (the one the frame
        joined) takes to drain."""
        arrives = self.now + inp.delay_s
        if arrives < inp.holds_until:
            return
        drain_bits = len(port.queue) * port.service_bits if port.paced else 8 * port.queue_bytes
        drain_s = drain_bits / port.rate_bps
        quanta = min(PAUSE_QUANTA_MAX, max(1, math.ceil(drain_s / inp.quantum_s)))
        inp.holds_until = arrives + quanta * inp.quantum_s
        inp.pauses += 1
        self._push(arrives, PAUSE, inp.index, quanta)

    def _on_pause(self, s: Source, quanta: int) -> None:
        """A PAUSE reaches the source: stop for ``quanta``; a pause of 0 resumes."""
        if quanta:
            s.paused_until = self.now + quanta * s.quantum_s
            return
        s.paused_until = self.now
        s.send_version += 1
        self._push(self.now, SEND, s.index, s.send_version)

    def _pause_port(self, port: Port, quanta: int, quantum_s: float) -> None:
        """A PAUSE reaches a switch's egress port: it starts no frame for ``quanta``; a
        pause of 0 lets it send at once."""
        if quanta:
            port.paused_until = self.now + quanta * quantum_s
            return
        port.paused_until = self.now
        if not port.sending and port.queue:
            self._start(port)

    def _congestion_point(self, port: Port, target: int, delay_s: float, q: int) -> None:
        """The departure CP judges a frame as it leaves."""
        assert port.cp is not None
        decision = port.cp.sample(q, self.frame_bytes)
        if decision is not None:
            self._feedback(decision, target, port, delay_s)

    # -- flows -------------------------------------------------------------------------------

    def _flow_arrives(self, number: int) -> None:
        """Arrival ``number`` starts its flow, with a limiter at line rate."""
        net = self.sc.network
        arrival = self.arrivals[number]
        s = self.sources[arrival.source]
        route = self.arrival_routes[number]
        size = arrival.size_bytes
        frames, last = flow_frames(size, net.frame_bytes)
        record = FlowRecord(
            flow_id=number,
            source=s.index,
            destination=arrival.destination,
            size_bytes=size,
            start_s=self.now,
            ideal_fct_s=ideal_fct_s(size, net.frame_bytes, route.ideal_rate_bps, route.one_way_s),
            hops=route.last + 1,
        )
        self.flow_records.append(record)
        rules = (
            RateLimiterRules(self.sc.params.rp, self._clock, self.rng.random) if self.qcn else None
        )
        flow = ActiveFlow(record, frames, last, rules, route, next_eligible=self.now)
        if self.pause:
            flow.acked_at = [math.inf] * frames
        self.active[flow.index] = flow
        s.flows.append(flow)
        self._kick(s)
        if number + 1 < len(self.arrivals):
            self._push(self.arrivals[number + 1].start_s, FLOW, 0, number + 1)

    def _send_flows(self, s: Source) -> None:
        """Source ``s``'s host link is free: the next of its flows in turn that its limiter
        lets send sends a frame."""
        now, flows = self.now, s.flows
        if now < s.paused_until:
            self._push(s.paused_until, SEND, s.index, s.send_version)
            return
        for _ in range(len(flows)):
            if flows[0].next_eligible <= now:
                break
            flows.rotate(-1)
        else:
            if flows:  # (else it waits for a flow or a retransmission to kick it)
                self._push(min(f.next_eligible for f in flows), SEND, s.index, s.send_version)
            return
        flow = flows.popleft()
        if flow.resend:
            index = flow.resend.pop(0)
        else:
            index = flow.next_frame
            flow.next_frame += 1
        if flow.has_frames:
            flows.append(flow)
        frame_bytes = flow.frame_bytes(index, self.frame_bytes)
        frame_bits = 8 * frame_bytes
        s.sent_frames += 1
        s.window_bytes += frame_bytes
        rate = s.line_rate_bps
        rules = flow.rules
        if rules is not None:
            rules.on_transmit(frame_bytes)
            if rules.timer_deadline != flow.timer_at:
                self._schedule_timer(flow)
            rate = min(rate, rules.current_rate_bps)
        flow.last_send, flow.last_bits = now, frame_bits
        flow.next_eligible = now + frame_bits / rate
        s.link_free_at = now + frame_bits / s.line_rate_bps
        if self.pause:
            self._await_ack(flow, index, s.index)
        route = flow.route
        self._arrive(
            route.ports[0],
            (flow.index, 0, frame_bytes, flow, index, route, 0, FRESH_TAG, False),
        )
        self._push(s.link_free_at, SEND, s.index, s.send_version)

    def _kick(self, s: Source) -> None:
        """Source ``s`` may have a frame to send sooner than its pending send: it looks again
        once its link is free."""
        s.send_version += 1
        self._push(max(self.now, s.link_free_at), SEND, s.index, s.send_version)

    def _limiter(self, target: int) -> Source | ActiveFlow | None:
        """Whom a CNM or timer event for ``target`` is for: the source's limiter, or with
        the flows workload the flow's (None once the flow has finished)."""
        return self.active.get(target) if self.flow_mode else self.sources[target]

    def _lose(self, flow: ActiveFlow, index: int, src: int) -> None:
        """A flow's frame was dropped: it is due again when its timeout expires."""
        self._seq += 1
        self._lost[self._seq] = (flow, index)
        heappush(
            self._heap,
            (self.now + self.sc.workload.rto_s, RETRANSMIT, src, self._seq, self._seq),
        )

    def _await_ack(self, flow: ActiveFlow, index: int, src: int) -> None:
        """With PAUSE: the frame just sent is due again at its timeout unless its
        acknowledgement has come by then (:meth:`_retransmit` looks)."""
        self._lose(flow, index, src)

    def _retransmit(self, s: Source, token: int) -> None:
        flow, index = self._lost.pop(token)
        if flow.acked_at is not None and (
            flow.index not in self.active or flow.acked_at[index] <= self.now
        ):
            return  # PAUSE: acknowledged in time (or the flow is done)
        flow.record.retransmitted_frames += 1
        if not flow.has_frames:
            s.flows.append(flow)  # it had left the turns with nothing more to send
        flow.resend.append(index)
        self._kick(s)

    def _delivered(
        self, flow: ActiveFlow, index: int, frame_bytes: int, at: float, tag: FbTag
    ) -> None:
        """A flow's frame left its last port at ``at``: it reaches the receiver one link
        later (a later copy of a frame already there counts for nothing)."""
        route = flow.route
        if self.three_point:
            self._end_reflection(route.ports[-1], flow.index, route.cnm_delay_s[-1], tag)
        if flow.acked_at is not None:
            if flow.acked_at[index] != math.inf:
                return
            flow.acked_at[index] = at + route.ack_after_depart_s
        route.source.delivered_window_bytes += frame_bytes
        flow.delivered += 1
        if flow.delivered == flow.frames:
            flow.record.finish_s = at + route.ports[-1].delay_s
            del self.active[flow.index]

    def _notify(self, lim: Source | ActiveFlow, port: Port, route: Route) -> None:
        """DCQCN's notification point: a CE frame leaving its last port (``port``, now)
        reaches the receiver one link later, which sends the frame's limiter a CNP unless
        it sent it one less than ``cnp_interval_s`` before (the first always goes).  The CNP
        takes the frame's acknowledgement's way back (``ack_after_depart_s``: the CNM's way
        from the last port, plus that link both ways)."""
        at = self.now + port.delay_s
        if at < lim.next_cnp_s:
            return
        lim.next_cnp_s = at + self.cnp_interval_s
        self.cnps += 1
        self._push(self.now + route.ack_after_depart_s, CNP, lim.index)

    def _feedback(self, decision: CpDecision, target: int, port: Port, delay_s: float) -> None:
        """A CNM (or ECM's positive message) from ``port`` reaches its source ``delay_s``
        later."""
        if decision.cnm:
            self._send_cnm(
                target, decision.qntz_fb, port, delay_s, CNM_POSITIVE if decision.positive else CNM
            )

    def _send_cnm(
        self, target: int, qntz_fb: int, port: Port, delay_s: float, kind: int = CNM
    ) -> None:
        """A message from ``port`` to ``target``, which reaches it ``delay_s`` later."""
        self.trace.cnms += 1
        port.cnms += 1
        if kind == CNM:
            port.qntz_counts[qntz_fb] += 1
        self._push(self.now + delay_s, kind, target, qntz_fb)

    def _three_point_cp(self, port: Port, cp: CongestionPoint, q: int, frame: Frame) -> FbTag:
        """A three-point CP judges an arriving frame: the tag it leaves with
        (:func:`overwrite_fb_tag`); a CP that takes the tag over may reflect it."""
        target, _, frame_bytes, _, _, route, hop, tag, _ = frame
        decision = cp.sample(q, frame_bytes)
        if decision is None:
            return tag
        new = overwrite_fb_tag(decision, tag, cp.cfg, port.index, port.reflect_rand)
        if new is not tag and new.reflected:
            port.cp_reflections += 1
            self._send_cnm(target, new.qntz_fb, port, route.cnm_delay_s[hop])
        return new

    def _end_reflection(self, port: Port, target: int, delay_s: float, tag: FbTag) -> None:
        """A frame leaves its last port, for the end reflection point."""
        reflected = end_reflection(tag, self.cp_cfg, port.index, port.reflect_rand)
        if reflected is not None:
            extra = self.trace.extra
            if reflected.qntz_fb:
                key = "fb_reflections"
                port.fb_reflections += 1
            else:
                key = "p0_reflections"
                port.p0_reflections += 1
            extra[key] = extra.get(key, 0) + 1
            self._send_cnm(target, reflected.qntz_fb, port, delay_s)

    def _rate_changed(self, lim: Source | ActiveFlow) -> None:
        """CR changed: re-pace the source's next send (a flow's: when its limiter lets it
        send again, its host looking again once its link is free)."""
        if isinstance(lim, ActiveFlow):
            assert lim.rules is not None
            s = lim.route.source
            rate = min(lim.rules.current_rate_bps, s.line_rate_bps)
            lim.next_eligible = lim.last_send + lim.last_bits / rate
            self._kick(s)
            return
        lim.send_version += 1
        gap = self.frame_bits / min(lim.rate_bps, lim.line_rate_bps)
        self._push(max(self.now, lim.last_send + gap), SEND, lim.index, lim.send_version)

    def _schedule_timer(self, s: Source | ActiveFlow) -> None:
        """The timer's event at its new deadline, unless an event of its that is due
        earlier is in the heap: that one, found stale, pushes the deadline then
        (``_timer_event``).  A timer moved later (at every CNM) pushed an event each time,
        and the heap held some 50 stale ones a flow (30,000 at 1,024 hosts; docs/simulator.md)."""
        assert s.rules is not None
        deadline = s.rules.timer_deadline
        if deadline is not None and deadline != s.timer_at:
            s.timer_at = deadline
            s.timer_version += 1
            if deadline <= s.timer_queued:
                s.timer_queued = deadline
                self._push(deadline, TIMER, s.index, s.timer_version)

    def _timer_event(self, lim: Source | ActiveFlow, t: float, version: int) -> None:
        """A timer's event at ``t``: it fires if it is the timer's latest; a stale one
        pushes the timer's later deadline if no event of its is due before it."""
        assert lim.rules is not None
        if t == lim.timer_queued:
            lim.timer_queued = math.inf
        if version == lim.timer_version:
            lim.timer_at = None
            if lim.rules.advance(t):
                self._rate_changed(lim)
            self._schedule_timer(lim)
        elif lim.timer_at is not None and t < lim.timer_at < lim.timer_queued:
            lim.timer_queued = lim.timer_at
            self._push(lim.timer_at, TIMER, lim.index, lim.timer_version)

    def _sample(self) -> None:
        tr, dt = self.trace, self.sample_interval_s
        b = self.bottleneck
        tr.times_s.append(self.now)
        tr.queue_pkts.append(len(b.queue))
        tr.drops_so_far.append(tr.drops)
        tr.throughput_bps.append(8 * b.window_bytes / dt)
        tr.capacity_bps.append(b.rate_bps)
        tr.source_current_rate_bps.append([self._current_rate_bps(s) for s in self.sources])
        tr.source_target_rate_bps.append(
            [s.rules.target_rate_bps if s.rules else math.nan for s in self.sources]
        )
        tr.source_throughput_bps.append([8 * s.window_bytes / dt for s in self.sources])
        tr.source_delivered_bps.append([8 * s.delivered_window_bytes / dt for s in self.sources])
        for p in self.measured:
            tr.port_queue_pkts[p.name].append(len(p.queue))
            tr.port_throughput_bps[p.name].append(8 * p.window_bytes / dt)
            tr.port_drops_so_far[p.name].append(p.drops)
            tr.port_cnms_so_far[p.name].append(p.cnms)
        for p in self.ports:
            p.window_bytes = 0
        for s in self.sources:
            s.window_bytes = 0
            s.delivered_window_bytes = 0

    # -- a live view (qcn.core.live) ----------------------------------------------------------

    def live_row(self) -> LiveRow:
        """What the run measures now, for a live view."""
        measured = self.measured
        return LiveRow(
            self.now,
            tuple(len(p.queue) for p in measured),
            tuple(p.cnms for p in measured),
            self.trace.drops,
            tuple(self._current_rate_bps(s) for s in self.sources),
            tuple(s.rules.target_rate_bps if s.rules else math.nan for s in self.sources),
            tuple(map(sum, zip(*(p.qntz_counts for p in self.ports), strict=True))),
        )

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None:
        """The CP of the port named ``port`` takes ``cfg`` from now on (its registers kept)."""
        cp = self.ports[self.port_index(port)].cp
        if cp is None:
            raise ValueError(f"port {port} runs no CP")
        if (cfg.signal is CpSignal.ECN) != (cp.cfg.signal is CpSignal.ECN):
            raise ValueError(f"port {port}: whether a port marks ECN is fixed for the run")
        cp.reconfigure(cfg)

    def port_index(self, name: str) -> int:
        for p in self.ports:
            if p.name == name:
                return p.index
        raise ValueError(f"no port {name}")

    def _current_rate_bps(self, s: Source) -> float:
        """A source's CR; with the flows workload, its slowest active flow's."""
        line = s.line_rate_bps
        if self.flow_mode:
            return min((f.rules.current_rate_bps for f in s.flows if f.rules), default=line)
        return min(s.rate_bps, line)

    def _finish_trace(self, events: int, started: float) -> Trace:
        tr = self.trace
        tr.events = events
        tr.flows = self.flow_records
        tr.frames_in = sum(s.sent_frames for s in self.sources)
        if self.pause:
            tr.extra["pauses"] = sum(i.pauses for i in self.inputs)
            tr.extra["pauses_per_source_max"] = max(
                self.inputs[s.index].pauses for s in self.sources
            )
            if len(self.inputs) > len(self.sources):
                tr.extra["pauses_between_switches"] = sum(
                    i.pauses for i in self.inputs[len(self.sources) :]
                )
        self._ecn_counts(tr)
        measured = {p.name for p in self.measured}
        tr.port_counts = {
            p.name: {
                "drops": p.drops,
                "cnms": p.cnms,
                **(
                    {
                        "cp_reflections": p.cp_reflections,
                        "fb_reflections": p.fb_reflections,
                        "p0_reflections": p.p0_reflections,
                    }
                    if self.three_point
                    else {}
                ),
            }
            for p in self.ports
            if p.name in measured or p.drops or p.fb_reflections or p.p0_reflections
        }
        if self.pause:
            for inp in self.inputs:
                if inp.upstream is not None and inp.pauses:
                    tr.port_counts.setdefault(inp.upstream.name, {})["paused"] = inp.pauses
        for p in self.ports:
            if p.ecn_rand is not None:
                tr.port_counts.setdefault(p.name, {})["marks"] = p.marks
        tr.wall_s = time.perf_counter() - started
        return tr

    def _ecn_counts(self, tr: Trace) -> None:
        """DCQCN: the frames marked CE and the CNPs sent, over the run (summary.json's
        ``marks`` and ``cnps``; each marking port's in its ``ports``)."""
        if self.ecn:
            tr.extra["marks"] = sum(p.marks for p in self.ports)
            tr.extra["cnps"] = self.cnps

    def partial_trace(self) -> Trace:
        """The trace as far as the run got, for a run cut short (Ctrl-C): its samples taken
        whole (one cut in the middle of its row is left out; the ports' series too) and the
        flows started so far, so that what was measured is kept (``qcn run`` writes its
        CSVs)."""
        tr = self.trace
        rows: list[list[Any]] = [
            tr.times_s, tr.queue_pkts, tr.throughput_bps, tr.capacity_bps,
            tr.source_current_rate_bps, tr.source_target_rate_bps, tr.source_throughput_bps,
            tr.drops_so_far, tr.source_delivered_bps,
        ]  # fmt: skip
        for series in (
            tr.port_queue_pkts,
            tr.port_throughput_bps,
            tr.port_drops_so_far,
            tr.port_cnms_so_far,
        ):
            rows += series.values()
        whole = min(len(r) for r in rows)
        for r in rows:
            del r[whole:]
        tr.flows = self.flow_records
        self._ecn_counts(tr)
        return tr

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> Trace:
        started = time.perf_counter()
        wl = self.sc.workload
        for p in self.measured:
            for series in (
                self.trace.port_queue_pkts,
                self.trace.port_throughput_bps,
                self.trace.port_drops_so_far,
                self.trace.port_cnms_so_far,
            ):
                series[p.name] = []
        for s in self.sources:
            start = s.index * wl.stagger_s
            s.next_arrival = start
            if s.onoff:
                s.on_until = start + self.rng.expovariate(1 / wl.mean_on_s)
            if not self.flow_mode:
                self._push(start, SEND, s.index, 0)
        if self.arrivals:
            self._push(self.arrivals[0].start_s, FLOW, 0, 0)
        for change in self.sc.schedule:
            self._push(change.at_s, RATE, 0, 0)
        self._push(self.sample_interval_s, SAMPLE)
        rates = [c.bottleneck_rate_bps for c in self.sc.schedule]
        end = self.sc.duration_s
        heap, dheap, sources, ports = self._heap, self._dheap, self.sources, self.ports
        inputs = self.inputs
        flow_mode, pause, three_point = self.flow_mode, self.pause, self.three_point
        cp_at_departure, left_behind = self.cp_at_departure, self.depth_left_behind
        events = 0
        while heap:
            depart = self.next_depart
            head = heap[0]
            if depart < head[0] or (depart == head[0] and head[1] > DEPART):
                # The frame in service at a port leaves it.
                if depart > end:
                    break
                self.now = depart
                events += 1
                port = self.next_port
                port.last_depart = depart
                queue = port.queue
                frame = queue.popleft()
                target, q, frame_bytes, flow, number, route, hop, tag, ce = frame
                port.queue_bytes -= frame_bytes
                port.window_bytes += frame_bytes
                if pause:
                    self._left_partition(route.inputs[hop], frame_bytes)
                if cp_at_departure and port.cp is not None:
                    self._congestion_point(
                        port, target, route.cnm_delay_s[hop], len(queue) if left_behind else q
                    )
                # The port's next departure first: the frame's next hop may push more.
                if queue and port.paused_until <= depart:
                    bits = port.service_bits if port.paced else 8 * queue[0][2]
                    then = depart + bits / port.rate_bps
                    if dheap and dheap[0] < (then, port.index):
                        self.next_depart, index = heapreplace(dheap, (then, port.index))
                        self.next_port = ports[index]
                    else:
                        self.next_depart = then
                else:
                    port.sending = False
                    if dheap:
                        self.next_depart, index = heappop(dheap)
                        self.next_port = ports[index]
                    else:
                        self.next_depart = math.inf
                    if queue:
                        self._start(port)
                if hop != route.last:
                    self._forward(port, frame)
                elif flow is not None:
                    if ce:
                        self._notify(flow, port, route)
                    self._delivered(flow, number, frame_bytes, depart, tag)
                else:
                    if ce:
                        self._notify(route.source, port, route)
                    route.source.delivered_window_bytes += frame_bytes
                    if three_point:
                        self._end_reflection(port, target, route.cnm_delay_s[hop], tag)
                continue
            t, kind, src, _, version = heappop(heap)
            if t > end:
                break
            self.now = t
            events += 1
            if kind == SEND:
                s = sources[src]
                if version == s.send_version:
                    if flow_mode:
                        self._send_flows(s)
                    else:
                        self._send(s)
            elif kind == ARRIVE:
                self._next_hop(ports[src].pipe.popleft())
            elif kind in (CNM, CNM_POSITIVE, CNP):
                # A CNM's version is its QntzFb; a CNP's is 0: it carries no feedback
                # (DCQCN's cut is alpha's).
                lim = self._limiter(src)
                if lim is None:  # the flow finished while the message was on its way
                    extra = self.trace.extra
                    late = "cnps_after_finish" if kind == CNP else "cnms_after_finish"
                    extra[late] = extra.get(late, 0) + 1
                    continue
                assert lim.rules is not None
                lim.rules.on_cnm(version, positive=kind == CNM_POSITIVE)
                self._schedule_timer(lim)
                self._rate_changed(lim)
            elif kind == TIMER:
                lim = self._limiter(src)
                if lim is not None and lim.rules is not None:
                    self._timer_event(lim, t, version)
            elif kind == PAUSE:
                inp = inputs[src]
                if inp.source is not None:
                    self._on_pause(inp.source, version)
                else:
                    assert inp.upstream is not None
                    self._pause_port(inp.upstream, version, inp.quantum_s)
            elif kind == RESUME:
                port = ports[src]
                if not port.sending and port.queue:
                    self._start(port)
            elif kind == FLOW:
                self._flow_arrives(version)
            elif kind == RETRANSMIT:
                self._retransmit(sources[src], version)
            elif kind == RATE:
                self.bottleneck.rate_bps = rates.pop(0)
            elif kind == SAMPLE:
                self._sample()
                self._push(t + self.sample_interval_s, SAMPLE)
                if self.progress is not None:
                    self.progress(t, end)
        return self._finish_trace(events, started)
