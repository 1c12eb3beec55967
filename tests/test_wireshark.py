"""The Wireshark dissector (qcn/wireshark/qcn.lua) read by the real tshark: every CNM field
equals the scapy layer's value for the same bytes (qcn.wireshark.expected_fields), and
malformed CNMs raise their expert warnings; a CNP decodes as RoCEv2 by tshark's own
dissector.  Frames here are built by the scapy layers;
ptf_tests/test_wireshark.py decodes CNMs the real pipeline emitted."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

from qcn.core.cp_model import FbTag
from qcn.core.ecmp import ROCEV2_UDP_PORT
from qcn.core.frames import (
    BTH_BYTES,
    BTH_OPCODE_CNP,
    CNM,
    CNP_PAYLOAD_BYTES,
    ETHERTYPE_CNM,
    ICRC_BYTES,
    CNTag,
    cnp_packet,
    push_fb_tag,
)
from qcn.wireshark import PLUGIN, decode, install, mismatches
from tests.kit import assert_one_line_error, qcn

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None, reason="tshark not installed (make sysdeps)"
)

CP_MAC = "02:00:00:00:01:00"
CPID = (0x020000000100 << 16) | 11


def sampled(size: int = 1000, *, tag: int | None = None) -> bytes:
    frame = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:0b")
    if tag is not None:
        frame /= CNTag(flow_id=tag)
    return bytes(
        frame / IP(src="10.0.0.1", dst="10.0.0.11") / UDP(sport=1234, dport=5001) / Raw(bytes(size))
    )


def cnm_for(frame: bytes, **fields: Any) -> bytes:
    return bytes(
        Ether(dst=frame[6:12], src=CP_MAC, type=ETHERTYPE_CNM)
        / CNM(cpid=CPID, encap_da=frame[0:6], msdu=frame[12 : 12 + 64], **fields)
    )


CASES = {
    "QntzFb 63, truncated MSDU": (cnm_for(sampled(), qntz_fb=63, qoff=11, qdelta=3), True),
    "QntzFb 0": (cnm_for(sampled(20), qntz_fb=0, qoff=1, qdelta=0), False),
    "negative qoff and qdelta": (cnm_for(sampled(20), qntz_fb=5, qoff=-21, qdelta=-300), False),
    "ECM positive, priority 5": (
        cnm_for(sampled(20), fb_positive=1, qntz_fb=9, qoff=-7, encap_priority=5),
        False,
    ),
    "tagged MSDU": (cnm_for(sampled(20, tag=0x1234), qntz_fb=17, qoff=4, qdelta=2), False),
    "tagged, truncated MSDU": (cnm_for(sampled(tag=0xBEEF), qntz_fb=40), True),
}


def test_every_field_equals_the_scapy_layers() -> None:
    frames = [f for f, _ in CASES.values()]
    for name, (frame, truncated), got in zip(CASES, CASES.values(), decode(frames), strict=True):
        assert mismatches(frame, got) == {}, name
        # The MSDU is decoded as the Ethernet payload it was, through a CN-TAG if it has one.
        tagged = "tagged" in name
        assert got.protocols.startswith(
            "eth:ethertype:qcn.cnm:qcn.cntag:ip:udp" if tagged else "eth:ethertype:qcn.cnm:ip:udp"
        ), (name, got.protocols)
        if tagged:
            assert got.fields["qcn.cntag.flow_id"] in ("0x1234", "0xbeef")
        assert (got.experts == {"qcn.cnm.msdu.truncated"}) is truncated, (name, got.experts)


def test_malformed_cnms_raise_their_expert_warnings() -> None:
    good = cnm_for(sampled(20), qntz_fb=3)
    version = bytearray(good)
    version[14] |= 0x10  # version 1
    reserved = bytearray(good)
    reserved[15] |= 0x80  # a reserved bit of the first two bytes
    encap_reserved = bytearray(good)
    encap_reserved[29] |= 0x01  # the encapsulated priority's reserved bits
    beyond = bytearray(good)
    beyond[36:38] = (60).to_bytes(2, "big")  # 60 MSDU bytes claimed, fewer carried
    over = cnm_for(sampled(), qntz_fb=3)[:38] + bytes(70)
    over = over[:36] + (70).to_bytes(2, "big") + over[38:]  # 70 > 64, all carried
    short = good[: 14 + 20]
    cases = {
        "version": (version, {"qcn.cnm.version.unknown"}),
        "reserved": (reserved, {"qcn.cnm.reserved.set"}),
        "encap reserved": (encap_reserved, {"qcn.cnm.reserved.set"}),
        "beyond the frame": (beyond, {"qcn.cnm.msdu_len.beyond_frame"}),
        "over 64": (over, {"qcn.cnm.msdu_len.over_max"}),
        "too short": (short, {"qcn.cnm.short"}),
        "well formed": (good, set()),
    }
    decoded = decode([bytes(f) for f, _ in cases.values()])
    for (name, (_, experts)), got in zip(cases.items(), decoded, strict=True):
        assert got.experts == experts, name


def test_a_cn_tagged_data_frame_decodes_through_the_tag() -> None:
    (got,) = decode([sampled(20, tag=0x0042)])
    assert got.protocols.startswith("eth:ethertype:qcn.cntag:ip:udp")
    assert got.fields["qcn.cntag.flow_id"] == "0x0042"
    assert got.fields["qcn.cntag.type"] == "0x0800"


def test_an_fb_tagged_data_frame_decodes_through_the_tag() -> None:
    (got,) = decode([push_fb_tag(sampled(20), FbTag(True, 42, CPID, -5, 7))])
    assert got.protocols.startswith("eth:ethertype:qcn.fbtag:ip:udp")
    fields = {k: got.fields[f"qcn.fbtag.{k}"] for k in ("qntzfb", "cpid", "qoff", "qdelta")}
    assert fields == {"qntzfb": "42", "cpid": f"0x{CPID:016x}", "qoff": "-5", "qdelta": "7"}
    assert got.fields["qcn.fbtag.reflected"] in ("1", "True")
    assert got.fields["qcn.fbtag.type"] == "0x0800"


def test_the_filter_names_are_the_documented_ones() -> None:
    """docs/wireshark.md lists every field the plugin registers, and nothing else."""
    r = subprocess.run(
        ["tshark", "-G", "fields", "-X", f"lua_script:{PLUGIN}"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    registered = {
        line.split("\t")[2]
        for line in r.stdout.splitlines()
        if line.startswith(("F\t", "P\t")) and line.split("\t")[2].startswith("qcn.")
    }
    docs = (Path(__file__).resolve().parent.parent / "docs" / "wireshark.md").read_text()
    documented = {
        word.strip("`") for word in docs.split() if word.startswith("`qcn.") and word.endswith("`")
    }
    assert registered == documented


def test_install_copies_the_plugin_tshark_then_loads(tmp_path: Path) -> None:
    target = install(tmp_path / "plugins")
    assert target.read_bytes() == PLUGIN.read_bytes()
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "wireshark", "--install", "--plugin-dir",
         str(tmp_path / "other")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "other" / "qcn.lua").exists()
    shown = subprocess.run(
        [sys.executable, "-m", "qcn", "wireshark"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert shown.stdout.splitlines()[0] == str(PLUGIN)
    assert f"tshark -X lua_script:{PLUGIN}" in shown.stdout


def test_install_into_an_unwritable_folder_is_one_line() -> None:
    assert_one_line_error(
        qcn("wireshark", "--install", "--plugin-dir", "/proc/qcn-plugins"),
        "cannot install the plugin into /proc/qcn-plugins",
    )


def test_the_documented_ad_hoc_use_prints_the_path_alone() -> None:
    """docs/wireshark.md's `$(qcn wireshark | head -1)`: the path, and no traceback when
    head closes the pipe."""
    r = subprocess.run(
        f"{sys.executable} -m qcn wireshark | head -1",
        shell=True, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert r.stdout == f"{PLUGIN}\n"
    assert r.stderr == ""


def test_tshark_decodes_a_cnp_as_rocev2() -> None:
    """The CNP qcn.core.frames builds is RoCEv2's to tshark's own InfiniBand dissector (the
    plugin adds nothing to it): UDP to 4791, the BTH with opcode 0x81 and the flow's QP,
    then 16 reserved bytes and the ICRC (tshark 4.0 names no CNP: it shows them as the
    opcode's unknown payload)."""
    frame = Ether(src="00:00:00:00:00:0b", dst="00:00:00:00:00:01") / cnp_packet(
        "10.0.0.11", "10.0.0.1", 5001, 0xABCDE
    )
    raw = bytes(frame)
    with tempfile.TemporaryDirectory(prefix="qcn-cnp-") as tmp:
        pcap = Path(tmp) / "cnp.pcap"
        wrpcap(str(pcap), [frame])
        names = [
            "frame.protocols", "udp.dstport", "infiniband.bth.opcode", "infiniband.bth.destqp",
            "infiniband.bth.p_key", "infiniband.bth.psn", "infiniband.vendor",
        ]  # fmt: skip
        r = subprocess.run(
            ["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=;", "-E", "occurrence=l",
             *(a for name in names for a in ("-e", name))],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
    got = dict(zip(names, r.stdout.strip().split(";"), strict=True))
    assert got["frame.protocols"] == "eth:ethertype:ip:udp:infiniband"
    assert int(got["udp.dstport"]) == ROCEV2_UDP_PORT
    assert int(got["infiniband.bth.opcode"]) == BTH_OPCODE_CNP
    assert int(got["infiniband.bth.destqp"], 16) == 0xABCDE
    assert (got["infiniband.bth.p_key"], got["infiniband.bth.psn"]) == ("65535", "0")
    # What follows the BTH: the reserved bytes and the ICRC, exactly as built.
    assert got["infiniband.vendor"].replace(":", "") == raw[-CNP_PAYLOAD_BYTES + BTH_BYTES :].hex()
    assert raw[-ICRC_BYTES:] != bytes(ICRC_BYTES)


def test_the_plugin_names_what_follows_a_cnps_bth() -> None:
    """tshark 4.0 leaves a CNP's reserved bytes and ICRC unnamed: the plugin names them,
    and warns of a reserved byte set or a payload of another length."""
    good = bytes(
        Ether(src="00:00:00:00:00:0b", dst="00:00:00:00:00:01")
        / cnp_packet("10.0.0.11", "10.0.0.1", 5001, 0xABCDE)
    )
    reserved = bytearray(good)
    reserved[-ICRC_BYTES - 6] = 1
    short = bytes(
        Ether(src="00:00:00:00:00:0b", dst="00:00:00:00:00:01")
        / IP(src="10.0.0.11", dst="10.0.0.1")
        / UDP(sport=5001, dport=ROCEV2_UDP_PORT)
        / Raw(good[-CNP_PAYLOAD_BYTES:-1])
    )
    ok, bad, cut = decode([good, bytes(reserved), short])
    assert ok.fields["qcn.cnp.reserved"] == ":".join(["00"] * 16)
    assert int(ok.fields["qcn.cnp.icrc"], 16) == int.from_bytes(good[-ICRC_BYTES:], "little")
    assert ok.experts == set()
    assert bad.experts == {"qcn.cnp.reserved.set"}
    assert cut.experts == {"qcn.cnp.length"}
