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
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable

from qcn.core.ecmp import DATA_PORT
from qcn.core.errors import QcnError, report
from qcn.core.flows import SO_RCVBUFFORCE
from qcn.core.signals import stop_on_signals
from qcn.reaction_point.sources import ETH_IP_UDP_HEADERS, SEQUENCE

RECEIVE_BUFFER_BYTES = 256 << 20


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
    def __init__(self, port: int) -> None:
        self.sock = receiving_socket(port)
        self.counts: dict[str, list[int]] = {}
        self.next_seq: dict[str, int] = {}

    def drain(self) -> None:
        """Count every datagram waiting in the socket."""
        while True:
            try:
                data, (src, _port) = self.sock.recvfrom(65536)
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
    args = ap.parse_args(argv)
    try:
        sink = open_sink(args.port, args.interval)
    except QcnError as e:
        return report(e)
    with selectors.DefaultSelector() as selector:
        selector.register(sink.sock, selectors.EVENT_READ)
        report_until_stopped(
            selector, lambda _key: sink.drain(), lambda: sink.counts, args.interval
        )
    return 0


def open_sink(port: int, interval_s: float) -> Sink:
    """A sink on ``port``, or one line saying why not (a port taken was a traceback)."""
    low, high = INTERVAL_RANGE_S
    if not low <= interval_s <= high:  # NaN fails too
        raise SinkError(f"--interval must be in [{low:g}, {high:g}] seconds (got {interval_s:g})")
    if not 0 <= port <= 65535:
        raise SinkError(f"--port must be in [0, 65535] (got {port})")
    try:
        return Sink(port)
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
) -> None:
    """Until SIGINT or SIGTERM: ``on_ready(key)`` for each of ``selector``'s sockets that
    has something to read, and print ``{"t": ..., "rx": counts()}`` every ``interval_s`` (a
    first, empty one at once: the line that says it is ready), and once more when stopped
    if ``final``, after a last look at every socket."""
    stopping = threading.Event()
    stop_on_signals(stopping.set)
    print(json.dumps({"t": time.monotonic(), "rx": {}}), flush=True)
    next_report = time.monotonic() + interval_s
    while not stopping.is_set():
        timeout = max(0.0, min(STOP_CHECK_S, next_report - time.monotonic()))
        for key, _events in selector.select(timeout):
            on_ready(key)
        now = time.monotonic()
        if now >= next_report:
            sys.stdout.write(json.dumps({"t": now, "rx": counts()}) + "\n")
            sys.stdout.flush()
            next_report = now + interval_s
    if final:
        for key, _events in selector.select(0):
            on_ready(key)
        print(json.dumps({"t": time.monotonic(), "rx": counts()}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
