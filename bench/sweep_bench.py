"""Sweep benchmark: the same 8-point sweep on 1 worker and on every core, same run.

    python -m bench.sweep_bench [--duration S]

Reports the speedup of the sweep on all cores over one worker (target >= 0.85 x cores) and
the engine's overhead per point: the one-worker sweep's wall time, less the cluster's
start-up and the time the points computed, per point, as a share of a point's time
(target < 2 %).  The points are robustness runs (RTT 10, 50, 100, 200 us x seeds 1, 2) on
a local Dask cluster, each sweep into a fresh directory so every point runs; points write
their CSVs and summaries but not their plots (the client's plotting would compete with
the workers for this machine's two cores; it is not the engine's cost).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from qcn.core import scenario as scenarios
from qcn.lab.sweep import SweepReport, sweep

GRID = [("network.rtt_s", [10e-6, 50e-6, 100e-6, 200e-6])]
SEEDS = 2


def run(workers: int, duration_s: float, out: Path) -> SweepReport:
    sc = scenarios.load("robustness").with_overrides({"duration_s": duration_s})
    return sweep(
        sc, GRID, seeds=SEEDS, workers=workers, out=out, quiet=True, point_plots=False,
        say=lambda _m: None,
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=2.5, help="simulated seconds per point")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        one = run(1, args.duration, Path(tmp) / "one")
        every = run(cores, args.duration, Path(tmp) / "all")
    per_point = one.compute_s / one.ran
    # The engine's share: the loop's time beyond what the points computed (dispatch,
    # transfer of each Trace, the worker's first import), not the final table and plots.
    overhead = (one.loop_s - one.compute_s) / one.ran
    speedup = one.loop_s / every.loop_s
    print(
        f"sweep: {one.ran} points of {per_point:.2f} s each; 1 worker {one.wall_s:.1f} s, "
        f"{cores} workers {every.wall_s:.1f} s (cluster start-up {one.startup_s:.1f} s and "
        f"{every.startup_s:.1f} s, and the final table and plots, excluded): "
        f"speedup {speedup:.2f} = {speedup / cores:.2f} x cores (target >= 0.85 x cores)"
    )
    print(
        f"sweep: engine overhead {overhead * 1e3:.0f} ms per point = "
        f"{100 * overhead / per_point:.1f} % of a point (target < 2 %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
