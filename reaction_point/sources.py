"""Traffic sources for the seeds' workloads, sending UDP through the host's kernel limiters.

- constant: a fixed rate;
- bernoulli: i.i.d. frames, each frame slot (at line rate) carries a frame with probability
  ``load`` (seeds 002/003: "i.i.d. Bernoulli arrivals, fixed frame size 1500 B");
- onoff: exponential on and off periods (seed 004 #5), at ``rate_bps`` while on.

Each frame goes to one destination, or to one drawn uniformly from a set.  Frames are UDP
datagrams sized so that the Ethernet frame is ``frame_bytes``; they traverse the kernel's
egress qdisc, so the reaction point's HTB limiters shape them like any application's.  Each
payload starts with the frame's sequence number (:data:`SEQUENCE`), so a receiver counts
losses exactly (:mod:`qcn.topologies.sink`).  Every frame is ECN-capable, ECT(0)
(:data:`qcn.core.ecmp.TRAFFIC_TOS`): a switch that marks ECN (DCQCN) may mark it CE.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import math
import random
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from qcn.core import patterns as traffic_patterns
from qcn.core.ecmp import DATA_PORT, SOURCE_PORT, TRAFFIC_TOS
from qcn.core.errors import QcnError
from qcn.core.errors import report as report_error
from qcn.core.patterns import Kind
from qcn.core.signals import InterruptBetweenSteps

ETH_IP_UDP_HEADERS = 14 + 20 + 8
SEQUENCE = struct.Struct("!Q")
"""The first payload bytes of every frame: its sequence number from this source, from 0."""
PATTERNS = traffic_patterns.on_mininet(Kind.HOST_SOURCE)
"""The patterns a host's source sends, as qcn.core.patterns declares them (the Mininet
backend runs a scenario's by them); :func:`_send_until` generates each."""
MAX_DURATION_S = 7 * 24 * 3600.0
STALL_S = 0.005
"""A sleep that overruns by more than this (and a frame time) was the process not being run:
an emulation artefact.  Sending what fell due meanwhile back to back would be a burst the
modelled source never makes, and a QCN congestion point rightly punishes it; the source
skips it instead.  Falling behind because a limiter held a send back is different: that
backlog is the source's adapter queue, and it drains as the limiter allows."""


@dataclass(frozen=True)
class SourceSpec:
    destinations: tuple[str, ...]
    """IPv4 destinations; each frame goes to one drawn uniformly."""
    pattern: str = "constant"
    rate_bps: float = 10e6
    """constant/onoff: sending rate; bernoulli: the line rate the slots are counted at."""
    load: float = 1.0
    """bernoulli: probability that a frame slot carries a frame."""
    mean_on_s: float = 0.020
    mean_off_s: float = 0.020
    frame_bytes: int = 1500
    duration_s: float = 10.0
    port: int = DATA_PORT
    source_port: int = SOURCE_PORT
    """The UDP port it sends from, so per-flow ECMP's hash is known (qcn.core.ecmp; 0: the
    kernel's choice)."""

    def validate(self) -> None:
        if not self.destinations:
            raise ValueError("at least one destination is needed")
        for name in ("rate_bps", "load", "mean_on_s", "mean_off_s", "duration_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number (got {value!r})")
        if not MIN_RATE_BPS <= self.rate_bps <= MAX_RATE_BPS:
            raise ValueError(
                f"rate must be in [{MIN_RATE_BPS:g}, {MAX_RATE_BPS:g}] b/s (got {self.rate_bps:g})"
            )
        if not 0 < self.duration_s <= MAX_DURATION_S:
            raise ValueError(
                f"duration must be in (0, {MAX_DURATION_S:g}] s (got {self.duration_s})"
            )
        if not 1 <= self.port <= 65535:
            raise ValueError(f"port must be in [1, 65535] (got {self.port})")
        if not 0 <= self.source_port <= 65535:
            raise ValueError(f"source port must be in [0, 65535] (got {self.source_port})")
        if not MIN_LOAD <= self.load <= 1:
            raise ValueError(f"load must be in [{MIN_LOAD:g}, 1] (got {self.load:g})")
        if not ETH_IP_UDP_HEADERS + SEQUENCE.size <= self.frame_bytes <= 9000:
            lowest = ETH_IP_UDP_HEADERS + SEQUENCE.size
            raise ValueError(f"frame size must be in [{lowest}, 9000]")
        for mean in (self.mean_on_s, self.mean_off_s):
            if not MIN_MEAN_S <= mean <= MAX_DURATION_S:
                raise ValueError(
                    f"on/off means must be in [{MIN_MEAN_S * 1e3:g} ms, {MAX_DURATION_S:g} s] "
                    f"(got {mean * 1e3:g} ms)"
                )
        for d in self.destinations:
            try:
                address = ipaddress.IPv4Address(d)
            except ValueError:
                raise ValueError(f"destination {d!r} is not an IPv4 address") from None
            if address.is_multicast or address.is_unspecified or d == "255.255.255.255":
                raise ValueError(f"destination {d}: a unicast host address is needed")


