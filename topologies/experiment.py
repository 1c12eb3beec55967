"""A scenario on Mininet + BMv2: the `qcn run --backend mininet` backend.

The run takes a scenario already scaled to BMv2's units (:meth:`Scenario.scaled_for_bmv2`)
and does, in order:

1. a :class:`SingleBottleneckTopo` of QcnHosts and one Bmv2Switch (static ARP);
2. the controller's bring-up of the pipeline, with a CP on the sink's port (none with
   ``qcn=False``), and the port's queue shaped over Thrift to the scenario's service rate
   (packets/s of its frames) and buffer;
3. the sink (:mod:`topologies.sink`) on the last host, one reaction-point daemon per source
   host (with QCN) and one traffic source per source host (``qcn rp send``);
4. the schedule (queue-rate changes at their times) while sampling the CP port's queue
   depth from the pipeline's ``last_qdepth`` register at ``sample_hz``;
5. teardown in every case, including Ctrl-C and errors: processes, then Mininet, then a
   check that no interface of the run is left.

The recording becomes a :class:`simulator.engine.Trace` on a regular time grid, so the
results (CSV, summary, plots) come from the same code as the simulator's.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from qcn.params import QcnParams
from qcn.scenario import Scenario
from simulator.engine import Trace
from topologies.errors import ExperimentError

ROOT = Path(__file__).resolve().parent.parent
SINK_PORT = 5001
SWITCH = "s1"
SWITCH_INTERFACE = re.compile(r"^s\d+-eth\d+$")
"""Switch-side veths of a Mininet run (sK-ethP)."""
QDEPTH_REGISTER = "QcnEgress.cp.last_qdepth"
DEFAULT_SAMPLE_HZ = 100.0
SOURCE_START_DELAY_S = 2.0


def missing_requirements() -> str | None:
    """Why this backend cannot run here, in one line (None: it can)."""
    for tool in ("p4c", "simple_switch_grpc", "mnexec"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (see 'make deps')"
    if os.geteuid() != 0:
        return "Mininet needs root"
    return None


@dataclass
class Recording:
    """What the run measured, in raw form (monotonic timestamps)."""

    queue: list[tuple[float, int]] = field(default_factory=list)
    sink: list[tuple[float, dict[str, list[int]]]] = field(default_factory=list)
    capacity: list[tuple[float, float]] = field(default_factory=list)
    limiter_rows: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)
    """Per source index: (monotonic time, CR, TR) at every limiter change."""
    cnms: int = 0
    start: float = 0.0


class MininetExperiment:
    def __init__(
        self,
        sc: Scenario,
        out: Path,
        *,
        qcn: bool = True,
        cli: bool = False,
        sample_hz: float = DEFAULT_SAMPLE_HZ,
        progress: Callable[[str], None] = print,
    ) -> None:
        self.sc = sc
        self.out = out
        self.qcn = qcn
        self.cli = cli
        self.sample_interval_s = 1.0 / sample_hz
        self.progress = progress
        self.net: Any = None
        self.procs: list[tuple[str, subprocess.Popen[str]]] = []
        self.rec = Recording()
        n = sc.network.sources
        self.sink_index = n + 1  # host h(N+1), switch port N+1: the bottleneck
        self.sink_ip = f"10.0.0.{self.sink_index}"
        self.cp_port = self.sink_index
        self.agents: list[Any] = []
        """Every switch agent opened; closed when the run ends."""

    def rp_hosts(self) -> list[str]:
        """The hosts that run a reaction point (and send), in source order."""
        return [f"h{i}" for i in range(1, self.sc.network.sources + 1)]

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> Trace:
        started = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            self._build_pipeline()
            self._start_network()
            agent = self._program_switch()
            try:
                self._start_processes()
                if self.cli:
                    from mininet.cli import CLI  # noqa: PLC0415

                    self.progress("qcn run: everything is running; 'exit' ends the run")
                    CLI(self.net)
                else:
                    self._measure(agent)
                self.rec.cnms = agent.counters(self.cp_port)["cp_cnms"] if self.qcn else 0
            finally:
                for a in self.agents:
                    a.close()
        finally:
            self._teardown()
            signal.signal(signal.SIGTERM, previous)
        self._read_limiter_logs()
        trace = self._trace()
        trace.wall_s = time.perf_counter() - started
        return trace

    def _build_pipeline(self) -> None:
        self.progress("qcn run: compiling the pipeline (make build)")
        done = subprocess.run(
            ["make", "-s", "-C", str(ROOT), "build"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ExperimentError(f"make build failed:\n{done.stdout}{done.stderr}".rstrip())

    def _start_network(self) -> None:
        from topologies.mininet_bmv2 import SingleBottleneckTopo  # noqa: PLC0415

        n = self.sc.network.sources
        self._start_mininet(SingleBottleneckTopo(sources=n), f"{n} sources, 1 sink, 1 BMv2 switch")

    def _start_mininet(self, topo: Any, what: str) -> None:
        """Start ``topo`` (QcnHosts, Bmv2Switches logging into the results) with static ARP."""
        from mininet.log import setLogLevel  # noqa: PLC0415
        from mininet.net import Mininet  # noqa: PLC0415

        from topologies.mininet_bmv2 import Bmv2Switch, QcnHost  # noqa: PLC0415

        setLogLevel("warning")
        remove_stale_interfaces(self.progress)
        self.progress(f"qcn run: starting Mininet: {what}")
        self.net = Mininet(
            topo=topo,
            switch=partial(Bmv2Switch, log_dir=self.out),
            host=QcnHost,
            controller=None,
            autoSetMacs=False,
        )
        self.net.start()
        self.net.staticArp()

    def cp_params(self) -> dict[str, Any]:
        cp = self.sc.params.to_dict()["cp"]
        if not self.qcn:
            # The CP stays on the port, so the queue is still measured (its last_qdepth
            # register) at the same per-frame cost, but it never samples: no CNMs.
            cp.update(sampling="bernoulli", p_base=0.0, p_scale=0.0)
        return dict(cp)

    def _program_switch(self) -> Any:
        from controller.agent import SwitchAgent  # noqa: PLC0415
        from topologies.mininet_bmv2 import network_config  # noqa: PLC0415

        cp = self.cp_params()
        config = network_config(self.net, cp_ports={SWITCH: [self.sink_index]}, cp_params=cp)
        agent = SwitchAgent(config, SWITCH)
        self.agents.append(agent)
        with self._agents_closed_on_error():
            agent.bring_up()
            agent.set_queue(
                self.sink_index,
                self._rate_pps(self.sc.network.bottleneck_rate_bps),
                self.sc.network.buffer_pkts,
            )
        self.progress(
            f"qcn run: switch programmed; port {self.sink_index} is the bottleneck "
            f"{self._cp_role()}"
        )
        return agent

    @contextlib.contextmanager
    def _agents_closed_on_error(self) -> Iterator[None]:
        """Programming switches: on any failure, close every agent opened so far."""
        try:
            yield
        except BaseException:
            for a in self.agents:
                a.close()
            raise

    def _cp_role(self) -> str:
        return "with a CP" if self.qcn else "without QCN (the CP never samples)"

    def _rate_pps(self, rate_bps: float) -> int:
        return max(1, round(rate_bps / (8 * self.sc.network.frame_bytes)))

    def _start_processes(self) -> None:
        py = sys.executable
        sink = self.net.get(f"h{self.sink_index}")
        self._sink_proc = self._popen(
            "sink",
            sink,
            [
                py,
                "-m",
                "topologies.sink",
                f"--port={SINK_PORT}",
                f"--interval={self.sample_interval_s}",
            ],
        )
        self._sink_reader = threading.Thread(target=self._read_sink, daemon=True)
        if self._sink_proc.stdout is None or not self._sink_proc.stdout.readline():
            raise ExperimentError(f"the sink did not start: {self._last_log_line('sink')}")
        self._sink_reader.start()
        self._start_reaction_points()
        self.progress("qcn run: sink and reaction points up; starting the sources")

    def _start_reaction_points(self) -> None:
        if not self.qcn:
            return
        sc, py = self.sc, sys.executable
        params = self.out / "params.toml"
        QcnParams(rp=sc.params.rp, cp=sc.params.cp).save(params)
        status_dir = self.out / "rp-status"
        status_dir.mkdir(exist_ok=True)
        for name in self.rp_hosts():
            self._popen(
                f"rp {name}",
                self.net.get(name),
                [
                    *(py, "-m", "qcn", "rp", "start", f"--iface={name}-eth0"),
                    *(f"--params={params}", f"--csv-dir={self.out / 'rp'}"),
                    f"--status-dir={status_dir}",
                ],
            )
        self._wait_for_daemons(status_dir)

    def _wait_for_daemons(self, status_dir: Path) -> None:
        from topologies.bmv2 import wait_until  # noqa: PLC0415

        n = len(self.rp_hosts())

        def ready() -> bool:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise ExperimentError(f"{name} exited: {self._last_log_line(name)}")
            return len(list(status_dir.glob("rp-*.json"))) == n

        if not wait_until(ready, 20.0, interval_s=0.1):
            raise ExperimentError("the reaction-point daemons did not start within 20 s")

    def _source_command(self, i: int, start: float) -> list[str]:
        """``qcn rp send`` for source i (0-based), for the scenario's workload; the run's
        traffic starts at monotonic time ``start``."""
        sc, wl = self.sc, self.sc.workload
        pattern = "onoff" if i in wl.onoff_sources else wl.pattern
        duration = sc.duration_s - i * wl.stagger_s
        args = [
            sys.executable,
            "-m",
            "qcn",
            "rp",
            "send",
            "--dst",
            self.sink_ip,
            "--pattern",
            pattern,
            "--frame-bytes",
            str(sc.network.frame_bytes),
            "--duration",
            f"{duration:.6f}",
            "--port",
            str(SINK_PORT),
            "--seed",
            str(i + 1),
            "--start-at",
            f"{start + i * wl.stagger_s:.6f}",
        ]
        if pattern == "bernoulli":
            load = wl.max_rate_bps / sc.network.line_rate_bps
            args += ["--rate-bps", f"{sc.network.line_rate_bps:.0f}", "--load", f"{load:.6f}"]
        else:
            args += ["--rate-bps", f"{wl.max_rate_bps:.0f}"]
        if pattern == "onoff":
            args += [
                "--mean-on-ms",
                f"{wl.mean_on_s * 1e3:.6f}",
                "--mean-off-ms",
                f"{wl.mean_off_s * 1e3:.6f}",
            ]
        return args

    def _measure(self, agent: Any) -> None:
        """Start the traffic, then sample until the run's end: the schedule, the CP port's
        depth, the processes' health, progress every second."""
        sc = self.sc
        thrift = agent.thrift()
        pending_changes = list(sc.schedule)
        start = self.rec.start = time.monotonic() + SOURCE_START_DELAY_S
        self._start_traffic(start)
        time.sleep(max(0.0, start - time.monotonic()))
        self.rec.capacity.append((start, sc.network.bottleneck_rate_bps))
        next_sample, next_progress, end = start, start + 1.0, start + sc.duration_s
        while (now := time.monotonic()) < end:
            self._apply_schedule(thrift, pending_changes, now - start)
            depth = thrift.register_read(QDEPTH_REGISTER, self.cp_port)
            t = time.monotonic()
            self.rec.queue.append((t, depth))
            self._on_sample(now - start, t)
            self._check_processes()
            if now >= next_progress:
                self.progress(
                    f"qcn run: t={now - start:5.1f}/{sc.duration_s:g} s  "
                    + self._progress_detail(depth)
                )
                next_progress += 1.0
            next_sample += self.sample_interval_s
            time.sleep(max(0.0, next_sample - time.monotonic()))
        # Let the last frames drain into the sinks before counting.
        time.sleep(min(1.0, 10 * self.sample_interval_s))
        self._on_sample(None, time.monotonic())

    def _start_traffic(self, start: float) -> None:
        """Every source, told to start at monotonic time ``start`` (Python takes a moment
        to start ten of them, so they wait for a common start)."""
        for i in range(self.sc.network.sources):
            self._popen(
                f"source h{i + 1}", self.net.get(f"h{i + 1}"), self._source_command(i, start)
            )

    def _on_sample(self, elapsed_s: float | None, t: float) -> None:
        """Per sample at monotonic time ``t``, ``elapsed_s`` into the run (None: the last
        sample, after the drain); the sink reports by itself."""

    def _progress_detail(self, depth: int) -> str:
        return f"queue {depth:3d} pkts  delivered {self._delivered_bps(1.0) / 1e6:7.3f} Mb/s"

    def _apply_schedule(self, thrift: Any, pending: list[Any], elapsed_s: float) -> None:
        """Apply the schedule's due rate changes (``pending``, consumed) to the CP port."""
        while pending and elapsed_s >= pending[0].at_s:
            change = pending.pop(0)
            thrift.set_queue_rate(self._rate_pps(change.bottleneck_rate_bps), self.cp_port)
            self.rec.capacity.append((time.monotonic(), change.bottleneck_rate_bps))
            self.progress(
                f"qcn run: t={elapsed_s:.1f} s: bottleneck -> "
                f"{change.bottleneck_rate_bps / 1e6:g} Mb/s"
            )

    def _check_processes(self) -> None:
        """Fail the run when a helper process failed (the tail of its log says why)."""
        for name, proc in self.procs:
            if proc.poll() not in (None, 0):
                raise ExperimentError(f"{name} failed: {self._last_log_line(name)}")

    def _delivered_bps(self, window_s: float) -> float:
        rows = self.rec.sink
        if len(rows) < 2:
            return 0.0
        t1, last = rows[-1]
        i = bisect.bisect_left([t for t, _ in rows], t1 - window_s)
        t0, first = rows[min(i, len(rows) - 2)]
        total = sum(c[1] for c in last.values()) - sum(c[1] for c in first.values())
        return 8 * total / (t1 - t0) if t1 > t0 else 0.0

    def _read_sink(self) -> None:
        assert self._sink_proc.stdout is not None
        for line in self._sink_proc.stdout:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.rec.sink.append((row["t"], row["rx"]))

    # -- processes ---------------------------------------------------------------------------

    def _popen(self, name: str, host: Any, command: list[str]) -> subprocess.Popen[str]:
        """Start ``command`` on ``host``; its stderr (and stdout, but the sink's) go to
        ``logs/NAME.log`` in the results directory."""
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        log = (logs / f"{name.replace(' ', '-')}.log").open("w")
        proc: subprocess.Popen[str] = host.popen(
            command,
            stdout=subprocess.PIPE if name == "sink" else log,
            stderr=log,
            text=True,
            cwd=str(ROOT),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def _last_log_line(self, name: str) -> str:
        path = self.out / "logs" / f"{name.replace(' ', '-')}.log"
        lines = path.read_text().strip().splitlines() if path.exists() else []
        return lines[-1] if lines else "no output"

    def _teardown(self) -> None:
        for _name, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # the RP daemons restore their qdiscs
        deadline = time.monotonic() + 5.0
        for _name, proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.net is not None:
            self.progress("qcn run: stopping Mininet")
            self.net.stop()
            self.net = None
        remove_stale_interfaces(self.progress)

    # -- the trace ---------------------------------------------------------------------------

    def _read_limiter_logs(self) -> None:
        for i, name in enumerate(self.rp_hosts()):
            rows: list[tuple[float, float, float]] = []
            for path in sorted((self.out / "rp").glob(f"rp-{name}-eth0-*.csv")):
                with path.open() as f:
                    for r in csv.DictReader(f):
                        rows.append(
                            (float(r["monotonic_s"]), float(r["cr_bps"]), float(r["tr_bps"]))
                        )
            self.rec.limiter_rows[i] = sorted(rows)

    def _trace(self) -> Trace:
        """The recording on a grid of ``sample_interval_s`` from the start of the traffic."""
        sc, rec, dt = self.sc, self.rec, self.sample_interval_s
        tr = Trace()
        n = sc.network.sources
        ips = [f"10.0.0.{i + 1}" for i in range(n)]
        steps = int(sc.duration_s / dt)
        q_times = [t for t, _ in rec.queue]
        limiter_times = self._limiter_times()
        s_times = [t for t, _ in rec.sink]
        previous: dict[str, list[int]] = {}
        for k in range(1, steps + 1):
            t = rec.start + k * dt
            tr.times_s.append(k * dt)
            qi = bisect.bisect_right(q_times, t) - 1
            tr.queue_pkts.append(rec.queue[qi][1] if qi >= 0 else 0)
            si = bisect.bisect_right(s_times, t) - 1
            counts = rec.sink[si][1] if si >= 0 else {}
            per_source = [
                8 * (counts.get(ip, [0, 0, 0])[1] - previous.get(ip, [0, 0, 0])[1]) / dt
                for ip in ips
            ]
            previous = counts
            tr.drops_so_far.append(sum(counts.get(ip, [0, 0, 0])[2] for ip in ips))
            tr.source_throughput_bps.append(per_source)
            tr.throughput_bps.append(sum(per_source))
            self._append_rates_at(tr, t, n, limiter_times)
        final = rec.sink[-1][1] if rec.sink else {}
        tr.drops = sum(final.get(ip, [0, 0, 0])[2] for ip in ips)
        tr.frames_in = sum(final.get(ip, [0, 0, 0])[0] for ip in ips) + tr.drops
        tr.cnms = rec.cnms
        tr.events = len(rec.queue)
        return tr

    def _limiter_times(self) -> dict[int, list[float]]:
        """The times of each source's limiter rows, for bisection."""
        return {i: [r[0] for r in rows] for i, rows in self.rec.limiter_rows.items()}

    def _append_rates_at(
        self, tr: Trace, t: float, sources: int, limiter_times: dict[int, list[float]]
    ) -> None:
        """The bottleneck's capacity and every source's limiter (CR, TR) at time ``t``."""
        rec = self.rec
        ci = bisect.bisect_right([c for c, _ in rec.capacity], t) - 1
        tr.capacity_bps.append(rec.capacity[max(ci, 0)][1] if rec.capacity else math.nan)
        line = self.sc.network.line_rate_bps
        crs, trs = [], []
        for i in range(sources):
            rows = rec.limiter_rows.get(i, [])
            li = bisect.bisect_right(limiter_times.get(i, []), t) - 1
            if not self.qcn:
                crs.append(self.sc.workload.max_rate_bps)
                trs.append(math.nan)
            elif li < 0:  # no CNM yet: the limiter is released at line rate
                crs.append(line)
                trs.append(line)
            else:
                _, cr, target = rows[li]
                crs.append(cr)
                trs.append(target)
        tr.source_cr_bps.append(crs)
        tr.source_tr_bps.append(trs)


def _raise_keyboard_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def remove_stale_interfaces(progress: Callable[[str], None]) -> None:
    """Delete switch-side veths a crashed run left (Mininet would fail on them)."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False)
    stale = []
    for line in links.stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if SWITCH_INTERFACE.match(name):
            stale.append(name)
    for name in stale:
        subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
    if stale:
        progress(f"qcn run: removed {len(stale)} interfaces left by an earlier run")
