"""Mininet with BMv2 switches as a backend (qcn.core.backend): real frames through
simple_switch_grpc, real reaction points and kernel limiters, in BMv2's units.

Importing this module imports neither Mininet nor the controller: a command that never
runs a network pays nothing for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qcn.core import provenance
from qcn.core.backend import RunOptions
from qcn.core.errors import QcnError, ToolMissingError
from qcn.core.scenario import Scenario, ScenarioError, links_beyond_bmv2
from qcn.core.trace import Trace

#: The traffic run by programs of their own rather than the hosts' sources.
PROGRAM_PATTERNS = ("flows", "tcp", "udp")


class Mininet:
    """BMv2 switches in a Mininet network, run in real time on this machine."""

    name = "mininet"
    title = "Mininet/BMv2 backend"
    takes = frozenset(
        {"cli", "sample_hz", "realtime_switch", "inject_stalls", "pcap", "say", "live"}
    )
    in_bmv2_units = True
    real_time = True
    exclusive = True

    @property
    def patterns(self) -> tuple[str, ...]:
        """The flows workload, iperf3's TCP and UDP, and every pattern the hosts' sources
        send (``qcn rp send`` declares them)."""
        from qcn.reaction_point.sources import PATTERNS  # noqa: PLC0415 - light

        return (*PROGRAM_PATTERNS, *PATTERNS)

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

        emulation = Emulation(
            realtime_switch=options.realtime_switch,
            inject_stalls=options.inject_stalls,
            pcap=options.pcap,
        )
        experiment = experiment_for(sc.workload.pattern)(
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


def experiment_for(pattern: str) -> Any:
    """The experiment that adds ``pattern``'s traffic to the one run script (the topology
    is the scenario's data: no experiment is chosen by it): the flows workload, iperf3's,
    or the hosts' sources."""
    from qcn.topologies.experiment import FlowsExperiment, StreamExperiment  # noqa: PLC0415
    from qcn.topologies.iperf import IperfExperiment  # noqa: PLC0415

    programs = {"flows": FlowsExperiment, "tcp": IperfExperiment, "udp": IperfExperiment}
    return programs.get(pattern, StreamExperiment)


MININET = Mininet()