MIN_RATE_BPS, MAX_RATE_BPS = 1e3, 1e12
MIN_LOAD = 1e-6
MIN_MEAN_S = 1e-6
"""The inputs a source takes: beyond them its gaps overflow or it never sends."""


def empty_slots_before_frame(load: float, u: float) -> int:
    """Bernoulli arrivals: how many empty slots precede the next busy one (geometric), for
    ``u`` uniform in (0, 1]; one draw per frame instead of one per slot."""
    if load >= 1.0:
        return 0
    return math.floor(math.log(u) / math.log1p(-load))


@dataclass
class SourceReport:
    sent_frames: int = 0
    sent_bytes: int = 0
    blocked: int = 0
    """Sends the kernel refused because the limiter's queue was full (ENOBUFS)."""
    elapsed_s: float = 0.0
    """From the first frame to the end; never much beyond the duration, since a send that a
    full limiter holds back waits at most until the end."""
    max_lag_s: float = 0.0
    """The furthest behind its schedule the source fell (it was not scheduled in time, or
    a limiter held a send back): frames that were due then leave back to back."""
    late_frames: int = 0
    """Frames sent more than one frame time behind their schedule."""
    stalled_s: float = 0.0
    """Time the source was not run when it should have sent (a sleep that overran by more
    than :data:`STALL_S`): the frames due then were never offered, not sent late."""
    interrupted: bool = False
    """Stopped by Ctrl-C (SIGINT) before its duration: the figures are up to then."""


def run_source(
    spec: SourceSpec,
    rng: random.Random | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SourceReport:
    """Send ``spec``'s traffic for its duration; return what was sent."""
    spec.validate()
    rng = rng or random.Random()
    report = SourceReport()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        # ECN-capable, for a switch that marks (DCQCN's); qcn.core.ecmp says why always.
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, TRAFFIC_TOS)
        if spec.source_port:
            # Another source on the host may send from it too: nothing is received on it.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("", spec.source_port))
        start = clock()
        try:
            with InterruptBetweenSteps() as steps:
                _send_until(
                    spec, sock, report, steps, rng=rng, clock=clock, sleep=sleep, start=start
                )
        except KeyboardInterrupt:
            report.interrupted = True
        report.elapsed_s = clock() - start
    return report


def _send_until(
    spec: SourceSpec,
    sock: socket.socket,
    report: SourceReport,
    steps: InterruptBetweenSteps,
    *,
    rng: random.Random,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    start: float,
) -> None:
    """run_source's loop: ``spec``'s frames from ``start`` to its end, counted in ``report``."""
    payload = bytearray(spec.frame_bytes - ETH_IP_UDP_HEADERS)
    slot_s = spec.frame_bytes * 8 / spec.rate_bps
    end = start + spec.duration_s
    t = start
    on_until = start + rng.expovariate(1 / spec.mean_on_s) if spec.pattern == "onoff" else end
    while t < end:
        if spec.pattern == "onoff" and t >= on_until:
            t = on_until + rng.expovariate(1 / spec.mean_off_s)
            on_until = t + rng.expovariate(1 / spec.mean_on_s)
            continue
        if spec.pattern == "bernoulli":
            t += slot_s * empty_slots_before_frame(spec.load, 1.0 - rng.random())
            if t >= end:
                break
        delay = t - clock()
        if delay > 0:
            sleep(delay)
            overrun = clock() - t
            if overrun > max(STALL_S, slot_s):
                report.stalled_s += overrun
                t += overrun
        lag = clock() - t
        if lag > slot_s:
            report.late_frames += 1
            report.max_lag_s = max(report.max_lag_s, lag)
        dst = spec.destinations[rng.randrange(len(spec.destinations))]
        SEQUENCE.pack_into(payload, 0, report.sent_frames)
        # A limiter slower than the source fills the socket's send buffer and a send
        # then blocks: never past the end of the run.
        remaining = end - clock()
        if remaining <= 0:
            break
        sock.settimeout(remaining)
        # A Ctrl-C between the send and its count would leave the report one frame short.
        steps.busy = True
        try:
            sock.sendto(payload, (dst, spec.port))
            report.sent_frames += 1
            report.sent_bytes += spec.frame_bytes
        except TimeoutError:
            break
        except OSError as e:
            if e.errno != errno.ENOBUFS:
                raise
            report.blocked += 1
        finally:
            steps.step_done()
        t += slot_s


