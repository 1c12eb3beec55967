"""A scenario on Mininet + BMv2: the `qcn run --backend mininet` backend.

The run takes a scenario already scaled to BMv2's units (:meth:`Scenario.scaled_for_bmv2`)
and its network as data (:attr:`Scenario.topology`).  :class:`Experiment` is the one run
script every experiment shares; a subclass only adds its traffic:

1. bring-up (:class:`~qcn.topologies.testbed.Testbed`): the topology's QcnHosts and one
   Bmv2Switch per switch; the controller's bring-up of every switch from the topology
   (:func:`qcn.topologies.network.network_config`: a CP on each CP port, one that never
   samples with ``qcn=False``; each port whose queue can build shaped to its link's rate
   in frames/s and given its buffer); the traffic's receivers (the subclass); the PAUSE
   agents with ``network.pause``; a reaction-point daemon per source host (with QCN);
2. the measurement loop (:func:`~qcn.topologies.measurement.measure`): the schedule on the
   bottleneck port, every CP port's depth at ``sample_hz``, progress; the subclass starts
   its senders and does its per-sample work through :class:`~qcn.topologies.measurement.Hooks`;
3. the counters every CP port kept, then what the subclass does after the measurement;
4. trace assembly (the subclass, from :mod:`qcn.topologies.traces`): the recording on a
   regular grid.

:class:`StreamExperiment` is the seeds' traffic (``qcn rp send`` from each source to its
destination, counted by a sink on each destination host); :class:`FlowsExperiment`
the flows workload (docs/fct.md); :class:`~qcn.topologies.iperf.IperfExperiment` real TCP or
UDP through iperf3 (seed 001).  Teardown happens in every case, including Ctrl-C and errors.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import math
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qcn.controller import config as network_file
from qcn.controller.config import NetworkConfig
from qcn.controller.entries import PauseWatermarks
from qcn.core import capacity
from qcn.core.ecmp import DATA_PORT
from qcn.core.flows import FlowRecord, records_from_logs
from qcn.core.frames import pause_quanta, pause_seconds
from qcn.core.live import LiveFeed
from qcn.core.noise import tolerances_s
from qcn.core.params import (
    PAUSE_QUANTA_MAX,
    CpParams,
    CpSignal,
    DcqcnParams,
    QcnParams,
    RpScheme,
)
from qcn.core.patterns import Kind
from qcn.core.results import write_csvs
from qcn.core.scenario import Scenario
from qcn.core.stats import percentile
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.reaction_point.flow_sender import HostFlow, write_host_flows
from qcn.topologies.errors import ExperimentError
from qcn.topologies.live import SwitchLive, run_clock
from qcn.topologies.measurement import Hooks, Recording
from qcn.topologies.network import network_config
from qcn.topologies.testbed import RP_STATUS_DIR, Emulation, Testbed, missing_requirements
from qcn.topologies.traces import grid, port_throughputs, read_limiter_logs, sink_trace

__all__ = [
    "Emulation",
    "Experiment",
    "FlowsExperiment",
    "StreamExperiment",
    "missing_requirements",
]

PAUSE_OUTPUT_LIMIT_PKTS = 4000
"""With PAUSE the seed's switch has no output limit: the inputs' partitions bound the
buffer first.  (4000 frames keeps the CP's Fb inside 32 bits, qcn.controller.entries.CpPort.)"""
PAUSE_HOLD_FACTOR = 2.0
"""A PAUSE asks for twice the time the bottleneck takes to drain hi - lo (refreshed at half
of it while the input stays above hi; lifted at lo by a PAUSE of 0)."""
REFLECTION_COUNTERS = ("fb_reflections", "p0_reflections")


def cp_params(sc: Scenario, *, qcn: bool) -> CpParams:
    """The CP ports' parameters (without QCN: CpParams.never_sampling)."""
    return sc.params.cp if qcn else sc.params.cp.never_sampling()


def cp_role(qcn: bool) -> str:
    return "with a CP" if qcn else "without QCN (the CP never samples)"


def pause_link_rate_bps(sc: Scenario) -> float:
    """The rate every PAUSE-capable link's quanta are counted in: the fastest of the
    network's links (seed 001's s1 -> s2 link carries both groups of senders); one rate, so
    that the switches and the hosts' agents agree on what a quantum lasts."""
    return max(link.rate_bps for link in sc.topology.links)


def pause_watermarks(sc: Scenario) -> PauseWatermarks:
    """Seed 001's PAUSE on BMv2: the scenario's watermarks (not scaled, like the buffer in
    frames), each input's partition its buffer, the pause time in quanta of its links."""
    net, link_bps = sc.network, pause_link_rate_bps(sc)
    hold_s = PAUSE_HOLD_FACTOR * 8 * (net.pause_hi_bytes - net.pause_lo_bytes)
    hold_s /= sc.initial_capacity_bps
    quanta = min(PAUSE_QUANTA_MAX, pause_quanta(hold_s, link_bps))
    return PauseWatermarks(
        hi_bytes=net.pause_hi_bytes,
        lo_bytes=net.pause_lo_bytes,
        partition_bytes=net.buffer_pkts * net.frame_bytes,
        pause_quanta=max(1, quanta),
        refresh_us=max(1, round(pause_seconds(quanta, link_bps) / 2 * 1e6)),
    )


SINK_READER_JOIN_S = 5.0
"""How long a stopped sink's last lines may take to be read (a pipe's worth, at once)."""

NETWORK_FILE = "network.toml"
"""A live run's network, as the controller sees it (``qcn ctl -c DIR/network.toml``)."""


class Experiment:
    """The one run script of every Mininet experiment (see the module doc), of a scenario
    the backend has checked (``MININET.check``: what BMv2 cannot run).  A subclass adds its
    traffic: :meth:`start_receivers`, :meth:`start_traffic`, :meth:`on_sample`,
    :meth:`after_measurement` and :meth:`trace`."""

    per_flow_limiters = False
    """The reaction points keep one limiter per IPv4 flow, not per destination."""

    def __init__(
        self,
        sc: Scenario,
        out: Path,
        *,
        qcn: bool = True,
        cli: bool = False,
        sample_hz: float,
        progress: Callable[[str], None] = print,
        emulation: Emulation | None = None,
        seed: int,
        live: LiveFeed | None = None,
    ) -> None:
        self.live = live
        """A live view's feed (qcn.core.live), filled while the run measures."""
        self.sc, self.qcn, self.cli, self.progress = sc, qcn, cli, progress
        # Absolute: the processes on the hosts run elsewhere and are handed paths in it.
        self.out = out.resolve()
        self.seed = seed
        """What random draws the run makes (the flows workload's flows) come from it."""
        self.emulation = emulation or Emulation()
        self.sample_interval_s = 1.0 / sample_hz
        self.rec = Recording()
        self.topo = sc.topology
        self.bottleneck = sc.bottleneck_port
        self.sources = [s.host for s in sc.sources]
        """The hosts that send, each behind its reaction point, in source order."""
        self.agents: dict[str, Any] = {}
        self.port_counters: dict[PortRef, dict[str, int]] = {}
        """Every switch port's pipeline counters after the measurement."""
        self.setup()

    def setup(self) -> None:
        """The experiment's own state, from ``self.sc`` (a subclass's constructor step)."""

    def testbed(self) -> Testbed:
        return Testbed(self.out, self.progress, self.emulation)

    def sampled_ports(self) -> list[PortRef]:
        """Every CP port, and the bottleneck whether it runs one or not."""
        ports = list(self.topo.cp_ports)
        return ports if self.bottleneck in ports else [self.bottleneck, *ports]

    def network_config(self) -> NetworkConfig:
        """The controller's view of the run's network (qcn.topologies.network.network_config)."""
        sc, net = self.sc, self.sc.network
        pause = pause_watermarks(sc) if net.pause else None
        return network_config(
            self.topo,
            cp_params=cp_params(sc, qcn=self.qcn),
            port_cp={p: sc.cp_for(p) for p, _ in sc.port_cp} if self.qcn else None,
            frame_bytes=net.frame_bytes,
            pause=pause,
            pause_output_limit_pkts=PAUSE_OUTPUT_LIMIT_PKTS,
            honour_pause=net.pause,
            rates_bps={self.bottleneck: sc.initial_capacity_bps},
        )

    def run(self) -> Trace:
        """Run the experiment; interrupted or failed once measuring began, it leaves the
        CSVs of what it measured (beside the run's PARTIAL marker) before it goes on."""
        try:
            return self._run()
        except BaseException:
            self._write_partial()
            raise

    def _write_partial(self) -> None:
        if not self.rec.queue:
            return  # nothing measured yet
        try:
            self._gather()
            write_csvs(self.out, self.sc, self.trace())
        except Exception as e:  # the run's own error is the one to report
            self.progress(f"qcn run: the partial results could not be written ({e})")

    def _emulate(self, sc: Scenario) -> Testbed:
        """The network up, programmed, measured, and down again; the testbed it ran on."""
        with self.testbed() as tb:
            tb.start(self.topo, capacity.switch_load(sc).frames_per_s)
            self.agents = tb.program(self.network_config())
            cps = ", ".join(str(p) for p in self.topo.cp_ports) or "none"
            # A bottleneck only where something names one (the topology, or a schedule that
            # changes it): else the figures' port is chosen after the run, where it congested.
            named = sc.schedule or (self.topo.bottleneck and not self.topo.bottleneck_chosen)
            self.progress(
                f"qcn run: switches programmed; CP ports {cps} {cp_role(self.qcn)}"
                + (f"; the bottleneck is {self.bottleneck}" if named else "")
                + (f"; PAUSE on every input ({pause_watermarks(sc)})" if sc.network.pause else "")
            )
            self.start_receivers(tb)
            if self.emulation.pcap:
                tb.start_captures(self.captured_interfaces())
            if sc.network.pause:
                # Before the reaction points: their trees then hang under the gates.
                tb.start_pause_agents([h.name for h in self.topo.hosts], pause_link_rate_bps(sc))
            if self.qcn:
                tb.start_reaction_points(
                    self.sources,
                    QcnParams(rp=sc.params.rp, cp=sc.params.cp),
                    per_flow=self.per_flow_limiters,
                    late_after_s=tolerances_s(sc)["senders"],
                )
            self.progress("qcn run: receivers and reaction points up; starting the traffic")
            hooks = Hooks(
                start_traffic=lambda start: self.start_traffic(tb, start),
                on_sample=lambda elapsed, t: self.on_sample(tb, elapsed, t),
                progress_detail=self.progress_detail,
                check=tb.check_processes,
            )
            with self._live_view():
                self.rec = tb.measure_or_cli(
                    sc, self.agents, self.sampled_ports(), self.sample_interval_s, hooks,
                    cli=self.cli, rec=self.rec,
                )  # fmt: skip
            self.port_counters = self.read_port_counters()
            cp_cnms = sum(self.port_counters[p]["cp_cnms"] for p in self.topo.cp_ports)
            self.rec.cnms = cp_cnms if self.qcn else 0
            self.after_measurement(tb)
        return tb

    def _run(self) -> Trace:
        started = time.perf_counter()
        sc = self.sc
        try:
            tb = self._emulate(sc)
        finally:
            self.release()
        self.after_teardown()
        self._gather()
        trace = self.trace()
        self._port_series(trace)
        # What the pipelines dropped, every port (tail drops and PAUSE partitions): exact,
        # where the receivers' counts are estimates (docs/fct.md, "BMv2's drops").
        switch_drops = sum(c["tail_drops"] + c["pause_drops"] for c in self.port_counters.values())
        trace.extra["switch_drops"] = switch_drops
        marking = [p for p in self.topo.cp_ports if self.sc.cp_for(str(p)).signal is CpSignal.ECN]
        if self.qcn and marking:
            # DCQCN's switches: the frames they marked CE, and the CNPs the receivers sent
            # for them, as the simulator counts them.
            trace.extra["marks"] = sum(self.port_counters[p]["ecn_marks"] for p in marking)
            trace.extra["cnps"] = self.cnps_sent()
        if sc.workload.declared.kind is Kind.FLOWS and sc.workload.transport == "tcp":
            # A TCP receiver sees a stream, not the frames lost: the switch's count is all.
            trace.drops = switch_drops
        if self.qcn and sc.params.cp.three_point:
            # The host-facing ports are the end reflection points: their CNMs count as
            # the simulator's do.
            edge = [p for p in self.port_counters if self.topo.is_edge(p)]
            reflections = {
                k: sum(self.port_counters[p][k] for p in edge) for k in REFLECTION_COUNTERS
            }
            trace.cnms += sum(reflections.values())
            trace.extra |= reflections
        trace.wall_s = time.perf_counter() - started
        trace.noise = tb.noise
        trace.captures = tb.captures()
        if trace.noise is not None:
            self.note_noise(trace)
        return trace

    def _live_view(self) -> contextlib.AbstractContextManager[Any]:
        """While the run measures: the live view's rows and knobs (docs/live.md), and the
        network file a shell's `qcn ctl` reaches the switches with."""
        if self.live is None:
            return contextlib.nullcontext()
        path = self.out / NETWORK_FILE
        path.write_text(network_file.dumps(self.network_config()))
        self.progress(f"qcn run: tune from a shell: qcn ctl -c {path} set SWITCH PORT ...")
        rec = self.rec

        def depths() -> dict[str, int]:
            return {name: rows[-1][1] for name, rows in rec.ports.items() if rows}

        return SwitchLive(
            self.live,
            self.agents,
            depths=depths,
            status_dir=self.out / RP_STATUS_DIR,
            clock=run_clock(lambda: rec.start),
            say=self.progress,
        )

    # -- what a subclass adds ----------------------------------------------------------------

    def start_receivers(self, tb: Testbed) -> None:
        """Start what receives the traffic (before the reaction points and senders)."""

    def start_traffic(self, tb: Testbed, start: float) -> None:
        """Start the senders, so that the traffic begins at monotonic time ``start``."""
        raise NotImplementedError

    def on_sample(self, tb: Testbed, elapsed_s: float | None, t: float) -> None:
        """Per sample (``elapsed_s`` None: the last one, after the drain)."""

    def progress_detail(self, depth: int) -> str:
        return f"queue {depth:3d} pkts"

    def after_measurement(self, tb: Testbed) -> None:
        """While the network still runs, after the measurement and the counters."""

    def after_teardown(self) -> None:
        """Once every process has stopped (what they write when they stop is there)."""

    def release(self) -> None:
        """What the run holds outside Mininet, given back however the run ends (an error,
        Ctrl-C, SIGTERM)."""

    def captured_interfaces(self) -> list[str]:
        """The bottleneck port and the first source's port."""
        first = self.topo.attachment(self.sources[0])
        return [self.bottleneck.interface, first.interface]

    def note_noise(self, trace: Trace) -> None:
        """What the senders say of their own stalls, into the noise record."""

    def cnps_sent(self) -> int:
        """DCQCN: the CNPs the receivers' notification points sent over the run (0 where the
        receivers have none: TCP takes the kernel's own ECN)."""
        return 0

    def _gather(self) -> None:
        """What the helpers logged, into the recording (after the measurement)."""
        self.rec.limiter_rows = read_limiter_logs(self.out / "rp", self.sources)

    def trace(self) -> Trace:
        raise NotImplementedError

    def _port_series(self, trace: Trace) -> None:
        """Every sampled port's queue on the run's grid, and each port's totals from the
        pipeline's counters (drops, CNMs; with three-point QCN the end reflection point's):
        what the simulator records per port, for a network run's ports.csv and summary."""
        for name, rows in self.rec.ports.items():
            times = [t for t, _ in rows]
            series = []
            for _elapsed, t in grid(self.rec, self.sc.duration_s, self.sample_interval_s):
                i = bisect.bisect_right(times, t) - 1
                series.append(rows[i][1] if i >= 0 else 0)
            trace.port_queue_pkts[name] = series
        for ref, c in self.port_counters.items():
            counts = {
                "drops": c["tail_drops"] + c["pause_drops"],
                "cnms": (c["cp_cnms"] + c["fb_reflections"] + c["p0_reflections"])
                if self.qcn
                else 0,
            }
            if self.qcn and self.sc.params.cp.three_point and self.topo.is_edge(ref):
                counts |= {k: c[k] for k in REFLECTION_COUNTERS}
            if (
                self.qcn
                and ref in self.topo.cp_ports
                and (self.sc.cp_for(str(ref)).signal is CpSignal.ECN)
            ):
                counts["marks"] = c["ecn_marks"]
            if any(counts.values()) or str(ref) in trace.port_queue_pkts:
                trace.port_counts[str(ref)] = counts

    # -- shared by the subclasses ------------------------------------------------------------

    def read_port_counters(self) -> dict[PortRef, dict[str, int]]:
        """Every switch port's pipeline counters, now."""
        return {
            PortRef(name, p.port): agent.counters(p.port)
            for name, agent in sorted(self.agents.items())
            for p in agent.cfg.ports
        }

    def host_ip(self, host: str) -> str:
        return self.topo.host_by_name[host].address

    def destinations(self) -> list[str]:
        """Every host some source sends to, in host order."""
        wanted = {d for s in self.sc.sources for d in s.destinations}
        return [h.name for h in self.topo.hosts if h.name in wanted]


class StreamExperiment(Experiment):
    """Each source, behind its reaction point, sends ``qcn rp send`` frames to its
    destination, where a sink counts them by source."""

    def setup(self) -> None:
        self._sink_rows: dict[str, list[tuple[float, dict[str, list[int]]]]] = {}
        """What each receiving host's sink reported (its reader thread appends)."""
        self._sink_cnps: dict[str, dict[str, int]] = {}
        """A notification point's sink: the CNPs sent so far, per source (its last line's)."""
        self._sink_readers: list[threading.Thread] = []

    def _gather(self) -> None:
        super()._gather()
        self.rec.sinks = self._sink_rows

    def note_noise(self, trace: Trace) -> None:
        assert trace.noise is not None
        reports = self._source_reports()
        trace.noise.senders = len(self.sources)
        trace.noise.sender_skipped_s = sum(r.get("stalled_s", 0.0) for r in reports)
        # The measurement's own reporters, which the verdict judges (qcn.core.noise): the
        # senders' reports, and the most silent sink's.
        trace.noise.senders_reported = len(reports) if self.senders_report else None
        trace.noise.sink_times_s = self._most_silent_sink_times()

    senders_report = True
    """The senders write a report (``qcn rp send --report``) when they end."""

    def _most_silent_sink_times(self) -> list[float]:
        """When the sink with the longest silence reported, seconds into the run."""
        start, end = self.rec.start, self.rec.start + self.sc.duration_s

        def longest_gap(times: list[float]) -> float:
            edges = [start, *sorted(t for t in times if start <= t <= end), end]
            return max(b - a for a, b in itertools.pairwise(edges))

        series = [[t for t, _ in rows] for rows in self.rec.sinks.values()] or [[]]
        return [t - start for t in max(series, key=longest_gap)]

    def _source_report_path(self, host: str) -> Path:
        return self.out / "logs" / f"source-{host}.json"

    def _source_reports(self) -> list[dict[str, Any]]:
        """What each source reported (``qcn rp send --report``); a missing one is left out."""
        out = []
        for host in self.sources:
            try:
                out.append(json.loads(self._source_report_path(host).read_text()))
            except (OSError, ValueError):
                continue
        return out

    def trace(self) -> Trace:
        crossing = [
            any(self.bottleneck in self.topo.path(s.host, d) for d in s.destinations)
            for s in self.sc.sources
        ]
        trace = sink_trace(
            self.sc,
            self.rec,
            self.sample_interval_s,
            qcn=self.qcn,
            source_ips=[self.host_ip(h) for h in self.sources],
            at_bottleneck=crossing,
        )
        # What the sinks count is what arrived: each source's delivered throughput.
        trace.source_delivered_bps = trace.source_throughput_bps
        trace.port_throughput_bps = port_throughputs(
            self.sc, [str(p) for p in self.sampled_ports()], trace.source_throughput_bps
        )
        return trace

    # -- receivers and senders ---------------------------------------------------------------

    def sink_command(self, _host: str) -> list[str]:
        """What receives the traffic on a host: it reports like qcn.topologies.sink."""
        return [
            *(sys.executable, "-m", "qcn.topologies.sink"),
            *(f"--port={DATA_PORT}", f"--interval={self.sample_interval_s}"),
            *self.notification_args(),
        ]

    def notification_args(self) -> list[str]:
        """The receivers' DCQCN notification point (``--cnp-interval``, N of ``rp.dcqcn``),
        where the run's scheme is dcqcn and the run has its reaction points; else none."""
        rp = self.sc.params.rp
        if not self.qcn or rp.scheme != RpScheme.DCQCN:
            return []
        return [f"--cnp-interval={rp.own(DcqcnParams).cnp_interval_s!r}"]

    def receiver_name(self, host: str) -> str:
        return "sink" if len(self.destinations()) == 1 else f"sink {host}"

    def start_receivers(self, tb: Testbed) -> None:
        for host in self.destinations():
            name = self.receiver_name(host)
            # The sink is the measurement's clock for what arrived: it runs in real time
            # beside a real-time switch, or a busy machine starves it (its reports late).
            command = [*tb.instrument_scheduling(), *self.sink_command(host)]
            proc = tb.popen(name, host, command, capture=True)
            if proc.stdout is None or not proc.stdout.readline():
                raise ExperimentError(f"the {name} did not start: {tb.last_log_line(name)}")
            rows = self._sink_rows.setdefault(host, [])
            reader = threading.Thread(
                target=self._read_sink,
                args=(proc, rows, self._sink_cnps.setdefault(host, {})),
                name=f"{name}-reader",
                daemon=True,
            )
            reader.start()
            self._sink_readers.append(reader)

    def after_teardown(self) -> None:
        # The sinks have stopped: their last lines (the final counts) are read to the end.
        for reader in self._sink_readers:
            reader.join(SINK_READER_JOIN_S)

    @staticmethod
    def _read_sink(
        proc: Any, rows: list[tuple[float, dict[str, list[int]]]], cnps: dict[str, int]
    ) -> None:
        for line in proc.stdout:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows.append((row["t"], row["rx"]))
            cnps.update(row.get("cnp", {}))

    def cnps_sent(self) -> int:
        return sum(sum(sent.values()) for sent in self._sink_cnps.values())

    def start_traffic(self, tb: Testbed, start: float) -> None:
        """Every source, told to start at monotonic time ``start`` (Python takes a moment
        to start ten of them, so they wait for a common start)."""
        for i, host in enumerate(self.sources):
            tb.popen(f"source {host}", host, self.source_command(i, start), sender=True)

    def source_command(self, i: int, start: float) -> list[str]:
        """``qcn rp send`` for source i (0-based), for the scenario's workload; the run's
        traffic starts at monotonic time ``start``."""
        sc, wl = self.sc, self.sc.workload
        pattern = "onoff" if i in wl.onoff_sources else wl.pattern
        duration = sc.duration_s - i * wl.stagger_s
        host = self.sources[i]
        line_rate = self.topo.access_link(host).rate_bps
        args = [
            # `qcn rp send`'s own module: the whole `qcn` command line costs each of them a
            # second of CPU at the run's start (reaction_point/sources.py).
            *(sys.executable, "-m", "qcn.reaction_point.sources"),
            *("--dst", self.host_ip(sc.sources[i].destinations[0])),
            *("--pattern", pattern, "--frame-bytes", str(sc.network.frame_bytes)),
            *("--duration", f"{duration:.6f}", "--port", str(DATA_PORT), "--seed", str(i + 1)),
            *("--start-at", f"{start + i * wl.stagger_s:.6f}"),
            *("--report", str(self._source_report_path(host))),
        ]
        if pattern == "bernoulli":
            load = wl.max_rate_bps / line_rate
            args += ["--rate-bps", f"{line_rate:.0f}", "--load", f"{load:.6f}"]
        else:
            args += ["--rate-bps", f"{wl.max_rate_bps:.0f}"]
        if pattern == "onoff":
            args += ["--mean-on-ms", f"{wl.mean_on_s * 1e3:.6f}"]
            args += ["--mean-off-ms", f"{wl.mean_off_s * 1e3:.6f}"]
        return args

    def progress_detail(self, depth: int) -> str:
        return f"queue {depth:3d} pkts  delivered {self._delivered_bps(1.0) / 1e6:7.3f} Mb/s"

    def _delivered_bps(self, window_s: float) -> float:
        """What every sink received over the last ``window_s``."""
        total = 0.0
        for rows in list(self._sink_rows.values()):
            if len(rows) < 2:
                continue
            t1, last = rows[-1]
            i = bisect.bisect_left([t for t, _ in rows], t1 - window_s)
            t0, first = rows[min(i, len(rows) - 2)]
            got = sum(c[1] for c in last.values()) - sum(c[1] for c in first.values())
            total += 8 * got / (t1 - t0) if t1 > t0 else 0.0
        return total


class FlowsExperiment(StreamExperiment):
    """The flows workload (docs/fct.md): each source host's flow sender starts the flows
    drawn for it from the run's seed (the simulator's, for the same seed), each flow behind
    its own reaction point and sent to its destination; a flow receiver on each destination
    records their completions."""

    per_flow_limiters = True
    senders_report = False  # (its senders log their flows instead)

    def setup(self) -> None:
        super().setup()
        wl = self.sc.workload
        if wl.transport == "tcp":
            offered = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text()
            if wl.tcp_congestion not in offered.split():
                raise ExperimentError(
                    f"workload.tcp_congestion {wl.tcp_congestion!r}: this kernel offers "
                    f"{', '.join(offered.split())} (modprobe tcp_NAME loads another)"
                )
        self.ack_dir: Path | None = None
        """frames: where the senders take their acknowledgements, out of band."""
        self.arrivals = self.sc.draw_flows(self.seed)
        self.origin = math.nan
        """Monotonic time of the run's start: the flows' start times count from it."""

    def _log(self, name: str) -> Path:
        return self.out / "logs" / name

    def _receiver_log(self, host: str) -> Path:
        single = len(self.destinations()) == 1
        return self._log("flows-sink.jsonl" if single else f"flows-sink-{host}.jsonl")

    def sink_command(self, host: str) -> list[str]:
        return [
            *(sys.executable, "-m", "qcn.topologies.flow_receiver"),
            *(f"--port={DATA_PORT}", f"--interval={self.sample_interval_s}"),
            *(
                f"--frame-bytes={self.sc.network.frame_bytes}",
                f"--log={self._receiver_log(host)}",
            ),
            f"--transport={self.sc.workload.transport}",
            *([f"--ack-dir={self.ack_dir}"] if self.ack_dir else []),
            # (TCP flows take the kernel's own ECN.)
            *(self.notification_args() if self.sc.workload.transport == "frames" else []),
        ]

    def start_receivers(self, tb: Testbed) -> None:
        if self.sc.workload.transport == "frames":
            # The acknowledgements go out of band, as the simulator has them (docs/fct.md,
            # "Transport"): in band, each 64-byte one cost a whole frame's turn in BMv2's
            # queues, which are shaped in frames per second.  A short path: a Unix
            # socket's name has room for 107 bytes.
            self.ack_dir = Path(tempfile.mkdtemp(prefix="qcn-acks-"))
        super().start_receivers(tb)

    def release(self) -> None:
        if self.ack_dir is not None:
            shutil.rmtree(self.ack_dir, ignore_errors=True)

    def start_traffic(self, tb: Testbed, start: float) -> None:
        self.origin = start
        for i, host in enumerate(self.sources):
            table = self._log(f"flows-{host}.csv")
            write_host_flows(
                table,
                [
                    HostFlow(n, a.start_s, a.size_bytes, self.host_ip(self.sc.flow_destination(a)))
                    for n, a in enumerate(self.arrivals)
                    if a.source == i
                ],
            )
            tb.popen(
                f"flows {host}",
                host,
                [
                    *(sys.executable, "-m", "qcn.reaction_point.flow_sender", str(table)),
                    *("--port", str(DATA_PORT)),
                    *("--frame-bytes", str(self.sc.network.frame_bytes)),
                    *("--rto", repr(self.sc.workload.rto_s), "--origin", repr(start)),
                    *("--log", str(self._log(f"flows-{host}.jsonl"))),
                    *("--transport", self.sc.workload.transport),
                    *("--tcp-congestion", self.sc.workload.tcp_congestion),
                    *("--tcp-connections", self.sc.workload.tcp_connections),
                    *(
                        ("--ack-socket", str(self.ack_dir / f"{self.host_ip(host)}.sock"))
                        if self.ack_dir
                        else ()
                    ),
                ],
                sender=True,
            )

    def _sender_lines(self) -> list[dict[str, Any]]:
        return [
            line for host in self.sources for line in _json_lines(self._log(f"flows-{host}.jsonl"))
        ]

    def _records(self, sender_lines: list[dict[str, Any]]) -> list[FlowRecord]:
        receiver_lines = [
            line for host in self.destinations() for line in _json_lines(self._receiver_log(host))
        ]
        return records_from_logs(
            self.arrivals,
            sender_lines,
            receiver_lines,
            origin=self.origin,
            frame_bytes=self.sc.network.frame_bytes,
            path=self.sc.flow_path,
        )

    def trace(self) -> Trace:
        trace = super().trace()
        sender_lines = self._sender_lines()
        late = [line["late"] for line in sender_lines if "late" in line]
        if late:
            # How well the senders kept to the flows' arrival times (docs/fct.md).
            trace.extra |= {
                "flow_start_late_p50_ms": 1e3 * (percentile(late, 0.5) or 0.0),
                "flow_start_late_p99_ms": 1e3 * (percentile(late, 0.99) or 0.0),
                "flow_start_late_max_ms": 1e3 * max(late),
            }
        trace.flows = self._records(sender_lines)
        return trace


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """A JSON-lines log; a line cut short by a kill is left out (and nothing else is)."""
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
