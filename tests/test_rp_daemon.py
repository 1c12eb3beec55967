"""The reaction-point daemon on real namespaces, veths, HTB and iperf3 (root, no BMv2).

h1 runs the daemon; h2 plays the network, sending crafted CNMs (and DCQCN's CNPs) into
h1's interface.
"""

from __future__ import annotations

import json
import os
import re
import select
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
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from qcn.core.ecmp import FLOW_PORT_BASE, ROCEV2_UDP_PORT, flow_port
from qcn.core.flows import FLOW_HEADER
from qcn.core.frames import (
    BTH_OPCODE_CNP,
    CNM,
    CNP_IP_ID,
    CNP_PAYLOAD_BYTES,
    cnp_packet,
    cnp_payload,
    pause_frame,
)
from qcn.core.params import QcnParams, RpParams
from qcn.reaction_point.daemon import StatusEncoder, StatusSnapshot, build_status, status_files
from qcn.reaction_point.limiter_csv import MAX_OPEN_CSVS
from qcn.reaction_point.pause import find_gate
from qcn.reaction_point.rules import RateLimiterRules
from qcn.reaction_point.tc import ROOT_MAJOR
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.netns import VethEnd, add_veth, namespaces, send_frames
from qcn.topologies.netns import sh as run
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
    with namespaces(h.h1, h.h2):
        add_veth(
            VethEnd(h.h1, h.if1, H1_MAC, f"{H1_IP}/24"), VethEnd(h.h2, h.if2, H2_MAC, f"{H2_IP}/24")
        )
        for ns, ifc, ip, mac in ((h.h1, h.if1, H2_IP, H2_MAC), (h.h2, h.if2, H1_IP, H1_MAC)):
            run("ip", "-n", ns, "neigh", "add", ip, "lladdr", mac, "dev", ifc, "nud", "permanent")
        yield h


class Daemon:
    def __init__(
        self,
        hosts: Hosts,
        rp: dict[str, Any],
        name: str,
        *extra: str,
        iface: str | None = None,
        nofile: int | None = None,
        preset: str | None = None,
    ) -> None:
        """``nofile``: the daemon's file limit (``ulimit -n``), if not the default;
        ``preset``: started with ``--preset`` and ``--line-rate-bps`` (``rp``'s line rate)
        instead of a parameter file."""
        self.hosts = hosts
        self.iface = iface or hosts.if1
        self.dir = hosts.tmp / name
        self.dir.mkdir()
        params = self.dir / "params.toml"
        if preset is None:
            QcnParams.from_dict({"rp": rp}).save(params)
            self.params = QcnParams.load(params).rp
            how = ["--params", str(params)]
        else:
            line = rp["line_rate_bps"]
            self.params = QcnParams.from_dict(
                {"rp": {"line_rate_bps": line}}, QcnParams.preset(preset)
            ).rp
            how = ["--preset", preset, "--line-rate-bps", f"{line:g}"]
        self.proc = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                hosts.h1,
                *([] if nofile is None else ["prlimit", f"--nofile={nofile}:{nofile}"]),
                sys.executable,
                "-m",
                "qcn",
                "rp",
                "start",
                "--iface",
                self.iface,
                *how,
                "--status-dir",
                str(self.dir),
                "--csv-dir",
                str(self.dir),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.wait(lambda s: s["running"]), self.output()

    def status(self) -> dict[str, Any] | None:
        # The daemon's file, named after its namespace.
        try:
            return dict(json.loads(status_files(self.dir, self.iface)[0].read_text()))
        except (OSError, ValueError, IndexError):
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

    def start(
        rp: dict[str, Any],
        name: str,
        *extra: str,
        iface: str | None = None,
        nofile: int | None = None,
        preset: str | None = None,
    ) -> Daemon:
        d = Daemon(hosts, rp, name, *extra, iface=iface, nofile=nofile, preset=preset)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def cnm(
    qntz_fb: int, encap_da: str = H2_MAC, dst: str = H1_MAC, sport: int = 4000, **kw: Any
) -> bytes:
    msdu = bytes(IP(src=H1_IP, dst=H2_IP) / UDP(sport=sport, dport=5001))
    return bytes(
        Ether(dst=dst, src="02:00:00:00:00:fe")
        / CNM(qntz_fb=qntz_fb, encap_da=encap_da, msdu=b"\x08\x00" + msdu, **kw)
    )


def kernel_rates(hosts: Hosts) -> list[float]:
    """The limits (ceil) of h1's limiter classes that a filter feeds (bits/s, over netlink):
    a released limiter's class stays, idle, for the next one (qcn.reaction_point.tc)."""
    filters = subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "tc", "filter", "show", "dev", hosts.if1,
         "parent", f"{ROOT_MAJOR:x}:"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    fed = {int(m, 16) for m in re.findall(rf"flowid {ROOT_MAJOR:x}:([0-9a-f]+)", filters)}
    with NetNS(hosts.h1) as ns:
        idx = ns.link_lookup(ifname=hosts.if1)[0]
        rates = []
        for c in ns.get_classes(index=idx):
            opts = c.get_attr("TCA_OPTIONS")
            if c["handle"] >> 16 == ROOT_MAJOR and c["handle"] & 0xFFFF in fed and opts:
                rates.append(8.0 * opts.get_attr("TCA_HTB_PARMS")["ceil"])  # its limit
        return rates


def ifindex(hosts: Hosts, name: str | None = None) -> int:
    """The index of h1's interface ``name`` (default: its veth to h2)."""
    with NetNS(hosts.h1) as ns:
        return int(ns.link_lookup(ifname=name or hosts.if1)[0])


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


def test_ecm_positive_feedback_raises_only_an_existing_limiter(
    daemon_factory: Any, hosts: Hosts
) -> None:
    # Ru scaled as the line rate is (10G -> 100M), as on BMv2.
    ecm = {**HOLD, "scheme": "ecm", "min_rate_bps": 1e6, "ecm_ru_bps": 1e4, "ecm_td_s": 60.0}
    d = daemon_factory(ecm, "ecm")
    send_frames(hosts.h2, hosts.if2, [cnm(30, fb_positive=1)])
    assert d.wait(lambda s: s["counters"].get("positive_without_limiter") == 1)
    assert kernel_rates(hosts) == []  # positive feedback never creates a limiter
    rules = RateLimiterRules(d.params, lambda: 0.0, lambda: 0.5)
    for qntz_fb, positive in ((63, False), (21, True)):
        send_frames(hosts.h2, hosts.if2, [cnm(qntz_fb, fb_positive=int(positive))])
        rules.on_cnm(qntz_fb, positive)
        assert d.wait(lambda s, n=rules.cnms: s["counters"].get("cnms_accepted") == n)
        # 100M * (1 - Gd * 1875) = 50 Mb/s, then + Gi * 625 pages * Ru = +3.33 Mb/s
        assert kernel_rates(hosts) == [round(rules.current_rate_bps / 1e6) * 1e6]
    assert kernel_rates(hosts) == [53e6]


