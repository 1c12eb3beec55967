"""Simulator benchmark: the compiled core, its bare event loop, and the Python engine.

    python -m bench.sim_bench [--repeat N]

All in the same run, on one core:

1. the transient (seed 000's: 10 sources at 10 Gb/s, a 100-packet buffer, the bottleneck
   at 0.5 Gb/s from 2 to 4 s, 6 s simulated) on the compiled core, N times: events/s and
   wall per simulated second, the median with the spread of the N runs (the machine's
   noise, with the load average before and after: the machine is shared);
2. the fct scenario (seed 003's dynamic flows) run long enough for 10,000 flows: the same;
3. the bare event loop in the core's language (``qcn.simulator._core.bare_loop``: the same
   heap of the same events, popped and pushed as often, no model): the share of its speed
   the model keeps;
4. the Python engine, the reference (``QCN_SIM_ENGINE=python``), on the first simulated
   second of the transient and the first 50 ms of the fct run, beside the core on the same:
   the core's speed over the Python engine's (and, as before, the Python engine's share of
   a bare Python heap loop);
5. DCQCN on the transient (``qcn_preset = "dcqcn"``: ECN marks, the receivers' CNPs, its
   rules) against the transient's own QCN on the core, runs of the two alternated: DCQCN's
   events/s over QCN's (the target: at least 0.8).  With the paper's curve (marks from 5 to
   200 KB) in the transient's 150 KB buffer DCQCN marks little and the hot spot's excess
   is dropped, cheap events; so also with the curve within the buffer and the rates and
   timers fitted to the 0.5 Gb/s hot spot (:data:`DCQCN_HELD`), where it holds the queue
   and the run has QCN's number of events.
"""

from __future__ import annotations

import argparse
import heapq
import os
import statistics
import sys
import time
from typing import Any

from qcn.core import scenario
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from qcn.simulator import compiled
from qcn.simulator.engine import Simulation

FLOWS = 10_000
"""The fct run's flows (the issue's 10,000-flow run)."""
PYTHON_TRANSIENT_S = 1.0
PYTHON_FCT_S = 0.05
DCQCN_TARGET = 0.8
"""DCQCN's events/s on the core, at least this share of QCN's on the same transient."""
DCQCN_HELD: dict[str, Any] = {
    "qcn_preset": "dcqcn",
    "qcn.cp.kmin_bytes": 15_000,
    "qcn.cp.kmax_bytes": 60_000,
    "qcn.cp.pmax": 0.1,
    "qcn.rp.min_rate_bps": 5e5,
    "qcn.rp.rate_unit_bps": 5e4,
    "qcn.rp.timer_s": 1.1e-3,
    "qcn.rp.r_ai_bps": 2e6,
    "qcn.rp.r_hai_bps": 2.5e6,
    "qcn.rp.dcqcn.alpha_timer_s": 1.1e-3,
    "qcn.rp.dcqcn.cnp_interval_s": 1e-3,
}
"""DCQCN on the transient holding its hot spot's queue: marks from 10 to 40 frames (up to
10 %), the rates and timer as `qcn run transient` fits them to the 0.5 Gb/s port (x0.05,
x20), alpha's period and the CNP interval with the timer."""


def python_bare_loop(events: int) -> float:
    """The Python engine's own baseline: heapq push/pop of ``events`` events."""
    heap: list[tuple[float, int]] = []
    started = time.perf_counter()
    t = 0.0
    for i in range(min(events, 64)):
        heapq.heappush(heap, (t + i, i))
    for i in range(events):
        t, _ = heapq.heappop(heap)
        heapq.heappush(heap, (t + 1.0, i))
    return events / (time.perf_counter() - started)


def core_bare_loop(events: int) -> float:
    """The same in C++: the core's heap and event records, no model."""
    assert compiled._core is not None
    started = time.perf_counter()
    compiled._core.bare_loop(events)
    return events / (time.perf_counter() - started)


def fct_for(flows: int) -> Scenario:
    """The fct scenario, long enough that at least ``flows`` flows start."""
    sc = scenario.load("fct")
    drawn = len(sc.draw_flows(1))
    duration = round(sc.duration_s * flows / drawn * 1.02, 2)
    while len(sc.with_overrides({"duration_s": duration}).draw_flows(1)) < flows:
        duration += 0.01
    return sc.with_overrides({"duration_s": duration})


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return (
        f"{med:,.0f} (min {min(values):,.0f}, max {max(values):,.0f}; "
        f"spread {(max(values) - min(values)) / med:.0%})"
    )


def measure(sc: Scenario, repeat: int) -> tuple[list[float], list[float], Trace]:
    """events/s and wall per simulated second of ``repeat`` core runs."""
    rates, walls = [], []
    trace = Trace()
    for _ in range(repeat):
        trace = compiled.CompiledSimulation(sc, seed=1).run()
        rates.append(trace.events / trace.wall_s)
        walls.append(trace.wall_s / sc.duration_s)
    return rates, walls, trace


