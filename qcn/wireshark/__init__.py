"""`qcn wireshark`: the project's Wireshark dissector for 802.1Qau frames, and where it goes.

The dissector is a Lua plugin (``qcn.lua`` beside this file) that Wireshark and tshark load
unchanged: ad hoc with ``-X lua_script:PATH``, or for good from the personal Lua plugin
folder, which this command asks tshark for (``tshark -G folders``) and installs into.
docs/wireshark.md lists its display-filter names.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qcn.core.errors import QcnError
from qcn.core.publish import write_atomic

PLUGIN = Path(__file__).with_name("qcn.lua")
DEFAULT_PERSONAL_LUA_PLUGINS = Path("~/.local/lib/wireshark/plugins")
"""Wireshark's personal Lua plugin folder on Linux, where tshark cannot be asked."""


class WiresharkError(QcnError):
    """The plugin cannot be installed where asked."""


def personal_plugin_dir() -> Path:
    """The folder Wireshark loads personal Lua plugins from, as tshark reports it."""
    if shutil.which("tshark"):
        try:
            out = subprocess.run(
                ["tshark", "-G", "folders"], capture_output=True, text=True, timeout=30, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        for line in out.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "Personal Lua Plugins" and value.strip():
                return Path(value.strip())
    return DEFAULT_PERSONAL_LUA_PLUGINS.expanduser()


@dataclass
class Decoded:
    """One frame as tshark decodes it with the plugin."""

    fields: dict[str, Any] = field(default_factory=dict)
    """Every ``qcn.*`` field tshark printed, by display-filter name (a list where repeated)."""
    experts: set[str] = field(default_factory=set)
    """The expert infos the plugin raised, by name (e.g. ``qcn.cnm.msdu.truncated``)."""
    protocols: str = ""
    """tshark's ``frame.protocols`` (e.g. ``eth:ethertype:qcn.cnm:ip:udp``)."""


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of tshark's JSON tree, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def decode(frames: Sequence[bytes], timeout_s: float = 60.0) -> list[Decoded]:
    """Decode Ethernet ``frames`` with tshark and this plugin (tshark must be installed)."""
    from scapy.utils import PcapWriter  # noqa: PLC0415 - scapy is slow to import

    with tempfile.TemporaryDirectory(prefix="qcn-ws-") as tmp:
        pcap = Path(tmp) / "frames.pcap"
        with PcapWriter(str(pcap), linktype=1, sync=True) as out:
            for frame in frames:
                out.write(frame)
        r = subprocess.run(
            ["tshark", "-X", f"lua_script:{PLUGIN}", "-r", str(pcap), "-T", "json",
             "--no-duplicate-keys"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    if r.returncode != 0:
        raise WiresharkError(f"tshark failed: {r.stderr.strip()[-500:]}")
    out_frames = []
    for packet in json.loads(r.stdout or "[]"):
        layers = packet["_source"]["layers"]
        d = Decoded(protocols=layers.get("frame", {}).get("frame.protocols", ""))
        for key, value in _walk(layers):
            if key == "_ws.expert":
                for expert in value if isinstance(value, list) else [value]:
                    d.experts.update(k for k in expert if k.startswith("qcn."))
            elif key.startswith("qcn.") and not isinstance(value, dict):
                d.fields[key] = value
        out_frames.append(d)
    return out_frames


def _colon_hex(data: bytes) -> str:
    return ":".join(f"{b:02x}" for b in data)


def expected_fields(frame: bytes) -> dict[str, str]:
    """What tshark must print for a CNM's fields (as ``-T json`` writes them), from the
    project's scapy layer's dissection of the same bytes."""
    from scapy.layers.l2 import Ether  # noqa: PLC0415

    from qcn.core.frames import CNM  # noqa: PLC0415 - binds the scapy layers

    c = Ether(frame)[CNM]
    cpid = int(c.cpid)
    out = {
        "qcn.cnm.version": str(c.version),
        "qcn.cnm.reserved": f"0x{c.reserved_v:04x}",
        "qcn.cnm.fb_positive": str(c.fb_positive),
        "qcn.cnm.qntzfb": str(c.qntz_fb),
        "qcn.cnm.cpid": f"0x{cpid:016x}",
        "qcn.cnm.cpid.mac": _colon_hex((cpid >> 16).to_bytes(6, "big")),
        "qcn.cnm.cpid.port": str(cpid & 0xFFFF),
        "qcn.cnm.qoff": str(c.qoff),
        "qcn.cnm.qdelta": str(c.qdelta),
        "qcn.cnm.encap_priority": str(c.encap_priority),
        "qcn.cnm.encap_reserved": f"0x{c.encap_reserved:04x}",
        "qcn.cnm.encap_da": str(c.encap_da),
        "qcn.cnm.msdu_len": str(c.msdu_len),
    }
    msdu = bytes(c.msdu)
    if msdu:
        out["qcn.cnm.msdu"] = _colon_hex(msdu)
    if len(msdu) >= 2:
        out["qcn.cnm.msdu.type"] = f"0x{int.from_bytes(msdu[:2], 'big'):04x}"
    return out


def mismatches(frame: bytes, got: Decoded) -> dict[str, tuple[str, Any]]:
    """Every CNM field where tshark's value differs from the scapy layer's: name ->
    (scapy's, tshark's)."""
    want = expected_fields(frame)
    return {k: (v, got.fields.get(k)) for k, v in want.items() if got.fields.get(k) != v}


def install(folder: Path) -> Path:
    """Copy the plugin into ``folder`` (created if needed), whole or not at all (a full disk
    used to leave a 0-byte plugin); the installed file's path."""
    target = folder / PLUGIN.name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(target, PLUGIN.read_bytes())
    except OSError as e:
        raise WiresharkError(f"cannot install the plugin into {folder}: {e.strerror}") from None
    return target


def register(sub: Any) -> None:
    p = sub.add_parser(
        "wireshark",
        help="the Wireshark dissector for CNM and CN-TAG frames: where it is, or install it",
        description="Print the path of the project's Wireshark dissector (802.1Qau CNM and "
        "CN-TAG, a Lua plugin) and how to load it, or install it into Wireshark's personal "
        "plugin folder.",
    )
    p.add_argument(
        "--install", action="store_true", help="copy it into the personal Lua plugin folder"
    )
    p.add_argument(
        "--plugin-dir",
        type=Path,
        metavar="DIR",
        help="with --install: this folder instead (default: the one tshark -G folders names)",
    )
    p.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    if args.plugin_dir is not None and not args.install:
        raise WiresharkError("--plugin-dir goes with --install")
    if args.install:
        target = install(args.plugin_dir or personal_plugin_dir())
        print(f"installed {target}: Wireshark and tshark now decode CNM and CN-TAG frames")
        print("  try: tshark -r CAPTURE.pcap -Y qcn.cnm -V")
        return 0
    print(PLUGIN)
    print(f"  load it ad hoc:  tshark -X lua_script:{PLUGIN} -r CAPTURE.pcap -Y qcn.cnm -V")
    print(f"  or for good:     qcn wireshark --install  (into {personal_plugin_dir()})")
    if shutil.which("tshark") is None:
        print("  tshark is not installed here (Debian: apt-get install tshark; make sysdeps)")
    return 0
