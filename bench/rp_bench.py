"""Reaction-point benchmark: CNM-to-kernel latency and the CNM rate one core sustains.

    python bench/rp_bench.py [--cnms N]

Two namespaces joined by a veth; the daemon runs in one, the other sends CNMs with a raw
socket as fast as it can.  Reported:

- latency, p50/p99: kernel receive timestamp of a CNM -> its new rate acknowledged by the
  kernel (the daemon measures it; ``qcn rp status`` shows it too);
- sustained rate: CNMs per second of the daemon's busy time (receive, validate, rules,
  kernel update) during a blast, and the same for a baseline receiver that only reads
  frames off the same kind of socket; the ratio is the share of the bare socket's rate the
  full daemon keeps.

Targets (issue 5): p99 < 1 ms, >= 20,000 CNMs/s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from qcn.params import QcnParams  # noqa: E402

H1, H2 = f"rpbench1-{os.getpid()}", f"rpbench2-{os.getpid()}"
IF1, IF2 = "rpb1-eth0", "rpb2-eth0"
MAC1, MAC2 = "00:00:00:00:00:01", "00:00:00:00:00:02"

BLASTER = """
import socket, sys, time
from scapy.layers.l2 import Ether
from qcn.frames import CNM
n, gap = int(sys.argv[1]), float(sys.argv[2])
frames = [bytes(Ether(dst="00:00:00:00:00:01", src="02:00:00:00:00:fe")
                / CNM(qntz_fb=1 + i % 8, encap_da="00:00:00:00:00:02", msdu=b"\\x08\\x00"))
          for i in range(64)]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[3], 0))
start = time.monotonic()
for i in range(n):
    s.send(frames[i % 64])
    if gap:
        time.sleep(gap)
print(n / (time.monotonic() - start))
"""

BASELINE = """
import select, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x22E7))
s.bind((sys.argv[1], 0x22E7))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.setblocking(False)
n, got, busy = int(sys.argv[2]), 0, 0.0
print("ready", flush=True)
deadline = time.monotonic() + 30
while got < n and time.monotonic() < deadline:
    if not select.select([s], [], [], 0.5)[0]:
        continue
    began = time.perf_counter()
    for _ in range(256):
        try:
            s.recvmsg(2048, 64)
        except BlockingIOError:
            break
        got += 1
    busy += time.perf_counter() - began
print(got / busy if busy else 0.0, got)
"""


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def setup() -> None:
    sh("ip", "netns", "add", H1)
    sh("ip", "netns", "add", H2)
    sh("ip", "link", "add", IF1, "netns", H1, "type", "veth", "peer", "name", IF2, "netns", H2)
    for ns, ifc, mac, ip in ((H1, IF1, MAC1, "10.0.0.1"), (H2, IF2, MAC2, "10.0.0.2")):
        sh("ip", "-n", ns, "link", "set", ifc, "address", mac)
        sh("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", ifc)
        sh("ip", "-n", ns, "link", "set", ifc, "up")
    sh("ip", "-n", H1, "neigh", "add", "10.0.0.2", "lladdr", MAC2, "dev", IF1, "nud", "permanent")
    for ns in (H1, H2):
        # A larger socket buffer so that a blast is not dropped before the reader runs.
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.core.rmem_default=8388608")


def teardown() -> None:
    for ns in (H1, H2):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def blast(n: int, gap_s: float = 0.0) -> float:
    out = subprocess.run(
        ["ip", "netns", "exec", H2, sys.executable, "-c", BLASTER, str(n), str(gap_s), IF2],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return float(out.stdout.split()[-1])


def baseline_rate(n: int) -> float:
    rx = subprocess.Popen(
        ["ip", "netns", "exec", H1, sys.executable, "-c", BASELINE, IF1, str(n)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert rx.stdout is not None
    rx.stdout.readline()
    blast(n)
    rate, _ = rx.communicate(timeout=60)[0].split()
    return float(rate)


def daemon_run(n: int, workdir: Path) -> tuple[float, float, float]:
    params = workdir / "p.toml"
    # Rates hold still (no cycles end) so every CNM is a pure decrease + kernel update.
    QcnParams.from_dict({"rp": {"line_rate_bps": 1e9, "timer_s": 60.0,
                                "bc_limit_bytes": 1 << 30}}).save(params)  # fmt: skip
    status = workdir / f"rp-{IF1}.json"
    daemon = subprocess.Popen(
        ["ip", "netns", "exec", H1, sys.executable, "-m", "qcn.cli", "rp", "start",
         "--iface", IF1, "--params", str(params), "--status-dir", str(workdir)],
        stdout=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip
    try:
        while not status.exists():
            time.sleep(0.05)

        def accepted() -> int:
            try:
                return int(json.loads(status.read_text())["counters"].get("cnms_accepted", 0))
            except (ValueError, OSError):
                return -1

        # Latency: CNMs one at a time (2 ms apart), each a separate kernel update.
        blast(500, gap_s=0.002)
        while accepted() < 500:
            time.sleep(0.05)
        time.sleep(0.3)
        report = json.loads(status.read_text())
        p50, p99 = report["latency_p50_ms"], report["latency_p99_ms"]
        # Capacity: a blast; the daemon divides the CNMs it handled by its busy time.
        blast(n)
        time.sleep(1.0)
        report = json.loads(status.read_text())
        return float(report["cnm_capacity_per_s"]), p50, p99
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cnms", type=int, default=50_000, help="CNMs in the throughput blast")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("rp_bench: needs root (namespaces)")
        return 2
    teardown()
    setup()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            base = baseline_rate(args.cnms)
            rate, p50, p99 = daemon_run(args.cnms, Path(tmp))
    finally:
        teardown()
    print(f"rp: CNM -> kernel rate latency p50 {p50:.3f} ms, p99 {p99:.3f} ms (target p99 < 1 ms)")
    print(f"rp: sustained {rate:,.0f} CNMs/s (target >= 20,000)")
    print(f"rp: bare-socket baseline {base:,.0f} frames/s; daemon/baseline = {rate / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
