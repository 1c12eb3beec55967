"""The flows workload's sender on a host (docs/fct.md): starts its flows when they are due
and sends their frames as UDP through the host's kernel limiters, one socket per flow.

Each flow is a UDP socket of its own, so each has its own 5-tuple and, with the reaction
point daemon's per-flow limiters (``qcn rp start --per-flow``), its own reaction point, as
in seed 003.  The sockets are non-blocking with a small send buffer: a flow whose limiter
holds its frames back finds its socket full and loses its turn, while the others go on.
The active flows take turns, a frame each.

Transport (``frames``, the same as the simulator's): the receiver acknowledges every frame
(:mod:`qcn.topologies.flow_receiver`); a frame not acknowledged ``rto_s`` after it was sent is
sent again, ahead of the flow's new frames.  With ``--transport tcp`` the flows go over
the kernel's TCP instead, as users run it: the flow header, then the flow's bytes; the
receiver answers with the header flagged ACK once it has them all, and the flow's
retransmissions are TCP's own (``TCP_INFO``).  Its connections are kept (``--tcp-connections
kept``): a flow goes on an idle connection to its receiver, or a new one when none is idle,
and the connection waits for the next flow after it.  With ``per-flow`` each flow opens a
connection of its own and half-closes it after its bytes.

It writes one JSON line per event to its log, flushed at once, so an interrupted run keeps
every record::

    {"flow": 7, "start": 12.5, "late": 0.0002, "size": 4000, "sport": 40312}   # started
    {"flow": 8, "start": 12.6, ..., "sport": 40312, "kept": true}   # tcp: on a kept connection
    {"flow": 7, "acked": 12.6, "retransmitted": 1}     # every frame acknowledged
    {"flow": 9, "stopped": 14.0, "retransmitted": 0}   # still sending at the stop

``start`` is when the flow was due; ``late``, how long after that the sender got to it (the
arrival rate it sustained, and any wait for a port: a host out of ephemeral ports or file
descriptors starts no flow until one of its own ends, or a moment has passed).

Its input is checked before anything is sent (qcn.core.flows.check_host_flow and
check_transport, the one check of a flow's fields): a mistake is one line on stderr and
exit status 2, as is a log that cannot be written.

Times are ``time.monotonic()``, which every network namespace shares.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import errno
import fcntl
import heapq
import ipaddress
import json
import math
import os
import resource
import selectors
import socket
import sys
import termios
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from qcn.core.ecmp import TRAFFIC_TOS, flow_port
from qcn.core.flows import (
    COPY_SHIFT,
    ETH_IP_UDP_BYTES,
    FLAG_ACK,
    FLOW_HEADER,
    MAX_COPIES,
    SO_RCVBUFFORCE,
    TCP_CONNECTIONS,
    TRANSPORTS,
    FlowFieldError,
    check_host_flow,
    check_transport,
    flow_frames,
)
from qcn.core.signals import stop_on_signals

SEND_BUFFER_BYTES = 4096
"""Each flow's socket holds about one frame in the kernel (the minimum Linux allows, which
it doubles): a limiter that holds the flow back stops it at once."""
MAX_ACTIVE_FLOWS = 4096
"""At most this many flows (sockets) at once, and fewer if the file limit is lower: a flow
due beyond it starts when one finishes (a host out of sockets waits too), which its FCT
counts."""
ZEROS = bytes(65536)
"""What a flow's bytes are sent from (their content does not matter): a frame's padding, a
TCP stream's chunks."""
IDLE_WAIT_S = 0.05
"""The longest wait when nothing is due: a stop request is seen within it."""
OUT_OF_PORTS = frozenset(
    {errno.EAGAIN, errno.EADDRNOTAVAIL, errno.EADDRINUSE, errno.EMFILE, errno.ENFILE}
)
"""What a socket's creation or connect says when the host has no ephemeral port or file
descriptor to give: the flow waits (:meth:`FlowSender._start_due`); the sender used to die
of ``BlockingIOError`` with thousands of flows never started (issue 42)."""


