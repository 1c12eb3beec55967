"""Which IPv4 addresses the kernel's neighbour table maps to a MAC, kept by netlink events.

A CNM names the congested destination by its MAC; the daemon enforces a limiter on the
destination's IPv4 addresses.  A CNP (DCQCN) names it by its IPv4 address, the limiter's by
the MAC the table maps it to.  Re-reading the whole table every 0.5 s made a CNM's cost
grow with the table (p99 464 ms with 5,000 neighbours, issue 28): the table is now read
once, then followed through the kernel's RTNLGRP_NEIGH notifications, which are drained
whenever a lookup comes.  If the notifications overflow the socket (ENOBUFS) the table is
read again whole.  Parsed by hand (qcn.reaction_point.netlink): two attributes of each entry.
"""

from __future__ import annotations

import errno
import socket
import struct

from qcn.reaction_point.netlink import (
    NLM_F_DUMP,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSG_HEADER,
    RTATTR,
    replies,
)

RTM_NEWNEIGH, RTM_DELNEIGH, RTM_GETNEIGH = 28, 29, 30
RTMGRP_NEIGH = 0x4
NDA_DST, NDA_LLADDR = 1, 2
NDMSG = struct.Struct("=BxxxiHBB")
"""struct ndmsg: family, ifindex, state, flags, type."""
EVENT_RCVBUF_BYTES = 1 << 20


class NeighbourTable:
    """IPv4 neighbours of one interface, by MAC (lower-case, colon-separated)."""

    def __init__(self, ifindex: int, rcvbuf_bytes: int = EVENT_RCVBUF_BYTES) -> None:
        self.ifindex = ifindex
        self._by_ip: dict[str, str] = {}
        self._by_mac: dict[str, set[str]] = {}
        self.reloads = 0
        """Whole-table reads: the first, and one per overflow of the notifications."""
        # Subscribed before the first read, so no change falls between the two.
        self._events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._events.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        self._events.bind((0, RTMGRP_NEIGH))
        self._events.setblocking(False)
        # Made now, so that both sockets are of the namespace the table was made in.
        self._dump = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self._dump.bind((0, 0))
        self._reload()

    def close(self) -> None:
        self._events.close()
        self._dump.close()

    def ips(self, mac: str) -> set[str]:
        """The addresses the table maps to ``mac`` now."""
        self._drain()
        return self._by_mac.get(mac, set())

    def mac(self, ip: str) -> str | None:
        """The MAC the table maps ``ip`` to now (None: not a resolved neighbour)."""
        self._drain()
        return self._by_ip.get(ip)

    def _reload(self) -> None:
        self.reloads += 1
        self._by_ip.clear()
        self._by_mac.clear()
        request = NDMSG.pack(socket.AF_INET, 0, 0, 0, 0)
        header = NLMSG_HEADER.pack(
            NLMSG_HEADER.size + len(request), RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP,
            self.reloads, 0,
        )  # fmt: skip
        self._dump.send(header + request)
        for kind, seq, data, body, end in replies(self._dump):
            if seq != self.reloads:
                continue
            if kind in (NLMSG_DONE, NLMSG_ERROR):
                break
            self._apply(kind, data, body, end)

    def _drain(self) -> None:
        while True:
            try:
                data = self._events.recv(1 << 16)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno != errno.ENOBUFS:
                    raise
                # Notifications were lost: the table may be wrong anywhere.
                self._drain_all()
                self._reload()
                return
            offset = 0
            while offset + NLMSG_HEADER.size <= len(data):
                length, kind, _, _, _ = NLMSG_HEADER.unpack_from(data, offset)
                if length < NLMSG_HEADER.size:
                    break
                self._apply(kind, data, offset + NLMSG_HEADER.size, offset + length)
                offset += (length + 3) & ~3

    def _drain_all(self) -> None:
        """Discard what is queued (it is older than the read that follows)."""
        while True:
            try:
                self._events.recv(1 << 16)
            except (BlockingIOError, OSError):
                return

    def _apply(self, kind: int, data: bytes, start: int, end: int) -> None:
        if kind not in (RTM_NEWNEIGH, RTM_DELNEIGH) or start + NDMSG.size > end:
            return
        family, ifindex, _, _, _ = NDMSG.unpack_from(data, start)
        if family != socket.AF_INET or ifindex != self.ifindex:
            return
        dst = lladdr = None
        pos = start + NDMSG.size
        while pos + RTATTR.size <= end:
            length, attr = RTATTR.unpack_from(data, pos)
            if length < RTATTR.size:
                break
            value = data[pos + RTATTR.size : pos + length]
            if attr == NDA_DST and len(value) == 4:
                dst = socket.inet_ntoa(value)
            elif attr == NDA_LLADDR and len(value) == 6:
                lladdr = value.hex(":")
            pos += (length + 3) & ~3
        if dst is None:
            return
        old = self._by_ip.pop(dst, None)
        if old is not None:
            ips = self._by_mac[old]
            ips.discard(dst)
            if not ips:
                del self._by_mac[old]
        # An entry without a link-layer address (incomplete, failed) maps to nothing.
        if kind == RTM_NEWNEIGH and lladdr is not None:
            self._by_ip[dst] = lladdr
            self._by_mac.setdefault(lladdr, set()).add(dst)
