"""A backend: what runs a scenario and returns its Trace (docs/extending.md, "Adding a
backend").

Each backend is one unit that declares what it runs and how, so that nothing else asks
which backend it is: the simulator (:mod:`qcn.simulator.backend`, its two engines) and
Mininet with BMv2 (:mod:`qcn.topologies.backend`).  The front door registers them
(:mod:`qcn.lab.backends`) and dispatches through :class:`Backend` only.  A run's options
are those every backend takes, :class:`RunOptions`, declared here, and each backend's own,
declared in its module (:attr:`Backend.options`) with their flags, defaults and checks.
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

    options: Any
    """Its own options: a frozen dataclass whose fields are declared with
    :func:`backend_option` (each its default, its flag on ``qcn run``, what ``--again``
    checks); ``options()`` holds the defaults, ``options(**recorded)`` what a run recorded.
    A flag of another backend's is refused on a run of this one."""
    takes_live: bool
    """It fills a live view's feed and applies its knobs (``--live``)."""
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


def is_number(x: Any) -> bool:
    """What a recorded number is: an int or a float, finite (not a bool)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def is_boolean(x: Any) -> bool:
    """What a switch's recorded value is (``true`` or ``false``)."""
    return isinstance(x, bool)


RECORD = "recorded"
"""A field's metadata, in :class:`RunOptions` and in each backend's own options: how
provenance.json's value of a field that decides a run's result is checked (``qcn run
--again``): (fits, what it expects); None for a field that only says how to show or follow
a run."""
FLAG = "flag"
"""A backend's own option's metadata: its command-line flag (:class:`Flag`)."""


def decides_result(default: Any, fits: Callable[[Any], bool], expected: str) -> Any:
    """A field that decides the run's result: kept in provenance.json, and checked when
    read back as the command line checks it."""
    return field(default=default, metadata={RECORD: (fits, expected)})


def shown_only(default: Any) -> Any:
    """A field that only says how to show or follow the run."""
    return field(default=default, metadata={RECORD: None})


@dataclass(frozen=True)
class Flag:
    """A backend option's flag on ``qcn run`` (:func:`backend_option`)."""

    help: str
    """Its help, after the backend's name ("mininet: ...")."""
    parse: Callable[[str], Any] | None = None
    """Its text as the option's value, raising ValueError (the message the refusal
    shows, after the flag and its text) where it is not one; None: a switch, given or not."""
    metavar: str | None = None
    choices: dict[str, Any] | None = None
    """Its words and the value each sets (``--switch-scheduling realtime``: True)."""
    name: str = ""
    """The flag without its dashes, where it is not the field's name."""


def backend_option(
    default: Any,
    flag: Flag,
    fits: Callable[[Any], bool] | None = None,
    expected: str = "",
) -> Any:
    """A field of a backend's own options (:attr:`Backend.options`): its default, its flag
    on ``qcn run``, and, for one that decides the run's result, how its recorded value is
    checked (``fits``, ``expected``: :func:`decides_result`)."""
    recorded = None if fits is None else (fits, expected)
    return field(default=default, metadata={RECORD: recorded, FLAG: flag})


def dest_of(f: Any) -> str:
    """Where argparse keeps a backend option's flag (``switch_scheduling``)."""
    flag: Flag = f.metadata[FLAG]
    return flag.name or f.name


def flag_of(f: Any) -> str:
    """The command-line flag of a backend option's field (``--sample-hz``)."""
    return "--" + dest_of(f).replace("_", "-")


def backend_flags(options: type[Any]) -> list[Any]:
    """The fields of a backend's own options class, each with its flag."""
    return [f for f in fields(options) if FLAG in f.metadata]


def options_from_flags(options: type[Any], given: dict[str, Any]) -> Any:
    """A backend's own options from its flags' values (``given``, by :func:`dest_of`: None
    or False where the flag was not given), each checked: a ScenarioError names the first
    that is not, with what it expects."""
    values = {}
    for f in backend_flags(options):
        text, flag = given.get(dest_of(f)), f.metadata[FLAG]
        if text is None or text is False:
            continue
        if flag.choices is not None:
            values[f.name] = flag.choices[text]
        elif flag.parse is None:
            values[f.name] = True
        else:
            try:
                values[f.name] = flag.parse(text)
            except ValueError as e:
                raise ScenarioError(f"{flag_of(f)} {text!r}: {e}") from None
    return options(**values)


