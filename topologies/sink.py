"""The experiments' traffic sink: receives the sources' UDP frames and counts them per source.

It runs on the sink host (``python -m qcn.topologies.sink``, ``qcn sink``) and prints one JSON
line per ``--interval`` with cumulative counts per source address::

    {"t": 12.345, "rx": {"10.0.0.1": [frames, bytes, lost], ...}}

The interval is 1 s unless given: a person reading it wants a line a second.  The
experiments ask for their sample interval (10 ms), the grid their traces are drawn on.

``t`` is ``time.monotonic()``, which every network namespace shares, so the runner can put
these lines on the same time axis as its queue samples.  ``lost`` counts the gaps in each
source's sequence numbers (:data:`qcn.reaction_point.sources.SEQUENCE`): frames the network
dropped, exactly, without asking the switch.  Bytes are Ethernet frame bytes.

With ``--cnp-interval N`` it is DCQCN's notification point too (:class:`NotificationPoint`):
a frame marked CE (Congestion Experienced) is answered with a CNP to its source, at most one
per source every N seconds, and each line says, per source, the frames that came marked and
the CNPs sent, so far, and how many CNPs could not go (no route back, a full buffer)::

    {"t": 12.345, "rx": {...}, "ce": {"10.0.0.1": 812}, "cnp": {"10.0.0.1": 97}, "cnp_errors": 0}

Without it the lines are as above, and the TOS byte is not read.
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from qcn.core.ecmp import DATA_PORT, ECN_CE, ECN_MASK, ROCEV2_UDP_PORT
from qcn.core.errors import QcnError, report
from qcn.core.flows import SO_RCVBUFFORCE
from qcn.core.params import DCQCN_CNP_INTERVAL_MAX_S
from qcn.core.signals import stop_on_signals
from qcn.reaction_point.sources import ETH_IP_UDP_HEADERS, SEQUENCE

RECEIVE_BUFFER_BYTES = 256 << 20
TOS_ANCILLARY_BYTES = socket.CMSG_SPACE(4)
"""recvmsg's room for the TOS byte's control message (IP_RECVTOS)."""


class CnpNeedsRootError(QcnError):
    """A notification point started without CAP_NET_RAW."""


class NotificationPoint:
    """DCQCN's notification point at a receiver (Zhu et al., SIGCOMM 2015): a frame that
    arrives marked CE is answered with a CNP to its source, at most one per flow every
    ``interval_s`` (N, ``rp.dcqcn.cnp_interval_s``; 0: one per marked frame).

    The CNP is RoCEv2's (:func:`qcn.core.frames.cnp_packet`): IPv4/UDP from the receiving
    socket's port to the source's port 4791, the BTH with opcode CNP, 16 reserved bytes,
    the ICRC.  Its destination QP is the data frame's UDP source port, which with the CNP's
    addresses and source port (the data's destination port) names the flow's 5-tuple to
    the reaction point (qcn.reaction_point.daemon).  The ICRC covers the IP header, so the
    header is built here and the CNP leaves by a raw socket (root, as the hosts are): from
    the address the kernel routes to the source from, kept per source, and the packet kept
    per flow, so that a CNP costs one send.
    """

    def __init__(
        self,
        sock: socket.socket,
        interval_s: float,
        *,
        cnp_port: int = ROCEV2_UDP_PORT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Raises :class:`CnpNeedsRootError` without CAP_NET_RAW (the raw socket)."""
        # scapy, a quarter of a second: only a receiver that notifies pays it.
        from qcn.core.frames import cnp_packet  # noqa: PLC0415

        self._cnp_packet = cnp_packet
        self.port = sock.getsockname()[1]
        self.interval_s = interval_s
        self.cnp_port = cnp_port
        """Where CNPs go on the source (4791; a test's own port)."""
        self.clock = clock
        self.last_sent: dict[Hashable, float] = {}
        """When each flow was last sent a CNP."""
        self.marked: dict[str, int] = {}
        """Frames that arrived marked CE, per source address."""
        self.sent: dict[str, int] = {}
        """CNPs sent, per source address."""
        self.send_errors = 0
        """CNPs that could not go (no route back, a full buffer): not retried."""
        self._packets: dict[tuple[str, int], bytes] = {}
        self._local_ips: dict[str, str] = {}
        try:
            self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        except PermissionError:
            raise CnpNeedsRootError(
                "--cnp-interval needs root: CNPs leave by a raw socket (their ICRC covers "
                "the IP header)"
            ) from None
        self.raw.setblocking(False)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)

    def close(self) -> None:
        self.raw.close()

    def on_marked(self, flow: Hashable, src: str, sport: int) -> None:
        """A frame of ``flow`` from ``src``:``sport`` arrived marked CE."""
        self.marked[src] = self.marked.get(src, 0) + 1
        now = self.clock()
        last = self.last_sent.get(flow)
        if last is not None and now - last < self.interval_s:
            return
        self.last_sent[flow] = now
        try:
            packet = self._packets.get((src, sport))
            if packet is None:
                local_ip = self._local_ip(src)
                built = self._cnp_packet(local_ip, src, self.port, sport, self.cnp_port)
                packet = self._packets[(src, sport)] = bytes(built)
            self.raw.sendto(packet, (src, 0))
        except OSError:  # (no route back to the source, a full buffer)
            self.send_errors += 1
            return
        self.sent[src] = self.sent.get(src, 0) + 1

    def _local_ip(self, peer: str) -> str:
        """The address the kernel sends from to ``peer`` (a route lookup; nothing sent)."""
        ip = self._local_ips.get(peer)
        if ip is None:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect((peer, self.cnp_port))
                ip = self._local_ips[peer] = probe.getsockname()[0]
        return ip

    def report(self) -> dict[str, Any]:
        """What the receivers' lines add: frames marked and CNPs sent, per source, and the
        CNPs that could not go."""
        return {"ce": dict(self.marked), "cnp": dict(self.sent), "cnp_errors": self.send_errors}


