"""Bare rtnetlink messages for the changes that must be fast (linux/netlink.h,
linux/rtnetlink.h, linux/pkt_sched.h).

pyroute2 builds each request in Python, a fraction of a millisecond of CPU; on a loaded
2-core machine that work is preempted, and a change that must happen now (a rate that
follows a CNM, a PAUSE's hold) waited tens of milliseconds.  The few messages that are
sent on such a path are packed here once and sent as bytes.  Also here: how the reaction
point's modules open an interface and a route-netlink socket in a namespace.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator

from pyroute2 import IPRoute, NetNS
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netns import create_socket, listnetns

NLMSG_ERROR, NLMSG_DONE = 2, 3
RTM_NEWQDISC, RTM_DELQDISC, RTM_GETQDISC = 36, 37, 38
RTM_NEWTCLASS, RTM_DELTCLASS, RTM_GETTCLASS = 40, 41, 42
RTM_NEWTFILTER, RTM_DELTFILTER = 44, 45
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
TCA_KIND, TCA_OPTIONS, TCA_STATS2, TCA_STATS_BASIC = 1, 2, 7, 1
TC_LINKLAYER_ETHERNET = 1
NLMSG_HEADER = struct.Struct("=IHHII")
TCMSG = struct.Struct("=BxxxiIII")
"""struct tcmsg: family, ifindex, handle, parent, info."""
RTATTR = struct.Struct("=HH")
TC_RATESPEC = "BBHhHI"
"""struct tc_ratespec: cell_log, linklayer, overhead, cell_align, mpu, rate (bytes/s)."""
U32_MAX = (1 << 32) - 1
TC_H_ROOT = 0xFFFFFFFF
"""linux/pkt_sched.h: the parent of an interface's root qdisc."""


def open_interface(ifname: str, netns: str | None, error: type[Exception]) -> tuple[IPRoute, int]:
    """A pyroute2 connection in ``netns`` (this process's by default) and ``ifname``'s
    index; raises ``error`` (closing the connection) when there is no such interface, or
    no such namespace (pyroute2 would create a missing one)."""
    if netns and netns not in listnetns():
        raise error(f"no network namespace named {netns}")
    ipr: IPRoute = NetNS(netns) if netns else IPRoute()
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        ipr.close()
        raise error(f"no interface named {ifname}")
    return ipr, int(found[0])


def rtnl_socket(netns: str | None = None) -> socket.socket:
    """A bare route-netlink socket in ``netns`` (this process's by default), bound."""
    sock: socket.socket = create_socket(
        netns, socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE
    )
    sock.bind((0, 0))
    return sock


def rtattr(kind: int, payload: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    length = RTATTR.size + len(payload)
    return RTATTR.pack(length, kind) + payload + bytes((4 - length % 4) % 4)


def replies(sock: socket.socket) -> Iterator[tuple[int, int, bytes, int, int]]:
    """The netlink messages a socket receives, as (type, sequence, data, body start, end);
    ends at a malformed header."""
    while True:
        data = sock.recv(1 << 16)
        offset = 0
        while offset + NLMSG_HEADER.size <= len(data):
            length, kind, _, seq, _ = NLMSG_HEADER.unpack_from(data, offset)
            if length < NLMSG_HEADER.size:
                return
            yield kind, seq, data, offset + NLMSG_HEADER.size, offset + length
            offset += (length + 3) & ~3


def tc_message(
    kind: int,
    seq: int,
    tcmsg: tuple[int, int, int],
    attrs: bytes,
    *,
    flags: int = 0,
    info: int = 0,
) -> bytes:
    """A tc request (qdisc, class or filter) that the kernel acknowledges; ``tcmsg``: the
    interface index, the handle (or class id) and the parent; ``flags``: NLM_F_CREATE and
    the like; ``info``: a filter's priority and protocol."""
    body = TCMSG.pack(socket.AF_UNSPEC, *tcmsg, info) + attrs
    flags |= NLM_F_REQUEST | NLM_F_ACK
    return NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), kind, flags, seq, 0) + body


def send_all_acked(sock: socket.socket, messages: list[tuple[bytes, int]]) -> None:
    """Send several (message, sequence) in one datagram and wait for every
    acknowledgement; raises NetlinkError with the first error, once all are read (the
    socket stays in step)."""
    sock.send(b"".join(m for m, _ in messages))
    waiting = {seq for _, seq in messages}
    failed: NetlinkError | None = None
    for kind, got, data, start, _ in replies(sock):
        if got in waiting and kind == NLMSG_ERROR:
            waiting.discard(got)
            (code,) = struct.unpack_from("=i", data, start)
            if code and failed is None:
                failed = NetlinkError(-code)
            if not waiting:
                break
    if waiting:
        raise NetlinkError(errno.EPROTO, "malformed netlink reply")
    if failed is not None:
        raise failed


def send_acked(sock: socket.socket, message: bytes, seq: int) -> None:
    """Send ``message`` (sequence ``seq``) and wait for its acknowledgement; raises
    NetlinkError with the kernel's error."""
    sock.send(message)
    for kind, got, data, start, _ in replies(sock):
        if got == seq and kind == NLMSG_ERROR:
            (code,) = struct.unpack_from("=i", data, start)
            if code:
                raise NetlinkError(-code)
            return
    raise NetlinkError(errno.EPROTO, "malformed netlink reply")