def test_positive_reinforcement_raises_only_an_existing_limiter(
    daemon_factory: Any, hosts: Hosts
) -> None:
    d = daemon_factory({**HOLD, "positive_reinforcement": True}, "reinforce")
    send_frames(hosts.h2, hosts.if2, [cnm(0)])
    assert d.wait(lambda s: s["counters"].get("positive_without_limiter") == 1)
    assert kernel_rates(hosts) == []  # Fb = 0 never creates a limiter
    rules = RateLimiterRules(d.params, lambda: 0.0, lambda: 0.5)
    for qntz_fb in (63, 0, 0):
        send_frames(hosts.h2, hosts.if2, [cnm(qntz_fb)])
        rules.on_cnm(qntz_fb)
        assert d.wait(
            lambda s, n=rules.cnms + rules.reinforcements: s["counters"].get("cnms_accepted") == n
        )
    # 51 Mb/s after the cut, then two fast-recovery steps towards TR = 100 Mb/s: 87.7
    assert kernel_rates(hosts) == [88e6]


# -- DCQCN: CNPs ----------------------------------------------------------------------------

DCQCN_HOLD = {
    **HOLD,
    "scheme": "dcqcn",
    "shorten_cycles_after_fr": False,
    "dcqcn": {"alpha_initial": 0.5, "alpha_timer_s": 60.0},
}
"""DCQCN whose rate holds still between CNPs (no cycle ends, alpha never decays), its first
cut by a quarter."""


def cnp(qp: int = 10_007, src: str = H2_IP, sport: int = 5001, **bth: Any) -> bytes:
    """The CNP h2's notification point sends h1 for the flow from h1's UDP port ``qp`` to
    h2's ``sport`` (``bth``: fields of the BTH changed)."""
    packet = cnp_packet(src, H1_IP, sport, qp)
    for name, value in bth.items():
        setattr(packet[BTH], name, value)
    return bytes(Ether(dst=H1_MAC, src=H2_MAC) / packet)


def expected_dcqcn_rates(params: RpParams, cnps: int) -> list[float]:
    """The kernel rates DcqcnRules gives after each of ``cnps`` CNPs (at one moment)."""
    rules = RateLimiterRules(params, lambda: 0.0, lambda: 0.5)
    rates = []
    for _ in range(cnps):
        rules.on_cnm(0)
        rates.append(max(params.rate_unit_bps, round(rules.current_rate_bps / 1e6) * 1e6))
    return rates


def test_a_cnp_cuts_its_destinations_limiter_as_dcqcn_says(
    daemon_factory: Any, hosts: Hosts
) -> None:
    d = daemon_factory(DCQCN_HOLD, "dcqcn")
    first, second = expected_dcqcn_rates(d.params, 2)
    assert (first, second) == (75e6, 56e6)  # alpha 0.5, then 0.5 * (1 - g) + g
    send_frames(hosts.h2, hosts.if2, [cnp()])
    assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 1), d.counters()
    assert kernel_rates(hosts) == [first]
    (limiter,) = d.status()["limiters"]
    assert limiter["limiter"] == H2_MAC  # the destination's limiter, as a CNM's
    send_frames(hosts.h2, hosts.if2, [cnp(qp=10_008)])  # another flow to it: the same one
    assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 2)
    assert kernel_rates(hosts) == [second]
    # A CNM about the same destination reaches the same limiter.
    send_frames(hosts.h2, hosts.if2, [cnm(0)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    assert d.counters()["limiters_created"] == 1


def test_a_cnp_cuts_its_flows_limiter_and_names_no_other(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(DCQCN_HOLD, "dcqcn-flow", "--per-flow")
    (first,) = expected_dcqcn_rates(d.params, 1)
    send_frames(hosts.h2, hosts.if2, [cnp(qp=10_007, sport=5001)])
    assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 1), d.counters()
    (limiter,) = d.status()["limiters"]
    # The flow h1:10007 -> h2:5001: the QP is its source port, the CNP's its destination.
    assert limiter["limiter"] == f"{H1_IP}:10007-{H2_IP}:5001/17"
    assert kernel_rates(hosts) == [first]
    # A CNP for another flow has a limiter of its own.
    send_frames(hosts.h2, hosts.if2, [cnp(qp=9999, sport=5001)])
    assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 2)
    assert kernel_rates(hosts) == [first, first]
    # QP 0 and a QP beyond a port's 16 bits name no flow: counted, no limiter.
    send_frames(hosts.h2, hosts.if2, [cnp(qp=0), cnp(qp=0x10000)])
    assert d.wait(lambda s: s["counters"].get("dropped_cnp_no_flow") == 2), d.counters()
    assert d.counters()["limiters_created"] == 2


def test_a_cnp_for_an_unknown_destination_or_not_a_cnp_is_counted_and_ignored(
    daemon_factory: Any, hosts: Hosts
) -> None:
    d = daemon_factory(DCQCN_HOLD, "dcqcn-unknown")
    stranger = cnp(src="10.0.0.77")  # no neighbour of h1's: no destination it sends to
    ack = cnp(opcode=0x11)  # RC ACKNOWLEDGE, not a CNP
    short = to_cnp_port(bytes(20))
    send_frames(hosts.h2, hosts.if2, [stranger, ack, short])
    expected = {
        "dropped_cnp_unknown_destination": 1,
        "dropped_cnp_not_cnp": 1,
        "dropped_cnp_bad_length": 1,
    }
    assert d.wait(lambda s: all(s["counters"].get(k) == n for k, n in expected.items())), (
        d.counters()
    )
    assert kernel_rates(hosts) == []
    assert d.counters().get("cnps_accepted", 0) == 0


def test_qcn_rp_start_preset_dcqcn_takes_cnps(daemon_factory: Any, hosts: Hosts) -> None:
    """`qcn rp start --preset dcqcn`: the paper's parameters; a first CNP halves the rate
    (alpha starts at 1), which its limiter's first CSV row says (the preset's 55 us timer
    raises it again at once)."""
    d = daemon_factory({"line_rate_bps": LINE}, "dcqcn-preset", preset="dcqcn")
    assert d.params.scheme == "dcqcn"
    send_frames(hosts.h2, hosts.if2, [cnp()])
    assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 1), d.counters()
    (csv_file,) = d.dir.glob("rp-*.csv")
    assert wait_until(lambda: len(csv_file.read_text().splitlines()) > 1, 5.0)
    first_row = csv_file.read_text().splitlines()[1].split(",")
    assert float(first_row[1]) == LINE / 2


