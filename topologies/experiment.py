"""A single-bottleneck scenario on Mininet + BMv2: the `qcn run --backend mininet` backend.

The run takes a scenario already scaled to BMv2's units (:meth:`Scenario.scaled_for_bmv2`)
and composes three parts:

1. bring-up (:class:`~topologies.testbed.Testbed`): a :class:`SingleBottleneckTopo` of
   QcnHosts and one Bmv2Switch; the controller's bring-up of the pipeline, with a CP on the
   sink's port (one that never samples with ``qcn=False``) and the port's queue shaped to
   the scenario's service rate (packets/s of its frames) and buffer; the sink
   (:mod:`topologies.sink`) on the last host, a reaction-point daemon per source host (with
   QCN) and a traffic source per source host (``qcn rp send``);
   With the flows workload (:class:`FlowsExperiment`, docs/fct.md), a flow sender per
   source host (:mod:`reaction_point.flow_sender`), per-flow reaction points, and the flow
   receiver (:mod:`topologies.flow_receiver`) in the sink's place;
2. the measurement loop (:func:`~topologies.measurement.measure`): the schedule, the CP
   port's depth at ``sample_hz``, progress;
3. trace assembly (:func:`~topologies.traces.sink_trace`): the recording on a regular grid.

Teardown happens in every case, including Ctrl-C and errors.
"""

from __future__ import annotations

import bisect
import json
import math
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from qcn.core.flows import FlowRecord, records_from_logs
from qcn.core.params import CpParams, QcnParams, SamplingMode
from qcn.core.results import write_csvs
from qcn.core.scenario import Scenario, require_backend
from qcn.core.stats import percentile
from qcn.core.trace import Trace
from reaction_point.flow_sender import HostFlow, write_host_flows
from topologies.errors import ExperimentError
from topologies.measurement import Hooks, Recording, rate_pps
from topologies.testbed import Emulation, Testbed, missing_requirements
from topologies.traces import read_limiter_logs, sink_trace

__all__ = [
    "DEFAULT_SAMPLE_HZ",
    "Emulation",
    "FlowsExperiment",
    "MininetExperiment",
    "missing_requirements",
]

SINK_PORT = 5001
SWITCH = "s1"
DEFAULT_SAMPLE_HZ = 100.0


def cp_params(sc: Scenario, *, qcn: bool) -> CpParams:
    """The CP port's parameters; without QCN the CP stays on the port, so the queue is still
    measured (its last_qdepth register) at the same per-frame cost, but never samples."""
    if qcn:
        return sc.params.cp
    return replace(
        sc.params.cp, sampling=SamplingMode.BERNOULLI, p_base=0.0, p_scale=0.0, three_point=False
    )


def cp_role(qcn: bool) -> str:
    return "with a CP" if qcn else "without QCN (the CP never samples)"


class Experiment:
    """What every Mininet experiment is given and records; refuses what BMv2 cannot run."""

    def __init__(
        self,
        sc: Scenario,
        out: Path,
        *,
        qcn: bool = True,
        cli: bool = False,
        sample_hz: float = DEFAULT_SAMPLE_HZ,
        progress: Callable[[str], None] = print,
        emulation: Emulation | None = None,
        seed: int = 1,
    ) -> None:
        require_backend(sc, "mininet", ExperimentError)
        self.sc, self.out, self.qcn, self.cli, self.progress = sc, out, qcn, cli, progress
        self.seed = seed
        """What random draws the run makes (the flows workload's flows) come from it."""
        self.emulation = emulation or Emulation()
        self.sample_interval_s = 1.0 / sample_hz
        self.rec = Recording()
        self.setup()

    def setup(self) -> None:
        """The experiment's own state, from ``self.sc`` (a subclass's constructor step)."""

    def testbed(self) -> Testbed:
        return Testbed(self.out, self.progress, self.emulation)

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

    def _run(self) -> Trace:
        raise NotImplementedError

    def _gather(self) -> None:
        """What the helpers logged, into the recording (after the measurement)."""

    def trace(self) -> Trace:
        raise NotImplementedError


