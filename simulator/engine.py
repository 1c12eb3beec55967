"""A packet-level discrete-event simulator of a scenario, at full (unscaled) rates.

It runs the project's own code for both ends of the loop, imported, not rewritten:
:class:`qcn.core.cp_model.CongestionPoint` at the bottleneck and one
:class:`reaction_point.rules.RateLimiterRules` per source.

Model (the seeds' single-bottleneck experiments):

- Source i offers frames (Bernoulli slots at line rate, constant rate, or exponential
  on/off) into an unbounded adapter queue; its rate limiter sends them paced at CR.  A
  source's frames reach the bottleneck as they leave it: the whole round trip is put on the
  CNM's way back, which leaves the loop's delay and dynamics unchanged.
- The bottleneck is a FIFO with a buffer in packets and a service rate that follows the
  schedule; a frame finding the buffer full is dropped.  The CP sees each accepted frame
  on arrival with q = what the buffer holds, in bytes or frames (``queue_unit``): the
  seeds' CP, and BMv2's (``depth_at = "arrival"``, the pipeline counting its queue).
  Modelling BMv2's departure CP (``cp_at_departure`` with ``depth_at`` "enqueue" or
  "dequeue"), it sees each frame as it leaves, with q = the frames it found (BMv2's
  enq_qdepth) or the frames it leaves behind (deq_qdepth).
- A CNM reaches its source one RTT after the CP sent it (an ECM CP's positive message
  too, as ``CNM_POSITIVE``).
- Three-point QCN (``cp.three_point``, seed 003): each frame carries an Fb tag, fresh
  (Fb = 0) from its source.  The CP overwrites it on a sample with Fb < 0 and reflects it
  itself with its reflection probability (a CNM one RTT later), else the tag travels on;
  as the frame leaves the bottleneck, the end reflection point reflects an unreflected
  Fb < 0 with that probability and Fb = 0 with P0, one RTT later too (the whole round
  trip is on the way back here as well).  The same model functions as the pipeline's
  (qcn.core.cp_model.overwrite_fb_tag, end_reflection).
- With ``network.pause`` (seed 001's switch), the buffer is partitioned per input: each
  source may hold ``buffer_pkts`` frames at the bottleneck, and there is no output queue
  limit.  When a source's bytes there pass ``pause_hi_bytes``, the bottleneck sends it an
  802.3x PAUSE (one RTT to take effect, like a CNM) for as long as the queue ahead takes to
  drain (at most 65535 quanta of 512 bit times), again whenever the last one runs out
  while the input is still above; below ``pause_lo_bytes`` it sends a pause of 0 (resume).
  A paused source sends nothing; what it had in flight still arrives.
- The ``flows`` workload (seed 003's dynamic flows, docs/fct.md): each source starts flows
  as a Poisson process, their sizes from the workload's distribution, each cut into frames
  of at most ``frame_bytes`` (qcn.core.flows.flow_frames).  As in seed 003, every flow
  has its own reaction point, which starts at line rate; a CNM goes to the sampled frame's
  flow.  A source's flows share its host link: the flows its limiters let send take turns,
  a frame each, at line rate.  A frame reaches the receiver half an RTT after it leaves
  the bottleneck; a dropped frame is sent again ``rto_s`` after it was sent (its
  acknowledgement never came), in its flow's next turn.  A flow finishes when its last
  frame has reached the receiver; its limiter goes with it.

Events are (time, sequence, kind, source, version) tuples in a heap; a source's pending
send or timer event is cancelled by bumping its version.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Any

from qcn.core.cp_model import (
    CongestionPoint,
    CpDecision,
    CpPortConfig,
    FbTag,
    end_reflection,
    overwrite_fb_tag,
)
from qcn.core.flows import (
    FlowArrival,
    FlowRecord,
    flow_frames,
    ideal_fct_s,
)
from qcn.core.frames import PAUSE_QUANTA_MAX, PAUSE_QUANTUM_BITS
from qcn.core.params import QueueDepth, QueueUnit
from qcn.core.scenario import Scenario, require_backend
from qcn.core.trace import Trace
from reaction_point.rules import RateLimiterRules
from reaction_point.sources import empty_slots_before_frame

# Event kinds, in the order simultaneous events are handled (then by source): the
# bottleneck's rate changes and departures first, so a frame arriving at the instant one
# leaves finds it gone; the results never depend on the order events were scheduled in.
RATE, DEPART, CNM, CNM_POSITIVE, PAUSE, TIMER, RETRANSMIT, FLOW, SEND, SAMPLE = range(10)


@dataclass(slots=True, eq=False)
class ActiveFlow:
    """A flow of the ``flows`` workload while it has frames to send or in flight, with its
    own reaction point (``rules``, None without QCN)."""

    record: FlowRecord
    frames: int
    last_frame_bytes: int
    rules: RateLimiterRules | None
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

    @property
    def index(self) -> int:
        """Its flow id: what CNMs and timer events name it by."""
        return self.record.flow_id

    def frame_bytes(self, index: int, full: int) -> int:
        return self.last_frame_bytes if index == self.frames - 1 else full

    @property
    def has_frames(self) -> bool:
        return self.next_frame < self.frames or bool(self.resend)


@dataclass(slots=True)
class Source:
    index: int
    rules: RateLimiterRules | None
    offered_bps: float
    pattern: str
    backlog: int = 0
    next_arrival: float = math.inf
    on_until: float = math.inf
    last_send: float = -math.inf
    send_version: int = 0
    timer_version: int = 0
    timer_at: float | None = None
    sent_frames: int = 0
    window_bytes: int = 0
    buffered_bytes: int = 0
    """PAUSE: the source's frames in the bottleneck's buffer (its input's partition)."""
    paused_until: float = 0.0
    """PAUSE: the source sends nothing before this time."""
    pause_holds_until: float = -math.inf
    """PAUSE, the bottleneck's view: until when the last PAUSE it sent this source holds."""
    pauses: int = 0
    flows: deque[ActiveFlow] = field(default_factory=deque)
    """flows: the active flows with a frame to send, in turn order."""
    link_free_at: float = 0.0
    """flows: when the host link has finished sending the last frame."""

    @property
    def rate_bps(self) -> float:
        return self.rules.current_rate_bps if self.rules else math.inf


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
        require_backend(scenario, "sim")
        self.sc = scenario
        self.rng = random.Random(seed)
        self.qcn = qcn
        self.sample_interval_s = sample_interval_s
        self.progress = progress
        """Told (simulated time, duration) at each sample, for a progress line."""
        self.now = 0.0
        net, wl = scenario.network, scenario.workload
        self.frame_bytes = net.frame_bytes
        self.frame_bits = 8 * net.frame_bytes
        self.slot_s = self.frame_bits / net.line_rate_bps
        self.line_rate_bps = net.line_rate_bps
        self.line_gap_s = self.frame_bits / net.line_rate_bps
        self.buffer_pkts = net.buffer_pkts
        self.rtt_s = net.rtt_s
        self.capacity = net.bottleneck_rate_bps
        self.queue: deque[tuple[int, int, int, ActiveFlow | None, int]] = deque()
        """(source, frames it found on arrival, its bytes, its flow and frame index or
        (None, 0)) of each frame in the buffer."""
        self.queue_bytes = 0
        cp_params = scenario.params.cp
        # Only a departure CP judges departing frames; the arrival CP is the same everywhere.
        self.cp_at_departure = cp_at_departure and cp_params.depth_at is not QueueDepth.ARRIVAL
        self.q_unit = net.frame_bytes if cp_params.queue_unit is QueueUnit.BYTES else 1
        """What one frame in the buffer adds to q (every frame has the scenario's size)."""
        self.pause = net.pause
        self.partition_bytes = net.buffer_pkts * net.frame_bytes
        self.quantum_s = PAUSE_QUANTUM_BITS / net.line_rate_bps
        self.depth_left_behind = cp_params.depth_at is QueueDepth.DEQUEUE
        self.next_depart = math.inf
        """When the frame in service leaves (inf: the link is idle).  Kept out of the heap:
        one departure is pending at a time, and a frame's two heap operations fewer count."""
        self.window_bytes = 0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        # The CP draws from its own generator, so where it samples does not change the
        # traffic the sources offer.
        self.cp = (
            CongestionPoint(
                CpPortConfig.from_params(scenario.params.cp),
                fast_randint(random.Random(f"cp-{seed}")),
            )
            if qcn
            else None
        )
        self.three_point = qcn and cp_params.three_point
        self.tags: deque[FbTag] = deque()
        """Three-point: the Fb tag of each frame in the buffer, in step with ``queue``."""
        self.reflect_rand = fast_randint(random.Random(f"reflect-{seed}"))
        """Three-point: the reflection draws, apart from the CP's sampling draws."""
        self.arrival_cp = None if self.cp_at_departure else self.cp
        """The CP when it judges frames as they arrive (in ``_send``; else in the loop)."""
        self.sources = [
            Source(
                i,
                RateLimiterRules(scenario.params.rp, self._clock, self.rng.random) if qcn else None,
                wl.max_rate_bps,
                "onoff" if i in wl.onoff_sources else wl.pattern,
            )
            for i in range(net.sources)
        ]
        self.trace = Trace()
        self.flow_mode = wl.pattern == "flows"
        self.flow_records: list[FlowRecord] = []
        self._lost: dict[int, tuple[ActiveFlow, int]] = {}
        """flows: lost frames by retransmission event token."""
        self.active: dict[int, ActiveFlow] = {}
        """flows: the unfinished flows by id (CNMs and timers of finished ones are void)."""
        self.arrivals: list[FlowArrival] = []
        """flows: every flow to start, in order (``arrivals``, else drawn from the seed)."""
        if self.flow_mode:
            self.arrivals = arrivals if arrivals is not None else scenario.draw_flows(seed)
            self.one_way_s = net.rtt_s / 2
            self.ideal_rate_bps = min(net.line_rate_bps, net.bottleneck_rate_bps)

    def _clock(self) -> float:
        return self.now

    def _push(self, t: float, kind: int, src: int = 0, version: int = 0) -> None:
        self._seq += 1
        heappush(self._heap, (t, kind, src, self._seq, version))

    # -- the offered load --------------------------------------------------------------------

    def _arrivals_until(self, s: Source, t: float) -> None:
        """Move the frames the source offered up to ``t`` into its adapter queue."""
        wl = self.sc.workload
        slot_s = self.slot_s
        # Bernoulli: frame slots at line rate, each busy with probability offered / line rate.
        bernoulli = s.pattern == "bernoulli"
        load = s.offered_bps * slot_s / self.frame_bits
        random = self.rng.random
        while s.next_arrival <= t:
            if s.pattern == "onoff" and s.next_arrival > s.on_until:
                off = self.rng.expovariate(1 / wl.mean_off_s)
                start = s.on_until + off
                s.on_until = start + self.rng.expovariate(1 / wl.mean_on_s)
                s.next_arrival = start
                continue
            s.backlog += 1
            if bernoulli:
                s.next_arrival += slot_s * (1 + empty_slots_before_frame(load, 1.0 - random()))
            else:
                s.next_arrival += self.frame_bits / s.offered_bps

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
            gap = self.frame_bits / rate if rate < self.line_rate_bps else self.line_gap_s
        else:
            gap = self.line_gap_s
        self._reach_bottleneck(s, s.index, frame_bytes)
        # With nothing left to send, the next send is when the next frame is offered: one
        # event where waking at now + gap only to find the adapter empty would take two.
        due = now + gap
        if s.backlog == 0 and s.next_arrival > due:
            due = s.next_arrival
        self._seq += 1
        heappush(self._heap, (due, SEND, s.index, self._seq, s.send_version))

    def _reach_bottleneck(
        self,
        s: Source,
        target: int,
        frame_bytes: int,
        flow: ActiveFlow | None = None,
        index: int = 0,
    ) -> None:
        """A frame of source ``s`` reaches the bottleneck: dropped, or judged by an arrival
        CP and queued.  ``target`` is whom its CNMs go to: the source's limiter, or with
        the flows workload its flow's (the flow id)."""
        queue = self.queue
        q = len(queue)
        if (
            s.buffered_bytes + frame_bytes > self.partition_bytes
            if self.pause
            else q >= self.buffer_pkts
        ):
            self.trace.drops += 1
            if flow is not None:
                self._lose(flow, index, s.index)
            return
        if self.pause:
            s.buffered_bytes += frame_bytes
            if s.buffered_bytes > self.sc.network.pause_hi_bytes:
                self._send_pause(s)
        depth = q if self.q_unit == 1 else self.queue_bytes
        if self.three_point:
            self.tags.append(self._three_point_cp(target, depth, frame_bytes))
        elif self.arrival_cp is not None:
            decision = self.arrival_cp.sample(depth, frame_bytes)
            if decision is not None:  # stage 1 let it through (a tenth of the frames)
                self._feedback(decision, target)
        queue.append((target, q, frame_bytes, flow, index))
        self.queue_bytes += frame_bytes
        if self.next_depart == math.inf:
            self.next_depart = self.now + 8 * frame_bytes / self.capacity

    def _left_partition(self, s: Source, frame_bytes: int) -> None:
        """One of the source's frames left: below lo, a paused input is resumed."""
        s.buffered_bytes -= frame_bytes
        if s.buffered_bytes < self.sc.network.pause_lo_bytes and s.pause_holds_until > self.now:
            s.pause_holds_until = self.now
            self._push(self.now + self.rtt_s, PAUSE, s.index, 0)

    def _send_pause(self, s: Source) -> None:
        """The source's input is above hi: a PAUSE, unless the last one still holds when
        this one would arrive."""
        arrives = self.now + self.rtt_s
        if arrives < s.pause_holds_until:
            return
        drain_s = 8 * self.queue_bytes / self.capacity
        quanta = min(PAUSE_QUANTA_MAX, max(1, math.ceil(drain_s / self.quantum_s)))
        s.pause_holds_until = arrives + quanta * self.quantum_s
        s.pauses += 1
        self._push(arrives, PAUSE, s.index, quanta)

    def _on_pause(self, s: Source, quanta: int) -> None:
        """A PAUSE reaches the source: stop for ``quanta``; a pause of 0 resumes."""
        if quanta:
            s.paused_until = self.now + quanta * self.quantum_s
            return
        s.paused_until = self.now
        s.send_version += 1
        self._push(self.now, SEND, s.index, s.send_version)

    def _congestion_point(self, src: int, q: int) -> None:
        """The departure CP judges a frame of source ``src`` as it leaves."""
        assert self.cp is not None
        decision = self.cp.sample(q, self.frame_bytes)
        if decision is not None:
            self._feedback(decision, src)

    # -- flows -------------------------------------------------------------------------------

    def _flow_arrives(self, number: int) -> None:
        """Arrival ``number`` starts its flow, with a limiter at line rate."""
        net = self.sc.network
        arrival = self.arrivals[number]
        s = self.sources[arrival.source]
        size = arrival.size_bytes
        frames, last = flow_frames(size, net.frame_bytes)
        record = FlowRecord(
            flow_id=number,
            source=s.index,
            destination=0,
            size_bytes=size,
            start_s=self.now,
            ideal_fct_s=ideal_fct_s(size, net.frame_bytes, self.ideal_rate_bps, self.one_way_s),
        )
        self.flow_records.append(record)
        rules = (
            RateLimiterRules(self.sc.params.rp, self._clock, self.rng.random) if self.qcn else None
        )
        flow = ActiveFlow(record, frames, last, rules, next_eligible=self.now)
        self.active[flow.index] = flow
        s.flows.append(flow)
        self._kick(s)
        if number + 1 < len(self.arrivals):
            self._push(self.arrivals[number + 1].start_s, FLOW, 0, number + 1)

    def _send_flows(self, s: Source) -> None:
        """Source ``s``'s host link is free: the next of its flows in turn that its limiter
        lets send sends a frame."""
        now, flows = self.now, s.flows
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
        rate = self.line_rate_bps
        rules = flow.rules
        if rules is not None:
            rules.on_transmit(frame_bytes)
            if rules.timer_deadline != flow.timer_at:
                self._schedule_timer(flow)
            rate = min(rate, rules.current_rate_bps)
        flow.last_send, flow.last_bits = now, frame_bits
        flow.next_eligible = now + frame_bits / rate
        s.link_free_at = now + frame_bits / self.line_rate_bps
        self._reach_bottleneck(s, flow.index, frame_bytes, flow, index)
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

    def _retransmit(self, s: Source, token: int) -> None:
        flow, index = self._lost.pop(token)
        flow.record.retransmitted_frames += 1
        if not flow.has_frames:
            s.flows.append(flow)  # it had left the turns with nothing more to send
        flow.resend.append(index)
        self._kick(s)

    def _delivered(self, flow: ActiveFlow, at: float) -> None:
        flow.delivered += 1
        if flow.delivered == flow.frames:
            flow.record.finish_s = at + self.one_way_s
            del self.active[flow.index]

    def _feedback(self, decision: CpDecision, src: int) -> None:
        """A CNM (or ECM's positive message) reaches source ``src`` one RTT later."""
        if decision.cnm:
            self._send_cnm(src, decision.qntz_fb, CNM_POSITIVE if decision.positive else CNM)

    def _send_cnm(self, src: int, qntz_fb: int, kind: int = CNM) -> None:
        """A message to source ``src``, which reaches it one RTT later."""
        self.trace.cnms += 1
        self._push(self.now + self.rtt_s, kind, src, qntz_fb)

    def _three_point_cp(self, src: int, q: int, frame_bytes: int) -> FbTag:
        """The three-point CP judges an arriving frame: the tag it leaves with."""
        assert self.cp is not None
        tag = FbTag()
        decision = self.cp.sample(q, frame_bytes)
        if decision is not None:
            tag = overwrite_fb_tag(decision, tag, self.cp.cfg, 0, self.reflect_rand)
            if tag.reflected:
                self._send_cnm(src, tag.qntz_fb)
        return tag

    def _end_reflection(self, src: int, tag: FbTag) -> None:
        """A frame of ``src`` leaves the bottleneck for the end reflection point."""
        assert self.cp is not None
        reflected = end_reflection(tag, self.cp.cfg, 0, self.reflect_rand)
        if reflected is not None:
            extra = self.trace.extra
            key = "fb_reflections" if reflected.qntz_fb else "p0_reflections"
            extra[key] = extra.get(key, 0) + 1
            self._send_cnm(src, reflected.qntz_fb)

    def _rate_changed(self, lim: Source | ActiveFlow) -> None:
        """CR changed: re-pace the source's next send (a flow's: when its limiter lets it
        send again, its host looking again once its link is free)."""
        if isinstance(lim, ActiveFlow):
            assert lim.rules is not None
            rate = min(lim.rules.current_rate_bps, self.line_rate_bps)
            lim.next_eligible = lim.last_send + lim.last_bits / rate
            self._kick(self.sources[lim.record.source])
            return
        lim.send_version += 1
        gap = self.frame_bits / min(lim.rate_bps, self.line_rate_bps)
        self._push(max(self.now, lim.last_send + gap), SEND, lim.index, lim.send_version)

    def _schedule_timer(self, s: Source | ActiveFlow) -> None:
        assert s.rules is not None
        deadline = s.rules.timer_deadline
        if deadline is not None and deadline != s.timer_at:
            s.timer_at = deadline
            s.timer_version += 1
            self._push(deadline, TIMER, s.index, s.timer_version)

    def _sample(self) -> None:
        tr, dt = self.trace, self.sample_interval_s
        tr.times_s.append(self.now)
        tr.queue_pkts.append(len(self.queue))
        tr.drops_so_far.append(tr.drops)
        tr.throughput_bps.append(8 * self.window_bytes / dt)
        tr.capacity_bps.append(self.capacity)
        tr.source_current_rate_bps.append([self._current_rate_bps(s) for s in self.sources])
        tr.source_target_rate_bps.append(
            [s.rules.target_rate_bps if s.rules else math.nan for s in self.sources]
        )
        tr.source_throughput_bps.append([8 * s.window_bytes / dt for s in self.sources])
        self.window_bytes = 0
        for s in self.sources:
            s.window_bytes = 0

    def _current_rate_bps(self, s: Source) -> float:
        """A source's CR; with the flows workload, its slowest active flow's."""
        line = self.line_rate_bps
        if self.flow_mode:
            return min((f.rules.current_rate_bps for f in s.flows if f.rules), default=line)
        return min(s.rate_bps, line)

    def partial_trace(self) -> Trace:
        """The trace as far as the run got, for a run cut short (Ctrl-C): its samples taken
        whole (one cut in the middle of its row is left out) and the flows started so far,
        so that what was measured is kept (``qcn run`` writes its CSVs)."""
        tr = self.trace
        rows: list[list[Any]] = [
            tr.times_s, tr.queue_pkts, tr.throughput_bps, tr.capacity_bps,
            tr.source_current_rate_bps, tr.source_target_rate_bps, tr.source_throughput_bps,
            tr.drops_so_far,
        ]  # fmt: skip
        whole = min(len(r) for r in rows)
        for r in rows:
            del r[whole:]
        tr.flows = self.flow_records
        return tr

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> Trace:
        started = time.perf_counter()
        wl = self.sc.workload
        for s in self.sources:
            start = s.index * wl.stagger_s
            s.next_arrival = start
            if s.pattern == "onoff":
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
        heap, sources, queue = self._heap, self.sources, self.queue
        cp_at_departure = self.cp_at_departure and self.cp is not None
        flow_mode = self.flow_mode
        events = 0
        while heap:
            depart = self.next_depart
            head = heap[0]
            if depart < head[0] or (depart == head[0] and head[1] > DEPART):
                # The frame in service leaves the bottleneck.
                if depart > end:
                    break
                self.now = depart
                events += 1
                src, q, frame_bytes, flow, _index = queue.popleft()
                self.queue_bytes -= frame_bytes
                if self.pause:
                    self._left_partition(sources[src], frame_bytes)
                if cp_at_departure:
                    self._congestion_point(src, len(queue) if self.depth_left_behind else q)
                elif self.three_point:
                    self._end_reflection(src, self.tags.popleft())
                if flow is not None:
                    self._delivered(flow, depart)
                self.window_bytes += frame_bytes
                self.next_depart = depart + 8 * queue[0][2] / self.capacity if queue else math.inf
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
            elif kind in (CNM, CNM_POSITIVE):
                lim = self._limiter(src)
                if lim is None:  # the flow finished while the CNM was on its way
                    extra = self.trace.extra
                    extra["cnms_after_finish"] = extra.get("cnms_after_finish", 0) + 1
                    continue
                assert lim.rules is not None
                lim.rules.on_cnm(version, positive=kind == CNM_POSITIVE)
                self._schedule_timer(lim)
                self._rate_changed(lim)
            elif kind == TIMER:
                lim = self._limiter(src)
                if lim is not None and version == lim.timer_version and lim.rules is not None:
                    lim.timer_at = None
                    if lim.rules.advance(t):
                        self._rate_changed(lim)
                    self._schedule_timer(lim)
            elif kind == PAUSE:
                self._on_pause(sources[src], version)
            elif kind == FLOW:
                self._flow_arrives(version)
            elif kind == RETRANSMIT:
                self._retransmit(sources[src], version)
            elif kind == RATE:
                self.capacity = rates.pop(0)
            elif kind == SAMPLE:
                self._sample()
                self._push(t + self.sample_interval_s, SAMPLE)
                if self.progress is not None:
                    self.progress(t, end)
        self.trace.events = events
        self.trace.flows = self.flow_records
        self.trace.frames_in = sum(s.sent_frames for s in sources)
        if self.pause:
            self.trace.extra["pauses"] = sum(s.pauses for s in sources)
            self.trace.extra["pauses_per_source_max"] = max(s.pauses for s in sources)
        self.trace.wall_s = time.perf_counter() - started
        return self.trace