def test_a_qcn_daemon_leaves_port_4791_alone(daemon_factory: Any, hosts: Hosts) -> None:
    daemon_factory(HOLD, "qcn-no-cnp")
    listening = subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "ss", "-Hulpn", f"sport = {ROCEV2_UDP_PORT}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert listening.strip() == ""


def in_h(ns: str, *args: str) -> subprocess.Popen[str]:
    """A Python module of the project running in ``ns``, its stdout a pipe."""
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def json_line_until(proc: subprocess.Popen[str], done: Any, timeout_s: float = 10.0) -> Any:
    """The first of ``proc``'s JSON lines for which ``done(line)`` holds (None: none came)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        text = proc.stdout.readline()
        if not text:
            break
        line = json.loads(text)
        if done(line):
            return line
    return None


def test_the_sinks_cnps_reach_the_daemon_one_per_interval(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """End to end, without a switch: h1 sends 20 frames marked CE by hand (IP_TOS 3) and 5
    ECN-capable ones; h2's sink, the notification point, answers with one CNP (its interval
    is longer than the test); h1's daemon cuts the flow's limiter by it.  The CNP on the
    wire is RoCEv2's, its ICRC right for the header as it arrived."""
    d = daemon_factory(DCQCN_HOLD, "np-e2e", "--per-flow")
    (first,) = expected_dcqcn_rates(d.params, 1)
    capture = in_h(hosts.h1, "qcn.topologies.rawframes", "capture", hosts.if1,
                   "--ethertype", "ipv4", "--seconds", "30")  # fmt: skip
    sink = in_h(hosts.h2, "qcn.topologies.sink", "--port", "5001", "--interval", "0.02",
                "--cnp-interval", "60")  # fmt: skip
    try:
        assert capture.stdout is not None
        assert capture.stdout.readline() == "ready\n"
        assert json_line_until(sink, lambda line: "cnp" in line) is not None
        send = (
            "import socket\n"
            "for port, tos, n in ((9999, 3, 20), (9998, 2, 5)):\n"
            "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)\n"
            "    s.bind(('0.0.0.0', port))\n"
            f"    for _ in range(n): s.sendto(bytes(100), ('{H2_IP}', 5001))\n"
        )
        subprocess.run(["ip", "netns", "exec", hosts.h1, sys.executable, "-c", send], check=True)
        line = json_line_until(sink, lambda line: line["rx"].get(H1_IP, [0])[0] == 25)
        assert line is not None
        assert (line["ce"], line["cnp"]) == ({H1_IP: 20}, {H1_IP: 1})
        assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 1), d.counters()
        (limiter,) = d.status()["limiters"]
        assert limiter["limiter"] == f"{H1_IP}:9999-{H2_IP}:5001/17"
        assert kernel_rates(hosts) == [first]
    finally:
        for proc in (sink, capture):
            proc.terminate()
        out, _ = capture.communicate(timeout=10)
        sink.communicate(timeout=10)
    frames = [Ether(bytes.fromhex(h)) for h in out.split()]
    cnps = [f for f in frames if UDP in f and f[UDP].dport == ROCEV2_UDP_PORT]
    assert len(cnps) == 1, [f.summary() for f in frames]
    cnp_frame = cnps[0]
    ip = cnp_frame[IP]
    assert (ip.src, ip.dst, ip.id, str(ip.flags)) == (H2_IP, H1_IP, CNP_IP_ID, "DF")
    assert (cnp_frame[UDP].sport, cnp_frame[BTH].dqpn) == (5001, 9999)
    on_wire = bytes(cnp_frame[UDP].payload)
    assert on_wire == cnp_payload(H2_IP, H1_IP, 5001, 9999)
    rebuilt = cnp_frame.copy()
    rebuilt[BTH].icrc = None  # scapy computes it again from the header as captured
    assert bytes(rebuilt[UDP].payload) == on_wire


