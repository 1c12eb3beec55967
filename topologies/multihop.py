"""Seed 001 on Mininet + BMv2: TCP through the reaction points, a hot spot two hops away.

:class:`MultihopTcpExperiment` composes the same parts as the single-bottleneck experiment
(:class:`~topologies.testbed.Testbed`, :func:`~topologies.measurement.measure`,
:class:`~topologies.traces.GridReader`) on a :class:`~topologies.mininet_bmv2.MultihopTopo`:
hot-spot senders and innocent senders share switch s1 and the s1 -> s2 link; s2's port 1
(the hot-spot sink) is the bottleneck and runs the CP; its port 2 serves the innocent sink.
Traffic is real TCP: one iperf3 flow per sender (NewReno, paced at the workload's rate),
each to its own iperf3 server, with every sender's reaction point limiting it in the
kernel; or, with ``workload.pattern = "udp"``, iperf3's UDP at that rate.  The hot-spot
flows run during the scenario's hot-spot episodes (one, or one per period), the innocent
flows all along.

With ``network.pause`` the switches are seed 001's: every input guarded by 802.3x PAUSE on
the scenario's watermarks, each input's partition the scenario's buffer, no output limit
but those partitions; every switch port and host honours PAUSE (reaction_point.pause), and
the PAUSEs each port sent and received are in ``pause.json``.

What is sampled (at ``--sample-hz``): the bottleneck's depth (the pipeline's last_qdepth
register on s2), the bytes each sender put into s1 (its switch port's receive counter:
a sender's throughput), and the bytes each sink's port sent (what was delivered).  TCP
frames carry no sequence numbers the runner can count, so drops are the frames the
hot-spot senders sent into s1 that never left s2's bottleneck port.
"""

from __future__ import annotations

import bisect
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.entries import PauseWatermarks
from qcn.core.frames import PAUSE_QUANTA_MAX, pause_quanta, pause_seconds
from qcn.core.params import QcnParams
from qcn.core.pipeline import REGISTER_INPUT_BYTES
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from topologies.errors import ExperimentError
from topologies.experiment import Experiment, cp_params, cp_role
from topologies.frame_balance import (
    PIPELINE_COUNTERS,
    FrameBalance,
    SenderPath,
    balance,
    holding,
    pipeline_key,
    settle,
)
from topologies.measurement import Hooks, rate_pps
from topologies.testbed import Testbed
from topologies.traces import GridReader, grid, read_limiter_logs

IPERF_BASE_PORT = 5201
HOTSPOT_PORT = 1  # s2's port to the hot-spot sink: the bottleneck, with the CP
INNOCENT_PORT = 2  # s2's port to the innocent sink
S2_LINK_PORT = 3  # s2's port to s1
AGENT_SUMMARY = re.compile(
    r"pause agent: (?P<iface>\S+): (?P<pauses>\d+) pauses, (?P<resumes>\d+) resumes, "
    r"held (?P<held>[\d.]+) s, PAUSE to held p50 (?P<p50>[\d.]+) ms p99 (?P<p99>[\d.]+) ms"
)
"""The closing line of reaction_point.pause per interface."""
PAUSE_COUNTERS = (
    "pause_sent",
    "pause_received",
    "pause_drops",
    "mac_control_drops",
    "hold_rounds",
    "order_rounds",
    "order_late",
)
SETTLE_QUIET_S = 0.5
SETTLE_TIMEOUT_S = 20.0
"""After the senders stop: counters unchanged for SETTLE_QUIET_S and nothing buffered in a
switch, or give up after SETTLE_TIMEOUT_S (the balance then says it never drained)."""
PAUSE_OUTPUT_LIMIT_PKTS = 4000
"""With PAUSE the seed's switch has no output limit: the inputs' partitions bound the
buffer first.  (4000 frames keeps the CP's Fb inside 32 bits, controller.entries.CpPort.)"""
PAUSE_HOLD_FACTOR = 2.0
"""A PAUSE asks for twice the time the bottleneck takes to drain hi - lo (refreshed at half
of it while the input stays above hi; lifted at lo by a PAUSE of 0)."""