def recorded(options: Any) -> dict[str, Any]:
    """The fields of ``options`` (a dataclass) that decide a run's result, as its
    provenance.json keeps them."""
    return {f.name: getattr(options, f.name) for f in fields(options) if f.metadata[RECORD]}


def recorded_names(options: type[Any]) -> list[str]:
    """The names of the fields :func:`recorded` keeps."""
    return [f.name for f in fields(options) if f.metadata[RECORD]]


def check_recorded(options: type[Any], run: dict[str, Any]) -> dict[str, Any]:
    """The recorded values of ``options``' fields in ``run``, each checked as the command line
    checks it: a ScenarioError names the first that is not (a tampered ``scaled_by = -25``
    made a rerun's sampling grow past 11 GB)."""
    out = {}
    for f in fields(options):
        if not f.metadata[RECORD]:
            continue
        fits, expected = f.metadata[RECORD]
        if f.name not in run:
            raise ScenarioError(f"run: no {f.name}")
        if not fits(run[f.name]):
            raise ScenarioError(f"run.{f.name} = {run[f.name]!r}: expected {expected}")
        out[f.name] = run[f.name]
    return out


@dataclass(frozen=True)
class RunOptions:
    """How a scenario runs, whichever the backend; a backend's own options are ``own``
    (an instance of its :attr:`Backend.options`: None, its defaults)."""

    qcn: bool = decides_result(True, is_boolean, "true or false")
    """False: the same run without QCN (the CP never samples, no reaction point runs)."""
    seed: int = decides_result(
        1, lambda x: isinstance(x, int) and not isinstance(x, bool), "a whole number"
    )
    """The random seed: every random draw of the run comes from it (the same seed, the same
    flows on every backend)."""
    scaled_by: float | None = decides_result(
        None,
        lambda x: x is None or (is_number(x) and 0 < x <= MAX_TIME_SCALE),
        f"null or a time scale in (0, {MAX_TIME_SCALE:g}]",
    )
    """The time scale the scenario was scaled for BMv2 by where a backend not in BMv2's
    units models BMv2's run (``--scaled``: samples as often in BMv2's time, the CP judges
    departing frames); None: not so."""
    own: Any = shown_only(None)
    """The backend's own options (its :attr:`Backend.options`); None: their defaults."""
    say: Callable[[str], None] = shown_only(print)
    """Where progress lines go."""
    progress: Callable[[float, float], None] | None = shown_only(None)
    """Called with (the run's time, its duration) as it advances, by a backend that is not
    real-time (a real-time one says its progress in lines)."""
    partial: Callable[[Trace], None] | None = shown_only(None)
    """Given the trace as far as it got when the run is interrupted or fails, by a backend
    that does not write its own partial results."""
    live: LiveFeed | None = shown_only(None)
    """The feed of a live view (qcn.core.live), which the run fills as it measures and whose
    knobs it applies, on a backend that :attr:`Backend.takes_live`."""

    def options_of(self, backend: Backend) -> Any:
        """The backend's own options: ``own``, or their defaults."""
        return backend.options() if self.own is None else self.own

    def recorded(self, backend: Backend) -> dict[str, Any]:
        """The options that decide a run's result on ``backend``, as its provenance.json
        keeps them: these shared ones, then the backend's own."""
        return {**recorded(self), **recorded(self.options_of(backend))}

    @classmethod
    def from_recorded(
        cls, run: Any, backend: Backend, others: tuple[Backend, ...] = ()
    ) -> RunOptions:
        """The options :meth:`recorded` kept (``qcn run --again``), each checked.  An option
        of one of ``others`` (another backend's) is refused unless at its default, as a run
        before each backend owned its options recorded every backend's."""
        if not isinstance(run, dict):
            raise ScenarioError("run: not a table of options")
        names = [*recorded_names(cls), *recorded_names(backend.options)]
        for name in sorted(set(run) - set(names), key=str):
            owner = next((b for b in others if name in recorded_names(b.options)), None)
            if owner is None:
                raise ScenarioError(
                    f"run: unknown option {name!r} (a run records {', '.join(names)})"
                )
            if run[name] != recorded(owner.options())[name]:
                raise ScenarioError(
                    f"run.{name}: the {backend.title} has no such option (this was {backend.name})"
                )
        shared = check_recorded(cls, run)
        own = check_recorded(backend.options, run)
        return cls(**shared, own=backend.options(**own))


#: The RunOptions fields that decide a run's result (the rest say how to show or follow it).
RECORDED = tuple(recorded_names(RunOptions))
