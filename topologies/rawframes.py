"""Raw Ethernet frames in and out of an interface, for tests and benchmarks.

A small program the harnesses start inside a namespace (``ip netns exec NS python -m
qcn.topologies.rawframes ...``), so that what it does is linted and typed like the rest:

    send IFACE [--gap S]                      hex frames on stdin, sent once each
    blast IFACE --count N [--gap S]           hex frames on stdin, sent round-robin N
                                              times; prints the rate achieved (frames/s)
    pace IFACE --rate PPS --duration S        one hex frame on stdin at PPS; prints the count
    capture IFACE --ethertype T --seconds S   prints "ready", then each frame received (hex)
            [--count N] [--idle S]            until N came, or S passed idle after the first
    arrivals IFACE --ethertype T --seconds S  prints "ready", then when each frame arrived
                                              (the kernel's receive time, CLOCK_MONOTONIC s)
    count IFACE --ethertype T [--idle S]      prints "ready", then "N PPS" once the
          [--seconds S]                       interface has been idle for S (or S passed)
    drain IFACE --ethertype T --count N       prints "ready", then the frames/s of reading
                                              N frames (busy time only: a bare receiver)

``T`` is a number or a name: ``cnm`` (the CNM EtherType of :mod:`qcn.core.frames`),
``ipv4``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import math
import select
import socket
import sys
import time
from collections.abc import Callable, Sequence

from qcn.core.errors import QcnError, report
from qcn.core.frames import ETHERTYPE_CNM
from qcn.reaction_point.packet_socket import ANCILLARY_BYTES, rx_timestamp, stamp_receptions

ETHERTYPES = {"cnm": ETHERTYPE_CNM, "ipv4": 0x0800}
RCVBUF_BYTES = 16 << 20
RECV_BATCH = 256


class FramesError(QcnError):
    """An interface that cannot be used, or no frames to send: one line, not a traceback."""


def _ethertype(text: str) -> int:
    return ETHERTYPES[text] if text in ETHERTYPES else int(text, 0)


def _frames_from_stdin() -> list[bytes]:
    try:
        frames = [f for f in (bytes.fromhex(h) for h in sys.stdin.read().split()) if len(f) >= 14]
    except ValueError:
        raise FramesError("stdin: frames are hex, one a line (or space-separated)") from None
    if not frames:
        raise FramesError("no frame on stdin: give each as hex, at least 14 bytes, one a line")
    return frames


def _packet_socket(iface: str, protocol: int, address: tuple[str, int]) -> socket.socket:
    """An AF_PACKET socket bound to ``iface``; an interface that is not there, or no root,
    is one line naming it (the kernel's ENODEV was a traceback)."""
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, protocol)
    except PermissionError:
        raise FramesError(f"{iface}: raw sockets need root") from None
    try:
        s.bind(address)
    except OSError as e:
        s.close()
        if e.errno in (errno.ENODEV, errno.EINVAL, errno.ENAMETOOLONG):
            raise FramesError(f"no interface named {iface} (ip link lists them)") from None
        raise FramesError(f"{iface}: {e.strerror}") from None
    return s


def _sender(iface: str) -> socket.socket:
    return _packet_socket(iface, 0, (iface, 0))


def _receiver(iface: str, ethertype: int) -> socket.socket:
    s = _packet_socket(iface, socket.htons(ethertype), (iface, ethertype))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    return s


def send(iface: str, gap_s: float) -> None:
    with _sender(iface) as s:
        for f in _frames_from_stdin():
            s.send(f)
            if gap_s:
                time.sleep(gap_s)


def blast(iface: str, count: int, gap_s: float) -> None:
    with _sender(iface) as s:
        frames = _frames_from_stdin()
        began = time.monotonic()
        for i in range(count):
            s.send(frames[i % len(frames)])
            if gap_s:
                time.sleep(gap_s)
        print(count / (time.monotonic() - began))


