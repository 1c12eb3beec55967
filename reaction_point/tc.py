"""Kernel rate limiters: one HTB class per QCN limiter, chosen by a u32 filter (pyroute2).

Layout on the interface::

    root htb 1:  (default 0: traffic no limiter claims is sent unshaped)
      class 1:N  rate = ceil = the limiter's current rate; filter -> 1:N on its match

A limiter matches either a destination host (the seeds' "one rate limiter per
destination", enforced on the host's IPv4 addresses) or an IPv4 5-tuple.  All changes go
over netlink; nothing runs ``tc``.  ``close()`` deletes the root qdisc, which removes every
class and filter this created.
"""

from __future__ import annotations

import errno
import socket
import threading
from dataclasses import dataclass

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

ROOT_HANDLE = 0x10000  # 1:
ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
FIRST_MINOR = 0x10


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

#: Filter priorities: limiter minor * this + the filter's index (a destination may have
#: several addresses); each filter has its own priority so it can be deleted alone.
PRIO_STRIDE = 8


def _ip(a: str) -> int:
    return int.from_bytes(socket.inet_aton(a), "big")


class TcError(RuntimeError):
    """The kernel refused a traffic-control change."""


class HtbLimiters:
    """The HTB tree of one interface (created on open, removed on close)."""

    def __init__(self, ifname: str, mtu: int = 1600) -> None:
        self.ifname = ifname
        self.mtu = mtu
        self._ipr = IPRoute()
        found = self._ipr.link_lookup(ifname=ifname)
        if not found:
            self._ipr.close()
            raise TcError(f"no interface named {ifname}")
        self.ifindex: int = found[0]
        self._next_minor = FIRST_MINOR
        self._minors: dict[Match, int] = {}
        self._open = False

    def open(self) -> HtbLimiters:
        try:
            self._ipr.tc("replace", "htb", self.ifindex, ROOT_HANDLE, default=0)
        except Exception as e:
            raise TcError(f"{self.ifname}: cannot install the HTB root qdisc: {e}") from e
        self._open = True
        return self

    def warm_up(self) -> None:
        """Run a throwaway limiter through its whole life once.

        pyroute2 sets up each kind of request lazily, and the first of each takes tens of
        milliseconds: paid here, not by the first CNMs.
        """
        dummy = FlowMatch("0.0.0.0", "0.0.0.0", 255, 0, 0)
        self.add(dummy, 1e6)
        self.set_rate(dummy, 2e6)
        self.class_stats()
        self.class_rate_bps(self._minors[dummy])
        self.remove(dummy)
        self._next_minor = FIRST_MINOR

    def close(self) -> None:
        if self._open:
            try:
                self._ipr.tc("del", "htb", self.ifindex, ROOT_HANDLE)
            except NetlinkError as e:
                if e.code not in (errno.ENODEV, errno.ENOENT, errno.EINVAL):
                    raise TcError(f"{self.ifname}: cannot remove the HTB root: {e}") from e
            self._open = False
        self._minors.clear()
        self._ipr.close()

    def __enter__(self) -> HtbLimiters:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def limiters(self) -> dict[Match, int]:
        return dict(self._minors)

    def add(self, match: Match, rate_bps: float) -> int:
        """Create a limiter at ``rate_bps``; return its class minor number."""
        minor = self._next_minor
        self._next_minor += 1
        classid = ROOT_HANDLE | minor
        try:
            self._ipr.tc(
                "add-class",
                "htb",
                self.ifindex,
                classid,
                parent=ROOT_HANDLE,
                rate=_rate(rate_bps),
                ceil=_rate(rate_bps),
                mtu=self.mtu,
            )
            for i, keys in enumerate(match.keys()[:PRIO_STRIDE]):
                self._filter("add-filter", match, minor, i, keys=keys)
        except Exception as e:
            raise TcError(f"{self.ifname}: cannot add a limiter for {match}: {e}") from e
        self._minors[match] = minor
        return minor

    def _filter(self, command: str, match: Match, minor: int, index: int, **extra: object) -> None:
        """Add or delete filter ``index`` of a limiter: its own priority, aimed at its class."""
        self._ipr.tc(
            command,
            "u32",
            self.ifindex,
            parent=ROOT_HANDLE,
            prio=minor * PRIO_STRIDE + index,
            protocol=match.protocol,
            target=ROOT_HANDLE | minor,
            **extra,
        )

    def set_rate(self, match: Match, rate_bps: float) -> None:
        minor = self._minors[match]
        try:
            self._ipr.tc(
                "change-class",
                "htb",
                self.ifindex,
                ROOT_HANDLE | minor,
                parent=ROOT_HANDLE,
                rate=_rate(rate_bps),
                ceil=_rate(rate_bps),
                mtu=self.mtu,
            )
        except Exception as e:
            raise TcError(f"{self.ifname}: cannot change the rate of {match}: {e}") from e

    def remove(self, match: Match) -> None:
        """Release a limiter: its filter and class go, its traffic is unshaped again."""
        minor = self._minors.pop(match)
        classid = ROOT_HANDLE | minor
        for i in range(len(match.keys()[:PRIO_STRIDE])):
            self._filter("del-filter", match, minor, i)
        self._ipr.tc("del-class", index=self.ifindex, handle=classid, parent=ROOT_HANDLE)

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
    """Bytes and packets each class under 1: has sent, by class minor number."""
    out = {}
    for c in ipr.get_classes(index=ifindex):
        handle = c["handle"]
        if handle >> 16 != ROOT_HANDLE >> 16:
            continue
        stats = c.get_attr("TCA_STATS2")
        basic = stats.get_attr("TCA_STATS_BASIC") if stats else None
        if basic is not None:
            out[handle & 0xFFFF] = (basic["bytes"], basic["packets"])
    return out


class ClassStatsPoller(threading.Thread):
    """Reads the classes' byte counts every ``interval_s`` on its own netlink socket.

    A dump costs about a millisecond of pyroute2 parsing; off the CNM thread, a CNM never
    waits behind one.  ``latest`` is replaced whole, so readers need no lock.
    """

    def __init__(self, ifindex: int, interval_s: float) -> None:
        super().__init__(name="class-stats", daemon=True)
        self.ifindex = ifindex
        self.interval_s = interval_s
        self.latest: dict[int, tuple[int, int]] = {}
        self.active = threading.Event()
        """Set while there are limiters to poll."""
        self._halt = threading.Event()

    def run(self) -> None:
        with IPRoute() as ipr:
            read_class_stats(ipr, self.ifindex)  # pyroute2's slow first dump
            while not self._halt.wait(self.interval_s):
                if self.active.is_set():
                    self.latest = read_class_stats(ipr, self.ifindex)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=2)


def _rate(bps: float) -> str:
    return f"{max(1, round(bps))}bit"
