"""Real TCP (or UDP) through the reaction points: seed 001's traffic, on any topology.

:class:`IperfExperiment` adds to the one run script (:class:`qcn.topologies.experiment.
Experiment`) one iperf3 flow per source (NewReno, paced at the workload's rate), each to
its own iperf3 server on its destination, with every source's reaction point limiting it
in the kernel; or, with ``workload.pattern = "udp"``, iperf3's UDP at that rate.  The
*hot-spot* sources are those whose path crosses the scenario's bottleneck port: their flows
run during the scenario's hot-spot episodes (one, or one per period); the others (seed
001's *innocent* flows) all along.  On seed 001's multihop topology the hot spot is s2's
port to the hot-spot sink, two hops from the senders.

With ``network.pause`` the switches are seed 001's: every input guarded by 802.3x PAUSE on
the scenario's watermarks, each input's partition the scenario's buffer, no output limit
but those partitions; every port facing another switch and every host honours PAUSE, and
the PAUSEs each port sent and received are in ``pause.json``.

What is sampled (at ``--sample-hz``): the bottleneck's depth, the bytes each source put
into its switch (its switch port's receive counter: a source's throughput), and the bytes
each destination's port sent (what was delivered).  TCP frames carry no sequence numbers
the runner can count, so drops are the frames the hot-spot sources sent into their switches
that never left the bottleneck port.  Where senders and receivers are apart and every link
is crossed one way (seed 001's shape), every frame the senders sent is placed at the end
(:mod:`qcn.topologies.frame_balance`).
"""

from __future__ import annotations

import bisect
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from qcn.core.pipeline import REGISTER_INPUT_BYTES
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.topologies.errors import ExperimentError
from qcn.topologies.experiment import Experiment
from qcn.topologies.frame_balance import (
    PIPELINE_COUNTERS,
    FrameBalance,
    SenderPath,
    balance,
    holding,
    pipeline_key,
    settle,
)
from qcn.topologies.testbed import Testbed
from qcn.topologies.traces import GridReader, grid

IPERF_BASE_PORT = 5201
AGENT_SUMMARY = re.compile(
    r"pause agent: (?P<iface>\S+): (?P<pauses>\d+) pauses, (?P<resumes>\d+) resumes, "
    r"held (?P<held>[\d.]+) s, PAUSE to held p50 (?P<p50>[\d.]+) ms p99 (?P<p99>[\d.]+) ms"
)
"""The closing line of qcn.reaction_point.pause per interface."""
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


