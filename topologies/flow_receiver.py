"""The flows workload's receiver (docs/fct.md): acknowledges every frame and records each
flow's completion, the moment its last missing frame arrives.

It runs on the sink host (``python -m qcn.topologies.flow_receiver``) and writes one JSON line
per finished flow to its log, flushed at once, so an interrupted run keeps every record::

    {"src": "10.0.0.1", "flow": 7, "finish": 12.61, "size": 4000, "duplicates": 0}

Like the experiments' sink (:mod:`qcn.topologies.sink`), it prints on stdout what it received
per source every ``--interval``, ``{"t": ..., "rx": {"10.0.0.1": [frames, bytes, lost]}}``.
``lost`` counts the copies lost of each frame that has arrived: a frame's header says how
many copies were sent before it, and on a FIFO path they would have arrived first.  It
learns of a loss when the frame finally arrives (a timeout later), and never of a frame
that did not arrive by the end.

With ``--transport tcp`` it accepts TCP connections instead, each carrying flows one after
another (a sender keeps its connections, or opens one per flow): the flow header, then the
flow's bytes; it records the flow when the last byte is read and answers with the header
flagged ACK (the sender's cue), then reads the next flow's header, or the sender's close.
The frames and bytes it reports are then estimated from the stream
(:data:`TCP_FRAME_OVERHEAD`), and losses are TCP's business.

``finish`` is ``time.monotonic()``, which every network namespace shares, so it compares
with the senders' start times (:mod:`qcn.reaction_point.flow_sender`).  A frame that arrives
twice (sent again after a late acknowledgement) is acknowledged again and counted as a
duplicate.  A datagram whose flags have a bit no sender sets (qcn.core.flows.KNOWN_FLAGS)
is malformed: counted, never acknowledged, and its copy count never taken as losses.

With ``--cnp-interval N`` (frames) it is DCQCN's notification point, per flow: a frame
marked CE is answered with a CNP to its sender, at most one per flow every N seconds
(:class:`qcn.topologies.sink.NotificationPoint`); its lines then add, per source, the
frames that came marked and the CNPs sent (``"ce"``, ``"cnp"``, ``"cnp_errors"``), as the
sink's do.

Its settings are checked before it listens (qcn.core.flows.check_transport); a mistake, a
port in use or a log that cannot be written is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import selectors
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from qcn.core.flows import (
    COPY_SHIFT,
    ETH_IP_UDP_BYTES,
    FLAG_ACK,
    FLOW_HEADER,
    KNOWN_FLAGS,
    TRANSPORTS,
    FlowFieldError,
    check_transport,
    flow_frames,
)
from qcn.topologies.sink import (
    TOS_ANCILLARY_BYTES,
    CnpNeedsRootError,
    NotificationPoint,
    add_cnp_interval_argument,
    check_cnp_interval,
    is_marked,
    receiving_socket,
    report_until_stopped,
)


@dataclass
class ReceivingFlow:
    frames: int
    received: set[int] = field(default_factory=set)
    duplicates: int = 0
    finished: bool = False


@dataclass(eq=False)
class Connection:
    """tcp: a connection's flow now, its header read first, then its bytes counted."""

    sock: socket.socket
    src: str
    header: bytes = b""
    flow_id: int = -1
    size: int = 0
    received: int = 0


TCP_FRAME_OVERHEAD = 14 + 20 + 20 + 12
"""tcp: what each segment carries besides its bytes (Ethernet, IPv4, TCP with timestamps):
the reported frames and bytes are estimated from the stream with it."""


