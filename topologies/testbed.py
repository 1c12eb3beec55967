"""Bring-up and teardown of one Mininet network of BMv2 switches, and its processes.

A :class:`Testbed` is what every Mininet experiment stands on: it compiles the pipeline,
starts the topology (QcnHosts, Bmv2Switches logging into the results, static ARP),
programs the switches through the controller, starts processes on hosts with their
output in ``logs/``, starts the reaction-point daemons, and tears everything down in every
case — Ctrl-C, SIGTERM, errors: processes first (the daemons restore their qdiscs), then
the switch agents, then Mininet, then a check that no interface of the run is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from qcn.controller.config import NetworkConfig
from qcn.core.noise import DaemonLatency, NoiseRecording
from qcn.core.params import QcnParams
from qcn.core.pipeline import build_dir, compile_program
from qcn.core.scenario import Scenario
from qcn.core.signals import sigterm_as_interrupt
from qcn.core.topology import PortRef, Topology
from qcn.reaction_point.cli import RpUsageError, read_status
from qcn.reaction_point.daemon import status_files
from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC, wait_until
from qcn.topologies.errors import ExperimentError
from qcn.topologies.measurement import Hooks, Recording, measure
from qcn.topologies.noise import NoiseMonitor, StallInjector, realtime_available, threads_of
from qcn.topologies.placement import UNPINNED, plan_cpus, taskset_prefix, usable_cpus

SWITCH_INTERFACE = re.compile(r"^s\d+-eth\d+$")
"""Switch-side veths of a Mininet run (sK-ethP)."""
HOST_HELPER_MARK = "QCN_HOST_HELPER"
"""An environment variable set on everything a run starts on its hosts (reaction points,
sources, sinks, PAUSE agents, iperf3): a killed run's leftovers are found by it, whatever
their command line (a list of command names missed the sources once they got their own
module)."""
QDISC_BACKLOG = re.compile(r"backlog \S+ (\d+)p")
"""The frames in a qdisc's backlog, in `tc -s qdisc show`."""
DAEMON_START_TIMEOUT_S = 20.0
RP_STATUS_DIR = "rp-status"
"""The reaction-point daemons' status files, in the results directory."""
PAUSE_AGENT_NICE = -15
"""The PAUSE agents' niceness where the switches are not in real time: ahead of them
(qcn.topologies.mininet_bmv2.SWITCH_NICE), as a MAC is; they use little CPU."""

CAPTURE_PIPE_BYTES = 1 << 20
"""The pipe a captured helper writes its stdout into.  The default 64 KiB holds 1.7 s of the
sink's reports (one 372-byte line each 10 ms, ten sources); the runner's reader is an
ordinary process beside ten busy senders and fell a second behind in a quiet ``make run``,
and past the pipe's size the sink blocks and its reports stop (it was judged silent for 2 to
4.6 s in 3 of 7 runs).  1 MiB, the default ``fs.pipe-max-size``, holds 28 s."""


T = TypeVar("T")


def _on_every_thread(
    restore: contextlib.ExitStack,
    get: Callable[[int], T],
    put: Callable[[int, T], object],
    value: T,
) -> None:
    """``put(tid, value)`` on every thread of this process, each one's ``get(tid)`` put back
    when ``restore`` closes; a thread that ended meanwhile is passed over."""
    for tid in threads_of(os.getpid()):
        with contextlib.suppress(OSError):
            before = get(tid)
            put(tid, value)
            restore.callback(_put_quietly, put, tid, before)


def _put_quietly(put: Callable[[int, T], object], tid: int, value: T) -> None:
    with contextlib.suppress(OSError):  # a thread that ended meanwhile
        put(tid, value)


def _get_scheduler(tid: int) -> tuple[int, os.sched_param]:
    return os.sched_getscheduler(tid), os.sched_getparam(tid)


def _put_scheduler(tid: int, scheduler: tuple[int, os.sched_param]) -> None:
    os.sched_setscheduler(tid, *scheduler)


def widen_pipe(fd: int, size: int = CAPTURE_PIPE_BYTES) -> int:
    """Make the pipe ``fd`` belongs to hold ``size`` bytes (within ``fs.pipe-max-size``
    unless root); the size it now has."""
    try:
        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except PermissionError:
        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        return fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, min(size, limit))


