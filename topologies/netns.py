"""Network namespaces for runners, benchmarks and tests: the project's one helper.

- :func:`entered_namespace`: a throwaway namespace this process enters, with veth pairs
  inside it, for runners and benchmarks that put a switch and its traffic in one namespace
  (gRPC on its loopback is then reachable from this process; removing the namespace on
  exit takes every veth with it, also after a failure);
- :func:`sh`, :func:`send_frames`, :func:`delete_netns`: for harnesses that drive
  namespaces they created from outside (``ip netns``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyroute2 import IPRoute, netns


@contextmanager
def entered_namespace(
    name: str, num_ports: int, peer_prefix: str, mtu: int | None = None
) -> Iterator[str]:
    """Create ``name``, move this process into it, and add veth pairs swN <-> {peer_prefix}N
    (N < num_ports), all up and without IPv6 chatter; remove it all on exit."""
    netns.create(name)
    try:
        netns.setns(name, flags=0)
        # No IPv6 chatter (router solicitations, MLD): it would be counted as traffic.
        for conf in ("all", "default"):
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
        ["ip", "netns", "exec", ns, sys.executable, "-m", "topologies.rawframes", "send", iface,
         "--gap", str(gap_s)],
        input="\n".join(f.hex() for f in frames),
        text=True,
        check=True,
    )  # fmt: skip


def delete_netns(*names: str) -> None:
    """Remove namespaces (and the veths in them); absent ones are fine."""
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
