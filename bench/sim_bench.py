"""Simulator benchmark: the full 6-second transient scenario (10 sources at 10 Gb/s).

    python -m bench.sim_bench

Prints simulated events per second and the wall time, against a baseline measured in the
same run: the bare event loop (heap push/pop of the same number of events, no model), so
the ratio is the share of the loop's speed the model keeps; and the wall time against the
simulated time (target: faster than real time, on one core).
"""

from __future__ import annotations

import heapq
import sys
import time

from qcn.core import scenario
from simulator.engine import Simulation


def bare_loop(events: int) -> float:
    heap: list[tuple[float, int]] = []
    started = time.perf_counter()
    t = 0.0
    for i in range(min(events, 64)):
        heapq.heappush(heap, (t + i, i))
    for i in range(events):
        t, _ = heapq.heappop(heap)
        heapq.heappush(heap, (t + 1.0, i))
    return events / (time.perf_counter() - started)


def main() -> int:
    sc = scenario.load("transient")
    trace = Simulation(sc, seed=1).run()
    rate = trace.events / trace.wall_s
    base = bare_loop(trace.events)
    print(
        f"sim: transient ({sc.duration_s:g} s, 10 x 10 Gb/s) took {trace.wall_s:.1f} s wall: "
        f"{sc.duration_s / trace.wall_s:.2f}x real time (target > 1)"
    )
    print(
        f"sim: {rate:,.0f} events/s; bare heap loop {base:,.0f} events/s; ratio {rate / base:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
