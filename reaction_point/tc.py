"""Kernel rate limiters: one HTB class per QCN limiter, chosen by a u32 filter (pyroute2).

Layout on the interface::

    root tbf 5150:   the PAUSE gate (reaction_point.pause), passing all when no agent runs
      htb 5143:  default 5143:2
      class 5143:1     rate = ceil = the host's line rate: nothing leaves faster
        class 5143:2   traffic no limiter claims (ceil: the line rate)
        class 5143:N   a limiter (N >= 3): rate = ceil = its current rate
      u32 filters, all at one priority, handles 800::K -> their limiter's class

The line-rate class stands in for the link a Mininet host lacks: a veth sends at memory
speed, so without it a source's backlog (frames a limiter held back, or queued behind a
limiter when it is released) would leave as one burst that the congestion point then
punishes.  Without a line rate (``line_rate_bps=None``) the tree is flat and unclaimed
traffic goes unshaped, as before.

The tree always hangs under the PAUSE gate, so that a PAUSE holds the limiters' traffic
too, and an agent can start after the daemon (a qdisc cannot be put above a root).

The tree's major number 0x5143 ("QC") marks it as this daemon's: a new daemon that finds it
knows it was left by one that died, and replaces it; a root qdisc of anyone else's is never
touched unless the user says so (``replace_foreign``).

A limiter matches either a destination host (the seeds' "one rate limiter per
destination", enforced on the host's IPv4 addresses) or an IPv4 5-tuple.  Class minors and
filter handles come from free lists and are reused, so a daemon can create and release
limiters for ever.  All filters share one u32 instance (one priority, one hash table): the
kernel gives each u32 instance a hash table id of its own from a pool of 2047 per qdisc,
so a priority per limiter ran out near 2,000 limiters.  All changes go over netlink;
nothing runs ``tc``.  ``close()`` deletes the root qdisc, which removes every class and
filter this created.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import socket
import struct
import threading
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.tcmsg.common import calc_xmittime, get_hz

from qcn.core.errors import QcnError
from reaction_point.claims import claimed
from reaction_point.netlink import (
    NLM_F_DUMP,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSG_HEADER,
    RTATTR,
    RTM_GETTCLASS,
    RTM_NEWTCLASS,
    TC_H_ROOT,
    TC_LINKLAYER_ETHERNET,
    TC_RATESPEC,
    TCA_KIND,
    TCA_OPTIONS,
    TCA_STATS2,
    TCA_STATS_BASIC,
    TCMSG,
    U32_MAX,
    open_interface,
    replies,
    rtattr,
    rtnl_socket,
    send_acked,
    tc_message,
)
from reaction_point.pause import (
    DEFAULT_LIMIT_BYTES,
    GATE_CHILD,
    GATE_FIFO_HANDLE,
    TREE_MAJOR,
    GateControl,
    PauseError,
    fifo_under_gate,
    find_gate,
)

ROOT_MAJOR = TREE_MAJOR
"""The tree's major number: "QC", this daemon's mark on the tree it owns."""
ROOT_HANDLE = ROOT_MAJOR << 16
LINE_MINOR = 1
"""The line-rate class every other class hangs under."""
DEFAULT_MINOR = 2
"""The class of traffic no limiter claims."""
FIRST_LIMITER_MINOR = 3
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
FILTER_PRIO = 1
U32_ROOT_TABLE = 0x800
MAX_FILTERS = 0xFFF
"""u32 node ids are 12 bits: at most this many filters in the root hash table."""
MAX_CLASS_MINOR = 0xFFFF


@dataclass(frozen=True)
class DestinationMatch:
    """Frames to one destination host: its MAC, enforced on its IPv4 address(es).

    The limiter is the destination MAC's (a CNM names a MAC); the kernel filter matches the
    IPv4 addresses the neighbour table maps to that MAC.  (A match on the Ethernet header
    itself needs u32 keys at negative offsets, which pyroute2's u32 encoder cannot express,
    or the basic/flower classifiers, which not every kernel has.)
    """

    mac: str
    ips: tuple[str, ...]

    protocol = ETH_P_IP

    def keys(self) -> list[list[str]]:
        return [[f"0x{_ip(ip):08x}/0xffffffff+16"] for ip in self.ips]


@dataclass(frozen=True)
class FlowMatch:
    """One IPv4 UDP/TCP flow (source, destination, protocol, ports)."""

    src_ip: str
    dst_ip: str
    proto: int
    sport: int
    dport: int

    def keys(self) -> list[list[str]]:
        return [
            [
                f"0x{self.proto << 16:08x}/0x00ff0000+8",
                f"0x{_ip(self.src_ip):08x}/0xffffffff+12",
                f"0x{_ip(self.dst_ip):08x}/0xffffffff+16",
                # Ports right after an option-less IPv4 header.
                f"0x{(self.sport << 16) | self.dport:08x}/0xffffffff+20",
            ]
        ]

    protocol = ETH_P_IP


Match = DestinationMatch | FlowMatch

MAX_KEYS_PER_LIMITER = 8
"""A destination with more IPv4 addresses than this is enforced on its first eight."""


def _ip(a: str) -> int:
    return int.from_bytes(socket.inet_aton(a), "big")


class TcError(QcnError, RuntimeError):
    """The kernel refused a traffic-control change, or the interface is not ours to change."""


class TcFullError(TcError):
    """No class minor or filter handle is free: the limiter cannot be added."""


class IdPool:
    """Integer ids in [first, last]; the lowest free one is handed out first."""

    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last
        self._next = first
        self._free: list[int] = []

    def take(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        if self._next > self.last:
            raise TcFullError(f"all {self.last - self.first + 1} ids are in use")
        self._next += 1
        return self._next - 1

    def give_back(self, value: int) -> None:
        heapq.heappush(self._free, value)

    @property
    def in_use(self) -> int:
        return self._next - self.first - len(self._free)


@dataclass(frozen=True)
class RootQdisc:
    """What sits at an interface's root before the daemon starts."""

    kind: str
    handle: int

    @property
    def ours(self) -> bool:
        """A tree a daemon of ours left behind (it died without cleaning up)."""
        return self.kind == "htb" and self.handle == ROOT_HANDLE

    @property
    def kernel_default(self) -> bool:
        """The qdisc the kernel attaches by itself (handle 0: nobody configured it), or the
        FIFO the PAUSE gate holds when no tree hangs under it."""
        return self.handle in (0, GATE_FIFO_HANDLE)

    def __str__(self) -> str:
        return f"{self.kind} {self.handle >> 16:x}:"