Progress = Callable[[str], None]


@dataclass(frozen=True)
class Emulation:
    """How a Mininet run shares its machine (docs/bmv2.md, "Noise")."""

    realtime_switch: bool = True
    """Run the switches under SCHED_FIFO where the machine allows it (else at niceness -10)."""
    inject_stalls: tuple[float, float] | None = None
    """(stall, period) in seconds: stall the switch on purpose, to see the noise verdict."""
    pcap: bool = False
    """Capture the CP port and one source's port (bounded ring buffers, :data:`CAPTURE`)."""
    pinned: bool = False
    """Each switch on one CPU, the hosts' processes on another (qcn.topologies.placement);
    else the kernel places every process (the default: docs/bmv2.md, "Pinned switches")."""


@dataclass(frozen=True)
class CaptureLimits:
    """How much a run's packet captures may hold: a ring of files per port."""

    snap_bytes: int = 128
    """Enough for a whole CNM (14 + 24 + 64 bytes) and every header of a data frame."""
    file_kb: int = 20_000
    files: int = 5
    """At most files x file_kb per port: older files are overwritten."""


CAPTURE = CaptureLimits()
CAPTURE_DIR = "captures"


MININET_TOOLS = ("p4c", "simple_switch_grpc", "mnexec")
"""The programs the Mininet backend needs."""


def missing_tool() -> str | None:
    """The first of the Mininet backend's programs that is not installed (None: all are)."""
    return next((tool for tool in MININET_TOOLS if shutil.which(tool) is None), None)


def missing_requirements() -> str | None:
    """Why the Mininet backend cannot run here, in one line (None: it can)."""
    tool = missing_tool()
    if tool is not None:
        return f"{tool} is not installed (see 'make deps')"
    if os.geteuid() != 0:
        return "Mininet needs root"
    return None


NETWORK_LOCK = Path(os.environ.get("QCN_NETWORK_LOCK", "/run/lock/qcn-p4-network.lock"))
"""Held (flock) by the run whose Mininet network is up: the switches' names, ports and
interfaces are the same in every run, so a second run would take the first one's for stale
and stop them.  The kernel drops the lock when its holder dies, however it dies."""


def hold_network_lock(path: Path = NETWORK_LOCK, wait_s: float = 0.0) -> IO[str]:
    """The network's lock, held until the returned file is closed (waiting up to
    ``wait_s`` for it); raises ExperimentError naming the run that holds it."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        lock = path.open("a+")
    except OSError as e:
        raise ExperimentError(f"cannot open the network lock {path}: {e.strerror}") from None

    def take() -> bool:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    if not wait_until(take, wait_s):  # (tried once at least, even with no wait)
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise ExperimentError(
            f"another qcn network is up ({holder}): wait for it to end, or stop it"
        ) from None
    lock.seek(0)
    lock.truncate()
    command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
    lock.write(f"pid {os.getpid()}: {command}")
    lock.flush()
    return lock


def remove_stale_interfaces(progress: Progress) -> None:
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


SHELL_SETTLE_S = 2.0
"""How long a node's shell may take to answer the interrupt of a command a signal cut short."""


def settle_interrupted_shells(net: Any, within_s: float = SHELL_SETTLE_S) -> None:
    """Each node's shell ready for a command again.  A signal that comes while the runner
    waits on a node's command (Mininet's ``cmd``: bringing up a switch's interfaces) leaves
    that node waiting for its prompt, and Mininet's ``stop`` then fails on its first command
    to it (an AssertionError: exit 1, with the switches started until then left running).
    The command is interrupted and its prompt read, for at most ``within_s``; a shell that
    gives none is taken as ready, so that stopping the network still goes on."""
    for node in [*net.hosts, *net.switches, *net.controllers]:
        if not (node.shell and node.waiting):
            continue
        with contextlib.suppress(OSError, ValueError):
            node.sendInt()
            deadline = time.monotonic() + within_s
            while node.waiting and time.monotonic() < deadline:
                node.monitor(timeoutms=100, findPid=False)
        node.waiting = False


