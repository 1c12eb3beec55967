"""`qcn ctl` against a real simple_switch_grpc (skipped without the toolchain or root).

The switch runs in a namespace of its own with three veth-attached ports; every controller
command runs as a user would type it (``qcn ctl ...``) inside that namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.core.ecmp import ECN_ECT0
from qcn.core.frames import pause_seconds
from qcn.topologies.bmv2 import Bmv2Config, Bmv2Process, wait_until
from qcn.topologies.errors import Bmv2Error
from qcn.topologies.netns import VethEnd, add_veth, namespaces, send_frames, without_ipv6
from tests.kit import PACE_PPS, Link, paced_silence
from tests.toolchain import requires_p4lang, requires_root

pytestmark = [requires_p4lang(), requires_root()]

ROOT = Path(__file__).resolve().parent.parent
HOST_MAC = ["00:00:00:00:00:01", "00:00:00:00:00:02", "00:00:00:00:00:03"]


@dataclass
class Lab:
    ns: str
    config: Path
    switch: Bmv2Process

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                self.ns,
                sys.executable,
                "-m",
                "qcn",
                "ctl",
                "-c",
                str(self.config),
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    def show(self) -> dict[int, Any]:
        ports = json.loads(self.ctl("show", "--json").stdout)["s1"]
        return {p["port"]: p for p in ports}


NETWORK = """
[qcn]
q_eq_pkts = 22
queue_unit = "packets"

[[switch]]
name = "s1"
grpc = "127.0.0.1:{grpc}"
device_id = 1
thrift_port = {thrift}
cp_mac = "02:00:00:00:01:00"
p4info = "{build}/qcn_cp.p4info.txtpb"
bmv2_json = "{build}/qcn_cp.json"

[[switch.port]]
port = 0
edge = true

[[switch.port]]
port = 1
edge = true

[[switch.port]]
port = 2
cp = true
qcn = {{ p_base = 1.0, p_scale = 0.0 }}

[[host]]
name = "h0"
mac = "{mac0}"
switch = "s1"
port = 0

[[host]]
name = "h1"
mac = "{mac1}"
switch = "s1"
port = 1

[[host]]
name = "h2"
mac = "{mac2}"
switch = "s1"
port = 2
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    subprocess.run(["make", "-s", "-C", str(ROOT), "build"], check=True)
    tmp = tmp_path_factory.mktemp("ctl")
    ns = f"qcnctl{os.getpid() % 100000}"
    switch = Bmv2Process(
        Bmv2Config(
            ports={i: f"sw{i}" for i in range(3)},
            log_file=tmp / "switch.log",
            grpc_port=21051,
            thrift_port=9091,
            netns=ns,
        )
    )
    with namespaces(ns):
        without_ipv6(ns)
        for i in range(3):
            add_veth(VethEnd(ns, f"sw{i}"), VethEnd(ns, f"h{i}", HOST_MAC[i]))
        config = tmp / "network.toml"
        config.write_text(
            NETWORK.format(
                grpc=21051,
                thrift=9091,
                build=ROOT / "build",
                mac0=HOST_MAC[0],
                mac1=HOST_MAC[1],
                mac2=HOST_MAC[2],
            )
        )
        try:
            switch.start()
            yield Lab(ns, config, switch)
        finally:
            switch.stop()


def frames(n: int, dst: int = 2) -> list[bytes]:
    return [
        bytes(
            Ether(src=HOST_MAC[0], dst=HOST_MAC[dst])
            / IP(src="10.0.0.1", dst="10.0.0.3", id=i)
            / UDP(sport=1, dport=2)
            / bytes(200)
        )
        for i in range(n)
    ]