@dataclass(frozen=True)
class Installed:
    """One limiter's kernel objects."""

    minor: int
    filter_nodes: tuple[int, ...]


class HtbLimiters:
    """The HTB tree of one interface (created on open, removed on close)."""

    def __init__(
        self,
        ifname: str,
        mtu: int = 1600,
        *,
        netns: str | None = None,
        line_rate_bps: float | None = None,
    ) -> None:
        """``netns``: the network namespace of the interface (default: this process's).
        ``line_rate_bps``: the host's line rate, which all its traffic is held to (None: no
        such class, unclaimed traffic is unshaped)."""
        self.ifname = ifname
        self.mtu = mtu
        self.line_rate_bps = line_rate_bps
        self._parent = ROOT_HANDLE | LINE_MINOR if line_rate_bps else ROOT_HANDLE
        self._ipr, self.ifindex = open_interface(ifname, netns, TcError)
        self._rates = ClassRateWriter(self.ifindex, rtnl_socket(netns))
        self._minor_ids = IdPool(FIRST_LIMITER_MINOR, MAX_CLASS_MINOR)
        self._node_ids = IdPool(1, MAX_FILTERS)
        self._installed: dict[Match, Installed] = {}
        self._open = False
        self.netns = netns
        self._gate = GateControl(self.ifindex, rtnl_socket(netns), DEFAULT_LIMIT_BYTES)

    def root_qdisc(self) -> RootQdisc | None:
        """The qdisc where the tree goes, as it is now (None: none at all): the child of the
        gate (reaction_point.pause) when there is one, else the interface's root."""
        gate = find_gate(self._ipr, self.ifindex)
        if gate is not None:
            return None if gate.child is None else RootQdisc(*gate.child)
        for q in self._ipr.get_qdiscs(index=self.ifindex):
            if q["parent"] == TC_H_ROOT:
                return RootQdisc(str(q.get_attr("TCA_KIND")), int(q["handle"]))
        return None

    def open(self, *, replace_foreign: bool = False) -> str | None:
        """Install the gate (if no PAUSE agent did) and the tree under it; return a line
        about what was found there, if anything.

        A tree of ours left by a dead daemon is removed first, and a gate a dead PAUSE agent
        left held is lifted.  Another root qdisc that someone configured is refused unless
        ``replace_foreign``: it would be lost.
        """
        said = []
        gate = find_gate(self._ipr, self.ifindex)
        found = self.root_qdisc()
        if found is not None and found.ours:
            said.append(f"{self.ifname}: removed the rate limiters a stopped daemon left behind")
        elif gate is None and found is not None and not found.kernel_default:
            if not replace_foreign:
                raise TcError(
                    f"{self.ifname} already has a root qdisc ({found}) that qcn did not "
                    "create; remove it, or pass --replace-qdisc to replace it (it is not "
                    "restored afterwards)"
                )
            said.append(f"{self.ifname}: replaced the root qdisc {found} (--replace-qdisc)")
        try:
            if gate is None:
                # The gate goes first, passing everything, so that a PAUSE agent started
                # later finds the tree under it (a root qdisc cannot be pushed down).
                self._gate.pass_all(create=True)
            elif gate.held and not claimed("pause", self.ifname, self.netns):
                self._gate.pass_all()
                said.append(f"{self.ifname}: lifted the PAUSE hold a stopped agent left")
            if found is not None and found.ours:
                fifo_under_gate(self._ipr, self.ifindex)  # the dead tree goes, all of it
            default = DEFAULT_MINOR if self.line_rate_bps else 0
            self._ipr.tc(
                "replace", "htb", self.ifindex, ROOT_HANDLE, parent=GATE_CHILD,
                default=default,
            )  # fmt: skip
            if self.line_rate_bps:
                line = _rate(self.line_rate_bps)
                for minor, parent in ((LINE_MINOR, ROOT_HANDLE), (DEFAULT_MINOR, self._parent)):
                    self._ipr.tc(
                        "add-class", "htb", self.ifindex, ROOT_HANDLE | minor, parent=parent,
                        rate=line, ceil=line, mtu=self.mtu,
                    )  # fmt: skip
        except (NetlinkError, PauseError) as e:
            raise TcError(f"{self.ifname}: cannot install the HTB root qdisc: {e}") from e
        self._open = True
        return "; ".join(said) or None

    def lift_orphaned_hold(self) -> bool:
        """Lift the gate if a PAUSE agent died holding it (kill -9); True if it did."""
        gate = find_gate(self._ipr, self.ifindex)
        if gate is None or not gate.held or claimed("pause", self.ifname, self.netns):
            return False
        try:
            self._gate.pass_all()
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot lift the PAUSE gate: {e}") from e
        return True

    def _delete_root(self) -> None:
        """Remove the tree: with the gate when no PAUSE agent runs; else a plain FIFO takes
        its place (a TBF without its child qdisc would drop everything)."""
        try:
            if claimed("pause", self.ifname, self.netns):
                with contextlib.suppress(PauseError):  # the agent may be removing the gate
                    fifo_under_gate(self._ipr, self.ifindex)
            else:
                self._gate.delete()
        except NetlinkError as e:
            if e.code not in (errno.ENODEV, errno.ENOENT, errno.EINVAL):
                raise TcError(f"{self.ifname}: cannot remove the HTB root: {e}") from e

    def warm_up(self) -> None:
        """Run a throwaway limiter through its whole life once.

        pyroute2 sets up each kind of request lazily, and the first of each takes tens of
        milliseconds: paid here, not by the first CNMs.
        """
        dummy = FlowMatch("0.0.0.0", "0.0.0.0", 255, 0, 0)
        minor = self.add(dummy, 1e6)
        self.set_rate(dummy, 2e6)
        self.class_stats()
        self.class_rate_bps(minor)
        self.remove(dummy)

    def close(self) -> None:
        if self._open:
            self._delete_root()
            self._open = False
        self._installed.clear()
        self._ipr.close()
        self._rates.close()
        self._gate.close()

    def __enter__(self) -> HtbLimiters:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def limiters(self) -> dict[Match, int]:
        """Class minor of each limiter."""
        return {m: i.minor for m, i in self._installed.items()}

    @property
    def filters_in_use(self) -> int:
        return self._node_ids.in_use

    def add(self, match: Match, rate_bps: float) -> int:
        """Create a limiter at ``rate_bps``; return its class minor number.

        Raises :class:`TcFullError` when no class or filter id is free (nothing changed).
        """
        keys = match.keys()[:MAX_KEYS_PER_LIMITER]
        minor = self._minor_ids.take()
        nodes: list[int] = []
        try:
            for _ in keys:
                nodes.append(self._node_ids.take())
        except TcFullError:
            self._release_ids(minor, nodes)
            raise
        classid = ROOT_HANDLE | minor
        try:
            self._ipr.tc(
                "add-class",
                "htb",
                self.ifindex,
                classid,
                parent=self._parent,
                rate=_rate(rate_bps),
                ceil=_rate(rate_bps),
                mtu=self.mtu,
            )
            for node, k in zip(nodes, keys, strict=True):
                self._filter("add-filter", minor, node, keys=k)
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot add a limiter for {match}: {e}") from e
        self._installed[match] = Installed(minor, tuple(nodes))
        return minor

    def _release_ids(self, minor: int, nodes: list[int] | tuple[int, ...]) -> None:
        self._minor_ids.give_back(minor)
        for n in nodes:
            self._node_ids.give_back(n)

    def _filter(self, command: str, minor: int, node: int, **extra: object) -> None:
        """Add or delete one u32 filter node, aimed at its limiter's class."""
        self._ipr.tc(
            command,
            "u32",
            self.ifindex,
            parent=ROOT_HANDLE,
            prio=FILTER_PRIO,
            protocol=ETH_P_IP,
            handle=(U32_ROOT_TABLE << 20) | node,
            target=ROOT_HANDLE | minor,
            **extra,
        )

    def set_rate(self, match: Match, rate_bps: float) -> None:
        minor = self._installed[match].minor
        try:
            self._rates.set_rate(ROOT_HANDLE | minor, self._parent, rate_bps, self.mtu)
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot change the rate of {match}: {e}") from e

    def remove(self, match: Match) -> None:
        """Release a limiter: its filters and class go, its traffic is unshaped again, and
        its ids are free for the next limiter."""
        inst = self._installed.pop(match)
        try:
            for node in inst.filter_nodes:
                self._filter("del-filter", inst.minor, node)
            self._ipr.tc(
                "del-class",
                index=self.ifindex,
                handle=ROOT_HANDLE | inst.minor,
                parent=self._parent,
            )
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot remove the limiter for {match}: {e}") from e
        self._release_ids(inst.minor, inst.filter_nodes)

    def class_stats(self) -> dict[int, tuple[int, int]]:
        """Bytes and packets each limiter class has sent, by class minor number."""
        return read_class_stats(self._ipr, self.ifindex)

    def class_rate_bps(self, minor: int) -> float:
        """The rate the kernel holds for a class (bits/s), for tests and status."""
        for c in self._ipr.get_classes(index=self.ifindex):
            if c["handle"] == ROOT_HANDLE | minor:
                opts = c.get_attr("TCA_OPTIONS")
                params = opts.get_attr("TCA_HTB_PARMS")
                rate64 = opts.get_attr("TCA_HTB_RATE64")
                return 8.0 * float(rate64 or params["rate"])
        raise KeyError(minor)