class MininetExperiment(Experiment):
    """N sources, each behind its reaction point, send through one switch to a sink."""

    def setup(self) -> None:
        n = self.sc.network.sources
        self.sink_index = n + 1  # host h(N+1), switch port N+1: the bottleneck
        self.sink_ip = f"10.0.0.{self.sink_index}"
        self.cp_port = self.sink_index
        self._sink_rows: list[tuple[float, dict[str, list[int]]]] = []

    @property
    def sources(self) -> list[str]:
        """The hosts that run a reaction point and send, in source order."""
        return [f"h{i}" for i in range(1, self.sc.network.sources + 1)]

    def _gather(self) -> None:
        self.rec.sink = self._sink_rows
        self.rec.limiter_rows = read_limiter_logs(self.out / "rp", self.sources)

    def _run(self) -> Trace:
        from topologies.mininet_bmv2 import SingleBottleneckTopo  # noqa: PLC0415

        started = time.perf_counter()
        sc, n = self.sc, self.sc.network.sources
        with self.testbed() as tb:
            tb.start(SingleBottleneckTopo(sources=n), f"{n} sources, 1 sink, 1 BMv2 switch")
            agent = tb.program(
                {SWITCH: [self.cp_port]},
                cp_params(sc, qcn=self.qcn),
                {
                    SWITCH: [
                        (
                            self.cp_port,
                            rate_pps(sc, sc.network.bottleneck_rate_bps),
                            sc.network.buffer_pkts,
                        )
                    ]
                },
            )[SWITCH]
            self.progress(
                f"qcn run: switch programmed; port {self.cp_port} is the bottleneck "
                f"{cp_role(self.qcn)}"
            )
            self._start_sink(tb)
            if self.emulation.pcap:
                tb.start_captures([f"{SWITCH}-eth{self.cp_port}", f"{SWITCH}-eth1"])
            if self.qcn:
                tb.start_reaction_points(
                    self.sources,
                    QcnParams(rp=sc.params.rp, cp=sc.params.cp),
                    per_flow=self.per_flow_limiters,
                )
            self.progress("qcn run: sink and reaction points up; starting the sources")
            hooks = Hooks(
                start_traffic=lambda start: self._start_sources(tb, start),
                on_sample=lambda _elapsed, _t: None,  # the sink reports by itself
                progress_detail=self._progress_detail,
                check=tb.check_processes,
            )
            self.rec = tb.measure_or_cli(
                sc, agent, self.cp_port, self.sample_interval_s, hooks, cli=self.cli,
                rec=self.rec,
            )  # fmt: skip
            counters = agent.counters(self.cp_port)
            self.rec.cnms = counters["cp_cnms"] if self.qcn else 0
        self._gather()
        trace = self.trace()
        if self.qcn and sc.params.cp.three_point:
            # The sink's port is the end reflection point: its CNMs count as the simulator's.
            trace.cnms += counters["fb_reflections"] + counters["p0_reflections"]
            trace.extra |= {k: counters[k] for k in ("fb_reflections", "p0_reflections")}
        trace.wall_s = time.perf_counter() - started
        trace.noise = tb.noise
        trace.captures = tb.captures()
        if trace.noise is not None:
            reports = self._source_reports()
            trace.noise.senders = len(self.sources)
            trace.noise.sender_skipped_s = sum(r.get("stalled_s", 0.0) for r in reports)
            # The measurement's own reporters, which the verdict judges (qcn.core.noise).
            trace.noise.senders_reported = len(reports) if self.senders_report else None
            trace.noise.sink_times_s = [t - self.rec.start for t, _ in self.rec.sink]
        return trace

    per_flow_limiters = False
    """The reaction points keep one limiter per IPv4 flow, not per destination."""
    senders_report = True
    """The senders write a report (``qcn rp send --report``) when they end."""

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
        return sink_trace(self.sc, self.rec, self.sample_interval_s, qcn=self.qcn)

    # -- the sink and the sources ------------------------------------------------------------

    def sink_command(self) -> list[str]:
        """What receives the traffic on the sink host: it reports like topologies.sink."""
        return [
            *(sys.executable, "-m", "topologies.sink"),
            *(f"--port={SINK_PORT}", f"--interval={self.sample_interval_s}"),
        ]

    def _start_sink(self, tb: Testbed) -> None:
        proc = tb.popen("sink", f"h{self.sink_index}", self.sink_command(), capture=True)
        if proc.stdout is None or not proc.stdout.readline():
            raise ExperimentError(f"the sink did not start: {tb.last_log_line('sink')}")

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self._sink_rows.append((row["t"], row["rx"]))

        threading.Thread(target=read, name="sink-reader", daemon=True).start()

    def _start_sources(self, tb: Testbed, start: float) -> None:
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
        args = [
            *(sys.executable, "-m", "qcn", "rp", "send", "--dst", self.sink_ip),
            *("--pattern", pattern, "--frame-bytes", str(sc.network.frame_bytes)),
            *("--duration", f"{duration:.6f}", "--port", str(SINK_PORT), "--seed", str(i + 1)),
            *("--start-at", f"{start + i * wl.stagger_s:.6f}"),
            *("--report", str(self._source_report_path(self.sources[i]))),
        ]
        if pattern == "bernoulli":
            load = wl.max_rate_bps / sc.network.line_rate_bps
            args += ["--rate-bps", f"{sc.network.line_rate_bps:.0f}", "--load", f"{load:.6f}"]
        else:
            args += ["--rate-bps", f"{wl.max_rate_bps:.0f}"]
        if pattern == "onoff":
            args += ["--mean-on-ms", f"{wl.mean_on_s * 1e3:.6f}"]
            args += ["--mean-off-ms", f"{wl.mean_off_s * 1e3:.6f}"]
        return args

    def _progress_detail(self, depth: int) -> str:
        return f"queue {depth:3d} pkts  delivered {self._delivered_bps(1.0) / 1e6:7.3f} Mb/s"

    def _delivered_bps(self, window_s: float) -> float:
        rows = self._sink_rows
        if len(rows) < 2:
            return 0.0
        t1, last = rows[-1]
        i = bisect.bisect_left([t for t, _ in rows], t1 - window_s)
        t0, first = rows[min(i, len(rows) - 2)]
        total = sum(c[1] for c in last.values()) - sum(c[1] for c in first.values())
        return 8 * total / (t1 - t0) if t1 > t0 else 0.0


