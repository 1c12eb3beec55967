"""The Mininet backend's own logic: the sink's counting (over loopback UDP) and how a
recording becomes a Trace."""

from __future__ import annotations

import array
import fcntl
import socket
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from qcn.core import scenario as scenarios
from qcn.reaction_point.sources import ETH_IP_UDP_HEADERS, SEQUENCE
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.experiment import StreamExperiment
from qcn.topologies.sink import RECEIVE_BUFFER_BYTES, Sink
from qcn.topologies.testbed import CAPTURE_PIPE_BYTES, widen_pipe
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
