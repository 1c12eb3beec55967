"""Hold benchmark: how soon a switch port that honours PAUSE stops, and resumes, on BMv2.

    python -m bench.hold_bench [--trials N] [--link-mbps R] [--frame BYTES]

One BMv2 with the CP pipeline in a throwaway namespace.  h0 sends a steady stream to h1
through port 1, which honours PAUSE (p4src/control/port_hold.p4) at the link's rate and
is paced at it by BMv2's queue rate; the stream offers 0.9 of it, so the queue stays
short, as a link's does.  From h1, N times: a PAUSE of the longest time, then HOLD_S later
a PAUSE of 0, then GAP_S of traffic.  From the kernel's timestamps on h1 (the PAUSEs
leaving, the data frames arriving), per trial:

- PAUSE to held: the PAUSE leaving h1 -> the last data frame that still arrived before
  the lift (0 when none did);
- lift to resumed: the PAUSE of 0 leaving h1 -> the first data frame after it.

Baselines from the same run: the frame time at the link's rate (the target: a hold starts
within a frame time) and the switch's own one-way latency, h0 -> h1, of the frames that
were not held (each carries its send time): no reaction of the pipeline can be faster
than a frame crossing it.
"""

from __future__ import annotations

import argparse
import select
import socket
import statistics
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.lab import namespace, switch
from qcn.controller.agent import read_counters
from qcn.controller.bmv2_thrift import Bmv2Thrift
from qcn.controller.entries import (
    PauseWatermarks,
    input_port_entry,
    l2_entry,
    pause_honour_entry,
)
from qcn.controller.p4runtime import P4RuntimeSwitch
from qcn.core.frames import parse_pause, pause_frame
from qcn.core.params import PAUSE_QUANTA_MAX
from qcn.core.pipeline import BMV2_GRPC_PORT, BMV2_THRIFT_PORT, compile_program
from qcn.reaction_point.packet_socket import (
    ANCILLARY_BYTES,
    PACKET_OUTGOING,
    rx_timestamp,
    stamp_receptions,
)
from qcn.reaction_point.tc import ETH_P_ALL

H0_MAC, H1_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02"
HOLD_S = 0.01
"""How long each hold lasts before its PAUSE of 0."""
GAP_S = 0.09
"""Traffic between holds: the queue back to its usual state."""
OFFERED_SHARE = 0.5
COUNTED = PauseWatermarks(
    hi_bytes=10_000_000, lo_bytes=5_000_000, partition_bytes=20_000_000, pause_quanta=1,
    refresh_us=1_000_000,
)  # fmt: skip
"""h0's input counted (a port holds what its inputs count), never paused."""
STAMP = struct.Struct("!d")
"""The send time (time.time()) at the start of each data frame's payload."""
PAYLOAD_AT = 14 + 20 + 8
IPV4 = (0x0800).to_bytes(2, "big")
QUEUE_PKTS = 10_000


@dataclass
class Observed:
    """What h1 saw: (kernel time, kind) of the PAUSEs it sent and the data it received."""

    pauses: list[tuple[float, int]] = field(default_factory=list)
    data: list[tuple[float, float]] = field(default_factory=list)
    """(arrival, send time) of each data frame."""


def listen(sock: socket.socket, seen: Observed, stop: threading.Event) -> None:
    while not stop.is_set():
        ready, _, _ = select.select([sock], [], [], 0.05)
        if not ready:
            continue
        frame, anc, _, addr = sock.recvmsg(2048, ANCILLARY_BYTES)
        t = rx_timestamp(anc)
        if t is None:
            continue
        if addr[2] == PACKET_OUTGOING:
            quanta = parse_pause(frame)
            if quanta is not None:
                seen.pauses.append((t, quanta))
        elif frame[12:14] == IPV4:
            seen.data.append((t, STAMP.unpack_from(frame, PAYLOAD_AT)[0]))


