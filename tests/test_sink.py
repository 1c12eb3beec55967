"""The Mininet backend's own logic: the sink's counting (over loopback UDP), the receivers'
notification point (DCQCN's CNPs for CE-marked frames, over loopback), and how a recording
becomes a Trace."""

from __future__ import annotations

import array
import fcntl
import json
import shutil
import socket
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import UDP

from qcn.core import scenario as scenarios
from qcn.core.ecmp import ECN_CE, ECN_ECT0
from qcn.core.flows import FLOW_HEADER
from qcn.core.frames import cnp_packet, parse_cnp
from qcn.reaction_point.sources import ETH_IP_UDP_HEADERS, SEQUENCE
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.experiment import FlowsExperiment, StreamExperiment
from qcn.topologies.flow_receiver import FlowReceiver
from qcn.topologies.sink import RECEIVE_BUFFER_BYTES, NotificationPoint, Sink
from qcn.topologies.testbed import CAPTURE_PIPE_BYTES, widen_pipe
from tests.kit import assert_one_line_error, qcn
from tests.toolchain import requires_root


def test_sink_counts_losses_from_sequence_gaps() -> None:
    sink = Sink(port=0)
    port = sink.sock.getsockname()[1]
    payload = bytearray(100)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for seq in (0, 1, 3, 4, 8, 7):  # 2, 5 and 6 lost; 7 arrives late (reordered)
            SEQUENCE.pack_into(payload, 0, seq)
            tx.sendto(payload, ("127.0.0.1", port))

    def all_in() -> bool:
        sink.drain()
        return sum(c[0] for c in sink.counts.values()) == 6

    assert wait_until(all_in, 2.0, interval_s=0.01)
    frames, nbytes, lost = sink.counts["127.0.0.1"]
    assert frames == 6
    assert nbytes == 6 * (100 + ETH_IP_UDP_HEADERS)
    # Counted lost when the gap is seen (2, then 5-7), and 7 un-lost when it arrives late.
    assert lost == 3
    sink.sock.close()


@requires_root()
def test_the_sink_buffers_past_rmem_max_as_root() -> None:
    """A sink kept waiting keeps what arrived meanwhile: its buffer is 256 MB even where
    net.core.rmem_max is the kernel's default (the kernel reports twice what was set)."""
    rmem_max = Path("/proc/sys/net/core/rmem_max")
    saved = rmem_max.read_text()
    rmem_max.write_text("212992")
    try:
        sink = Sink(port=0)
        got = sink.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        sink.sock.close()
    finally:
        rmem_max.write_text(saved)
    assert got == 2 * RECEIVE_BUFFER_BYTES


def unread_bytes(fd: int) -> int:
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting)
    return waiting[0]


@pytest.mark.parametrize("widened", [True, False])
def test_a_sink_the_runner_does_not_read_keeps_reporting(widened: bool) -> None:
    """The runner reads the sink's reports when it gets the CPU, seconds late on a busy
    machine; meanwhile the sink must not block on its full pipe (its reports would stop).
    Ten sources make its lines as long as a run's; a widened pipe takes 512 KiB unread, and
    the default one stops the sink at 64 KiB, in a write."""
    sink = subprocess.Popen(
        [sys.executable, "-m", "qcn.topologies.sink", "--port", "0", "--interval", "0.001"],
        stdout=subprocess.PIPE,
    )
    try:
        assert sink.stdout is not None
        fd = sink.stdout.fileno()
        if widened:
            assert widen_pipe(fd) == CAPTURE_PIPE_BYTES
        sink.stdout.readline()  # ready
        port = _sink_port(sink.pid)
        for i in range(1, 11):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
                tx.bind((f"127.0.0.{i}", 0))
                tx.sendto(bytes(SEQUENCE.size), ("127.0.0.1", port))
        if widened:
            # (a pipe of small writes fills to ~96 % of its size: half is far past 64 KiB)
            half = CAPTURE_PIPE_BYTES // 2
            assert wait_until(lambda: unread_bytes(fd) >= half, 60.0, interval_s=0.05)
        else:

            def blocked() -> bool:
                return Path(f"/proc/{sink.pid}/wchan").read_text().endswith("pipe_write")

            assert wait_until(blocked, 60.0, interval_s=0.05)
            assert unread_bytes(fd) <= 65536
    finally:
        sink.kill()
        sink.wait()


