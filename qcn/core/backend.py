"""A backend: what runs a scenario and returns its Trace (docs/extending.md, "Adding a
backend").

Each backend is one unit that declares what it runs and how, so that nothing else asks
which backend it is: the simulator (:mod:`qcn.simulator.backend`, its two engines) and
Mininet with BMv2 (:mod:`qcn.topologies.backend`).  The front door registers them
(:mod:`qcn.cli.backends`) and dispatches through :class:`Backend` only.  A run's options,
:class:`RunOptions`, are declared here once with what each decides: whether provenance
keeps it, and which backend takes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from qcn.core.errors import QcnError
from qcn.core.live import LiveFeed
from qcn.core.scenario import MAX_TIME_SCALE, Scenario, ScenarioError
from qcn.core.trace import Trace


class Backend(Protocol):
    """What a backend declares and does (the simulator's and Mininet's are its two)."""

    name: str
    """As ``--backend`` names it, provenance.json records it and a sweep's points are keyed."""
    title: str
    """In words, after "the": "simulator", "Mininet/BMv2 backend"."""

    @property
    def patterns(self) -> tuple[str, ...]:
        """The traffic patterns (``workload.pattern``) it runs; any other it refuses."""
        ...

    takes: frozenset[str]
    """The :class:`RunOptions` fields of its own, beside the ones every backend takes
    (:data:`SHARED_OPTIONS`); a run that sets another it does not take is refused."""
    in_bmv2_units: bool
    """It runs a scenario scaled to BMv2's rates and times (the scale chosen by measurement:
    qcn.core.capacity), as ``--scaled`` asks of the simulator."""
    real_time: bool
    """It runs in the wall clock's time (a live view follows it; nothing paces it)."""
    exclusive: bool
    """It holds this machine's network while it runs: one run at a time, here (a Dask
    worker that runs its sweep points declares the resource :attr:`name`, one)."""

    def missing(self) -> str:
        """What this machine lacks to run it ("" when it can)."""
        ...

    def require(self, what: str, error: type[QcnError]) -> None:
        """Raise in one line when it cannot run here and ``what`` needs it (a program not
        installed: a ToolMissingError, exit status 3; anything else ``error``)."""
        ...

    def refusal(self, sc: Scenario) -> str:
        """Why it cannot run ``sc`` ("" when it can), in one line: a traffic pattern not in
        :attr:`patterns`, or what else of the scenario it does not model."""
        ...

    def check(self, sc: Scenario, options: RunOptions) -> None:
        """Refuse, before a command writes or starts anything, a run this machine cannot
        hold (a QcnError, one line)."""
        ...

    def run(self, sc: Scenario, out: Path, options: RunOptions) -> Trace:
        """Run ``sc``; what it keeps besides the Trace (logs, captures) goes into ``out``."""
        ...

    def toolchain(self) -> dict[str, str] | None:
        """The versions of the tools it runs, for provenance (None: only the project's)."""
        ...


MAX_SAMPLE_HZ = 1000.0
"""--sample-hz's bound (queue samples per second on BMv2)."""
MAX_STALL_PERIOD_S = 60.0
"""--inject-stalls' bound on its period."""


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def stalls_fit(stall_s: Any, period_s: Any) -> bool:
    """Whether (stall, period) in seconds are stalls --inject-stalls takes."""
    return _number(stall_s) and _number(period_s) and 0 < stall_s < period_s <= MAX_STALL_PERIOD_S


def _stalls(x: Any) -> bool:
    return x is None or (isinstance(x, list | tuple) and len(x) == 2 and stalls_fit(*x))


def _boolean(x: Any) -> bool:
    return isinstance(x, bool)


RECORD = "recorded"
"""RunOptions field metadata: how provenance.json's value of a field that decides a run's
result is checked (``qcn run --again``): (fits, what it expects); None for a field that
only says how to show or follow a run."""


def decides_result(default: Any, fits: Callable[[Any], bool], expected: str) -> Any:
    """A RunOptions field that decides the run's result: kept in provenance.json, and
    checked when read back as the command line checks it."""
    return field(default=default, metadata={RECORD: (fits, expected)})


def shown_only(default: Any) -> Any:
    """A RunOptions field that only says how to show or follow the run."""
    return field(default=default, metadata={RECORD: None})