def stream(rate_pps: float, frame_bytes: int, stop: threading.Event) -> None:
    """h0 -> h1 at ``rate_pps``, each frame stamped with its send time."""
    head = bytes(Ether(src=H0_MAC, dst=H1_MAC) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP())
    pad = bytes(max(0, frame_bytes - len(head) - STAMP.size))
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind(("h0", 0))
        due = time.monotonic()
        while not stop.is_set():
            due += 1 / rate_pps
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -0.05:
                due = time.monotonic()  # not run for a while: skip, do not burst
            s.send(head + STAMP.pack(time.time()) + pad)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def analyse(seen: Observed) -> tuple[list[float], list[float], list[float]]:
    """(PAUSE to held, lift to resumed, one-way latency of frames not held), seconds."""
    held, resumed = [], []
    holds = [t for t, q in seen.pauses if q]
    lifts = [t for t, q in seen.pauses if not q]
    arrivals = sorted(t for t, _ in seen.data)
    windows = list(zip(holds, lifts, strict=False))
    for start, lift in windows:
        during = [t for t in arrivals if start < t < lift]
        held.append(max(during) - start if during else 0.0)
        after = [t for t in arrivals if t > lift]
        if after:
            resumed.append(after[0] - lift)
    latency = [
        t - sent
        for t, sent in seen.data
        if not any(s - 0.005 < t < lift + 0.05 for s, lift in windows)
    ]
    return held, resumed, latency


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--link-mbps", type=float, default=40.0)
    parser.add_argument("--frame", type=int, default=1500, help="data frame bytes")
    args = parser.parse_args()
    if args.trials < 1 or args.link_mbps <= 0 or not 64 <= args.frame <= 1514:
        parser.error("--trials >= 1, --link-mbps > 0 and --frame in 64..1514")
    link_bps = args.link_mbps * 1e6
    pace_pps = round(link_bps / (8 * args.frame))
    frame_time_s = 1 / pace_pps
    p4info, bmv2_json = compile_program()
    seen = Observed()
    with (
        tempfile.TemporaryDirectory() as tmp,
        namespace(2),
        switch(2, Path(tmp)),
        P4RuntimeSwitch(f"127.0.0.1:{BMV2_GRPC_PORT}", p4info, bmv2_json) as p4rt,
    ):
        p4rt.insert(
            [
                l2_entry(H0_MAC, 0),
                l2_entry(H1_MAC, 1),
                input_port_entry(0, COUNTED, push_fb_tag=False),
                pause_honour_entry(1, link_bps),
            ]
        )
        with Bmv2Thrift(BMV2_THRIFT_PORT) as thrift:
            thrift.set_queue_rate(pace_pps, 1)
            thrift.set_queue_depth(QUEUE_PKTS, 1)  # what a hold gathers, never dropped
        # A packet socket does not see what it sends itself: the PAUSEs go out of another.
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind(("h1", 0))
        stamp_receptions(sock)
        sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sender.bind(("h1", 0))
        stop = threading.Event()
        threads = [
            threading.Thread(target=listen, args=(sock, seen, stop)),
            threading.Thread(target=stream, args=(OFFERED_SHARE * pace_pps, args.frame, stop)),
        ]
        for t in threads:
            t.start()
        print(
            f"hold: {args.trials} holds of {HOLD_S * 1e3:.0f} ms on a {args.link_mbps:g} Mb/s "
            f"port ({args.frame}-byte frames, {pace_pps} frames/s) ...",
            flush=True,
        )
        try:
            time.sleep(0.5)
            for _ in range(args.trials):
                sender.send(pause_frame(H1_MAC, PAUSE_QUANTA_MAX))
                time.sleep(HOLD_S)
                sender.send(pause_frame(H1_MAC, 0))
                time.sleep(GAP_S)
            time.sleep(0.3)
        finally:
            stop.set()
            for t in threads:
                t.join()
            counts = read_counters(p4rt, 1)
            sock.close()
            sender.close()
    held, resumed, latency = analyse(seen)
    if not (held and resumed and latency):
        print(f"hold: no figures: {len(seen.pauses)} PAUSEs and {len(seen.data)} frames seen")
        return 1
    latency_p50 = statistics.median(latency)
    for name, values in (("PAUSE to held", held), ("lift to resumed", resumed)):
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        print(
            f"hold: {name}: p50 {p50 * 1e3:.3f} ms, p99 {p99 * 1e3:.3f} ms "
            f"({p50 / frame_time_s:.2f} / {p99 / frame_time_s:.2f} frame times; "
            f"p50 {p50 / latency_p50:.2f}x the switch's one-way latency)"
        )
    print(
        f"hold: baselines: frame time {frame_time_s * 1e3:.3f} ms; one-way latency p50 "
        f"{latency_p50 * 1e3:.3f} ms, p99 {percentile(latency, 0.99) * 1e3:.3f} ms "
        f"({len(latency)} frames)"
    )
    late = sum(v > frame_time_s for v in held)
    print(f"hold: {late} of {len(held)} holds started later than a frame time")
    out = counts["frames_out"]
    print(
        f"hold: {out} frames out of the held port; rounds while held {counts['hold_rounds']}, "
        f"rounds keeping the order after lifts {counts['order_rounds']} "
        f"({counts['order_rounds'] / max(out, 1):.1%} of the frames out: link time the order "
        f"costs), frames out of their input's order {counts['order_late']} "
        f"({counts['order_late'] / max(out, 1):.1%})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