class FlowReceiver:
    """Receives the flows of ``transport`` ("frames": acknowledged datagrams; "tcp": one
    connection per flow) on ``port``; ``selector`` watches its sockets."""

    def __init__(
        self,
        port: int,
        frame_bytes: int,
        log: IO[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        transport: str = "frames",
        ack_dir: Path | None = None,
        cnp_interval_s: float | None = None,
    ) -> None:
        self.frame_bytes, self.log, self.clock = frame_bytes, log, clock
        self.ack_dir = ack_dir
        """frames: acknowledge out of band, to ``ack_dir/SENDER_IP.sock`` where the sender
        listens (else in band, to the frame's own source)."""
        self.acks = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) if ack_dir else None
        if self.acks is not None:
            self.acks.setblocking(False)
        self.selector = selectors.DefaultSelector()
        if transport == "tcp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind(("0.0.0.0", port))
            self.sock.listen(1024)
            self.sock.setblocking(False)
        else:
            self.sock = receiving_socket(port)
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.tcp = transport == "tcp"
        self.flows: dict[tuple[str, int], ReceivingFlow] = {}
        self.malformed = 0
        self.counts: dict[str, list[int]] = {}
        """Per source address: [frames, Ethernet bytes, lost], as the sink reports them."""
        self.notification: NotificationPoint | None = None
        """frames: DCQCN's notification point, per flow (None: no CNPs)."""
        if cnp_interval_s is not None and not self.tcp:
            try:
                self.notification = NotificationPoint(self.sock, cnp_interval_s, clock=clock)
            except BaseException:
                for closing in (self.sock, self.selector, self.acks):
                    if closing is not None:
                        closing.close()
                raise

    def on_ready(self, key: selectors.SelectorKey) -> None:
        if isinstance(key.data, Connection):
            self._read(key.data)
        elif self.tcp:
            self._accept()
        else:
            self.drain()

    def _finished(self, src: str, flow_id: int, at: float, size: int, duplicates: int) -> None:
        record = {"src": src, "flow": flow_id, "finish": at, "size": size}
        self.log.write(json.dumps(record | {"duplicates": duplicates}) + "\n")
        self.log.flush()

    def _accept(self) -> None:
        while True:
            try:
                conn, (src, _port) = self.sock.accept()
            except BlockingIOError:
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (the answer, at once)
            self.selector.register(conn, selectors.EVENT_READ, Connection(conn, src))

    def _read(self, c: Connection) -> None:
        while True:
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # the sender gave up before all its bytes came
                self._close(c)
                return
            arrived = self.clock()
            counts = self.counts.setdefault(c.src, [0, 0, 0])
            segments = -(-len(data) // (self.frame_bytes - TCP_FRAME_OVERHEAD))
            counts[0] += segments
            counts[1] += len(data) + segments * TCP_FRAME_OVERHEAD
            while data:
                if c.flow_id < 0:
                    need = FLOW_HEADER.size - len(c.header)
                    c.header, data = c.header + data[:need], data[need:]
                    if len(c.header) < FLOW_HEADER.size:
                        break
                    c.flow_id, _frame, c.size, _flags = FLOW_HEADER.unpack(c.header)
                taken = min(len(data), c.size - c.received)
                c.received += taken
                data = data[taken:]
                if c.received >= c.size and not self._answer(c, arrived):
                    return

    def _answer(self, c: Connection, arrived: float) -> bool:
        """The connection's flow is whole: record it and tell the sender (its header flagged
        ACK), then wait for the next flow; False if the connection is gone."""
        self._finished(c.src, c.flow_id, arrived, c.size, 0)
        try:
            # 16 bytes into a send buffer that holds at most the earlier answers: it fits.
            c.sock.send(FLOW_HEADER.pack(c.flow_id, 0, c.size, FLAG_ACK))
        except OSError:
            self._close(c)
            return False
        c.header, c.flow_id, c.size, c.received = b"", -1, 0, 0
        return True

    def _close(self, c: Connection) -> None:
        self.selector.unregister(c.sock)
        c.sock.close()

    def _acknowledge(self, ack: bytes, addr: tuple[str, int]) -> None:
        """Out of band where the sender listens there, else back in band; one that cannot
        go is not retried (the sender sends the frame again after its timeout)."""
        if self.acks is not None and self.ack_dir is not None:
            try:
                self.acks.sendto(ack, str(self.ack_dir / f"{addr[0]}.sock"))
                return
            except (FileNotFoundError, ConnectionRefusedError):
                pass  # (that sender takes them in band)
            except OSError:
                return
        with contextlib.suppress(OSError):
            self.sock.sendto(ack, addr)

    def drain(self) -> None:
        """Acknowledge and count every frame waiting in the socket."""
        np = self.notification
        marked = False
        while True:
            try:
                if np is None:
                    data, addr = self.sock.recvfrom(65536)
                else:
                    data, ancdata, _, addr = self.sock.recvmsg(65536, TOS_ANCILLARY_BYTES)
                    marked = bool(ancdata) and is_marked(ancdata)
            except BlockingIOError:
                return
            arrived = self.clock()  # (before the acknowledgement goes back)
            counts = self.counts.setdefault(addr[0], [0, 0, 0])
            counts[0] += 1
            counts[1] += len(data) + ETH_IP_UDP_BYTES
            if len(data) < FLOW_HEADER.size:
                self.malformed += 1
                continue
            flow_id, frame, size, flags = FLOW_HEADER.unpack_from(data)
            if flags & FLAG_ACK or flags & ~KNOWN_FLAGS:
                self.malformed += 1
                continue
            if marked:
                assert np is not None
                np.on_marked((addr[0], flow_id), addr[0], addr[1])
            self._acknowledge(FLOW_HEADER.pack(flow_id, frame, size, FLAG_ACK), addr)
            key = (addr[0], flow_id)
            flow = self.flows.get(key)
            if flow is None:
                flow = self.flows[key] = ReceivingFlow(flow_frames(size, self.frame_bytes)[0])
            if flow.finished or frame in flow.received or frame >= flow.frames:
                flow.duplicates += 1
                continue
            counts[2] += flags >> COPY_SHIFT
            flow.received.add(frame)
            if len(flow.received) == flow.frames:
                flow.finished = True
                self._finished(addr[0], flow_id, arrived, size, flow.duplicates)
                flow.received = set()  # (its frames are no longer needed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, default=5002)
    ap.add_argument("--frame-bytes", type=int, default=1500)
    ap.add_argument("--log", type=Path, required=True, help="where the JSON lines go")
    ap.add_argument("--interval", type=float, default=0.01, help="seconds between reports")
    ap.add_argument("--transport", choices=TRANSPORTS, default=TRANSPORTS[0])
    ap.add_argument(
        "--ack-dir",
        type=Path,
        help="frames: acknowledge out of band, to DIR/SENDER_IP.sock (the senders' --ack-socket)",
    )
    add_cnp_interval_argument(ap)
    args = ap.parse_args(argv)
    try:
        check_transport(frame_bytes=args.frame_bytes, port=args.port, interval_s=args.interval)
    except FlowFieldError as e:
        print(f"flow receiver: error: {e}", file=sys.stderr)
        return 2
    wrong = check_cnp_interval(args.cnp_interval)
    if wrong is None and args.cnp_interval is not None and args.transport == "tcp":
        wrong = "--cnp-interval answers datagrams (--transport frames); TCP has its own ECN"
    if wrong:
        print(f"flow receiver: error: {wrong}", file=sys.stderr)
        return 2
    try:
        with args.log.open("a") as log:
            try:
                receiver = FlowReceiver(
                    args.port, args.frame_bytes, log, transport=args.transport,
                    ack_dir=args.ack_dir, cnp_interval_s=args.cnp_interval,
                )  # fmt: skip
            except CnpNeedsRootError as e:
                print(f"flow receiver: error: {e}", file=sys.stderr)
                return 2
            except OSError as e:
                print(f"flow receiver: error: cannot listen on {args.transport} port "
                      f"{args.port}: {e.strerror or e}", file=sys.stderr)  # fmt: skip
                return 2
            np = receiver.notification
            report_until_stopped(
                receiver.selector,
                receiver.on_ready,
                lambda: receiver.counts,
                args.interval,
                final=True,
                more=None if np is None else np.report,
            )
    except OSError as e:
        # The log: a missing directory, a full disk.
        where = f" {e.filename}" if e.filename else ""
        print(f"flow receiver: error:{where} {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
