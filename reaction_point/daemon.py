"""The Reaction Point daemon: CNMs (and DCQCN's CNPs) in, the scheme's rate rules, kernel
rate limiters out.

One process per host interface.  It

- receives CNMs on an AF_PACKET socket bound to EtherType 0x22E7 (the kernel delivers
  nothing else), and validates each (format, addressed to this host, about a destination
  this host sends to); anything else is dropped and counted by reason;
- with the ``dcqcn`` scheme, receives CNPs too, RoCEv2's (qcn.core.frames), on a UDP socket
  bound to port 4791 on the interface: a CNP names the destination by its IPv4 source (the
  receiver whose notification point sent it) and the flow by its QP (the flow's UDP source
  port) and its UDP source port (the flow's destination port); it reaches the limiter a
  CNM about the same destination or flow would, through the same rules (a CNP is their
  ``on_cnm(0)``), and anything else is dropped and counted by reason (``dropped_cnp_*``);
- keeps one :class:`~qcn.reaction_point.rules.RateLimiterRules` per destination (default) or
  per IPv4 flow, and enforces its current rate with an HTB class (:mod:`qcn.reaction_point.tc`);
  at most ``max_limiters`` of them: a CNM for a new one beyond that releases the limiter
  signalled least recently (counted as ``limiters_evicted``), so no sender of CNMs can
  exhaust the kernel's tables;
- clocks the byte counter with the bytes the kernel class really sent (polled class
  statistics) and the timer with the monotonic clock;
- releases a limiter when its rate is back at line rate;
- writes a status file (``qcn rp status``) and, optionally, one CSV time series per limiter
  (:mod:`qcn.reaction_point.limiter_csv`: a fixed budget of open files whatever the number of
  limiters, and a write that fails is counted, never the daemon's end);
- counts the CNMs the kernel dropped because the socket was full (``PACKET_STATISTICS``);
- on SIGINT/SIGTERM removes every tc object it created, whatever else fails on the way
  out; a daemon killed before it could is cleaned up after by the next one on the
  interface (:meth:`HtbLimiters.open`).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import heapq
import json
import os
import random
import select
import socket
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from qcn.core.ecmp import IP_PROTO_UDP, ROCEV2_UDP_PORT
from qcn.core.errors import QcnError
from qcn.core.frames import (
    ETHERTYPE_CNM,
    CnmInfo,
    CnmRejectedError,
    CnpRejectedError,
    parse_cnm,
    parse_cnp,
)
from qcn.core.params import RpParams, RpScheme
from qcn.core.processes import process_start_ticks
from qcn.core.signals import stop_on_signals
from qcn.core.stats import SlidingQuantiles
from qcn.reaction_point.claims import claim
from qcn.reaction_point.limiter_csv import LimiterCsvs
from qcn.reaction_point.neighbours import NeighbourTable
from qcn.reaction_point.netlink import open_interface
from qcn.reaction_point.packet_socket import (
    ANCILLARY_BYTES,
    PACKET_OUTGOING,
    rx_timestamp,
    stamp_receptions,
)
from qcn.reaction_point.rules import RateLimiterRules
from qcn.reaction_point.tc import (
    MAX_FILTERS,
    ClassStatsPoller,
    DestinationMatch,
    FlowMatch,
    HtbLimiters,
    Match,
    TcError,
    TcFullError,
    ordinary_scheduling,
)

SOL_PACKET = getattr(socket, "SOL_PACKET", 263)
PACKET_STATISTICS = 6
"""Linux packet(7): (frames received, frames dropped) since the last read, which resets them."""
DEFAULT_STATUS_DIR = Path("/run/qcn")
STATUS_INTERVAL_S = 0.2
STATUS_IDLE_INTERVAL_S = 2.0
"""With nothing changed, the status is written this often (it says the daemon is alive)."""
ORPHANED_HOLD_CHECK_S = 1.0
"""How often the daemon looks for a PAUSE gate a dead agent left held (qcn.reaction_point.pause)."""
RECV_BATCH = 256
RCVBUF_BYTES = 256 << 10
"""The socket's receive buffer (the kernel doubles it).  It bounds how long a CNM can wait
behind a flood: about 1,200 frames, some 20 ms of the daemon's work (see bench/rp_bench.py,
"flood"); beyond it the kernel drops frames, counted as ``kernel_socket_drops``."""
DEFAULT_MAX_LIMITERS = 1024
MAX_LIMITERS_LIMIT = MAX_FILTERS // 2
"""Room for every limiter even if each destination has two IPv4 addresses."""
GIL_SWITCH_INTERVAL_S = 0.0002
LATENCY_WINDOW = 10_000
"""The latency figures are of the last this many CNMs."""
IPV4_ETHERTYPE = b"\x08\x00"
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux; Python has it from 3.12
IN_PKTINFO = struct.Struct("=i4s4s")
"""struct in_pktinfo: the interface, the local address, the header's destination address."""
UDP_PORT_MAX = 0xFFFF


def network_namespace_id() -> int:
    """This process's network namespace (its inode): interfaces of one name in two
    namespaces are two interfaces."""
    return os.stat("/proc/self/ns/net").st_ino