def pause_link_rate_bps(sc: Scenario) -> float:
    """The rate every PAUSE-capable link runs at, and its quanta are counted in: the
    fastest of the scenario's (the s1 -> s2 link carries both groups of senders)."""
    return max(sc.network.line_rate_bps, sc.network.innocent_rate_bps)


def pause_watermarks(sc: Scenario) -> PauseWatermarks:
    """Seed 001's PAUSE on BMv2: the scenario's watermarks (not scaled, like the buffer in
    frames), each input's partition its buffer, the pause time in quanta of its links."""
    net, link_bps = sc.network, pause_link_rate_bps(sc)
    hold_s = PAUSE_HOLD_FACTOR * 8 * (net.pause_hi_bytes - net.pause_lo_bytes)
    hold_s /= net.bottleneck_rate_bps
    quanta = min(PAUSE_QUANTA_MAX, pause_quanta(hold_s, link_bps))
    return PauseWatermarks(
        hi_bytes=net.pause_hi_bytes,
        lo_bytes=net.pause_lo_bytes,
        partition_bytes=net.buffer_pkts * net.frame_bytes,
        pause_quanta=max(1, quanta),
        refresh_us=max(1, round(pause_seconds(quanta, link_bps) / 2 * 1e6)),
    )


def interface_counter(iface: str, counter: str) -> int:
    """A kernel interface counter (rx_bytes, tx_packets, ...) of a root-namespace veth."""
    return int(Path(f"/sys/class/net/{iface}/statistics/{counter}").read_text())


@dataclass
class CounterSamples:
    """Interface counters over time: (monotonic time, {name: value})."""

    rows: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def add(self, t: float, values: dict[str, int]) -> None:
        self.rows.append((t, values))
        self.times.append(t)

    def at(self, t: float) -> dict[str, int]:
        """The last sample at or before ``t`` (zeros before the first)."""
        i = bisect.bisect_right(self.times, t) - 1
        return self.rows[i][1] if i >= 0 else {}


