"""A network left running for its user: ``qcn net up``.

:class:`NetworkSession` starts a topology on Mininet and BMv2 as every run does
(:class:`~qcn.topologies.testbed.Testbed`: one switch per switch, every switch programmed by the
controller from the topology, a reaction-point daemon on every host), writes the
controller's view of it to ``network.toml`` (so ``qcn ctl -c DIR/network.toml show`` and
``set`` reach its switches) and a state file that ``qcn net down`` finds it by, and
then hands the network over: to Mininet's CLI, or to whoever runs traffic on its hosts
until Ctrl-C or ``qcn net down``.  Leaving it tears everything down.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from qcn.controller import config as network_file
from qcn.core.capacity import full_line_rate_load
from qcn.core.live import LiveFeed, write_knobs
from qcn.core.params import CpParams, QcnParams
from qcn.core.topology import Topology
from qcn.topologies.errors import ExperimentError
from qcn.topologies.live import SwitchLive, ThriftDepths, run_clock
from qcn.topologies.network import address, network_config
from qcn.topologies.testbed import (
    RP_STATUS_DIR,
    Emulation,
    Testbed,
    hold_network_lock,
    remove_stale_interfaces,
    stop_orphaned_helpers,
    stop_stale_switches,
)

STATE_FILE = Path(os.environ.get("QCN_NET_STATE", "/run/qcn-net.json"))
"""Where a running ``qcn net up`` says who it is (one network at a time: Mininet's
interface names and the switches' ports are the machine's)."""
DOWN_TIMEOUT_S = 30.0


class NetworkStopped(Exception):  # noqa: N818 - it is how the session ends, not a failure
    """``qcn net down`` (SIGTERM) ended the session."""


@dataclass(frozen=True)
class Reach:
    """How the user reaches the running network."""

    network_file: Path
    switches: list[tuple[str, str, int]]
    """(name, gRPC address, Thrift port)."""
    hosts: list[tuple[str, str]]
    """(name, IP)."""

    def lines(self) -> list[str]:
        out = [f"controller view: qcn ctl -c {self.network_file} show"]
        out += [
            f"a host's shell from another terminal: mnexec -a PID CMD (PIDs: "
            f"{self.network_file.parent / 'hosts.json'})"
        ]
        out += [f"  {name}: gRPC {grpc}, Thrift {thrift}" for name, grpc, thrift in self.switches]
        hosts = ", ".join(f"{n} {ip}" for n, ip in self.hosts)
        return [*out, f"hosts: {hosts}"]


class NetworkSession:
    """One running network (a context manager)."""

    def __init__(
        self,
        topo: Topology,
        out: Path,
        *,
        cp_params: CpParams,
        qcn: QcnParams | None,
        frame_bytes: int = 1500,
        progress: Callable[[str], None] = print,
        emulation: Emulation | None = None,
    ) -> None:
        self.topo, self.out, self.progress = topo, out.resolve(), progress
        self.cp_params, self.qcn, self.frame_bytes = cp_params, qcn, frame_bytes
        self.testbed = Testbed(self.out, progress, emulation or Emulation(realtime_switch=False))
        self.reach: Reach | None = None
        self.agents: dict[str, Any] = {}
        self.started = 0.0

    def __enter__(self) -> NetworkSession:
        claim_state(self.out)
        try:
            self.testbed.__enter__()
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        tb = self.testbed
        tb.start(self.topo, full_line_rate_load(self.topo, self.frame_bytes).frames_per_s)
        config = network_config(self.topo, cp_params=self.cp_params, frame_bytes=self.frame_bytes)
        self.agents = tb.program(config)
        self.started = time.monotonic()
        path = self.out / "network.toml"
        path.write_text(network_file.dumps(config))
        # Each host's shell: `mnexec -a PID CMD` runs CMD on it from another terminal.
        hosts = {h.name: tb.net.get(h.name).pid for h in self.topo.hosts}
        (self.out / "hosts.json").write_text(json.dumps(hosts, indent=1))
        if self.qcn is not None:
            tb.start_reaction_points([h.name for h in self.topo.hosts], self.qcn)
        self.reach = Reach(
            path,
            [(s, address(s).grpc, address(s).thrift_port) for s in self.topo.switches],
            [(h.name, h.address) for h in self.topo.hosts],
        )
        cps = ", ".join(str(p) for p in self.topo.cp_ports) or "none"
        self.progress(f"qcn net: up: {self.topo.describe()}; CP ports: {cps}")
        for line in self.reach.lines():
            self.progress(f"qcn net: {line}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.testbed.__exit__(exc_type, exc, tb)
        finally:
            release_state()

    def cli(self) -> None:
        """Mininet's CLI until the user exits it (or ``qcn net down``: Mininet's CLI takes
        a Ctrl-C as an interrupted command, so SIGTERM ends it instead)."""
        from mininet.cli import CLI  # noqa: PLC0415 - Mininet's imports
        from mininet.log import setLogLevel  # noqa: PLC0415

        setLogLevel("output")  # what the CLI's commands print (a run keeps Mininet quiet)
        with _sigterm_raises():
            self.progress("qcn net: Mininet's CLI; 'exit' (or qcn net down) stops the network")
            CLI(self.testbed.net)

    @contextlib.contextmanager
    def live_view(self, feed: LiveFeed | None) -> Iterator[None]:
        """While the block runs: ``feed``'s rows and knobs (docs/live.md), the queues read
        over Thrift; then its knob changes in DIR/knobs.csv."""
        if feed is None:
            yield
            return
        depths = ThriftDepths(self.agents, feed)
        started = self.started
        try:
            with SwitchLive(
                feed,
                self.agents,
                depths=depths,
                status_dir=self.out / RP_STATUS_DIR,
                clock=run_clock(lambda: started),
                say=self.progress,
            ):
                yield
        finally:
            depths.close()
            write_knobs(self.out, feed.changes())

    def wait(self) -> None:
        """Until Ctrl-C or ``qcn net down``; a helper that dies is said."""
        self.progress("qcn net: running; Ctrl-C or 'qcn net down' stops it")
        with _sigterm_raises():
            while True:
                self.testbed.check_processes()
                time.sleep(0.5)


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(_signum: int, _frame: FrameType | None) -> None:
        raise NetworkStopped

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except NetworkStopped:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)


def read_state() -> dict[str, Any] | None:
    try:
        data = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: an exited process its parent has not yet reaped (a
    zombie, as `qcn net up` is when a script started it and waits for `qcn net down` before
    reaping it) has stopped, and `qcn net down` no longer waits 30 s for it and kills it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def claim_state(out: Path) -> None:
    """Say this process runs the network; refuse when another live one does."""
    state = read_state()
    if state is not None and state["pid"] != os.getpid() and _alive(state["pid"]):
        raise ExperimentError(
            f"a network is already up (pid {state['pid']}, {state.get('out', '?')}): "
            "'qcn net down' stops it"
        )
    STATE_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATE_FILE.write_text(json.dumps({"pid": os.getpid(), "out": str(out)}))


def release_state() -> None:
    state = read_state()
    if state is not None and state["pid"] == os.getpid():
        with contextlib.suppress(OSError):
            STATE_FILE.unlink()


def down(progress: Callable[[str], None] = print) -> bool:
    """Stop the running network (SIGTERM to its ``qcn net up``, which tears it down), then
    remove whatever a killed one left.  True if there was something to stop."""
    state = read_state()
    stopped = False
    if state is not None and _alive(state["pid"]):
        pid = state["pid"]
        progress(f"qcn net: stopping the network of pid {pid} ({state.get('out', '?')})")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + DOWN_TIMEOUT_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            progress(f"qcn net: pid {pid} did not stop within {DOWN_TIMEOUT_S:g} s: killing it")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stopped = True
    with contextlib.suppress(OSError):
        STATE_FILE.unlink()
    # A killed session's switches, interfaces and host processes (each says what it found);
    # none while a run holds the network: they are its own.
    try:
        # (A network just stopped or killed lets go of the lock as its process ends.)
        lock = hold_network_lock(wait_s=5.0 if stopped else 0.0)
    except ExperimentError as e:
        progress(f"qcn net: {e} (a run's network is not stopped by 'qcn net down')")
        return stopped
    with lock:
        stop_stale_switches(progress)
        remove_stale_interfaces(progress)
        stop_orphaned_helpers(progress)
    return stopped
