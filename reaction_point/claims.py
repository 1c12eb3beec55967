"""One agent of each kind per interface: a claim is an abstract Unix socket named after the
kind and the interface.

Abstract names live in the network namespace of the process that binds them and vanish
with it, even after kill -9: a live agent is never mistaken for a dead one (whose state the
next agent may then take over or remove), and no lock file can go stale.  The reaction-point
daemon ("rp") and the PAUSE agent ("pause") share an interface's root qdisc
(:mod:`reaction_point.pause`); each asks :func:`claimed` whether the other is alive before
it removes or lifts what the other left.
"""

from __future__ import annotations

import socket

from pyroute2.netns import popns, pushns


def claim(kind: str, iface: str) -> socket.socket | None:
    """Hold ``iface`` for an agent of ``kind`` in this namespace; None if another holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(f"\0qcn-{kind}-{iface}")
    except OSError:
        sock.close()
        return None
    return sock


def claim_in(kind: str, iface: str, netns: str | None) -> socket.socket | None:
    """:func:`claim` in network namespace ``netns`` (this process's when None)."""
    if netns:
        pushns(netns)
    try:
        return claim(kind, iface)
    finally:
        if netns:
            popns()


def claimed(kind: str, iface: str, netns: str | None = None) -> bool:
    """Whether a live agent of ``kind`` holds ``iface`` (in ``netns``)."""
    sock = claim_in(kind, iface, netns)
    if sock is None:
        return True
    sock.close()
    return False