class MultihopTcpExperiment(Experiment):
    def setup(self) -> None:
        net = self.sc.network
        self.senders = net.sources + net.innocent_sources
        self.hot_sink = f"h{self.senders + 1}"
        self.innocent_sink = f"h{self.senders + 2}"
        self.cp_port = HOTSPOT_PORT
        self.counters = CounterSamples()
        self._pending_flows: list[tuple[tuple[float, float], int, int]] = []
        """(window, sender, the sender's flow number) of each flow not started yet."""
        self.pause_counts: dict[str, dict[str, int]] = {}
        self.switch_drops = 0
        """Frames the pipelines dropped (tail drops and PAUSE partitions), all ports."""
        self.kernel_drops: dict[str, dict[str, int]] = {}
        """The kernel's drop counters of every switch interface at the end."""
        self._balance_start: dict[str, int] = {}
        self._agents: dict[str, Any] = {}
        self.balance: FrameBalance | None = None

    @property
    def sources(self) -> list[str]:
        """Every sender (hot-spot ones first), each behind its reaction point."""
        return [f"h{i}" for i in range(1, self.senders + 1)]

    def is_hot(self, i: int) -> bool:
        """Sender index i (0-based) sends to the hot spot."""
        return i < self.sc.network.sources

    def _gather(self) -> None:
        self.rec.limiter_rows = read_limiter_logs(self.out / "rp", self.sources)

    def _run(self) -> Trace:
        from topologies.mininet_bmv2 import MultihopTopo  # noqa: PLC0415

        if shutil.which("iperf3") is None:
            raise ExperimentError("iperf3 is not installed (make sysdeps installs it)")
        started = time.perf_counter()
        sc, net = self.sc, self.sc.network
        with self.testbed() as tb:
            tb.start(
                MultihopTopo(sources=net.sources, innocent=net.innocent_sources),
                f"{net.sources} hot-spot and {net.innocent_sources} innocent senders, "
                "2 sinks, 2 BMv2 switches",
            )
            buffer = PAUSE_OUTPUT_LIMIT_PKTS if net.pause else net.buffer_pkts
            queues = {
                "s2": [
                    (HOTSPOT_PORT, rate_pps(sc, net.bottleneck_rate_bps), buffer),
                    (INNOCENT_PORT, rate_pps(sc, net.innocent_rate_bps), buffer),
                ]
            }
            pause = pause_watermarks(sc) if net.pause else None
            link_bps = pause_link_rate_bps(sc)
            if pause:
                # The link between the switches honours PAUSE at both ends, its frames
                # going round BMv2's queue at the link's rate while held.
                queues["s1"] = [(self.senders + 1, rate_pps(sc, link_bps), buffer)]
                queues["s2"].append((S2_LINK_PORT, rate_pps(sc, link_bps), buffer))
            agents = tb.program(
                {"s2": [HOTSPOT_PORT]},
                cp_params(sc, qcn=self.qcn),
                queues,
                pause,
                honour_pause_bps=link_bps if pause else None,
            )
            hot = agents["s2"]
            self._agents = agents
            self.progress(
                f"qcn run: switches programmed; s2 port {HOTSPOT_PORT} is the hot spot "
                f"{cp_role(self.qcn)}" + (f"; PAUSE on every input ({pause})" if pause else "")
            )
            # One server per flow: a server still closing one test refuses the next.
            for i in range(self.senders):
                sink = self.hot_sink if self.is_hot(i) else self.innocent_sink
                for k in range(len(self._flow_windows(i))):
                    tb.popen(
                        f"iperf3 server {i + 1}" + (f" #{k + 1}" if k else ""),
                        sink,
                        ["iperf3", "--server", "--one-off", f"--port={self._iperf_port(i, k)}"],
                    )
            if self.emulation.pcap:
                tb.start_captures([f"s2-eth{HOTSPOT_PORT}", "s1-eth1"])
            if pause:
                tb.start_pause_agents([h.name for h in tb.net.hosts], link_bps)
            if self.qcn:
                tb.start_reaction_points(self.sources, QcnParams(rp=sc.params.rp, cp=sc.params.cp))
            self.progress("qcn run: iperf3 servers and reaction points up; starting the flows")
            hooks = Hooks(
                start_traffic=self._schedule_flows,
                on_sample=lambda elapsed, t: self._on_sample(tb, elapsed, t),
                progress_detail=self._progress_detail,
                check=tb.check_processes,
            )
            self.rec = tb.measure_or_cli(
                sc, hot, self.cp_port, self.sample_interval_s, hooks, cli=self.cli, rec=self.rec
            )
            self.rec.cnms = hot.counters(self.cp_port)["cp_cnms"] if self.qcn else 0
            if not self.cli:
                self._settle_and_balance(tb)
            for name, a in sorted(agents.items()):
                for port in (p.port for p in a.cfg.ports):
                    iface = f"{name}-eth{port}"
                    c = a.counters(port)
                    self.switch_drops += c["tail_drops"] + c["pause_drops"]
                    self.kernel_drops[iface] = {
                        k: interface_counter(iface, k) for k in ("rx_dropped", "tx_dropped")
                    }
                    if net.pause:
                        self.pause_counts[iface] = {k: c[k] for k in PAUSE_COUNTERS}
        self._gather()
        if net.pause:
            self._write_pause_json()
        trace = self.trace()
        trace.wall_s = time.perf_counter() - started
        trace.noise = tb.noise
        trace.captures = tb.captures()
        return trace

    # -- traffic -----------------------------------------------------------------------------

    def _flow_windows(self, i: int) -> list[tuple[float, float]]:
        """When sender i's flows run, in seconds from the start of the run."""
        episodes = self.sc.hotspot_episodes_s()
        if not self.is_hot(i) or not episodes:
            return [(0.0, self.sc.duration_s)]
        return episodes

    def _iperf_port(self, i: int, k: int) -> int:
        """The server port of sender i's k-th flow."""
        return IPERF_BASE_PORT + k * self.senders + i

    def _client_command(self, i: int, k: int, window: tuple[float, float]) -> list[str]:
        """Sender i's k-th flow, running during ``window``."""
        begin, end = window
        sink = self.hot_sink if self.is_hot(i) else self.innocent_sink
        net = self.sc.network
        if self.sc.workload.pattern == "udp":
            # The Ethernet frame of each datagram is the scenario's frame.
            transport = ["--udp", f"--length={net.frame_bytes - 14 - 20 - 8}"]
        else:
            transport = [
                "--congestion=reno",  # Linux's NewReno (the seed's TCP)
                f"--set-mss={net.frame_bytes - 52}",  # IPv4 + TCP with timestamps
            ]
        return [
            "iperf3",
            f"--client=10.0.0.{sink[1:]}",
            f"--port={self._iperf_port(i, k)}",
            f"--time={max(1, round(end - begin))}",
            f"--bitrate={self.sc.workload.max_rate_bps:.0f}",
            *transport,
        ]

    def _sample_counters(self) -> dict[str, int]:
        values = {
            f"s1-eth{i}:rx_{kind}": interface_counter(f"s1-eth{i}", f"rx_{kind}")
            for i in range(1, self.senders + 1)
            for kind in ("bytes", "packets")
        }
        for port in (HOTSPOT_PORT, INNOCENT_PORT):
            for kind in ("bytes", "packets"):
                values[f"s2-eth{port}:tx_{kind}"] = interface_counter(f"s2-eth{port}", f"tx_{kind}")
        return values

    def _schedule_flows(self, _start: float) -> None:
        self._balance_start = self._balance_snapshot()
        # iperf3 has no start time of its own: _on_sample starts each flow when it is due.
        self._pending_flows = sorted(
            (w, i, k) for i in range(self.senders) for k, w in enumerate(self._flow_windows(i))
        )

    def _on_sample(self, tb: Testbed, elapsed_s: float | None, t: float) -> None:
        while elapsed_s is not None and self._pending_flows:
            window, i, k = self._pending_flows[0]
            if elapsed_s < window[0]:
                break
            self._pending_flows.pop(0)
            name = f"iperf3 h{i + 1}" + (f" #{k + 1}" if k else "")
            tb.popen(name, f"h{i + 1}", self._client_command(i, k, window), sender=True)
        self.counters.add(t, self._sample_counters())

    def _progress_detail(self, depth: int) -> str:
        hot, innocent = self._delivered_by_sink_bps(1.0)
        return (
            f"hot-spot queue {depth:3d} pkts  delivered: hot spot {hot / 1e6:6.3f} Mb/s, "
            f"innocent {innocent / 1e6:6.3f} Mb/s"
        )

    def _delivered_by_sink_bps(self, window_s: float) -> tuple[float, float]:
        """Bytes/s the two sinks received over the last ``window_s`` (hot spot, innocent)."""
        rows = self.counters.rows
        if len(rows) < 2:
            return 0.0, 0.0
        t1, last = rows[-1]
        t0, first = rows[max(0, len(rows) - 1 - round(window_s / self.sample_interval_s))]
        if t1 <= t0:
            return 0.0, 0.0
        hot, innocent = (
            8 * (last[f"s2-eth{p}:tx_bytes"] - first[f"s2-eth{p}:tx_bytes"]) / (t1 - t0)
            for p in (HOTSPOT_PORT, INNOCENT_PORT)
        )
        return hot, innocent

    def _write_pause_json(self) -> None:
        """PAUSEs per switch port (the pipeline's counters) and per honouring interface
        (each agent's closing summary: pauses, resumes, seconds held)."""
        honoured: dict[str, dict[str, float]] = {}
        for log in sorted((self.out / "logs").glob("pause-*.log")):
            for line in log.read_text().splitlines():
                m = AGENT_SUMMARY.match(line)
                if m:
                    honoured[m["iface"]] = {
                        "pauses": int(m["pauses"]),
                        "resumes": int(m["resumes"]),
                        "held_s": float(m["held"]),
                        "stop_p50_ms": float(m["p50"]),
                        "stop_p99_ms": float(m["p99"]),
                    }
        (self.out / "pause.json").write_text(
            json.dumps(
                {
                    "switch_ports": self.pause_counts,
                    "honoured": honoured,
                    "kernel_drops": self.kernel_drops,
                    "frame_balance": self.balance.as_dict() if self.balance else None,
                },
                indent=1,
            )
        )

    # -- the frame balance -------------------------------------------------------------------

    def _balance_path(self) -> SenderPath:
        """The senders' frames: into s1 from each sender, across the link, out to the sinks."""
        link = self.senders + 1
        sinks = (HOTSPOT_PORT, INNOCENT_PORT)
        senders = range(1, self.senders + 1)
        return SenderPath(
            entries=tuple((f"s1-eth{i}", "s1", i) for i in senders),
            exits=tuple((f"s2-eth{p}", "s2", p) for p in sinks),
            links=(((f"s1-eth{link}", "s1", link), (f"s2-eth{S2_LINK_PORT}", "s2", S2_LINK_PORT)),),
            inputs=(*(("s1", i) for i in senders), ("s2", S2_LINK_PORT)),
            outputs=(("s1", link), *(("s2", p) for p in sinks)),
        )

    def _balance_snapshot(self) -> dict[str, int]:
        """Every counter the balance reads (frame_balance.Snapshot)."""
        path = self._balance_path()
        values: dict[str, int] = {}
        for iface, _, _ in path.receiving():
            values[f"{iface}:rx_packets"] = interface_counter(iface, "rx_packets")
        for iface, _, _ in path.sending():
            values[f"{iface}:tx_packets"] = interface_counter(iface, "tx_packets")
        for sw, port in path.pipeline_ports():
            counters = self._agents[sw].counters(port)
            values.update({pipeline_key(sw, port, k): counters[k] for k in PIPELINE_COUNTERS})
        if self.sc.network.pause:
            # One Thrift connection per switch, not per input: settle reads every 0.5 s.
            for sw in sorted({sw for sw, _ in path.inputs}):
                with self._agents[sw].thrift() as t:
                    for port in (p for s, p in path.inputs if s == sw):
                        values[pipeline_key(sw, port, "input_bytes")] = t.register_read(
                            REGISTER_INPUT_BYTES, port
                        )
        return values

    def _settle_and_balance(self, tb: Testbed) -> None:
        """Stop the senders, let the network drain, and place every frame they sent."""
        # The flows outlive the measurement (iperf3 runs whole seconds).
        self.progress("qcn run: stopping the senders; waiting for the network to drain")
        tb.stop_senders()
        end, settled = settle(
            self._balance_snapshot,
            holding,
            quiet_s=SETTLE_QUIET_S,
            timeout_s=SETTLE_TIMEOUT_S,
            wait=time.sleep,
        )
        self.balance = balance(self._balance_path(), self._balance_start, end)
        self.balance.settled = settled
        self.balance.not_on_wire = {h: tb.qdisc_backlog_pkts(h) for h in self.sources}
        self.progress(f"qcn run: {self.balance.describe()}")
        (self.out / "frames.json").write_text(json.dumps(self.balance.as_dict(), indent=1))

    # -- the trace ---------------------------------------------------------------------------

    def trace(self) -> Trace:
        """Throughput from the switch ports' counters on the grid; drops = sent into s1 -
        left s2's hot-spot port - still queued there."""
        sc, rec, dt = self.sc, self.rec, self.sample_interval_s
        tr, reader = Trace(), GridReader(sc, rec, qcn=self.qcn)
        at_start = previous = self.counters.at(rec.start)
        innocent_bytes: list[float] = []
        for elapsed, t in grid(rec, sc.duration_s, dt):
            reader.append_common(tr, elapsed, t, self.senders)
            now = self.counters.at(t)

            def delta(
                key: str, now: dict[str, int] = now, before: dict[str, int] = previous
            ) -> int:
                return now.get(key, 0) - before.get(key, 0)

            per_sender = [8 * delta(f"s1-eth{i + 1}:rx_bytes") / dt for i in range(self.senders)]
            tr.source_throughput_bps.append(per_sender)
            tr.throughput_bps.append(8 * delta(f"s2-eth{HOTSPOT_PORT}:tx_bytes") / dt)
            innocent_bytes.append(8 * delta(f"s2-eth{INNOCENT_PORT}:tx_bytes") / dt)
            # Frames still queued at the hot spot are not lost (yet); a drop stays a drop.
            lost = self._hot_spot_lost(now, at_start) - tr.queue_pkts[-1]
            tr.drops_so_far.append(max(lost, tr.drops_so_far[-1] if tr.drops_so_far else 0))
            previous = now
        final = self.counters.rows[-1][1] if self.counters.rows else {}
        tr.drops = max([self._hot_spot_lost(final, at_start), *tr.drops_so_far[-1:]])
        tr.frames_in = self._hot_frames_in(final) - self._hot_frames_in(at_start)
        tr.cnms = rec.cnms
        tr.events = len(rec.queue)
        tr.extra = self._group_figures(tr, innocent_bytes)
        return tr

    def _hot_frames_in(self, counters: dict[str, int]) -> int:
        return sum(
            counters.get(f"s1-eth{i + 1}:rx_packets", 0) for i in range(self.sc.network.sources)
        )

    def _hot_spot_lost(self, now: dict[str, int], start: dict[str, int]) -> int:
        """Frames the hot-spot senders put into s1 since ``start`` that have not left s2's
        hot-spot port (lost, or still on their way)."""
        sent = self._hot_frames_in(now) - self._hot_frames_in(start)
        out = f"s2-eth{HOTSPOT_PORT}:tx_packets"
        return max(0, sent - (now.get(out, 0) - start.get(out, 0)))

    def _group_figures(self, tr: Trace, innocent_bps: list[float]) -> dict[str, float]:
        """Mean delivered throughput of each group during the hot-spot episode, and the
        ideal each could have had (the seed's two figures of merit)."""
        sc = self.sc
        windows = self._flow_windows(0)
        rows = [k for k, t in enumerate(tr.times_s) if any(b < t <= e for b, e in windows)]
        rows = rows or list(range(len(tr.times_s)))
        capacity = sum(tr.capacity_bps[k] for k in rows) / len(rows)
        offered_innocent = sc.network.innocent_sources * sc.workload.max_rate_bps
        return {
            "hotspot_throughput_bps": sum(tr.throughput_bps[k] for k in rows) / len(rows),
            "hotspot_ideal_bps": min(capacity, sc.network.sources * sc.workload.max_rate_bps),
            "innocent_throughput_bps": sum(innocent_bps[k] for k in rows) / len(rows),
            "innocent_ideal_bps": min(offered_innocent, sc.network.innocent_rate_bps),
            "switch_drops": self.switch_drops,
            **(
                {"pause_frames_sent": sum(c["pause_sent"] for c in self.pause_counts.values())}
                if self.pause_counts
                else {}
            ),
            **({"frames_unplaced": self.balance.unplaced} if self.balance else {}),
        }
