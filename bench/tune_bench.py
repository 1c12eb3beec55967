"""Tuning benchmark: the same study on one Dask worker and on two, same run.

    python -m bench.tune_bench [--trials N] [--duration S]

Reports each study's trials per minute of search (the cluster's start and the final check
on held-out seeds excluded) and the ratio of two workers to one (target >= 1.7).  The study
is seed 003's fct scenario (0.5 s simulated, some 0.2 s of a worker's time a run), its trials
each on two seeds as `qcn tune`'s default, with no constraint (so that neither stops early),
each into a fresh directory so that every trial runs.  TPE asks a trial while others run
(its constant liar), so two workers keep two trials in flight.  The two studies' trials are
not the same settings (which trial TPE asks depends on which finished first), so the ratio
varies from run to run with what the settings cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from qcn.core import scenario as scenarios
from qcn.lab.tune import Study, TuneReport, default_objective, default_space, tune

SEEDS = 2
"""Each trial's seeds: `qcn tune`'s default."""


def run(workers: int, trials: int, duration_s: float, out: Path) -> TuneReport:
    sc = scenarios.load("fct").with_overrides({"duration_s": duration_s})
    study = Study(sc, (default_objective(sc),), tuple(default_space(sc)), (), SEEDS, 1, 1)
    return tune(study, trials=trials, workers=workers, address=None, out=out, quiet=True,
                say=lambda _m: None)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="trials per study")
    parser.add_argument("--duration", type=float, default=0.5, help="simulated seconds a run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = run(1, args.trials, args.duration, Path(tmp) / "one")
        two = run(2, args.trials, args.duration, Path(tmp) / "two")
    rates = [60 * r.ran / r.search_s for r in (one, two)]
    print(
        f"tune: {one.ran} trials of fct ({args.duration:g} s simulated, {SEEDS} seeds each): "
        f"1 worker {rates[0]:.0f} trials/min, 2 workers {rates[1]:.0f} trials/min: "
        f"ratio {rates[1] / rates[0]:.2f} (target >= 1.7)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
