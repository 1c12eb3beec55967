"""Mininet with BMv2 switches as a backend (qcn.core.backend): real frames through
simple_switch_grpc, real reaction points and kernel limiters, in BMv2's units.

Importing this module imports neither Mininet nor the controller: a command that never
runs a network pays nothing for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core import patterns as traffic_patterns
from qcn.core import provenance
from qcn.core.backend import Flag, RunOptions, backend_option, is_boolean, is_number
from qcn.core.errors import QcnError, ToolMissingError
from qcn.core.patterns import Kind, TrafficPattern
from qcn.core.scenario import Scenario, ScenarioError, links_beyond_bmv2
from qcn.core.trace import Trace

DEFAULT_SAMPLE_HZ = 100.0
"""Queue samples per second of a Mininet run, unless ``--sample-hz`` says otherwise."""
MAX_SAMPLE_HZ = 1000.0
"""--sample-hz's bound."""
MAX_STALL_PERIOD_S = 60.0
"""--inject-stalls' bound on its period."""


def stalls_fit(stall_s: Any, period_s: Any) -> bool:
    """Whether (stall, period) in seconds are stalls --inject-stalls takes."""
    return (
        is_number(stall_s) and is_number(period_s) and 0 < stall_s < period_s <= MAX_STALL_PERIOD_S
    )


def _stalls(x: Any) -> bool:
    return x is None or (isinstance(x, list | tuple) and len(x) == 2 and stalls_fit(*x))


def parse_stalls(text: str) -> tuple[float, float]:
    """``--inject-stalls STALL_MS/PERIOD_MS`` as (stall, period) in seconds."""
    stall, sep, period = text.partition("/")
    try:
        stall_s, period_s = float(stall) / 1e3, float(period) / 1e3
    except ValueError:
        stall_s = period_s = math.nan
    if not sep or not stalls_fit(stall_s, period_s):
        raise ValueError(
            f"expected STALL_MS/PERIOD_MS with 0 < STALL_MS < PERIOD_MS <= "
            f"{MAX_STALL_PERIOD_S * 1e3:g}, e.g. 30/500"
        )
    return stall_s, period_s


def parse_sample_hz(text: str) -> float:
    """``--sample-hz HZ``, in (0, :data:`MAX_SAMPLE_HZ`]."""
    try:
        hz = float(text)
    except ValueError:
        hz = math.nan
    if not 0 < hz <= MAX_SAMPLE_HZ:
        raise ValueError(f"must be in (0, {MAX_SAMPLE_HZ:g}]")
    return hz


@dataclass(frozen=True)
class MininetOptions:
    """A Mininet run's own options: each its flag on ``qcn run``, its default, and what
    ``--again`` checks of its recorded value.  A new one is a field here, read in
    :meth:`Mininet.run`."""

    cli: bool = backend_option(
        False, Flag("open the Mininet CLI with everything running, instead of measuring")
    )
    sample_hz: float = backend_option(
        DEFAULT_SAMPLE_HZ,
        Flag(f"queue samples per second (default {DEFAULT_SAMPLE_HZ:g})", parse_sample_hz),
        lambda x: is_number(x) and 0 < x <= MAX_SAMPLE_HZ,
        f"in (0, {MAX_SAMPLE_HZ:g}]",
    )
    realtime_switch: bool = backend_option(
        True,
        Flag(
            "run the switch under SCHED_FIFO (realtime, the default, where the machine allows "
            "it) or only at niceness -10 (docs/bmv2.md, 'Noise')",
            choices={"realtime": True, "nice": False},
            name="switch_scheduling",
        ),
        is_boolean,
        "true or false",
    )
    pinned: bool = backend_option(
        False,
        Flag(
            "every process where the kernel puts it (any, the default), or each switch on "
            "one CPU and the hosts' processes on another (pinned: less CPU a frame, but a "
            "switch that fills its CPU stalls; docs/bmv2.md, 'Pinned switches')",
            choices={"pinned": True, "any": False},
            name="cpus",
        ),
        is_boolean,
        "true or false",
    )
    inject_stalls: tuple[float, float] | None = backend_option(
        None,
        Flag(
            "stall the switch on purpose (a busier real-time process on its CPU for STALL_MS "
            "every PERIOD_MS), to see what noise does and that the run says so",
            parse_stalls,
            metavar="STALL_MS/PERIOD_MS",
        ),
        _stalls,
        f"null or [STALL_S, PERIOD_S] with 0 < STALL_S < PERIOD_S <= {MAX_STALL_PERIOD_S:g}",
    )
    pcap: bool = backend_option(
        False,
        Flag(
            "capture the CP port and the first source's port into DIR/captures/ (ring "
            "buffers, 128-byte snap length; read CNMs with 'qcn wireshark')"
        ),
        is_boolean,
        "true or false",
    )

    def __post_init__(self) -> None:
        # As provenance.json reads back: a list of two numbers, a whole number of samples.
        if self.inject_stalls is not None:
            stall_s, period_s = self.inject_stalls
            object.__setattr__(self, "inject_stalls", (float(stall_s), float(period_s)))
        object.__setattr__(self, "sample_hz", float(self.sample_hz))