class IperfExperiment(Experiment):
    def setup(self) -> None:
        topo = self.topo
        self.destination = [s.destinations[0] for s in self.sc.sources]
        self.entry = [topo.attachment(h) for h in self.sources]
        """Each source's switch port: its frames enter the network there."""
        self.exits = [topo.attachment(d) for d in dict.fromkeys(self.destination)]
        """Each destination's switch port, in order of first use."""
        self.hot = [
            self.bottleneck in topo.path(h, d)
            for h, d in zip(self.sources, self.destination, strict=True)
        ]
        """Source i's path crosses the bottleneck: a hot-spot flow."""
        self.counters = CounterSamples()
        self._pending_flows: list[tuple[tuple[float, float], int, int]] = []
        """(window, source, the source's flow number) of each flow not started yet."""
        self.pause_counts: dict[str, dict[str, int]] = {}
        self.kernel_drops: dict[str, dict[str, int]] = {}
        """The kernel's drop counters of every switch interface at the end."""
        self._balance_start: dict[str, int] = {}
        self.balance: FrameBalance | None = None

    # -- traffic -----------------------------------------------------------------------------

    def _flow_windows(self, i: int) -> list[tuple[float, float]]:
        """When source i's flows run, in seconds from the start of the run."""
        episodes = self.sc.hotspot_episodes_s()
        if not self.hot[i] or not episodes:
            return [(0.0, self.sc.duration_s)]
        return episodes

    def _iperf_port(self, i: int, k: int) -> int:
        """The server port of source i's k-th flow."""
        return IPERF_BASE_PORT + k * len(self.sources) + i

    def start_receivers(self, tb: Testbed) -> None:
        if shutil.which("iperf3") is None:
            raise ExperimentError("iperf3 is not installed (make sysdeps installs it)")
        # One server per flow: a server still closing one test refuses the next.
        for i in range(len(self.sources)):
            for k in range(len(self._flow_windows(i))):
                tb.popen(
                    f"iperf3 server {i + 1}" + (f" #{k + 1}" if k else ""),
                    self.destination[i],
                    ["iperf3", "--server", "--one-off", f"--port={self._iperf_port(i, k)}"],
                )

    def _client_command(self, i: int, k: int, window: tuple[float, float]) -> list[str]:
        """Source i's k-th flow, running during ``window``."""
        begin, end = window
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
            f"--client={self.host_ip(self.destination[i])}",
            f"--port={self._iperf_port(i, k)}",
            f"--time={max(1, round(end - begin))}",
            f"--bitrate={self.sc.workload.max_rate_bps:.0f}",
            *transport,
        ]

    def _sample_counters(self) -> dict[str, int]:
        values = {}
        for ref in self.entry:
            for kind in ("bytes", "packets"):
                values[f"{ref.interface}:rx_{kind}"] = interface_counter(
                    ref.interface, f"rx_{kind}"
                )
        for ref in self.exits:
            for kind in ("bytes", "packets"):
                values[f"{ref.interface}:tx_{kind}"] = interface_counter(
                    ref.interface, f"tx_{kind}"
                )
        return values

    def start_traffic(self, _tb: Testbed, _start: float) -> None:
        if self.balance_path() is not None:
            self._balance_start = self._balance_snapshot()
        # iperf3 has no start time of its own: on_sample starts each flow when it is due.
        self._pending_flows = sorted(
            (w, i, k) for i in range(len(self.sources)) for k, w in enumerate(self._flow_windows(i))
        )

    def on_sample(self, tb: Testbed, elapsed_s: float | None, t: float) -> None:
        while elapsed_s is not None and self._pending_flows:
            window, i, k = self._pending_flows[0]
            if elapsed_s < window[0]:
                break
            self._pending_flows.pop(0)
            name = f"iperf3 {self.sources[i]}" + (f" #{k + 1}" if k else "")
            tb.popen(name, self.sources[i], self._client_command(i, k, window), sender=True)
        self.counters.add(t, self._sample_counters())

    def progress_detail(self, depth: int) -> str:
        hot, innocent = self._delivered_by_group_bps(1.0)
        return (
            f"hot-spot queue {depth:3d} pkts  delivered: hot spot {hot / 1e6:6.3f} Mb/s, "
            f"innocent {innocent / 1e6:6.3f} Mb/s"
        )

    def _hot_exit(self) -> PortRef:
        """Where the hot spot's frames leave: the bottleneck port (seed 001: the hot-spot
        sink's port)."""
        return self.bottleneck

    def _innocent_exits(self) -> list[PortRef]:
        """The destination ports of the flows that never cross the hot spot."""
        hot_dst = {d for d, hot in zip(self.destination, self.hot, strict=True) if hot}
        return [r for r in self.exits if self.topo.far_end(r).node not in hot_dst]

    def _delivered_by_group_bps(self, window_s: float) -> tuple[float, float]:
        """Bytes/s the hot spot and the innocent destinations sent over the last
        ``window_s``."""
        rows = self.counters.rows
        if len(rows) < 2:
            return 0.0, 0.0
        t1, last = rows[-1]
        t0, first = rows[max(0, len(rows) - 1 - round(window_s / self.sample_interval_s))]
        if t1 <= t0:
            return 0.0, 0.0

        def rate(refs: list[PortRef]) -> float:
            key = [f"{r.interface}:tx_bytes" for r in refs]
            return 8 * sum(last.get(k, 0) - first.get(k, 0) for k in key) / (t1 - t0)

        return rate([self._hot_exit()]), rate(self._innocent_exits())

    # -- after the measurement ---------------------------------------------------------------

    def after_measurement(self, tb: Testbed) -> None:
        net = self.sc.network
        if not self.cli and self.balance_path() is not None:
            self._settle_and_balance(tb)
            # Once drained: a PAUSE one switch sent at the end is counted at the other too.
            self.port_counters = self.read_port_counters()
        for ref, c in self.port_counters.items():
            self.kernel_drops[ref.interface] = {
                k: interface_counter(ref.interface, k) for k in ("rx_dropped", "tx_dropped")
            }
            if net.pause:
                self.pause_counts[ref.interface] = {k: c[k] for k in PAUSE_COUNTERS}

    def after_teardown(self) -> None:
        if self.sc.network.pause:
            self._write_pause_json()  # with the agents' closing lines, written as they stop

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

    def balance_path(self) -> SenderPath | None:
        """The senders' frames, port by port, from their entries to the destinations; None
        where the balance is not defined: a host both sends and receives, or a link is
        crossed both ways (each port's counters would mix the two directions)."""
        topo = self.topo
        if set(self.sources) & set(self.destination):
            return None
        crossed: list[tuple[PortRef, PortRef]] = []
        for h, d in zip(self.sources, self.destination, strict=True):
            for out in topo.path(h, d)[:-1]:
                far = topo.far_end(out)
                pair = (out, PortRef(far.node, far.port))
                if pair not in crossed:
                    crossed.append(pair)
        if any((b, a) in crossed for a, b in crossed):
            return None

        def port(ref: PortRef) -> tuple[str, str, int]:
            return (ref.interface, ref.switch, ref.port)

        return SenderPath(
            entries=tuple(port(r) for r in self.entry),
            exits=tuple(port(r) for r in self.exits),
            links=tuple((port(a), port(b)) for a, b in crossed),
            inputs=(
                *((r.switch, r.port) for r in self.entry),
                *((b.switch, b.port) for _, b in crossed),
            ),
            outputs=(
                *((a.switch, a.port) for a, _ in crossed),
                *((r.switch, r.port) for r in self.exits),
            ),
        )

    def _balance_snapshot(self) -> dict[str, int]:
        """Every counter the balance reads (frame_balance.Snapshot)."""
        path = self.balance_path()
        assert path is not None
        values: dict[str, int] = {}
        for iface, _, _ in path.receiving():
            values[f"{iface}:rx_packets"] = interface_counter(iface, "rx_packets")
        for iface, _, _ in path.sending():
            values[f"{iface}:tx_packets"] = interface_counter(iface, "tx_packets")
        for sw, port in path.pipeline_ports():
            counters = self.agents[sw].counters(port)
            values.update({pipeline_key(sw, port, k): counters[k] for k in PIPELINE_COUNTERS})
        if self.sc.network.pause:
            # One Thrift connection per switch, not per input: settle reads every 0.5 s.
            for sw in sorted({sw for sw, _ in path.inputs}):
                with self.agents[sw].thrift() as t:
                    for port in (p for s, p in path.inputs if s == sw):
                        values[pipeline_key(sw, port, "input_bytes")] = t.register_read(
                            REGISTER_INPUT_BYTES, port
                        )
        return values

    def _settle_and_balance(self, tb: Testbed) -> None:
        """Stop the senders, let the network drain, and place every frame they sent."""
        path = self.balance_path()
        assert path is not None
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
        self.balance = balance(path, self._balance_start, end)
        self.balance.settled = settled
        self.balance.not_on_wire = {h: tb.qdisc_backlog_pkts(h) for h in self.sources}
        self.progress(f"qcn run: {self.balance.describe()}")
        (self.out / "frames.json").write_text(json.dumps(self.balance.as_dict(), indent=1))

    # -- the trace ---------------------------------------------------------------------------

    def trace(self) -> Trace:
        """Throughput from the switch ports' counters on the grid; drops = sent by the
        hot-spot sources - left the hot spot - still queued there."""
        sc, rec, dt = self.sc, self.rec, self.sample_interval_s
        tr, reader = Trace(), GridReader(sc, rec, qcn=self.qcn)
        at_start = previous = self.counters.at(rec.start)
        innocent_bytes: list[float] = []
        hot_out = f"{self._hot_exit().interface}:tx_bytes"
        innocent_out = [f"{r.interface}:tx_bytes" for r in self._innocent_exits()]
        n = len(self.sources)
        for elapsed, t in grid(rec, sc.duration_s, dt):
            reader.append_common(tr, elapsed, t, n)
            now = self.counters.at(t)

            def delta(
                key: str, now: dict[str, int] = now, before: dict[str, int] = previous
            ) -> int:
                return now.get(key, 0) - before.get(key, 0)

            tr.source_throughput_bps.append(
                [8 * delta(f"{r.interface}:rx_bytes") / dt for r in self.entry]
            )
            tr.throughput_bps.append(8 * delta(hot_out) / dt)
            innocent_bytes.append(8 * sum(delta(k) for k in innocent_out) / dt)
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
            counters.get(f"{r.interface}:rx_packets", 0)
            for r, hot in zip(self.entry, self.hot, strict=True)
            if hot
        )

    def _hot_spot_lost(self, now: dict[str, int], start: dict[str, int]) -> int:
        """Frames the hot-spot sources put into their switches since ``start`` that have
        not left the hot spot (lost, or still on their way)."""
        sent = self._hot_frames_in(now) - self._hot_frames_in(start)
        out = f"{self._hot_exit().interface}:tx_packets"
        return max(0, sent - (now.get(out, 0) - start.get(out, 0)))

    def _group_figures(self, tr: Trace, innocent_bps: list[float]) -> dict[str, float]:
        """Mean delivered throughput of each group during the hot-spot episode, and the
        ideal each could have had (the seed's two figures of merit)."""
        sc = self.sc
        hot_index = self.hot.index(True) if True in self.hot else 0
        windows = self._flow_windows(hot_index)
        rows = [k for k, t in enumerate(tr.times_s) if any(b < t <= e for b, e in windows)]
        rows = rows or list(range(len(tr.times_s)))
        capacity = sum(tr.capacity_bps[k] for k in rows) / len(rows)
        innocent = self.hot.count(False)
        innocent_capacity = sum(self.topo.link_at(r).rate_bps for r in self._innocent_exits())
        return {
            "hotspot_throughput_bps": sum(tr.throughput_bps[k] for k in rows) / len(rows),
            "hotspot_ideal_bps": min(capacity, self.hot.count(True) * sc.workload.max_rate_bps),
            "innocent_throughput_bps": sum(innocent_bps[k] for k in rows) / len(rows),
            "innocent_ideal_bps": min(innocent * sc.workload.max_rate_bps, innocent_capacity),
            **(
                {"pause_frames_sent": sum(c["pause_sent"] for c in self.pause_counts.values())}
                if self.pause_counts
                else {}
            ),
            **({"frames_unplaced": self.balance.unplaced} if self.balance else {}),
        }
