"""802.1Qau frames as scapy layers: the CNM (EtherType 0x22E7) and the CN-TAG (0x22E9);
seed 003's Fb tag (0x88B6, this project's format, ``docs/qcn.md``, "The Fb tag"); and
802.3x PAUSE (MAC Control, 0x8808), scapy's own ``MACControlPause``; and DCQCN's CNP as
RoCEv2 sends it (IPv4/UDP to port 4791, the InfiniBand BTH with opcode CNP, 16 reserved
bytes, the ICRC), scapy's own ``scapy.contrib.roce``.

This is the Python side's one definition of the CNM, Fb tag and CNP layouts; the P4 side's
is ``p4src/include/headers.p4`` (a test checks both agree on sizes and EtherTypes).

CNM PDU, 24 bytes, network order::

    version:4 | reserved_v:5 | fb_positive:1 | qntz_fb:6 | cpid:64 | qoff:16s | qdelta:16s
    | encap_priority:3 | encap_reserved:13 | encap_da:48 | msdu_len:16
    then msdu_len bytes of the sampled frame, from its EtherType on (after any 802.1Q tag),
    at most 64.

``fb_positive`` is this project's use of the lowest reserved bit: set only by a CP in ECM
mode, for Fb > 0 (``docs/schemes.md``, "The ECM message"); a QCN CP leaves it 0.

Importing this module binds the layers, so ``Ether(raw)`` dissects them and
``Ether()/CNM(...)`` builds them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from scapy.contrib.mac_control import MACControlPause
from scapy.contrib.roce import BTH
from scapy.contrib.roce import CNP_OPCODE as SCAPY_CNP_OPCODE
from scapy.contrib.roce import cnp as scapy_cnp
from scapy.fields import (
    BitField,
    FieldLenField,
    MACField,
    SignedShortField,
    StrLenField,
    XLongField,
    XShortEnumField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Packet, bind_layers

from qcn.core.cp_model import CpDecision, FbTag
from qcn.core.ecmp import ROCEV2_UDP_PORT
from qcn.core.params import PAUSE_QUANTA_MAX, PAUSE_QUANTUM_BITS

ETHERTYPE_CNM = 0x22E7
ETHERTYPE_CNTAG = 0x22E9
ETHERTYPE_VLAN = 0x8100
ETHERTYPE_FB_TAG = 0x88B6
"""IEEE 802's Local Experimental EtherType 2 (the project's test traffic uses 1, 0x88B5): the
Fb tag is no standard's."""
FB_TAG_BYTES = 16
"""What the Fb tag adds to a frame: FbTagHeader, which ends with the frame's own EtherType."""
ETH_HEADER_BYTES = 14
VLAN_TAG_BYTES = 4
CNM_PDU_BYTES = 24
CNM_MAX_MSDU_BYTES = 64
CNM_VERSION = 0
#: The CNM header as the switch emits it: Ethernet + PDU (the MSDU follows).
CNM_HEADER_BYTES = ETH_HEADER_BYTES + CNM_PDU_BYTES