def test_the_flow_receivers_cnps_cut_each_flows_own_limiter(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """End to end, per flow: h1 sends flows 7 and 8 marked CE by hand from their own ports
    (qcn.core.ecmp.flow_port) and flow 9 unmarked; h2's flow receiver sends each marked
    flow one CNP, and h1's daemon cuts each flow's own limiter."""
    d = daemon_factory(DCQCN_HOLD, "np-flows", "--per-flow")
    (first,) = expected_dcqcn_rates(d.params, 1)
    receiver = in_h(hosts.h2, "qcn.topologies.flow_receiver", "--port", "5001",
                    "--interval", "0.02", "--cnp-interval", "60",
                    "--log", str(hosts.tmp / "np-flows.jsonl"))  # fmt: skip
    try:
        assert json_line_until(receiver, lambda line: "cnp" in line) is not None
        send = (
            "import socket, struct\n"
            "for flow, tos in ((7, 3), (8, 3), (9, 2)):\n"
            "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)\n"
            f"    s.bind(('0.0.0.0', {FLOW_PORT_BASE} + flow))\n"
            "    for frame in range(3):\n"
            f"        header = struct.pack('{FLOW_HEADER.format}', flow, frame, 3 * 1400, 0)\n"
            f"        s.sendto(header + bytes(100), ('{H2_IP}', 5001))\n"
        )
        subprocess.run(["ip", "netns", "exec", hosts.h1, sys.executable, "-c", send], check=True)
        line = json_line_until(receiver, lambda line: line["rx"].get(H1_IP, [0])[0] == 9)
        assert line is not None
        assert (line["ce"], line["cnp"]) == ({H1_IP: 6}, {H1_IP: 2})
        assert d.wait(lambda s: s["counters"].get("cnps_accepted") == 2), d.counters()
        status = d.status()
        assert status is not None
        assert sorted(lim["limiter"] for lim in status["limiters"]) == [
            f"{H1_IP}:{flow_port(flow)}-{H2_IP}:5001/17" for flow in (7, 8)
        ]
        assert kernel_rates(hosts) == [first, first]
    finally:
        receiver.terminate()
        receiver.communicate(timeout=10)


def test_port_4791_taken_is_one_line_and_leaves_no_tree(hosts: Hosts) -> None:
    holder = subprocess.Popen(
        ["ip", "netns", "exec", hosts.h1, sys.executable, "-c",
         "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
         f"s.bind(('0.0.0.0', {ROCEV2_UDP_PORT})); print('bound', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "bound\n"
        r = qcn_in(hosts.h1, "rp", "start", "--iface", hosts.if1, "--preset", "dcqcn",
                   "--status-dir", str(hosts.tmp / "cnp-port-taken"))  # fmt: skip
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert f"UDP port {ROCEV2_UDP_PORT} (RoCEv2, where CNPs come) is taken on" in r.stderr
    assert kernel_rates(hosts) == []
    shown = subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "tc", "qdisc", "show", "dev", hosts.if1],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "htb" not in shown


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


# -- a long life and hostile input ----------------------------------------------------------


def qcn_in(ns: str, *args: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "qcn", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout_s,
    )


def test_limiter_table_is_bounded_least_recent_evicted(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "bounded", "--per-flow", "--max-limiters", "2")
    for n, sport in enumerate((4000, 4001, 4002), start=1):
        send_frames(hosts.h2, hosts.if2, [cnm(30, sport=sport)])
        assert d.wait(lambda s, n=n: s["counters"].get("cnms_accepted") == n), d.counters()
    c = d.counters()
    assert (c["limiters_created"], c["limiters_evicted"]) == (3, 1)
    status = d.status()
    assert status is not None
    names = sorted(lim["limiter"] for lim in status["limiters"])
    assert [n.split("-")[0] for n in names] == [f"{H1_IP}:4001", f"{H1_IP}:4002"]
    assert len(kernel_rates(hosts)) == 2
    # The evicted flow's next CNM makes it a limiter again, evicting the least recent.
    send_frames(hosts.h2, hosts.if2, [cnm(30, sport=4000)])
    assert d.wait(lambda s: s["counters"].get("limiters_evicted") == 2)
    assert len(kernel_rates(hosts)) == 2


def test_kill9_status_is_stale_and_the_next_daemon_cleans_up(
    daemon_factory: Any, hosts: Hosts
) -> None:
    d = daemon_factory(HOLD, "killed")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    d.proc.kill()
    d.proc.wait(5)
    assert len(kernel_rates(hosts)) == 1  # the dead daemon's limiter still throttles
    r = qcn_in(hosts.h1, "rp", "status", "--status-dir", str(d.dir), "--iface", hosts.if1)
    assert r.returncode == 0, r.stderr
    assert f"not running (stale status from PID {d.proc.pid})" in r.stdout
    d2 = daemon_factory(HOLD, "after-kill")
    assert d2.proc.stdout is not None
    first = d2.proc.stdout.readline()
    assert "removed the rate limiters a stopped daemon left behind" in first, first
    assert kernel_rates(hosts) == []
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d2.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    assert kernel_rates(hosts) == [expected_kernel_rate(d2.params, [63])]


def test_foreign_qdisc_refused_in_one_line(hosts: Hosts) -> None:
    tc = ["ip", "netns", "exec", hosts.h1, "tc", "qdisc"]
    subprocess.run([*tc, "add", "dev", hosts.if1, "root", "handle", "9:", "tbf", "rate",
                    "50mbit", "burst", "20k", "latency", "50ms"], check=True)  # fmt: skip
    try:
        r = qcn_in(hosts.h1, "rp", "start", "--iface", hosts.if1, "--status-dir",
                   str(hosts.tmp / "foreign"))  # fmt: skip
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1
        assert "already has a root qdisc (tbf 9:)" in r.stderr
        assert "--replace-qdisc" in r.stderr
        shown = subprocess.run(
            [*tc, "show", "dev", hosts.if1], capture_output=True, text=True, check=True
        )
        assert "qdisc tbf 9:" in shown.stdout
    finally:
        subprocess.run([*tc, "del", "dev", hosts.if1, "root"], check=False)


def test_missing_interface_is_one_line(hosts: Hosts) -> None:
    status_dir = hosts.tmp / "never" / "created"
    r = qcn_in(hosts.h1, "rp", "start", "--iface", "typo0", "--status-dir", str(status_dir))
    assert r.returncode == 2
    assert r.stderr == "qcn: error: cannot start on typo0: no interface named typo0\n"


def test_interface_deleted_under_the_daemon(daemon_factory: Any, hosts: Hosts) -> None:
    run("ip", "-n", hosts.h1, "link", "add", "gone-a", "type", "veth", "peer", "name", "gone-b")
    run("ip", "-n", hosts.h1, "link", "set", "gone-a", "up")
    d = daemon_factory(HOLD, "gone", iface="gone-a")
    run("ip", "-n", hosts.h1, "link", "del", "gone-a")
    assert d.proc.wait(10) == 2
    out = d.output()
    assert "qcn: error: gone-a disappeared while the daemon ran" in out
    assert "Traceback" not in out


def test_a_link_flap_is_weather(daemon_factory: Any, hosts: Hosts) -> None:
    """The link goes down and up under a daemon holding a limiter: it says so, keeps the
    limiter, and a CNM once the link is back cuts the rate exactly as before (a link flap
    used to end the daemon, and all throttling, with a traceback)."""
    d = daemon_factory(HOLD, "flap")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    run("ip", "-n", hosts.h1, "link", "set", hosts.if1, "down")
    try:
        assert d.wait(lambda s: s["counters"].get("link_down") == 1), d.output()
        assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63])]
    finally:
        run("ip", "-n", hosts.h1, "link", "set", hosts.if1, "up")
        # Down flushed h1's neighbours, static ones too: a CNM about h2 is about a
        # destination h1 has not resolved (dropped, counted) until ARP resolves it again.
        run(*f"ip -n {hosts.h1} neigh replace {H2_IP} lladdr {H2_MAC} dev {hosts.if1}".split(),
            "nud", "permanent")  # fmt: skip

    def accepted_after_the_flap() -> bool:
        send_frames(hosts.h2, hosts.if2, [cnm(20)])  # until the veth's carrier is back
        return bool(d.wait(lambda s: s["counters"].get("cnms_accepted", 0) >= 2, timeout_s=0.2))

    assert wait_until(accepted_after_the_flap, 10.0, interval_s=0.0), d.counters()
    accepted = d.counters()["cnms_accepted"]
    assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63] + [20] * (accepted - 1))]
    assert d.proc.poll() is None
    # The carrier lost (the peer's end down, then up): the daemon stays and still acts.
    run("ip", "-n", hosts.h2, "link", "set", hosts.if2, "down")
    assert wait_until(lambda: "NO-CARRIER" in link_state(hosts), 5.0)
    run("ip", "-n", hosts.h2, "link", "set", hosts.if2, "up")
    assert wait_until(lambda: "NO-CARRIER" not in link_state(hosts), 5.0)

    def accepted_after_the_carrier() -> bool:
        send_frames(hosts.h2, hosts.if2, [cnm(20)])
        return bool(d.wait(lambda s: s["counters"]["cnms_accepted"] > accepted, timeout_s=0.2))

    assert wait_until(accepted_after_the_carrier, 10.0, interval_s=0.0), d.counters()
    assert d.proc.poll() is None


def test_socket_overflow_is_counted(daemon_factory: Any, hosts: Hosts) -> None:
    d = daemon_factory(HOLD, "overflow")
    flood = [cnm(20, encap_da=STRANGER_MAC)] * 4000
    d.proc.send_signal(signal.SIGSTOP)  # the daemon reads nothing: the socket fills
    try:
        send_frames(hosts.h2, hosts.if2, flood)
    finally:
        d.proc.send_signal(signal.SIGCONT)

    def accounted(s: dict[str, Any]) -> bool:
        c = s["counters"]
        return bool(c.get("dropped_unknown_destination", 0) + c["kernel_socket_drops"] == 4000)

    assert d.wait(accounted), d.counters()
    assert d.counters()["kernel_socket_drops"] > 0
    r = qcn_in(hosts.h1, "rp", "status", "--status-dir", str(d.dir))
    assert "kernel_socket_drops" in r.stdout


