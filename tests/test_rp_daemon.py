"""The reaction-point daemon on real namespaces, veths, HTB and iperf3 (root, no BMv2).

h1 runs the daemon; h2 plays the network, sending crafted CNMs into h1's interface.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroute2 import NetNS
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.frames import CNM
from qcn.params import QcnParams, RpParams
from reaction_point.rules import RateLimiterRules
from tests.netns_helpers import delete_netns, run, send_frames
from tests.toolchain import requires_root

pytestmark = [
    requires_root(),
    pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed"),
]

H1_MAC, H2_MAC, STRANGER_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02", "00:00:00:00:00:99"
H1_IP, H2_IP = "10.0.0.1", "10.0.0.2"
LINE = 100e6
HOLD = {"line_rate_bps": LINE, "timer_s": 60.0, "bc_limit_bytes": 1 << 30}
"""Parameters under which a rate holds still (no cycle ends during a test)."""


@dataclass
class Hosts:
    h1: str
    h2: str
    tmp: Path

    @property
    def if1(self) -> str:
        return f"{self.h1}-eth0"

    @property
    def if2(self) -> str:
        return f"{self.h2}-eth0"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    tag = os.getpid() % 100000
    h = Hosts(f"rpa{tag}", f"rpb{tag}", tmp_path_factory.mktemp("rp"))
    try:
        run("ip", "netns", "add", h.h1)
        run("ip", "netns", "add", h.h2)
        run(
            "ip",
            "link",
            "add",
            h.if1,
            "netns",
            h.h1,
            "type",
            "veth",
            "peer",
            "name",
            h.if2,
            "netns",
            h.h2,
        )
        for ns, ifc, mac, ip in ((h.h1, h.if1, H1_MAC, H1_IP), (h.h2, h.if2, H2_MAC, H2_IP)):
            run("ip", "-n", ns, "link", "set", ifc, "address", mac)
            run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", ifc)
            run("ip", "-n", ns, "link", "set", ifc, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        run(
            "ip",
            "-n",
            h.h1,
            "neigh",
            "add",
            H2_IP,
            "lladdr",
            H2_MAC,
            "dev",
            h.if1,
            "nud",
            "permanent",
        )
        run(
            "ip",
            "-n",
            h.h2,
            "neigh",
            "add",
            H1_IP,
            "lladdr",
            H1_MAC,
            "dev",
            h.if2,
            "nud",
            "permanent",
        )
        yield h
    finally:
        delete_netns(h.h1, h.h2)


class Daemon:
    def __init__(self, hosts: Hosts, rp: dict[str, Any], name: str) -> None:
        self.hosts = hosts
        self.dir = hosts.tmp / name
        self.dir.mkdir()
        params = self.dir / "params.toml"
        QcnParams.from_dict({"rp": rp}).save(params)
        self.params = QcnParams.load(params).rp
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                hosts.h1,
                sys.executable,
                "-m",
                "qcn.cli",
                "rp",
                "start",
                "--iface",
                hosts.if1,
                "--params",
                str(params),
                "--status-dir",
                str(self.dir),
                "--csv-dir",
                str(self.dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.wait(lambda s: s["running"]), self.output()

    def status(self) -> dict[str, Any] | None:
        f = self.dir / f"rp-{self.hosts.if1}.json"
        try:
            return dict(json.loads(f.read_text()))
        except (OSError, ValueError):
            return None

    def wait(self, cond: Any, timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            s = self.status()
            if s is not None and cond(s):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def counters(self) -> dict[str, int]:
        s = self.status()
        assert s is not None
        return dict(s["counters"])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(10)

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        return self.proc.stdout.read() if self.proc.stdout else ""


@pytest.fixture
def daemon_factory(hosts: Hosts) -> Iterator[Any]:
    started: list[Daemon] = []

    def start(rp: dict[str, Any], name: str) -> Daemon:
        d = Daemon(hosts, rp, name)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def cnm(qntz_fb: int, encap_da: str = H2_MAC, dst: str = H1_MAC, **kw: Any) -> bytes:
    msdu = bytes(IP(src=H1_IP, dst=H2_IP) / UDP(sport=4000, dport=5001))
    return bytes(
        Ether(dst=dst, src="02:00:00:00:00:fe")
        / CNM(qntz_fb=qntz_fb, encap_da=encap_da, msdu=b"\x08\x00" + msdu, **kw)
    )


def kernel_rates(hosts: Hosts) -> list[float]:
    """The HTB class rates on h1's interface, read over netlink (bits/s)."""
    with NetNS(hosts.h1) as ns:
        idx = ns.link_lookup(ifname=hosts.if1)[0]
        rates = []
        for c in ns.get_classes(index=idx):
            opts = c.get_attr("TCA_OPTIONS")
            if c["handle"] >> 16 == 1 and opts is not None:
                rates.append(8.0 * opts.get_attr("TCA_HTB_PARMS")["rate"])
        return rates


def expected_kernel_rate(params: RpParams, cuts: list[int]) -> float:
    rules = RateLimiterRules(params, lambda: 0.0, lambda: 0.5)
    for q in cuts:
        rules.on_cnm(q)
    return max(params.rate_unit_bps, round(rules.current_rate_bps / 1e6) * 1e6)


def test_crafted_cnms_set_exact_kernel_rate(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "exact")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63])]  # 50.78 -> 51 Mb/s
    send_frames(hosts.h2, hosts.if2, [cnm(20), cnm(40)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 3)
    assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63, 20, 40])]