def status_path(status_dir: Path, iface: str, netns_id: int | str | None = None) -> Path:
    ns = network_namespace_id() if netns_id is None else netns_id
    return status_dir / f"rp-{iface}@{ns}.json"


def status_files(status_dir: Path, iface: str = "*") -> list[Path]:
    """The daemons' status files in ``status_dir`` (``status_path``'s names; of every
    interface, or of those named ``iface`` in any namespace), sorted."""
    return sorted(status_dir.glob(status_path(status_dir, iface, "*").name))


class DaemonRunningError(QcnError):
    """Another reaction-point daemon already serves the interface."""


def claim_interface(iface: str, ifindex: int) -> socket.socket:
    """Hold the interface for this daemon (:mod:`qcn.reaction_point.claims`, keyed on its index,
    so an altname or a new name of a served interface is refused too): a dead daemon's tree
    is then known to be dead, and the next daemon removes it."""
    sock = claim("rp", ifindex)
    if sock is None:
        raise DaemonRunningError(
            f"a reaction-point daemon already serves {iface} (interface index {ifindex}, by "
            "this or another of its names; qcn rp status); stop it first"
        )
    return sock


class CnpPortTakenError(QcnError):
    """Something else on the host holds UDP port 4791 on the interface (a RoCE stack)."""


class InterfaceGoneError(QcnError):
    """The daemon's interface disappeared (or went down for good) while it ran."""


class TreeTakenError(QcnError):
    """Someone else put a qdisc of theirs where the daemon's tree was."""


def daemon_alive(report: dict[str, Any]) -> bool:
    """Whether the daemon that wrote a status report is still the process it names."""
    pid, start = report.get("pid"), report.get("pid_start_ticks")
    if not isinstance(pid, int) or pid <= 0:
        return False
    now = process_start_ticks(pid)
    return now is not None and (start is None or now == start)


class NotificationLatencies:
    """Each notification's latency, its arrival in the kernel to its new rate there: the
    quantiles of the last :data:`LATENCY_WINDOW`, and over the whole run how many were
    timed and how many took longer than ``late_after_s``.  A run's verdict takes the share
    late of all its daemons' notifications: a daemon's p99 of 161 CNMs is its second
    latest, one scheduling hiccup (docs/bmv2.md, "The reaction points' latency")."""

    def __init__(self, late_after_s: float | None = None) -> None:
        self.window = SlidingQuantiles(LATENCY_WINDOW)
        self.late_after_s = late_after_s
        self.timed = 0
        self.late = 0

    def add(self, latency_s: float) -> None:
        self.window.add(latency_s)
        self.timed += 1
        if self.late_after_s is not None and latency_s > self.late_after_s:
            self.late += 1

    def counts(self) -> dict[str, Any]:
        """The status's counts (``notifications_late`` None: no threshold was given)."""
        late_after = self.late_after_s
        return {
            "notifications_timed": self.timed,
            "notifications_late": None if late_after is None else self.late,
            "late_after_ms": None if late_after is None else 1e3 * late_after,
        }


@dataclass(frozen=True)
class DaemonOptions:
    iface: str
    params: RpParams
    limit_by: Literal["destination", "flow"] = "destination"
    csv_dir: Path | None = None
    status_dir: Path = DEFAULT_STATUS_DIR
    stats_interval_s: float = 0.010
    """How often the kernel's per-class byte counts are read (byte-counter clock)."""
    max_limiters: int = DEFAULT_MAX_LIMITERS
    """Limiters held at once; a new one beyond this releases the least recently signalled."""
    replace_qdisc: bool = False
    """Replace a root qdisc someone else configured on the interface (else refuse)."""
    late_after_s: float | None = None
    """Count the notifications applied later than this (``notifications_late`` in the
    status), e.g. a run's tolerable latency (qcn.core.noise)."""


@dataclass
class Limiter:
    """One rate limiter: its rules, its kernel class, its bookkeeping."""

    match: Match
    rules: RateLimiterRules
    applied_rate_bps: float
    sent_bytes: int = 0
    sent_packets: int = 0
    """The class's counts at the last poll (cumulative: the class may have served others)."""
    base_bytes: int = 0
    """The class's byte count when this limiter took it."""
    queued_deadline: float | None = None
    """The timer deadline last put on the daemon's heap (a changed one is put again)."""

    @property
    def name(self) -> str:
        m = self.match
        if isinstance(m, DestinationMatch):
            return m.mac
        return f"{m.src_ip}:{m.sport}-{m.dst_ip}:{m.dport}/{m.proto}"


