"""Kernel rate limiters: one HTB class per QCN limiter, chosen by a u32 filter (pyroute2).

Layout on the interface::

    root tbf 5150:   the PAUSE gate (qcn.reaction_point.pause), passing all when no agent runs
      htb 5143:  default 5143:2
      class 5143:1     rate = ceil = the host's line rate: nothing leaves faster
        class 5143:2   traffic no limiter claims (ceil: the line rate)
        class 5143:N   a limiter (N >= 3): ceil = its current rate
      u32 filters, all at one priority, handles 800::K -> their limiter's class

The line-rate class stands in for the link a Mininet host lacks: a veth sends at memory
speed, so without it a source's backlog (frames a limiter held back, or queued behind a
limiter when it is released) would leave as one burst that the congestion point then
punishes.  Its children borrow what they send from it (a guaranteed rate of
:data:`BORROWING_RATE_BPS`, their limit as ceil): HTB lets a class send up to its own
rate without asking its parent, so children at rate = ceil once sent more than the
line rate together (a released limiter draining its backlog beside the unclaimed
class: a host at 1.8x its line rate, measured; docs/experiments.md, the three-point
parking lot).  Without a line rate (``line_rate_bps=None``) the tree is flat and unclaimed
traffic goes unshaped, as before.

The tree always hangs under the PAUSE gate, so that a PAUSE holds the limiters' traffic
too, and an agent can start after the daemon (a qdisc cannot be put above a root).

The tree's major number 0x5143 ("QC") marks it as this daemon's: a new daemon that finds it
knows it was left by one that died, and replaces it; a root qdisc of anyone else's is never
touched unless the user says so (``replace_foreign``).

A limiter matches either a destination host (the seeds' "one rate limiter per
destination", enforced on the host's IPv4 addresses) or an IPv4 5-tuple.  Filter handles
come from a free list and are reused; a released limiter's class stays, idle at the line
rate, for the next limiter (the kernel walks every filter when a class is made or
deleted), so a daemon can create and release limiters for ever.  All filters share one
u32 instance (one priority, one hash table): the kernel gives each u32 instance a hash
table id of its own from a pool of 2047 per qdisc, so a priority per limiter ran out near
2,000 limiters.  All changes go over netlink, a limiter's in one datagram
(LimiterWriter); nothing runs ``tc``.  ``close()`` deletes the gate, or the tree under
it, which removes every class and filter this created.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import heapq
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.tcmsg.common import calc_xmittime, get_hz

from qcn.core.errors import QcnError
from qcn.reaction_point.claims import claimed
from qcn.reaction_point.netlink import (
    NLM_F_CREATE,
    NLM_F_DUMP,
    NLM_F_EXCL,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSG_HEADER,
    RTATTR,
    RTM_DELTCLASS,
    RTM_DELTFILTER,
    RTM_GETQDISC,
    RTM_GETTCLASS,
    RTM_NEWQDISC,
    RTM_NEWTCLASS,
    RTM_NEWTFILTER,
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
    send_all_acked,
    tc_message,
)
from qcn.reaction_point.pause import (
    DEFAULT_LIMIT_BYTES,
    GATE_CHILD,
    GATE_FIFO_HANDLE,
    TREE_HANDLE,
    TREE_MAJOR,
    GateControl,
    GateFound,
    PauseError,
    fifo_under_gate,
    find_gate,
)

ROOT_MAJOR = TREE_MAJOR
"""The tree's major number: "QC", this daemon's mark on the tree it owns."""
ROOT_HANDLE = TREE_HANDLE
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
IDLE_CLASS_RATE_BPS = 10e9
"""An idle class's rate when the tree has no line rate (its backlog drains at it)."""
BORROWING_RATE_BPS = 10e3
"""The rate HTB guarantees each class under the line-rate class: next to nothing (0.1 % of
a 10 Mb/s line), so that what they send is borrowed from it and together they pass the
line rate by at most this for each class with a backlog.  Not less: a class's burst is
a frame's time at this rate, which the kernel keeps in 32 bits of nanoseconds."""


