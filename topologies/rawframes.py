"""Raw Ethernet frames in and out of an interface, for tests and benchmarks.

A small program the harnesses start inside a namespace (``ip netns exec NS python -m
topologies.rawframes ...``), so that what it does is linted and typed like the rest:

    send IFACE [--gap S]                      hex frames on stdin, sent once each
    blast IFACE --count N [--gap S]           hex frames on stdin, sent round-robin N
                                              times; prints the rate achieved (frames/s)
    pace IFACE --rate PPS --duration S        one hex frame on stdin at PPS; prints the count
    capture IFACE --ethertype T --seconds S   prints "ready", then each frame received (hex)
            [--count N] [--idle S]            until N came, or S passed idle after the first
    arrivals IFACE --ethertype T --seconds S  prints "ready", then when each frame arrived
                                              (the kernel's receive time, CLOCK_MONOTONIC s)
    count IFACE --ethertype T [--idle S]      prints "ready", then "N PPS" once the
                                              interface has been idle for S
    drain IFACE --ethertype T --count N       prints "ready", then the frames/s of reading
                                              N frames (busy time only: a bare receiver)

``T`` is a number or a name: ``cnm`` (the CNM EtherType of :mod:`qcn.core.frames`),
``ipv4``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import select
import socket
import sys
import time
from collections.abc import Sequence

from qcn.core.frames import ETHERTYPE_CNM
from reaction_point.packet_socket import ANCILLARY_BYTES, rx_timestamp, stamp_receptions

ETHERTYPES = {"cnm": ETHERTYPE_CNM, "ipv4": 0x0800}
RCVBUF_BYTES = 16 << 20
RECV_BATCH = 256


def _ethertype(text: str) -> int:
    return ETHERTYPES[text] if text in ETHERTYPES else int(text, 0)


def _frames_from_stdin() -> list[bytes]:
    return [f for f in (bytes.fromhex(h) for h in sys.stdin.read().split()) if len(f) >= 14]


def _sender(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    return s


def _receiver(iface: str, ethertype: int) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    s.bind((iface, ethertype))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    return s


def send(iface: str, gap_s: float) -> None:
    with _sender(iface) as s:
        for f in _frames_from_stdin():
            s.send(f)
            if gap_s:
                time.sleep(gap_s)


def blast(iface: str, count: int, gap_s: float) -> None:
    frames = _frames_from_stdin()
    with _sender(iface) as s:
        began = time.monotonic()
        for i in range(count):
            s.send(frames[i % len(frames)])
            if gap_s:
                time.sleep(gap_s)
        print(count / (time.monotonic() - began))


def pace(iface: str, rate_pps: float, duration_s: float) -> None:
    (frame,) = _frames_from_stdin()[:1]
    sent = 0
    with _sender(iface) as s:
        began = time.perf_counter()
        while (now := time.perf_counter() - began) < duration_s:
            due = int(now * rate_pps)
            while sent < due:
                # A full interface queue refuses the frame: it is lost, like any other.
                with contextlib.suppress(OSError):
                    s.send(frame)
                sent += 1
            time.sleep(0.0005)
    print(sent)


def capture(
    iface: str,
    ethertype: int,
    seconds: float,
    count: int | None = None,
    idle_s: float | None = None,
) -> None:
    """Print each frame received for ``seconds``, or until ``count`` frames came, or until
    ``idle_s`` passed without one after the first: a harness on a busy machine waits for
    what it expects rather than for a window that may close before the frames arrive."""
    got = 0
    with _receiver(iface, ethertype) as s:
        s.settimeout(0.2)
        print("ready", flush=True)
        end = time.monotonic() + seconds
        last = math.inf
        while (now := time.monotonic()) < end and got != count:
            if idle_s is not None and now - last > idle_s:
                break
            with contextlib.suppress(TimeoutError):
                print(s.recv(2048).hex(), flush=True)
                got += 1
                last = time.monotonic()


def arrivals(iface: str, ethertype: int, seconds: float) -> None:
    times = []
    with _receiver(iface, ethertype) as s:
        stamp_receptions(s)
        s.settimeout(0.2)
        # The kernel stamps frames in CLOCK_REALTIME: its offset to CLOCK_MONOTONIC, once.
        offset = time.monotonic() - time.time()
        print("ready", flush=True)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(TimeoutError):
                _, anc, _, _ = s.recvmsg(2048, ANCILLARY_BYTES)
                rx = rx_timestamp(anc)
                if rx is not None:
                    times.append(rx + offset)
    print("\n".join(f"{t:.6f}" for t in times), flush=True)


def count(iface: str, ethertype: int, idle_s: float) -> None:
    with _receiver(iface, ethertype) as s:
        s.settimeout(idle_s)
        n, first, last = 0, 0.0, 0.0
        print("ready", flush=True)
        while True:
            try:
                s.recv(2048)
            except TimeoutError:
                break
            last = time.monotonic()
            first = first or last
            n += 1
    print(n, (n - 1) / (last - first) if n > 1 else 0.0)


def drain(iface: str, ethertype: int, frames: int, timeout_s: float = 30.0) -> None:
    with _receiver(iface, ethertype) as s:
        s.setblocking(False)
        got, busy = 0, 0.0
        print("ready", flush=True)
        deadline = time.monotonic() + timeout_s
        while got < frames and time.monotonic() < deadline:
            if not select.select([s], [], [], 0.5)[0]:
                continue
            began = time.perf_counter()
            for _ in range(RECV_BATCH):
                try:
                    s.recvmsg(2048, 64)
                except BlockingIOError:
                    break
                got += 1
            busy += time.perf_counter() - began
    print(got / busy if busy else 0.0, got)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cmds = parser.add_subparsers(dest="cmd", required=True)
    for name in ("send", "blast", "pace", "capture", "arrivals", "count", "drain"):
        p = cmds.add_parser(name)
        p.add_argument("iface")
        p.add_argument("--gap", type=float, default=0.0, help="seconds between frames")
        p.add_argument("--count", type=int, default=None)
        p.add_argument("--rate", type=float, default=1000.0, help="frames/s")
        p.add_argument("--duration", type=float, default=1.0)
        p.add_argument("--ethertype", type=_ethertype, default=ETHERTYPE_CNM)
        p.add_argument("--seconds", type=float, default=1.0)
        p.add_argument("--idle", type=float, default=None)
    a = parser.parse_args(argv)
    if a.cmd == "send":
        send(a.iface, a.gap)
    elif a.cmd == "blast":
        blast(a.iface, a.count or 1, a.gap)
    elif a.cmd == "pace":
        pace(a.iface, a.rate, a.duration)
    elif a.cmd == "capture":
        capture(a.iface, a.ethertype, a.seconds, a.count, a.idle)
    elif a.cmd == "arrivals":
        arrivals(a.iface, a.ethertype, a.seconds)
    elif a.cmd == "count":
        count(a.iface, a.ethertype, 2.0 if a.idle is None else a.idle)
    else:
        drain(a.iface, a.ethertype, a.count or 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