def _sink_port(pid: int) -> int:
    """The UDP port process ``pid`` (a sink on --port 0) listens on."""
    inodes = {
        link.readlink().name[len("socket:[") : -1]
        for link in Path(f"/proc/{pid}/fd").iterdir()
        if link.readlink().name.startswith("socket:[")
    }
    for line in Path(f"/proc/{pid}/net/udp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            return int(fields[1].split(":")[1], 16)
    raise AssertionError("the sink listens on no UDP port")


def test_a_mininet_recording_becomes_a_trace_on_the_sample_grid(tmp_path: Path) -> None:
    sc = scenarios.load("transient").with_overrides(
        {"duration_s": 0.03, "network.sources": 2, "schedule": []}
    )
    run = StreamExperiment(sc, tmp_path, sample_hz=100.0, seed=1)  # 10 ms grid, 3 samples
    t0 = 1000.0
    rec = run.rec
    rec.start = t0
    rec.queue = [(t0 + 0.004, 5), (t0 + 0.012, 7), (t0 + 0.025, 9)]
    rec.capacity = [(t0, 10e9)]
    # Cumulative per-source counts [frames, bytes, lost] as the sink reports them.
    rec.sinks["h3"] = [
        (t0 + 0.009, {"10.0.0.1": [1, 1500, 0]}),
        (t0 + 0.019, {"10.0.0.1": [3, 4500, 0], "10.0.0.2": [1, 1500, 2]}),
        (t0 + 0.029, {"10.0.0.1": [3, 4500, 0], "10.0.0.2": [2, 3000, 2]}),
    ]
    rec.limiter_rows = {0: [(t0 + 0.015, 5e9, 8e9)], 1: []}
    tr = run.trace()
    assert tr.times_s == pytest.approx([0.01, 0.02, 0.03])
    assert tr.queue_pkts == [5, 7, 9]
    bps = 8 * 1500 / 0.01
    assert tr.source_throughput_bps == [[bps, 0.0], [2 * bps, bps], [0.0, bps]]
    assert tr.throughput_bps == [bps, 3 * bps, bps]
    line = sc.network.line_rate_bps
    assert [row[0] for row in tr.source_current_rate_bps] == [
        line,
        5e9,
        5e9,
    ]  # no limiter: line rate
    assert [row[0] for row in tr.source_target_rate_bps] == [line, 8e9, 8e9]
    assert tr.drops_so_far == [0, 2, 2]
    assert tr.drops == 2
    assert tr.frames_in == 5 + 2


def test_a_multihop_recording_counts_what_the_hot_spot_lost(tmp_path: Path) -> None:
    """Throughput from switch-port counters; drops = sent into s1 - left s2 - still queued."""
    from qcn.topologies.iperf import IperfExperiment  # noqa: PLC0415

    sc = scenarios.load("tcp-multihop").with_overrides(
        {
            "duration_s": 0.03,
            "network.sources": 1,
            "network.innocent_sources": 1,
            "workload.hotspot_start_s": 0.0,
            "workload.hotspot_duration_s": 0.0,
        }
    )
    run = IperfExperiment(sc, tmp_path, sample_hz=100.0, seed=1)
    t0 = 1000.0
    run.rec.start = t0
    run.rec.queue = [(t0 + 0.005, 2), (t0 + 0.015, 1), (t0 + 0.025, 0)]
    run.rec.capacity = [(t0, 1.75e9)]

    def ports(hot_in: int, innocent_in: int, hot_out: int, innocent_out: int) -> dict[str, int]:
        counts = {"s1-eth1:rx": hot_in, "s1-eth2:rx": innocent_in}
        counts |= {"s2-eth1:tx": hot_out, "s2-eth2:tx": innocent_out}
        return {f"{k}_{u}": n * (1500 if u == "bytes" else 1) for k, n in counts.items()
                for u in ("packets", "bytes")}  # fmt: skip

    for t, values in [
        (t0, ports(0, 0, 0, 0)),
        (t0 + 0.009, ports(10, 5, 7, 5)),
        (t0 + 0.019, ports(20, 10, 16, 10)),
        (t0 + 0.029, ports(20, 10, 17, 10)),
        (t0 + 0.040, ports(20, 10, 17, 10)),  # after the drain
    ]:
        run.counters.add(t, values)
    tr = run.trace()
    frame_bps = 8 * 1500 / 0.01
    assert tr.source_throughput_bps == [
        [10 * frame_bps, 5 * frame_bps],
        [10 * frame_bps, 5 * frame_bps],
        [0.0, 0.0],
    ]
    assert tr.throughput_bps == [7 * frame_bps, 9 * frame_bps, 1 * frame_bps]
    # Sent - delivered - queued: 10-7-2, 20-16-1, 20-17-0; a drop stays a drop.
    assert tr.drops_so_far == [1, 3, 3]
    assert (tr.drops, tr.frames_in) == (3, 20)
    assert tr.extra["hotspot_throughput_bps"] == pytest.approx(17 * frame_bps / 3)
    assert tr.extra["innocent_throughput_bps"] == pytest.approx(10 * frame_bps / 3)
    assert tr.extra["innocent_ideal_bps"] == sc.workload.max_rate_bps


# -- DCQCN's notification point (loopback; the CNPs to a port of the test's own) --------------


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cnp_listener() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.settimeout(5.0)
        yield sock


def send_marked(port: int, frames: int, *, tos: int = ECN_CE, flow: int | None = None) -> int:
    """``frames`` datagrams to ``port`` with the TOS byte ``tos`` (a flow's header if
    ``flow`` is given, else a sequence number); returns the UDP port they came from."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        tx.bind(("127.0.0.1", 0))
        for i in range(frames):
            payload = FLOW_HEADER.pack(flow, i, 100 * 1500, 0) if flow is not None else bytes(100)
            tx.sendto(payload, ("127.0.0.1", port))
        return int(tx.getsockname()[1])


def drained(drain: Callable[[], None], counts: dict[str, list[int]], frames: int) -> None:
    def all_in() -> bool:
        drain()
        return sum(c[0] for c in counts.values()) >= frames

    assert wait_until(all_in, 5.0, interval_s=0.005)


def expected_cnp(listener: socket.socket, data_port: int, qp: int) -> bytes:
    """The CNP's UDP payload the test's listener gets (its port is in the ICRC)."""
    packet = cnp_packet("127.0.0.1", "127.0.0.1", data_port, qp, listener.getsockname()[1])
    return bytes(packet[UDP].payload)


@requires_root()  # (the notification point's raw socket)
def test_the_sink_answers_ce_with_one_cnp_per_interval(cnp_listener: socket.socket) -> None:
    clock = Clock()
    sink = Sink(port=0)
    port = sink.sock.getsockname()[1]
    np = sink.notification = NotificationPoint(
        sink.sock, 0.010, cnp_port=cnp_listener.getsockname()[1], clock=clock
    )
    try:
        sport = send_marked(port, 5)  # five marked frames at one moment: one CNP
        send_marked(port, 3, tos=ECN_ECT0)  # ECN-capable, not marked: none
        drained(sink.drain, sink.counts, 8)
        cnp, (ip, from_port) = cnp_listener.recvfrom(100)
        assert (ip, from_port) == ("127.0.0.1", port)  # from the data port
        assert cnp == expected_cnp(cnp_listener, port, sport)
        assert parse_cnp(cnp) == sport  # the QP: the data's source port
        assert np.report() == {"ce": {"127.0.0.1": 5}, "cnp": {"127.0.0.1": 1}, "cnp_errors": 0}
        clock.now += 0.009  # within the interval: none
        send_marked(port, 1)
        drained(sink.drain, sink.counts, 9)
        clock.now += 0.002  # the interval over: one more
        sport = send_marked(port, 2)
        drained(sink.drain, sink.counts, 11)
        cnp = cnp_listener.recv(100)
        assert parse_cnp(cnp) == sport
        assert np.report() == {"ce": {"127.0.0.1": 8}, "cnp": {"127.0.0.1": 2}, "cnp_errors": 0}
        assert sink.counts["127.0.0.1"][0] == 11
    finally:
        sink.sock.close()
        np.close()


@requires_root()
def test_the_flow_receiver_notifies_each_flow_on_its_own(
    cnp_listener: socket.socket, tmp_path: Path
) -> None:
    clock = Clock()
    with (tmp_path / "flows.jsonl").open("w") as log:
        receiver = FlowReceiver(0, 1500, log, clock=clock, cnp_interval_s=0.050)
        np = receiver.notification
        assert np is not None
        np.cnp_port = cnp_listener.getsockname()[1]
        port = receiver.sock.getsockname()[1]
        try:
            sports = [send_marked(port, 3, flow=flow) for flow in (7, 8)]
            send_marked(port, 2, flow=9, tos=ECN_ECT0)
            drained(receiver.drain, receiver.counts, 8)
            qps = sorted(parse_cnp(cnp_listener.recv(100)) for _ in sports)
            assert qps == sorted(sports)  # one CNP per marked flow, each naming its own
            assert np.report() == {"ce": {"127.0.0.1": 6}, "cnp": {"127.0.0.1": 2}, "cnp_errors": 0}
            assert set(np.last_sent) == {("127.0.0.1", 7), ("127.0.0.1", 8)}
        finally:
            receiver.sock.close()
            np.close()


def test_a_receiver_without_the_option_reads_no_tos_and_says_nothing_new() -> None:
    sink = Sink(port=0)
    try:
        assert sink.notification is None
        assert sink.sock.getsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS) == 0
        send_marked(sink.sock.getsockname()[1], 2)
        drained(sink.drain, sink.counts, 2)
    finally:
        sink.sock.close()


@requires_root()
def test_the_receivers_lines_add_the_notification_points_counts() -> None:
    """`qcn sink --cnp-interval`: its lines say, per source, the frames that came marked and
    the CNPs sent; old readers take "t" and "rx" as before."""
    sink = subprocess.Popen(
        [sys.executable, "-m", "qcn", "sink", "--port", "0", "--interval", "0.05",
         "--cnp-interval", "0.001"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert sink.stdout is not None
    try:
        first = json.loads(sink.stdout.readline())
        assert (first["rx"], first["ce"], first["cnp"], first["cnp_errors"]) == ({}, {}, {}, 0)
    finally:
        sink.terminate()
        sink.communicate(timeout=10)
    assert sink.returncode == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("sink", "--cnp-interval", "-1"), "--cnp-interval must be in [0, 60] seconds (got -1)"),
        (("sink", "--cnp-interval", "nan"), "--cnp-interval must be in [0, 60] seconds"),
    ],
)
def test_a_wrong_cnp_interval_is_one_line(args: tuple[str, ...], expected: str) -> None:
    assert_one_line_error(qcn(*args), expected)


def test_the_flow_receiver_refuses_a_notification_point_over_tcp(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "qcn.topologies.flow_receiver", "--log", str(tmp_path / "log"),
         "--transport", "tcp", "--cnp-interval", "0.001"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "flow receiver: error: --cnp-interval answers datagrams (--transport frames); TCP has "
        "its own ECN"
    ]


@requires_root()  # (to become nobody)
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
def test_a_notification_point_without_root_is_one_line() -> None:
    r = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-m", "qcn", "sink", "--port", "0", "--cnp-interval", "0.001"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert_one_line_error(r, "--cnp-interval needs root: CNPs leave by a raw socket")


def test_a_dcqcn_runs_receivers_are_its_notification_points(tmp_path: Path) -> None:
    """The Mininet runs' receivers take --cnp-interval (rp.dcqcn.cnp_interval_s) where the
    scheme is dcqcn and the reaction points run; TCP flows and other schemes none."""
    quick = {"duration_s": 0.03, "schedule": []}
    dcqcn = {**quick, "qcn_preset": "dcqcn", "qcn.rp.dcqcn.cnp_interval_s": 0.0002}
    stream = scenarios.load("transient").with_overrides({**dcqcn, "network.sources": 2})
    flows = scenarios.load("fct").with_overrides(dcqcn)
    tcp = scenarios.load("fct").with_overrides({**dcqcn, "workload.transport": "tcp"})
    qcn = scenarios.load("transient").with_overrides({**quick, "network.sources": 2})

    def args(
        kind: type[StreamExperiment], sc: scenarios.Scenario, *, qcn: bool = True
    ) -> list[str]:
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        run = kind(sc, out, qcn=qcn, sample_hz=100.0, seed=1)
        (host,) = run.destinations()[:1]
        return [a for a in run.sink_command(host) if a.startswith("--cnp-interval")]

    assert args(StreamExperiment, stream) == ["--cnp-interval=0.0002"]
    assert args(FlowsExperiment, flows) == ["--cnp-interval=0.0002"]
    assert args(FlowsExperiment, tcp) == []
    assert args(StreamExperiment, qcn) == []
    assert args(StreamExperiment, stream, qcn=False) == []


@requires_root()
def test_a_cnp_that_cannot_go_is_counted_not_raised() -> None:
    sink = Sink(port=0, cnp_interval_s=0.0)
    np = sink.notification
    assert np is not None
    try:
        np.raw.close()  # every send fails from here on
        send_marked(sink.sock.getsockname()[1], 2)
        drained(sink.drain, sink.counts, 2)
        assert np.report() == {"ce": {"127.0.0.1": 2}, "cnp": {}, "cnp_errors": 2}
    finally:
        sink.sock.close()