# -- the command line (qcn rp send; python -m qcn.reaction_point.sources) -----------------
# Here, not in qcn.reaction_point.cli, so that a run's ten sources start in a tenth of the time:
# the whole `qcn` command line imports the controller and the daemon (scapy, pyroute2,
# finsy), a second of CPU each, all of them due at once at the run's start.

SEND_DESCRIPTION = (
    "Send UDP traffic, through the kernel and so through the daemon's limiters, each frame "
    "numbered so that the sink counts what was lost."
)


class SendUsageError(QcnError, ValueError):
    """A mistake in the `qcn rp send` command line, reported in one line."""


def add_send_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dst", required=True, help="destination IPv4 address(es), comma-separated"
    )
    parser.add_argument(
        "--pattern",
        choices=PATTERNS,
        default="constant",
        help="constant rate, Bernoulli slots at the line rate, or on/off periods "
        "(default: %(default)s)",
    )
    parser.add_argument("--rate-bps", type=float, default=10e6, help="rate (bernoulli: line rate)")
    parser.add_argument("--load", type=float, default=1.0, help="bernoulli: slot probability")
    parser.add_argument("--mean-on-ms", type=float, default=20.0, help="onoff: mean on period")
    parser.add_argument("--mean-off-ms", type=float, default=20.0, help="onoff: mean off period")
    parser.add_argument(
        "--frame-bytes", type=int, default=1500, help="Ethernet frame size (default: %(default)s)"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds")
    parser.add_argument(
        "--port", type=int, default=DATA_PORT, help="UDP destination port (default: %(default)s)"
    )
    parser.add_argument(
        "--source-port",
        type=int,
        default=SOURCE_PORT,
        help="UDP source port, which per-flow ECMP hashes (0: the kernel's; default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, help="random seed of the arrivals (default: random)")
    parser.add_argument(
        "--start-at",
        type=float,
        metavar="T",
        help="wait until the monotonic clock (CLOCK_MONOTONIC, seconds) reaches T, to start "
        "several sources together",
    )
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE",
        help="write what was sent, and how long the source was not run, as JSON (also when "
        "interrupted)",
    )


START_AT_HORIZON_S = 3600.0
"""--start-at is a time.monotonic() value at most this far from now."""


def send(args: argparse.Namespace) -> int:
    """`qcn rp send` (and ``python -m qcn.reaction_point.sources``)."""
    if not 1 <= args.port <= 65535:
        raise SendUsageError(f"--port must be in [1, 65535] (got {args.port})")
    if not 0 <= args.source_port <= 65535:
        raise SendUsageError(f"--source-port must be in [0, 65535] (got {args.source_port})")
    if args.start_at is not None and not (
        math.isfinite(args.start_at) and abs(args.start_at - time.monotonic()) <= START_AT_HORIZON_S
    ):
        raise SendUsageError(
            f"--start-at must be a time.monotonic() value within {START_AT_HORIZON_S:g} s of "
            f"now ({time.monotonic():.1f}; got {args.start_at:g})"
        )
    spec = SourceSpec(
        destinations=tuple(d.strip() for d in args.dst.split(",") if d.strip()),
        pattern=args.pattern,
        rate_bps=args.rate_bps,
        load=args.load,
        mean_on_s=args.mean_on_ms / 1e3,
        mean_off_s=args.mean_off_ms / 1e3,
        frame_bytes=args.frame_bytes,
        duration_s=args.duration,
        port=args.port,
        source_port=args.source_port,
    )
    try:
        spec.validate()
    except (ValueError, OSError) as e:
        raise SendUsageError(str(e)) from None
    if args.start_at is not None:
        time.sleep(max(0.0, args.start_at - time.monotonic()))
    try:
        report = run_source(spec, random.Random(args.seed))
    except OSError as e:
        # No route, a network that is down: the kernel's reason, in one line.
        raise SendUsageError(f"cannot send to {args.dst}: {e.strerror or e}") from None
    if args.report is not None:
        try:
            args.report.write_text(json.dumps(asdict(report)) + "\n")
        except OSError as e:
            why = f"--report {args.report}: cannot write it ({e.strerror})"
            raise SendUsageError(why) from None
    print(
        f"sent {report.sent_frames} frames ({report.sent_bytes} B) in {report.elapsed_s:.2f} s "
        f"({spec.duration_s:g} s asked); {report.blocked} refused by a full limiter queue; "
        f"{report.late_frames} sent late (at most {report.max_lag_s * 1e3:.1f} ms behind); "
        f"not run for {report.stalled_s * 1e3:.0f} ms in all (what fell due then skipped)"
        + ("; interrupted" if report.interrupted else "")
    )
    return 130 if report.interrupted else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="qcn rp send", description=SEND_DESCRIPTION)
    add_send_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return send(args)
    except QcnError as e:
        return report_error(e)


if __name__ == "__main__":
    sys.exit(main())