def read_class_stats(ipr: IPRoute, ifindex: int) -> dict[int, tuple[int, int]]:
    """Bytes and packets each class under the root has sent, by class minor number."""
    out = {}
    for c in ipr.get_classes(index=ifindex):
        handle = c["handle"]
        if handle >> 16 != ROOT_MAJOR:
            continue
        stats = c.get_attr("TCA_STATS2")
        basic = stats.get_attr("TCA_STATS_BASIC") if stats else None
        if basic is not None:
            out[handle & 0xFFFF] = (basic["bytes"], basic["packets"])
    return out


# HTB's part of linux/pkt_sched.h and linux/gen_stats.h (the rest: reaction_point.netlink).
TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 6, 7
TC_HTB_OPT = struct.Struct("=" + TC_RATESPEC + TC_RATESPEC + "IIIII")
"""struct tc_htb_opt: rate, ceil, buffer, cbuffer (ticks), quantum, level, prio."""
GNET_STATS_BASIC = struct.Struct("=QI")


class ClassStatsReader:
    """The classes' byte and packet counts, read over a bare netlink socket.

    The byte counter is fed from these at 100 Hz, and pyroute2 takes about 1.4 ms of
    Python per dump to parse every attribute of every class: measured at ~14 % of a core
    per daemon, ten daemons out-ran the BMv2 switch on a 2-core machine.  This asks the
    same RTM_GETTCLASS dump and reads only the handle and TCA_STATS2/TCA_STATS_BASIC.
    """

    def __init__(self, ifindex: int) -> None:
        self.ifindex = ifindex
        self._sock = rtnl_socket()
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def read(self) -> dict[int, tuple[int, int]]:
        """Bytes and packets each class under the root has sent, by class minor number.

        Raises NetlinkError (e.g. ENODEV when the interface went away).
        """
        self._seq += 1
        request = TCMSG.pack(socket.AF_UNSPEC, self.ifindex, 0, 0, 0)
        header = NLMSG_HEADER.pack(
            NLMSG_HEADER.size + len(request), RTM_GETTCLASS, NLM_F_REQUEST | NLM_F_DUMP,
            self._seq, 0,
        )  # fmt: skip
        self._sock.send(header + request)
        out: dict[int, tuple[int, int]] = {}
        for kind, seq, data, body, end in replies(self._sock):
            if seq != self._seq:
                continue
            if kind == NLMSG_DONE:
                return out
            if kind == NLMSG_ERROR:
                (code,) = struct.unpack_from("=i", data, body)
                if code:
                    raise NetlinkError(-code)
                return out
            if kind == RTM_NEWTCLASS:
                self._class(data, body, end, out)
        return out

    @staticmethod
    def _class(data: bytes, start: int, end: int, out: dict[int, tuple[int, int]]) -> None:
        _, _, handle, _, _ = TCMSG.unpack_from(data, start)
        if handle >> 16 != ROOT_MAJOR:
            return
        pos = start + TCMSG.size
        while pos + RTATTR.size <= end:
            length, kind = RTATTR.unpack_from(data, pos)
            if length < RTATTR.size:
                return
            if kind == TCA_STATS2:
                inner, inner_end = pos + RTATTR.size, pos + length
                while inner + RTATTR.size <= inner_end:
                    ilen, ikind = RTATTR.unpack_from(data, inner)
                    if ilen < RTATTR.size:
                        return
                    if ikind == TCA_STATS_BASIC:
                        nbytes, npkts = GNET_STATS_BASIC.unpack_from(data, inner + RTATTR.size)
                        out[handle & 0xFFFF] = (nbytes, npkts)
                        return
                    inner += (ilen + 3) & ~3
            pos += (length + 3) & ~3


