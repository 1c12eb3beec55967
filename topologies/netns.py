"""A throwaway network namespace that this process enters, with veth pairs inside it.

For runners and benchmarks that put a switch and its traffic in one namespace: gRPC on the
namespace's loopback is then reachable from this process, and removing the namespace on
exit takes every veth with it (also after a failure).
"""

from __future__ import annotations

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
