"""The one way from a scenario to its results: every command (`qcn run`, `sweep`, `compare`,
`schemes`) runs its scenarios through :func:`run_scenario` and records them with
:func:`record`.

A backend is ``"sim"`` (the packet simulator, :mod:`simulator.engine`) or ``"mininet"``
(BMv2 switches in Mininet, :mod:`topologies`).  This module alone imports the backends
(``tests/test_structure.py`` holds it), and what a backend refuses is decided once, in
:func:`qcn.core.scenario.backend_refusal` (raised by ``require_backend``).  Both backends
are imported when a run starts: a command that never runs one pays nothing for them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from qcn.core import provenance
from qcn.core.errors import QcnError, ToolMissingError
from qcn.core.live import LiveFeed, SimulationLive
from qcn.core.params import QcnParams
from qcn.core.scenario import MAX_TIME_SCALE, Scenario, ScenarioError, require_backend
from qcn.core.topology import Topology
from qcn.core.trace import Trace

Backend = Literal["sim", "mininet"]
BACKENDS: tuple[Backend, ...] = ("sim", "mininet")
SIM_SAMPLE_INTERVAL_S = 1e-3
"""The simulator's trace sampling, in the scenario's own time."""


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
            if run[name] and backend != "mininet":
                raise ScenarioError(f"run.{name}: only a Mininet run has it (this was {backend})")
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


#: RunOptions' fields that decide a run's result, as their declarations say (the rest say
#: how to show or follow it).
RECORDED = tuple(f.name for f in fields(RunOptions) if f.metadata[RECORD] is not None)


def mininet_missing() -> str:
    """What this machine lacks to run the Mininet backend ("" when it can)."""
    from topologies.experiment import missing_requirements  # noqa: PLC0415 - Mininet's imports

    return missing_requirements() or ""


def require_mininet(what: str, error: type[QcnError] = ScenarioError) -> None:
    """Fail in one line when ``what`` needs the Mininet backend and it cannot run here: a
    program not installed is a ToolMissingError (exit status 3), anything else (no root)
    ``error`` (2)."""
    missing = mininet_missing()
    if not missing:
        return
    from topologies.testbed import missing_tool  # noqa: PLC0415 - Mininet's imports

    kind = ToolMissingError if missing_tool() is not None else error
    raise kind(f"{what} needs the Mininet backend, which cannot run here: {missing}")


def choose_backend(requested: str) -> tuple[Backend, str]:
    """The backend for ``requested`` (sim, mininet, auto) and why, in one line."""
    if requested == "sim":
        return "sim", "simulator (requested)"
    if requested == "mininet":
        require_mininet("this run")
        return "mininet", "Mininet/BMv2 backend (requested)"
    missing = mininet_missing()
    if missing:
        return "sim", f"simulator ({missing}; --backend sim to choose it)"
    return "mininet", "Mininet/BMv2 backend"


def mininet_experiment(pattern: str) -> Any:
    """The Mininet experiment that adds ``pattern``'s traffic to the one run script (the
    topology is the scenario's data: no experiment is chosen by it): the flows workload,
    iperf3's, or the hosts' sources (each pattern ``qcn rp send`` declares).  Any other is
    refused in one line (it went to the sources, which refused it on each host once the
    network was up)."""
    from reaction_point.sources import PATTERNS as SOURCE_PATTERNS  # noqa: PLC0415
    from topologies.experiment import FlowsExperiment, StreamExperiment  # noqa: PLC0415
    from topologies.iperf import IperfExperiment  # noqa: PLC0415

    traffic = {"flows": FlowsExperiment, "tcp": IperfExperiment, "udp": IperfExperiment}
    traffic |= {name: StreamExperiment for name in SOURCE_PATTERNS}
    if pattern not in traffic:
        raise ScenarioError(
            f"the Mininet backend has no traffic pattern {pattern!r} (it runs "
            f"{', '.join(sorted(traffic))})"
        )
    return traffic[pattern]


def check_engine(backend: Backend) -> None:
    """For the simulator, ``QCN_SIM_ENGINE``'s choice, checked before a command writes or
    starts anything: a QcnError in one line if it names no engine or one that cannot run
    here (:func:`simulator.compiled.check_engine`)."""
    if backend == "sim":
        from simulator.compiled import check_engine as check  # noqa: PLC0415

        check()


def sim_sample_interval_s(options: RunOptions) -> float:
    """The simulator's sampling interval: 1 ms, or as long again as a scaled run's times."""
    return SIM_SAMPLE_INTERVAL_S * (options.scaled_by or 1.0)


def check_fits(sc: Scenario, backend: Backend, options: RunOptions) -> None:
    """A scenario the backend does not run (its traffic pattern: each engine and Mininet
    declare theirs), or a simulation this machine's memory cannot hold, refused before a
    command writes or starts anything (simulator.engine.memory_estimate_bytes)."""
    if backend == "mininet":
        mininet_experiment(sc.workload.pattern)
        return
    from simulator.compiled import check_runs  # noqa: PLC0415
    from simulator.engine import check_memory  # noqa: PLC0415

    check_runs(sc)
    check_memory(sc, sim_sample_interval_s(options))


def run_scenario(sc: Scenario, backend: Backend, out: Path, options: RunOptions) -> Trace:
    """Run ``sc`` on ``backend``; a Mininet run keeps its logs and captures in ``out``."""
    require_backend(sc, backend)
    if backend == "mininet" and sc.network.port_service != "bmv2":
        raise ScenarioError(
            f"network.port_service {sc.network.port_service}: BMv2 serves its ports as BMv2 "
            "does, shaped in frames per second (port_service bmv2; the simulator serves either)"
        )
    if backend == "mininet":
        from topologies.experiment import Emulation  # noqa: PLC0415

        kind = mininet_experiment(sc.workload.pattern)
        emulation = Emulation(
            realtime_switch=options.realtime_switch,
            inject_stalls=options.inject_stalls,
            pcap=options.pcap,
        )
        experiment = kind(
            sc,
            out,
            qcn=options.qcn,
            cli=options.cli,
            sample_hz=options.sample_hz,
            progress=options.say,
            emulation=emulation,
            seed=options.seed,
            live=options.live,
        )
        trace: Trace = experiment.run()
        return with_knob_changes(trace, options.live)
    from simulator.compiled import Runnable, make_simulation  # noqa: PLC0415

    progress = options.sim_progress
    running: list[Runnable] = []  # (the hook is made before the simulation it watches)
    live = SimulationLive(options.live) if options.live is not None else None
    if live is not None:
        progress = live_progress(live, progress, running)
    simulation = make_simulation(
        sc,
        seed=options.seed,
        qcn=options.qcn,
        sample_interval_s=sim_sample_interval_s(options),
        cp_at_departure=options.scaled_by is not None,
        progress=progress,
    )
    running.append(simulation)
    try:
        return with_knob_changes(simulation.run(), options.live)
    except BaseException:
        if options.sim_partial is not None:
            options.sim_partial(simulation.partial_trace())
        raise
    finally:
        if live is not None:
            live.close()  # a knob turned from now on is refused on the page


def with_knob_changes(trace: Trace, live: LiveFeed | None) -> Trace:
    """``trace`` with a live run's knob changes (the page's and a shell's, as knobs.csv
    has them), which its summary and queue plot show; a run that was not live has none."""
    if live is not None:
        trace.knob_changes = live.changes()
    return trace


def live_progress(
    live: SimulationLive,
    told: Callable[[float, float], None] | None,
    running: list[Any],
) -> Callable[[float, float], None]:
    """A simulation's progress hook that also feeds a live view (``running[0]``: the
    simulation, once made)."""

    def progress(now: float, end: float) -> None:
        if told is not None:
            told(now, end)
        live.on_sample(running[0], now)

    return progress


def environment(backend: Backend) -> dict[str, Any]:
    """What a run on ``backend`` runs on here: the project's version, the machine, and for
    BMv2 the toolchain's versions (qcn.core.provenance)."""
    toolchain = None
    if backend == "mininet":
        from topologies.bmv2 import SIMPLE_SWITCH_GRPC  # noqa: PLC0415

        toolchain = {
            "p4c": provenance.tool_version("p4c"),
            "bmv2": provenance.tool_version(SIMPLE_SWITCH_GRPC),
        }
    return provenance.environment(toolchain)


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
    from qcn.core.results import summarize, write  # noqa: PLC0415 - matplotlib's import

    summary = summarize(sc, trace, qcn=options.qcn, backend=backend, seed=options.seed)
    summary.update(extra or {})
    figures = write(out, sc, trace, summary, plots=plots)
    made = provenance.record(
        sc,
        backend=backend,
        run=options.recorded(),
        overrides=overrides or {},
        environment=ran_on or environment(backend),
    )
    provenance.write(out, sc, made)
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
    from topologies.session import NetworkSession  # noqa: PLC0415

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
    from topologies.session import down  # noqa: PLC0415

    return down(lambda line: say(line.replace("qcn run:", "qcn net:", 1)))