def wait_for(cond: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    return wait_until(cond, timeout_s)


def test_bring_up_is_idempotent_and_reads_back(lab: Lab) -> None:
    first = lab.ctl("up").stdout
    assert "s1: up" in first
    again = lab.ctl("up").stdout
    assert "(0 inserted, 0 modified, 0 deleted)" in again
    ports = lab.show()
    assert ports[0]["cp"] is None
    assert ports[1]["cp"] is None
    cp = ports[2]["cp"]
    assert (cp["q_eq_pkts"], cp["w"], cp["p_base"], cp["p_scale"]) == (22, 2.0, 1.0, 0.0)
    assert cp["sampling"] == "bernoulli"
    assert (cp["depth_at"], cp["queue_unit"]) == ("arrival", "packets")
    assert ports[2]["cpid"] == "0x0200000001000002"
    assert ports[2]["queue_pkts"] == 0  # the pipeline's count of the CP port's queue
    table = lab.ctl("show").stdout  # the same, for people
    assert "tail drops" in table
    assert "q_eq_pkts=22 w=2 bern arr" in table


def test_sampling_mode_change_reads_back(lab: Lab) -> None:
    lab.ctl("up")
    out = lab.ctl("set", "s1", "2", "--sampling", "byte-interval").stdout
    assert "sampling=byte-interval" in out
    assert lab.show()[2]["cp"]["sampling"] == "byte-interval"
    lab.ctl("set", "s1", "2", "--sampling", "bernoulli")
    assert lab.show()[2]["cp"]["sampling"] == "bernoulli"


def test_depth_source_change_reads_back(lab: Lab) -> None:
    """Arrival -> dequeue moves the port's entries to the egress CP, and back."""
    lab.ctl("up")
    assert "depth_at=dequeue" in lab.ctl("set", "s1", "2", "--depth-at", "dequeue").stdout
    cp = lab.show()[2]["cp"]
    assert (cp["depth_at"], cp["sampling"], cp["q_eq_pkts"]) == ("dequeue", "bernoulli", 22)
    before = lab.show()[2]["counters"]
    send_frames(lab.ns, "h0", frames(10), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"] + 10)
    lab.ctl("set", "s1", "2", "--depth-at", "arrival", "--queue-unit", "bytes")
    cp = lab.show()[2]["cp"]
    assert (cp["depth_at"], cp["queue_unit"], cp["q_eq_pkts"]) == ("arrival", "bytes", 22)
    send_frames(lab.ns, "h0", frames(10), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"] + 20)


def test_bytes_need_the_arrival_cp(lab: Lab) -> None:
    lab.ctl("up")
    r = lab.ctl("set", "s1", "2", "--depth-at", "enqueue", "--queue-unit", "bytes", check=False)
    assert r.returncode != 0
    assert "bytes need depth_at = arrival" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_feedback_mode_change_reads_back(lab: Lab) -> None:
    lab.ctl("up")
    assert "feedback=ecm" in lab.ctl("set", "s1", "2", "--feedback", "ecm").stdout
    cp = lab.show()[2]["cp"]
    assert (cp["positive_feedback"], cp["q_eq_pkts"]) == (True, 22)
    lab.ctl("set", "s1", "2", "--feedback", "qcn")
    assert lab.show()[2]["cp"]["positive_feedback"] is False


def ect_frames(n: int) -> list[bytes]:
    """frames(n), ECN-capable (ECT(0))."""
    return [
        bytes(
            Ether(src=HOST_MAC[0], dst=HOST_MAC[2])
            / IP(src="10.0.0.1", dst="10.0.0.3", id=i, tos=ECN_ECT0)
            / UDP(sport=1, dport=2)
            / bytes(200)
        )
        for i in range(n)
    ]


def test_signal_change_reads_back_and_marks_instead_of_sampling(lab: Lab) -> None:
    """`qcn ctl set --signal ecn` with a curve: read back as set; frames queued behind
    others are marked CE and none is sampled (the port samples every frame as configured,
    p_base = 1); back to cnm, the port samples as its network file says again."""
    lab.ctl("up")
    out = lab.ctl(
        "set", "s1", "2", "--signal", "ecn", "--kmin-bytes", "0", "--kmax-bytes", "1",
        "--pmax", "0.25",
    ).stdout  # fmt: skip
    assert "signal=ecn kmin_bytes=0 kmax_bytes=1 pmax=0.25" in out
    cp = lab.show()[2]["cp"]
    assert (cp["signal"], cp["kmin_bytes"], cp["kmax_bytes"], cp["pmax"]) == ("ecn", 0, 1, 0.25)
    assert " ecn" in lab.ctl("show").stdout
    lab.ctl("queue", "s1", "2", "--rate-pps", "200")
    try:
        before = lab.show()[2]["counters"]
        send_frames(lab.ns, "h0", ect_frames(30), gap_s=0.0005)
        assert wait_for(lambda: lab.show()[2]["counters"]["cp_frames"] == before["cp_frames"] + 30)
        after = lab.show()[2]["counters"]
        # Every frame that found another queued ahead of it (all but the first few).
        assert after["ecn_marks"] - before["ecn_marks"] >= 20
        assert (after["cp_samples"], after["cp_cnms"]) == (before["cp_samples"], before["cp_cnms"])
    finally:
        lab.ctl("queue", "s1", "2", "--rate-pps", "0")
    lab.ctl("set", "s1", "2", "--signal", "cnm")
    cp = lab.show()[2]["cp"]
    assert (cp["signal"], cp["p_base"]) == ("cnm", 1.0)
    before = lab.show()[2]["counters"]
    send_frames(lab.ns, "h0", ect_frames(10), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"] + 10)
    assert lab.show()[2]["counters"]["ecn_marks"] == before["ecn_marks"]


def test_the_departure_cp_hands_a_port_to_ecn_marking_and_takes_it_back(lab: Lab) -> None:
    """One `qcn ctl set` moves a port from the departure CP to ECN marking (the arrival CP's
    entries, then the curve), and one back (the curve gone first): each reads back whole."""
    lab.ctl("up")
    lab.ctl("set", "s1", "2", "--depth-at", "dequeue", "--judge", "admitted")
    lab.ctl(
        "set", "s1", "2", "--depth-at", "arrival", "--signal", "ecn", "--kmin-bytes", "0",
        "--kmax-bytes", "1",
    )  # fmt: skip
    cp = lab.show()[2]["cp"]
    assert (cp["depth_at"], cp["signal"], cp["kmax_bytes"]) == ("arrival", "ecn", 1)
    lab.ctl("set", "s1", "2", "--depth-at", "dequeue", "--signal", "cnm")
    cp = lab.show()[2]["cp"]
    assert (cp["depth_at"], cp["signal"], cp["p_base"]) == ("dequeue", "cnm", 1.0)
    before = lab.show()[2]["counters"]
    send_frames(lab.ns, "h0", ect_frames(10), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"] + 10)
    assert lab.show()[2]["counters"]["ecn_marks"] == before["ecn_marks"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--signal", "ecn", "--depth-at", "dequeue"), "cp.signal: ECN marking reads"),
        (("--kmin-bytes", "5000", "--kmax-bytes", "4000"), "cp.kmax_bytes: must be"),
        (("--signal", "ecn", "--pmax", "1.5"), "cp.pmax: must be in [0, 1]"),
    ],
)
def test_a_bad_signal_or_curve_is_one_line_and_applies_nothing(
    lab: Lab, args: tuple[str, ...], message: str
) -> None:
    lab.ctl("up")
    before = lab.show()[2]["cp"]
    r = lab.ctl("set", "s1", "2", *args, check=False)
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert lab.show()[2]["cp"] == before


def test_counters_increase_with_traffic(lab: Lab) -> None:
    lab.ctl("up")
    before = lab.show()[2]["counters"]
    send_frames(lab.ns, "h0", frames(25), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_frames"] == before["cp_frames"] + 25)
    after = lab.show()[2]["counters"]
    assert after["cp_samples"] - before["cp_samples"] == 25  # p_base = 1


def test_live_change_takes_effect_in_data_plane(lab: Lab) -> None:
    lab.ctl("up")
    out = lab.ctl("set", "s1", "2", "--p-base", "0", "--q-eq-pkts", "30").stdout
    assert "q_eq_pkts=30" in out
    assert lab.show()[2]["cp"]["q_eq_pkts"] == 30
    before = lab.show()[2]["counters"]
    send_frames(lab.ns, "h0", frames(20), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_frames"] == before["cp_frames"] + 20)
    assert lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"]  # P = 0 now
    lab.ctl("set", "s1", "2", "--p-base", "1")
    send_frames(lab.ns, "h0", frames(10), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_samples"] == before["cp_samples"] + 10)


def test_invalid_change_applies_nothing(lab: Lab) -> None:
    lab.ctl("up")
    before = lab.show()[2]["cp"]
    r = lab.ctl("set", "s1", "2", "--q-eq-pkts", "40", "--p-base", "2", check=False)
    assert r.returncode == 2
    assert "cp.p_base: must be in [0, 1]" in r.stderr
    assert "Traceback" not in r.stderr
    assert lab.show()[2]["cp"] == before
    r = lab.ctl("set", "s1", "0", "--q-eq-pkts", "10", check=False)
    assert r.returncode == 2
    assert "runs no CP" in r.stderr


def test_three_point_set_live_on_host_ports_reads_back_and_reflects(lab: Lab) -> None:
    lab.ctl("up")
    out = lab.ctl("set", "s1", "1", "--three-point", "on", "--reflect-p0", "1").stdout
    assert "three-point p0=1 " in out
    lab.ctl("set", "s1", "0", "--three-point", "on")
    shown = lab.show()
    assert shown[1]["edge"] == {
        "three_point": True,
        "reflect_p0": 1.0,
        "reflect_p_base": 1.0,
        "reflect_p_scale": 0.0,
    }
    before = shown[1]["counters"]["p0_reflections"]
    # h0's frames are tagged at port 0 and every one is reflected at port 1 (P0 = 1).
    send_frames(lab.ns, "h0", frames(10, dst=1), gap_s=0.0005)
    assert wait_for(lambda: lab.show()[1]["counters"]["p0_reflections"] == before + 10)
    lab.ctl("set", "s1", "1", "--three-point", "off")
    lab.ctl("set", "s1", "0", "--three-point", "off")
    assert lab.show()[1]["edge"] == {"three_point": False}
    # Two-point again: no tag, no reflection (one frame through the CP port marks the end).
    cp_frames = lab.show()[2]["counters"]["cp_frames"]
    send_frames(lab.ns, "h0", [*frames(10, dst=1), *frames(1)], gap_s=0.0005)
    assert wait_for(lambda: lab.show()[2]["counters"]["cp_frames"] == cp_frames + 1)
    assert lab.show()[1]["counters"]["p0_reflections"] == before + 10
    r = lab.ctl("set", "s1", "1", "--reflect-p0", "0.5", check=False)
    assert r.returncode == 2
    assert "three-point mode only" in r.stderr


def holder(lab: Lab, *args: str) -> subprocess.Popen[str]:
    """Another controller holding s1 (tests.hold_primary), "primary" once it is."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", lab.ns, sys.executable, "-m", "tests.hold_primary", *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "primary"
    return proc


def test_another_controllers_switch_is_not_written_by_a_shell(lab: Lab) -> None:
    """A controller above this network's election ids (the file's + TAKE_OVER_SPAN) owns
    the switch: a shell's write is told "not primary" in one line; reads work beside it."""
    from qcn.controller.agent import TAKE_OVER_SPAN  # noqa: PLC0415

    lab.ctl("up")
    other = holder(lab, "127.0.0.1:21051", str(10 + TAKE_OVER_SPAN))
    try:
        started = time.monotonic()
        r = lab.ctl("--timeout", "5", "set", "s1", "2", "--q-eq-pkts", "25", check=False)
        assert time.monotonic() - started < 10  # an answer, not a hang
        assert r.returncode == 2
        assert "not primary" in r.stderr
        # Reads need no primacy: `show` works beside the other controller.
        assert lab.show()[2]["cp"]["q_eq_pkts"] != 25
    finally:
        other.communicate(input="", timeout=10)


def test_a_shell_writes_beside_the_networks_own_controller_which_then_writes_again(
    lab: Lab,
) -> None:
    """A live run holds its switches at the network file's election id, and `qcn ctl set`
    from a shell reads the same file: the shell outbids it for its write and hands the
    switch back (P4Runtime: the highest election id is primary), every time."""
    lab.ctl("up")
    run = holder(lab, "--agent", str(lab.config), "s1")
    assert run.stdin is not None
    assert run.stdout is not None
    try:
        for q_eq in (25, 26):  # twice: the holder's id rose to the first shell's
            lab.ctl("--timeout", "5", "set", "s1", "2", "--q-eq-pkts", str(q_eq))
            assert lab.show()[2]["cp"]["q_eq_pkts"] == q_eq
            run.stdin.write(f"2 {q_eq + 10}\n")
            run.stdin.flush()
            assert run.stdout.readline().strip() == "ok"  # primary again
            assert lab.show()[2]["cp"]["q_eq_pkts"] == q_eq + 10
    finally:
        run.communicate(input="", timeout=10)
        lab.ctl("set", "s1", "2", "--q-eq-pkts", "22")


def test_queue_shaping_builds_a_queue_the_cp_sees(lab: Lab) -> None:
    lab.ctl("up")
    lab.ctl("set", "s1", "2", "--p-base", "1", "--q-eq-pkts", "22")
    lab.ctl("queue", "s1", "2", "--rate-pps", "200", "--depth-pkts", "100")
    try:
        before = lab.show()[2]["counters"]["cp_cnms"]
        send_frames(lab.ns, "h0", frames(60), gap_s=0.0005)
        assert wait_for(lambda: lab.show()[2]["counters"]["cp_cnms"] > before, timeout_s=10)
    finally:
        lab.ctl("queue", "s1", "2", "--rate-pps", "0")


def test_pause_set_live_reads_back_and_pauses(lab: Lab) -> None:
    lab.ctl("up")
    watermarks = {
        "hi_bytes": 3000,
        "lo_bytes": 1000,
        "partition_bytes": 100_000,
        "pause_quanta": 100,
        "refresh_us": 10_000_000,
    }
    flags = [x for k, v in watermarks.items() for x in ("--" + k.replace("_", "-"), str(v))]
    assert "PAUSE hi_bytes=3000" in lab.ctl("pause", "s1", "0", *flags).stdout
    assert lab.show()[0]["pause"] == watermarks
    assert "3/1" in lab.ctl("show").stdout  # hi/lo KB in the table
    lab.ctl("queue", "s1", "2", "--rate-pps", "100")
    try:
        send_frames(lab.ns, "h0", frames(20))  # 242 bytes each: past hi at the 13th
        # One PAUSE as the input passes hi, one of 0 once it drains below lo.
        assert wait_for(lambda: lab.show()[0]["counters"]["pause_sent"] == 2, timeout_s=10)
    finally:
        lab.ctl("queue", "s1", "2", "--rate-pps", "0")
    lab.ctl("pause", "s1", "0", "--off")
    assert lab.show()[0]["pause"] is None
    bad = lab.ctl("pause", "s1", "0", "--hi-bytes", "10", check=False)
    assert bad.returncode == 2
    assert "give --lo-bytes, --partition-bytes, --pause-quanta, --refresh-us" in bad.stderr
    wrong = lab.ctl("pause", "s1", "0", *flags[:2], "--lo-bytes", "5000", *flags[4:], check=False)
    assert "0 <= lo < hi < partition" in wrong.stderr


def test_pause_and_the_fb_tag_push_share_the_input_port(lab: Lab) -> None:
    """One input_port entry holds both settings of a host port: each is set and cleared
    live without disturbing the other (p4src/control/input_port.p4)."""
    lab.ctl("up")
    watermarks = {
        "hi_bytes": 30_000,
        "lo_bytes": 10_000,
        "partition_bytes": 100_000,
        "pause_quanta": 100,
        "refresh_us": 10_000_000,
    }
    flags = [x for k, v in watermarks.items() for x in ("--" + k.replace("_", "-"), str(v))]
    lab.ctl("set", "s1", "1", "--three-point", "on", "--reflect-p0", "1")
    lab.ctl("pause", "s1", "0", *flags)
    lab.ctl("set", "s1", "0", "--three-point", "on")
    shown = lab.show()
    assert (shown[0]["pause"], shown[0]["edge"]["three_point"]) == (watermarks, True)
    reflected = shown[1]["counters"]["p0_reflections"]

    def tagged(n: int) -> bool:
        """n frames from h0 arrive at port 1 tagged: each is reflected there (P0 = 1)."""
        send_frames(lab.ns, "h0", frames(n, dst=1), gap_s=0.0005)
        return wait_for(lambda: lab.show()[1]["counters"]["p0_reflections"] == reflected + n)

    assert tagged(10)
    lab.ctl("pause", "s1", "0", "--off")
    shown = lab.show()
    assert (shown[0]["pause"], shown[0]["edge"]["three_point"]) == (None, True)
    reflected += 10
    assert tagged(10)
    lab.ctl("pause", "s1", "0", *flags)
    lab.ctl("set", "s1", "0", "--three-point", "off")
    shown = lab.show()
    assert (shown[0]["pause"], shown[0]["edge"]["three_point"]) == (watermarks, False)
    lab.ctl("pause", "s1", "0", "--off")
    lab.ctl("set", "s1", "1", "--three-point", "off")
    assert lab.show()[0]["pause"] is None


def test_a_switch_port_honours_pause(lab: Lab, tmp_path: Path) -> None:
    """A network file where port 2 honours PAUSE (`honour_pause_bps`, with the queue rate
    it needs) and h0's input is counted: frames from h0 cross BMv2 to port 2, and a PAUSE
    from h2 (counted and dropped) holds port 2 in the pipeline for its time."""
    text = lab.config.read_text()
    text = text.replace(
        "port = 0\nedge = true",
        "port = 0\nedge = true\npause = { hi_bytes = 10000000, lo_bytes = 5000000, "
        "partition_bytes = 20000000, pause_quanta = 1, refresh_us = 1000000 }",
        1,
    )
    text = text.replace(
        "port = 2\ncp = true",
        "port = 2\ncp = true\nqueue_rate_pps = 2000\nqueue_depth_pkts = 1000\n"
        "honour_pause_bps = 100000000",
        1,
    )
    honouring = Lab(lab.ns, tmp_path / "honouring.toml", lab.switch)
    honouring.config.write_text(text)
    honouring.ctl("up")
    try:
        before = honouring.show()[2]["counters"]
        port2 = Link(
            lab.ns, lab.ns, host_if="sw2", peer_if="h2", source_if="h0", frame_dst=HOST_MAC[2]
        )
        gap = paced_silence(port2, pauses=[0xFFFF])
        hold_s = pause_seconds(0xFFFF, 100e6)
        # Then the held frames' order costs at most a round of them: the frames paced in
        # meanwhile (PACE_PPS) going round at the port's 2000 frames/s (docs/pause.md).
        assert 0.9 * hold_s <= gap <= hold_s + hold_s * PACE_PPS / 2000 + 0.05, gap
        after = honouring.show()[2]["counters"]
        assert after["pause_received"] == before["pause_received"] + 1
        assert after["hold_rounds"] > before["hold_rounds"]
    finally:
        honouring.ctl("queue", "s1", "2", "--rate-pps", "0", "--depth-pkts", "64")
        lab.ctl("up")


def test_unreachable_switch_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "net.toml"
    config.write_text(
        '[[switch]]\nname = "s9"\ngrpc = "127.0.0.1:1"\n'
        f'p4info = "{ROOT}/build/qcn_cp.p4info.txtpb"\nbmv2_json = "{ROOT}/build/qcn_cp.json"\n'
    )
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "ctl", "-c", str(config), "--timeout", "2", "show"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert r.returncode == 2
    assert "127.0.0.1:1: connect failed" in r.stderr
    assert "Traceback" not in r.stderr


def test_switch_restart_restores_state(lab: Lab, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    with log.open("w") as out:
        holder = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                lab.ns,
                sys.executable,
                "-m",
                "qcn",
                "ctl",
                "-c",
                str(lab.config),
                "run",
                "--interval",
                "0.2",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        assert wait_for(lambda: log.read_text().count("s1: up") == 1, 15), log.read_text()
        lab.switch.stop()
        lab.switch.start()  # a fresh switch: no pipeline, no entries
        assert wait_for(lambda: log.read_text().count("s1: up") == 2, 30), log.read_text()
        cp = lab.show()[2]["cp"]
        assert cp is not None
        assert cp["q_eq_pkts"] == 22
    finally:
        holder.terminate()
        holder.wait(15)


def congested_cnms(lab: Lab, seconds: float = 3.0) -> list[bytes]:
    """CNMs h0 receives while a burst from h0 congests port 2 (200 pps service)."""
    cap = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            lab.ns,
            sys.executable,
            "-m",
            "qcn.topologies.rawframes",
            "capture",
            "h0",
            "--ethertype",
            "cnm",
            "--seconds",
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert cap.stdout is not None
    assert cap.stdout.readline().strip() == "ready"
    send_frames(lab.ns, "h0", frames(50), gap_s=0.0005)
    out, _ = cap.communicate(timeout=seconds + 10)
    return [bytes.fromhex(line) for line in out.split()]


def test_cnm_qntzfb_follows_live_q_eq_change(lab: Lab) -> None:
    lab.ctl("up")
    lab.ctl("set", "s1", "2", "--p-base", "1", "--q-eq-pkts", "40")
    lab.ctl("queue", "s1", "2", "--rate-pps", "200", "--depth-pkts", "100")
    try:
        high = congested_cnms(lab)
        lab.ctl("set", "s1", "2", "--q-eq-pkts", "5")
        low = congested_cnms(lab)
    finally:
        lab.ctl("queue", "s1", "2", "--rate-pps", "0")
        lab.ctl("set", "s1", "2", "--q-eq-pkts", "22")
    # CNM byte 15's low 6 bits: QntzFb; bytes 24-25: qoff = q - q_eq.
    q_eq_40 = [(c[15] & 0x3F, int.from_bytes(c[24:26], "big", signed=True)) for c in high]
    q_eq_5 = [(c[15] & 0x3F, int.from_bytes(c[24:26], "big", signed=True)) for c in low]
    assert q_eq_5, "a 50-frame burst into 200 pps congests a q_eq of 5"
    # The same burst congests a q_eq of 5 far more: more CNMs, and the switch's qoff
    # reports depths against the new q_eq (q = qoff + 5 never exceeds the burst).
    assert len(q_eq_5) > len(q_eq_40)
    assert max(q for q, _ in q_eq_5) > max((q for q, _ in q_eq_40), default=0)
    assert all(qoff + 5 <= 50 for _, qoff in q_eq_5)


def test_a_second_switch_on_a_taken_grpc_address_is_refused(lab: Lab, tmp_path: Path) -> None:
    """It would fail to bind while the controller programmed the switch already there."""
    second = Bmv2Process(
        Bmv2Config(
            ports={},
            log_file=tmp_path / "second.log",
            grpc_port=21051,
            thrift_port=9092,
            netns=lab.ns,
        )
    )
    with pytest.raises(Bmv2Error) as refused:
        second.start()
    assert not second.running
    assert lab.switch.running
    assert str(refused.value) == (
        f"the switch's gRPC port 127.0.0.1:21051 is taken (pid {lab.switch.pid}, "
        "simple_switch_g); a switch left by an earlier run? 'pgrep -a simple_switch_grpc' "
        "lists them"
    )


def test_a_port_held_by_an_outgoing_connection_is_said_with_its_holder(tmp_path: Path) -> None:
    """A connection's local port keeps a listener from binding it (a fat-tree's s18 could
    not bind 127.0.0.1:50068, then in Linux's range for outgoing connections): the switch is
    not started, and the line names the port and who holds it."""
    import socket  # noqa: PLC0415

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.socket()
    client.bind(("127.0.0.1", 0))
    client.connect(listener.getsockname())
    port = client.getsockname()[1]
    with listener, client:
        switch = Bmv2Process(
            Bmv2Config(ports={}, log_file=tmp_path / "s.log", grpc_port=port, thrift_port=9093)
        )
        with pytest.raises(Bmv2Error, match=rf"gRPC port 127\.0\.0\.1:{port} is taken \(pid "):
            switch.start()
        assert not switch.running
    assert (
        str(port)
        not in subprocess.run(
            ["pgrep", "-a", "simple_switch"], capture_output=True, text=True, check=False
        ).stdout
    )