def iperf_udp(hosts: Hosts, rate: str, seconds: int) -> float:
    """Goodput of an iperf3 UDP flow h1 -> h2 as received, bits/s of payload."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", hosts.h2, "iperf3", "-s", "-1", "-p", "5201"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):
            r = subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    hosts.h1,
                    "iperf3",
                    "-c",
                    H2_IP,
                    "-u",
                    "-b",
                    rate,
                    "-l",
                    "1400",
                    "-t",
                    str(seconds),
                    "-J",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            out = json.loads(r.stdout) if r.stdout.strip() else {}
            received = out.get("end", {}).get("sum_received")
            if r.returncode == 0 and received:
                return float(received["bits_per_second"])
            time.sleep(0.1)  # the server was not listening yet
        raise AssertionError(r.stdout + r.stderr)
    finally:
        server.kill()
        server.wait()


def test_iperf3_throughput_follows_limiter(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "iperf")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    (rate,) = kernel_rates(hosts)
    goodput = iperf_udp(hosts, "90M", 3)
    # HTB counts Ethernet frames (1400 + 8 + 20 + 14 bytes); iperf3 counts UDP payload.
    expected = rate * 1400 / 1442
    assert abs(goodput - expected) / expected < 0.05, (goodput, expected)


def test_recovery_follows_the_rules_with_traffic(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory({"line_rate_bps": LINE}, "recovery")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    iperf_udp(hosts, "90M", 2)
    assert d.wait(lambda s: s["counters"].get("limiters_released") == 1, timeout_s=10)
    (csv_file,) = d.dir.glob("rp-*.csv")
    rows = [line.split(",") for line in csv_file.read_text().splitlines()[1:]]
    cr = [float(r[1]) for r in rows]
    tr = [float(r[2]) for r in rows]
    stages = [r[3] for r in rows]
    assert cr[0] == pytest.approx(LINE * 65 / 128, abs=1)  # the cut
    # Every later row is one increase: CR = min((CR + TR) / 2, line rate).
    for k in range(1, len(rows)):
        assert cr[k] == pytest.approx(min((cr[k - 1] + tr[k]) / 2, LINE), abs=2)
    first_ai = stages.index("AI")
    # FR lasts while neither counter passed TH = 5 (byte counter and timer both count).
    assert 5 <= first_ai - 1 <= 10
    assert all(t == LINE for t in tr[:first_ai])  # TR is kept in fast recovery
    assert tr[first_ai] == LINE + 5e6  # the first AI step
    assert cr[-1] == LINE  # released at line rate


def test_cnm_for_unknown_destination_ignored_and_counted(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "unknown")
    send_frames(hosts.h2, hosts.if2, [cnm(50, encap_da=STRANGER_MAC)])
    assert d.wait(lambda s: s["counters"].get("dropped_unknown_destination") == 1)
    assert kernel_rates(hosts) == []


def test_shutdown_leaves_no_tc_state(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "shutdown")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    assert len(kernel_rates(hosts)) == 1
    assert d.stop() == 0
    qdiscs = subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "tc", "qdisc", "show", "dev", hosts.if1],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "htb" not in qdiscs
    assert kernel_rates(hosts) == []
    status = d.status()
    assert status is not None
    assert status["running"] is False


frame_bytes = st.one_of(
    st.binary(min_size=14, max_size=120),
    # Strictly shorter than the whole CNM (68 bytes), so always truncated.
    st.builds(lambda q, n: cnm(q)[:n], st.integers(0, 63), st.integers(14, len(cnm(0)) - 1)),
    st.builds(lambda v: cnm(10, version=v), st.integers(1, 15)),
    st.builds(
        lambda q, extra: cnm(q)[:36] + (64 + extra).to_bytes(2, "big") + bytes(20),
        st.integers(0, 63),
        st.integers(1, 100),
    ),
    st.builds(lambda q: cnm(q, encap_da=STRANGER_MAC), st.integers(0, 63)),
    st.builds(lambda q: cnm(q, dst="00:00:00:00:00:77"), st.integers(0, 63)),
)


@pytest.fixture(scope="module")
def fuzz_daemon(hosts: Hosts) -> Iterator[Daemon]:
    d = Daemon(hosts, HOLD, "fuzz")
    yield d
    d.stop()


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(frame_bytes, min_size=20, max_size=60))
def test_fuzzed_cnms_never_crash_or_change_a_rate(
    fuzz_daemon: Daemon, hosts: Hosts, frames: list[bytes]
) -> None:
    d = fuzz_daemon
    before = sum(v for k, v in d.counters().items() if k.startswith("dropped_"))
    # The kernel delivers only CNMs addressed to h1 (no promiscuous mode) from a unicast
    # source: those must all be counted as drops.
    to_h1 = [
        f
        for f in frames
        if f[:6] == bytes.fromhex("000000000001") and f[12:14] == b"\x22\xe7" and not f[6] & 1
    ]
    send_frames(hosts.h2, hosts.if2, frames)
    assert d.wait(
        lambda s: (
            sum(v for k, v in s["counters"].items() if k.startswith("dropped_"))
            >= before + len(to_h1)
        )
    ), d.output()
    assert d.proc.poll() is None
    assert d.counters().get("cnms_accepted", 0) == 0
    assert kernel_rates(hosts) == []