def pace(iface: str, rate_pps: float, duration_s: float) -> None:
    sent = 0
    with _sender(iface) as s:
        frame = _frames_from_stdin()[0]
        # Said on stderr (stdout is the count): a harness starts its clock here, not when it
        # started this process, whose imports take a second on a busy machine.
        print("pacing", file=sys.stderr, flush=True)
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


def count(iface: str, ethertype: int, idle_s: float, seconds: float | None = None) -> None:
    with _receiver(iface, ethertype) as s:
        n, first, last = 0, 0.0, 0.0
        print("ready", flush=True)
        end = math.inf if seconds is None else time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            s.settimeout(min(idle_s, left))  # idle, or the time is up: either ends it
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


ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "send": ("send the hex frames on stdin once each", ("gap",)),
    "blast": (
        "send the hex frames on stdin round-robin COUNT times; print the rate achieved",
        ("count", "gap"),
    ),
    "pace": (
        "send the one hex frame on stdin at RATE for DURATION; print how many",
        ("rate", "duration"),
    ),
    "capture": (
        'print "ready", then each frame received (hex) for SECONDS, or until COUNT frames '
        "came, or until IDLE seconds passed without one after the first",
        ("ethertype", "seconds", "count", "idle"),
    ),
    "arrivals": (
        'print "ready", then when each frame arrived (the kernel\'s receive time, '
        "CLOCK_MONOTONIC seconds) for SECONDS",
        ("ethertype", "seconds"),
    ),
    "count": (
        'print "ready", then "FRAMES FRAMES_PER_S" once the interface has been idle for IDLE '
        "(or SECONDS have passed)",
        ("ethertype", "idle", "seconds"),
    ),
    "drain": (
        'print "ready", then the frames/s of reading COUNT frames (busy time only)',
        ("ethertype", "count"),
    ),
}
"""Each action: its description, and the options it takes (OPTIONS' names)."""

OPTIONS: dict[str, tuple[Callable[[str], object], object, str]] = {
    "gap": (float, 0.0, "seconds between frames (default: %(default)s)"),
    "count": (int, 1, "frames (default: %(default)s)"),
    "rate": (float, 1000.0, "frames per second (default: %(default)s)"),
    "duration": (float, 1.0, "seconds to send for (default: %(default)s)"),
    "ethertype": (
        _ethertype,
        ETHERTYPE_CNM,
        "the EtherType to receive: a number, cnm or ipv4 (default: cnm)",
    ),
    "seconds": (float, 1.0, "seconds to receive for (default: %(default)s)"),
    "idle": (float, 2.0, "seconds without a frame that end the count (default: %(default)s)"),
}
"""Each option: its type, default and help."""

CAPTURE_ENDS = {
    "count": "end the capture after this many frames (default: none)",
    "idle": "end the capture this many seconds after the last frame (default: none)",
}
"""capture's own meaning of --count and --idle: further ends of the capture."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cmds = ap.add_subparsers(dest="cmd", metavar="ACTION", required=True)
    for name, (text, options) in ACTIONS.items():
        p = cmds.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("iface", help="the interface, e.g. h1-eth0")
        for option in options:
            kind, default, help_text = OPTIONS[option]
            if (name, option) == ("count", "seconds"):  # no limit unless given
                default, help_text = None, "the longest to count for (default: until idle)"
            if name == "capture" and option in CAPTURE_ENDS:  # no end but SECONDS by default
                default, help_text = None, CAPTURE_ENDS[option]
            p.add_argument(f"--{option}", type=kind, default=default, help=help_text)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        if a.cmd == "send":
            send(a.iface, a.gap)
        elif a.cmd == "blast":
            blast(a.iface, a.count, a.gap)
        elif a.cmd == "pace":
            pace(a.iface, a.rate, a.duration)
        elif a.cmd == "capture":
            capture(a.iface, a.ethertype, a.seconds, a.count, a.idle)
        elif a.cmd == "arrivals":
            arrivals(a.iface, a.ethertype, a.seconds)
        elif a.cmd == "count":
            count(a.iface, a.ethertype, a.idle, a.seconds)
        else:
            drain(a.iface, a.ethertype, a.count)
    except QcnError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