class ClassRateWriter:
    """Changes an HTB class's rate (= ceil) with one bare netlink message.

    pyroute2 builds HTB's two 256-entry rate tables in Python for every change, 0.47 ms a
    call measured here; with ten daemons following every CNM that was ~300 changes a second
    on a 2-core machine, and the uncongested queue grew with them (README, "On BMv2").  The
    kernel reads no rate table for a rate whose link layer is given (Ethernet), so this
    sends only the class parameters, with the burst pyroute2 would compute (rate / HZ +
    MTU bytes).  The kernel keeps a class's tokens across a change.
    """

    def __init__(self, ifindex: int, sock: socket.socket) -> None:
        """``sock``: a bound route-netlink socket (reaction_point.netlink.rtnl_socket)."""
        self.ifindex = ifindex
        self._sock = sock
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def set_rate(self, classid: int, parent: int, rate_bps: float, mtu: int) -> None:
        """Raises NetlinkError (e.g. ENOENT for a class that is gone)."""
        rate = int(max(1, round(rate_bps)) / 8)  # bytes/s, as pyroute2 and tc round it
        burst = calc_xmittime(rate, rate / get_hz() + mtu)
        spec = (0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(rate, U32_MAX))
        parms = TC_HTB_OPT.pack(*spec, *spec, burst, burst, 0, 0, 0)
        options = rtattr(TCA_HTB_PARMS, parms)
        if rate > U32_MAX:
            wide = struct.pack("=Q", rate)
            options += rtattr(TCA_HTB_RATE64, wide) + rtattr(TCA_HTB_CEIL64, wide)
        attrs = rtattr(TCA_KIND, b"htb\0") + rtattr(TCA_OPTIONS, options)
        self._seq += 1
        message = tc_message(RTM_NEWTCLASS, self._seq, (self.ifindex, classid, parent), attrs)
        send_acked(self._sock, message, self._seq)