def against_python(sc: Scenario, seconds: float) -> tuple[float, float, float]:
    """(the core's events/s, the Python engine's, the Python engine's share of a bare
    Python heap loop) on the first ``seconds`` of ``sc``."""
    short = sc.with_overrides({"duration_s": seconds})
    core = compiled.CompiledSimulation(short, seed=1).run()
    py = Simulation(short, seed=1).run()
    assert core.events == py.events
    py_rate = py.events / py.wall_s
    return core.events / core.wall_s, py_rate, py_rate / python_bare_loop(py.events)


def dcqcn_against_qcn(
    sc: Scenario, overrides: dict[str, Any], repeat: int
) -> tuple[list[float], list[float], Trace]:
    """events/s of ``repeat`` core runs of ``sc`` as it is and with DCQCN (``overrides``),
    alternated (so that the machine's load falls on both alike), and the last DCQCN trace."""
    dcqcn = sc.with_overrides(overrides)
    qcn_rates, dcqcn_rates = [], []
    trace = Trace()
    for _ in range(repeat):
        qcn = compiled.CompiledSimulation(sc, seed=1).run()
        qcn_rates.append(qcn.events / qcn.wall_s)
        trace = compiled.CompiledSimulation(dcqcn, seed=1).run()
        dcqcn_rates.append(trace.events / trace.wall_s)
    return qcn_rates, dcqcn_rates, trace


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="core runs of each scenario")
    args = parser.parse_args(argv)
    if compiled.CORE_MISSING is not None:
        print(compiled.core_status())
        return 1
    load_before = os.getloadavg()
    transient = scenario.load("transient")
    fct = fct_for(FLOWS)

    rates, walls, trace = measure(transient, args.repeat)
    bare = [core_bare_loop(trace.events) for _ in range(args.repeat)]
    ratio = statistics.median(rates) / statistics.median(bare)
    print(
        f"sim: transient ({transient.duration_s:g} s simulated, 10 x 10 Gb/s, "
        f"{trace.events:,} events), compiled core, {args.repeat} runs:\n"
        f"  events/s {spread(rates)}\n"
        f"  wall per simulated second {statistics.median(walls):.3f} s "
        f"(min {min(walls):.3f}, max {max(walls):.3f}): "
        f"{1 / statistics.median(walls):.1f}x real time\n"
        f"  bare C++ event loop {spread(bare)} events/s: the core keeps {ratio:.2f} of it"
    )
    f_rates, f_walls, f_trace = measure(fct, max(1, args.repeat // 2))
    f_bare = core_bare_loop(f_trace.events)
    print(
        f"sim: fct, {len(f_trace.flows):,} flows ({fct.duration_s:g} s simulated, "
        f"{f_trace.events:,} events), compiled core, {len(f_rates)} runs:\n"
        f"  events/s {spread(f_rates)}\n"
        f"  wall per simulated second {statistics.median(f_walls):.3f} s; "
        f"bare C++ event loop {f_bare:,.0f} events/s: the core keeps "
        f"{statistics.median(f_rates) / f_bare:.2f} of it"
    )
    for name, sc, seconds in (
        ("transient", transient, PYTHON_TRANSIENT_S),
        ("fct", fct, PYTHON_FCT_S),
    ):
        core_rate, py_rate, py_share = against_python(sc, seconds)
        print(
            f"sim: {name}'s first {seconds:g} s on both engines: compiled core "
            f"{core_rate:,.0f} events/s, Python engine {py_rate:,.0f} events/s "
            f"({py_share:.2f} of a bare Python heap loop): the core is "
            f"{core_rate / py_rate:.0f}x the Python engine"
        )
    for label, overrides in (
        ("the preset", {"qcn_preset": "dcqcn"}),
        ("its queue held (bench.sim_bench.DCQCN_HELD)", DCQCN_HELD),
    ):
        qcn_rates, dcqcn_rates, d_trace = dcqcn_against_qcn(transient, overrides, args.repeat)
        d_ratio = statistics.median(dcqcn_rates) / statistics.median(qcn_rates)
        print(
            f"sim: transient with DCQCN, {label} ({d_trace.events:,} events; "
            f"{d_trace.extra['marks']:,.0f} marks, {d_trace.extra['cnps']:,.0f} CNPs, "
            f"{d_trace.drops:,} drops), compiled core, {args.repeat} runs alternated with the "
            f"transient's QCN ({transient.params.rp.scheme}):\n"
            f"  DCQCN events/s {spread(dcqcn_rates)}\n"
            f"  QCN events/s {spread(qcn_rates)}\n"
            f"  DCQCN over QCN {d_ratio:.2f} (target at least {DCQCN_TARGET}: "
            f"{'met' if d_ratio >= DCQCN_TARGET else 'MISSED'})"
        )
    load_after = os.getloadavg()
    print(
        f"sim: load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after, "
        f"on {os.cpu_count()} CPUs (the machine is shared: the spread above is its noise)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
