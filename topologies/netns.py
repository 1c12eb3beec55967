"""Network namespaces for runners, benchmarks and tests: the project's one helper.

- :func:`entered_namespace`: a throwaway namespace this process enters, with veth pairs
  inside it, for runners and benchmarks that put a switch and its traffic in one namespace
  (gRPC on its loopback is then reachable from this process; removing the namespace on
  exit takes every veth with it, also after a failure);
- :func:`namespaces`, :func:`add_veth`, :func:`without_ipv6`: namespaces made and driven
  from outside (``ip netns``), for tests and benchmarks: created afresh, joined by veth
  pairs whose ends have their MAC and address, removed on exit whatever happened;
- :func:`sh`, :func:`send_frames`, :func:`delete_netns`: commands in them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute, netns

IPV6_CONFS = ("all", "default")
"""Where IPv6 is switched off in a namespace: its router solicitations and MLD reports would
be counted as traffic (a CP samples them; a sink counts them)."""


@dataclass(frozen=True)
class VethEnd:
    """One end of a veth pair: its namespace, name, and optionally MAC and address."""

    ns: str
    name: str
    mac: str | None = None
    address: str | None = None
    """IPv4 with its prefix, e.g. 10.0.0.1/24."""


@contextmanager
def namespaces(*names: str) -> Iterator[tuple[str, ...]]:
    """Fresh namespaces ``names`` (any left by an earlier run removed first), each with its
    loopback up; removed on exit with every veth in them."""
    delete_netns(*names)
    try:
        for name in names:
            sh("ip", "netns", "add", name)
            sh("ip", "-n", name, "link", "set", "lo", "up")
        yield names
    finally:
        delete_netns(*names)


def add_veth(a: VethEnd, b: VethEnd, *, up: bool = True) -> None:
    """A veth pair from ``a`` to ``b`` (the same namespace or two), each end given its MAC
    and address; both ends up unless ``up`` is False."""
    sh("ip", "-n", a.ns, "link", "add", a.name, "type", "veth", "peer", "name", b.name,
       "netns", b.ns)  # fmt: skip
    for end in (a, b):
        if end.mac:
            sh("ip", "-n", end.ns, "link", "set", end.name, "address", end.mac)
        if end.address:
            sh("ip", "-n", end.ns, "addr", "add", end.address, "dev", end.name)
        if up:
            sh("ip", "-n", end.ns, "link", "set", end.name, "up")


def without_ipv6(ns: str) -> None:
    """Switch IPv6 off in ``ns`` (before its links come up: no chatter at all)."""
    for conf in IPV6_CONFS:
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{conf}.disable_ipv6=1")


@contextmanager
def entered_namespace(
    name: str, num_ports: int, peer_prefix: str, mtu: int | None = None
) -> Iterator[str]:
    """Create ``name``, move this process into it, and add veth pairs swN <-> {peer_prefix}N
    (N < num_ports), all up and without IPv6 chatter; remove it all on exit."""
    netns.create(name)
    try:
        netns.setns(name, flags=0)
        for conf in IPV6_CONFS:
            Path(f"/proc/sys/net/ipv6/conf/{conf}/disable_ipv6").write_text("1")
        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
            for i in range(num_ports):
                ipr.link("add", ifname=f"sw{i}", kind="veth", peer={"ifname": f"{peer_prefix}{i}"})
                for dev in (f"sw{i}", f"{peer_prefix}{i}"):
                    extra = {"mtu": mtu} if mtu else {}
                    ipr.link("set", index=ipr.link_lookup(ifname=dev)[0], state="up", **extra)
        yield name
    finally:
        netns.remove(name)


def sh(*cmd: str) -> None:
    """Run a command (``ip ...``), failing loudly; its output is not shown."""
    subprocess.run(cmd, check=True, capture_output=True)


def send_frames(ns: str, iface: str, frames: list[bytes], gap_s: float = 0.0) -> None:
    """Send raw frames out of ``iface`` in namespace ``ns`` (one helper process)."""
    subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "qcn.topologies.rawframes", "send", iface,
         "--gap", str(gap_s)],
        input="\n".join(f.hex() for f in frames),
        text=True,
        check=True,
    )  # fmt: skip


def delete_netns(*names: str) -> None:
    """Remove namespaces (and the veths in them); absent ones are fine."""
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