def _pids_matching(pattern: str) -> list[tuple[int, list[str]]]:
    """(pid, argv) of the processes whose command line matches ``pattern`` (pgrep -f)."""
    found = subprocess.run(
        ["pgrep", "-a", "-f", "--", pattern], capture_output=True, text=True, check=False
    )
    rows = [line.split() for line in found.stdout.splitlines()]
    return [(int(row[0]), row[1:]) for row in rows if int(row[0]) != os.getpid()]


def _interfaces_seen_by(pid: int) -> list[str]:
    """The interfaces of ``pid``'s network namespace ([] once it has exited)."""
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return []
    return [line.split(":")[0].strip() for line in lines]


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids), 5.0)


def stop_stale_switches(progress: Progress) -> None:
    """Stop the switches a killed run left (on Mininet's interface names, which this run is
    about to take): one still holding its gRPC and Thrift ports would answer this run's
    controller in place of the switch this run starts."""
    stale = [
        pid
        for pid, argv in _pids_matching(SIMPLE_SWITCH_GRPC)
        if any(SWITCH_INTERFACE.match(a.partition("@")[2]) for a in argv)
    ]
    _kill_all(stale)
    if stale:
        progress(f"qcn run: stopped {len(stale)} switches left by an earlier run")


def host_helper_pids() -> list[int]:
    """The processes started on a run's hosts (marked with HOST_HELPER_MARK) still running."""
    mark = f"{HOST_HELPER_MARK}=".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            marked = any(v.startswith(mark) for v in environ.read_bytes().split(b"\0"))
        except OSError:
            continue  # exited, or not ours to read
        if marked:
            pids.append(int(environ.parent.name))
    return pids


def stop_orphaned_helpers(progress: Progress) -> None:
    """Stop the hosts' helpers (reaction points, sources, sinks, PAUSE agents, iperf3) a
    killed run left in namespaces whose links are gone (run after remove_stale_interfaces):
    they would only take CPU from this run's switches."""
    orphaned = [pid for pid in host_helper_pids() if _interfaces_seen_by(pid) == ["lo"]]
    _kill_all(orphaned)
    if orphaned:
        progress(f"qcn run: stopped {len(orphaned)} host processes left by an earlier run")


