"""The flows workload's receiver (docs/fct.md): acknowledges every frame and records each
flow's completion, the moment its last missing frame arrives.

It runs on the sink host (``python -m topologies.flow_receiver``) and writes one JSON line
per finished flow to its log, flushed at once, so an interrupted run keeps every record::

    {"src": "10.0.0.1", "flow": 7, "finish": 12.61, "size": 4000, "duplicates": 0}

Like the experiments' sink (:mod:`topologies.sink`), it prints on stdout what it received
per source every ``--interval``, ``{"t": ..., "rx": {"10.0.0.1": [frames, bytes, lost]}}``.
``lost`` counts the copies lost of each frame that has arrived: a frame's header says how
many copies were sent before it, and on a FIFO path they would have arrived first.  It
learns of a loss when the frame finally arrives (a timeout later), and never of a frame
that did not arrive by the end.

``finish`` is ``time.monotonic()``, which every network namespace shares, so it compares
with the senders' start times (:mod:`reaction_point.flow_sender`).  A frame that arrives
twice (sent again after a late acknowledgement) is acknowledged again and counted as a
duplicate.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from qcn.core.flows import COPY_SHIFT, ETH_IP_UDP_BYTES, FLAG_ACK, FLOW_HEADER, flow_frames
from topologies.sink import receiving_socket, report_until_stopped


@dataclass
class ReceivingFlow:
    frames: int
    received: set[int] = field(default_factory=set)
    duplicates: int = 0
    finished: bool = False


class FlowReceiver:
    def __init__(
        self,
        port: int,
        frame_bytes: int,
        log: IO[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sock = receiving_socket(port)
        self.frame_bytes, self.log, self.clock = frame_bytes, log, clock
        self.flows: dict[tuple[str, int], ReceivingFlow] = {}
        self.malformed = 0
        self.counts: dict[str, list[int]] = {}
        """Per source address: [frames, Ethernet bytes, lost], as the sink reports them."""

    def drain(self) -> None:
        """Acknowledge and count every frame waiting in the socket."""
        while True:
            try:
                data, addr = self.sock.recvfrom(65536)
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
            if flags & FLAG_ACK:
                self.malformed += 1
                continue
            with contextlib.suppress(OSError):  # (the sender sends it again after its timeout)
                self.sock.sendto(FLOW_HEADER.pack(flow_id, frame, size, FLAG_ACK), addr)
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
                self.log.write(
                    json.dumps(
                        {
                            "src": addr[0],
                            "flow": flow_id,
                            "finish": arrived,
                            "size": size,
                            "duplicates": flow.duplicates,
                        }
                    )
                    + "\n"
                )
                self.log.flush()
                flow.received = set()  # (its frames are no longer needed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, default=5002)
    ap.add_argument("--frame-bytes", type=int, default=1500)
    ap.add_argument("--log", type=Path, required=True, help="where the JSON lines go")
    ap.add_argument("--interval", type=float, default=0.01, help="seconds between reports")
    args = ap.parse_args(argv)
    with args.log.open("a") as log:
        receiver = FlowReceiver(args.port, args.frame_bytes, log)
        report_until_stopped(
            receiver.sock, receiver.drain, lambda: receiver.counts, args.interval, final=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
