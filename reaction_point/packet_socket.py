"""Packet-socket details shared by the reaction point and the PAUSE agent: which frames a
socket saw leave, and when the kernel received a frame (SO_TIMESTAMPNS, CLOCK_REALTIME),
so that their latencies (CNM to rate change, PAUSE to hold) are measured from the kernel's
receive time, not from when Python got round to reading the frame.
"""

from __future__ import annotations

import socket
import struct

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; missing from typeshed
PACKET_OUTGOING = 4
"""packet(7): the address type of a frame this host sent, which a socket also sees."""
ANCILLARY_BYTES = 128
"""Room for the timestamp's control message (recvmsg's ancbufsize)."""


def stamp_receptions(sock: socket.socket) -> None:
    """Have the kernel attach its receive time to every frame ``sock`` reads."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def rx_timestamp(ancdata: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's receive time (time.time() seconds) in recvmsg's ancillary data."""
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return float(sec + nsec * 1e-9)
    return None
