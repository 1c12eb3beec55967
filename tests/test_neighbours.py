"""qcn.reaction_point.neighbours: the neighbour table followed by netlink notifications (root:
one namespace with a veth pair, its table changed with ip neigh)."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator

import pytest
from pyroute2.netns import popns, pushns

from qcn.reaction_point.neighbours import NeighbourTable
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.netns import VethEnd, add_veth, namespaces, sh
from tests.toolchain import requires_root

pytestmark = requires_root()

MAC_A, MAC_B = "02:00:00:00:0a:01", "02:00:00:00:0a:02"


@pytest.fixture
def table() -> Iterator[tuple[str, NeighbourTable]]:
    ns = f"nbt{os.getpid() % 100000}"
    with namespaces(ns):
        add_veth(VethEnd(ns, "nb-a", address="10.1.0.1/16"), VethEnd(ns, "nb-b"))
        neigh(ns, "add", "10.1.0.2", MAC_A)  # there before the table is read
        pushns(ns)
        try:
            # A small socket buffer, so that the overflow test overflows it.
            t = NeighbourTable(socket.if_nametoindex("nb-a"), rcvbuf_bytes=16384)
        finally:
            popns()
        try:
            yield ns, t
        finally:
            t.close()


def neigh(ns: str, action: str, ip: str, mac: str | None = None, dev: str = "nb-a") -> None:
    lladdr = ["lladdr", mac, "nud", "permanent"] if mac else []
    sh("ip", "-n", ns, "neigh", action, ip, *lladdr, "dev", dev)


def test_the_table_follows_the_kernels_changes(table: tuple[str, NeighbourTable]) -> None:
    ns, t = table
    assert t.ips(MAC_A) == {"10.1.0.2"}
    neigh(ns, "add", "10.1.0.3", MAC_A)
    assert wait_until(lambda: t.ips(MAC_A) == {"10.1.0.2", "10.1.0.3"}, 2.0)
    neigh(ns, "replace", "10.1.0.2", MAC_B)  # the address moves to another host
    assert wait_until(lambda: t.ips(MAC_B) == {"10.1.0.2"}, 2.0)
    assert t.ips(MAC_A) == {"10.1.0.3"}
    # By address too (a CNP names its sender so): where each one is now.
    assert (t.mac("10.1.0.2"), t.mac("10.1.0.3")) == (MAC_B, MAC_A)
    neigh(ns, "del", "10.1.0.3")
    assert wait_until(lambda: t.ips(MAC_A) == set(), 2.0)
    assert t.mac("10.1.0.3") is None
    neigh(ns, "add", "10.1.0.4", MAC_A, dev="nb-b")  # another interface's: not ours
    neigh(ns, "add", "10.1.0.5", MAC_A)
    assert wait_until(lambda: t.ips(MAC_A) == {"10.1.0.5"}, 2.0)
    assert t.mac("10.1.0.4") is None
    assert t.reloads == 1


def test_an_overflow_of_notifications_reads_the_table_again(
    table: tuple[str, NeighbourTable],
) -> None:
    """5,000 changes while nobody reads: the socket overflows, and the next lookup finds
    the table as it is (read again) rather than a table missing what was lost."""
    ns, t = table
    batch = "\n".join(
        f"neigh add 10.1.{i >> 8}.{i & 255 or 1} lladdr {MAC_B} nud permanent dev nb-a"
        for i in range(256, 5256)
        if i & 255
    )
    subprocess.run(["ip", "-n", ns, "-batch", "-"], input=batch, text=True, check=True)
    assert len(t.ips(MAC_B)) == batch.count("\n") + 1
    assert t.ips(MAC_A) == {"10.1.0.2"}
    assert t.reloads == 2