def ordinary_scheduling() -> None:
    """Put the calling thread under SCHED_OTHER, whatever its process runs under.

    A daemon started in real time (topologies.mininet_bmv2.RP_REALTIME_PRIORITY) must take
    its CNMs at once, but its periodic statistics dumps are most of its work: ten daemons
    polling at 100 Hz in real time, beside a real-time switch at its capacity, left the
    ordinary processes (senders, sink) without a CPU for seconds (docs/bmv2.md)."""
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


class ClassStatsPoller(threading.Thread):
    """Reads the classes' byte counts every ``interval_s`` on its own netlink socket.

    Off the CNM thread, a CNM never waits behind a dump.  ``latest`` is replaced whole,
    so readers need no lock.
    """

    def __init__(self, ifindex: int, interval_s: float) -> None:
        super().__init__(name="class-stats", daemon=True)
        self.ifindex = ifindex
        self.interval_s = interval_s
        self.latest: dict[int, tuple[int, int]] = {}
        self.active = threading.Event()
        """Set while there are limiters to poll."""
        self._halt = threading.Event()
        self.failed: NetlinkError | None = None

    def run(self) -> None:
        ordinary_scheduling()
        reader = ClassStatsReader(self.ifindex)
        try:
            while not self._halt.wait(self.interval_s):
                if self.active.is_set():
                    self.latest = reader.read()
        except NetlinkError as e:
            # The interface went away: the daemon's own loop notices and reports it.
            self.failed = e
        finally:
            reader.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=2)


def _rate(bps: float) -> str:
    return f"{max(1, round(bps))}bit"
