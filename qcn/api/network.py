""":class:`Network`: a network as `qcn net show` and `qcn net draw` see it, as objects."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qcn.api.support import Unmanaged, command_args, one_line, overrides, pyplot_kept
from qcn.cli import net as command
from qcn.core import resources
from qcn.core.topology import Topology, TopologyError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


class Network:
    """A network: a generator (``"leaf-spine:2,2,2"``), a TOML topology file or
    p4lang/tutorials' ``topology.json``, as the project derives it (routes, which ports
    run a CP), at the rates each backend runs it: ``qcn net show``'s view.

    ``line_rate_bps``: a generator's links, and a file's that give no rate, on BMv2 as
    ``qcn net up`` runs them (``--line-rate``); ``ecmp``: ``"per-destination"`` or
    ``"per-flow"`` (``--ecmp``); ``scenario`` and ``set``: the rates a run of that
    scenario on this network has, on the simulator and at the scale a BMv2 run would
    choose (``--scenario``, ``--set``).  A Network given as ``set={"network.topology":
    net}`` runs a scenario on it.  A mistake raises :class:`QcnError` with the command's
    line.
    """

    @one_line
    def __init__(
        self,
        topology: str | Path,
        *,
        line_rate_bps: float | None = None,
        ecmp: str | None = None,
        scenario: str | Path | None = None,
        set: Mapping[str, Any] | None = None,
    ) -> None:
        given: dict[str, Any] = {"topology": str(topology), "line_rate": line_rate_bps,
                                 "set": overrides(set)}  # fmt: skip
        if scenario is not None:
            given["scenario"] = str(scenario)
        if ecmp is not None:
            given["ecmp"] = ecmp
        self._args = command_args("net show", record=False, **given)
        views = command.backend_views(self._args)
        self.spec: str = str(topology)
        """What the network was made from: a generator or a file's path."""
        self.topology: Topology = views.sim
        """The network as the simulator runs it (qcn.core.topology.Topology)."""
        self.bmv2: Topology | None = views.bmv2
        """The network as BMv2 runs it (None: it would not run there, :attr:`how` says
        why)."""
        self.how: tuple[str, str] = (views.sim_how, views.bmv2_how)
        """How each backend's rates were taken, in words (the simulator's, BMv2's)."""
        self._views = views

    def __repr__(self) -> str:
        return f"<qcn.Network {self.describe()}>"

    def describe(self) -> str:
        """The network in one line: its name, switches, hosts, links and CP ports."""
        return self.topology.describe()

    @property
    def name(self) -> str:
        """The network's name (a file's: its name without the suffix)."""
        return self.topology.name

    @property
    def ports(self) -> pd.DataFrame:
        """Every switch egress port (``qcn net show``'s table): where it goes, its rate,
        delay and buffer on each backend (``sim_rate_bps``, ``bmv2_rate_bps``, ...), and
        on each whether it runs a CP (``CP``), can congest and runs none (``no``), or never
        congests (``-``)."""
        import pandas as pd  # noqa: PLC0415

        return pd.DataFrame(command.port_rows(self._views))

    @property
    def hosts(self) -> pd.DataFrame:
        """Every host: its IP, MAC and the switch port it is attached to."""
        import pandas as pd  # noqa: PLC0415

        return pd.DataFrame(command.host_rows(self.topology))

    @property
    def cp_ports(self) -> list[str]:
        """The switch egress ports that run a CP on the simulator (``s1:2``)."""
        return [str(ref) for ref in self.topology.cp_ports]

    @one_line
    def routes(self, src: str, dst: str) -> list[str]:
        """The switch egress ports a frame from host ``src`` to host ``dst`` leaves
        through, in order (the last faces ``dst``): the route both backends program."""
        for host in (src, dst):
            if host not in self.topology.host_by_name:
                names = ", ".join(h.name for h in self.topology.hosts)
                raise TopologyError(f"{self.name}: no host {host!r} (its hosts: {names})")
        return [str(ref) for ref in self.topology.path(src, dst)]

    @one_line
    def draw(self) -> Figure:
        """The picture ``qcn net draw`` writes: switches, hosts and links (a link's width by
        its rate), each CP port marked, at the rates ``qcn net up`` runs it."""
        topo = command.topology_of(self._args)
        resources.check_drawing(len(topo.switches) + len(topo.hosts), topo.name)
        with pyplot_kept():
            from qcn.core.netdraw import figure  # noqa: PLC0415 - matplotlib's import

            drawn: Figure = figure(topo, Unmanaged)
        return drawn