def interrupt(procs: list[subprocess.Popen[str]], timeout_s: float) -> None:
    """SIGINT to each of ``procs`` still running, in order; those not ended within
    ``timeout_s`` (all together) are killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def reaction_point_latencies(status_dir: Path) -> list[DaemonLatency]:
    """The latency figures of every daemon whose status file has them (one that took
    CNMs); its count of late notifications where it was given a threshold."""
    latencies = []
    for path in status_files(status_dir):
        try:
            status = read_status(path)
        except RpUsageError:
            continue  # unreadable: that daemon's figures are lost, the others' still count
        p50, p99, late = (
            status.get("latency_p50_ms"),
            status["latency_p99_ms"],
            status.get("notifications_late"),
        )
        if p50 is not None and p99 is not None:
            latencies.append(
                DaemonLatency(
                    float(p50),
                    float(p99),
                    int(status.get("notifications_timed") or 0),
                    None if late is None else int(late),
                )
            )
    return latencies


class Testbed:
    """One Mininet network of BMv2 switches with its agents and processes (a context
    manager: leaving it tears everything down; SIGTERM inside it is a Ctrl-C)."""

    def __init__(
        self, out: Path, progress: Progress = print, emulation: Emulation | None = None
    ) -> None:
        # Absolute: the processes on the hosts run in it and are handed paths inside it.
        self.out = out.resolve()
        self.progress = progress
        self.emulation = emulation or Emulation()
        self.switch_scheduling = ""
        self.cpu_plan = UNPINNED
        """Where the switches and the hosts' processes run (qcn.topologies.placement)."""
        self.switch_priority = 0
        """The switches' SCHED_FIFO priority (0: none); the reaction points run below it."""
        self.rp_scheduling = ""
        self.runner_scheduling = "default"
        self.sender_pids: list[int] = []
        """The processes that offer the run's traffic (their stalls are measured)."""
        self.noise: NoiseRecording | None = None
        """The run's noise, once measured."""
        self.net: Any = None
        self.topology: Topology | None = None
        self.config: NetworkConfig | None = None
        """The controller's view of the running network, once programmed."""
        self.procs: list[tuple[str, subprocess.Popen[str]]] = []
        self.agents: list[Any] = []
        """Every switch agent opened; closed at teardown."""
        self._signals = contextlib.ExitStack()
        """SIGTERM is a Ctrl-C while the testbed is up (qcn.core.signals)."""
        self._network_lock: IO[str] | None = None
        """Held while this testbed's network may be up (:func:`hold_network_lock`)."""

    def __enter__(self) -> Testbed:
        self.out.mkdir(parents=True, exist_ok=True)
        self._signals.enter_context(sigterm_as_interrupt())
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        try:
            self.teardown()
        finally:
            self._signals.close()

    # -- bring-up ----------------------------------------------------------------------------

    def start(self, topo: Topology, switch_frames: Mapping[str, float] | None = None) -> None:
        """Compile the pipeline if it changed, then start ``topo`` with static ARP, no IPv6
        on any interface (every frame a switch sees is the run's), its links' delays where
        it asks for them, and every host reaching every other on-link.  Where the
        emulation pins them, each switch runs on one CPU (``switch_frames``: each one's
        predicted frames a second, which spreads them; unknown, all count alike), the
        hosts' processes on another (qcn.topologies.placement)."""
        from mininet.log import setLogLevel  # noqa: PLC0415
        from mininet.net import Mininet  # noqa: PLC0415

        from qcn.topologies.mininet_bmv2 import (  # noqa: PLC0415
            Bmv2Switch,
            QcnHost,
            quiet_switch_interfaces,
            widen_switch_links,
        )
        from qcn.topologies.network import (  # noqa: PLC0415
            MininetTopology,
            emulate_links,
            reach_every_host,
        )

        if self._network_lock is None:
            self._network_lock = hold_network_lock()
        self.progress(f"qcn run: compiling the pipeline into {build_dir()} if it changed")
        compile_program()
        setLogLevel("warning")
        stop_stale_switches(self.progress)
        remove_stale_interfaces(self.progress)
        stop_orphaned_helpers(self.progress)
        self.progress(f"qcn run: starting Mininet: {topo.describe()}")
        for note in topo.notes:
            self.progress(f"qcn run: {note}")
        priority = self.switch_priority = self._switch_priority()
        if self.emulation.pinned:
            frames = switch_frames or dict.fromkeys(topo.switches, 1.0)
            self.cpu_plan = plan_cpus(frames, usable_cpus())
        self.progress(f"qcn run: CPUs: {self.cpu_plan.why}")
        self.topology = topo
        self.net = Mininet(
            topo=MininetTopology(topo).build(),
            switch=partial(
                Bmv2Switch, log_dir=self.out, realtime_priority=priority, cpu_plan=self.cpu_plan
            ),
            host=QcnHost,
            controller=None,
            autoSetMacs=False,
        )
        self.net.start()
        self.net.staticArp()
        quiet_switch_interfaces(self.net)
        widen_switch_links(self.net)
        for line in emulate_links(topo):
            self.progress(f"qcn run: link delays: {line}")
        reach_every_host(self.net, topo)
        scheduling = self.net.switches[0].process.config.scheduling()
        self.switch_scheduling = f"{scheduling}; {self.cpu_plan.why}"

    def _switch_priority(self) -> int:
        """The switches' SCHED_FIFO priority (0: none), saying why when it is refused."""
        from qcn.topologies.mininet_bmv2 import SWITCH_REALTIME_PRIORITY  # noqa: PLC0415

        if not self.emulation.realtime_switch:
            return 0
        if realtime_available():
            return SWITCH_REALTIME_PRIORITY
        self.progress(
            "qcn run: this machine refuses real-time scheduling (chrt -f): the switches run at "
            "niceness -10, and stalls are more likely (see the noise verdict)"
        )
        return 0

    def switch_pids(self) -> list[int]:
        return [sw.process.pid for sw in self.net.switches if sw.process and sw.process.pid]

    def program(self, config: NetworkConfig) -> dict[str, Any]:
        """Bring every switch up through the controller to ``config`` (made from the
        topology by qcn.topologies.network.network_config).  Returns the agents by switch
        name (closed at teardown)."""
        from qcn.controller.agent import SwitchAgent  # noqa: PLC0415

        self.config = config
        agents = {}
        for sw in self.net.switches:
            agent = SwitchAgent(config, sw.name)
            self.agents.append(agent)
            agent.bring_up()  # shapes the queues too: a CP port's buffer is the pipeline's
            agents[sw.name] = agent
        return agents

    # -- processes ---------------------------------------------------------------------------

    def popen(
        self,
        name: str,
        host: str | None,
        command: list[str],
        *,
        capture: bool = False,
        sender: bool = False,
    ) -> subprocess.Popen[str]:
        """Start ``command`` on ``host`` (None: in the root namespace, the switches'); its
        stderr (and its stdout, unless ``capture``) go to ``logs/NAME.log`` in the results
        directory.  A ``sender`` offers the run's traffic: its stalls are measured."""
        logs = self.out / "logs"
        logs.mkdir(exist_ok=True)
        log = (logs / f"{name.replace(' ', '-')}.log").open("w")
        start = subprocess.Popen if host is None else self.net.get(host).popen
        if host is not None:
            command = [*taskset_prefix(self.cpu_plan.host_cpus), *command]
        env = None if host is None else {**os.environ, HOST_HELPER_MARK: str(self.out)}
        proc: subprocess.Popen[str] = start(
            command,
            stdout=subprocess.PIPE if capture else log,
            stderr=log,
            text=True,
            cwd=str(self.out),
            env=env,
        )
        log.close()
        if proc.stdout is not None:
            widen_pipe(proc.stdout.fileno())  # what it writes is read when the runner can
        self.procs.append((name, proc))
        if sender:
            self.sender_pids.append(proc.pid)
        return proc

    def last_log_line(self, name: str) -> str:
        path = self.out / "logs" / f"{name.replace(' ', '-')}.log"
        lines = path.read_text().strip().splitlines() if path.exists() else []
        return lines[-1] if lines else "no output"

    def stop_senders(self, timeout_s: float = 5.0) -> None:
        """End the processes that offer the run's traffic (SIGINT, as at teardown)."""
        interrupt([proc for _, proc in self.procs if proc.pid in self.sender_pids], timeout_s)

    def qdisc_backlog_pkts(self, host: str) -> int:
        """Frames queued in the qdiscs of ``host``'s eth0 (its reaction point's limiters
        and its PAUSE gate): what it has not yet put on the wire.  The root qdisc, which
        tc lists first, counts its whole tree's."""
        m = QDISC_BACKLOG.search(self.net.get(host).cmd(f"tc -s qdisc show dev {host}-eth0"))
        return int(m[1]) if m else 0

    def check_processes(self) -> None:
        """Fail the run when a helper process failed (the tail of its log says why)."""
        for name, proc in self.procs:
            if proc.poll() not in (None, 0):
                raise ExperimentError(f"{name} failed: {self.last_log_line(name)}")

    def instrument_scheduling(self) -> list[str]:
        """A command prefix for what must keep time beside a real-time switch (the
        reaction points, the PAUSE agents, the sinks that report what arrived): SCHED_FIFO
        below the switches, above the runner and every ordinary process; nothing where the
        switches have none."""
        from qcn.topologies.mininet_bmv2 import RP_REALTIME_PRIORITY  # noqa: PLC0415

        return ["chrt", "-f", str(RP_REALTIME_PRIORITY)] if self.switch_priority else []

    def _runner_in_real_time(self) -> contextlib.ExitStack:
        """Until the stack is closed: no garbage collection; every thread of this process on
        the hosts' CPUs where the switches are pinned; and, when the switches run in real
        time, those threads under SCHED_FIFO (RUNNER_REALTIME_PRIORITY; what it starts runs
        as usual).  The runner samples the queue, and an ordinary process beside ten busy
        senders waited up to 1.3 s for the CPU (docs/bmv2.md, "The runner's samples")."""
        from qcn.topologies.mininet_bmv2 import RUNNER_REALTIME_PRIORITY  # noqa: PLC0415

        restore = contextlib.ExitStack()
        if gc.isenabled():
            # Python's full collections scan every object the run's records hold: 0.76 and
            # 0.82 s with the runner's loop held, 80 and 102 s into a leaf-spine run.  The
            # records are tuples of numbers, which make no cycles.
            gc.disable()
            restore.callback(gc.enable)
        if self.cpu_plan.host_cpus:
            cpus = set(self.cpu_plan.host_cpus)
            _on_every_thread(restore, os.sched_getaffinity, os.sched_setaffinity, cpus)
        if not self.switch_priority:
            return restore
        self.runner_scheduling = f"SCHED_FIFO {RUNNER_REALTIME_PRIORITY}"
        fifo = (os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(RUNNER_REALTIME_PRIORITY))
        _on_every_thread(restore, _get_scheduler, _put_scheduler, fifo)
        return restore

    def start_reaction_points(
        self,
        hosts: list[str],
        params: QcnParams,
        *,
        per_flow: bool = False,
        late_after_s: float | None = None,
    ) -> None:
        """One ``qcn rp start`` per host on its eth0, CSVs in ``rp/``; waits until all run.
        ``per_flow``: a limiter per IPv4 flow (the flows workload's), not per destination;
        ``late_after_s``: the latency past which the daemons count a notification late."""
        path = self.out / "params.toml"
        params.save(path)
        status_dir = self.out / RP_STATUS_DIR
        status_dir.mkdir(exist_ok=True)
        from qcn.topologies.mininet_bmv2 import RP_REALTIME_PRIORITY  # noqa: PLC0415

        realtime = self.instrument_scheduling()
        self.rp_scheduling = f"SCHED_FIFO {RP_REALTIME_PRIORITY}" if realtime else "default"
        for name in hosts:
            self.popen(
                f"rp {name}",
                name,
                [
                    *realtime,
                    *(sys.executable, "-m", "qcn", "rp", "start", f"--iface={name}-eth0"),
                    *(f"--params={path}", f"--csv-dir={self.out / 'rp'}"),
                    f"--status-dir={status_dir}",
                    *(["--per-flow"] if per_flow else []),
                    *([f"--late-after-ms={1e3 * late_after_s!r}"] if late_after_s else []),
                ],
            )

        self._wait_until_up(
            "the reaction-point daemons",
            lambda: len(status_files(status_dir)) == len(hosts),
        )

    def start_pause_agents(self, hosts: list[str], line_rate_bps: float) -> None:
        """802.3x PAUSE honoured on each host's eth0 (qcn.reaction_point.pause); waits until
        all run.  (A switch port honours PAUSE in its pipeline: p4src/control/port_hold.p4.)
        Start them before the reaction points: their trees then hang under the gates."""
        rate = ["--line-rate-mbps", f"{line_rate_bps / 1e6:g}"]
        # The MAC runs ahead of everything: behind the hosts' processes a PAUSE waited up
        # to 130 ms for the CPU (p99), and the peer's headroom ran out.  Beside a real-time
        # switch it runs in real time too, ahead of the runner while it measures (behind
        # it, the headroom ran out in 2 of 4 runs with a core taken: docs/bmv2.md).
        ahead = self.instrument_scheduling() or ["nice", "-n", str(PAUSE_AGENT_NICE)]
        agent = [*ahead, sys.executable, "-m", "qcn.reaction_point.pause"]
        for name in hosts:
            self.popen(f"pause {name}", name, [*agent, f"{name}-eth0", *rate])
        names = [f"pause {h}" for h in hosts]
        self._wait_until_up(
            "the PAUSE agents", lambda: all("honouring" in self.last_log_line(n) for n in names)
        )

    def start_captures(self, ports: list[str]) -> None:
        """One dumpcap per switch port (root namespace) into ``captures/``, ring-buffered
        (:data:`CAPTURE`); waits until each captures.  Stopped with the other processes."""
        if shutil.which("dumpcap") is None:
            raise ExperimentError("--pcap needs dumpcap (Debian's tshark; make sysdeps)")
        folder = self.out / CAPTURE_DIR
        folder.mkdir(exist_ok=True)
        names = []
        for port in ports:
            name = f"capture {port}"
            self.popen(
                name,
                None,
                [
                    *("dumpcap", "-q", "-i", port, "-s", str(CAPTURE.snap_bytes)),
                    *("-b", f"filesize:{CAPTURE.file_kb}", "-b", f"files:{CAPTURE.files}"),
                    *("-w", str(folder / f"{port}.pcapng")),
                ],
            )
            names.append(name)
        self.progress(
            f"qcn run: capturing {', '.join(ports)} into {folder}/ (snap length "
            f"{CAPTURE.snap_bytes} B, at most {CAPTURE.files} x {CAPTURE.file_kb} kB per port)"
        )

        def capturing(name: str) -> bool:
            log = self.out / "logs" / f"{name.replace(' ', '-')}.log"
            return log.exists() and "Capturing on" in log.read_text(errors="replace")

        self._wait_until_up("the packet captures", lambda: all(capturing(n) for n in names))

    def captures(self) -> list[str]:
        """The capture files written, relative to the results directory."""
        folder = self.out / CAPTURE_DIR
        return sorted(str(p.relative_to(self.out)) for p in folder.glob("*.pcapng"))

    def _wait_until_up(self, what: str, up: Callable[[], bool]) -> None:
        """Poll ``up`` until it holds; fail if any process exits first, or after
        DAEMON_START_TIMEOUT_S."""
        from qcn.topologies.bmv2 import wait_until  # noqa: PLC0415

        def ready() -> bool:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise ExperimentError(f"{name} exited: {self.last_log_line(name)}")
            return up()

        if not wait_until(ready, DAEMON_START_TIMEOUT_S, interval_s=0.1):
            raise ExperimentError(f"{what} did not start within {DAEMON_START_TIMEOUT_S:g} s")

    # -- the run -----------------------------------------------------------------------------

    def measure_or_cli(
        self,
        sc: Scenario,
        agents: dict[str, Any],
        ports: list[PortRef],
        interval_s: float,
        hooks: Hooks,
        *,
        cli: bool,
        rec: Recording | None = None,
    ) -> Recording:
        """Run the measurement loop, sampling ``ports`` through their switches' ``agents``
        (recording into ``rec``, if given), or (``cli``) hand the running network to the
        Mininet CLI until the user exits it (nothing is recorded)."""
        if not cli:
            monitor = NoiseMonitor(
                {"switch": self.switch_pids, "senders": lambda: list(self.sender_pids)},
                interval_s,
                self.switch_scheduling,
                devices=frozenset({"switch"}),
            )
            injector = None
            if self.emulation.inject_stalls:
                cpu = min(self.cpu_plan.switch_cpu.values(), default=0)  # the switches' own
                injector = StallInjector(*self.emulation.inject_stalls, self.switch_pids(), cpu)
                self.progress(f"qcn run: injecting switch stalls: {injector.describe()}")
                injector.start()
            thrifts = {sw: agents[sw].thrift() for sw in sorted({p.switch for p in ports})}
            realtime = self._runner_in_real_time()
            try:
                return measure(
                    sc,
                    thrifts=thrifts,
                    ports=ports,
                    interval_s=interval_s,
                    hooks=hooks,
                    progress=self.progress,
                    noise=monitor,
                    rec=rec,
                )
            finally:
                realtime.close()
                for thrift in thrifts.values():
                    with contextlib.suppress(Exception):
                        thrift.close()
                if injector is not None:
                    injector.stop()
                self.noise = monitor.finish()
                self.noise.injected = injector.describe() if injector else ""
                self.noise.rp_scheduling = self.rp_scheduling
                self.noise.runner_scheduling = self.runner_scheduling
                self.noise.rp_latencies = reaction_point_latencies(self.out / RP_STATUS_DIR)
        from mininet.cli import CLI  # noqa: PLC0415

        self.progress("qcn run: everything is running; 'exit' ends the run")
        CLI(self.net)
        return Recording()

    # -- teardown ----------------------------------------------------------------------------

    def teardown(self) -> None:
        # SIGINT, not SIGTERM: the RP daemons restore their qdiscs.
        interrupt([proc for _, proc in reversed(self.procs)], 5.0)
        for agent in self.agents:
            with contextlib.suppress(Exception):
                agent.close()
        self.agents.clear()
        if self.net is not None:
            self._say_in_teardown("qcn run: stopping Mininet")
            settle_interrupted_shells(self.net)
            self.net.stop()
            self.net = None
        if self._network_lock is None:
            return  # (never started: the interfaces there may be another run's)
        remove_stale_interfaces(self._say_in_teardown)
        self._network_lock.close()
        self._network_lock = None

    def _say_in_teardown(self, line: str) -> None:
        """Say ``line`` if the run's output can take it: a closed stdout (the reader of a
        piped run gone: BrokenPipeError) must not stop the teardown and leave the switches
        running."""
        with contextlib.suppress(OSError):
            self.progress(line)
