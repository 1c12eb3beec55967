"""The bare netlink messages the reaction point sends (reaction_point/netlink.py): their
bytes, the reply parser, and one request answered by the real kernel."""

from __future__ import annotations

import errno
import os
import socket
import struct

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from qcn.reaction_point.netlink import (
    NLM_F_ACK,
    NLM_F_REQUEST,
    NLMSG_ERROR,
    NLMSG_HEADER,
    RTM_DELQDISC,
    TC_H_ROOT,
    replies,
    rtattr,
    rtnl_socket,
    send_acked,
    send_all_acked,
    tc_message,
)
from qcn.topologies.netns import namespaces
from tests.toolchain import requires_root


def test_an_attribute_is_padded_to_four_bytes() -> None:
    assert rtattr(1, b"htb\0") == struct.pack("=HH", 8, 1) + b"htb\0"
    assert rtattr(2, b"abcde") == struct.pack("=HH", 9, 2) + b"abcde" + bytes(3)
    assert rtattr(3, b"") == struct.pack("=HH", 4, 3)


def test_a_tc_request_asks_for_an_acknowledgement() -> None:
    attrs = rtattr(1, b"tbf\0")
    msg = tc_message(RTM_DELQDISC, 7, (5, 0x51500000, TC_H_ROOT), attrs)
    length, kind, flags, seq, pid = NLMSG_HEADER.unpack_from(msg)
    assert (length, kind, flags, seq, pid) == (
        len(msg),
        RTM_DELQDISC,
        NLM_F_REQUEST | NLM_F_ACK,
        7,
        0,
    )
    family, ifindex, handle, parent, info = struct.unpack_from("=BxxxiIII", msg, NLMSG_HEADER.size)
    assert (family, ifindex, handle, parent, info) == (
        socket.AF_UNSPEC,
        5,
        0x51500000,
        TC_H_ROOT,
        0,
    )
    assert msg.endswith(attrs)


def test_replies_are_split_at_their_lengths_and_stop_at_a_malformed_one() -> None:
    ack = NLMSG_HEADER.pack(20, NLMSG_ERROR, 0, 3, 0) + struct.pack("=i", 0)
    odd = NLMSG_HEADER.pack(18, 99, 0, 4, 0) + b"xy"  # padded to 20 on the wire
    bad = NLMSG_HEADER.pack(4, 1, 0, 5, 0)  # shorter than its own header
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        a.send(ack + odd + bytes(2) + bad)
        got = list(replies(b))
    assert [(kind, seq, start, end) for kind, seq, _, start, end in got] == [
        (NLMSG_ERROR, 3, 16, 20),
        (99, 4, 36, 38),
    ]


@requires_root()
def test_the_kernels_error_comes_back_as_a_netlink_error() -> None:
    """Deleting a root qdisc lo does not have: the kernel refuses, and says why."""
    ns = f"nlt{os.getpid() % 100000}"
    with namespaces(ns):
        sock = rtnl_socket(ns)
        with sock:
            msg = tc_message(RTM_DELQDISC, 1, (1, 0, TC_H_ROOT), b"")  # lo is index 1
            with pytest.raises(NetlinkError) as e:
                send_acked(sock, msg, 1)
    assert e.value.code in (errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP)


@requires_root()
def test_a_batch_reports_its_first_error_and_reads_every_ack() -> None:
    """Two refused deletions in one datagram: the error comes back once all acks are read
    (none is left on the socket for the next request to trip over)."""
    ns = f"nlb{os.getpid() % 100000}"
    with namespaces(ns):
        sock = rtnl_socket(ns)
        with sock:
            batch = [(tc_message(RTM_DELQDISC, seq, (1, 0, TC_H_ROOT), b""), seq) for seq in (1, 2)]
            with pytest.raises(NetlinkError) as e:
                send_all_acked(sock, batch)
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1 << 16)
    assert e.value.code in (errno.ENOENT, errno.EINVAL, errno.EOPNOTSUPP)