class Mininet:
    """BMv2 switches in a Mininet network, run in real time on this machine."""

    name = "mininet"
    title = "Mininet/BMv2 backend"
    options = MininetOptions
    takes_live = True
    in_bmv2_units = True
    real_time = True
    exclusive = True

    @property
    def patterns(self) -> tuple[str, ...]:
        """What qcn.core.patterns declares it runs: the hosts' sources' patterns (``qcn rp
        send``), the flows workload, iperf3's TCP and UDP."""
        return traffic_patterns.on_mininet()

    def missing(self) -> str:
        from qcn.topologies.experiment import missing_requirements  # noqa: PLC0415

        return missing_requirements() or ""

    def refusal(self, sc: Scenario) -> str:
        if sc.workload.pattern not in self.patterns:
            return (
                f"the Mininet backend has no traffic pattern {sc.workload.pattern!r} (it runs "
                f"{', '.join(sorted(self.patterns))})"
            )
        # In BMv2's units (scaled, its ports served as BMv2's): no link faster than BMv2's.
        too_fast = links_beyond_bmv2(sc) if sc.network.port_service == "bmv2" else ""
        if too_fast:
            return too_fast
        topo = sc.topology
        if sc.network.pause and all(topo.is_edge(ref) for ref in topo.port_refs()):
            return (
                f"{sc.name}: network.pause on BMv2 needs a link between switches to cascade "
                "over (seed 001's multihop, or any topology of several switches); the single "
                "bottleneck runs it with --backend sim"
            )
        return ""

    def check(self, sc: Scenario, options: RunOptions) -> None:  # noqa: ARG002
        refused = self.refusal(sc)
        if refused:
            raise ScenarioError(refused)

    def run(self, sc: Scenario, out: Path, options: RunOptions) -> Trace:
        """The one run script (topologies.experiment) with ``sc``'s traffic; its logs and
        captures are kept in ``out``."""
        self.check(sc, options)
        if sc.network.port_service != "bmv2":
            raise ScenarioError(
                f"network.port_service {sc.network.port_service}: BMv2 serves its ports as "
                "BMv2 does, shaped in frames per second (port_service bmv2; the simulator "
                "serves either)"
            )
        from qcn.topologies.experiment import Emulation  # noqa: PLC0415

        own: MininetOptions = options.options_of(self)
        emulation = Emulation(
            realtime_switch=own.realtime_switch,
            pinned=own.pinned,
            inject_stalls=own.inject_stalls,
            pcap=own.pcap,
        )
        experiment = experiment_for(sc.workload.declared)(
            sc,
            out,
            qcn=options.qcn,
            cli=own.cli,
            sample_hz=own.sample_hz,
            progress=options.say,
            emulation=emulation,
            seed=options.seed,
            live=options.live,
        )
        trace: Trace = experiment.run()
        return trace

    def toolchain(self) -> dict[str, str] | None:
        from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC  # noqa: PLC0415

        return {
            "p4c": provenance.tool_version("p4c"),
            "bmv2": provenance.tool_version(SIMPLE_SWITCH_GRPC),
        }

    def require(self, what: str, error: type[QcnError] = ScenarioError) -> None:
        """Fail in one line when ``what`` needs this backend and it cannot run here: a
        program not installed is a ToolMissingError (exit status 3), anything else (no
        root) ``error`` (2)."""
        missing = self.missing()
        if not missing:
            return
        from qcn.topologies.testbed import missing_tool  # noqa: PLC0415

        kind = ToolMissingError if missing_tool() is not None else error
        raise kind(f"{what} needs the Mininet backend, which cannot run here: {missing}")


def experiment_for(pattern: TrafficPattern) -> Any:
    """The experiment that adds ``pattern``'s traffic to the one run script (the topology
    is the scenario's data: no experiment is chosen by it), by its kind: the flows
    workload, a program's (iperf3's), or the hosts' sources."""
    from qcn.topologies.experiment import FlowsExperiment, StreamExperiment  # noqa: PLC0415
    from qcn.topologies.iperf import IperfExperiment  # noqa: PLC0415

    by_kind = {
        Kind.FLOWS: FlowsExperiment,
        Kind.PROGRAM: IperfExperiment,
        Kind.HOST_SOURCE: StreamExperiment,
    }
    return by_kind[pattern.kind]


MININET = Mininet()
