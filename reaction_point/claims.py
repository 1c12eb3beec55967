"""One agent of each kind per interface: a claim is an abstract Unix socket named after the
kind and the interface.

Abstract names live in the network namespace of the process that binds them and vanish
with it, even after kill -9: a live agent is never mistaken for a dead one (whose state the
next agent may then take over or remove), and no lock file can go stale.
"""

from __future__ import annotations

import socket


def claim(kind: str, iface: str) -> socket.socket | None:
    """Hold ``iface`` for an agent of ``kind`` in this namespace; None if another holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(f"\0qcn-{kind}-{iface}")
    except OSError:
        sock.close()
        return None
    return sock