@dataclass(frozen=True)
class RunOptions:
    """How a scenario runs, whichever the backend (each field says which uses it)."""

    qcn: bool = decides_result(True, _boolean, "true or false")
    """False: the same run without QCN (the CP never samples, no reaction point runs)."""
    seed: int = decides_result(
        1, lambda x: isinstance(x, int) and not isinstance(x, bool), "a whole number"
    )
    """The random seed: sim, the whole run's (same seed, same trace); mininet, the flows
    workload's flows (the same as the simulator's for the same seed)."""
    scaled_by: float | None = decides_result(
        None,
        lambda x: x is None or (_number(x) and 0 < x <= MAX_TIME_SCALE),
        f"null or a time scale in (0, {MAX_TIME_SCALE:g}]",
    )
    """sim: the time scale the scenario was scaled for BMv2 by (None: not scaled); the
    simulator then models BMv2's run (samples as often in BMv2's time, the CP judges
    departing frames)."""
    cli: bool = shown_only(False)
    """mininet: hand the running network to the Mininet CLI instead of measuring."""
    sample_hz: float = decides_result(
        100.0, lambda x: _number(x) and 0 < x <= MAX_SAMPLE_HZ, f"in (0, {MAX_SAMPLE_HZ:g}]"
    )
    """mininet: queue samples per second."""
    realtime_switch: bool = decides_result(True, _boolean, "true or false")
    """mininet: the switches under SCHED_FIFO where the machine allows it."""
    inject_stalls: tuple[float, float] | None = decides_result(
        None,
        _stalls,
        f"null or [STALL_S, PERIOD_S] with 0 < STALL_S < PERIOD_S <= {MAX_STALL_PERIOD_S:g}",
    )
    """mininet: (stall, period) in seconds, stalls of the switch made on purpose."""
    pcap: bool = decides_result(False, _boolean, "true or false")
    """mininet: capture the CP port and one source's port."""
    say: Callable[[str], None] = shown_only(print)
    """mininet: where progress lines go."""
    sim_progress: Callable[[float, float], None] | None = shown_only(None)
    """sim: called with (simulated time, duration) as the run advances."""
    sim_partial: Callable[[Trace], None] | None = shown_only(None)
    """sim: given the trace as far as it got when the run is interrupted or fails (a Mininet
    experiment writes its own partial CSVs)."""
    live: LiveFeed | None = shown_only(None)
    """Both: the feed of a live view (qcn.core.live), which the run fills as it measures
    and whose knobs it applies (sim: paced to the feed's speed)."""

    def recorded(self) -> dict[str, Any]:
        """The options that decide a run's result, as its provenance.json keeps them."""
        return {name: getattr(self, name) for name in RECORDED}

    @classmethod
    def from_recorded(cls, run: Any, backend: Backend) -> RunOptions:
        """The options :meth:`recorded` kept (``qcn run --again``), each checked as the
        command line checks it: a ScenarioError names the first that is not (a tampered
        ``scaled_by = -25`` made a rerun's sampling grow past 11 GB)."""
        if not isinstance(run, dict):
            raise ScenarioError("run: not a table of options")
        unknown = sorted(set(run) - set(RECORDED), key=str)
        missing = [k for k in RECORDED if k not in run]
        if unknown or missing:
            raise ScenarioError(
                f"run: {'unknown option ' + repr(unknown[0]) if unknown else 'no ' + missing[0]}"
                f" (a run records {', '.join(RECORDED)})"
            )
        for f in fields(cls):
            if f.metadata[RECORD] is None:
                continue
            name, (fits, expected) = f.name, f.metadata[RECORD]
            if not fits(run[name]):
                raise ScenarioError(f"run.{name} = {run[name]!r}: expected {expected}")
        for name in ("inject_stalls", "pcap"):
            if run[name] and name not in backend.takes:
                raise ScenarioError(
                    f"run.{name}: the {backend.title} has no such option (this was {backend.name})"
                )
        stalls = run["inject_stalls"]
        return cls(
            qcn=run["qcn"],
            seed=run["seed"],
            scaled_by=None if run["scaled_by"] is None else float(run["scaled_by"]),
            sample_hz=float(run["sample_hz"]),
            realtime_switch=run["realtime_switch"],
            inject_stalls=None if stalls is None else (float(stalls[0]), float(stalls[1])),
            pcap=run["pcap"],
        )


#: The RunOptions fields every backend takes (the rest are one backend's: Backend.takes).
SHARED_OPTIONS = frozenset({"qcn", "seed"})

#: RunOptions' fields that decide a run's result, as their declarations say (the rest say
#: how to show or follow it).
RECORDED = tuple(f.name for f in fields(RunOptions) if f.metadata[RECORD] is not None)
