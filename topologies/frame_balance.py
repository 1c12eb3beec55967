"""Where every frame the senders put on the wire went: seed 001's frame balance.

At the end of an iperf3 run (topologies/iperf.py) the senders are stopped and the
network drains; then each frame that entered s1 from a sender is placed:

- **delivered**: it left s2 towards a sink;
- **dropped** by a pipeline, by reason: a PAUSE partition, a tail drop, a MAC Control
  frame (never forwarded: the PAUSE agents' wake-up frames), a CNM from a host;
- **lost** between the kernel and a switch: counted into a switch's interface but never
  read by the pipeline (``switch_receive``: BMv2's libpcap ring had no room), written by
  the pipeline but never counted out (``switch_transmit``), or sent by one end of a link
  and not received at the other (``kernel``);
- **held**: still in a switch (the guarded inputs' buffered bytes, read before teardown).

``unplaced`` is what is left: 0 when the balance closes.  Frames a sender's reaction point
or PAUSE gate still held were never put on the wire, so they are not in it; they are
reported beside it (``not_on_wire``).  Counters are taken as differences between a
snapshot at the start of the traffic and one at the end, so frames before the run (the
kernel's own, before the switch interfaces went quiet) do not count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Snapshot = dict[str, int]
"""Counter name -> value.  Names: ``IFACE:COUNTER`` for the kernel's interface counters
(``s1-eth1:rx_packets``), ``SWITCH:PORT:COUNTER`` for the pipelines' (``s2:3:pause_drops``)
and registers (``s1:1:input_bytes``)."""


Port = tuple[str, str, int]
"""(interface, switch, port): a switch port and the kernel interface it reads and writes."""


@dataclass(frozen=True)
class SenderPath:
    """The sender direction through the switches, port by port."""

    entries: tuple[Port, ...]
    """Where the senders' frames enter the network (``s1-eth1``...)."""
    exits: tuple[Port, ...]
    """Where they leave it towards a sink."""
    links: tuple[tuple[Port, Port], ...] = ()
    """(out, in) of each link between switches they cross."""
    inputs: tuple[tuple[str, int], ...] = ()
    """(switch, port) of every pipeline input they cross (its drop counters)."""
    outputs: tuple[tuple[str, int], ...] = ()
    """(switch, port) of every pipeline output they leave through."""

    def receiving(self) -> tuple[Port, ...]:
        """Every port a switch reads the senders' frames from."""
        return (*self.entries, *(into for _, into in self.links))

    def sending(self) -> tuple[Port, ...]:
        """Every port a switch writes them to."""
        return (*(out for out, _ in self.links), *self.exits)

    def pipeline_ports(self) -> list[tuple[str, int]]:
        ports = {*self.inputs, *self.outputs}
        ports |= {(sw, p) for _, sw, p in (*self.receiving(), *self.sending())}
        return sorted(ports)


DROP_REASONS: dict[str, tuple[str, str]] = {
    "partition": ("inputs", "pause_drops"),
    "mac_control": ("inputs", "mac_control_drops"),
    "cnm_from_host": ("inputs", "cnm_edge_drops"),
    "tail": ("outputs", "tail_drops"),
}
"""Each pipeline drop reason: where it is counted (per input or per output port) and its
counter (qcn.core.pipeline.COUNTERS).  A PAUSE a switch receives is not a sender's frame:
a switch sent it, and the frames in and out of each port count it on both sides."""
PIPELINE_COUNTERS = (
    "frames_in",
    "frames_out",
    "pause_sent",
    *(c for _, c in DROP_REASONS.values()),
)
"""Every pipeline counter the balance reads."""


