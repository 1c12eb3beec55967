"""The simulator as a backend (qcn.core.backend): what it runs, and its two engines.

The compiled core (:mod:`qcn.simulator.compiled`) and the Python engine
(:mod:`qcn.simulator.engine`) each declare the traffic patterns they generate and refuse
any other; ``QCN_SIM_ENGINE`` chooses between them (``auto``: the core where it runs the
scenario, else the Python engine, said in one line).  Importing this module imports
neither engine: a command that never simulates pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core.backend import RunOptions
from qcn.core.errors import QcnError
from qcn.core.live import SimulationLive
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from qcn.simulator import compiled, engine
from qcn.simulator.compiled import Runnable, check_engine, check_runs, make_simulation
from qcn.simulator.engine import check_memory

SAMPLE_INTERVAL_S = 1e-3
"""The simulator's trace sampling, in the scenario's own time."""
MAX_SAMPLES = 100_000
"""A run samples its trace at most this many times: a run longer than 100 s (a fitted run's
hundreds of seconds at a slow port, docs/experiments.md) samples less often than every
millisecond, rather than spend its time and memory on rows (800 s on a 0.5 Mb/s port took
34 s, most of it in 800,000 rows; every shipped scenario lasts 6 s at most, and keeps its
millisecond)."""


def sample_interval_s(options: RunOptions, sc: Scenario) -> float:
    """The sampling interval: 1 ms, or as long again as a scaled run's times; at least
    the run over :data:`MAX_SAMPLES`."""
    return max(SAMPLE_INTERVAL_S * (options.scaled_by or 1.0), sc.duration_s / MAX_SAMPLES)


@dataclass(frozen=True)
class SimOptions:
    """The simulator's own options: none beyond those every backend takes (the seed, QCN on
    or off, ``--scaled``'s time scale: qcn.core.backend.RunOptions)."""


class Simulator:
    """The packet simulator: any topology, no TCP (the kernel's is Mininet's)."""

    name = "sim"
    title = "simulator"
    options = SimOptions
    takes_live = True
    in_bmv2_units = False
    real_time = False
    exclusive = False

    @property
    def patterns(self) -> tuple[str, ...]:
        """The patterns of the engine ``QCN_SIM_ENGINE`` chooses (auto: either's)."""
        if compiled.engine_choice() == "compiled":
            return compiled.patterns()
        return engine.patterns()

    def missing(self) -> str:
        return ""

    def require(self, what: str, error: type[QcnError]) -> None:
        """It runs anywhere Python does."""

    def refusal(self, sc: Scenario) -> str:
        """What the model has not (TCP), or a pattern the chosen engine does not generate."""
        model = engine.model_refusal(sc)
        if model or compiled.engine_choice() != "compiled":
            return model or engine.pattern_refusal(sc)
        unsupported = None if compiled.CORE_MISSING else compiled.unsupported(sc)
        return f"{compiled.ENGINE_ENV}=compiled: {unsupported}" if unsupported else ""

    def check(self, sc: Scenario, options: RunOptions) -> None:
        """The engine choice, the chosen engine's patterns, and the machine's memory."""
        check_engine()
        check_runs(sc)
        check_memory(sc, sample_interval_s(options, sc))

    def run(self, sc: Scenario, out: Path, options: RunOptions) -> Trace:  # noqa: ARG002
        """The simulation of ``sc``; an interrupted one hands what it measured to
        ``options.partial``.  It keeps nothing in ``out``: its Trace is everything."""
        progress = options.progress
        running: list[Runnable] = []  # (the hook is made before the simulation it watches)
        live = SimulationLive(options.live) if options.live is not None else None
        if live is not None:
            progress = live_progress(live, progress, running)
        simulation = make_simulation(
            sc,
            seed=options.seed,
            qcn=options.qcn,
            sample_interval_s=sample_interval_s(options, sc),
            cp_at_departure=options.scaled_by is not None,
            progress=progress,
        )
        running.append(simulation)
        try:
            return simulation.run()
        except BaseException:
            if options.partial is not None:
                options.partial(simulation.partial_trace())
            raise
        finally:
            if live is not None:
                live.close()  # a knob turned from now on is refused on the page

    def toolchain(self) -> dict[str, str] | None:
        return None


def live_progress(
    live: SimulationLive, told: Callable[[float, float], None] | None, running: list[Any]
) -> Callable[[float, float], None]:
    """A simulation's progress hook that also feeds a live view (``running[0]``: the
    simulation, once made)."""

    def progress(now: float, end: float) -> None:
        if told is not None:
            told(now, end)
        live.on_sample(running[0], now)

    return progress


SIMULATOR = Simulator()