@dataclass(frozen=True)
class HostFlow:
    """One of this host's flows: its id in the run, when it starts, its bytes."""

    flow_id: int
    start_s: float
    size_bytes: int
    dst: str = ""
    """Its receiver's IPv4 address ("": the sender's ``--dst``)."""


@dataclass(eq=False)
class SendingFlow:
    flow_id: int
    size: int
    frames: int
    last_frame_bytes: int
    sock: socket.socket
    next_frame: int = 0
    resend: deque[int] = field(default_factory=deque)
    unacked: set[int] = field(default_factory=set)
    copies: dict[int, int] = field(default_factory=dict)
    """Copies sent of each frame sent more than once (the others: one)."""
    stream: bytes = b""
    """tcp: the header still to send (then ``stream_left`` zero bytes)."""
    stream_left: int = 0
    reply: bytes = b""
    """tcp: what has come of the receiver's answer (the flow header, flagged ACK)."""
    dst: str = ""
    retransmitted_before: int = 0
    """tcp: the connection's retransmissions before this flow (a kept one's earlier flows)."""
    acked: int = 0
    retransmitted: int = 0

    @property
    def has_frames(self) -> bool:
        return self.next_frame < self.frames or bool(self.resend)


class FlowSender:
    """Sends the flows of ``arrivals`` (start times relative to ``origin``) to ``dst``."""

    def __init__(
        self,
        arrivals: list[HostFlow],
        *,
        dst: str,
        port: int,
        frame_bytes: int,
        rto_s: float,
        origin: float,
        log: IO[str],
        clock: Callable[[], float] = time.monotonic,
        transport: str = "frames",
        ack_socket: Path | None = None,
        tcp_congestion: str = "",
        tcp_connections: str = TCP_CONNECTIONS[0],
    ) -> None:
        self.pending = deque(sorted(arrivals, key=lambda a: a.start_s))
        self.tcp = transport == "tcp"
        self.tcp_congestion = tcp_congestion.encode()
        """tcp: every socket's congestion control (empty: the host's default)."""
        self.keep_connections = self.tcp and tcp_connections == "kept"
        self.idle: dict[str, list[socket.socket]] = {}
        """tcp, kept: each receiver's open connections that carry no flow now."""
        self.dst, self.port = dst, port
        self.frame_bytes, self.rto_s = frame_bytes, rto_s
        self.origin, self.log, self.clock = origin, log, clock
        self.selector = selectors.DefaultSelector()
        self.turns: deque[SendingFlow] = deque()
        """Flows with a frame to send whose socket has room."""
        self.active: dict[int, SendingFlow] = {}
        self.timeouts: list[tuple[float, int, int]] = []
        """(deadline, flow id, frame) of every frame sent and not yet acknowledged."""
        self.max_active = max_active_flows()
        self.timeouts_held = 0
        """Timeouts put off because the flow's frames had not left the host yet."""
        self.waits_for_ports = 0
        """How many times a due flow found the host out of ports (or sockets) and waited."""
        self._retry_at = 0.0
        """While out of ports: when to try again if no flow of ours ends first."""
        self.acks: socket.socket | None = None
        """``ack_socket``: where the receivers' acknowledgements come, out of band."""
        if ack_socket is not None:
            self.acks = ack_channel(ack_socket)
            self.selector.register(self.acks, selectors.EVENT_READ, None)

    @property
    def done(self) -> bool:
        return not self.pending and not self.active

    def _write(self, record: dict[str, Any]) -> None:
        self.log.write(json.dumps(record) + "\n")
        self.log.flush()

    @property
    def next_start(self) -> float | None:
        """When the next flow may start (None: none is pending)."""
        if not self.pending:
            return None
        return max(self.origin + self.pending[0].start_s, self._retry_at)

    def _start_due(self, now: float) -> None:
        while (
            (due := self.next_start) is not None
            and due <= now
            and len(self.active) < self.max_active
        ):
            a = self.pending[0]
            dst = a.dst or self.dst
            sock = self._idle_connection(dst)
            kept = sock is not None  # (only tcp's kept connections are ever idle)
            try:
                if sock is None:
                    sock = self._connect(dst, a.flow_id)
            except OSError as e:
                if e.errno not in OUT_OF_PORTS:
                    raise
                if self._close_an_idle_connection():
                    continue  # (its port and descriptor are free now)
                # Out of ports or sockets: the flow waits until one of ours ends (or a
                # moment, if they are someone else's), as its docstring always said.
                self.waits_for_ports += 1
                self._retry_at = now + IDLE_WAIT_S
                return
            self.pending.popleft()
            frames, last = flow_frames(a.size_bytes, self.frame_bytes)
            flow = SendingFlow(a.flow_id, a.size_bytes, frames, last, sock, dst=dst)
            if self.tcp:
                # The header goes in one write with the first bytes: alone (no Nagle) it
                # would be a frame of its own, a full frame's turn at a BMv2 port.
                first = min(a.size_bytes, len(ZEROS) - FLOW_HEADER.size)
                flow.stream = FLOW_HEADER.pack(a.flow_id, 0, a.size_bytes, 0) + ZEROS[:first]
                flow.stream_left = a.size_bytes - first
                if kept:
                    flow.retransmitted_before = tcp_retransmissions(sock)
                self.selector.register(sock, selectors.EVENT_WRITE, flow)
            else:
                self.selector.register(sock, selectors.EVENT_READ, flow)
                self.turns.append(flow)
            self.active[a.flow_id] = flow
            # The flow's start is when it was due: a late sender counts against its FCT.
            self._write(
                {
                    "flow": a.flow_id,
                    "start": self.origin + a.start_s,
                    "late": now - (self.origin + a.start_s),
                    "size": a.size_bytes,
                    "sport": sock.getsockname()[1],
                }
                | ({"kept": True} if kept else {})
            )

    def _connect(self, dst: str, flow_id: int) -> socket.socket:
        """Flow ``flow_id``'s socket, connected to ``dst`` (tcp: connecting); raises
        OSError.  A datagram flow sends from its own port (qcn.core.ecmp.flow_port), so
        its path under per-flow ECMP is the one the simulator computes, and ECN-capable
        (qcn.core.ecmp.TRAFFIC_TOS)."""
        kind = socket.SOCK_STREAM if self.tcp else socket.SOCK_DGRAM
        sock = socket.socket(socket.AF_INET, kind)
        try:
            sock.setblocking(False)
            if self.tcp:
                if self.tcp_congestion:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, self.tcp_congestion)
                # A flow's last short segment goes at once, not after the acknowledgement of
                # what is in flight (Nagle), as traffic generators set it.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                code = sock.connect_ex((dst, self.port))
                if code not in (0, errno.EINPROGRESS):
                    raise OSError(code, os.strerror(code))
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
                # ECN-capable, for a switch that marks (DCQCN's); qcn.core.ecmp says why.
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, TRAFFIC_TOS)
                # (A flow 20,000 numbers before it may still hold the port: shared.)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("", flow_port(flow_id)))
                sock.connect((dst, self.port))
        except OSError:
            sock.close()
            raise
        return sock

    def _idle_connection(self, dst: str) -> socket.socket | None:
        """tcp, kept: an idle connection to ``dst`` still open (one the receiver closed,
        or reset, is dropped), or None."""
        idle = self.idle.get(dst, [])
        while idle:
            sock = idle.pop()
            try:
                if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                    raise OSError(errno.EPROTO, "unexpected bytes from the receiver")
                sock.close()  # (closed by the receiver: b"")
            except BlockingIOError:
                return sock  # open, nothing to read: ready for a flow
            except OSError:
                sock.close()
        return None

    def _close_an_idle_connection(self) -> bool:
        """Out of ports or descriptors: close one idle connection (any receiver's)."""
        for idle in self.idle.values():
            if idle:
                idle.pop(0).close()
                return True
        return False

    def _expire(self, now: float) -> None:
        while self.timeouts and self.timeouts[0][0] <= now:
            _, flow_id, frame = heapq.heappop(self.timeouts)
            flow = self.active.get(flow_id)
            if flow is None or frame not in flow.unacked:
                continue
            if not self.tcp and unsent_bytes(flow.sock) > 0:
                # Frames of this flow are still in this host (its limiter holds them): the
                # timeout counts from leaving the reaction point, as in the simulator, and a
                # copy sent now would only queue behind them (docs/fct.md, "BMv2's drops").
                heapq.heappush(self.timeouts, (now + self.rto_s, flow_id, frame))
                self.timeouts_held += 1
                continue
            flow.unacked.discard(frame)
            had_frames = flow.has_frames
            flow.resend.append(frame)
            flow.retransmitted += 1
            if not had_frames:
                self.turns.append(flow)

    def _send_one(self, flow: SendingFlow, now: float) -> bool:
        """The flow's next frame; False if its socket is full (it waits to be writable)."""
        frame = flow.resend[0] if flow.resend else flow.next_frame
        length = flow.last_frame_bytes if frame == flow.frames - 1 else self.frame_bytes
        earlier = flow.copies.get(frame, 1) if flow.resend else 0
        copies = min(earlier, MAX_COPIES) << COPY_SHIFT  # (saturates: the field's width)
        payload = FLOW_HEADER.pack(flow.flow_id, frame, flow.size, copies)
        payload += ZEROS[: length - ETH_IP_UDP_BYTES - FLOW_HEADER.size]
        try:
            flow.sock.send(payload)
        except BlockingIOError:
            self.selector.modify(flow.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, flow)
            return False
        if flow.resend:
            flow.resend.popleft()
            flow.copies[frame] = earlier + 1
        else:
            flow.next_frame += 1
        flow.unacked.add(frame)
        heapq.heappush(self.timeouts, (now + self.rto_s, flow.flow_id, frame))
        return True

    def _send_round(self, now: float) -> None:
        """Each flow in turn sends one frame."""
        for _ in range(len(self.turns)):
            flow = self.turns.popleft()
            if flow.flow_id not in self.active or not flow.has_frames:
                continue
            if self._send_one(flow, now) and flow.has_frames:
                self.turns.append(flow)

    def _acknowledged(self, sock: socket.socket, flow: SendingFlow | None = None) -> None:
        """Take every acknowledgement waiting in ``sock``: a flow's own socket (in band,
        only its own flow's count) or the out-of-band channel (any flow's)."""
        while True:
            try:
                data = sock.recv(64)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if len(data) < FLOW_HEADER.size:
                continue
            flow_id, frame, _size, flags = FLOW_HEADER.unpack_from(data)
            acked = self.active.get(flow_id) if flow is None else flow
            if (
                flags & FLAG_ACK
                and acked is not None
                and flow_id == acked.flow_id
                and frame in acked.unacked
            ):
                acked.unacked.discard(frame)
                acked.acked += 1
                if flow is None:
                    self._finish_if_done(acked)
        # (A frame that timed out and was acknowledged late is still sent again: its
        # duplicate is counted by the receiver.)

    def _finish_if_done(self, flow: SendingFlow) -> None:
        if flow.acked < flow.frames or flow.flow_id not in self.active:
            return
        self._retire(flow, {"acked": self.clock(), "retransmitted": flow.retransmitted})

    def _retire(self, flow: SendingFlow, end: dict[str, Any], keep: bool = False) -> None:
        """The flow is over (``end`` says how, in its log record): its socket goes, or,
        ``keep``, waits idle for the next flow to the same receiver."""
        del self.active[flow.flow_id]
        self.selector.unregister(flow.sock)
        if keep:
            self.idle.setdefault(flow.dst, []).append(flow.sock)
        else:
            flow.sock.close()
        self._retry_at = 0.0  # (a port is free again)
        self._write({"flow": flow.flow_id, **end})

    def step(self) -> None:
        """Start what is due, resend what timed out, send a round, then handle the sockets'
        acknowledgements and room (waiting for them, or for what falls due, when no flow
        can send)."""
        now = self.clock()
        self._start_due(now)
        self._expire(now)
        self._send_round(now)
        if self.turns:
            wait = 0.0
        else:
            due = [IDLE_WAIT_S]
            start = self.next_start
            if start is not None:
                due.append(start - now)
            if self.timeouts:
                due.append(self.timeouts[0][0] - now)
            wait = max(0.0, min(due))
        for key, events in self.selector.select(wait):
            flow = key.data
            if flow is None:  # the out-of-band acknowledgements
                assert self.acks is not None
                self._acknowledged(self.acks)
                continue
            if self.tcp:
                self._on_stream(flow, events)
                continue
            if events & selectors.EVENT_WRITE:
                self.selector.modify(flow.sock, selectors.EVENT_READ, flow)
                if flow.has_frames:
                    self.turns.append(flow)
            if events & selectors.EVENT_READ:
                self._acknowledged(flow.sock, flow)
                self._finish_if_done(flow)

    def _on_stream(self, flow: SendingFlow, events: int) -> None:
        """tcp: send what the connection takes; at the receiver's answer, the flow is done
        (its connection kept for the next flow, or closed)."""
        try:
            if events & selectors.EVENT_WRITE:
                while flow.stream or flow.stream_left:
                    if flow.stream:
                        flow.stream = flow.stream[flow.sock.send(flow.stream) :]
                    else:
                        chunk = min(flow.stream_left, len(ZEROS))
                        flow.stream_left -= flow.sock.send(memoryview(ZEROS)[:chunk])
                if not self.keep_connections:
                    flow.sock.shutdown(socket.SHUT_WR)
                self.selector.modify(flow.sock, selectors.EVENT_READ, flow)
            elif events & selectors.EVENT_READ:
                data = flow.sock.recv(FLOW_HEADER.size - len(flow.reply))
                if not data:
                    raise OSError(errno.ECONNRESET, "closed by the receiver")
                flow.reply += data
                if len(flow.reply) < FLOW_HEADER.size:
                    return
                flow_id, _frame, _size, flags = FLOW_HEADER.unpack(flow.reply)
                if flow_id != flow.flow_id or not flags & FLAG_ACK:
                    raise OSError(errno.EPROTO, "the receiver answered for another flow")
                retransmitted = tcp_retransmissions(flow.sock) - flow.retransmitted_before
                end = {"acked": self.clock(), "retransmitted": retransmitted}
                self._retire(flow, end, keep=self.keep_connections)
        except BlockingIOError:
            return  # (it waits for room)
        except OSError as e:  # refused or reset: the flow cannot finish
            self._retire(flow, {"stopped": self.clock(), "error": e.strerror})

    def close(self) -> None:
        """Stop: a record for every flow still active, then close everything (every socket,
        even when the log can no longer be written)."""
        now = self.clock()
        for flow in list(self.active.values()):
            record: dict[str, object] = {"stopped": now, "retransmitted": flow.retransmitted}
            if self.tcp:
                # Where the connection was stuck: its state (SYN_SENT, ESTABLISHED, ...) and
                # how many timeouts in a row it was backing off from.
                with contextlib.suppress(OSError):
                    record.update(tcp_where(flow.sock, since=flow.retransmitted_before))
            with contextlib.suppress(OSError):
                self._retire(flow, record)
        for idle in self.idle.values():
            for sock in idle:
                sock.close()
        self.idle.clear()
        self.selector.close()


