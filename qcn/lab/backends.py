"""The one way from a scenario to its results: every command (`qcn run`, `sweep`, `compare`,
`schemes`, `tune`) runs its scenarios through :func:`run_scenario` and records them with
:func:`record`.

The backends are registered here, and only here are they imported
(``tests/test_structure.py`` holds it): the simulator (:mod:`qcn.simulator.backend`) and
Mininet with BMv2 (:mod:`qcn.topologies.backend`).  Each is a
:class:`qcn.core.backend.Backend` that declares what it runs, the options it takes and
whether it runs in BMv2's units; the commands ask it those, never its name.  Importing a
backend's module imports none of its machinery: a command that never runs one pays nothing
for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from qcn.core import provenance
from qcn.core.backend import (
    RECORDED,
    Backend,
    RunOptions,
    backend_flags,
    dest_of,
    flag_of,
    options_from_flags,
)
from qcn.core.capacity import BUILT_IN_COST, FrameCost
from qcn.core.errors import QcnError
from qcn.core.live import LiveFeed
from qcn.core.params import QcnParams
from qcn.core.results import summarize, write
from qcn.core.scenario import Scenario, ScenarioError
from qcn.core.topology import Topology
from qcn.core.trace import Trace
from qcn.simulator.backend import SIMULATOR
from qcn.topologies.backend import MININET

__all__ = ["MININET", "RECORDED", "SIMULATOR", "Backend", "RunOptions"]

#: Every backend, by the name ``--backend`` gives it.
BACKENDS: dict[str, Backend] = {b.name: b for b in (SIMULATOR, MININET)}


def names() -> tuple[str, ...]:
    """The registered backends' names (read when a command's options are built)."""
    return tuple(BACKENDS)


#: ``--backend auto``'s order: the first that can run here, else the last, which runs
#: anywhere (and what runs a scenario too large for this machine's BMv2).
AUTO_ORDER: tuple[Backend, ...] = (MININET, SIMULATOR)
ANYWHERE = AUTO_ORDER[-1]


def by_name(name: str, where: str = "--backend") -> Backend:
    """The backend ``name`` names; a ScenarioError, one line, for none."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise ScenarioError(f"{where}: backend {name!r:.40} is none of {names()}") from None


def backend_options(backend: Backend, args: Any) -> Any:
    """``backend``'s own options from ``qcn run``'s flags (``qcn.cli.run.add_backend_flags``),
    checked; a flag of another backend's is refused in one line, naming the one it needs."""
    # (a flag's own mistake first, whoever takes it)
    parsed = {b.name: options_from_flags(b.options, vars(args)) for b in BACKENDS.values()}
    own = {dest_of(f) for f in backend_flags(backend.options)}
    for other in BACKENDS.values():
        for f in backend_flags(other.options):
            if dest_of(f) not in own and getattr(args, dest_of(f), None) not in (None, False):
                raise ScenarioError(f"{flag_of(f)} needs the {other.title}")
    return parsed[backend.name]


def refuse_live(backend: Backend) -> None:
    """Refuse ``--live`` in one line on a backend that cannot follow a live view."""
    if not backend.takes_live:
        takers = " or ".join(f"the {b.title}" for b in BACKENDS.values() if b.takes_live)
        raise ScenarioError(f"--live needs {takers}")


def require_mininet(what: str, error: type[QcnError] = ScenarioError) -> None:
    """Fail in one line when ``what`` needs BMv2 networks and this machine cannot run them
    (a program not installed: exit status 3)."""
    MININET.require(what, error)


def require(
    sc: Scenario, backend: Backend, error: type[Exception] = ScenarioError, prefix: str = ""
) -> None:
    """Raise ``error`` (its message ``prefix`` + the reason) when ``backend`` cannot run
    ``sc``, as its declaration says (:meth:`Backend.refusal`)."""
    refusal = backend.refusal(sc)
    if refusal:
        raise error(prefix + refusal)


def choose_backend(requested: str) -> tuple[Backend, str]:
    """The backend for ``requested`` (a backend's name, or ``auto``) and why, in one line."""
    if requested != "auto":
        backend = by_name(requested)
        backend.require("this run", ScenarioError)
        return backend, f"{backend.title} (requested)"
    *preferred, anywhere = AUTO_ORDER
    why = ""
    for backend in preferred:
        missing = backend.missing()
        if not missing:
            return backend, backend.title
        why = f"{missing}; --backend {anywhere.name} to choose it"
    return anywhere, f"{anywhere.title} ({why})"


