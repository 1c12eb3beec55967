"""Reaction-point benchmark: CNM-to-kernel latency and the CNM rate one core sustains.

    python -m bench.rp_bench [--cnms N]

Two namespaces joined by a veth; the daemon runs in one, the other sends CNMs with a raw
socket as fast as it can.  Reported:

- latency, p50/p99: kernel receive timestamp of a CNM -> its new rate acknowledged by the
  kernel (the daemon measures it; ``qcn rp status`` shows it too);
- sustained rate: CNMs per second of the daemon's busy time (receive, validate, rules,
  kernel update) during a blast, and the same for a baseline receiver that only reads
  frames off the same kind of socket; the ratio is the share of the bare socket's rate the
  full daemon keeps.

- flood: genuine CNMs (one every 2 ms) while a second sender floods the daemon with junk
  CNMs (about a destination the host does not send to) as fast as it can: the genuine
  CNMs' p99 latency, how many of them the kernel dropped, and the junk the kernel dropped
  (``kernel_socket_drops``), against the p99 without the flood;
- neighbours: the latency at 100 CNMs/s with 5,000 entries in the host's neighbour table,
  against the p99 with one (same run);
- new limiters: CNMs each about a new flow (--per-flow) some 2,000 a second, past the
  1,024-limiter bound (each evicts one): their latency and losses; then the CPU share of
  an idle daemon holding 2,047 limiters;
- churn: limiters created and released back to back on a real interface (100,000 by
  default: the daemon must live for ever, its ids are recycled), as cycles per second and
  as a share of the bare netlink rate (one class change per round trip, same run);
- limiter count: the CNM-to-kernel latency of a daemon holding 1, 100, 1,000 and 2,047
  limiters (--per-flow, --max-limiters the same), idle (CNMs 1 ms apart, each about one
  of its limiters) and under churn (CNMs 1 ms apart, each about a new flow, which evicts
  the least recent limiter): p50 and p99 over the last 10,000 CNMs (the daemon's window),
  and the p99 of the part before the daemon read the CNM (its loop, its other threads or
  the machine's other processes in the way): where the time goes (issue 42).

Targets (issues 5, 28 and 42): p99 < 1 ms, >= 20,000 CNMs/s; p99 < 2 ms with 5,000
neighbours; >= 2,000 new limiters/s with p99 < 5 ms; an idle daemon with 2,047 limiters
under 5 % of a core; p99 < 2 ms at every limiter count, idle and under churn.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyroute2 import NetNS
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.core.frames import CNM
from qcn.core.params import QcnParams
from qcn.reaction_point.daemon import status_files
from qcn.reaction_point.tc import ROOT_HANDLE, FlowMatch, HtbLimiters
from qcn.topologies.mininet_bmv2 import RP_REALTIME_PRIORITY
from qcn.topologies.netns import VethEnd, add_veth, namespaces, sh

H1, H2 = f"rpbench1-{os.getpid()}", f"rpbench2-{os.getpid()}"
IF1, IF2 = "rpb1-eth0", "rpb2-eth0"
MAC1, MAC2 = "00:00:00:00:00:01", "00:00:00:00:00:02"


def cnm_frames(da: str) -> str:
    """64 CNMs to h1 about destination ``da`` (QntzFb 1..8), as hex lines."""
    return "\n".join(
        bytes(
            Ether(dst=MAC1, src="02:00:00:00:00:fe")
            / CNM(qntz_fb=1 + i % 8, encap_da=da, msdu=b"\x08\x00")
        ).hex()
        for i in range(64)
    )


def setup() -> None:
    """The two hosts' link (namespaces made by :func:`qcn.topologies.netns.namespaces`)."""
    add_veth(VethEnd(H1, IF1, MAC1, "10.0.0.1/24"), VethEnd(H2, IF2, MAC2, "10.0.0.2/24"))
    sh("ip", "-n", H1, "neigh", "add", "10.0.0.2", "lladdr", MAC2, "dev", IF1, "nud", "permanent")
    for ns in (H1, H2):
        # A larger socket buffer so that a blast is not dropped before the reader runs.
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.core.rmem_default=8388608")


NEIGHBOURS = 5000
JUNK_DA = "00:00:00:00:00:99"
"""The flood's CNMs name a destination h1 never sent to: each is read, parsed, refused."""


