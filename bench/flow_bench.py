"""Flow generator benchmark: flows started and completed per second of the sender's CPU.

    python -m bench.flow_bench [--flows N]

Two namespaces joined by a veth; the flow receiver (qcn.topologies.flow_receiver) runs in one,
and in the other:

- the flow sender (qcn.reaction_point.flow_sender) with N one-frame flows all due at once, so
  that it starts, sends, and retires them as fast as it can (each its own socket, frame,
  acknowledgement and log lines);
- the baseline, in the same run: a bare loop doing the least a flow needs, a UDP socket
  opened, one datagram sent, its acknowledgement read, the socket closed.

Both report their own CPU time (user + system); the ratio is the share of the bare loop's
flows per CPU-second that the sender keeps.  Target: at least 10x the flow rate the
BMv2 runs need (fct at 0.8 load: about 80 flows/s), i.e. >= 800 flows/s per core.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qcn.core.flows import FLAG_ACK, FLOW_HEADER
from qcn.reaction_point.flow_sender import HostFlow, write_host_flows
from qcn.topologies.netns import VethEnd, add_veth, namespaces

TX, RX = f"flowbench1-{os.getpid()}", f"flowbench2-{os.getpid()}"
TX_IP, RX_IP = "10.66.0.1", "10.66.0.2"
PORT = 5002
TARGET_FLOWS_PER_S = 800.0


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bare(n: int) -> None:
    """The baseline: n flows of one datagram each, done with the least work; prints CPU s."""
    started = cpu_s()
    for flow_id in range(n):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((RX_IP, PORT))
            sock.settimeout(5)
            sock.send(FLOW_HEADER.pack(flow_id, 0, 1, 0) + bytes(2))
            while True:
                header = FLOW_HEADER.unpack_from(sock.recv(64))
                if header[0] == flow_id and header[3] & FLAG_ACK:
                    break
    print(cpu_s() - started)


def in_ns(ns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", ns, sys.executable, *args]


def child_cpu_s(proc: subprocess.Popen[str]) -> float:
    """Run ``proc`` to its end; the CPU seconds it used (its own rusage, from wait4)."""
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return float(usage.ru_utime + usage.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--flows", type=int, default=20_000)
    ap.add_argument("--bare", type=int, help=argparse.SUPPRESS)  # the baseline's own process
    args = ap.parse_args(argv)
    if args.bare is not None:
        bare(args.bare)
        return 0
    n = args.flows
    with namespaces(TX, RX), tempfile.TemporaryDirectory() as tmp:
        add_veth(
            VethEnd(TX, "fb-tx", address=f"{TX_IP}/24"),
            VethEnd(RX, "fb-rx", address=f"{RX_IP}/24"),
        )
        work = Path(tmp)
        receiver = subprocess.Popen(
            in_ns(RX, "-m", "qcn.topologies.flow_receiver", "--port", str(PORT),
                  "--log", str(work / "rx.jsonl"), "--interval", "1000"),
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert receiver.stdout is not None
            receiver.stdout.readline()
            table = work / "flows.csv"
            write_host_flows(table, [HostFlow(i, 0.0, 1) for i in range(n)])
            started = time.perf_counter()
            sender = subprocess.Popen(
                in_ns(TX, "-m", "qcn.reaction_point.flow_sender", str(table), "--dst", RX_IP,
                      "--port", str(PORT), "--log", str(work / "tx.jsonl")),
                stdout=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            sender_cpu = child_cpu_s(sender)
            wall = time.perf_counter() - started
            done = sum(1 for line in (work / "tx.jsonl").open() if '"acked"' in line)
            baseline = subprocess.run(
                in_ns(TX, "-m", "bench.flow_bench", "--bare", str(n)),
                capture_output=True, text=True, check=True, timeout=600,
            )  # fmt: skip
            bare_cpu = float(baseline.stdout.split()[-1])
        finally:
            receiver.send_signal(signal.SIGINT)
            receiver.wait(10)
    # (The sender's CPU includes Python's start-up, about 0.1 s: a small share of N flows.)
    rate, bare_rate = done / sender_cpu, n / bare_cpu
    print(
        json.dumps(
            {
                "flows": n,
                "completed": done,
                "sender_cpu_s": sender_cpu,
                "sender_wall_s": wall,
                "flows_per_cpu_s": rate,
                "bare_flows_per_cpu_s": bare_rate,
                "ratio": rate / bare_rate,
            }
        )
    )
    verdict = "met" if rate >= TARGET_FLOWS_PER_S else "MISSED"
    print(
        f"flow sender: {rate:,.0f} flows per CPU-second ({done} of {n} one-frame flows, "
        f"{wall:.1f} s wall); bare socket loop {bare_rate:,.0f}/s; ratio {rate / bare_rate:.2f}; "
        f"target >= {TARGET_FLOWS_PER_S:,.0f}/s: {verdict}"
    )
    return 0 if done == n else 1


if __name__ == "__main__":
    sys.exit(main())