class FlowsExperiment(MininetExperiment):
    """The flows workload (docs/fct.md): each source host's flow sender starts the flows
    drawn for it from the run's seed (the simulator's, for the same seed), each flow behind
    its own reaction point; the flow receiver on the sink records their completions."""

    per_flow_limiters = True
    senders_report = False  # (its senders log their flows instead)

    def setup(self) -> None:
        super().setup()
        self.arrivals = self.sc.draw_flows(self.seed)
        self.origin = math.nan
        """Monotonic time of the run's start: the flows' start times count from it."""

    def _log(self, name: str) -> Path:
        return self.out / "logs" / name

    def sink_command(self) -> list[str]:
        return [
            *(sys.executable, "-m", "topologies.flow_receiver"),
            *(f"--port={SINK_PORT}", f"--interval={self.sample_interval_s}"),
            *(
                f"--frame-bytes={self.sc.network.frame_bytes}",
                f"--log={self._log('flows-sink.jsonl')}",
            ),
            f"--transport={self.sc.workload.transport}",
        ]

    def _start_sources(self, tb: Testbed, start: float) -> None:
        self.origin = start
        for i, host in enumerate(self.sources):
            table = self._log(f"flows-{host}.csv")
            write_host_flows(
                table,
                [
                    HostFlow(n, a.start_s, a.size_bytes)
                    for n, a in enumerate(self.arrivals)
                    if a.source == i
                ],
            )
            tb.popen(
                f"flows {host}",
                host,
                [
                    *(sys.executable, "-m", "reaction_point.flow_sender", str(table)),
                    *("--dst", self.sink_ip, "--port", str(SINK_PORT)),
                    *("--frame-bytes", str(self.sc.network.frame_bytes)),
                    *("--rto", repr(self.sc.workload.rto_s), "--origin", repr(start)),
                    *("--log", str(self._log(f"flows-{host}.jsonl"))),
                    *("--transport", self.sc.workload.transport),
                ],
                sender=True,
            )

    def _sender_lines(self) -> list[dict[str, Any]]:
        return [
            line for host in self.sources for line in _json_lines(self._log(f"flows-{host}.jsonl"))
        ]

    def _records(self, sender_lines: list[dict[str, Any]]) -> list[FlowRecord]:
        net = self.sc.network
        return records_from_logs(
            self.arrivals,
            sender_lines,
            _json_lines(self._log("flows-sink.jsonl")),
            origin=self.origin,
            frame_bytes=net.frame_bytes,
            rate_bps=min(net.line_rate_bps, net.bottleneck_rate_bps),
            one_way_s=net.rtt_s / 2,
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
