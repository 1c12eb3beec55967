"""Starting and stopping ``simple_switch_grpc``: its command line, readiness, its log.

Used by the PTF runner and by the Mininet switch node, so both start BMv2 the same way:
core options (ports, device id, Thrift port, log) before ``--``, the gRPC server address
after it (docs/bmv2.md).  Readiness is the gRPC port accepting connections; a
switch that dies or never gets there is reported with the last lines of its log.
"""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import netns

from qcn.core.pipeline import BMV2_DEVICE_ID, BMV2_GRPC_PORT, BMV2_THRIFT_PORT
from qcn.core.signals import interrupts_deferred
from qcn.topologies.errors import Bmv2Error
from qcn.topologies.placement import taskset_prefix

SIMPLE_SWITCH_GRPC = "simple_switch_grpc"


@dataclass(frozen=True)
class Bmv2Config:
    """How to run one simple_switch_grpc."""

    ports: dict[int, str]
    """Switch port number -> interface name."""
    log_file: Path
    device_id: int = BMV2_DEVICE_ID
    grpc_port: int = BMV2_GRPC_PORT
    grpc_host: str = "127.0.0.1"
    thrift_port: int = BMV2_THRIFT_PORT
    log_level: str = "warn"
    """BMv2 log level; "trace" logs every packet but cuts throughput several-fold."""
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    netns: str | None = None
    """Run inside this network namespace (readiness is then probed from inside it)."""
    executable: str = SIMPLE_SWITCH_GRPC
    """The switch binary (another BMv2 build, e.g. one without logging macros)."""
    nice: int = 0
    """Scheduling niceness of the switch and all its threads (negative: first call on the
    CPU).  An emulated network gives its switch priority: a real switch has hardware of its
    own, and a switch kept waiting releases frames in bursts that the CP then punishes."""
    cpus: tuple[int, ...] = ()
    """The CPUs the switch and every thread it starts run on (empty: any;
    qcn.topologies.placement)."""
    realtime_priority: int = 0
    """> 0: run the switch and every thread it starts under SCHED_FIFO at this priority
    (docs/bmv2.md, "Noise"): no ordinary process, a CPU hog included, can then keep it
    waiting; the kernel's real-time throttling still leaves the others 5 % of each CPU."""

    def scheduling(self) -> str:
        """How the switch is scheduled, in words (summary.json's ``switch_scheduling``)."""
        if self.realtime_priority:
            return f"SCHED_FIFO {self.realtime_priority}"
        return f"nice {self.nice}" if self.nice else "default"

    @property
    def grpc_address(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"

    def command(self) -> list[str]:
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        prefix = [*taskset_prefix(self.cpus), *prefix]
        if self.nice:
            prefix = ["nice", "-n", str(self.nice), *prefix]
        if self.realtime_priority:
            prefix = ["chrt", "-f", str(self.realtime_priority), *prefix]
        cmd = [
            *prefix,
            self.executable,
            "--device-id",
            str(self.device_id),
            "--thrift-port",
            str(self.thrift_port),
            "--log-file",
            str(self.log_file),
            "--log-flush",
            "-L",
            self.log_level,
            "--no-p4",
        ]
        for num, iface in sorted(self.ports.items()):
            cmd += ["-i", f"{num}@{iface}"]
        cmd += [*self.extra_args, "--", "--grpc-server-addr", self.grpc_address]
        return cmd


def available() -> bool:
    return shutil.which(SIMPLE_SWITCH_GRPC) is not None


def port_taken(host: str, port: int, namespace: str | None = None) -> str | None:
    """Who holds TCP ``host:port`` in ``namespace`` ("a process" if ``ss`` cannot say; an
    outgoing connection's local port counts, as it keeps a listener from binding), or None
    where it is free."""
    try:
        if namespace:
            sock = netns.create_socket(namespace)
        else:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with sock:
            # Bound as BMv2's gRPC and Thrift servers bind theirs: a port whose last
            # connection waits out TIME-WAIT (a switch just stopped) is free to them.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError:
        return holder(port, namespace)
    return None


def holder(port: int, namespace: str | None = None) -> str:
    """The process holding a local TCP ``port``, in words ("pid 1234, python3"), from
    ``ss``; "a process" where it cannot tell."""
    cmd = ["ss", "-Htanp", f"( sport = :{port} )"]
    if namespace:
        cmd = ["ip", "netns", "exec", namespace, *cmd]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "a process"
    found = re.search(r'users:\(\("([^"]+)",pid=(\d+)', out)
    return f"pid {found[2]}, {found[1]}" if found else "a process"


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


class Bmv2Process:
    """One running simple_switch_grpc."""

    def __init__(self, config: Bmv2Config) -> None:
        self.config = config
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 20.0) -> Bmv2Process:
        if not available():
            raise Bmv2Error(f"{SIMPLE_SWITCH_GRPC} is not installed (try 'make deps')")
        for what, port in (("gRPC", self.config.grpc_port), ("Thrift", self.config.thrift_port)):
            # Taken, this switch would fail to bind (and a listener there would be the one
            # the controller programs): said before it starts, with who holds it.
            held = port_taken(self.config.grpc_host, port, self.config.netns)
            if held is not None:
                raise Bmv2Error(
                    f"the switch's {what} port {self.config.grpc_host}:{port} is taken ({held}); "
                    f"a switch left by an earlier run? 'pgrep -a {SIMPLE_SWITCH_GRPC}' lists them"
                )
        self.config.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text("")
        console = self.config.log_file.with_suffix(".console")
        # No interrupt between the launch and the record of it (Popen's own Python code
        # runs after the fork): one at any moment of a network's start leaves no switch
        # the teardown does not know, as stop() ends the one recorded here.
        with interrupts_deferred(), console.open("wb") as out:
            self._proc = subprocess.Popen(
                self.config.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        if not wait_until(lambda: self._grpc_open() or not self.running, timeout_s):
            self.stop()
            raise Bmv2Error(
                f"{SIMPLE_SWITCH_GRPC} did not open {self.config.grpc_address} within "
                f"{timeout_s:g} s\n{self.log_tail()}"
            )
        if not self.running:
            raise Bmv2Error(f"{SIMPLE_SWITCH_GRPC} exited at start\n{self.log_tail()}")
        return self

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _grpc_open(self) -> bool:
        addr = (self.config.grpc_host, self.config.grpc_port)
        try:
            if self.config.netns:
                with netns.create_socket(self.config.netns) as sock:
                    sock.settimeout(0.2)
                    sock.connect(addr)
            else:
                with socket.create_connection(addr, timeout=0.2):
                    pass
        except OSError:
            return False
        return True

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def log_path(self) -> Path:
        """BMv2 appends ".txt" to the --log-file name."""
        return self.config.log_file.with_name(self.config.log_file.name + ".txt")

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the switch's console output and log, for error messages."""
        parts = []
        for f in (self.config.log_file.with_suffix(".console"), self.log_path):
            if f.exists() and f.stat().st_size:
                text = f.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- last lines of {f} ---\n" + "\n".join(text))
        return "\n".join(parts) or f"(no output in {self.config.log_file})"

    def __enter__(self) -> Bmv2Process:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
