"""Pipeline benchmark: packets/s of the CP pipeline vs a plain L2 program, same BMv2.

    python -m bench.pipeline_bench [--rate PPS] [--seconds S] [--rounds R]
                                   [--simple-switch PATH] [--instructions] [--three-point]

Both programs run on the same simple_switch_grpc build, with the same traffic: a paced
sender offers 100-byte frames from h0 at a rate both keep up with, the receiver counts
what comes out of h1, and the switch process's CPU time is read from /proc (its idle CPU
rate, measured just before, subtracted).  A program's figure is packets forwarded per
CPU-second: the rate one core of this machine sustains with it.  (Measuring under
overload instead is no use on 2 cores: BMv2's pcap input then loses frames erratically
and sender, receiver and switch fight for the same CPUs.)  The CP pipeline runs with the
arrival CP on the egress port (the defaults: bytes, Bernoulli sampling at 1 %, nothing
congested): every frame is admitted and counted in ingress, judged by the CP's per-frame
stage, and taken off the count in egress; the feedback stage runs for the ~10 % of frames
that may be sampled, and no CNM is sent.  Rounds alternate between the programs; medians
are compared.  ``--simple-switch`` runs another BMv2 build, e.g. one configured with
``--disable-logging-macros`` (behavioral-model's performance guide): with logging macros
compiled in, BMv2 formats a log line's arguments for every table and action even when the
log level discards it, which weighs on a pipeline in proportion to its size.

``--instructions`` adds a figure free of this VM's timing noise: the switch's user-space
instructions per packet on its packet path (receive callback, ingress, egress and
transmit threads), counted by valgrind's callgrind, over the packets it parsed.  It leaves
out the kernel's share of the work, which is the same for both programs, so its ratio is
lower than the CPU-time ratio; it is the figure to compare two versions of the pipeline
with.

Target (issue 20): qcn / l2 >= 0.85 with the arrival CP on every frame.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.lab import BENCH_DIR, namespace, switch
from qcn.controller.entries import CpPort, cp_entries, default_cpid, edge_entries, l2_entry
from qcn.controller.p4runtime import P4RuntimeSwitch
from qcn.core.params import CpParams
from qcn.core.pipeline import compile_program
from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC
from qcn.topologies.calibration import cpu_seconds, offer

H0_MAC, H1_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02"


def measure(rate_pps: float, duration_s: float) -> tuple[int, float]:
    """Offer ``rate_pps`` for ``duration_s``; return (frames offered, frames/s delivered)."""
    frame = bytes(
        Ether(src=H0_MAC, dst=H1_MAC) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / bytes(58)
    )
    sent, received, pps = offer(frame, rate_pps, duration_s)
    return sent, pps if received > 0.5 * sent else 0.0


#: Issue 20's and 31's target: the CP pipeline at this fraction of plain L2's packets per
#: CPU-second.
TARGET_RATIO = 0.85

#: ``--three-point``: seed 003's three-point QCN at the seed's 2.5 % reflection.
THREE_POINT = CpParams(three_point=True, reflect_p0=0.025)
SWITCH_MAC = "02:00:00:00:00:fe"


def install(name: str, p4rt: P4RuntimeSwitch) -> None:
    """h0 -> h1 forwarding; for the CP pipeline, a CP with the seeds' defaults on port 1;
    three-point ("qcn3"): both ports host-facing, port 0 tagging h0's frames and port 1
    the end reflection point (its CNMs go back to h0), the CP in three-point mode."""
    entities = [l2_entry(H1_MAC, 1)]
    if name == "qcn":
        entities += cp_entries(CpPort.with_default_cpid(1, CpParams(), SWITCH_MAC))
    if name == "qcn3":
        entities += cp_entries(CpPort.with_default_cpid(1, THREE_POINT, SWITCH_MAC))
        for port in (0, 1):
            entities += edge_entries(port, THREE_POINT, default_cpid(SWITCH_MAC, port), SWITCH_MAC)
    p4rt.insert(entities)


def callgrind(pid: int, *options: str) -> None:
    subprocess.run(["callgrind_control", *options, str(pid)], check=True, capture_output=True)


#: BMv2's packet path: the receive callback and simple_switch's ingress, egress and transmit
#: threads (inclusive: everything they call).
PACKET_PATH = (
    "bm::packet_handler(",
    "SimpleSwitch::ingress_thread(",
    "SimpleSwitch::egress_thread(",
    "SimpleSwitch::transmit_thread(",
)
PARSE = "bm::Parser::parse("
#: Slow enough for the switch to keep up under valgrind (~50x slower): at 400 packets/s
#: the CP pipeline fell behind and its count per packet varied by 15 % between runs.
INSTRUCTIONS_RATE_PPS = 100


def calls_to(dump_text: str, prefix: str) -> int:
    """How many calls a callgrind dump records to the functions whose name starts with
    ``prefix``.  Names are compressed: "(id) name" where first seen, in an fn= or a cfn=
    line, "(id)" after that; a call is a cfn= line followed by "calls=N ..."."""
    names: dict[str, str] = {}
    total, callee = 0, ""
    for line in dump_text.splitlines():
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if m is not None:
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("cfn="):
                callee = names.get(m.group(1), "")
        elif line.startswith("calls=") and callee.startswith(prefix):
            total += int(line.split("=")[1].split()[0])
    return total


def packet_path_instructions(dump: Path) -> tuple[int, int]:
    """(instructions on BMv2's packet path, packets parsed) in one callgrind dump."""
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    inclusive: dict[str, int] = {}
    for line in annotated.splitlines():
        for fn in PACKET_PATH:
            if fn in line and fn not in inclusive:
                inclusive[fn] = int(line.split()[0].replace(",", ""))
    missing = set(PACKET_PATH) - inclusive.keys()
    if missing:
        raise RuntimeError(f"{dump}: no {', '.join(sorted(missing))}")
    # The parser runs once per packet: its call count is the number of packets handled.
    parsed = calls_to(dump.read_text(), PARSE)
    return sum(inclusive.values()), parsed


def instructions_per_packet(
    name: str, program: tuple[Path, Path], workdir: Path, *, executable: str, seconds: float
) -> float:
    """User-space instructions per packet on BMv2's packet path, at INSTRUCTIONS_RATE_PPS: the
    receive callback's and the pipeline threads' instructions (inclusive) over the packets
    parsed in the same window.  Counting packets the switch parsed, not the packets sent,
    keeps frames still in flight at the window's edges from skewing the figure, and
    counting only the packet path leaves out the idle threads (gRPC, Thrift)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "callgrind.out"
    wrapper = workdir / "callgrind-switch"
    wrapper.write_text(
        "#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no "
        f'--callgrind-out-file={out} {shutil.which(executable)} "$@" 2>/dev/null\n'
    )
    wrapper.chmod(0o755)
    with (
        switch(2, workdir, str(wrapper), start_timeout_s=180) as sw,
        P4RuntimeSwitch("127.0.0.1:9559", *program) as p4rt,
    ):
        install(name, p4rt)
        assert sw.pid is not None
        measure(200, 1.0)  # warm up (first-packet allocations, ARP-free path)
        callgrind(sw.pid, "-i", "on")
        callgrind(sw.pid, "-z")
        measure(INSTRUCTIONS_RATE_PPS, seconds)
        callgrind(sw.pid, "-d")
    dumps = sorted(out.parent.glob(out.name + ".*"), key=lambda p: int(p.suffix[1:]))
    instructions, parsed = packet_path_instructions(dumps[-1])
    if parsed == 0:
        raise RuntimeError(f"{name}: the switch parsed no packet in the window ({dumps[-1]})")
    per_packet = instructions / parsed
    print(f"  {name:4}: {per_packet:9,.0f} instructions per packet ({parsed} packets)", flush=True)
    return per_packet


def run_program(
    name: str,
    program: tuple[Path, Path],
    workdir: Path,
    *,
    rate: float,
    seconds: float,
    executable: str,
) -> float:
    """Packets forwarded per CPU-second of the switch, at an offered rate it keeps up with."""
    p4info, bmv2_json = program
    with (
        switch(2, workdir, executable) as sw,
        P4RuntimeSwitch("127.0.0.1:9559", p4info, bmv2_json) as p4rt,
    ):
        install(name, p4rt)
        assert sw.pid is not None
        idle_start = cpu_seconds(sw.pid)
        time.sleep(seconds)
        idle_rate = (cpu_seconds(sw.pid) - idle_start) / seconds
        busy_start = cpu_seconds(sw.pid)
        t0 = time.monotonic()
        sent, delivered = measure(rate, seconds)
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(sw.pid) - busy_start - idle_rate * elapsed
    forwarded = delivered * seconds
    if forwarded < 0.99 * sent:
        print(f"  {name}: only {forwarded:.0f} of {sent} forwarded; lower --rate")
    per_cpu_s = forwarded / cpu
    print(
        f"  {name:4}: {per_cpu_s:9,.0f} packets per switch CPU-second "
        f"({forwarded:.0f} packets, {cpu:.2f} CPU-s)",
        flush=True,
    )
    return per_cpu_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=12_000, help="offered packets/s")
    parser.add_argument("--seconds", type=float, default=4.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--simple-switch",
        default=SIMPLE_SWITCH_GRPC,
        metavar="PATH",
        help="the simple_switch_grpc binary to run (default: the one on PATH)",
    )
    parser.add_argument(
        "--three-point",
        action="store_true",
        help="also the CP pipeline in seed 003's three-point mode (Fb tag, 2.5 %% reflection)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count user-space instructions per packet under valgrind (deterministic)",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("pipeline_bench: needs root (namespaces)")
        return 2
    if shutil.which(args.simple_switch) is None:
        print(f"pipeline_bench: {args.simple_switch}: not found")
        return 2
    if args.instructions and not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        print("pipeline_bench: --instructions needs valgrind (apt install valgrind)")
        return 2
    print(f"pipeline: switch {shutil.which(args.simple_switch)}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        programs = {
            "l2": compile_program(BENCH_DIR / "l2_baseline.p4", work / "l2"),
            "qcn": compile_program(out_dir=work / "qcn"),
        }
        if args.three_point:
            programs["qcn3"] = programs["qcn"]
        results: dict[str, list[float]] = {name: [] for name in programs}
        with namespace(2):
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds}", flush=True)
                for name, program in programs.items():
                    results[name].append(
                        run_program(
                            name,
                            program,
                            work / f"{name}{r}",
                            rate=args.rate,
                            seconds=args.seconds,
                            executable=args.simple_switch,
                        )
                    )
            if args.instructions:
                print("instructions (callgrind)", flush=True)
                counts = {
                    name: instructions_per_packet(
                        name,
                        program,
                        work / f"{name}-callgrind",
                        executable=args.simple_switch,
                        seconds=args.seconds,
                    )
                    for name, program in programs.items()
                }
    l2, qcn = statistics.median(results["l2"]), statistics.median(results["qcn"])
    print(f"pipeline: l2 baseline {l2:,.0f}, qcn {qcn:,.0f} packets per CPU-second (medians)")
    verdict = "met" if qcn / l2 >= TARGET_RATIO else "missed"
    print(f"pipeline: qcn / l2 = {qcn / l2:.2f} (target >= {TARGET_RATIO}: {verdict})")
    if args.three_point:
        qcn3 = statistics.median(results["qcn3"])
        print(
            f"pipeline: three-point qcn3 {qcn3:,.0f} packets per CPU-second: qcn3 / l2 = "
            f"{qcn3 / l2:.2f}, qcn3 / qcn = {qcn3 / qcn:.2f}"
        )
    if args.instructions:
        print(
            f"pipeline: instructions per packet l2 {counts['l2']:,.0f}, qcn {counts['qcn']:,.0f}: "
            f"l2 / qcn = {counts['l2'] / counts['qcn']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
