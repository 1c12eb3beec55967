"""The P4 program: it compiles cleanly, and its constants agree with the Python side."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether

from qcn.controller import config, entries
from qcn.core import ecmp, frames, params, pipeline
from tests.toolchain import requires_tools

ROOT = Path(__file__).resolve().parent.parent
DEFINES = ROOT / "p4src" / "include" / "defines.p4"
HEADERS = ROOT / "p4src" / "include" / "headers.p4"


def p4_constants() -> dict[str, int]:
    text = DEFINES.read_text()
    found = re.findall(
        r"const (?:bit<\d+>|mac_addr_t|port_t)\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+);", text
    )
    return {name: int(value, 0) for name, value in found}


@pytest.mark.parametrize(
    ("p4_name", "python_value"),
    [
        ("ETHERTYPE_CNM", frames.ETHERTYPE_CNM),
        ("ETHERTYPE_CNTAG", frames.ETHERTYPE_CNTAG),
        ("ETHERTYPE_VLAN", frames.ETHERTYPE_VLAN),
        ("ETHERTYPE_FB_TAG", frames.ETHERTYPE_FB_TAG),
        ("FB_TAG_BYTES", frames.FB_TAG_BYTES),
        ("ETH_HEADER_BYTES", frames.ETH_HEADER_BYTES),
        ("CNM_PDU_BYTES", frames.CNM_PDU_BYTES),
        ("CNM_MAX_MSDU_BYTES", frames.CNM_MAX_MSDU_BYTES),
        ("CNM_VERSION", frames.CNM_VERSION),
        ("MSDU_OFFSET_UNTAGGED", frames.MSDU_OFFSET_UNTAGGED),
        ("MSDU_OFFSET_TAGGED", frames.MSDU_OFFSET_TAGGED),
        ("DROP_PORT", config.MAX_PORT + 1),
        ("W_FRAC_BITS", params.W_FRAC_BITS),
        ("QNTZ_SHIFT", params.QNTZ_SHIFT),
        ("QNTZ_FB_MAX", params.QNTZ_FB_MAX),
        ("PROB_ONE", params.PROB_ONE),
        ("OCCUPANCY_FRAMES_SHIFT", pipeline.OCCUPANCY_FRAMES_SHIFT),
        ("FLOOD_GROUP_BASE", entries.FLOOD_GROUP_BASE),
        ("CNM_SESSION_BASE", entries.CNM_SESSION_BASE),
        ("ETHERTYPE_MAC_CONTROL", frames.ETHERTYPE_MAC_CONTROL),
        ("MAC_CONTROL_OPCODE_PAUSE", frames.MAC_CONTROL_OPCODE_PAUSE),
        ("PAUSE_FRAME_BYTES", frames.PAUSE_FRAME_BYTES),
        ("PAUSE_DST_ADDR", int(frames.PAUSE_DST_MAC.replace(":", ""), 16)),
        ("IP_PROTO_UDP", ecmp.IP_PROTO_UDP),
        ("ECN_NOT_ECT", ecmp.ECN_NOT_ECT),
        ("ECN_CE", ecmp.ECN_CE),
        ("ECN_SLOPE_SHIFT", params.ECN_SLOPE_SHIFT),
        ("SIGNAL_CNM", entries.SIGNAL_CODES[params.CpSignal.CNM]),
    ],
)
def test_constant_agrees(p4_name: str, python_value: int) -> None:
    assert p4_constants()[p4_name] == python_value


def test_held_port_bits_agree() -> None:
    size = (ROOT / "p4src" / "include" / "size.p4").read_text()
    bits = int(re.search(r"#define HELD_PORT_BITS (\d+)", size)[1])  # type: ignore[index]
    assert bits == pipeline.HELD_PORT_BITS
    assert f"#define HELD_PAIRS {1 << (2 * bits)}" in size
    assert f"typedef bit<{2 * bits}> held_index_t;" in size
    assert f"port[{bits - 1}:0] ++ input[{bits - 1}:0]" in size


def test_fb_tag_layouts_agree() -> None:
    body = re.search(r"header fb_tag_t \{(.*?)\}", HEADERS.read_text(), re.S)
    assert body is not None
    widths = re.findall(r"bit<(\d+)>\s+(\w+);", body.group(1))
    p4_fields = [(name, int(bits)) for bits, name in widths]
    scapy_fields = [
        (f.name, f.size if hasattr(f, "size") else 8 * f.sz) for f in frames.FbTagHeader.fields_desc
    ]
    assert [w for _, w in p4_fields] == [w for _, w in scapy_fields]
    assert [n for n, _ in p4_fields][:-1] == [n for n, _ in scapy_fields][:-1]
    # The header ends with the frame's own EtherType, so it is what a push adds.
    assert sum(w for _, w in p4_fields) // 8 == frames.FB_TAG_BYTES


def test_cnm_header_layouts_agree() -> None:
    body = re.search(r"header cnm_t \{(.*?)\}", HEADERS.read_text(), re.S)
    assert body is not None
    widths = re.findall(r"(?:bit<(\d+)>|(mac_addr_t))\s+(\w+);", body.group(1))
    p4_fields = [(name, 48 if mac else int(bits)) for bits, mac, name in widths]
    scapy_fields = [
        (f.name, f.size if hasattr(f, "size") else 8 * f.sz)
        for f in frames.CNM.fields_desc
        if f.name != "msdu"
    ]
    assert p4_fields == scapy_fields
    assert sum(w for _, w in p4_fields) == 8 * frames.CNM_PDU_BYTES
    assert len(Ether() / frames.CNM()) == frames.CNM_HEADER_BYTES


@requires_tools("p4c")
def test_p4c_compiles_cleanly(tmp_path: Path) -> None:
    source = ROOT / "p4src" / "qcn_cp.p4"
    r = subprocess.run(
        pipeline.p4c_command(source, tmp_path), capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr
    # p4c's BMv2 back end warns for every table with an action profile, since its front end
    # gives each table a default action (p4src/control/forwarding.p4): that one only.
    profile = re.compile(
        r".*warning: Target does not support default_action for QcnIngress\.l2\.ecmp_forwarding"
        r" \(due to action profiles\)\n.*table ecmp_forwarding \{\n\s*\^+\n"
    )
    rest = profile.sub("", r.stderr, count=1)
    assert "warning" not in rest.lower(), r.stderr
    assert (tmp_path / "qcn_cp.json").exists()