TCP_INFO_TOTAL_RETRANS = 100
"""Where Linux's ``struct tcp_info`` keeps ``tcpi_total_retrans`` (a u32): after 8 one-byte
fields and 23 u32s (include/uapi/linux/tcp.h)."""


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes ``sock`` has sent that have not left the host (SIOCOUTQ: a datagram socket's
    buffers are freed once the frame leaves the qdiscs for the link)."""
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(4)), "little")
    except OSError:
        return 0


def tcp_retransmissions(sock: socket.socket) -> int:
    """The segments TCP sent again on this connection."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return int.from_bytes(info[TCP_INFO_TOTAL_RETRANS:104], sys.byteorder)


TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 7: "CLOSE"}
"""The states of include/net/tcp_states.h a sender's connection can be stopped in."""


def tcp_where(sock: socket.socket, since: int = 0) -> dict[str, object]:
    """A stopped connection's state, its backoff (``tcpi_backoff``: timeouts in a row) and
    the segments it sent again, beyond ``since`` (struct tcp_info: state, ca_state,
    retransmits, probes, backoff are its first bytes)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return {
        "tcp_state": TCP_STATES.get(info[0], str(info[0])),
        "tcp_backoff": info[4],
        "retransmitted": tcp_retransmissions(sock) - since,
    }


def max_active_flows() -> int:
    """:data:`MAX_ACTIVE_FLOWS`, within the process's file limit (raised to its maximum)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    if soft == resource.RLIM_INFINITY:
        return MAX_ACTIVE_FLOWS
    return max(1, min(MAX_ACTIVE_FLOWS, soft - 64))  # (room for the log, the selector...)


