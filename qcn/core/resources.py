"""One resource policy: what a command will hold, estimated from the counts a user gives
(workers, a sweep's points, a simulation's flows and samples, a drawing's nodes) and held
to this machine's cores and memory before any work starts (docs/reliability.md, "Bounded
by the machine").  A count past its bound is one line that gives the estimate and the
bound; nothing has started.

The bounds are measured, not guessed: a Dask worker held ~100 MB after one transient
point; a simulation holds ~2.5 KB a flow and ~80 B a sampled value
(qcn.simulator.engine.memory_estimate_bytes); a drawing of 280 nodes took 5 s, of 1,072 nodes
36 s.
"""

from __future__ import annotations

import os
from pathlib import Path

from qcn.core.errors import QcnError

WORKER_BYTES = 200 * 2**20
"""A local Dask worker's memory, for the estimate: twice what one held after a transient
point (a larger scenario's point holds more)."""
WORKERS_PER_CORE = 4
"""A sweep's points are single-threaded simulations: more workers than cores only share
the cores (a few per core keep them busy while others write results)."""
MAX_POINTS = 100_000
"""Points in one sweep (grid combinations x seeds): each is checked before the first runs
(~1 ms a grid combination, ~30 us a seed) and becomes a directory and a task."""
MAX_DRAWN_NODES = 300
"""Switches and hosts in one ``qcn net draw``: past this, the picture (at most 16 x 12
inches) is unreadable, and its layout's checks grow as nodes x links."""
MEMINFO = Path("/proc/meminfo")


class ResourceError(QcnError):
    """A count this machine cannot hold, or past a documented bound: one line with the
    estimate."""


def cores() -> int:
    return os.cpu_count() or 1


def available_bytes() -> int | None:
    """The kernel's estimate of memory available without swapping (MemAvailable); None
    where it cannot be read."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gb(n: float) -> str:
    return f"{n / 2**30:,.1f} GB"


def max_local_workers() -> int:
    """The most local worker processes this machine holds: :data:`WORKERS_PER_CORE` a core,
    and no more than its available memory holds at :data:`WORKER_BYTES` each."""
    bound = WORKERS_PER_CORE * cores()
    memory = available_bytes()
    if memory is not None:
        bound = min(bound, max(1, memory // WORKER_BYTES))
    return bound


def check_local_workers(workers: int, option: str = "--workers") -> None:
    bound = max_local_workers()
    if workers > bound:
        memory = available_bytes()
        held = f", {_gb(memory)} available" if memory is not None else ""
        raise ResourceError(
            f"{option} {workers:,}: a local cluster of {workers:,} worker processes needs "
            f"~{_gb(workers * WORKER_BYTES)} ({WORKER_BYTES // 2**20} MB each); this machine "
            f"has {cores()} cores{held}: at most {bound} here ({WORKERS_PER_CORE} a core, "
            "within its memory), or --address a cluster of your own"
        )


def check_points(combinations: int, seeds: int) -> None:
    points = combinations * seeds
    if points > MAX_POINTS:
        raise ResourceError(
            f"{points:,} points ({combinations:,} grid combinations x {seeds:,} seeds): at "
            f"most {MAX_POINTS:,} a sweep; split it into several sweeps"
        )


def check_study_runs(trials: int, seeds: int, holdout_seeds: int) -> None:
    """A study's runs, as many as a sweep's points (:data:`MAX_POINTS`): each trial's and
    the defaults' on the search's seeds, the best's and the defaults' on the held-out ones.
    ``--seeds 10000000`` was 70 s of silence, then a worker's traceback at Ctrl-C."""
    runs = (trials + 1) * seeds + 2 * holdout_seeds
    if runs > MAX_POINTS:
        raise ResourceError(
            f"{runs:,} runs ((--trials {trials:,} and the defaults) x --seeds {seeds:,}, and 2 "
            f"x --holdout-seeds {holdout_seeds:,}): at most {MAX_POINTS:,} a study, as a "
            "sweep's points; fewer seeds or trials"
        )


def check_memory(estimate_bytes: float, what: str, advice: str) -> None:
    """Refuse ``what`` if its estimated memory exceeds what this machine has available."""
    memory = available_bytes()
    if memory is not None and estimate_bytes > memory:
        raise ResourceError(
            f"{what} needs ~{_gb(estimate_bytes)}; this machine has {_gb(memory)} available: "
            + advice
        )


def check_drawing(nodes: int, name: str) -> None:
    if nodes > MAX_DRAWN_NODES:
        raise ResourceError(
            f"{name}: {nodes:,} switches and hosts: a drawing of more than {MAX_DRAWN_NODES} "
            "is unreadable (qcn net show lists them all)"
        )
