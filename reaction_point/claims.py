"""One agent of each kind per interface: a claim is an abstract Unix socket named after the
kind and what the interface *is*, its index in its network namespace.

The index, not the name: an interface answers to its name, to each of its altnames (``ip
link property add dev IF altname ALT``) and, after a rename, to a new name, and every one
of them reaches the same root qdisc.  A claim on the name let a second daemon started on
an altname take the live daemon's tree for a dead one's and remove it (issue 42): both then
died, and the host was left unlimited.  Callers resolve whatever name they were given to
the index first (:func:`qcn.reaction_point.netlink.open_interface`, which the kernel resolves
altnames for), then claim that.

Abstract names live in the network namespace of the process that binds them and vanish
with it, even after kill -9: a live agent is never mistaken for a dead one (whose state the
next agent may then take over or remove), and no lock file can go stale.  An interface
index is unique within its namespace, which is where the claim lives too.  The
reaction-point daemon ("rp") and the PAUSE agent ("pause") share an interface's root qdisc
(:mod:`qcn.reaction_point.pause`); each asks :func:`claimed` whether the other is alive before
it removes or lifts what the other left.
"""

from __future__ import annotations

import socket

from pyroute2.netns import popns, pushns


def claim_name(kind: str, ifindex: int) -> str:
    """The abstract socket name of ``kind``'s claim on interface ``ifindex``."""
    return f"\0qcn-{kind}-if{ifindex}"


def claim(kind: str, ifindex: int) -> socket.socket | None:
    """Hold interface ``ifindex`` for an agent of ``kind`` in this namespace; None if
    another holds it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(claim_name(kind, ifindex))
    except OSError:
        sock.close()
        return None
    return sock


def claim_in(kind: str, ifindex: int, netns: str | None) -> socket.socket | None:
    """:func:`claim` in network namespace ``netns`` (this process's when None)."""
    if netns:
        pushns(netns)
    try:
        return claim(kind, ifindex)
    finally:
        if netns:
            popns()


def claimed(kind: str, ifindex: int, netns: str | None = None) -> bool:
    """Whether a live agent of ``kind`` holds interface ``ifindex`` (in ``netns``)."""
    sock = claim_in(kind, ifindex, netns)
    if sock is None:
        return True
    sock.close()
    return False
