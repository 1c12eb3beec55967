"""Per-flow ECMP: which of its equal-cost ports a switch sends a flow's frames to.

Stated once for both backends (docs/topology.md, "Routes"): BMv2's pipeline does this
arithmetic (p4src/control/forwarding.p4), the controller programs its groups
(qcn.controller.entries.forwarding_entries), and the simulator follows it
(:meth:`qcn.core.topology.Topology.path`), so a flow takes the same path on both.

- The flow's hash is the CRC-32 (IEEE 802.3's, as zlib and BMv2's ``crc32`` compute it)
  of 13 bytes: its source and destination IPv4 addresses, its IP protocol, its source and
  destination ports, each in network order.
- A switch at ``distance`` switch hops from the destination's own switch takes the 16 bits
  of the hash from bit :func:`hash_shift` on, and the port at (those bits mod the number of
  equal-cost ports) among them in port order: the controller creates one selector member per
  port, in port order, and BMv2 takes a group's members in the order of their handles.
- The shift moves by 8 bits per hop: with the same bits everywhere, a fat-tree's
  aggregation switch would send everything its top-of-rack switch gave it to one core
  (CRC is linear, so the bits a ToR chose by say the same at the next switch).

The traffic's 5-tuples are fixed here too, so the simulator knows them: every source and
flow sends UDP to :data:`DATA_PORT`; a source from :data:`SOURCE_PORT`; flow ``n`` from
:func:`flow_port`; every datagram ECN-capable (:data:`TRAFFIC_TOS`).  (With
``workload.transport = "tcp"`` the kernel picks a connection's port, and a flow's path on
BMv2 is its connection's.)
"""

from __future__ import annotations

import ipaddress
import struct
import zlib
from collections.abc import Sequence
from typing import Literal, get_args

EcmpMode = Literal["per-destination", "per-flow"]
ECMP_MODES: tuple[str, ...] = get_args(EcmpMode)
"""per-destination: every frame to a host takes one path, equal-cost paths carrying
destinations in turn; per-flow: each flow's 5-tuple chooses (this module)."""

IP_PROTO_UDP = 17
"""p4src/include/defines.p4's IP_PROTO_UDP: what the project's traffic sends."""
DATA_PORT = 5001
"""The UDP port the sources and the flows send to, and the sinks and receivers listen on."""
SOURCE_PORT = 9999
"""The UDP port a host's source sends from (one socket for all its destinations)."""
ROCEV2_UDP_PORT = 4791
"""IANA's RoCEv2 port: DCQCN's CNPs go to it (qcn.core.frames builds them), where the
reaction point listens."""
FLOW_PORT_BASE = 10_000
FLOW_PORT_SPAN = 20_000
"""Flow ``n`` sends from FLOW_PORT_BASE + n mod FLOW_PORT_SPAN: below the kernel's
ephemeral ports (32768 on), above the sinks', receivers' and iperf's."""

ECN_MASK = 0b11
"""The ECN field: the IPv4 TOS byte's two low bits (RFC 3168)."""
ECN_NOT_ECT, ECN_ECT1, ECN_ECT0, ECN_CE = 0b00, 0b01, 0b10, 0b11
"""Its codepoints: not ECN-capable, ECT(1), ECT(0), Congestion Experienced."""
TRAFFIC_TOS = ECN_ECT0
"""The TOS byte of every datagram the sources and the flows send (DSCP 0, ECT(0)): always,
whatever the scheme.  A switch port that marks ECN (``cp.signal = "ecn"``, DCQCN) marks
only ECN-capable frames, and a port that does not ignores the field, so QCN's runs are the
same with it; one traffic for every scheme keeps their runs comparable.  (TCP flows take
the kernel's own ECN: Linux keeps a TCP socket's ECN bits its own.)"""
HASH_WINDOW_BITS = 16
"""The bits of the hash a switch chooses by (the selector's one field, p4src)."""
HASH_SHIFT_STEP = 8
HASH_SHIFT_TIERS = 3
"""Windows at bits 0, 8 and 16, a hop each, then round again: all within the 32 bits."""


def flow_port(flow_id: int) -> int:
    """The UDP source port flow ``flow_id`` sends from."""
    return FLOW_PORT_BASE + flow_id % FLOW_PORT_SPAN


def five_tuple_hash(
    src_ip: str, dst_ip: str, sport: int, dport: int, proto: int = IP_PROTO_UDP
) -> int:
    """The CRC-32 of the 5-tuple's 13 bytes, as the pipeline's ``hash_flow`` computes it."""
    key = (
        ipaddress.IPv4Address(src_ip).packed
        + ipaddress.IPv4Address(dst_ip).packed
        + struct.pack("!BHH", proto, sport, dport)
    )
    return zlib.crc32(key)


def hash_shift(distance: int) -> int:
    """The first bit of the window a switch ``distance`` hops from the destination's own
    switch chooses by (``distance`` >= 1: a switch with a choice is never that one)."""
    return HASH_SHIFT_STEP * ((distance - 1) % HASH_SHIFT_TIERS)


def choose_port(ports: Sequence[int], hashed: int, distance: int) -> int:
    """The port among ``ports`` (equal-cost) a flow of hash ``hashed`` takes."""
    window = (hashed >> hash_shift(distance)) & ((1 << HASH_WINDOW_BITS) - 1)
    ordered = sorted(ports)
    return ordered[window % len(ordered)]