def bmv2_cost(say: Callable[[str], None] = print, *, measure: bool = True) -> FrameCost:
    """What a frame costs this machine's BMv2, for the capacity model: its calibration
    (measured the first time, with a progress line, where ``measure``: qcn.topologies.
    calibration), or the built-in figure where BMv2 cannot run here, saying why."""
    missing = MININET.missing()
    if missing:
        return BUILT_IN_COST.because(missing)
    from qcn.topologies.calibration import frame_cost  # noqa: PLC0415 - BMv2's machinery

    return frame_cost(say, measure=measure)


def calibrate_bmv2(say: Callable[[str], None] = print) -> FrameCost:
    """Measure this machine's BMv2 again (qcn net calibrate): its new figures, or the
    built-in ones where the measurement failed, saying why."""
    from qcn.topologies.calibration import frame_cost  # noqa: PLC0415 - BMv2's machinery

    return frame_cost(say, redo=True)


def run_scenario(sc: Scenario, backend: Backend, out: Path, options: RunOptions) -> Trace:
    """Run ``sc`` on ``backend``; what it keeps besides the Trace goes into ``out``."""
    require(sc, backend)
    return with_knob_changes(backend.run(sc, out, options), options.live)


def with_knob_changes(trace: Trace, live: LiveFeed | None) -> Trace:
    """``trace`` with a live run's knob changes (the page's and a shell's, as knobs.csv
    has them), which its summary and queue plot show; a run that was not live has none."""
    if live is not None:
        trace.knob_changes = live.changes()
    return trace


def environment(backend: Backend) -> dict[str, Any]:
    """What a run on ``backend`` runs on here: the project's version, the machine, and the
    backend's tools' versions (qcn.core.provenance)."""
    return provenance.environment(backend.toolchain())


def record(
    out: Path,
    sc: Scenario,
    trace: Trace,
    backend: Backend,
    options: RunOptions,
    *,
    plots: bool = True,
    extra: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    ran_on: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[Path]]:
    """Summarize ``trace`` and write every result file into ``out``, with the run's
    provenance (run.toml, provenance.json: ``overrides`` as the command gave them,
    ``ran_on`` where the run did not run here); the summary (with ``extra`` keys) and the
    plots written."""
    summary = summarize(sc, trace, qcn=options.qcn, backend=backend.name, seed=options.seed)
    summary.update(extra or {})
    figures = write(out, sc, trace, summary, plots=plots)
    made = provenance.record(
        sc,
        backend=backend.name,
        run=options.recorded(backend),
        overrides=overrides or {},
        environment=ran_on or environment(backend),
    )
    provenance.write(out, sc, made, in_bmv2_units=backend.in_bmv2_units)
    return summary, figures


def run_and_record(
    sc: Scenario,
    backend: Backend,
    out: Path,
    options: RunOptions,
    *,
    plots: bool = True,
    overrides: dict[str, Any] | None = None,
) -> tuple[Trace, dict[str, Any]]:
    """:func:`run_scenario`, then :func:`record` into the same ``out``."""
    trace = run_scenario(sc, backend, out, options)
    summary, _plots = record(out, sc, trace, backend, options, plots=plots, overrides=overrides)
    return trace, summary


def network_up(
    topo: Topology,
    out: Path,
    params: QcnParams,
    *,
    qcn: bool = True,
    reaction_points: bool = True,
    cli: bool = False,
    say: Callable[[str], None] = print,
    live: LiveFeed | None = None,
) -> None:
    """``qcn net up``: ``topo`` on Mininet and BMv2 with QCN running (``params``: its CPs'
    and reaction points'), handed to Mininet's CLI or kept until Ctrl-C or ``qcn net down``;
    everything is torn down on the way out.  ``reaction_points`` false: the CPs run, and
    no host has a daemon (the user starts their own, ``qcn rp start``).  ``live``: a live
    view's feed, filled while the network runs."""
    require_mininet("qcn net")
    from qcn.topologies.session import NetworkSession  # noqa: PLC0415

    def net_say(line: str) -> None:
        say(line.replace("qcn run:", "qcn net:", 1))

    cps = params.cp if qcn else params.cp.never_sampling()
    with (
        NetworkSession(
            topo,
            out,
            cp_params=cps,
            qcn=params if qcn and reaction_points else None,
            progress=net_say,
        ) as session,
        session.live_view(live),
    ):
        if cli:
            session.cli()
        else:
            try:
                session.wait()
            except KeyboardInterrupt:
                say("qcn net: stopping")


def network_down(say: Callable[[str], None] = print) -> bool:
    """``qcn net down``: stop the running network and whatever a killed one left."""
    from qcn.topologies.session import down  # noqa: PLC0415

    return down(lambda line: say(line.replace("qcn run:", "qcn net:", 1)))