@dataclass(frozen=True)
class U32Key:
    """One 32-bit word of the IPv4 header compared under a mask (``off``: its byte offset)."""

    value: int
    mask: int
    off: int


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

    def keys(self) -> list[list[U32Key]]:
        return [[U32Key(_ip(ip), 0xFFFFFFFF, 16)] for ip in self.ips]


@dataclass(frozen=True)
class FlowMatch:
    """One IPv4 UDP/TCP flow (source, destination, protocol, ports)."""

    src_ip: str
    dst_ip: str
    proto: int
    sport: int
    dport: int

    def keys(self) -> list[list[U32Key]]:
        return [
            [
                U32Key(self.proto << 16, 0x00FF0000, 8),
                U32Key(_ip(self.src_ip), 0xFFFFFFFF, 12),
                U32Key(_ip(self.dst_ip), 0xFFFFFFFF, 16),
                # Ports right after an option-less IPv4 header.
                U32Key((self.sport << 16) | self.dport, 0xFFFFFFFF, 20),
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
        self._writer = LimiterWriter(self.ifindex, rtnl_socket(netns))
        self._minor_ids = IdPool(FIRST_LIMITER_MINOR, MAX_CLASS_MINOR)
        self._node_ids = IdPool(1, MAX_FILTERS)
        self._installed: dict[Match, Installed] = {}
        self._by_minor: dict[int, Match] = {}
        self._idle_classes: collections.deque[int] = collections.deque()
        """Classes of released limiters, oldest first (reused in that order: the longer a
        class has been idle, the surer its backlog has drained)."""
        self._open = False
        self.netns = netns
        self._gate = GateControl(self.ifindex, rtnl_socket(netns), DEFAULT_LIMIT_BYTES)

    def root_qdisc(self) -> RootQdisc | None:
        """The qdisc where the tree goes, as it is now (None: none at all): the child of the
        gate (qcn.reaction_point.pause) when there is one, else the interface's root."""
        return self._tree_slot(find_gate(self._ipr, self.ifindex))

    def _tree_slot(self, gate: GateFound | None) -> RootQdisc | None:
        """:meth:`root_qdisc`, given what :func:`find_gate` found."""
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
        found = self._tree_slot(gate)
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
            elif gate.held and not claimed("pause", self.ifindex, self.netns):
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
                self._ipr.tc(
                    "add-class", "htb", self.ifindex, ROOT_HANDLE | LINE_MINOR,
                    parent=ROOT_HANDLE, rate=line, ceil=line, mtu=self.mtu,
                )  # fmt: skip
                self._ipr.tc(
                    "add-class", "htb", self.ifindex, ROOT_HANDLE | DEFAULT_MINOR,
                    parent=self._parent, rate=_rate(BORROWING_RATE_BPS), ceil=line,
                    mtu=self.mtu, quantum=self.mtu,
                )  # fmt: skip
        except (NetlinkError, PauseError) as e:
            raise TcError(f"{self.ifname}: cannot install the HTB root qdisc: {e}") from e
        self._open = True
        return "; ".join(said) or None

    def check_tree(self) -> str | None:
        """Whether the tree is still where :meth:`open` put it: None if it is; "" if someone
        deleted it (the kernel's default qdisc, or the gate's FIFO, is there now); else the
        qdisc someone put in its place, in words (e.g. "pfifo 7:")."""
        found = self._tree_slot(find_gate(self._ipr, self.ifindex))
        if found is not None and found.ours:
            return None
        if found is None or found.kernel_default:
            return ""
        self._open = False  # (someone else's now: close() must not remove it)
        return str(found)

    def rebuild(self) -> None:
        """The tree again, after someone deleted it (:meth:`check_tree` said ""): every
        limiter's class and filters went with it, so the ids start afresh and the caller
        adds its limiters again."""
        self._installed.clear()
        self._by_minor.clear()
        self._idle_classes.clear()
        self._minor_ids = IdPool(FIRST_LIMITER_MINOR, MAX_CLASS_MINOR)
        self._node_ids = IdPool(1, MAX_FILTERS)
        self._open = False
        self.open()

    def lift_orphaned_hold(self) -> bool:
        """Lift the gate if a PAUSE agent died holding it (kill -9); True if it did."""
        gate = find_gate(self._ipr, self.ifindex)
        if gate is None or not gate.held or claimed("pause", self.ifindex, self.netns):
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
            if claimed("pause", self.ifindex, self.netns):
                with contextlib.suppress(PauseError):  # the agent may be removing the gate
                    fifo_under_gate(self._ipr, self.ifindex)
            else:
                self._gate.delete()
        except NetlinkError as e:
            if e.code not in (errno.ENODEV, errno.ENOENT, errno.EINVAL):
                raise TcError(f"{self.ifname}: cannot remove the HTB root: {e}") from e

    def warm_up(self) -> None:
        """Run a throwaway limiter through its whole life once: the kernel makes its u32
        instance with the first filter, paid here rather than by the first CNM, and the
        class stays, idle, for the first limiter."""
        dummy = FlowMatch("0.0.0.0", "0.0.0.0", 255, 0, 0)
        self.add(dummy, 1e6)
        self.set_rate(dummy, 2e6)
        self.remove(dummy)

    def close(self) -> None:
        if self._open:
            self._delete_root()
            self._open = False
        self._installed.clear()
        self._by_minor.clear()
        self._idle_classes.clear()
        self._ipr.close()
        self._writer.close()
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

    def match_of(self, minor: int) -> Match | None:
        """The limiter whose class has this minor number, if any."""
        return self._by_minor.get(minor)

    @property
    def filters_in_use(self) -> int:
        return self._node_ids.in_use

    def add(self, match: Match, rate_bps: float) -> int:
        """Create a limiter at ``rate_bps``; return its class minor number.

        A class a released limiter left is reused (its rate set, its filters added), else
        a class is made; either way one netlink datagram (LimiterWriter).  The kernel walks
        every filter of the qdisc when a class is made or deleted (it rebinds filters to
        the class id), ~0.1 ms per change at 1,000 limiters: classes are kept, not deleted.
        Raises :class:`TcFullError` when no class or filter id is free (nothing changed).
        """
        keys = match.keys()[:MAX_KEYS_PER_LIMITER]
        reuse = bool(self._idle_classes)
        minor = self._idle_classes.popleft() if reuse else self._minor_ids.take()
        nodes: list[int] = []
        try:
            for _ in keys:
                nodes.append(self._node_ids.take())
        except TcFullError:
            self._release_ids(minor, nodes, reuse)
            raise
        inst = Installed(minor, tuple(nodes))
        try:
            self._writer.add(inst, self._parent, rate_bps, self.mtu, keys, new_class=not reuse)
        except NetlinkError as e:
            # Whatever part was made goes again (each delete of a part never made fails).
            with contextlib.suppress(NetlinkError):
                self._writer.remove(inst, self._parent, None if reuse else 0.0, self.mtu)
            self._release_ids(minor, nodes, reuse)
            raise TcError(f"{self.ifname}: cannot add a limiter for {match}: {e}") from e
        self._installed[match] = inst
        self._by_minor[minor] = match
        return minor

    def _release_ids(self, minor: int, nodes: list[int] | tuple[int, ...], idle: bool) -> None:
        """Give back a limiter's ids: its class to the idle ones (``idle``: it exists in the
        kernel) or its minor number to the pool."""
        if idle:
            self._idle_classes.append(minor)
        else:
            self._minor_ids.give_back(minor)
        for n in nodes:
            self._node_ids.give_back(n)

    def set_rate(self, match: Match, rate_bps: float) -> None:
        minor = self._installed[match].minor
        try:
            self._writer.set_rate(ROOT_HANDLE | minor, self._parent, rate_bps, self.mtu)
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot change the rate of {match}: {e}") from e

    def remove(self, match: Match) -> None:
        """Release a limiter: its filters go, its traffic is unshaped again, and its class
        (set to the line rate, so that its backlog drains) waits for the next limiter."""
        inst = self._installed.pop(match)
        del self._by_minor[inst.minor]
        try:
            self._writer.remove(inst, self._parent, self.idle_rate_bps, self.mtu)
        except NetlinkError as e:
            raise TcError(f"{self.ifname}: cannot remove the limiter for {match}: {e}") from e
        self._release_ids(inst.minor, inst.filter_nodes, idle=True)

    @property
    def idle_rate_bps(self) -> float:
        return self.line_rate_bps or IDLE_CLASS_RATE_BPS

    @property
    def classes_made(self) -> int:
        """Limiter classes in the kernel, in use or idle."""
        return self._minor_ids.in_use

    def class_stats(self) -> dict[int, tuple[int, int]]:
        """Bytes and packets each limiter class has sent, by class minor number."""
        return read_class_stats(self._ipr, self.ifindex)

    def class_rate_bps(self, minor: int) -> float:
        """The rate the kernel holds a class to (its ceil, bits/s), for tests and status."""
        for c in self._ipr.get_classes(index=self.ifindex):
            if c["handle"] == ROOT_HANDLE | minor:
                opts = c.get_attr("TCA_OPTIONS")
                params = opts.get_attr("TCA_HTB_PARMS")
                ceil64 = opts.get_attr("TCA_HTB_CEIL64")
                return 8.0 * float(ceil64 or params["ceil"])
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


# HTB's part of linux/pkt_sched.h and linux/gen_stats.h (the rest: qcn.reaction_point.netlink).
TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 6, 7
TC_HTB_OPT = struct.Struct("=" + TC_RATESPEC + TC_RATESPEC + "IIIII")
"""struct tc_htb_opt: rate, ceil, buffer, cbuffer (ticks), quantum, level, prio."""
GNET_STATS_BASIC = struct.Struct("=QI")
# u32's part of linux/pkt_cls.h.
TCA_U32_CLASSID, TCA_U32_SEL = 1, 5
TC_U32_TERMINAL = 1
TC_U32_SEL = struct.Struct("=BBBxHHhhI")
"""struct tc_u32_sel: flags, offshift, nkeys, offmask, off, offoff, hoff, hmask (keys follow:
struct tc_u32_key, mask and value in network order, offset and offmask)."""


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
        return self._dump(RTM_GETTCLASS, RTM_NEWTCLASS)

    def read_tree(self) -> tuple[int, int] | None:
        """The tree's own counts, its HTB qdisc's bytes and packets (None: no tree): every
        class's frames pass it, so while they stand still no class's counts moved.  One
        small dump, where the classes' is one message per class: an idle daemon holding
        2,047 limiters parsed them all twice a second, milliseconds of Python in this
        thread that a CNM waited behind for the GIL (issue 42's limiter-count benchmark)."""
        return self._dump(RTM_GETQDISC, RTM_NEWQDISC).get(0)

    def _dump(self, request: int, reply: int) -> dict[int, tuple[int, int]]:
        """A dump of this interface's classes or qdiscs: the counts of those of the tree
        (major ROOT_MAJOR), by minor number (the HTB qdisc's own: 0)."""
        self._seq += 1
        body = TCMSG.pack(socket.AF_UNSPEC, self.ifindex, 0, 0, 0)
        header = NLMSG_HEADER.pack(
            NLMSG_HEADER.size + len(body), request, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0
        )
        self._sock.send(header + body)
        out: dict[int, tuple[int, int]] = {}
        for kind, seq, data, start, end in replies(self._sock):
            if seq != self._seq:
                continue
            if kind == NLMSG_DONE:
                return out
            if kind == NLMSG_ERROR:
                (code,) = struct.unpack_from("=i", data, start)
                if code:
                    raise NetlinkError(-code)
                return out
            if kind == reply:
                self._class(self.ifindex, data, start, end, out)
        return out

    @staticmethod
    def _class(
        ifindex: int, data: bytes, start: int, end: int, out: dict[int, tuple[int, int]]
    ) -> None:
        _, index, handle, _, _ = TCMSG.unpack_from(data, start)
        if handle >> 16 != ROOT_MAJOR or index != ifindex:
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


class LimiterWriter:
    """A limiter's kernel objects made, changed and removed with bare netlink messages.

    pyroute2 builds HTB's two 256-entry rate tables in Python for every class it makes or
    changes, 0.47 ms a call measured here; with ten daemons following every CNM that was
    ~300 changes a second on a 2-core machine, and the uncongested queue grew with them
    (docs/experiments.md, "The queue while uncongested"); and a new limiter (a class and
    its u32 filters through pyroute2) cost more still, so limiter churn was slow
    (docs/benchmarks.md).  The kernel reads no rate table
    for a rate whose link layer is given (Ethernet), so a class is sent as its parameters
    only, with the burst pyroute2 would compute (rate / HZ + MTU bytes); the kernel keeps a
    class's tokens across a change.  A limiter's class and filters go in one datagram.
    """

    def __init__(self, ifindex: int, sock: socket.socket) -> None:
        """``sock``: a bound route-netlink socket (qcn.reaction_point.netlink.rtnl_socket)."""
        self.ifindex = ifindex
        self._sock = sock
        self._seq = 0

    def close(self) -> None:
        self._sock.close()

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _class(
        self, classid: int, parent: int, rate_bps: float, mtu: int, *, create: bool
    ) -> tuple[bytes, int]:
        ceil = int(max(1, round(rate_bps)) / 8)  # bytes/s, as pyroute2 and tc round it
        # Under the line-rate class all is borrowed (BORROWING_RATE_BPS); at the root a
        # class has no parent to borrow from, so it is guaranteed its limit.
        borrows = parent == ROOT_HANDLE | LINE_MINOR
        rate = int(BORROWING_RATE_BPS / 8) if borrows else ceil
        buffer = calc_xmittime(rate, rate / get_hz() + mtu)
        cbuffer = calc_xmittime(ceil, ceil / get_hz() + mtu)
        rate_spec = (0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(rate, U32_MAX))
        ceil_spec = (0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(ceil, U32_MAX))
        # quantum given: the kernel's own (rate / r2q) is below its floor for a borrowing
        # class's rate, and it would log a warning at every change.
        parms = TC_HTB_OPT.pack(*rate_spec, *ceil_spec, buffer, cbuffer, mtu, 0, 0)
        options = rtattr(TCA_HTB_PARMS, parms)
        if rate > U32_MAX:
            options += rtattr(TCA_HTB_RATE64, struct.pack("=Q", rate))
        if ceil > U32_MAX:
            options += rtattr(TCA_HTB_CEIL64, struct.pack("=Q", ceil))
        attrs = rtattr(TCA_KIND, b"htb\0") + rtattr(TCA_OPTIONS, options)
        seq = self._next()
        flags = NLM_F_CREATE | NLM_F_EXCL if create else 0
        tcmsg = (self.ifindex, classid, parent)
        return tc_message(RTM_NEWTCLASS, seq, tcmsg, attrs, flags=flags), seq

    def _filter(self, kind: int, node: int, classid: int, keys: list[U32Key]) -> tuple[bytes, int]:
        """A u32 filter node of the root hash table, aimed at ``classid`` (RTM_NEWTFILTER),
        or its deletion (RTM_DELTFILTER: no keys needed)."""
        attrs = rtattr(TCA_KIND, b"u32\0")
        flags = 0
        if kind == RTM_NEWTFILTER:
            sel = TC_U32_SEL.pack(TC_U32_TERMINAL, 0, len(keys), 0, 0, 0, 0, 0)
            sel += b"".join(
                struct.pack("!II", k.mask, k.value & k.mask) + struct.pack("=ii", k.off, 0)
                for k in keys
            )
            options = rtattr(TCA_U32_CLASSID, struct.pack("=I", classid))
            attrs += rtattr(TCA_OPTIONS, options + rtattr(TCA_U32_SEL, sel))
            flags = NLM_F_CREATE | NLM_F_EXCL
        seq = self._next()
        tcmsg = (self.ifindex, (U32_ROOT_TABLE << 20) | node, ROOT_HANDLE)
        info = (FILTER_PRIO << 16) | socket.htons(ETH_P_IP)
        return tc_message(kind, seq, tcmsg, attrs, flags=flags, info=info), seq

    def add(
        self,
        inst: Installed,
        parent: int,
        rate_bps: float,
        mtu: int,
        keys: list[list[U32Key]],
        *,
        new_class: bool,
    ) -> None:
        """The limiter's class (made, or an idle one set to its rate) and its filters.
        Raises NetlinkError."""
        classid = ROOT_HANDLE | inst.minor
        messages = [self._class(classid, parent, rate_bps, mtu, create=new_class)]
        messages += [
            self._filter(RTM_NEWTFILTER, node, classid, k)
            for node, k in zip(inst.filter_nodes, keys, strict=True)
        ]
        send_all_acked(self._sock, messages)

    def remove(self, inst: Installed, parent: int, idle_rate_bps: float | None, mtu: int) -> None:
        """The limiter's filters deleted; its class set to ``idle_rate_bps`` (0: deleted;
        None: left as it is).  Raises NetlinkError (after trying every part)."""
        classid = ROOT_HANDLE | inst.minor
        messages = [self._filter(RTM_DELTFILTER, n, classid, []) for n in inst.filter_nodes]
        if idle_rate_bps == 0.0:
            seq = self._next()
            message = tc_message(RTM_DELTCLASS, seq, (self.ifindex, classid, parent), b"")
            messages.append((message, seq))
        elif idle_rate_bps is not None:
            messages.append(self._class(classid, parent, idle_rate_bps, mtu, create=False))
        send_all_acked(self._sock, messages)

    def set_rate(self, classid: int, parent: int, rate_bps: float, mtu: int) -> None:
        """Raises NetlinkError (e.g. ENOENT for a class that is gone)."""
        message, seq = self._class(classid, parent, rate_bps, mtu, create=False)
        send_acked(self._sock, message, seq)


def ordinary_scheduling() -> None:
    """Put the calling thread under SCHED_OTHER, whatever its process runs under.

    A daemon started in real time (qcn.topologies.mininet_bmv2.RP_REALTIME_PRIORITY) must take
    its CNMs at once, but its periodic statistics dumps are most of its work: ten daemons
    polling at 100 Hz in real time, beside a real-time switch at its capacity, left the
    ordinary processes (senders, sink) without a CPU for seconds (docs/bmv2.md)."""
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


STATS_IDLE_INTERVAL_S = 0.5
"""The poller's longest interval: while no class sends, it halves its rate down to this."""
POLL_SHARE = 10
"""The poller waits at least this many times as long as its last dump took."""


class ClassStatsPoller(threading.Thread):
    """Reads the classes' byte counts every ``interval_s`` on its own netlink socket.

    Off the CNM thread, a CNM never waits behind a dump.  What :meth:`take` hands over is
    only the classes whose counts changed since the last reading: an idle daemon holding
    2,000 limiters visited each of them 100 times a second (issue 28).  While nothing
    changes the interval doubles, up to ``STATS_IDLE_INTERVAL_S``, and it is never below
    ten times the last dump's own time (a few limiters: 10 ms; 1,000: ~30 ms); the counts
    are cumulative, so a late reading loses no byte, it only feeds the byte counter later.
    """

    def __init__(self, ifindex: int, interval_s: float) -> None:
        super().__init__(name="class-stats", daemon=True)
        self.ifindex = ifindex
        self.interval_s = interval_s
        self.active = threading.Event()
        """Set while there are limiters to poll."""
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._changed: dict[int, tuple[int, int]] = {}
        self.failed: NetlinkError | None = None

    def take(self) -> dict[int, tuple[int, int]]:
        """The counts (bytes, packets by class minor) that changed since the last take."""
        with self._lock:
            out, self._changed = self._changed, {}
        return out

    def run(self) -> None:
        ordinary_scheduling()
        reader = ClassStatsReader(self.ifindex)
        previous: dict[int, tuple[int, int]] = {}
        tree: tuple[int, int] | None = None
        interval = self.interval_s
        try:
            while not self._halt.wait(interval):
                if not self.active.is_set():
                    interval = self.interval_s
                    continue
                began = time.perf_counter()
                changed: dict[int, tuple[int, int]] = {}
                now_tree = reader.read_tree()
                if now_tree is None or now_tree != tree:  # (else no class sent a byte)
                    reading = reader.read()
                    changed = {m: v for m, v in reading.items() if previous.get(m) != v}
                    previous, tree = reading, now_tree
                # At most ~1/POLL_SHARE of a core: a dump of 1,000 classes is some 3 ms
                # of Python, which CNMs would wait behind at 100 Hz.
                busy = POLL_SHARE * (time.perf_counter() - began)
                if changed:
                    with self._lock:
                        self._changed.update(changed)
                    interval = max(self.interval_s, busy)
                else:
                    interval = min(max(2 * interval, busy), STATS_IDLE_INTERVAL_S)
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