class ReactionPoint:
    """The daemon's state and event handlers; :meth:`run` is its loop."""

    def __init__(
        self,
        options: DaemonOptions,
        clock: Callable[[], float] = time.monotonic,
        uniform: Callable[[], float] = random.random,
    ) -> None:
        self.opt = options
        self.clock = clock
        self.uniform = uniform
        self.counters: Counter[str] = Counter()
        self.limiters: dict[Match, Limiter] = {}
        self.latencies = NotificationLatencies(options.late_after_s)
        """Per CNM: kernel receive time to the new rate acknowledged by the kernel."""
        self.read_delays = SlidingQuantiles(LATENCY_WINDOW)
        """Per frame: kernel receive time to the daemon reading it, the part of the latency
        spent waiting for the loop (or the CPU) before any work on it."""
        self._stop = False
        self._sock: socket.socket | None = None
        self._cnp_sock: socket.socket | None = None
        """dcqcn: the UDP socket CNPs come to (None: the scheme takes CNMs alone)."""
        self._tc: HtbLimiters | None = None
        self._ipr: IPRoute | None = None
        self._stats: ClassStatsPoller | None = None
        self.mac = ""
        self._started = time.time()
        self._pending_rx: list[float] = []
        self.busy_s = 0.0
        """Time spent receiving and acting on CNMs (for the capacity figure)."""
        self.frames_handled = 0
        self._neighbours: NeighbourTable | None = None
        self._dirty: dict[Match, Limiter] = {}
        """Limiters whose rules changed since the last apply() (only these are visited: an
        idle daemon's work does not grow with the limiters it holds)."""
        self._timers: list[tuple[float, int, Match]] = []
        """A heap of (timer deadline, tie-breaker, limiter); an entry whose limiter is gone
        or has another deadline now is dropped when it comes up."""
        self._timer_tiebreak = 0
        self._status_dirty = True
        self._status_writer: StatusFileWriter | None = None
        self._class_counts: dict[int, tuple[int, int]] = {}
        """The latest bytes and packets of every class (by minor), limiter or idle."""
        self._start_ticks = process_start_ticks(os.getpid())
        self._netns_id = network_namespace_id()
        self.notices: list[str] = []
        """Lines for the user about what :meth:`open` found (e.g. a dead daemon's limiters)."""
        self._status_ready = False
        self._claim: socket.socket | None = None
        self._link_down = False
        """A link-down was seen and no frame since (the interface may be being deleted)."""
        self._csvs: LimiterCsvs | None = None
        self._rows: dict[Match, tuple[Any, ...]] = {}
        """Each limiter's status row (LIMITER_FIELDS), made again only when it changes: a
        status of 2,047 limiters made every row each time, some milliseconds of the CNM
        thread's that CNMs waited behind (issue 42's limiter-count benchmark)."""
        self._csvs_released: list[str] = []
        """Limiters released since the last apply(), whose CSVs close once their last row is
        written."""

    # -- life cycle --------------------------------------------------------------------------

    def open(self) -> ReactionPoint:
        """Claim the interface and set up the socket and the kernel's tree.

        Raises :class:`DaemonRunningError` if another daemon already serves the interface.
        """
        if not 1 <= self.opt.max_limiters <= MAX_LIMITERS_LIMIT:
            raise ValueError(
                f"--max-limiters must be in [1, {MAX_LIMITERS_LIMIT}] (got {self.opt.max_limiters})"
            )
        self.opt.status_dir.mkdir(parents=True, exist_ok=True)
        if self.opt.csv_dir:
            self.opt.csv_dir.mkdir(parents=True, exist_ok=True)
            self._csvs = LimiterCsvs(self.opt.csv_dir, self.opt.iface, on_first_error=self._say)
            self.counters["csv_write_errors"] = 0
        self._ipr, self._ifindex = open_interface(self.opt.iface, None, OSError)
        self._claim = claim_interface(self.opt.iface, self._ifindex)
        # The status file is ours from here on (not before: it may be a live daemon's).
        self._status_ready = True
        self.mac = self._ipr.get_links(self._ifindex)[0].get_attr("IFLA_ADDRESS")
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE_CNM))
        sock.bind((self.opt.iface, ETHERTYPE_CNM))
        stamp_receptions(sock)
        # Room for a burst of CNMs while the loop is busy with the kernel, and no more.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        sock.setblocking(False)
        self._sock = sock
        if self.opt.params.scheme == RpScheme.DCQCN:
            self._cnp_sock = self._open_cnp_socket()
        # All of the host's traffic is held to its line rate (see qcn.reaction_point.tc).
        self._tc = HtbLimiters(self.opt.iface, line_rate_bps=self.opt.params.line_rate_bps)
        found = self._tc.open(replace_foreign=self.opt.replace_qdisc)
        if found:
            self.notices.append(found)
        # The kernel's first filter costs more than the next: paid before any CNM waits.
        self._tc.warm_up()
        self._neighbours = NeighbourTable(self._ifindex)
        self.counters["kernel_socket_drops"] = 0
        self._stats = ClassStatsPoller(self._ifindex, self.opt.stats_interval_s)
        self._stats.start()
        # The stats thread parses in pure Python; switch to the CNM thread quickly.
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        # Everything allocated so far lives as long as the process: keep the collector
        # from walking it again (a full pass over it stalled CNMs for tens of ms).
        gc.freeze()
        return self

    def _open_cnp_socket(self) -> socket.socket:
        """DCQCN: a UDP socket on port 4791 of this interface alone (another daemon may
        serve another interface), telling each CNP's local address and receive time."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.opt.iface.encode())
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
            stamp_receptions(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
            try:
                sock.bind(("0.0.0.0", ROCEV2_UDP_PORT))
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                raise CnpPortTakenError(
                    f"UDP port {ROCEV2_UDP_PORT} (RoCEv2, where CNPs come) is taken on "
                    f"{self.opt.iface}: stop what holds it (ss -ulpn sport = {ROCEV2_UDP_PORT})"
                ) from None
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    def close(self) -> None:
        """Stop the threads, remove the kernel's tree, close everything, write the last
        status.  Every step runs whatever an earlier one raised (a CSV's flush on a full
        disk used to raise before the tree's removal, leaving HTB and the PAUSE gate on the
        interface); the first error is raised once all have run."""
        failed: list[BaseException] = []
        for step in (
            self._close_stats,
            self._close_csvs,
            self._close_tc,
            self._close_socket,
            self._close_netlink,
            self._close_claim,
        ):
            try:
                step()
            except Exception as e:  # each step runs, whatever the others raised
                failed.append(e)
        if self._status_ready:
            with contextlib.suppress(OSError):
                self.write_status(running=False)
        if failed:
            raise failed[0]

    def _close_stats(self) -> None:
        if self._stats is not None:
            self._stats.stop()
            self._stats = None

    def _close_csvs(self) -> None:
        if self._csvs is not None:
            self._csvs.close()  # (failures counted, never raised)
            self._count_csv_errors()

    def _close_tc(self) -> None:
        self.limiters.clear()
        if self._tc:
            tc, self._tc = self._tc, None
            tc.close()

    def _close_socket(self) -> None:
        if self._sock:
            with contextlib.suppress(OSError):
                self.count_socket_drops()
            sock, self._sock = self._sock, None
            sock.close()
        if self._cnp_sock:
            cnp_sock, self._cnp_sock = self._cnp_sock, None
            cnp_sock.close()

    def _close_netlink(self) -> None:
        if self._ipr:
            ipr, self._ipr = self._ipr, None
            ipr.close()
        if self._neighbours is not None:
            neighbours, self._neighbours = self._neighbours, None
            neighbours.close()

    def _close_claim(self) -> None:
        if self._claim is not None:
            self._claim.close()
            self._claim = None

    def stop(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        self._stop = True

    def run(self) -> None:
        """Serve until SIGINT/SIGTERM (or :meth:`stop`).

        Raises :class:`InterfaceGoneError` if the interface disappears under the daemon,
        and :class:`TreeTakenError` if someone puts a qdisc of theirs where its tree was; a
        tree someone deleted is rebuilt (:meth:`_tree_lost`).
        """
        stop_on_signals(self.stop)
        while True:
            try:
                self._serve()
                return
            except (OSError, TcError, NetlinkError) as e:
                if not self._interface_exists():
                    raise InterfaceGoneError(
                        f"{self.opt.iface} disappeared while the daemon ran ({e}); stopped"
                    ) from None
                try:
                    rebuilt = self._tree_lost()
                except (OSError, NetlinkError):
                    rebuilt = False  # (the first error is the one to report)
                if not rebuilt:
                    raise

    def _interface_exists(self) -> bool:
        try:
            with IPRoute() as ipr:
                return bool(ipr.link_lookup(index=self._ifindex))
        except NetlinkError:
            return False

    def _serve(self) -> None:
        assert self._sock is not None
        next_stats = next_status = next_gate_check = self.clock()
        last_status = -STATUS_IDLE_INTERVAL_S
        sockets = [self._sock] if self._cnp_sock is None else [self._sock, self._cnp_sock]
        while not self._stop:
            now = self.clock()
            # Without limiters there are no byte counts to read: sleep until a CNM or the
            # next status write (ten idle daemons once cost a BMv2 switch its CPU).
            deadlines = [next_stats, next_status] if self.limiters else [next_status]
            if self._timers:
                deadlines.append(self._timers[0][0])
            timeout = max(0.0, min(deadlines) - now)
            with contextlib.suppress(InterruptedError):
                readable, _, _ = select.select(sockets, [], [], timeout)
                if self._sock in readable:
                    self.receive()
                if self._cnp_sock is not None and self._cnp_sock in readable:
                    self.receive_cnps()
            now = self.clock()
            if now >= next_stats:
                self.poll_stats()
                next_stats = now + self.opt.stats_interval_s
            self._fire_timers(now)
            self.apply()
            if now >= next_status:
                # A link that went down may be one being deleted: that ends the daemon.
                if self._link_down and not self._interface_exists():
                    raise InterfaceGoneError(
                        f"{self.opt.iface} disappeared while the daemon ran; stopped"
                    )
                # Written when something changed, else now and then: a status of 2,000
                # limiters is some 10 ms of JSON.
                if self._status_dirty or now - last_status >= STATUS_IDLE_INTERVAL_S:
                    self.write_status(running=True)
                    last_status = now
                next_status = now + STATUS_INTERVAL_S
            if now >= next_gate_check:
                self._tree_lost()
                self._lift_orphaned_hold()
                next_gate_check = now + ORPHANED_HOLD_CHECK_S

    def _fire_timers(self, now: float) -> None:
        """Advance the limiters whose timer cycle has ended (and only those)."""
        while self._timers and self._timers[0][0] <= now:
            deadline, _, match = heapq.heappop(self._timers)
            lim = self.limiters.get(match)
            if lim is None or lim.queued_deadline != deadline:
                continue  # released, or its deadline moved (queued again then)
            lim.queued_deadline = None
            if lim.rules.advance(now):
                self._mark(lim)
            self._queue_timer(lim)

    def _queue_timer(self, lim: Limiter) -> None:
        deadline = lim.rules.timer_deadline
        if deadline is not None and deadline != lim.queued_deadline:
            self._timer_tiebreak += 1
            heapq.heappush(self._timers, (deadline, self._timer_tiebreak, lim.match))
            lim.queued_deadline = deadline

    def _mark(self, lim: Limiter) -> None:
        self._dirty[lim.match] = lim
        self._status_dirty = True

    def _tree_lost(self) -> bool:
        """Whether the kernel's tree was gone, and is back: someone deleted the root qdisc
        (``tc qdisc del dev IF root``), taking every limiter with it, and the daemon used to
        die at its next rate change with "(2, 'No such file or directory')".  Deleted, it is
        rebuilt with every limiter at its current rate; replaced by someone's qdisc, it is
        theirs now (as a foreign root is at start), and the daemon stops in one line."""
        assert self._tc is not None
        taken = self._tc.check_tree()
        if taken is None:
            return False
        if taken:
            raise TreeTakenError(
                f"{self.opt.iface}: someone replaced the daemon's root qdisc with theirs "
                f"({taken}); its {len(self.limiters)} limiter(s) went with it; stopped, and "
                "their qdisc left as it is"
            )
        self._tc.rebuild()
        self._class_counts.clear()
        for lim in self.limiters.values():
            rate = self._kernel_rate(lim.rules.current_rate_bps)
            self._tc.add(lim.match, rate)
            lim.applied_rate_bps = rate
            # New classes count from 0: the limiter's bytes so far are kept in its base.
            lim.base_bytes -= lim.sent_bytes
            lim.sent_bytes = lim.sent_packets = 0
            self._status_row(lim)
        self.counters["tree_rebuilt"] += 1
        self._status_dirty = True
        self._say(
            f"someone deleted the root qdisc; rebuilt the tree and its {len(self.limiters)} "
            "limiter(s) at their current rates"
        )
        return True

    def _lift_orphaned_hold(self) -> None:
        """A PAUSE agent killed while it held the gate would block the host for good."""
        assert self._tc is not None
        if self._tc.lift_orphaned_hold():
            self.counters["orphaned_pause_holds_lifted"] += 1
            self._say("lifted the PAUSE hold a stopped agent left")

    # -- CNMs --------------------------------------------------------------------------------

    def receive(self) -> None:
        """Drain the socket, then apply the resulting rates once (coalesced)."""
        assert self._sock is not None
        began = time.perf_counter()
        handled = 0
        for _ in range(RECV_BATCH):
            try:
                data, ancdata, _, addr = self._sock.recvmsg(2048, ANCILLARY_BYTES)
            except BlockingIOError:
                break
            except OSError as e:
                # The kernel reports a link going down once on the packet socket and hooks
                # it up again when the link returns: weather, not an end.
                if e.errno != errno.ENETDOWN:
                    raise
                self.counters["link_down"] += 1
                self._link_down = True
                self._status_dirty = True
                self._say("link down; limiters kept, CNMs are handled again once it is up")
                break
            self._link_down = False  # frames again: the link is back
            self._status_dirty = True
            if addr[2] == PACKET_OUTGOING:
                continue
            rx_time = rx_timestamp(ancdata)
            if rx_time is not None:
                self.read_delays.add(time.time() - rx_time)
            handled += 1
            self.handle_frame(data, rx_time)
        self.apply()
        self.busy_s += time.perf_counter() - began
        self.frames_handled += handled

    def handle_frame(self, frame: bytes, rx_time: float | None = None) -> bool:
        """Validate one frame and act on it; return True if it was an accepted CNM.
        ``rx_time``: the kernel's receive time, for the latency figures."""
        try:
            cnm = parse_cnm(frame)
        except CnmRejectedError as e:
            self.counters[f"dropped_{e.reason}"] += 1
            return False
        if cnm.rp_mac != self.mac:
            self.counters["dropped_not_for_us"] += 1
            return False
        match = self._match_for(cnm)
        if match is None:
            return False
        # An ECM CP's positive feedback, or three-point QCN's Fb = 0, raises a limiter's
        # rate; neither creates one.
        creates = not (cnm.fb_positive or self._reinforcement(cnm))
        if not self._notify(match, cnm.qntz_fb, cnm.fb_positive, creates, rx_time):
            return False
        self.counters["cnms_accepted"] += 1
        return True

    def _notify(
        self, match: Match, qntz_fb: int, positive: bool, creates: bool, rx_time: float | None
    ) -> bool:
        """A notification (a CNM's feedback, a CNP) for ``match``'s limiter, which it
        creates if there is none and ``creates``; False if none took it."""
        lim = self.limiters.pop(match, None)
        if lim is not None:
            # Signalled now: to the end of the table's order (the least recent is first).
            self.limiters[match] = lim
            lim.rules.on_cnm(qntz_fb, positive=positive)
            self._mark(lim)
            if rx_time is not None:
                self._pending_rx.append(rx_time)  # the rate goes to the kernel in apply()
            return True
        if not creates:
            self.counters["positive_without_limiter"] += 1
            return False
        rules = RateLimiterRules(self.opt.params, self.clock, self.uniform)
        rules.on_cnm(qntz_fb)
        # Created at the cut rate: the notification's work is done when the kernel has it.
        if self._create(match, rules) is None:
            return False
        if rx_time is not None:
            self.latencies.add(time.time() - rx_time)
        return True

    # -- CNPs (DCQCN) ------------------------------------------------------------------------

    def receive_cnps(self) -> None:
        """Drain the CNP socket, then apply the resulting rates once (coalesced)."""
        assert self._cnp_sock is not None
        began = time.perf_counter()
        handled = 0
        for _ in range(RECV_BATCH):
            try:
                data, ancdata, _, (peer_ip, peer_port) = self._cnp_sock.recvmsg(
                    2048, ANCILLARY_BYTES
                )
            except BlockingIOError:
                break
            except OSError as e:
                # An ICMP error queued on the socket, a link going down: weather.
                if e.errno not in (errno.ENETDOWN, errno.ECONNREFUSED, errno.EHOSTUNREACH):
                    raise
                continue
            rx_time = rx_timestamp(ancdata)
            if rx_time is not None:
                self.read_delays.add(time.time() - rx_time)
            handled += 1
            self.handle_cnp(data, peer_ip, peer_port, _local_address(ancdata), rx_time)
        self.apply()
        self.busy_s += time.perf_counter() - began
        self.frames_handled += handled

    def handle_cnp(
        self,
        payload: bytes,
        peer_ip: str,
        peer_port: int,
        local_ip: str | None,
        rx_time: float | None = None,
    ) -> bool:
        """Validate one CNP (a UDP payload from ``peer_ip``:``peer_port`` to ``local_ip``)
        and act on it; return True if a limiter took it."""
        try:
            qp = parse_cnp(payload)
        except CnpRejectedError as e:
            self.counters[f"dropped_cnp_{e.reason}"] += 1
            return False
        match = self._match_for_cnp(peer_ip, peer_port, local_ip, qp)
        if match is None:
            return False
        # A CNP is a cut: DCQCN's rules read no QntzFb.
        if not self._notify(match, 0, False, True, rx_time):
            return False
        self.counters["cnps_accepted"] += 1
        return True

    def _match_for_cnp(
        self, peer_ip: str, peer_port: int, local_ip: str | None, qp: int
    ) -> Match | None:
        """The limiter a CNP names: its sender's (the destination's) by the MAC the
        neighbour table maps it to, as a CNM's; per flow, the flow from ``local_ip`` to it,
        UDP from the QP's port to the CNP's source port (qcn.topologies.sink)."""
        assert self._neighbours is not None
        mac = self._neighbours.mac(peer_ip)
        if mac is None:
            # Not a destination this host has resolved, so not one it sends to.
            self.counters["dropped_cnp_unknown_destination"] += 1
            return None
        if self.opt.limit_by == "destination":
            return DestinationMatch(mac, tuple(sorted(self._neighbour_ips(mac))))
        if local_ip is None or not 1 <= qp <= UDP_PORT_MAX:
            # A QP that is no UDP port names no flow of this host's.
            self.counters["dropped_cnp_no_flow"] += 1
            return None
        return FlowMatch(local_ip, peer_ip, IP_PROTO_UDP, qp, peer_port)

    def _reinforcement(self, cnm: CnmInfo) -> bool:
        """Three-point QCN's "no congestion here" (QntzFb 0 with positive reinforcement)."""
        return cnm.qntz_fb == 0 and self.opt.params.positive_reinforcement

    def _match_for(self, cnm: CnmInfo) -> Match | None:
        ips = self._neighbour_ips(cnm.encap_da)
        if not ips:
            # Not a destination this host has resolved, so not one it sends to.
            self.counters["dropped_unknown_destination"] += 1
            return None
        if self.opt.limit_by == "destination":
            return DestinationMatch(cnm.encap_da, tuple(sorted(ips)))
        flow = _flow_of(cnm.msdu)
        if flow is None or flow.dst_ip not in ips:
            self.counters["dropped_no_flow"] += 1
            return None
        return flow

    def _neighbour_ips(self, mac: str) -> set[str]:
        """IPv4 addresses the kernel's neighbour table maps to ``mac``."""
        assert self._neighbours is not None
        return self._neighbours.ips(mac)

    def _create(self, match: Match, rules: RateLimiterRules) -> Limiter | None:
        """A limiter for ``match`` whose kernel class starts at ``rules``' current rate."""
        assert self._tc is not None
        rate = self._kernel_rate(rules.current_rate_bps)
        if len(self.limiters) >= self.opt.max_limiters:
            self._evict_least_recent()
        try:
            minor = self._tc.add(match, rate)
        except TcFullError:
            # Out of filter handles (destinations with many addresses): make room once.
            if not self.limiters:
                self.counters["dropped_no_room"] += 1
                return None
            self._evict_least_recent()
            try:
                minor = self._tc.add(match, rate)
            except TcFullError:
                self.counters["dropped_no_room"] += 1
                return None
        lim = Limiter(match, rules, rate)
        # A released limiter's class may be reused: its counts so far are not this one's.
        lim.sent_bytes, lim.sent_packets = self._class_counts.get(minor, (0, 0))
        lim.base_bytes = lim.sent_bytes
        self._mark(lim)  # its log line and timer
        self.limiters[match] = lim
        self.counters["limiters_created"] += 1
        return lim

    def _evict_least_recent(self) -> None:
        victim = next(iter(self.limiters.values()))  # signalled least recently
        self._release(victim)
        self.counters["limiters_evicted"] += 1

    def _release(self, lim: Limiter) -> None:
        assert self._tc is not None
        self._tc.remove(lim.match)
        if self._csvs is not None:
            self._csvs_released.append(lim.name)
        del self.limiters[lim.match]
        self._rows.pop(lim.match, None)
        self._dirty.pop(lim.match, None)
        self._status_dirty = True

    # -- byte counter, timer, enforcement ----------------------------------------------------

    def poll_stats(self) -> None:
        """Feed the bytes each kernel class sent since the last poll to its byte counter
        (only classes whose counts changed come back from the poller)."""
        if self._stats is None or self._tc is None:
            return
        if self._stats.failed is not None:
            raise self._stats.failed
        if self.limiters:
            self._stats.active.set()
        else:
            self._stats.active.clear()
        for minor, sent in self._stats.take().items():
            self._class_counts[minor] = sent
            match = self._tc.match_of(minor)
            lim = None if match is None else self.limiters.get(match)
            if lim is None:
                continue
            nbytes, npkts = sent[0] - lim.sent_bytes, sent[1] - lim.sent_packets
            lim.sent_bytes, lim.sent_packets = sent
            self._status_row(lim)
            if npkts <= 0:
                continue
            # Frame by frame, so that several cycles ending within one poll all count.
            size, extra = divmod(nbytes, npkts)
            before = (lim.rules.byte_stage, lim.rules.current_rate_bps)
            for i in range(npkts):
                lim.rules.on_transmit(size + (1 if i < extra else 0))
            if (lim.rules.byte_stage, lim.rules.current_rate_bps) != before:
                self._mark(lim)

    def _kernel_rate(self, rate_bps: float) -> float:
        unit = self.opt.params.rate_unit_bps
        return max(unit, round(rate_bps / unit) * unit)

    def apply(self) -> None:
        """Write changed rates to the kernel; release limiters back at line rate; then, off
        the CNMs' path, the limiters' CSV rows (a file opened or flushed is not what a rate
        waits for)."""
        assert self._tc is not None
        dirty, self._dirty = self._dirty, {}
        rows: list[tuple[str, list[object]]] = []
        changed: list[Limiter] = []
        for match, lim in dirty.items():
            if self.limiters.get(match) is not lim:
                continue  # released since it changed
            if self._csvs is not None:
                rows.append((lim.name, self._csv_row(lim)))
            self._queue_timer(lim)
            if lim.rules.at_line_rate:
                self._release(lim)
                self.counters["limiters_released"] += 1
                continue
            rate = self._kernel_rate(lim.rules.current_rate_bps)
            if rate != lim.applied_rate_bps:
                self._tc.set_rate(match, rate)
                lim.applied_rate_bps = rate
            changed.append(lim)
        if self._pending_rx:
            now = time.time()
            for t in self._pending_rx:
                self.latencies.add(now - t)
            self._pending_rx.clear()
        for lim in changed:
            self._status_row(lim)
        if self._csvs is not None and (rows or self._csvs_released):
            for name, row in rows:
                self._csvs.write(name, row)
            for name in self._csvs_released:
                self._csvs.release(name)
            self._csvs_released.clear()
            self._count_csv_errors()

    def _status_row(self, lim: Limiter) -> None:
        r = lim.rules
        self._rows[lim.match] = (
            lim.name, r.current_rate_bps, r.target_rate_bps, lim.applied_rate_bps,
            r.stage.value, r.byte_stage, r.time_stage, lim.sent_bytes - lim.base_bytes,
        )  # fmt: skip
        self._status_dirty = True

    def _csv_row(self, lim: Limiter) -> list[object]:
        r = lim.rules
        return [
            f"{time.time() - self._started:.6f}",
            f"{r.current_rate_bps:.0f}",
            f"{r.target_rate_bps:.0f}",
            r.stage.value,
            lim.sent_bytes - lim.base_bytes,
            f"{time.monotonic():.6f}",
        ]

    def _count_csv_errors(self) -> None:
        assert self._csvs is not None
        if self._csvs.errors != self.counters["csv_write_errors"]:
            self.counters["csv_write_errors"] = self._csvs.errors
            self._status_dirty = True

    def _say(self, line: str) -> None:
        """A line for the user about the daemon's own state, as it happens."""
        print(f"qcn rp: {self.opt.iface}: {line}", file=sys.stderr, flush=True)

    # -- status ------------------------------------------------------------------------------

    def status(self, *, running: bool) -> dict[str, Any]:
        return build_status(self._status_snapshot(running))

    def _status_snapshot(self, running: bool) -> StatusSnapshot:
        """What the status says, copied as plain values: the rows are kept as limiters
        change (:meth:`_status_row`) and the latency quantiles as CNMs come, so this is a
        copy of a list, whatever the number of limiters; the report itself is encoded off
        the CNM thread (StatusFileWriter)."""
        quantiles = {
            f"{name}_p{round(100 * q)}_ms": None if v is None else 1e3 * v
            for name, window in (
                ("latency", self.latencies.window),
                ("read_delay", self.read_delays),
            )
            for q in (0.5, 0.99)
            for v in (window.quantile(q),)
        }
        head = {
            "iface": self.opt.iface,
            "netns_id": self._netns_id,
            "pid": os.getpid(),
            "pid_start_ticks": self._start_ticks,
            "running": running,
            "max_limiters": self.opt.max_limiters,
            "limit_by": self.opt.limit_by,
            "counters": dict(self.counters),
            "cnm_capacity_per_s": self.frames_handled / self.busy_s if self.busy_s else None,
            **quantiles,
            **self.latencies.counts(),
        }
        return StatusSnapshot(head, list(self._rows.values()))

    def count_socket_drops(self) -> None:
        """Add the frames the kernel dropped for want of room in the socket since the last
        call (reading the statistics resets them)."""
        if self._sock is None:
            return
        _, dropped = struct.unpack("II", self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        self.counters["kernel_socket_drops"] += dropped

    def write_status(self, *, running: bool) -> None:
        """Write the status file: by the writer thread while running (a status of 2,000
        limiters is some 10 ms of work, which CNMs would wait behind), at once at the end."""
        self.count_socket_drops()
        snapshot = self._status_snapshot(running)
        self._status_dirty = False
        if self._status_writer is None:
            path = status_path(self.opt.status_dir, self.opt.iface, self._netns_id)
            self._status_writer = StatusFileWriter(path)
            self._status_writer.start()
        if running:
            self._status_writer.submit(snapshot)
        else:
            self._status_writer.stop()
            self._status_writer.write(snapshot)


LIMITER_FIELDS = (
    "limiter", "current_rate_bps", "target_rate_bps", "applied_rate_bps", "stage",
    "byte_stage", "time_stage", "sent_bytes",
)  # fmt: skip
"""A limiter's entry in the status report, in the order of StatusSnapshot.rows."""


@dataclass(frozen=True)
class StatusSnapshot:
    head: dict[str, Any]
    rows: list[tuple[Any, ...]]


def build_status(snap: StatusSnapshot) -> dict[str, Any]:
    """The status report (``qcn rp status``) from a snapshot."""
    return {**snap.head, "limiters": [dict(zip(LIMITER_FIELDS, r, strict=True)) for r in snap.rows]}


class StatusEncoder:
    """A snapshot as the status file's JSON, each limiter's entry encoded again only when its
    row changed: the writer thread encoded every limiter each time (~20 ms of Python at
    2,047 limiters, twice a second under CNMs), and each time the CNM thread took the GIL
    back in a loaded machine's scheduling delays (a CNM's p99 of 8-20 ms at 2,047
    limiters, idle and under churn)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], str] = {}

    def encode(self, snap: StatusSnapshot) -> str:
        entries = {row: self._entries.get(row) or self._entry(row) for row in snap.rows}
        self._entries = entries
        head = json.dumps(snap.head)
        return f'{head[:-1]}, "limiters": [\n' + ",\n".join(entries.values()) + "\n]}\n"

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> str:
        return json.dumps(dict(zip(LIMITER_FIELDS, row, strict=True)))


class StatusFileWriter(threading.Thread):
    """Writes the newest snapshot submitted (older unwritten ones are skipped), replacing
    the file whole (write, then rename)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="status-writer", daemon=True)
        self.path = path
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._next: StatusSnapshot | None = None
        self._halt = False
        self._encoder = StatusEncoder()

    def submit(self, snap: StatusSnapshot) -> None:
        with self._lock:
            self._next = snap
        self._ready.set()

    def run(self) -> None:
        ordinary_scheduling()
        while True:
            self._ready.wait()
            self._ready.clear()
            with self._lock:
                snap, self._next = self._next, None
            if snap is not None:
                with contextlib.suppress(OSError):
                    self.write(snap)
            if self._halt:
                return

    def write(self, snap: StatusSnapshot) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self._encoder.encode(snap))
        tmp.replace(self.path)

    def stop(self) -> None:
        self._halt = True
        self._ready.set()
        self.join(timeout=5)


def _local_address(ancdata: list[tuple[int, int, bytes]]) -> str | None:
    """The destination address of a datagram's IPv4 header (IP_PKTINFO), if told."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(data) >= IN_PKTINFO.size:
            _ifindex, _local, header_dst = IN_PKTINFO.unpack_from(data)
            return socket.inet_ntoa(header_dst)
    return None


def _flow_of(msdu: bytes) -> FlowMatch | None:
    """The IPv4 UDP/TCP 5-tuple of an encapsulated MSDU (EtherType first), if it has one."""
    if msdu[:2] != IPV4_ETHERTYPE or len(msdu) < 2 + 20 + 4:
        return None
    ip = msdu[2:]
    if ip[0] >> 4 != 4 or ip[0] & 0xF != 5 or ip[9] not in (6, 17):
        return None
    sport, dport = struct.unpack("!HH", ip[20:24])
    return FlowMatch(socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20]), ip[9], sport, dport)