def test_send_through_a_slow_limiter_stops_on_time(hosts: Hosts) -> None:
    tc = ["ip", "netns", "exec", hosts.h1, "tc", "qdisc"]
    subprocess.run([*tc, "add", "dev", hosts.if1, "root", "handle", "9:", "tbf", "rate",
                    "2mbit", "burst", "10k", "latency", "20s"], check=True)  # fmt: skip
    try:
        began = time.monotonic()
        r = qcn_in(hosts.h1, "rp", "send", "--dst", H2_IP, "--rate-bps", "50e6", "--duration", "1")
        took = time.monotonic() - began
    finally:
        subprocess.run([*tc, "del", "dev", hosts.if1, "root"], check=False)
    assert r.returncode == 0, r.stderr
    assert took < 4, took  # the old source blocked ~11 s behind the limiter
    elapsed = float(r.stdout.split(" in ")[1].split(" s ")[0])
    assert 0.9 <= elapsed <= 1.5, r.stdout


# -- the daemon and the PAUSE agent on one interface ---------------------------------------
# One gate at the root, installed by whichever starts first (qcn.reaction_point.pause); each
# keeps working whatever the other does, and a restart recovers what a dead one left.


class Agent:
    """A PAUSE agent on h1's interface; ``notices``: what it said before it was ready."""

    def __init__(self, hosts: Hosts, line_rate_mbps: float = 100) -> None:
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", hosts.h1, sys.executable, "-m", "qcn.reaction_point.pause",
             hosts.if1, "--line-rate-mbps", str(line_rate_mbps)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.notices: list[str] = []
        for line in self.proc.stdout:
            if "honouring" in line:
                return
            self.notices.append(line)
        raise AssertionError(f"the agent did not start: {self.notices}")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


def gate_held(hosts: Hosts) -> bool | None:
    """Whether h1's gate holds (None: there is no gate)."""
    with NetNS(hosts.h1) as ns:
        found = find_gate(ns, ns.link_lookup(ifname=hosts.if1)[0])
    return None if found is None else found.held


def pause(hosts: Hosts, quanta: int) -> None:
    send_frames(hosts.h2, hosts.if2, [pause_frame(H2_MAC, quanta)])


def ping(hosts: Hosts) -> bool:
    """Whether h1 reaches h2: all of three pings answered (a held gate passes at most
    the frame at its head, docs/pause.md: a bucket of one full frame)."""
    r = subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-s", "1400",
         H2_IP],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "3 received" in r.stdout


def qdiscs(hosts: Hosts) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", hosts.h1, "tc", "qdisc", "show", "dev", hosts.if1],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def assert_nothing_left(hosts: Hosts) -> None:
    shown = qdiscs(hosts)
    for kind in ("tbf", "htb", "pfifo"):
        assert kind not in shown, shown
    assert ping(hosts)


@pytest.mark.parametrize("first", ["daemon", "agent"])
@pytest.mark.parametrize("stops_first", ["daemon", "agent"])
def test_daemon_and_agent_in_any_start_and_stop_order(
    daemon_factory: Any, hosts: Hosts, first: str, stops_first: str
) -> None:
    """Both run on one interface: a CNM sets its limiter and a PAUSE holds the host, in
    either start order; the first to stop leaves the other working (the agent's stop used
    to remove the daemon's tree, and the daemon's next CNM then killed it); the last leaves
    nothing behind."""
    # At 1 Mb/s a PAUSE of 0xFFFF quanta holds for 33 s: until the PAUSE of 0.
    agent = Agent(hosts, line_rate_mbps=1) if first == "agent" else None
    d = daemon_factory(HOLD, f"both-{first}-{stops_first}")
    agent = agent or Agent(hosts, line_rate_mbps=1)
    try:
        assert agent.notices == []
        send_frames(hosts.h2, hosts.if2, [cnm(63)])
        assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
        assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63])]
        pause(hosts, 0xFFFF)
        assert wait_until(lambda: gate_held(hosts) is True, 5.0)
        pause(hosts, 0)
        assert wait_until(lambda: gate_held(hosts) is False, 5.0)
        if stops_first == "agent":
            assert agent.stop() == 0
            assert gate_held(hosts) is False  # passes all, the tree still under it
            send_frames(hosts.h2, hosts.if2, [cnm(20)])
            assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 2)
            assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63, 20])]
            assert d.proc.poll() is None
            assert ping(hosts)
        else:
            assert d.stop() == 0
            assert kernel_rates(hosts) == []
            assert "pfifo 5151: parent 5150:1" in qdiscs(hosts)
            pause(hosts, 0xFFFF)
            assert wait_until(lambda: gate_held(hosts) is True, 5.0)
            assert not ping(hosts)
            pause(hosts, 0)
            assert wait_until(lambda: gate_held(hosts) is False, 5.0)
            assert agent.proc.poll() is None
    finally:
        agent.stop()
        d.stop()
    assert_nothing_left(hosts)