def is_marked(ancdata: list[tuple[int, int, bytes]]) -> bool:
    """Whether recvmsg's ancillary data (IP_RECVTOS's TOS byte) says Congestion
    Experienced."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS and data:
            return data[0] & ECN_MASK == ECN_CE
    return False


def receiving_socket(port: int) -> socket.socket:
    """A non-blocking UDP socket bound to ``port``, with a receive buffer that holds what
    arrives while its reader waits for the CPU."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # A sink kept waiting must not lose what arrived meanwhile (it would count as the
    # network's drops).  After the transient's restore the real-time switch at its
    # capacity kept ordinary processes off the CPU for up to 10 s, and a 4 MB buffer
    # lost 47.7k frames; 256 MB of socket memory (about 110k frames of 1500 B, each
    # charged ~2.3 KB) holds 13 s at 100 Mb/s, and is used only while it waits.  As
    # root, past net.core.rmem_max (212,992 bytes by default: ~26 ms).
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    sock.bind(("0.0.0.0", port))
    sock.setblocking(False)
    return sock


class Sink:
    def __init__(self, port: int, cnp_interval_s: float | None = None) -> None:
        self.sock = receiving_socket(port)
        self.counts: dict[str, list[int]] = {}
        self.next_seq: dict[str, int] = {}
        self.notification: NotificationPoint | None = None
        """DCQCN's notification point, one flow per source address (None: no CNPs)."""
        if cnp_interval_s is not None:
            try:
                self.notification = NotificationPoint(self.sock, cnp_interval_s)
            except BaseException:
                self.sock.close()
                raise

    def drain(self) -> None:
        """Count every datagram waiting in the socket (and answer CE marks with CNPs)."""
        np = self.notification
        while True:
            try:
                if np is None:
                    data, (src, _port) = self.sock.recvfrom(65536)
                else:
                    data, ancdata, _, (src, sport) = self.sock.recvmsg(65536, TOS_ANCILLARY_BYTES)
                    if ancdata and is_marked(ancdata):
                        np.on_marked(src, src, sport)
            except BlockingIOError:
                return
            counts = self.counts.setdefault(src, [0, 0, 0])
            counts[0] += 1
            counts[1] += len(data) + ETH_IP_UDP_HEADERS
            if len(data) >= SEQUENCE.size:
                (seq,) = SEQUENCE.unpack_from(data)
                expected = self.next_seq.get(src, 0)
                if seq >= expected:
                    counts[2] += seq - expected
                    self.next_seq[src] = seq + 1
                else:  # a late (reordered) frame was counted lost when its gap was seen
                    counts[2] -= 1


