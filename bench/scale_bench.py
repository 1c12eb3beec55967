"""The simulator at datacenter scale: setup and cost per event against the hosts, and the
runs this field uses (HPCC's 320-host fat-tree, a 1,024-host leaf-spine).

    python -m bench.scale_bench [--repeat N] [--no-hpcc]

All in the same run, on one core (docs/simulator.md, "At datacenter scale"):

1. setup (the scenario's parse and checks, then the simulation built: routes, ports,
   flows drawn) of ``leaf-spine-fct`` on leaf-spine:4,16,H for 128 to 1,024 hosts (the
   same 20 switches: only the hosts grow), the median of N: the growth from 128 to 1,024
   hosts over the hosts' (8x); the target is within 1.5 of it;
2. the cost per event of ``leaf-spine-fct`` at 8, 128 and 1,024 hosts, each divided by
   the transient's measured just before it (the machine's load moves both alike), each
   the best of N runs (another process only ever adds time): 1,024 hosts' over 8
   hosts'; the target is within 1.3;
3. HPCC's 320-host fat-tree (the ``hpcc-fat-tree`` scenario: web-search at 0.3, 100 ms)
   and a 1,024-host leaf-spine for 10 ms, each a process of its own: wall time from the
   command to its end (setup included) and peak memory; the target for HPCC's is under
   2 minutes and 1 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from qcn.core import scenario
from qcn.core.scenario import Scenario
from qcn.simulator import compiled

SETUP_SHAPES = (
    "leaf-spine:4,16,8",
    "leaf-spine:4,16,16",
    "leaf-spine:4,16,32",
    "leaf-spine:4,16,64",
)
EVENT_SHAPES = (
    ("leaf-spine:1,2,4", 0.3),
    ("leaf-spine:4,16,8", 0.05),
    ("leaf-spine:4,16,64", 0.01),
)
"""(network, simulated seconds): some millions of events each."""
TRANSIENT_S = 2.0
SETUP_TARGET, EVENT_TARGET = 1.5, 1.3
HPCC_TARGET_S, HPCC_TARGET_BYTES = 120.0, 2**30


def fct_on(topology: str, duration_s: float) -> Scenario:
    return scenario.load("leaf-spine-fct").with_overrides(
        {"duration_s": duration_s, "network.topology": topology, "network.fabric_rate_bps": 20e9}
    )


def setup_s(topology: str) -> float:
    started = time.perf_counter()
    compiled.CompiledSimulation(fct_on(topology, 0.01), seed=1)
    return time.perf_counter() - started


def ns_per_event(sc: Scenario) -> tuple[float, int]:
    trace = compiled.CompiledSimulation(sc, seed=1).run()
    return 1e9 * trace.wall_s / trace.events, trace.events


def whole_run(name: str, overrides: dict[str, object]) -> dict[str, float]:
    """A run in a process of its own (``--child``): wall time and peak memory."""
    child = [sys.executable, "-m", "bench.scale_bench", "--child", name, json.dumps(overrides)]
    started = time.perf_counter()
    out = subprocess.run(child, capture_output=True, text=True, check=True).stdout
    got: dict[str, float] = json.loads(out.splitlines()[-1])
    got["process_s"] = time.perf_counter() - started
    return got


def child(name: str, overrides: str) -> int:
    started = time.perf_counter()
    sc = scenario.load(name).with_overrides(json.loads(overrides))
    simulation = compiled.CompiledSimulation(sc, seed=1)
    built = time.perf_counter()
    trace = simulation.run()
    print(
        json.dumps(
            {
                "hosts": len(sc.topology.hosts),
                "setup_s": built - started,
                "wall_s": time.perf_counter() - started,
                "events": trace.events,
                "flows": len(trace.flows),
                "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=3, help="measurements of each size (the median or the best)"
    )
    parser.add_argument("--no-hpcc", action="store_true", help="skip the two whole runs")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    if compiled.CORE_MISSING is not None:
        print(compiled.core_status())
        return 1
    load_before = os.getloadavg()
    transient = scenario.load("transient").with_overrides({"duration_s": TRANSIENT_S})

    setups = {t: statistics.median(setup_s(t) for _ in range(args.repeat)) for t in SETUP_SHAPES}
    first, last = setups[SETUP_SHAPES[0]], setups[SETUP_SHAPES[-1]]
    growth = (last / first) / 8
    print("scale: setup of leaf-spine-fct on leaf-spine:4,16,H (20 switches), median of "
          f"{args.repeat}: " + ", ".join(f"{128 << i} hosts {s:.3f} s"
                                         for i, s in enumerate(setups.values())))  # fmt: skip
    print(
        f"  128 -> 1,024 hosts: x{last / first:.1f} for x8 the hosts: {growth:.2f} of linear "
        f"(target: within {SETUP_TARGET}) {'met' if growth <= SETUP_TARGET else 'MISSED'}"
    )

    relative, absolute = {}, {}
    for topology, seconds in EVENT_SHAPES:
        reference = cost = float("inf")
        for _ in range(args.repeat):
            reference = min(reference, ns_per_event(transient)[0])
            ns, events = ns_per_event(fct_on(topology, seconds))
            cost = min(cost, ns)
        hosts = len(fct_on(topology, 0.01).topology.hosts)
        relative[hosts], absolute[hosts] = cost / reference, cost
        print(
            f"scale: {hosts:,} hosts ({topology}, {events:,} events): {cost:.0f} ns an event, "
            f"the transient's {reference:.0f} ns beside it (best of {args.repeat} each): "
            f"{cost / reference:.2f} of it"
        )
    flat = relative[max(relative)] / relative[min(relative)]
    print(
        f"  1,024 hosts' cost per event over 8 hosts' (each over the transient's): {flat:.2f} "
        f"(target: within {EVENT_TARGET}) {'met' if flat <= EVENT_TARGET else 'MISSED'}; "
        f"the costs alone: {absolute[max(absolute)] / absolute[min(absolute)]:.2f}"
    )

    if not args.no_hpcc:
        for label, name, overrides, target in (
            ("HPCC's 320-host fat-tree, 100 ms", "hpcc-fat-tree", {}, True),
            ("a 1,024-host leaf-spine, 10 ms", "leaf-spine-fct",
             {"duration_s": 0.01, "network.topology": "leaf-spine:8,16,64",
              "network.fabric_rate_bps": 20e9}, False),
        ):  # fmt: skip
            got = whole_run(name, overrides)
            verdict = ""
            if target:
                ok = got["process_s"] < HPCC_TARGET_S and got["peak_bytes"] < HPCC_TARGET_BYTES
                verdict = " (target: under 2 min and 1 GB) " + ("met" if ok else "MISSED")
            print(
                f"scale: {label}: {got['process_s']:.1f} s in all (setup {got['setup_s']:.1f} s), "
                f"peak {got['peak_bytes'] / 2**20:.0f} MB, {got['events']:,} events, "
                f"{got['flows']:,} flows, {1e9 * got['wall_s'] / got['events']:.0f} ns an event"
                + verdict
            )
    load_after = os.getloadavg()
    print(
        f"scale: load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
        f"on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