ACK_BUFFER_BYTES = 16 << 20
"""The out-of-band channel's receive buffer: room for the acknowledgements of everything in
flight while the sender waits for the CPU (an acknowledgement lost there is a spurious
retransmission)."""


DGRAM_QLEN = Path("/proc/sys/net/unix/max_dgram_qlen")
ACK_QUEUE_DATAGRAMS = 65536


def ack_channel(path: Path) -> socket.socket:
    """The sender's end of the out-of-band acknowledgements: a Unix datagram socket at
    ``path`` (docs/fct.md, "Transport"), which the receivers on other hosts reach through
    the file system every Mininet host shares."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    # A Unix datagram socket queues at most net.unix.max_dgram_qlen datagrams (10 by
    # default; a socket takes its namespace's value when it is made), and a receiver that
    # finds it full drops the acknowledgement: a spurious retransmission.  As root, in a
    # Mininet host's own network namespace, the sender raises it there.
    with contextlib.suppress(OSError):
        DGRAM_QLEN.write_text(str(ACK_QUEUE_DATAGRAMS))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, ACK_BUFFER_BYTES)
    sock.bind(str(path))
    sock.setblocking(False)
    return sock


def read_host_flows(path: Path) -> list[HostFlow]:
    """A host's flows: CSV rows ``flow,start_s,size_bytes`` (with that header), each checked
    (:func:`qcn.core.flows.check_host_flow`).  Raises FlowFieldError naming the file and
    line."""
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in HOST_FLOW_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise FlowFieldError(f"{path}: no column {', '.join(missing)} (a header "
                                     f"{','.join(HOST_FLOW_COLUMNS)} is needed)")  # fmt: skip
            return [_host_flow(path, reader.line_num, row) for row in reader]
    except OSError as e:
        raise FlowFieldError(f"{path}: cannot read the flows ({e.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise FlowFieldError(f"{path}: not a CSV of flows ({e})") from None


HOST_FLOW_COLUMNS = ("flow", "start_s", "size_bytes")


def _host_flow(path: Path, line: int, row: dict[str, str]) -> HostFlow:
    try:
        dst = row.get("dst") or ""
        flow = HostFlow(
            int(row["flow"]),
            float(row["start_s"]),
            int(row["size_bytes"]),
            str(ipaddress.IPv4Address(dst)) if dst else "",
        )
    except ipaddress.AddressValueError:
        raise FlowFieldError(
            f"{path}:{line}: dst {row.get('dst')!r} is not an IPv4 address"
        ) from None
    except (TypeError, ValueError):
        raise FlowFieldError(
            f"{path}:{line}: expected a whole flow id, a start time in s and a whole size in "
            f"bytes (got {row['flow']!r}, {row['start_s']!r}, {row['size_bytes']!r})"
        ) from None
    try:
        check_host_flow(flow.flow_id, flow.start_s, flow.size_bytes)
    except FlowFieldError as e:
        raise FlowFieldError(f"{path}:{line}: {e}") from None
    return flow


def write_host_flows(path: Path, flows: list[HostFlow]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["flow", "start_s", "size_bytes", "dst"])
        for h in flows:
            w.writerow([h.flow_id, repr(h.start_s), h.size_bytes, h.dst])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("flows", type=Path, help="CSV of flow,start_s,size_bytes[,dst]")
    ap.add_argument(
        "--dst", default="", help="the receiver's IPv4 address (for rows without a dst)"
    )
    ap.add_argument("--port", type=int, default=5002)
    ap.add_argument("--frame-bytes", type=int, default=1500)
    ap.add_argument("--rto", type=float, default=1.0, help="retransmission timeout, s")
    ap.add_argument("--origin", type=float, help="monotonic time of start_s 0 (default: now)")
    ap.add_argument("--log", type=Path, required=True, help="where the JSON lines go")
    ap.add_argument("--transport", choices=TRANSPORTS, default=TRANSPORTS[0])
    ap.add_argument(
        "--tcp-congestion",
        default="",
        help="tcp: each socket's congestion control, e.g. cubic (default: the host's)",
    )
    ap.add_argument(
        "--tcp-connections",
        choices=TCP_CONNECTIONS,
        default=TCP_CONNECTIONS[0],
        help="tcp: keep connections for the next flow, or one connection per flow",
    )
    ap.add_argument(
        "--ack-socket",
        type=Path,
        help="frames: take the receivers' acknowledgements on this Unix socket, out of band",
    )
    args = ap.parse_args(argv)
    try:
        check_transport(frame_bytes=args.frame_bytes, rto_s=args.rto, port=args.port)
        dst = str(ipaddress.IPv4Address(args.dst)) if args.dst else ""
        if args.origin is not None and not math.isfinite(args.origin):
            raise FlowFieldError(f"--origin must be a finite time (got {args.origin})")
        arrivals = read_host_flows(args.flows)
        if not dst and any(not a.dst for a in arrivals):
            raise FlowFieldError(f"{args.flows}: a flow has no dst column and no --dst is given")
    except (FlowFieldError, ipaddress.AddressValueError) as e:
        print(f"flow sender: error: {e}", file=sys.stderr)
        return 2
    stopping = threading.Event()
    stop_on_signals(stopping.set)
    try:
        with args.log.open("a") as log:
            sender = FlowSender(
                arrivals,
                dst=dst,
                port=args.port,
                frame_bytes=args.frame_bytes,
                rto_s=args.rto,
                origin=args.origin if args.origin is not None else time.monotonic(),
                log=log,
                transport=args.transport,
                ack_socket=args.ack_socket,
                tcp_congestion=args.tcp_congestion,
                tcp_connections=args.tcp_connections,
            )
            print(json.dumps({"flows": len(arrivals)}), flush=True)  # ready
            try:
                while not stopping.is_set() and not sender.done:
                    sender.step()
            finally:
                sender.close()
    except OSError as e:
        # The log (a missing directory, a full disk) or the network (no route).
        where = f" {e.filename}" if e.filename else ""
        print(f"flow sender: error:{where} {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
