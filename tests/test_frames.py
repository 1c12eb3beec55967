"""CNM, CN-TAG, Fb tag and CNP layers against hand-written byte dumps."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.contrib.roce import BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.core.cp_model import CpDecision, FbTag
from qcn.core.ecmp import ROCEV2_UDP_PORT
from qcn.core.frames import (
    BTH_BYTES,
    BTH_OPCODE_CNP,
    CNM,
    CNP_PAYLOAD_BYTES,
    CNP_QP_MAX,
    FB_TAG_BYTES,
    ICRC_BYTES,
    CnmRejectedError,
    CnpRejectedError,
    CNTag,
    FbTagHeader,
    cnp_packet,
    cnp_payload,
    decode_bth,
    decode_pdu,
    expected_cnm,
    expected_reflection,
    parse_cnm,
    parse_cnp,
    pop_fb_tag,
    push_fb_tag,
)

# A sampled frame: dst 00:00:00:00:00:02, src 00:00:00:00:00:01, EtherType 0x88b5, 100 bytes.
SAMPLED = bytes.fromhex("00000000000200000000000188b5") + bytes(range(100))
CP_MAC = "02:00:00:00:00:fe"
CPID = 0x0200000000FE0002

CNM_HEX = (
    "000000000001"  # dst: the sampled frame's source
    "0200000000fe"  # src: the CP
    "22e7"  # EtherType CNM
    "000d"  # version 0, reserved 0, QntzFb 13
    "0200000000fe0002"  # CPID
    "0008"  # cnmQOffset +8
    "fffd"  # cnmQDelta -3
    "0000"  # encapsulated priority 0
    "000000000002"  # encapsulated DA
    "0040"  # encapsulated MSDU length 64
    "88b5" + bytes(range(62)).hex()  # MSDU: the EtherType on, 64 bytes
)


def decision(qntz: int = 13, qoff: int = 8, qdelta: int = -3) -> CpDecision:
    return CpDecision(q=30, qoff=qoff, qdelta=qdelta, fb_fp=-16, qntz_fb=qntz, sampled=True)


def test_expected_cnm_bytes_match_hand_dump() -> None:
    pkt = expected_cnm(SAMPLED, decision(), CPID, CP_MAC)
    assert pkt is not None
    assert bytes(pkt).hex() == CNM_HEX
    assert len(bytes(pkt)) == 14 + 24 + 64


def test_build_with_layers() -> None:
    pkt = Ether(dst="00:00:00:00:00:01", src=CP_MAC) / CNM(
        qntz_fb=13, cpid=CPID, qoff=8, qdelta=-3, encap_da="00:00:00:00:00:02", msdu=SAMPLED[12:76]
    )
    assert bytes(pkt).hex() == CNM_HEX


def test_dissect_hand_dump() -> None:
    pkt: Any = Ether(bytes.fromhex(CNM_HEX) + bytes(6))  # with Ethernet padding
    assert pkt.haslayer(CNM)
    c = pkt[CNM]
    assert (c.version, c.qntz_fb, c.cpid, c.qoff, c.qdelta) == (0, 13, CPID, 8, -3)
    assert c.encap_da == "00:00:00:00:00:02"
    assert c.msdu_len == 64
    assert c.msdu == SAMPLED[12:76]
    info = parse_cnm(bytes.fromhex(CNM_HEX))
    assert (info.qntz_fb, info.cp_mac, info.rp_mac) == (13, CP_MAC, "00:00:00:00:00:01")


def test_vlan_tagged_frame_priority_and_msdu() -> None:
    tagged = SAMPLED[:12] + bytes.fromhex("8100a00a") + SAMPLED[12:]  # PCP 5, VID 10
    pkt = expected_cnm(tagged, decision(), CPID, CP_MAC)
    assert pkt is not None
    raw = bytes(pkt)
    assert raw[14 + 14 : 14 + 16].hex() == "a000"  # priority 5 in the top 3 bits
    assert raw[14 + 24 :] == SAMPLED[12:76]  # MSDU from the inner EtherType


def test_short_frame_encapsulates_everything() -> None:
    short = SAMPLED[:14] + b"abc"
    pkt = expected_cnm(short, decision(), CPID, CP_MAC)
    assert pkt is not None
    assert bytes(pkt).endswith(b"\x88\xb5abc")
    assert Ether(bytes(pkt))[CNM].msdu_len == 5


def test_no_cnm_for_group_source_or_positive_feedback() -> None:
    group = SAMPLED[:6] + bytes.fromhex("010000000001") + SAMPLED[12:]
    assert expected_cnm(group, decision(), CPID, CP_MAC) is None
    positive = CpDecision(q=1, qoff=-21, qdelta=0, fb_fp=336, qntz_fb=0, sampled=True)
    assert expected_cnm(SAMPLED, positive, CPID, CP_MAC) is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (bytes.fromhex(CNM_HEX)[:20], "truncated"),
        (bytes.fromhex(CNM_HEX)[:80], "bad_msdu_len"),
        (SAMPLED, "not_cnm"),
        (bytes.fromhex(CNM_HEX[:28] + "100d" + CNM_HEX[32:]), "bad_version"),
        (bytes.fromhex(CNM_HEX[:72] + "0041" + CNM_HEX[76:]) + b"x", "bad_msdu_len"),
    ],
)
def test_malformed_cnms_rejected(raw: bytes, reason: str) -> None:
    Ether(raw)  # dissects without an exception
    with pytest.raises(CnmRejectedError) as e:
        parse_cnm(raw)
    assert e.value.reason == reason


@given(st.binary(max_size=200))
def test_random_bytes_never_raise_anything_but_rejection(raw: bytes) -> None:
    Ether(bytes.fromhex(CNM_HEX[:28]) + raw)  # any CNM payload dissects without an exception
    for frame in (raw, bytes.fromhex(CNM_HEX[:28]) + raw):
        try:
            info = parse_cnm(frame)
        except CnmRejectedError:
            continue
        assert len(info.msdu) <= 64


def test_cn_tag_round_trip() -> None:
    pkt = Ether(dst="00:00:00:00:00:02") / CNTag(flow_id=0x1234) / IP(dst="10.0.0.2") / UDP()
    raw = bytes(pkt)
    assert raw[12:18].hex() == "22e912340800"
    back: Any = Ether(raw)
    assert back[CNTag].flow_id == 0x1234
    assert back.haslayer(UDP)


@given(st.binary(min_size=24, max_size=24))
def test_fast_pdu_decoder_agrees_with_scapy_layer(pdu: bytes) -> None:
    fast = decode_pdu(pdu)
    layer: Any = CNM(pdu)
    for name in (
        "version",
        "reserved_v",
        "fb_positive",
        "qntz_fb",
        "cpid",
        "qoff",
        "qdelta",
        "encap_priority",
        "encap_reserved",
        "msdu_len",
    ):
        assert fast[name] == getattr(layer, name), name
    assert fast["encap_da"].hex(":") == layer.encap_da


def test_fb_tag_push_pop_and_layout() -> None:
    frame = bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP() / UDP())
    tag = FbTag(True, 42, 0x0200000001000003, -5, 7)
    tagged = push_fb_tag(frame, tag)
    assert len(tagged) == len(frame) + FB_TAG_BYTES
    # EtherType 0x88B6, then reflected:1 reserved:9 QntzFb:6, CPID, qoff, qdelta, EtherType.
    assert tagged[12:30].hex() == "88b6" + "802a" + "0200000001000003" + "fffb" + "0007" + "0800"
    assert Ether(tagged)[FbTagHeader].qntz_fb == 42
    assert UDP in Ether(tagged)
    assert pop_fb_tag(tagged) == (frame, tag)
    assert pop_fb_tag(frame) == (frame, None)


def test_reflection_cnm_encapsulates_the_frame_without_its_tag() -> None:
    frame = bytes(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP() / UDP())
    tag = FbTag(False, 20, 0xAB, 3, 1)
    cnm = expected_reflection(push_fb_tag(frame, tag), tag, "02:00:00:00:00:fe")
    assert cnm is not None
    assert cnm[CNM].msdu == frame[12:]
    assert (cnm[CNM].qntz_fb, cnm[CNM].cpid, cnm[CNM].qoff, cnm[CNM].qdelta) == (20, 0xAB, 3, 1)
    assert cnm.dst == "00:00:00:00:00:01"


# -- RoCEv2's CNP ---------------------------------------------------------------------------

# The CNP 10.0.0.2 (a receiver, from UDP port 5001) sends 10.0.0.1 for the flow whose
# source port is 9999 (its QP).
CNP_IP_UDP_HEX = (
    "4500003c"  # IPv4, IHL 5, TOS 0, total length 60
    "00014000"  # identification 1 (CNP_IP_ID), Don't Fragment
    "401126ae"  # TTL 64, UDP, header checksum
    "0a000002"  # source: the receiver
    "0a000001"  # destination: the data's sender
    "138912b7"  # UDP 5001 -> 4791 (RoCEv2)
    "00283837"  # UDP length 40, checksum
)
CNP_PAYLOAD_HEX = (
    "81"  # BTH opcode: CNP
    "00"  # solicited 0, migreq 0, pad count 0, version 0
    "ffff"  # P_Key: the default partition
    "40"  # FECN 0, BECN 1, reserved
    "00270f"  # destination QP 9999
    "00000000"  # ack request 0, reserved, PSN 0
    + "00" * 16  # the CNP's reserved bytes
    + "f52dafe6"  # ICRC
)


def icrc_by_hand(ip_udp_bth_rest: bytes) -> bytes:
    """RoCEv2's ICRC computed here without scapy: CRC-32 of eight 0xff bytes (the LRH it
    stands for) and the packet with its variant fields all ones (IPv4 TOS, TTL and header
    checksum, UDP checksum, BTH's FECN, BECN and reserved bits), least significant byte
    first."""
    masked = bytearray(ip_udp_bth_rest)
    masked[1] = 0xFF  # TOS
    masked[8] = 0xFF  # TTL
    masked[10:12] = b"\xff\xff"  # IPv4 checksum
    masked[26:28] = b"\xff\xff"  # UDP checksum
    masked[32] = 0xFF  # FECN, BECN, reserved 6
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(masked)))


def test_cnp_bytes_match_hand_dump() -> None:
    pkt = cnp_packet("10.0.0.2", "10.0.0.1", 5001, 9999)
    assert bytes(pkt).hex() == CNP_IP_UDP_HEX + CNP_PAYLOAD_HEX
    assert cnp_payload("10.0.0.2", "10.0.0.1", 5001, 9999).hex() == CNP_PAYLOAD_HEX
    assert len(bytes.fromhex(CNP_PAYLOAD_HEX)) == CNP_PAYLOAD_BYTES == 32
    raw = bytes.fromhex(CNP_IP_UDP_HEX + CNP_PAYLOAD_HEX)
    assert icrc_by_hand(raw[:-ICRC_BYTES]) == raw[-ICRC_BYTES:]
    assert int(CNP_IP_UDP_HEX[44:48], 16) == ROCEV2_UDP_PORT
    assert bytes.fromhex(CNP_PAYLOAD_HEX)[0] == BTH_OPCODE_CNP == 0x81


@given(
    st.ip_addresses(v=4),
    st.ip_addresses(v=4),
    st.integers(0, 65535),
    st.integers(0, CNP_QP_MAX),
)
def test_every_cnp_carries_its_qp_and_a_valid_icrc(src: Any, dst: Any, sport: int, qp: int) -> None:
    raw = bytes(cnp_packet(str(src), str(dst), sport, qp))
    assert icrc_by_hand(raw[:-ICRC_BYTES]) == raw[-ICRC_BYTES:]
    payload = cnp_payload(str(src), str(dst), sport, qp)
    assert raw[28:] == payload
    assert parse_cnp(payload) == qp
    dissected: Any = Ether(bytes.fromhex("00000000000100000000000b0800") + raw)
    assert (dissected[BTH].opcode, dissected[BTH].dqpn) == (BTH_OPCODE_CNP, qp)
    assert dissected.haslayer(CNPPadding)


@given(st.binary(min_size=BTH_BYTES, max_size=BTH_BYTES))
def test_fast_bth_decoder_agrees_with_scapy_layer(bth: bytes) -> None:
    fast = decode_bth(bth)
    layer: Any = BTH(bth + bytes(ICRC_BYTES))
    for f in BTH.fields_desc:
        if f.name != "icrc":
            assert fast[f.name] == getattr(layer, f.name), f.name


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (bytes.fromhex(CNP_PAYLOAD_HEX)[:-1], "bad_length"),
        (bytes.fromhex(CNP_PAYLOAD_HEX) + b"x", "bad_length"),
        (b"", "bad_length"),
        (bytes.fromhex("04" + CNP_PAYLOAD_HEX[2:]), "not_cnp"),  # RC SEND_ONLY
    ],
)
def test_what_is_not_a_cnp_is_rejected(payload: bytes, reason: str) -> None:
    with pytest.raises(CnpRejectedError) as e:
        parse_cnp(payload)
    assert e.value.reason == reason


def test_a_qp_beyond_24_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="24 bits"):
        cnp_packet("10.0.0.2", "10.0.0.1", 5001, CNP_QP_MAX + 1)