@dataclass
class FrameBalance:
    sent: int
    delivered: int
    dropped: dict[str, int]
    held_bytes: dict[str, int]
    """Bytes a guarded input still buffered at the end, by ``SWITCH:PORT`` (none: empty)."""
    not_on_wire: dict[str, int] = field(default_factory=dict)
    """Frames each sender's qdisc still held at the end (never sent; not in the balance)."""
    settled: bool = True
    """The network drained before the end snapshot."""
    counters: dict[str, int] = field(default_factory=dict)
    """Every counter read, as its change over the run (what the figures above come from)."""

    @property
    def unplaced(self) -> int:
        """Frames that entered and are neither delivered, dropped nor in a switch (frames
        held in a switch count once its bytes are 0; while bytes are held, what is left is
        put down to them)."""
        return self.sent - self.delivered - sum(self.dropped.values())

    @property
    def closed(self) -> bool:
        return self.unplaced == 0 and not self.held_bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "delivered": self.delivered,
            "dropped": self.dropped,
            "held_bytes": self.held_bytes,
            "unplaced": self.unplaced,
            "closed": self.closed,
            "settled": self.settled,
            "not_on_wire": self.not_on_wire,
            "counters": self.counters,
        }

    def describe(self) -> str:
        """One line: closed, or what cannot be placed."""
        drops = ", ".join(f"{k} {v}" for k, v in self.dropped.items() if v) or "none"
        line = f"{self.sent} frames sent, {self.delivered} delivered, dropped: {drops}"
        if self.closed:
            return f"frame balance closed: {line}"
        held = ", ".join(f"{k} {v} B" for k, v in self.held_bytes.items())
        return (
            f"frame balance OPEN: {line}; {self.unplaced} frames not placed"
            + (f" (switches still hold {held})" if held else "")
            + ("" if self.settled else "; the network never drained")
        )


def pipeline_key(switch: str, port: int, name: str) -> str:
    return f"{switch}:{port}:{name}"


def balance(path: SenderPath, start: Mapping[str, int], end: Mapping[str, int]) -> FrameBalance:
    """The balance of the frames that entered at ``path.entries`` between two snapshots.

    Hop by hop: the kernel counted a frame into a switch's interface but the switch never
    read it (``switch_receive``: BMv2's receive ring had no room), the switch wrote a frame
    the kernel never counted out (``switch_transmit``), the kernel dropped it on a link
    (``kernel``), or a pipeline dropped it (by reason)."""

    def delta(key: str) -> int:
        return end.get(key, 0) - start.get(key, 0)

    def counted(iface: str, sw: str, port: int, kernel: str, pipeline: str) -> int:
        return delta(f"{iface}:{kernel}") - delta(pipeline_key(sw, port, pipeline))

    sent = sum(delta(f"{iface}:rx_packets") for iface, _, _ in path.entries)
    # The pipeline's own PAUSEs to the sinks leave the same ports; no sender sent them.
    delivered = sum(
        delta(f"{iface}:tx_packets") - delta(pipeline_key(sw, port, "pause_sent"))
        for iface, sw, port in path.exits
    )
    dropped = {
        reason: sum(delta(pipeline_key(sw, port, counter)) for sw, port in getattr(path, where))
        for reason, (where, counter) in DROP_REASONS.items()
    }
    dropped["switch_receive"] = sum(
        counted(*p, "rx_packets", "frames_in") for p in path.receiving()
    )
    dropped["switch_transmit"] = sum(
        -counted(*p, "tx_packets", "frames_out") for p in path.sending()
    )
    dropped["kernel"] = sum(
        delta(f"{out[0]}:tx_packets") - delta(f"{into[0]}:rx_packets") for out, into in path.links
    )
    held = {
        f"{sw}:{port}": end[key]
        for sw, port in path.inputs
        if end.get(key := pipeline_key(sw, port, "input_bytes"), 0)
    }
    changes = {key: delta(key) for key in sorted(end)}
    return FrameBalance(sent, delivered, dropped, held, counters=changes)


def holding(snapshot: Snapshot) -> bool:
    """A switch still buffers frames from a guarded input."""
    return any(v for k, v in snapshot.items() if k.endswith(":input_bytes"))


def settle(
    read: Callable[[], Snapshot],
    holding: Callable[[Snapshot], bool],
    *,
    quiet_s: float,
    timeout_s: float,
    wait: Callable[[float], None],
) -> tuple[Snapshot, bool]:
    """Read snapshots until two ``quiet_s`` apart agree and nothing is ``holding`` (or
    ``timeout_s`` passed): the last one, and whether it settled."""
    waited = 0.0
    last = read()
    while waited < timeout_s:
        wait(quiet_s)
        waited += quiet_s
        now = read()
        if now == last and not holding(now):
            return now, True
        last = now
    return last, False
