"""A :class:`qcn.core.topology.Topology` on Mininet and BMv2: the one place that turns the
network's facts into a Mininet topology, the controller's network configuration and the
links' emulation.  No other module of the Mininet backend states a port number.

- :class:`MininetTopology` adds the topology's switches, hosts and links to Mininet with
  the topology's own port numbers; switch sK is BMv2 device K, serving gRPC on
  :data:`GRPC_BASE_PORT` + K - 1 and Thrift on :data:`THRIFT_BASE_PORT` + K - 1.
- :func:`network_config` is the controller's view (qcn.controller.config.NetworkConfig):
  forwarding and flooding from the topology's routes and spanning tree, a CP on each of
  its CP ports with the run's CP parameters and a CPID of the switch's MAC and the port,
  and every port whose queue can build served at its link's rate (BMv2 shapes in frames/s
  of the run's frames) with its link's buffer.
- :func:`emulate_links` gives a link its delay where the topology asks for it (netem on
  the switches' side, docs/topology.md, "Delays"); :func:`reach_every_host` gives hosts
  on different subnets (a tutorials file's) on-link routes to one another.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from typing import Any

from qcn.controller.config import HostConfig, LinkConfig, NetworkConfig, PortConfig, SwitchConfig
from qcn.controller.entries import PauseWatermarks
from qcn.core.params import CpParams
from qcn.core.pipeline import BMV2_THRIFT_PORT
from qcn.core.topology import HOST_PORT, PortRef, Topology, switch_number
from qcn.topologies.errors import ExperimentError

GRPC_BASE_PORT = 20051
"""Switch sK serves gRPC on GRPC_BASE_PORT + K - 1: clear of a BMv2 started by hand (9559)
and below Linux's range of ports for outgoing connections (32768-60999), so that no
connection of the machine's can hold a switch's port as it starts (50051 + K could: a
fat-tree's s18 found 50068 taken while other work ran)."""
THRIFT_BASE_PORT = BMV2_THRIFT_PORT
NO_NETEM = (
    "this kernel has no netem (sch_netem): the links' delays are not emulated, and every "
    "loop has BMv2's own delay (about a millisecond)"
)
NETEM_MIN_DELAY_S = 1e-6
"""Delays below this are left out (netem's resolution; and BMv2's own latency is ~0.1 ms)."""


@dataclass(frozen=True)
class SwitchAddress:
    """How the controller reaches switch sK, from K alone."""

    number: int

    @property
    def device_id(self) -> int:
        return self.number

    @property
    def grpc_port(self) -> int:
        return GRPC_BASE_PORT + self.number - 1

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def thrift_port(self) -> int:
        return THRIFT_BASE_PORT + self.number - 1

    @property
    def cp_mac(self) -> str:
        """Source MAC of its CNMs (and the top of its CPIDs)."""
        return f"02:00:00:00:{self.number:02x}:00"


def address(switch: str) -> SwitchAddress:
    return SwitchAddress(switch_number(switch))


class MininetTopology:
    """Builds ``topo`` into a Mininet ``Topo`` (imported lazily: Mininet is Debian's)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo

    def build(self) -> Any:
        from mininet.topo import Topo  # noqa: PLC0415 - Mininet's imports

        built = Topo()
        for sw in self.topo.switches:
            built.addSwitch(sw)
        for host in self.topo.hosts:
            built.addHost(host.name, ip=host.ip, mac=host.mac)
        for link in self.topo.links:
            ports = {
                f"port{i}": end.port
                for i, end in ((1, link.a), (2, link.b))
                if end.port != HOST_PORT
            }
            built.addLink(link.a.node, link.b.node, **ports)
        return built


@dataclass(frozen=True)
class PortShaping:
    """How the run shapes a switch port (BMv2's queue)."""

    rate_pps: int | None
    depth_pkts: int | None


def frames_per_s(rate_bps: float, frame_bytes: int) -> int:
    """A rate in the run's frames per second (BMv2 shapes queues in packets/s)."""
    return max(1, round(rate_bps / (8 * frame_bytes)))


def network_config(
    topo: Topology,
    *,
    cp_params: CpParams,
    frame_bytes: int,
    port_cp: dict[str, CpParams] | None = None,
    pause: PauseWatermarks | None = None,
    pause_output_limit_pkts: int | None = None,
    honour_pause: bool = False,
    rates_bps: dict[PortRef, float] | None = None,
) -> NetworkConfig:
    """The controller's view of ``topo``: see the module doc.  ``rates_bps`` overrides a
    port's initial rate (a schedule's first value); with ``pause`` (seed 001's switch)
    every input is guarded by it and every shaped port's queue is
    ``pause_output_limit_pkts`` deep (the partitions bound the buffer); ``honour_pause``:
    every port facing another switch holds its queue on a PAUSE, counted at its link's
    rate (its held frames go round at that rate, so it is shaped too); ``port_cp``: a
    port's own CP parameters (by its name, "s2:3"), over ``cp_params``."""
    cps, shaped = set(topo.cp_ports), set(topo.shaped_ports)
    switches = []
    for sw in topo.switches:
        addr = address(sw)
        ports = []
        for number in topo.ports(sw):
            ref = PortRef(sw, number)
            link, edge = topo.link_at(ref), topo.is_edge(ref)
            rate = (rates_bps or {}).get(ref, link.rate_bps)
            honour = honour_pause and not edge
            shaping = PortShaping(None, None)
            if ref in shaped or honour:
                depth = pause_output_limit_pkts if pause else link.buffer_pkts
                shaping = PortShaping(frames_per_s(rate, frame_bytes), depth)
            ports.append(
                PortConfig(
                    port=number,
                    edge=edge,
                    cp=ref in cps,
                    cp_params=(port_cp or {}).get(str(ref), cp_params),
                    queue_rate_pps=shaping.rate_pps,
                    queue_depth_pkts=shaping.depth_pkts,
                    pause=pause,
                    honour_pause_bps=round(link.rate_bps) if honour else None,
                )
            )
        switches.append(
            SwitchConfig(
                name=sw,
                grpc=addr.grpc,
                device_id=addr.device_id,
                thrift_port=addr.thrift_port,
                cp_mac=addr.cp_mac,
                ports=tuple(ports),
            )
        )
    hosts = tuple(HostConfig(h.name, h.mac, *_attached(topo, h.name)) for h in topo.hosts)
    links = tuple(
        LinkConfig((lk.a.node, lk.a.port), (lk.b.node, lk.b.port))
        for lk in topo.links
        if lk.a.node in topo.switches and lk.b.node in topo.switches
    )
    return NetworkConfig(tuple(switches), hosts, links, ecmp=topo.ecmp)


def _attached(topo: Topology, host: str) -> tuple[str, int]:
    ref = topo.attachment(host)
    return ref.switch, ref.port


def emulate_links(topo: Topology, run: Any = subprocess.run) -> list[str]:
    """Delays on the switches' side of each link that has one, where ``topo`` asks for them
    (a host's link: its whole round trip on the way to the host, so every loop keeps its
    delay while the host's own qdiscs stay the reaction point's; a link between switches:
    its delay each way).  Returns what was done, a line per interface; a kernel without
    netem (sch_netem) emulates none, in one line."""
    if not topo.emulate_delays:
        return []
    done: list[str] = []
    for link in topo.links:
        if link.delay_s < NETEM_MIN_DELAY_S:
            continue
        host_link = link.a.node in topo.host_by_name or link.b.node in topo.host_by_name
        for end in link.ends():
            if end.node not in topo.switches:
                continue
            delay = 2 * link.delay_s if host_link else link.delay_s
            iface = PortRef(end.node, end.port).interface
            # Room for what the link carries in its delay, and more: netem is no queue here.
            limit = max(1000, round(link.rate_bps * delay / 8 / 64) * 2)
            r = run(
                ["tc", "qdisc", "replace", "dev", iface, "root", "netem",
                 "delay", f"{delay * 1e6:.0f}us", "limit", str(limit)],
                check=False, capture_output=True, text=True,
            )  # fmt: skip
            if r.returncode != 0:
                if "unknown" in r.stderr.lower():
                    return [*done, NO_NETEM]
                raise ExperimentError(f"{iface}: netem refused: {r.stderr.strip()}")
            done.append(f"{iface}: netem {delay * 1e3:g} ms")
    return done


def reach_every_host(net: Any, topo: Topology) -> int:
    """On-link routes between hosts whose addresses are in different subnets (a tutorials
    file's 10.0.1.1/24 and 10.0.2.2/24): this network is one L2 domain, so every host
    reaches every other directly.  Returns the routes added."""
    added = 0
    for host in topo.hosts:
        own = ipaddress.IPv4Interface(host.ip).network
        node = net.get(host.name)
        for other in topo.hosts:
            if other is host or ipaddress.IPv4Address(other.address) in own:
                continue
            node.cmd(f"ip route replace {other.address}/32 dev {host.name}-eth0")
            added += 1
    return added