class CNM(Packet):
    """Congestion Notification Message PDU (802.1Qau 33.4) with its encapsulated MSDU."""

    name = "CNM"
    fields_desc = [  # noqa: RUF012 - scapy's declaration style
        BitField("version", CNM_VERSION, 4),
        BitField("reserved_v", 0, 5),
        BitField("fb_positive", 0, 1),
        BitField("qntz_fb", 0, 6),
        XLongField("cpid", 0),
        SignedShortField("qoff", 0),
        SignedShortField("qdelta", 0),
        BitField("encap_priority", 0, 3),
        BitField("encap_reserved", 0, 13),
        MACField("encap_da", "00:00:00:00:00:00"),
        FieldLenField("msdu_len", None, length_of="msdu", fmt="!H"),
        StrLenField("msdu", b"", length_from=lambda pkt: pkt.msdu_len),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        # Whatever follows the MSDU (Ethernet padding) is not part of the CNM.
        return b"", s

    def mysummary(self) -> str:
        return str(self.sprintf("CNM QntzFb=%CNM.qntz_fb% qoff=%CNM.qoff% qdelta=%CNM.qdelta%"))


#: What a tag (CN-TAG, Fb tag) may carry next, by EtherType: shown by name, and dissected.
NEXT_HEADERS = {0x0800: "IPv4", 0x86DD: "IPv6", 0x0806: "ARP"}
NEXT_LAYERS: dict[int, type[Packet]] = {0x0800: IP, 0x86DD: IPv6, 0x0806: ARP}


class CNTag(Packet):
    """Congestion Notification Tag: a 16-bit Flow ID an RP puts on its frames."""

    name = "CN-TAG"
    fields_desc = [  # noqa: RUF012
        XShortField("flow_id", 0),
        XShortEnumField("type", 0x0800, NEXT_HEADERS),
    ]


class FbTagHeader(Packet):
    """Seed 003's Fb tag, after the addresses (or the 802.1Q tag): the worst Fb a CP on
    the path measured (QntzFb; 0 = Fb 0), that CP's CPID, qoff and qdelta as its CNM
    would carry them, and whether a CP reflected it already; then the frame's EtherType."""

    name = "Fb-TAG"
    fields_desc = [  # noqa: RUF012
        BitField("reflected", 0, 1),
        BitField("reserved", 0, 9),
        BitField("qntz_fb", 0, 6),
        XLongField("cpid", 0),
        SignedShortField("qoff", 0),
        SignedShortField("qdelta", 0),
        XShortEnumField("type", 0x0800, NEXT_HEADERS),
    ]

    def mysummary(self) -> str:
        return str(
            self.sprintf("Fb-TAG QntzFb=%FbTagHeader.qntz_fb% reflected=%FbTagHeader.reflected%")
        )


for _below in (Ether, Dot1Q):
    bind_layers(_below, CNM, type=ETHERTYPE_CNM)
    bind_layers(_below, CNTag, type=ETHERTYPE_CNTAG)
    bind_layers(_below, FbTagHeader, type=ETHERTYPE_FB_TAG)
for _tag in (CNTag, FbTagHeader):
    for _type, _layer in NEXT_LAYERS.items():
        bind_layers(_tag, _layer, type=_type)
bind_layers(FbTagHeader, CNM, type=ETHERTYPE_CNM)


def is_group_mac(mac: bytes) -> bool:
    """The I/G bit: multicast and broadcast addresses never receive a CNM."""
    return bool(mac[0] & 1)


ETHERTYPE_AT = 2 * 6
"""Where an Ethernet frame's EtherType (or 802.1Q TPID) is: after the two addresses."""
MSDU_OFFSET_UNTAGGED = ETHERTYPE_AT
"""An untagged frame's MSDU for the CNM starts at its EtherType."""
MSDU_OFFSET_TAGGED = MSDU_OFFSET_UNTAGGED + VLAN_TAG_BYTES
"""A tagged frame's after its 802.1Q tag."""


def msdu_offset(frame: bytes) -> int:
    """Where a frame's MSDU starts for the CNM: at its EtherType, after any 802.1Q tag."""
    if int.from_bytes(frame[ETHERTYPE_AT : ETHERTYPE_AT + 2], "big") == ETHERTYPE_VLAN:
        return MSDU_OFFSET_TAGGED
    return MSDU_OFFSET_UNTAGGED


def frame_priority(frame: bytes) -> int:
    """802.1p priority of a frame (PCP of its 802.1Q tag; 0 if untagged)."""
    if msdu_offset(frame) == MSDU_OFFSET_UNTAGGED:
        return 0
    return frame[14] >> 5


def expected_cnm(
    sampled_frame: bytes, decision: CpDecision, cpid: int, cp_mac: str
) -> Ether | None:
    """The exact CNM a CP sends for ``sampled_frame`` (None when it must send none)."""
    if not decision.cnm:
        return None
    tag = FbTag(False, decision.qntz_fb, cpid, decision.cnm_qoff, decision.cnm_qdelta)
    return _cnm(sampled_frame, tag, cp_mac, positive=decision.positive)


def expected_reflection(frame: bytes, reflected: FbTag, rp_mac: str) -> Ether | None:
    """The exact CNM a reflection point (or a three-point CP) sends for ``frame``,
    reflecting ``reflected`` (qcn.core.cp_model.end_reflection's tag); ``frame`` as it
    arrived, with or without its Fb tag."""
    return _cnm(frame, reflected, rp_mac)


def _cnm(frame: bytes, fb: FbTag, src_mac: str, *, positive: bool = False) -> Ether | None:
    """The CNM for ``frame`` with ``fb``'s fields: its MSDU is the frame as its source sent
    it (without the Fb tag), and it goes to the frame's source unless that is a group."""
    frame, _ = pop_fb_tag(frame)
    if len(frame) < ETH_HEADER_BYTES or is_group_mac(frame[6:12]):
        return None
    start = msdu_offset(frame)
    pkt: Ether = Ether(dst=frame[6:12], src=src_mac, type=ETHERTYPE_CNM) / CNM(
        fb_positive=int(positive),
        qntz_fb=fb.qntz_fb,
        cpid=fb.cpid,
        qoff=fb.qoff,
        qdelta=fb.qdelta,
        encap_priority=frame_priority(frame),
        encap_da=frame[0:6],
        msdu=frame[start : start + CNM_MAX_MSDU_BYTES],
    )
    return pkt


FRESH_FB_TAG = FbTag()
"""The tag an edge port pushes: Fb = 0, not reflected."""


def push_fb_tag(frame: bytes, tag: FbTag = FRESH_FB_TAG) -> bytes:
    """``frame`` with an Fb tag (after its 802.1Q tag, if any), as an edge port pushes it."""
    at = msdu_offset(frame)
    header = FbTagHeader(
        reflected=int(tag.reflected),
        qntz_fb=tag.qntz_fb,
        cpid=tag.cpid,
        qoff=tag.qoff,
        qdelta=tag.qdelta,
        type=int.from_bytes(frame[at : at + 2], "big"),
    )
    return frame[:at] + ETHERTYPE_FB_TAG.to_bytes(2, "big") + bytes(header) + frame[at + 2 :]


def pop_fb_tag(frame: bytes) -> tuple[bytes, FbTag | None]:
    """``frame`` without its Fb tag, and the tag (None: it had none)."""
    at = msdu_offset(frame)
    if len(frame) < at + FB_TAG_BYTES + 2:
        return frame, None
    if int.from_bytes(frame[at : at + 2], "big") != ETHERTYPE_FB_TAG:
        return frame, None
    h = FbTagHeader(frame[at + 2 : at + FB_TAG_BYTES + 2])
    tag = FbTag(bool(h.reflected), h.qntz_fb, h.cpid, h.qoff, h.qdelta)
    return frame[:at] + frame[at + FB_TAG_BYTES :], tag


class CnmRejectedError(ValueError):
    """A frame that is not a well-formed CNM; ``reason`` is a short counter name."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class CnmInfo:
    """The fields of a validated CNM that a reaction point acts on."""

    cp_mac: str
    rp_mac: str
    qntz_fb: int
    fb_positive: bool
    cpid: int
    qoff: int
    qdelta: int
    encap_priority: int
    encap_da: str
    msdu: bytes

    def encapsulated_frame(self) -> Ether:
        """The sampled frame's first bytes, as an Ether frame (for per-flow matching)."""
        return Ether(self.encap_da_bytes + _mac_bytes(self.rp_mac) + self.msdu)

    @property
    def encap_da_bytes(self) -> bytes:
        return _mac_bytes(self.encap_da)


def _struct_decoder(
    fields: list[Any], size: int
) -> tuple[struct.Struct, list[tuple[str, int, int, int]]]:
    """A struct view of a fixed layout, derived from a scapy layer's ``fields_desc`` (the
    one layout): the CNM's PDU, the BTH.

    Returns the struct of its ``size`` bytes and, per field, (name, struct item, shift,
    mask): consecutive bit fields are grouped into the 1, 2 or 4 bytes they fill, then cut
    out.  An FCS
    field (the BTH's ICRC, at the packet's end) is not part of the view.
    """
    codes = {
        "XLongField": "Q",
        "SignedShortField": "h",
        "MACField": "6s",
        "FieldLenField": "H",
        "ByteEnumField": "B",
        "XShortField": "H",
    }
    fmt, plan, bits, items = "!", [], 0, 0
    group: list[tuple[str, int]] = []
    for i, f in enumerate(fields):
        if isinstance(f, BitField):
            group.append((f.name, f.size))
            bits += f.size
            # A group ends where the bit fields do, or at 32 bits (the BTH's 24-bit QP
            # shares its word with 8 bits of flags).
            ends = i + 1 == len(fields) or not isinstance(fields[i + 1], BitField)
            if ends or bits == 32:
                fmt += {8: "B", 16: "H", 32: "I"}[bits]
                shift = bits
                for name, bit_size in group:
                    shift -= bit_size
                    plan.append((name, items, shift, (1 << bit_size) - 1))
                bits, group, items = 0, [], items + 1
        elif type(f).__name__ in codes:
            fmt += codes[type(f).__name__]
            plan.append((f.name, items, 0, -1))
            items += 1
    view = struct.Struct(fmt)
    assert view.size == size, fmt
    return view, plan


def _decode(
    view: struct.Struct, plan: list[tuple[str, int, int, int]], data: bytes
) -> dict[str, Any]:
    items = view.unpack_from(data)
    out: dict[str, Any] = {}
    for name, index, shift, mask in plan:
        value = items[index]
        out[name] = value if mask < 0 else (value >> shift) & mask
    return out


_PDU, _PDU_PLAN = _struct_decoder(CNM.fields_desc, CNM_PDU_BYTES)


def decode_pdu(pdu: bytes) -> dict[str, Any]:
    """The fixed CNM PDU fields of ``pdu`` (at least 24 bytes), without scapy's dissector."""
    return _decode(_PDU, _PDU_PLAN, pdu)


def parse_cnm(frame: bytes) -> CnmInfo:
    """Validate and decode a received CNM; raise CnmRejectedError(reason) for anything else."""
    if len(frame) < ETH_HEADER_BYTES:
        raise CnmRejectedError("truncated", f"{len(frame)} bytes")
    start = ETH_HEADER_BYTES
    if msdu_offset(frame) == MSDU_OFFSET_TAGGED:
        start += VLAN_TAG_BYTES
    if int.from_bytes(frame[start - 2 : start], "big") != ETHERTYPE_CNM:
        raise CnmRejectedError("not_cnm", f"EtherType 0x{frame[start - 2 : start].hex()}")
    if len(frame) < start + CNM_PDU_BYTES:
        raise CnmRejectedError("truncated", f"{len(frame)} bytes")
    pdu = decode_pdu(frame[start : start + CNM_PDU_BYTES])
    if pdu["version"] != CNM_VERSION:
        raise CnmRejectedError("bad_version", str(pdu["version"]))
    available = len(frame) - start - CNM_PDU_BYTES
    msdu_len = pdu["msdu_len"]
    if msdu_len > CNM_MAX_MSDU_BYTES or msdu_len > available:
        raise CnmRejectedError("bad_msdu_len", f"{msdu_len} (frame holds {available})")
    msdu_at = start + CNM_PDU_BYTES
    return CnmInfo(
        cp_mac=_mac_str(frame[6:12]),
        rp_mac=_mac_str(frame[0:6]),
        qntz_fb=pdu["qntz_fb"],
        fb_positive=bool(pdu["fb_positive"]),
        cpid=pdu["cpid"],
        qoff=pdu["qoff"],
        qdelta=pdu["qdelta"],
        encap_priority=pdu["encap_priority"],
        encap_da=_mac_str(pdu["encap_da"]),
        msdu=bytes(frame[msdu_at : msdu_at + msdu_len]),
    )


def _mac_str(b: bytes) -> str:
    return b.hex(":")


def _mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


# -- 802.3x PAUSE --------------------------------------------------------------------------
# p4src/include/defines.p4 holds the same constants (a test checks they agree).
ETHERTYPE_MAC_CONTROL = 0x8808
MAC_CONTROL_OPCODE_PAUSE = 0x0001
PAUSE_DST_MAC = "01:80:c2:00:00:01"
PAUSE_FRAME_BYTES = 60
"""The minimum frame, without its FCS: what the pipeline sends and a PAUSE must fill."""


def mac_control_frame(src_mac: str, opcode: int, pause_time: int = 0) -> bytes:
    """A MAC Control frame laid out as a PAUSE (opcode, then a 16-bit time), padded with
    zeros to the minimum frame."""
    pkt = Ether(src=src_mac, dst=PAUSE_DST_MAC, type=ETHERTYPE_MAC_CONTROL) / MACControlPause(
        _op_code=opcode, pause_time=pause_time
    )
    raw = bytes(pkt)
    return raw + bytes(PAUSE_FRAME_BYTES - len(raw))


def pause_frame(src_mac: str, quanta: int) -> bytes:
    """A PAUSE of ``quanta`` (0 lifts a pause)."""
    return mac_control_frame(src_mac, MAC_CONTROL_OPCODE_PAUSE, quanta)


def parse_pause(frame: bytes) -> int | None:
    """The pause time (quanta) of a well-formed untagged PAUSE; None for anything else."""
    if len(frame) < ETH_HEADER_BYTES + 4 or frame[:6] != _mac_bytes(PAUSE_DST_MAC):
        return None
    ether_type, opcode, quanta = struct.unpack_from("!HHH", frame, 12)
    if ether_type != ETHERTYPE_MAC_CONTROL or opcode != MAC_CONTROL_OPCODE_PAUSE:
        return None
    return int(quanta)


def pause_seconds(quanta: int, line_rate_bps: float) -> float:
    """How long ``quanta`` hold a link of ``line_rate_bps``."""
    return quanta * PAUSE_QUANTUM_BITS / line_rate_bps


def pause_quanta(seconds: float, line_rate_bps: float) -> int:
    """The quanta that hold a link of ``line_rate_bps`` for at least ``seconds``."""
    quanta = -(-seconds * line_rate_bps // PAUSE_QUANTUM_BITS)
    if not 0 <= quanta <= PAUSE_QUANTA_MAX:
        raise ValueError(
            f"a pause of {seconds * 1e3:g} ms at {line_rate_bps / 1e6:g} Mb/s needs {quanta:g} "
            f"quanta; a PAUSE carries at most {PAUSE_QUANTA_MAX}"
        )
    return int(quanta)


# -- RoCEv2's CNP (DCQCN) ------------------------------------------------------------------
# scapy.contrib.roce's layers are the layout (BTH, CNPPadding, the ICRC); what follows names
# what the project needs of them (its UDP port is qcn.core.ecmp's, with the traffic's other
# ports).  A CNP is an IPv4/UDP datagram to port 4791 whose payload
# is the BTH (opcode CNP, the destination QP), 16 reserved bytes and the ICRC.
BTH_OPCODE_CNP = SCAPY_CNP_OPCODE
"""The BTH opcode of a Congestion Notification Packet (0x81)."""
BTH_BYTES = 12
CNP_RESERVED_BYTES = 16
ICRC_BYTES = 4
CNP_PAYLOAD_BYTES = BTH_BYTES + CNP_RESERVED_BYTES + ICRC_BYTES
"""A CNP's UDP payload: what the notification point sends and the reaction point reads."""
CNP_QP_MAX = (1 << 24) - 1
"""The destination QP is 24 bits.  The project's QP is the data flow's UDP source port (its
socket: a sender's queue pair), so that the reaction point knows the flow's 5-tuple from
the CNP alone (``docs/dcqcn.md``, the hosts)."""


CNP_IP_ID = 1
"""The IPv4 identification of every CNP the project sends.  The ICRC covers it, so it must
be known before the kernel sends the packet: CNPs go out of a raw socket with the header
built here (the kernel fills in the checksum and total length, as here, and an
identification only where it is 0); a UDP socket's datagrams carry an identification of
the kernel's choice (not 0 with DF set, on Linux 6).  DF is set: the ID names no fragments
(RFC 6864)."""


def cnp_packet(
    src_ip: str, dst_ip: str, sport: int, dest_qp: int, dport: int = ROCEV2_UDP_PORT
) -> IP:
    """The CNP the notification point at ``src_ip`` sends to ``dst_ip`` (UDP from ``sport``
    to ``dport``, RoCEv2's port but in tests) for the flow ``dest_qp``: IPv4 (Don't
    Fragment, :data:`CNP_IP_ID`) / UDP / BTH / reserved bytes / ICRC."""
    if not 0 <= dest_qp <= CNP_QP_MAX:
        raise ValueError(f"a destination QP is 24 bits (got {dest_qp})")
    pkt: IP = (
        IP(src=src_ip, dst=dst_ip, flags="DF", id=CNP_IP_ID)
        / UDP(sport=sport, dport=dport)
        / scapy_cnp(dest_qp)
    )
    return pkt


def cnp_payload(src_ip: str, dst_ip: str, sport: int, dest_qp: int) -> bytes:
    """The UDP payload of :func:`cnp_packet` (BTH, reserved bytes, ICRC)."""
    payload = bytes(cnp_packet(src_ip, dst_ip, sport, dest_qp)[UDP].payload)
    assert len(payload) == CNP_PAYLOAD_BYTES
    return payload


_BTH, _BTH_PLAN = _struct_decoder(BTH.fields_desc, BTH_BYTES)


def decode_bth(data: bytes) -> dict[str, Any]:
    """The BTH's fields (scapy's names) of ``data``'s first 12 bytes, without the dissector."""
    return _decode(_BTH, _BTH_PLAN, data)


class CnpRejectedError(ValueError):
    """A UDP payload that is not a CNP; ``reason`` is a short counter name."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def parse_cnp(payload: bytes) -> int:
    """The destination QP of a CNP's UDP payload; CnpRejectedError(reason) for anything
    else.  The ICRC is not checked: it covers the IP header's identification, which a UDP
    socket does not see."""
    if len(payload) != CNP_PAYLOAD_BYTES:
        raise CnpRejectedError("bad_length", f"{len(payload)} bytes")
    bth = _decode(_BTH, _BTH_PLAN, payload)
    if bth["opcode"] != BTH_OPCODE_CNP:
        raise CnpRejectedError("not_cnp", f"opcode 0x{bth['opcode']:02x}")
    return int(bth["dqpn"])
