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

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from qcn.core import provenance
from qcn.core.live import LiveFeed, SimulationLive
from qcn.core.params import QcnParams
from qcn.core.scenario import Scenario, ScenarioError, require_backend
from qcn.core.topology import Topology
from qcn.core.trace import Trace

Backend = Literal["sim", "mininet"]
BACKENDS: tuple[Backend, ...] = ("sim", "mininet")
SIM_SAMPLE_INTERVAL_S = 1e-3
"""The simulator's trace sampling, in the scenario's own time."""


@dataclass(frozen=True)
class RunOptions:
    """How a scenario runs, whichever the backend (each field says which uses it)."""

    qcn: bool = True
    """False: the same run without QCN (the CP never samples, no reaction point runs)."""
    seed: int = 1
    """The random seed: sim, the whole run's (same seed, same trace); mininet, the flows
    workload's flows (the same as the simulator's for the same seed)."""
    scaled_by: float | None = None
    """sim: the time scale the scenario was scaled for BMv2 by (None: not scaled); the
    simulator then models BMv2's run (samples as often in BMv2's time, the CP judges
    departing frames)."""
    cli: bool = False
    """mininet: hand the running network to the Mininet CLI instead of measuring."""
    sample_hz: float = 100.0
    """mininet: queue samples per second."""
    realtime_switch: bool = True
    """mininet: the switches under SCHED_FIFO where the machine allows it."""
    inject_stalls: tuple[float, float] | None = None
    """mininet: (stall, period) in seconds, stalls of the switch made on purpose."""
    pcap: bool = False
    """mininet: capture the CP port and one source's port."""
    say: Callable[[str], None] = print
    """mininet: where progress lines go."""
    sim_progress: Callable[[float, float], None] | None = None
    """sim: called with (simulated time, duration) as the run advances."""
    sim_partial: Callable[[Trace], None] | None = None
    """sim: given the trace as far as it got when the run is interrupted or fails (a Mininet
    experiment writes its own partial CSVs)."""
    live: LiveFeed | None = None
    """Both: the feed of a live view (qcn.core.live), which the run fills as it measures
    and whose knobs it applies (sim: paced to the feed's speed)."""

    def recorded(self) -> dict[str, Any]:
        """The options that decide a run's result, as its provenance.json keeps them."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in RECORDED}

    @classmethod
    def from_recorded(cls, run: dict[str, Any]) -> RunOptions:
        """The options :meth:`recorded` kept (``qcn run --again``)."""
        kept = {k: v for k, v in run.items() if k in RECORDED}
        if kept.get("inject_stalls") is not None:
            kept["inject_stalls"] = tuple(kept["inject_stalls"])
        return cls(**kept)


#: RunOptions' fields that decide a run's result (the rest say how to show it).
RECORDED = ("qcn", "seed", "scaled_by", "sample_hz", "realtime_switch", "inject_stalls", "pcap")


def mininet_missing() -> str:
    """What this machine lacks to run the Mininet backend ("" when it can)."""
    from topologies.experiment import missing_requirements  # noqa: PLC0415 - Mininet's imports

    return missing_requirements() or ""


def choose_backend(requested: str) -> tuple[Backend, str]:
    """The backend for ``requested`` (sim, mininet, auto) and why, in one line."""
    if requested == "sim":
        return "sim", "simulator (requested)"
    missing = mininet_missing()
    if requested == "mininet":
        if missing:
            raise ScenarioError(f"the Mininet backend cannot run here: {missing}")
        return "mininet", "Mininet/BMv2 backend (requested)"
    if missing:
        return "sim", f"simulator ({missing}; --backend sim to choose it)"
    return "mininet", "Mininet/BMv2 backend"


def mininet_experiment(pattern: str) -> Any:
    """The Mininet experiment that adds ``pattern``'s traffic to the one run script (the
    topology is the scenario's data: no experiment is chosen by it)."""
    from topologies.experiment import FlowsExperiment, StreamExperiment  # noqa: PLC0415
    from topologies.iperf import IperfExperiment  # noqa: PLC0415

    traffic = {"flows": FlowsExperiment, "tcp": IperfExperiment, "udp": IperfExperiment}
    return traffic.get(pattern, StreamExperiment)


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
        return trace
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
        sample_interval_s=SIM_SAMPLE_INTERVAL_S * (options.scaled_by or 1.0),
        cp_at_departure=options.scaled_by is not None,
        progress=progress,
    )
    running.append(simulation)
    try:
        return simulation.run()
    except BaseException:
        if options.sim_partial is not None:
            options.sim_partial(simulation.partial_trace())
        raise
    finally:
        if live is not None:
            live.close()  # a knob turned from now on is refused on the page


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
    cli: bool = False,
    say: Callable[[str], None] = print,
    live: LiveFeed | None = None,
) -> None:
    """``qcn net up``: ``topo`` on Mininet and BMv2 with QCN running (``params``: its CPs'
    and reaction points'), handed to Mininet's CLI or kept until Ctrl-C or ``qcn net down``;
    everything is torn down on the way out.  ``live``: a live view's feed, filled while the
    network runs."""
    missing = mininet_missing()
    if missing:
        raise ScenarioError(f"qcn net needs the Mininet backend, which cannot run here: {missing}")
    from topologies.session import NetworkSession  # noqa: PLC0415

    def net_say(line: str) -> None:
        say(line.replace("qcn run:", "qcn net:", 1))

    cps = params.cp if qcn else params.cp.never_sampling()
    with (
        NetworkSession(
            topo, out, cp_params=cps, qcn=params if qcn else None, progress=net_say
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
