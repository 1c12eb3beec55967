"""The flows workload's sender and receiver on real sockets (docs/fct.md, "Transport"): two
network namespaces joined by a veth, the sender's side shaped by a real TBF whose small
queue drops frames, which the sender then sends again."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qcn.core.ecmp import TRAFFIC_TOS, flow_port
from qcn.core.flows import flow_frames
from qcn.reaction_point.flow_sender import FlowSender, HostFlow, write_host_flows
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.netns import VethEnd, add_veth, namespaces, sh
from tests.kit import small_disk
from tests.toolchain import requires_root

pytestmark = requires_root()

SENDER_IP, RECEIVER_IP = "10.77.0.1", "10.77.0.2"


@pytest.fixture
def pair() -> Iterator[tuple[str, str]]:
    tag = os.getpid() % 100000
    tx, rx = f"fts{tag}", f"ftr{tag}"
    with namespaces(tx, rx):
        add_veth(
            VethEnd(tx, "ft-s", address=f"{SENDER_IP}/24"),
            VethEnd(rx, "ft-r", address=f"{RECEIVER_IP}/24"),
        )
        yield tx, rx


def flows(n: int, seed: int, max_bytes: int, gap_s: float) -> list[HostFlow]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / gap_s)
        out.append(HostFlow(100 + i, t, rng.randint(1, max_bytes)))
    return out


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def in_ns(ns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", ns, sys.executable, "-m", *args]


def start_receiver(
    rx: str, log: Path, transport: str = "frames", extra: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """The receiver, reporting only when it stops (see :func:`stop`)."""
    command = in_ns(
        rx, "qcn.topologies.flow_receiver", "--log", str(log), "--interval", "1000",
        "--transport", transport, *extra,
    )  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert '"rx"' in proc.stdout.readline()
    return proc


def stop(proc: subprocess.Popen[str]) -> dict[str, list[int]]:
    """Stop the receiver; its last report: [frames, bytes, lost] per source address."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    rx: dict[str, list[int]] = json.loads(out.splitlines()[-1])["rx"]
    return rx


def send(
    tx: str,
    tmp: Path,
    host_flows: list[HostFlow],
    rto_s: float,
    transport: str = "frames",
    *,
    extra: tuple[str, ...] = (),
) -> Path:
    table, log = tmp / "flows.csv", tmp / "sender.jsonl"
    write_host_flows(table, host_flows)
    subprocess.run(
        in_ns(tx, "qcn.reaction_point.flow_sender", str(table), "--dst", RECEIVER_IP,
              "--rto", str(rto_s), "--log", str(log), "--transport", transport, *extra),
        check=True, timeout=60, capture_output=True,
    )  # fmt: skip
    return log