def test_an_agent_killed_while_holding_is_lifted_by_the_daemon(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """kill -9 of the agent in a hold used to block the interface for good: the live
    daemon lifts the hold within a second or two, and a new agent starts cleanly."""
    d = daemon_factory(HOLD, "agent-killed")
    agent = Agent(hosts, line_rate_mbps=1)  # 0xFFFF quanta: a 33 s hold
    pause(hosts, 0xFFFF)
    assert wait_until(lambda: gate_held(hosts) is True, 5.0)
    agent.proc.kill()
    agent.stop()
    assert d.wait(lambda s: s["counters"].get("orphaned_pause_holds_lifted") == 1, 5.0)
    assert gate_held(hosts) is False
    assert ping(hosts)
    again = Agent(hosts)
    assert again.notices == []
    assert again.stop() == 0
    assert d.stop() == 0
    assert_nothing_left(hosts)


def test_a_hold_left_by_a_dead_agent_is_lifted_on_start(daemon_factory: Any, hosts: Hosts) -> None:
    """With no daemon running, a hold a killed agent left is lifted by the next daemon (it
    used to start under it without a word, pings 100 % lost) or the next agent."""
    for successor in ("daemon", "agent"):
        agent = Agent(hosts, line_rate_mbps=1)
        pause(hosts, 0xFFFF)
        assert wait_until(lambda: gate_held(hosts) is True, 5.0)
        agent.proc.kill()
        agent.stop()
        assert not ping(hosts)
        if successor == "daemon":
            d = daemon_factory(HOLD, "after-held")
            assert gate_held(hosts) is False
            assert ping(hosts)
            assert d.stop() == 0
            assert "lifted the PAUSE hold a stopped agent left" in d.output()
        else:
            again = Agent(hosts)
            assert gate_held(hosts) is False
            assert ping(hosts)
            assert "took over the PAUSE gate a stopped agent left held" in "".join(again.notices)
            assert again.stop() == 0
        assert_nothing_left(hosts)


def test_the_agent_survives_a_link_flap_and_a_carrier_loss(hosts: Hosts) -> None:
    """Link down and up under the agent, then the peer gone and back (no carrier): it
    stays, and a PAUSE afterwards still holds."""
    agent = Agent(hosts, line_rate_mbps=1)
    try:
        for ns, iface in ((hosts.h1, hosts.if1), (hosts.h2, hosts.if2)):
            run("ip", "-n", ns, "link", "set", iface, "down")
            assert wait_until(lambda: "state UP" not in link_state(hosts), 5.0)
            run("ip", "-n", ns, "link", "set", iface, "up")
            assert wait_until(lambda: "state UP" in link_state(hosts), 5.0)
        run(*f"ip -n {hosts.h1} neigh replace {H2_IP} lladdr {H2_MAC} dev {hosts.if1}".split(),
            "nud", "permanent")  # fmt: skip

        def held_after_a_pause() -> bool:
            pause(hosts, 0xFFFF)  # until the agent reads frames again
            return gate_held(hosts) is True

        assert wait_until(held_after_a_pause, 10.0)
        assert agent.proc.poll() is None
        pause(hosts, 0)
        assert wait_until(lambda: gate_held(hosts) is False, 5.0)
    finally:
        assert agent.stop() == 0
    assert_nothing_left(hosts)


def test_the_agent_stops_in_one_line_when_its_interface_is_deleted_in_a_hold(
    hosts: Hosts,
) -> None:
    run("ip", "-n", hosts.h1, "link", "add", "gone-p", "type", "veth", "peer", "name", "gone-q")
    for end in ("gone-p", "gone-q"):
        run("ip", "-n", hosts.h1, "link", "set", end, "up")
    agent = subprocess.Popen(
        ["ip", "netns", "exec", hosts.h1, sys.executable, "-m", "qcn.reaction_point.pause",
         "gone-p", "--line-rate-mbps", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert agent.stdout is not None
    assert "honouring" in agent.stdout.readline()
    send_frames(hosts.h1, "gone-q", [pause_frame("02:00:00:00:99:02", 0xFFFF)])  # 33 s
    with NetNS(hosts.h1) as ns:
        index = ns.link_lookup(ifname="gone-p")[0]
        assert wait_until(lambda: (g := find_gate(ns, index)) is not None and g.held, 5.0)
    run("ip", "-n", hosts.h1, "link", "del", "gone-p")
    _, stderr = agent.communicate(timeout=10)
    assert agent.returncode == 1, stderr
    assert stderr.splitlines() == ["pause agent: gone-p disappeared; stopped"], stderr


def test_ctrl_c_while_the_daemon_starts_leaves_no_tree(hosts: Hosts) -> None:
    """The interrupt lands after the tree is installed, before the daemon serves."""
    probe = (
        "import sys\n"
        "from qcn.reaction_point.tc import HtbLimiters\n"
        "def interrupted(self): raise KeyboardInterrupt\n"
        "HtbLimiters.warm_up = interrupted\n"
        "from qcn.cli import main as cli\n"
        f"sys.exit(cli.main(['rp', 'start', '--iface', '{hosts.if1}', '--status-dir', "
        f"'{hosts.tmp / 'ctrl-c'}']))\n"
    )
    r = subprocess.run(["ip", "netns", "exec", hosts.h1, sys.executable, "-c", probe],
                       capture_output=True, text=True, check=False, timeout=30)  # fmt: skip
    assert r.returncode == 130, r.stderr
    assert_nothing_left(hosts)


def test_daemons_in_two_namespaces_on_one_interface_name_keep_two_statuses(
    hosts: Hosts,
) -> None:
    """They used to share one status file, so `qcn rp status` showed whichever wrote last."""
    status_dir = hosts.tmp / "two-ns"
    procs = []
    try:
        for ns in (hosts.h1, hosts.h2):
            run("ip", "-n", ns, "link", "add", "same0", "type", "veth", "peer", "name", "same0p")
            for end in ("same0", "same0p"):
                run("ip", "-n", ns, "link", "set", end, "up")
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-m", "qcn", "rp", "start",
                 "--iface", "same0", "--status-dir", str(status_dir)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
        assert wait_until(lambda: len(status_files(status_dir, "same0")) == 2, 10.0)
        r = qcn_in(hosts.h1, "rp", "status", "--status-dir", str(status_dir))
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("same0 in netns ") == 2, r.stdout
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
        for ns in (hosts.h1, hosts.h2):
            subprocess.run(["ip", "-n", ns, "link", "del", "same0"], check=False)


def link_state(hosts: Hosts) -> str:
    return subprocess.run(["ip", "-n", hosts.h1, "link", "show", hosts.if1],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


def test_a_daemon_killed_under_a_live_agent(daemon_factory: Any, hosts: Hosts) -> None:
    """kill -9 of the daemon: the agent still holds on a PAUSE; the next daemon replaces
    the dead one's tree and works; both stopped leave nothing."""
    agent = Agent(hosts)
    try:
        d = daemon_factory(HOLD, "daemon-killed")
        send_frames(hosts.h2, hosts.if2, [cnm(63)])
        assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
        d.proc.kill()
        d.proc.wait(5)
        pause(hosts, 0xFFFF)
        assert wait_until(lambda: gate_held(hosts) is True, 5.0)
        pause(hosts, 0)
        assert wait_until(lambda: gate_held(hosts) is False, 5.0)
        d2 = daemon_factory(HOLD, "daemon-after-kill")
        assert kernel_rates(hosts) == []
        send_frames(hosts.h2, hosts.if2, [cnm(63)])
        assert d2.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
        assert kernel_rates(hosts) == [expected_kernel_rate(d2.params, [63])]
        assert d2.stop() == 0
        assert "removed the rate limiters a stopped daemon left behind" in d2.output()
        assert agent.proc.poll() is None
    finally:
        assert agent.stop() == 0
    assert_nothing_left(hosts)


# -- fuzzing (last: its daemon lives for the rest of the module) -------------------------


def to_cnp_port(payload: bytes, src: str = H2_IP) -> bytes:
    """A frame from h2 carrying ``payload`` to h1's UDP port 4791, from ``src``."""
    return bytes(
        Ether(dst=H1_MAC, src=H2_MAC)
        / IP(src=src, dst=H1_IP)
        / UDP(sport=5001, dport=ROCEV2_UDP_PORT)
        / Raw(payload)
    )


cnp_port_frames = st.one_of(
    # Anything but a CNP's 32 bytes with the CNP opcode.
    st.binary(max_size=100)
    .filter(lambda p: len(p) != CNP_PAYLOAD_BYTES or p[0] != BTH_OPCODE_CNP)
    .map(to_cnp_port),
    st.builds(lambda op, qp: cnp(qp=qp, opcode=op), st.integers(0, 0x80), st.integers(0, 1 << 20)),
    st.builds(lambda qp: cnp(qp=qp, src="10.0.0.99"), st.integers(0, 1 << 20)),
)


@pytest.fixture
def cnp_fuzz_daemon(daemon_factory: Any) -> Daemon:
    """One daemon for all of a fuzz test's examples, stopped after it (the CNM fuzz test's
    daemon, below, lives to the module's end)."""
    d: Daemon = daemon_factory(DCQCN_HOLD, "fuzz-cnp")
    return d


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(cnp_port_frames, min_size=10, max_size=40))
def test_fuzzed_cnps_never_crash_or_change_a_rate(
    cnp_fuzz_daemon: Daemon, hosts: Hosts, frames: list[bytes]
) -> None:
    """What reaches port 4791 and is no CNP of a known destination is counted, each one,
    and changes no rate."""
    d = cnp_fuzz_daemon

    def dropped(s: dict[str, Any]) -> int:
        return sum(v for k, v in s["counters"].items() if k.startswith("dropped_cnp_"))

    status = d.status()
    assert status is not None
    before = dropped(status)
    send_frames(hosts.h2, hosts.if2, frames)
    assert d.wait(lambda s: dropped(s) >= before + len(frames)), (d.counters(), d.output())
    assert d.proc.poll() is None
    assert d.counters().get("cnps_accepted", 0) == 0
    assert kernel_rates(hosts) == []


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


# -- the daemon's own files -----------------------------------------------------------------


def open_csvs(pid: int) -> int:
    """How many CSV files process ``pid`` holds open."""
    fds = Path(f"/proc/{pid}/fd")
    return sum(1 for fd in fds.iterdir() if os.readlink(fd).endswith(".csv"))


def test_per_flow_csvs_never_exhaust_the_file_limit(daemon_factory: Any, hosts: Hosts) -> None:
    """300 flow limiters with --csv-dir under a file limit of 128: a daemon keeping one CSV
    open per limiter died of EMFILE near the limit (at ~1,006 under ulimit -n 1024, the
    default --max-limiters being 1,024); its files now stay within a fixed budget."""
    flows = 300
    d = daemon_factory(HOLD, "nofile", "--per-flow", nofile=128)
    send_frames(hosts.h2, hosts.if2, [cnm(20, sport=10_000 + i) for i in range(flows)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == flows, 30.0), d.output()
    assert open_csvs(d.proc.pid) <= MAX_OPEN_CSVS
    assert d.counters()["csv_write_errors"] == 0
    assert d.stop() == 0
    files = list(d.dir.glob(f"rp-{hosts.if1}-*.csv"))
    assert len(files) == flows
    assert all(len(f.read_text().splitlines()) >= 2 for f in files)  # header and a row
    assert kernel_rates(hosts) == []


def test_a_full_disk_under_the_csvs_is_counted_and_teardown_runs(hosts: Hosts) -> None:
    """--csv-dir on a full file system (a 64 KB tmpfs in the daemon's own mount namespace):
    the failures are counted and said once, the daemon serves on, and its stop removes its
    tree (close() used to raise from a CSV's flush first, leaving HTB and the gate)."""
    status_dir, full = hosts.tmp / "full-status", hosts.tmp / "full-csv"
    full.mkdir()
    params = hosts.tmp / "full.toml"
    QcnParams.from_dict({"rp": HOLD}).save(params)
    script = (
        f"mount -t tmpfs -o size=64k qcn-full {full} && exec {sys.executable} -m qcn rp "
        f"start --iface {hosts.if1} --per-flow --params {params} --status-dir {status_dir} "
        f"--csv-dir {full}"
    )
    proc = subprocess.Popen(
        ["ip", "netns", "exec", hosts.h1, "unshare", "-m", "sh", "-c", script],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def status() -> dict[str, Any]:
        files = status_files(status_dir, hosts.if1)
        try:
            return dict(json.loads(files[0].read_text())) if files else {}
        except (OSError, ValueError):
            return {}

    try:
        assert wait_until(lambda: status().get("running") is True, 10.0)
        flows = 200
        send_frames(hosts.h2, hosts.if2, [cnm(20, sport=20_000 + i) for i in range(flows)])
        assert wait_until(
            lambda: (
                status().get("counters", {}).get("cnms_accepted") == flows
                and status()["counters"]["csv_write_errors"] > 0
            ),
            30.0,
        ), status()
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert err.count("cannot write the limiter CSVs") == 1, err
    assert status()["counters"]["csv_write_errors"] > 0
    assert_nothing_left(hosts)
    assert not list(full.iterdir())  # (the tmpfs went with the daemon's mount namespace)


# -- the tree under someone else's hands ----------------------------------------------------


def test_a_deleted_root_qdisc_is_rebuilt_with_its_limiters(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """tc qdisc del dev IF root took every limiter, and the daemon died at its next rate
    change with "(2, 'No such file or directory')": it now rebuilds the tree, each limiter
    at its current rate, says so, and serves on."""
    d = daemon_factory(HOLD, "deleted-root")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    run("ip", "netns", "exec", hosts.h1, "tc", "qdisc", "del", "dev", hosts.if1, "root")
    assert d.wait(lambda s: s["counters"].get("tree_rebuilt") == 1), d.output()
    assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63])]
    send_frames(hosts.h2, hosts.if2, [cnm(20)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 2), d.output()
    assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63, 20])]
    # Deleted again, and a CNM about a new limiter before the daemon looks: the same.
    run("ip", "netns", "exec", hosts.h1, "tc", "qdisc", "del", "dev", hosts.if1, "root")
    send_frames(hosts.h2, hosts.if2, [cnm(20)])
    assert d.wait(lambda s: s["counters"].get("tree_rebuilt") == 2), d.output()
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 3), d.output()
    assert d.stop() == 0
    out = d.output()
    assert out.count("someone deleted the root qdisc; rebuilt the tree and its 1 limiter") == 2
    assert "Traceback" not in out
    assert_nothing_left(hosts)