def blaster(
    n: int, gap_s: float = 0.0, da: str = MAC2, frames: str | None = None
) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        ["ip", "netns", "exec", H2, sys.executable, "-m", "qcn.topologies.rawframes", "blast", IF2,
         "--count", str(n), "--gap", str(gap_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(frames or cnm_frames(da))
    proc.stdin.close()
    return proc


def blast(n: int, gap_s: float = 0.0, da: str = MAC2) -> float:
    return blasted_rate(blaster(n, gap_s, da))


def blasted_rate(proc: subprocess.Popen[str]) -> float:
    """The frames/s a blaster reports (its stdin is already closed, so not communicate())."""
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.wait(timeout=600)
    return float(out.split()[-1])


def baseline_rate(n: int) -> float:
    rx = subprocess.Popen(
        ["ip", "netns", "exec", H1, sys.executable, "-m", "qcn.topologies.rawframes", "drain", IF1,
         "--ethertype", "cnm", "--count", str(n)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert rx.stdout is not None
    rx.stdout.readline()
    blast(n)
    rate, _ = rx.communicate(timeout=60)[0].split()
    return float(rate)


@contextmanager
def daemon(workdir: Path, *extra: str, realtime: bool = False) -> Iterator[Path]:
    """A daemon on h1 for the duration (``extra``: more `qcn rp start` options; ``realtime``:
    under SCHED_FIFO, as a Mininet run starts it); yields its status file."""
    workdir.mkdir(parents=True, exist_ok=True)
    params = workdir / "p.toml"
    # Rates hold still (no cycles end) so every CNM is a pure decrease + kernel update.
    QcnParams.from_dict({"rp": {"line_rate_bps": 1e9, "timer_s": 60.0,
                                "bc_limit_bytes": 1 << 30}}).save(params)  # fmt: skip
    proc = subprocess.Popen(
        ["ip", "netns", "exec", H1,
         *(["chrt", "-f", str(RP_REALTIME_PRIORITY)] if realtime else []),
         sys.executable, "-m", "qcn", "rp", "start",
         "--iface", IF1, "--params", str(params), "--status-dir", str(workdir), *extra],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not status_files(workdir, IF1):
            time.sleep(0.05)
        status = status_files(workdir, IF1)[0]
        wait_for(lambda: bool(read_status(status)["running"]))
        yield status
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def read_status(status: Path) -> dict[str, Any]:
    while True:
        try:
            return dict(json.loads(status.read_text()))
        except (ValueError, OSError):
            time.sleep(0.01)


def accepted(status: Path) -> int:
    return int(read_status(status)["counters"].get("cnms_accepted", 0))


def wait_for(cond: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the daemon did not catch up")
        time.sleep(0.05)


def daemon_run(n: int, workdir: Path) -> tuple[float, float, float]:
    with daemon(workdir) as status:
        # Latency: CNMs one at a time (2 ms apart), each a separate kernel update.
        blast(500, gap_s=0.002)
        wait_for(lambda: accepted(status) >= 500)
        time.sleep(0.3)  # one more status write after the last CNM
        report = read_status(status)
        p50, p99 = report["latency_p50_ms"], report["latency_p99_ms"]
        # Capacity: a blast; the daemon divides the CNMs it handled by its busy time.
        blast(n)
        time.sleep(1.0)
        report = read_status(status)
        return float(report["cnm_capacity_per_s"]), p50, p99


def flood_run(n: int, workdir: Path) -> dict[str, Any]:
    """Genuine CNMs every 2 ms during a junk flood of ``n`` frames."""
    with daemon(workdir) as status:
        junk = blaster(n, 0.0, JUNK_DA)
        genuine = blast(400, gap_s=0.002)
        junk_rate = blasted_rate(junk)
        time.sleep(0.5)
        report = read_status(status)
        c = report["counters"]
        return {
            "p50_ms": report["latency_p50_ms"],
            "p99_ms": report["latency_p99_ms"],
            "genuine_sent": 400,
            "genuine_accepted": c.get("cnms_accepted", 0),
            "junk_per_s": junk_rate,
            "junk_refused": c.get("dropped_unknown_destination", 0),
            "kernel_socket_drops": c.get("kernel_socket_drops", 0),
            "genuine_rate_per_s": genuine,
        }


def neighbours_run(workdir: Path, neighbours: int) -> tuple[float, float]:
    """CNM latency (p50, p99 ms) at 100 CNMs/s with ``neighbours`` entries in h1's table
    (the daemon re-read the whole table every 0.5 s: p99 464 ms at 5,000, issue 28)."""
    batch = "\n".join(
        f"neigh replace 10.0.{i >> 8}.{i & 255} lladdr 02:00:00:{i >> 16:02x}:{i >> 8 & 255:02x}:"
        f"{i & 255:02x} nud permanent dev {IF1}"
        for i in range(256, 256 + neighbours)
    )
    subprocess.run(["ip", "-n", H1, "-batch", "-"], input=batch, text=True, check=True)
    # The /24 above does not cover 10.0.1.0 and up: the addresses are a table's, not routes.
    try:
        with daemon(workdir) as status:
            blast(300, gap_s=0.01)
            wait_for(lambda: accepted(status) >= 300)
            time.sleep(0.3)
            report = read_status(status)
            return report["latency_p50_ms"], report["latency_p99_ms"]
    finally:
        sh("ip", "-n", H1, "neigh", "flush", "dev", IF1, "nud", "all")
        sh("ip", "-n", H1, "neigh", "add", "10.0.0.2", "lladdr", MAC2, "dev", IF1,
           "nud", "permanent")  # fmt: skip


def flow_cnms(count: int) -> str:
    """CNMs to h1 about ``count`` distinct flows to h2 (one source port each), as hex."""
    out = []
    for i in range(count):
        msdu = bytes(IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1024 + i, dport=5001))
        out.append(bytes(
            Ether(dst=MAC1, src="02:00:00:00:00:fe")
            / CNM(qntz_fb=20, encap_da=MAC2, msdu=b"\x08\x00" + msdu)
        ).hex())  # fmt: skip
    return "\n".join(out)


NEW_FLOWS = 6000
NEW_FLOW_GAP_S = 0.00035
IDLE_LIMITERS = 2047


def new_limiters_run(workdir: Path) -> dict[str, float]:
    """CNMs each about a new flow, as fast as 0.4 ms apart (--per-flow, default bound of
    1,024 limiters: past it each new one evicts one), then the CPU an idle daemon holding
    2,047 limiters takes (no CNM, no traffic, rates held still)."""
    frames = flow_cnms(NEW_FLOWS)
    with daemon(workdir / "churn", "--per-flow") as status:
        rate = blasted_rate(blaster(NEW_FLOWS, NEW_FLOW_GAP_S, frames=frames))
        wait_for(lambda: accepted(status) >= NEW_FLOWS * 0.99, timeout_s=30)
        time.sleep(0.5)
        report = read_status(status)
        c = report["counters"]
        churn = {
            "per_s": rate,
            "p50_ms": report["latency_p50_ms"],
            "p99_ms": report["latency_p99_ms"],
            "accepted": c.get("cnms_accepted", 0),
            "evicted": c.get("limiters_evicted", 0),
            "kernel_drops": c.get("kernel_socket_drops", 0),
        }
    with daemon(workdir / "idle", "--per-flow", "--max-limiters", str(IDLE_LIMITERS)) as status:
        blasted_rate(blaster(IDLE_LIMITERS, 0.0004, frames=flow_cnms(IDLE_LIMITERS)))
        wait_for(lambda: len(read_status(status)["limiters"]) == IDLE_LIMITERS, timeout_s=30)
        pid = int(read_status(status)["pid"])
        time.sleep(1.0)  # the poller backs off once nothing changes
        cpu0, t0 = process_cpu_s(pid), time.monotonic()
        time.sleep(5.0)
        churn["idle_cpu_share"] = (process_cpu_s(pid) - cpu0) / (time.monotonic() - t0)
    return churn


LIMITER_COUNTS = (1, 100, 1000, 2047)
COUNT_CNMS = 10_500
"""CNMs measured per limiter count and kind: the daemon's latency window (10,000) and some."""
COUNT_GAP_S = 0.001


def limiter_count_run(
    workdir: Path, limiters: int, churn: bool, realtime: bool
) -> dict[str, float]:
    """A daemon holding ``limiters`` limiters, then :data:`COUNT_CNMS` CNMs 1 ms apart: about
    its limiters in turn (idle) or each about a new flow (churn); the latency figures of
    those CNMs alone (they fill the daemon's window)."""
    name = f"count-{limiters}-{'churn' if churn else 'idle'}-{'rt' if realtime else 'other'}"
    options = ("--per-flow", "--max-limiters", str(limiters))
    with daemon(workdir / name, *options, realtime=realtime) as status:
        blasted_rate(blaster(limiters, NEW_FLOW_GAP_S, frames=flow_cnms(limiters)))
        wait_for(lambda: len(read_status(status)["limiters"]) == limiters, timeout_s=60)
        before = accepted(status)
        if churn:  # flows beyond the held ones, each new: each evicts the least recent
            frames = "\n".join(flow_cnms(limiters + COUNT_CNMS).split("\n")[limiters:])
        else:
            frames = flow_cnms(limiters)
        blasted_rate(blaster(COUNT_CNMS, COUNT_GAP_S, frames=frames))
        wait_for(lambda: accepted(status) >= before + COUNT_CNMS * 0.99, timeout_s=120)
        time.sleep(0.5)  # one more status write after the last CNM
        report = read_status(status)
        c = report["counters"]
        return {
            "p50_ms": report["latency_p50_ms"],
            "p99_ms": report["latency_p99_ms"],
            "read_p99_ms": report["read_delay_p99_ms"],
            "accepted": c.get("cnms_accepted", 0) - before,
            "kernel_drops": c.get("kernel_socket_drops", 0),
        }


def limiter_count_table(workdir: Path) -> list[str]:
    """The latency at each limiter count, idle and under churn, the daemon scheduled as an
    ordinary process (as `qcn rp start` runs it) and under SCHED_FIFO (as a Mininet run
    starts it), as the table's lines.  Where the two differ, the time went to waiting for
    a CPU that the machine's other processes held."""
    lines = [
        "| limiters | scheduling | idle p50 / p99 (ms) | idle: before the read, p99 | churn "
        "p50 / p99 (ms) | churn: before the read, p99 |",
        "|---|---|---|---|---|---|",
    ]
    for realtime in (False, True):
        for n in LIMITER_COUNTS:
            idle, churn = (limiter_count_run(workdir, n, c, realtime) for c in (False, True))
            lines.append(
                f"| {n:,} | {'SCHED_FIFO' if realtime else 'ordinary'} | {idle['p50_ms']:.3f} "
                f"/ {idle['p99_ms']:.3f} | {idle['read_p99_ms']:.3f} | {churn['p50_ms']:.3f} / "
                f"{churn['p99_ms']:.3f} | {churn['read_p99_ms']:.3f} |"
            )
            print(f"rp: limiter count {n:,}: {lines[-1]}", file=sys.stderr, flush=True)
    return lines


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has used (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def churn_run(cycles: int) -> tuple[float, float, float]:
    """(limiter create/release cycles per second, rate changes per second, and the same
    changes per second through pyroute2's ``change-class``: the baseline)."""
    with HtbLimiters(IF1, netns=H1) as tc, NetNS(H1) as ns:
        match = FlowMatch("10.0.0.1", "10.0.0.2", 17, 1, 1)
        classid = ROOT_HANDLE | tc.add(match, 10e6)
        began = time.perf_counter()
        for i in range(2000):
            tc.set_rate(match, 10e6 + (i % 2) * 1e6)
        bare = 2000 / (time.perf_counter() - began)
        began = time.perf_counter()
        for i in range(2000):
            rate = f"{10_000_000 + (i % 2) * 1_000_000}bit"
            ns.tc("change-class", "htb", tc.ifindex, classid, parent=ROOT_HANDLE,
                  rate=rate, ceil=rate, mtu=tc.mtu)  # fmt: skip
        pyroute2 = 2000 / (time.perf_counter() - began)
        tc.remove(match)
        began = time.perf_counter()
        for i in range(cycles):
            tc.add(FlowMatch("10.0.0.1", "10.0.0.2", 17, i & 0xFFFF, 1), 10e6)
            tc.remove(FlowMatch("10.0.0.1", "10.0.0.2", 17, i & 0xFFFF, 1))
            if i % 10_000 == 9_999:
                print(f"rp: churn {i + 1:,}/{cycles:,}", file=sys.stderr, flush=True)
        return cycles / (time.perf_counter() - began), bare, pyroute2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cnms", type=int, default=50_000, help="CNMs in the throughput blast")
    parser.add_argument("--flood", type=int, default=50_000, help="junk frames in the flood")
    parser.add_argument("--churn", type=int, default=100_000, help="limiter create/release cycles")
    parser.add_argument(
        "--only-limiter-counts", action="store_true", help="the limiter-count table alone"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("rp_bench: needs root (namespaces)")
        return 2
    if args.only_limiter_counts:
        with namespaces(H1, H2), tempfile.TemporaryDirectory() as tmp:
            setup()
            table = limiter_count_table(Path(tmp))
        print_limiter_counts(table)
        return 0
    with namespaces(H1, H2), tempfile.TemporaryDirectory() as tmp:
        setup()
        table = limiter_count_table(Path(tmp))
        base = baseline_rate(args.cnms)
        rate, p50, p99 = daemon_run(args.cnms, Path(tmp) / "blast")
        flood = flood_run(args.flood, Path(tmp) / "flood")
        nb_p50, nb_p99 = neighbours_run(Path(tmp) / "neighbours", NEIGHBOURS)
        new = new_limiters_run(Path(tmp))
        churn, bare, pyroute2 = churn_run(args.churn)
    print(f"rp: CNM -> kernel rate latency p50 {p50:.3f} ms, p99 {p99:.3f} ms (target p99 < 1 ms)")
    print(f"rp: sustained {rate:,.0f} CNMs/s (target >= 20,000)")
    print(f"rp: bare-socket baseline {base:,.0f} frames/s; daemon/baseline = {rate / base:.2f}")
    f = flood
    print(
        f"rp: flood of {args.flood:,} junk CNMs at {f['junk_per_s']:,.0f}/s: genuine CNMs p50 "
        f"{f['p50_ms']:.3f} ms, p99 {f['p99_ms']:.3f} ms (p99 {f['p99_ms'] / p99:.1f}x the "
        f"unflooded {p99:.3f} ms); genuine accepted {f['genuine_accepted']}/{f['genuine_sent']}; "
        f"junk refused {f['junk_refused']:,}, dropped by the kernel {f['kernel_socket_drops']:,}"
    )
    print(
        f"rp: {NEIGHBOURS:,} neighbours in the host's table: CNM latency at 100 CNMs/s p50 "
        f"{nb_p50:.3f} ms, p99 {nb_p99:.3f} ms ({nb_p99 / p99:.1f}x the p99 with one "
        f"neighbour, same run; target p99 < 2 ms)"
    )
    print(
        f"rp: new limiters {new['per_s']:,.0f}/s (a CNM about a new flow each, {NEW_FLOWS:,}): "
        f"latency p50 {new['p50_ms']:.3f} ms, p99 {new['p99_ms']:.3f} ms; accepted "
        f"{new['accepted']:,.0f}, {new['evicted']:,.0f} evicted past 1,024, "
        f"{new['kernel_drops']:,.0f} dropped by the kernel (target >= 2,000/s, p99 < 5 ms)"
    )
    print(
        f"rp: idle daemon holding {IDLE_LIMITERS:,} limiters: {100 * new['idle_cpu_share']:.1f} % "
        f"of a core (target < 5 %)"
    )
    print(
        f"rp: limiter churn {churn:,.0f} create/release cycles/s over {args.churn:,} cycles "
        f"(ids recycled)"
    )
    print(
        f"rp: limiter rate change {bare:,.0f}/s over one netlink message; pyroute2 "
        f"change-class (baseline) {pyroute2:,.0f}/s; ratio {bare / pyroute2:.1f}x"
    )
    print_limiter_counts(table)
    return 0


def print_limiter_counts(table: list[str]) -> None:
    load = os.getloadavg()[0]
    print(
        f"rp: CNM-to-kernel latency by limiters held, {COUNT_CNMS:,} CNMs 1 ms apart each "
        f"(target p99 < 2 ms; load average {load:.1f} on {os.cpu_count()} CPUs):"
    )
    for line in table:
        print(f"rp:   {line}")


if __name__ == "__main__":
    sys.exit(main())