def test_acknowledgements_out_of_band_never_cross_the_link(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    """With --ack-dir/--ack-socket the receiver acknowledges through a Unix socket in the
    shared file system: the flows finish, nothing is sent again, and the link back carries
    no acknowledgement (docs/fct.md, "Transport")."""
    tx, rx = pair
    acks = tmp_path / "acks"
    acks.mkdir()
    host_flows = flows(20, seed=2, max_bytes=30_000, gap_s=0.01)
    back = sent_back(rx)
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl", extra=("--ack-dir", str(acks)))
    try:
        log = send(
            tx, tmp_path, host_flows, rto_s=0.5,
            extra=("--ack-socket", str(acks / f"{SENDER_IP}.sock")),
        )  # fmt: skip
    finally:
        stop(receiver)
    acked = {r["flow"]: r for r in lines(log) if "acked" in r}
    assert set(acked) == {f.flow_id for f in host_flows}
    assert all(r["retransmitted"] == 0 for r in acked.values())
    frames = sum(flow_frames(f.size_bytes, 1500)[0] for f in host_flows)
    assert sent_back(rx) - back < 0.05 * frames  # (ARP and the like; not one per frame)


def sent_back(rx: str) -> int:
    """Frames the receiver's side of the link has sent."""
    return link_frames(rx, "ft-r")


def link_frames(ns: str, dev: str) -> int:
    """Frames ``dev`` in ``ns`` has sent."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/statistics/tx_packets"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(out.stdout)


TCP_PER_FLOW = ("--tcp-connections", "per-flow")


@pytest.mark.parametrize("transport", ["frames", "tcp", "tcp per-flow"])
def test_every_flow_finishes_and_is_recorded_at_both_ends(
    pair: tuple[str, str], tmp_path: Path, transport: str
) -> None:
    tx, rx = pair
    host_flows = flows(20, seed=1, max_bytes=30_000, gap_s=0.01)
    kept = transport == "tcp"
    transport, _, per_flow = transport.partition(" ")
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl", transport)
    try:
        log = send(tx, tmp_path, host_flows, rto_s=0.5, transport=transport,
                   extra=TCP_PER_FLOW if per_flow else ())  # fmt: skip
    finally:
        stop(receiver)
    sent = lines(log)
    starts = {r["flow"]: r for r in sent if "start" in r}
    acked = {r["flow"]: r for r in sent if "acked" in r}
    finished = {r["flow"]: r for r in lines(tmp_path / "receiver.jsonl")}
    assert set(starts) == set(acked) == set(finished) == {f.flow_id for f in host_flows}
    for f in host_flows:
        assert starts[f.flow_id]["size"] == finished[f.flow_id]["size"] == f.size_bytes
        assert finished[f.flow_id]["src"] == SENDER_IP
        assert (
            starts[f.flow_id]["start"] < finished[f.flow_id]["finish"] <= acked[f.flow_id]["acked"]
        )
        assert acked[f.flow_id]["retransmitted"] == 0  # nothing is lost on a bare veth
    if not kept:
        # Each flow its own socket, so its own 5-tuple (the per-flow reaction point's key).
        assert len({r["sport"] for r in starts.values()}) == len(host_flows)
        return
    # Kept connections: flows 10 ms apart that finish in well under that reuse one, each
    # flow after the one before it on that connection has ended.
    assert sum("kept" in r for r in starts.values()) >= len(host_flows) // 2
    last: dict[int, str] = {}
    sport_of = {r["flow"]: r["sport"] for r in starts.values()}
    for r in sent:
        event = "start" if "start" in r else "end"
        assert last.get(sport_of[r["flow"]], "end") != event
        last[sport_of[r["flow"]]] = event


def test_kept_connections_spare_the_link_every_flows_handshake(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    """A flow on its own connection costs the link its SYN, handshake ACK, FIN and the ACK
    of the receiver's FIN besides its data (measured: 122 frames against 27), each a full
    frame's turn at a BMv2 port (docs/fct.md, "Real TCP"); on a kept connection, none."""
    tx, rx = pair
    host_flows = [HostFlow(i, 0.02 * i, 1000) for i in range(20)]  # a segment each
    sent = {}
    for mode, extra in (("kept", ()), ("per-flow", TCP_PER_FLOW)):
        before = link_frames(tx, "ft-s")
        receiver = start_receiver(rx, tmp_path / f"receiver-{mode}.jsonl", "tcp")
        try:
            send(tx, tmp_path, host_flows, rto_s=0.5, transport="tcp", extra=extra)
        finally:
            stop(receiver)
        sent[mode] = link_frames(tx, "ft-s") - before
    n = len(host_flows)
    assert sent["kept"] <= 2 * n + 3  # data, and at most an ACK of each answer
    assert sent["per-flow"] >= sent["kept"] + 2 * n


@pytest.mark.parametrize("transport", ["frames", "tcp"])
def test_what_a_full_queue_drops_is_sent_again_until_every_flow_finishes(
    pair: tuple[str, str], tmp_path: Path, transport: str
) -> None:
    tx, rx = pair
    # 5 Mb/s with room for two frames: concurrent flows overflow it, as a full buffer does.
    sh("ip", "netns", "exec", tx, "tc", "qdisc", "add", "dev", "ft-s", "root", "tbf",
       "rate", "5mbit", "burst", "3000", "limit", "3000")  # fmt: skip
    host_flows = flows(30, seed=2, max_bytes=20_000, gap_s=0.01)
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl", transport)
    try:
        log = send(tx, tmp_path, host_flows, rto_s=0.2, transport=transport)
    finally:
        received = stop(receiver)
    stats = subprocess.run(
        ["ip", "netns", "exec", tx, "tc", "-s", "qdisc", "show", "dev", "ft-s"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    dropped = int(stats.split("dropped ")[1].split(",")[0])
    acked = [r for r in lines(log) if "acked" in r]
    retransmitted = sum(r["retransmitted"] for r in acked)
    finished = lines(tmp_path / "receiver.jsonl")
    assert {r["flow"] for r in finished} == {f.flow_id for f in host_flows}
    assert len(acked) == len(host_flows)
    # Every drop is sent again (TCP's own count, from TCP_INFO, with tcp), unless it was
    # itself a copy sent after a late ACK (a busy machine): then the first copy arrived.
    assert dropped > 0
    assert retransmitted > 0
    if transport == "frames":
        # The receiver learns each loss from the copy that arrives: all of them, unless a
        # copy sent after a late ACK was dropped (its first copy had arrived).
        lost = received[SENDER_IP][2]
        assert 0.9 * dropped <= lost <= dropped
        frames = sum(flow_frames(f.size_bytes, 1500)[0] for f in host_flows)
        duplicates = sum(r["duplicates"] for r in finished)
        assert retransmitted - dropped <= duplicates + frames  # bounded: no storm


def test_an_interrupted_sender_keeps_every_record_it_wrote(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    tx, rx = pair
    host_flows = flows(200, seed=3, max_bytes=5_000, gap_s=0.02)  # about 4 s of flows
    table, log = tmp_path / "flows.csv", tmp_path / "sender.jsonl"
    write_host_flows(table, host_flows)
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl")
    command = in_ns(
        tx, "qcn.reaction_point.flow_sender", str(table), "--dst", RECEIVER_IP, "--log", str(log)
    )
    sender = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert sender.stdout is not None
        assert "flows" in sender.stdout.readline()
        assert wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= 20, 10)
        sender.send_signal(signal.SIGINT)
        assert sender.wait(10) == 0
    finally:
        if sender.poll() is None:
            sender.kill()
        stop(receiver)
    records = lines(log)  # every line whole
    started = {r["flow"] for r in records if "start" in r}
    ended = [r["flow"] for r in records if "acked" in r or "stopped" in r]
    assert 10 <= len(started) < len(host_flows)
    assert sorted(ended) == sorted(started)  # each started flow ends once: acked or stopped


@pytest.mark.parametrize("transport", ["frames", "tcp"])
def test_a_host_out_of_ports_makes_its_flows_wait(
    pair: tuple[str, str], tmp_path: Path, transport: str
) -> None:
    """Ten ephemeral ports and 60 flows due at once: the sender used to die of
    BlockingIOError in _start_due, most flows never started.  Datagram flows now send from
    their own ports (qcn.core.ecmp.flow_port, which per-flow ECMP hashes), none ephemeral;
    TCP connections take the kernel's, and a flow waits for one."""
    tx, rx = pair
    sh("ip", "netns", "exec", tx, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40009")
    host_flows = [HostFlow(i, 0.0, 200_000) for i in range(60)]
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl", transport)
    try:
        log = send(tx, tmp_path, host_flows, rto_s=0.5, transport=transport)
    finally:
        stop(receiver)
    acked = {r["flow"] for r in lines(log) if "acked" in r}
    assert acked == {f.flow_id for f in host_flows}
    ports = {r["flow"]: r["sport"] for r in lines(log) if "start" in r}
    if transport == "frames":
        assert ports == {f.flow_id: flow_port(f.flow_id) for f in host_flows}
    else:
        assert set(ports.values()) <= set(range(40000, 40010))
    assert {r["flow"] for r in lines(tmp_path / "receiver.jsonl")} == acked


def test_absurd_flags_add_no_losses(pair: tuple[str, str], tmp_path: Path) -> None:
    """One datagram with flags 0xffffff00 added 16.7 M to the receiver's lost count: bits no
    sender sets make it malformed (never acknowledged, its copies never counted)."""
    tx, rx = pair
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl")
    datagrams = [(1, 0, 100, 0xFFFFFF00), (1, 0, 100, 0xFF << 24), (2, 0, 100, 2 << 8)]
    script = (
        "import socket, struct\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"for d in {datagrams!r}:\n"
        f"    s.sendto(struct.pack('!IIII', *d), ('{RECEIVER_IP}', 5002))\n"
    )
    try:
        subprocess.run(["ip", "netns", "exec", tx, sys.executable, "-c", script], check=True)
        assert wait_until(lambda: (tmp_path / "receiver.jsonl").read_text().count("\n") == 1, 5)
    finally:
        received = stop(receiver)
    frames, _bytes, lost = received[SENDER_IP]
    assert (frames, lost) == (3, 2)  # the good one's two earlier copies, and nothing else
    assert [r["flow"] for r in lines(tmp_path / "receiver.jsonl")] == [2]


def test_a_full_disk_under_the_logs_is_one_line(pair: tuple[str, str], tmp_path: Path) -> None:
    tx, rx = pair
    with small_disk(tmp_path / "disk", full=True) as disk:
        # The receiver's log full: it stops at the flow's finish, in one line.
        receiver = subprocess.Popen(
            in_ns(rx, "qcn.topologies.flow_receiver", "--log", str(disk / "rx.jsonl")),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert receiver.stdout is not None
        assert '"rx"' in receiver.stdout.readline()
        send(tx, tmp_path, [HostFlow(1, 0.0, 3000)], rto_s=0.5)
        _, err = receiver.communicate(timeout=10)
        assert receiver.returncode == 2
        assert err == "flow receiver: error: No space left on device\n"
        # The sender's log full: it stops at its first record, in one line.
        table = tmp_path / "flows.csv"
        r = subprocess.run(
            in_ns(tx, "qcn.reaction_point.flow_sender", str(table), "--dst", RECEIVER_IP,
                  "--log", str(disk / "tx.jsonl")),
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
        assert r.returncode == 2
        assert r.stderr == "flow sender: error: No space left on device\n"


def test_tcp_flows_run_the_congestion_control_they_are_given(tmp_path: Path) -> None:
    """workload.tcp_congestion reaches every flow's socket (TCP_CONGESTION), whatever the
    host's default; unset, the host's default."""
    import socket  # noqa: PLC0415

    from qcn.reaction_point.flow_sender import FlowSender  # noqa: PLC0415

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    default = socket.socket().getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    with (tmp_path / "log").open("w") as log:
        for asked, expected in (("reno", b"reno"), ("", default)):
            sender = FlowSender(
                [], dst="127.0.0.1", port=port, frame_bytes=1500, rto_s=0.5, origin=0.0,
                log=log, transport="tcp", tcp_congestion=asked,
            )  # fmt: skip
            sock = sender._connect("127.0.0.1", 0)
            try:
                got = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
                assert got.rstrip(b"\0") == expected.rstrip(b"\0")
            finally:
                sock.close()
                sender.close()
    listener.close()


def test_datagram_flows_are_ecn_capable(tmp_path: Path) -> None:
    """A frames flow's socket sends ECT(0) (qcn.core.ecmp.TRAFFIC_TOS)."""
    with (tmp_path / "log").open("w") as log:
        sender = FlowSender(
            [], dst="127.0.0.1", port=5001, frame_bytes=1500, rto_s=0.5, origin=0.0, log=log,
        )  # fmt: skip
        sock = sender._connect("127.0.0.1", 0)
        try:
            assert sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS) == TRAFFIC_TOS
        finally:
            sock.close()
            sender.close()


def test_a_frame_held_in_its_hosts_limiter_is_not_sent_again(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    """A limiter slower than a frame per timeout holds frames in the host past their
    timeout: they are not lost, and the timeout counts from their leaving the host, as in
    the simulator; so nothing is sent again (docs/fct.md, "BMv2's drops")."""
    tx, rx = pair
    # 30 kb/s: a 1500-byte frame takes 400 ms to leave, twice the 200 ms timeout.  (With
    # a 50 ms timeout, a busy machine that ran the receiver late got an acknowledgement
    # in after a frame's timeout: a copy sent for a frame that was not lost.)
    sh("ip", "netns", "exec", tx, "tc", "qdisc", "add", "dev", "ft-s", "root", "tbf",
       "rate", "30kbit", "burst", "1600", "limit", "100000")  # fmt: skip
    host_flows = flows(2, seed=3, max_bytes=4_000, gap_s=0.01)
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl")
    try:
        log = send(tx, tmp_path, host_flows, rto_s=0.2)
    finally:
        stop(receiver)
    acked = [r for r in lines(log) if "acked" in r]
    assert len(acked) == len(host_flows)
    assert sum(r["retransmitted"] for r in acked) == 0


def test_a_stopped_tcp_flow_says_where_its_connection_was() -> None:
    """The record of a TCP flow stopped before it finished names its connection's state and
    backoff (docs/fct.md: where the unfinished TCP flows were stuck)."""
    import socket  # noqa: PLC0415

    from qcn.reaction_point.flow_sender import tcp_where  # noqa: PLC0415

    with socket.create_server(("127.0.0.1", 0)) as listener:
        sock = socket.create_connection(listener.getsockname())
        try:
            assert tcp_where(sock) == {
                "tcp_state": "ESTABLISHED", "tcp_backoff": 0, "retransmitted": 0,
            }  # fmt: skip
        finally:
            sock.close()


def test_a_kept_connection_the_receiver_closed_is_replaced(
    pair: tuple[str, str], tmp_path: Path
) -> None:
    """A receiver that restarts between two flows closes the idle connection kept for the
    next one: the sender opens a new one for it, and both flows finish."""
    tx, rx = pair
    table, log = tmp_path / "flows.csv", tmp_path / "sender.jsonl"
    write_host_flows(table, [HostFlow(1, 0.0, 3000), HostFlow(2, 1.0, 3000)])
    receiver = start_receiver(rx, tmp_path / "receiver.jsonl", "tcp")
    command = in_ns(tx, "qcn.reaction_point.flow_sender", str(table), "--dst", RECEIVER_IP,
                    "--log", str(log), "--transport", "tcp")  # fmt: skip
    sender = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: log.exists() and '"acked"' in log.read_text(), 10)
        stop(receiver)
        receiver = start_receiver(rx, tmp_path / "receiver.jsonl", "tcp")
        assert sender.wait(10) == 0
    finally:
        if sender.poll() is None:
            sender.kill()
        stop(receiver)
    records = lines(log)
    assert [r["flow"] for r in records if "acked" in r] == [1, 2]
    assert not any("kept" in r for r in records)