def test_a_root_qdisc_replaced_by_someone_stops_the_daemon_in_one_line(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """Someone's qdisc where the tree was is theirs: the daemon stops in one line and leaves
    it as it is (as a foreign root qdisc is refused at start)."""
    d = daemon_factory(HOLD, "replaced-root")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    tc = ["ip", "netns", "exec", hosts.h1, "tc", "qdisc"]
    run(*tc, "replace", "dev", hosts.if1, "root", "handle", "7:", "pfifo")
    try:
        assert d.proc.wait(10) == 2
        out = d.output()
        assert "Traceback" not in out
        assert (
            f"qcn: error: {hosts.if1}: someone replaced the daemon's root qdisc with theirs "
            "(pfifo 7:); its 1 limiter(s) went with it; stopped" in out
        ), out
        assert "qdisc pfifo 7: root" in qdiscs(hosts)
    finally:
        subprocess.run([*tc, "del", "dev", hosts.if1, "root"], check=False)
    assert_nothing_left(hosts)


def test_the_status_encodes_only_the_rows_that_changed() -> None:
    """The status file is build_status's report, its limiters' entries encoded again only
    when their row changed (encoding every one each time held the GIL for ~20 ms at 2,047
    limiters, and CNMs waited behind it)."""
    head = {"iface": "h1-eth0", "pid": 1, "running": True, "latency_p99_ms": None}
    rows = [(f"10.0.0.1:{p}-10.0.0.2:5001/17", 5e7, 9e7, 5e7, "FR", 1, 0, p) for p in range(5)]
    encoder = StatusEncoder()
    first = StatusSnapshot(head, rows)
    assert json.loads(encoder.encode(first)) == build_status(first)
    changed = [*rows[:4], (*rows[4][:7], 99)]
    calls: list[tuple[object, ...]] = []
    real = StatusEncoder._entry

    def counting(row: tuple[object, ...]) -> str:
        calls.append(row)
        return real(row)

    encoder._entry = counting  # type: ignore[method-assign]
    again = StatusSnapshot(head, changed)
    assert json.loads(encoder.encode(again)) == build_status(again)
    assert calls == [changed[4]]
    assert json.loads(StatusEncoder().encode(StatusSnapshot(head, [])))["limiters"] == []


# -- one owner per interface, whatever its name ---------------------------------------------


def test_an_altname_is_one_interface_for_daemons_and_agents(
    daemon_factory: Any, hosts: Hosts
) -> None:
    """The claim is keyed on what the interface is (its index), not the name it was given:
    a second daemon on an altname used to take the live tree for a dead daemon's and remove
    it (both then died, the host left unlimited), as did a PAUSE agent on the altname."""
    alt = f"qcnalt{os.getpid() % 100000}"
    d = daemon_factory(HOLD, "alt-owner", "--per-flow")
    send_frames(hosts.h2, hosts.if2, [cnm(63)])
    assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 1)
    run("ip", "-n", hosts.h1, "link", "property", "add", "dev", hosts.if1, "altname", alt)
    agent: subprocess.Popen[str] | None = None
    try:
        r = qcn_in(hosts.h1, "rp", "start", "--iface", alt, "--per-flow", "--status-dir",
                   str(hosts.tmp / "alt-second"))  # fmt: skip
        assert r.returncode == 2
        assert r.stderr == (
            f"qcn: error: cannot start on {alt}: a reaction-point daemon already serves {alt} "
            f"(interface index {ifindex(hosts)}, by this or another of its names; qcn rp "
            "status); stop it first\n"
        )
        # One agent given both names is told they are one interface.
        both = subprocess.run(
            ["ip", "netns", "exec", hosts.h1, sys.executable, "-m", "qcn.reaction_point.pause",
             hosts.if1, alt, "--line-rate-mbps", "100"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert both.returncode == 2
        assert f"{hosts.if1} and {alt} are one interface" in both.stderr
        # A PAUSE agent on the altname finds the daemon alive and keeps its tree.
        agent = subprocess.Popen(
            ["ip", "netns", "exec", hosts.h1, sys.executable, "-m", "qcn.reaction_point.pause",
             alt, "--line-rate-mbps", "100"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert agent.stdout is not None
        ready = agent.stdout.readline()
        assert ready.startswith("pause agent: honouring PAUSE on"), ready
        assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63])]
        # A second agent on the first name is the same interface's second agent.
        second = subprocess.run(
            ["ip", "netns", "exec", hosts.h1, sys.executable, "-m", "qcn.reaction_point.pause",
             hosts.if1, "--line-rate-mbps", "100"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1, second.stderr
        assert "another PAUSE agent already honours PAUSE on" in second.stderr
        assert d.proc.poll() is None
        send_frames(hosts.h2, hosts.if2, [cnm(20)])
        assert d.wait(lambda s: s["counters"].get("cnms_accepted") == 2)
        assert kernel_rates(hosts) == [expected_kernel_rate(d.params, [63, 20])]
    finally:
        if agent is not None:
            agent.send_signal(signal.SIGINT)
            agent.communicate(timeout=10)
        run("ip", "-n", hosts.h1, "link", "property", "del", "dev", hosts.if1, "altname", alt)
    assert d.stop() == 0
    assert_nothing_left(hosts)


def test_a_renamed_interface_keeps_its_one_daemon(daemon_factory: Any, hosts: Hosts) -> None:
    """After a rename, a daemon on the new name is the interface's second: refused."""
    run("ip", "-n", hosts.h1, "link", "add", "ren-a", "type", "veth", "peer", "name", "ren-b")
    try:
        run("ip", "-n", hosts.h1, "link", "set", "ren-a", "up")
        d = daemon_factory(HOLD, "renamed", iface="ren-a")
        run("ip", "-n", hosts.h1, "link", "set", "ren-a", "down")
        run("ip", "-n", hosts.h1, "link", "set", "ren-a", "name", "ren-c")
        run("ip", "-n", hosts.h1, "link", "set", "ren-c", "up")
        r = qcn_in(hosts.h1, "rp", "start", "--iface", "ren-c", "--status-dir",
                   str(hosts.tmp / "renamed-second"))  # fmt: skip
        assert r.returncode == 2
        assert r.stderr.count("\n") == 1, r.stderr
        assert "a reaction-point daemon already serves ren-c" in r.stderr
        assert d.proc.poll() is None
        assert d.stop() == 0
    finally:
        for name in ("ren-a", "ren-c"):
            subprocess.run(["ip", "-n", hosts.h1, "link", "del", name], capture_output=True,
                           check=False)  # fmt: skip


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


def test_a_second_daemon_on_the_interface_is_refused(fuzz_daemon: Daemon, hosts: Hosts) -> None:
    r = qcn_in(hosts.h1, "rp", "start", "--iface", hosts.if1, "--status-dir", str(fuzz_daemon.dir))
    assert r.returncode == 2
    assert r.stderr == (
        f"qcn: error: cannot start on {hosts.if1}: a reaction-point daemon already serves "
        f"{hosts.if1} (interface index {ifindex(hosts)}, by this or another of its names; "
        "qcn rp status); stop it first\n"
    )
    status = fuzz_daemon.status()
    assert status is not None
    assert status["running"] is True  # its status file untouched
    assert fuzz_daemon.proc.poll() is None
