"""qcn.reaction_point.tc on a real interface: ids recycled, thousands of limiters, and an
interface's existing qdiscs respected (root, one namespace with a veth pair)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyroute2 import NetNS

from qcn.reaction_point.tc import (
    FIRST_LIMITER_MINOR,
    ROOT_MAJOR,
    DestinationMatch,
    FlowMatch,
    HtbLimiters,
    IdPool,
    TcError,
    TcFullError,
)
from qcn.topologies.netns import VethEnd, add_veth, namespaces
from qcn.topologies.netns import sh as run
from tests.toolchain import requires_root

CHURN_CYCLES = int(os.environ.get("QCN_TC_CHURN", "1500"))
"""Create/release cycles of the churn test (bench/rp_bench.py runs 100,000)."""
CONCURRENT = 2100
"""Beyond the ~2,048 limiters at which one u32 priority per limiter exhausted the kernel."""


def test_id_pool_hands_out_the_lowest_free_id() -> None:
    pool = IdPool(1, 3)
    assert [pool.take(), pool.take(), pool.take()] == [1, 2, 3]
    with pytest.raises(TcFullError):
        pool.take()
    pool.give_back(2)
    pool.give_back(1)
    assert pool.in_use == 1
    assert pool.take() == 1
    assert pool.take() == 2


@dataclass
class Veth:
    ns: str
    iface: str

    def tc(self, *args: str) -> str:
        return subprocess.run(
            ["ip", "netns", "exec", self.ns, "tc", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout


@pytest.fixture
def veth() -> Iterator[Veth]:
    ns = f"tct{os.getpid() % 100000}"
    with namespaces(ns):
        add_veth(VethEnd(ns, "tc-a"), VethEnd(ns, "tc-b"), up=False)
        run("ip", "-n", ns, "link", "set", "tc-a", "up")
        yield Veth(ns, "tc-a")


def limiters_in(veth: Veth) -> HtbLimiters:
    """Limiters on the veth, over a netlink socket inside its namespace."""
    return HtbLimiters(veth.iface, netns=veth.ns)


def flow(i: int) -> FlowMatch:
    return FlowMatch("10.0.0.1", f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", 17, 4000, 5001)


pytestmark = requires_root()


def filters(veth: Veth) -> str:
    return veth.tc("filter", "show", "dev", veth.iface, "parent", "5143:")


def test_churn_recycles_class_and_filter_ids(veth: Veth) -> None:
    """A released limiter's filters go and its class waits, idle at the line rate, for the
    next limiter: one class serves every cycle."""
    with limiters_in(veth) as tc:
        for i in range(CHURN_CYCLES):
            assert tc.add(flow(i), 10e6 + i) == FIRST_LIMITER_MINOR
            assert tc.class_rate_bps(FIRST_LIMITER_MINOR) == 8 * ((10e6 + i) // 8)
            tc.remove(flow(i))
        assert (tc.filters_in_use, tc.classes_made) == (0, 1)
        assert veth.tc("class", "show", "dev", veth.iface).count("class htb") == 1
        assert tc.class_rate_bps(FIRST_LIMITER_MINOR) == tc.idle_rate_bps
        assert "flowid" not in filters(veth)


def test_thousands_of_concurrent_limiters(veth: Veth) -> None:
    with limiters_in(veth) as tc:
        minors = [tc.add(flow(i), 10e6 + i * 1e3) for i in range(CONCURRENT)]
        assert sorted(minors) == list(range(FIRST_LIMITER_MINOR, FIRST_LIMITER_MINOR + CONCURRENT))
        assert veth.tc("class", "show", "dev", veth.iface).count("class htb") == CONCURRENT
        assert tc.class_rate_bps(minors[-1]) == 10e6 + (CONCURRENT - 1) * 1e3
        for i in range(0, CONCURRENT, 2):
            tc.remove(flow(i))
        assert filters(veth).count("flowid") == CONCURRENT // 2
        # New limiters take the idle classes, the oldest first; none is made.
        again = [tc.add(flow(CONCURRENT + i), 5e6) for i in range(3)]
        assert again == [minors[0], minors[2], minors[4]]
        assert tc.classes_made == CONCURRENT


def test_a_foreign_root_qdisc_is_refused_then_replaced_on_request(veth: Veth) -> None:
    veth.tc("qdisc", "add", "dev", veth.iface, "root", "handle", "7:", "tbf", "rate", "1mbit",
            "burst", "10k", "latency", "50ms")  # fmt: skip
    with pytest.raises(TcError, match=r"already has a root qdisc \(tbf 7:\).*--replace-qdisc"):
        limiters_in(veth).open()
    assert "qdisc tbf 7:" in veth.tc("qdisc", "show", "dev", veth.iface)
    tc = limiters_in(veth)
    said = tc.open(replace_foreign=True)
    assert said is not None
    assert "replaced the root qdisc tbf 7:" in said
    assert f"qdisc htb {ROOT_MAJOR:x}:" in veth.tc("qdisc", "show", "dev", veth.iface)
    tc.close()


def test_a_dead_daemons_tree_is_found_and_removed(veth: Veth) -> None:
    dead = limiters_in(veth)
    dead.open()
    dead.add(flow(1), 5e6)
    dead._ipr.close()  # dies without cleaning up: the tree stays in the kernel
    assert "class htb" in veth.tc("class", "show", "dev", veth.iface)
    tc = limiters_in(veth)
    said = tc.open()
    assert said is not None
    assert "removed the rate limiters a stopped daemon left behind" in said
    assert "class htb" not in veth.tc("class", "show", "dev", veth.iface)
    assert tc.add(flow(2), 5e6) == FIRST_LIMITER_MINOR
    tc.close()
    assert "htb" not in veth.tc("qdisc", "show", "dev", veth.iface)


def test_the_kernels_default_qdisc_is_simply_replaced(veth: Veth) -> None:
    veth.tc("qdisc", "replace", "dev", veth.iface, "root", "pfifo_fast")
    veth.tc("qdisc", "del", "dev", veth.iface, "root")  # back to the kernel's own (handle 0)
    tc = limiters_in(veth)
    assert tc.open() is None
    tc.close()


def test_all_traffic_is_held_to_the_line_rate(veth: Veth) -> None:
    with HtbLimiters(veth.iface, netns=veth.ns, line_rate_bps=100e6) as tc:
        minor = tc.add(flow(1), 10e6)
        classes = veth.tc("class", "show", "dev", veth.iface)
        # The line-rate class, the default class under it, the limiter under it too.
        assert "class htb 5143:1 root rate 100Mbit ceil 100Mbit" in classes
        # The default class borrows all it sends (qcn.reaction_point.tc.BORROWING_RATE_BPS).
        assert "class htb 5143:2 parent 5143:1 prio 0 rate 10Kbit ceil 100Mbit" in classes
        assert f"class htb 5143:{minor:x} parent 5143:1" in classes
        assert "default 0x2" in veth.tc("qdisc", "show", "dev", veth.iface)
        tc.remove(flow(1))
        assert f"flowid 5143:{minor:x}" not in filters(veth)


def test_limiters_together_never_pass_the_line_rate(veth: Veth) -> None:
    """Two limiters each at the line rate (as a released limiter still draining its backlog
    beside new traffic), each offered twice the line rate: together they leave at the line
    rate.  When each class was guaranteed its own rate, HTB let each send it without asking
    the line-rate class, and the host sent twice its line rate."""
    run("ip", "-n", veth.ns, "link", "set", "tc-b", "up")
    run("ip", "-n", veth.ns, "addr", "add", "10.0.0.9/24", "dev", veth.iface)
    line = 20e6
    destinations = [("10.0.0.1", "00:00:00:00:00:02"), ("10.0.0.2", "00:00:00:00:00:03")]
    with HtbLimiters(veth.iface, netns=veth.ns, line_rate_bps=line) as tc:
        minors = []
        for ip, mac in destinations:
            run("ip", "-n", veth.ns, "neigh", "add", ip, "lladdr", mac, "dev", veth.iface,
                "nud", "permanent")  # fmt: skip
            minors.append(tc.add(DestinationMatch(mac, (ip,)), line))
        start_at = time.monotonic() + 1.0  # both sources start together, imports done
        senders = [
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    veth.ns,
                    sys.executable,
                    "-m",
                    "qcn.reaction_point.sources",
                    "--dst",
                    ip,
                    "--rate-bps",
                    str(2 * line),
                    "--duration",
                    "1",
                    "--start-at",
                    repr(start_at),
                ],
                stdout=subprocess.DEVNULL,
            )
            for ip, _mac in destinations
        ]
        for sender in senders:
            sender.wait(timeout=30)
        elapsed = time.monotonic() - start_at
        stats = tc.class_stats()
    sent = [stats[m][0] * 8 / elapsed for m in minors]
    assert all(rate > 0.2 * line for rate in sent), sent  # both were served
    assert 0.8 * line < sum(sent) < 1.1 * line, sent


def test_bare_netlink_stats_match_pyroute2s(veth: Veth) -> None:
    from pyroute2 import netns  # noqa: PLC0415

    from qcn.reaction_point.tc import ClassStatsReader, DestinationMatch, read_class_stats  # noqa: PLC0415

    # No IPv6: its router solicitations and MLD reports (90 B) went out between the two
    # reads now and then, and the reads disagreed by them.
    for conf in ("all", "default", veth.iface):
        run("ip", "netns", "exec", veth.ns, "sysctl", "-qw", f"net.ipv6.conf.{conf}.disable_ipv6=1")
    run("ip", "-n", veth.ns, "link", "set", "tc-b", "up")  # a carrier: frames leave
    run("ip", "-n", veth.ns, "addr", "add", "10.0.0.9/24", "dev", veth.iface)
    run("ip", "-n", veth.ns, "neigh", "add", "10.0.0.1", "lladdr", "00:00:00:00:00:02",
        "dev", veth.iface, "nud", "permanent")  # fmt: skip
    with HtbLimiters(veth.iface, netns=veth.ns, line_rate_bps=100e6) as tc:
        minor = tc.add(DestinationMatch("00:00:00:00:00:02", ("10.0.0.1",)), 50e6)
        sent = subprocess.run(
            ["ip", "netns", "exec", veth.ns, sys.executable, "-m", "qcn", "rp", "send",
             "--dst", "10.0.0.1", "--rate-bps", "2e6", "--duration", "0.2",
             "--frame-bytes", "200"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        frames = int(sent.split()[1])
        netns.pushns(veth.ns)
        try:
            reader = ClassStatsReader(tc.ifindex)
        finally:
            netns.popns()
        try:
            ours = reader.read()
            tree = reader.read_tree()
        finally:
            reader.close()
        with NetNS(veth.ns) as ipr:
            theirs = read_class_stats(ipr, tc.ifindex)
    assert ours == theirs
    assert ours[minor] == (frames * 200, frames)
    assert frames > 100
    # The tree's own counts (the poller's check that no class moved) hold every class's.
    assert tree is not None
    assert tree[1] == sum(n for m, (_, n) in ours.items() if m != 1)  # (1: the line class)


def test_a_flow_limiter_classifies_exactly_its_flows_frames(veth: Veth) -> None:
    """A per-flow limiter's u32 filter matches its 5-tuple and nothing else: 40 UDP frames
    of the flow are counted by its class, none by a limiter of the same hosts and another
    source port (the filter is built byte by byte: qcn.reaction_point.tc.LimiterWriter)."""
    run("ip", "-n", veth.ns, "link", "set", "tc-b", "up")
    run("ip", "-n", veth.ns, "addr", "add", "10.0.0.9/24", "dev", veth.iface)
    run("ip", "-n", veth.ns, "neigh", "add", "10.0.0.1", "lladdr", "00:00:00:00:00:02",
        "dev", veth.iface, "nud", "permanent")  # fmt: skip
    sender = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "s.bind(('10.0.0.9', 4000))\n"
        "for _ in range(40): s.sendto(bytes(172), ('10.0.0.1', 5001))\n"
    )
    with HtbLimiters(veth.iface, netns=veth.ns, line_rate_bps=100e6) as tc:
        mine = tc.add(FlowMatch("10.0.0.9", "10.0.0.1", 17, 4000, 5001), 50e6)
        other = tc.add(FlowMatch("10.0.0.9", "10.0.0.1", 17, 4001, 5001), 50e6)
        run("ip", "netns", "exec", veth.ns, sys.executable, "-c", sender)
        stats = tc.class_stats()
    assert stats[mine] == (40 * (172 + 28 + 14), 40)
    assert stats[other] == (0, 0)


def test_a_rate_change_is_exactly_what_a_fresh_class_would_get(veth: Veth) -> None:
    """set_rate (one bare netlink message) leaves the class as pyroute2 would create it at
    that rate: rate, ceil, burst and cburst; up to 10 Gb/s and beyond 2^32 bytes/s."""
    with limiters_in(veth) as tc:
        for rate in (1e6, 50_781_250, 9_999e6, 40e9):
            tc.add(flow(1), rate)
            fresh = veth.tc("-d", "class", "show", "dev", veth.iface)
            tc.set_rate(flow(1), 123e6)
            tc.set_rate(flow(1), rate)
            assert veth.tc("-d", "class", "show", "dev", veth.iface) == fresh, rate
            assert tc.class_rate_bps(tc.limiters[flow(1)]) == 8 * (rate // 8)  # bytes/s
            tc.remove(flow(1))


def test_the_statistics_poller_runs_as_an_ordinary_thread_in_a_realtime_daemon() -> None:
    """A daemon started under SCHED_FIFO keeps its CNM thread in real time, but its poller
    (most of its work) leaves it: ten real-time pollers beside a real-time switch starved
    the senders and the sink for seconds (docs/bmv2.md, "The reaction points' latency")."""
    from qcn.topologies.noise import realtime_available  # noqa: PLC0415

    if not realtime_available():
        pytest.skip("this machine refuses SCHED_FIFO")
    probe = (
        "import os, threading\n"
        "from qcn.reaction_point.tc import ordinary_scheduling\n"
        "seen = []\n"
        "def poller():\n"
        "    ordinary_scheduling()\n"
        "    seen.append(os.sched_getscheduler(0))\n"
        "t = threading.Thread(target=poller); t.start(); t.join()\n"
        "print(os.sched_getscheduler(0) == os.SCHED_FIFO, seen == [os.SCHED_OTHER])\n"
    )
    out = subprocess.run(
        ["chrt", "-f", "10", sys.executable, "-c", probe],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent.parent,
    ).stdout  # fmt: skip
    assert out.split() == ["True", "True"]
