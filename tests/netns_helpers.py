"""Helpers for tests that run things inside network namespaces they create."""

from __future__ import annotations

import subprocess
import sys

_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
gap = float(sys.argv[2])
for h in sys.stdin.read().split():
    f = bytes.fromhex(h)
    if len(f) >= 14:
        s.send(f)
        if gap:
            time.sleep(gap)
"""


def run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def send_frames(ns: str, iface: str, frames: list[bytes], gap_s: float = 0.0) -> None:
    """Send raw frames out of ``iface`` in namespace ``ns`` (one helper process)."""
    subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", _SENDER, iface, str(gap_s)],
        input="\n".join(f.hex() for f in frames),
        text=True,
        check=True,
    )


def delete_netns(*names: str) -> None:
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