class SinkError(QcnError):
    """A port that cannot be listened on, or an interval out of range: one line."""


def add_cnp_interval_argument(ap: argparse.ArgumentParser) -> None:
    """The receivers' ``--cnp-interval`` (this sink's and the flow receiver's)."""
    ap.add_argument(
        "--cnp-interval",
        type=float,
        metavar="SECONDS",
        help="be DCQCN's notification point: answer a frame marked CE with a CNP to its "
        "source (UDP port 4791), at most one per flow every SECONDS (rp.dcqcn.cnp_interval_s; "
        "0: one per marked frame; default: no CNPs)",
    )


def check_cnp_interval(interval_s: float | None) -> str | None:
    """What is wrong with a ``--cnp-interval`` (None: nothing)."""
    if interval_s is None or 0 <= interval_s <= DCQCN_CNP_INTERVAL_MAX_S:  # NaN fails
        return None
    return (
        f"--cnp-interval must be in [0, {DCQCN_CNP_INTERVAL_MAX_S:g}] seconds (got {interval_s:g})"
    )


DEFAULT_INTERVAL_S = 1.0
INTERVAL_RANGE_S = (0.001, 3600.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--port",
        type=int,
        default=DATA_PORT,
        help="the UDP port to receive on, on every address (default: %(default)s)",
    )
    ap.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL_S,
        help="seconds between reports, each a JSON line of the counts so far (default: "
        "%(default)s)",
    )
    add_cnp_interval_argument(ap)
    args = ap.parse_args(argv)
    try:
        sink = open_sink(args.port, args.interval, args.cnp_interval)
    except QcnError as e:
        return report(e)
    np = sink.notification
    with selectors.DefaultSelector() as selector:
        selector.register(sink.sock, selectors.EVENT_READ)
        report_until_stopped(
            selector,
            lambda _key: sink.drain(),
            lambda: sink.counts,
            args.interval,
            more=None if np is None else np.report,
        )
    return 0


def open_sink(port: int, interval_s: float, cnp_interval_s: float | None = None) -> Sink:
    """A sink on ``port``, or one line saying why not (a port taken was a traceback)."""
    low, high = INTERVAL_RANGE_S
    if not low <= interval_s <= high:  # NaN fails too
        raise SinkError(f"--interval must be in [{low:g}, {high:g}] seconds (got {interval_s:g})")
    if not 0 <= port <= 65535:
        raise SinkError(f"--port must be in [0, 65535] (got {port})")
    wrong = check_cnp_interval(cnp_interval_s)
    if wrong:
        raise SinkError(wrong)
    try:
        return Sink(port, cnp_interval_s)
    except OSError as e:
        raise SinkError(f"cannot receive on UDP port {port}: {e.strerror}") from None


STOP_CHECK_S = 0.05
"""The longest wait for a frame: a stop request is seen within it."""


def report_until_stopped(
    selector: selectors.BaseSelector,
    on_ready: Callable[[selectors.SelectorKey], None],
    counts: Callable[[], dict[str, list[int]]],
    interval_s: float,
    *,
    final: bool = False,
    more: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Until SIGINT or SIGTERM: ``on_ready(key)`` for each of ``selector``'s sockets that
    has something to read, and print ``{"t": ..., "rx": counts()}`` (and ``more()``'s
    fields: a notification point's) every ``interval_s`` (a first, empty one at once: the
    line that says it is ready), and once more when stopped if ``final``, after a last look
    at every socket."""
    stopping = threading.Event()
    stop_on_signals(stopping.set)

    def line(now: float, rx: dict[str, list[int]]) -> str:
        return json.dumps({"t": now, "rx": rx} | (more() if more is not None else {}))

    print(line(time.monotonic(), {}), flush=True)
    next_report = time.monotonic() + interval_s
    while not stopping.is_set():
        timeout = max(0.0, min(STOP_CHECK_S, next_report - time.monotonic()))
        for key, _events in selector.select(timeout):
            on_ready(key)
        now = time.monotonic()
        if now >= next_report:
            sys.stdout.write(line(now, counts()) + "\n")
            sys.stdout.flush()
            next_report = now + interval_s
    if final:
        for key, _events in selector.select(0):
            on_ready(key)
        print(line(time.monotonic(), counts()), flush=True)


if __name__ == "__main__":
    sys.exit(main())
