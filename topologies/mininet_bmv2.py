"""Mininet nodes and topologies with BMv2 switches running the congestion-point pipeline.

Naming (Mininet's usual scheme): hosts h1..hN, switches s1..sM, interfaces
``{node}-eth{port}``; a switch's interface sK-ethP is its BMv2 port P.

- :class:`Bmv2Switch` starts ``simple_switch_grpc`` through :class:`topologies.bmv2.Bmv2Process`
  (ports, device id, Thrift port, a log file per switch at warning level unless
  ``trace=True``), waits until its gRPC port answers, shows its log tail when it fails, and
  deletes its interfaces when it stops (Mininet leaves them behind otherwise,
  docs/bmv2.md).
- :class:`QcnHost` turns checksum offload off: TCP/UDP frames would otherwise cross BMv2
  with partial checksums and be dropped by the receiver (ping still works, hiding it).
- :class:`SingleBottleneckTopo` is the seeds' shape: N sources and one sink on one switch;
  the sink's port is the bottleneck, where the CP runs.
- :class:`MultihopTopo` is seed 001's: hot-spot and innocent senders share the first
  switch and hop; the hot spot is an output of the second switch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mininet.node import Host, Switch
from mininet.topo import Topo

from controller.config import HostConfig, LinkConfig, NetworkConfig, PortConfig, SwitchConfig
from controller.entries import PauseWatermarks
from qcn.core.frames import FB_TAG_BYTES
from qcn.core.params import CpParams
from qcn.core.pipeline import BMV2_THRIFT_PORT
from topologies.bmv2 import Bmv2Config, Bmv2Process
from topologies.netns import IPV6_CONFS

GRPC_BASE_PORT = 50051
"""Switch sN serves gRPC on GRPC_BASE_PORT + N - 1 (clear of a BMv2 started by hand)."""
THRIFT_BASE_PORT = BMV2_THRIFT_PORT


def switch_number(name: str) -> int:
    digits = "".join(c for c in name if c.isdigit())
    return int(digits or 1)


SWITCH_NICE = -10
"""The switches' niceness in Mininet runs (docs/bmv2.md, "CPU"): first on the CPU, ahead of
the hosts' sources and daemons, where real-time scheduling is refused."""
SWITCH_REALTIME_PRIORITY = 20
"""The switches' SCHED_FIFO priority in Mininet runs where the machine allows it (docs/bmv2.md,
"Noise"): below the kernel's own real-time threads (50 and up), above every ordinary one."""
RP_REALTIME_PRIORITY = 10
"""The reaction-point daemons' SCHED_FIFO priority when the switches have theirs: below the
switches, which never wait for them, above every ordinary process (docs/bmv2.md, "The
reaction points' latency"): a CNM changes its source's rate within a millisecond or two,
as the modelled network's loop delay asks, even when senders and other processes keep both
CPUs busy."""


class Bmv2Switch(Switch):  # type: ignore[misc]
    """A BMv2 simple_switch_grpc as a Mininet switch (root namespace, gRPC on loopback)."""

    def __init__(
        self,
        name: str,
        log_dir: Path = Path("/tmp"),
        trace: bool = False,
        realtime_priority: int = 0,
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        self.realtime_priority = realtime_priority
        n = switch_number(name)
        self.device_id = n
        self.grpc_port = GRPC_BASE_PORT + n - 1
        self.thrift_port = THRIFT_BASE_PORT + n - 1
        self.log_dir = Path(log_dir)
        self.trace = trace
        self.process: Bmv2Process | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def bmv2_ports(self) -> dict[int, str]:
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def start(self, _controllers: list[Any]) -> None:
        self.process = Bmv2Process(
            Bmv2Config(
                ports=self.bmv2_ports(),
                log_file=self.log_dir / f"{self.name}.log",
                device_id=self.device_id,
                grpc_port=self.grpc_port,
                thrift_port=self.thrift_port,
                log_level="trace" if self.trace else "warn",
                nice=SWITCH_NICE,
                realtime_priority=self.realtime_priority,
            )
        ).start()

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's name
        if self.process is not None:
            self.process.stop()
            self.process = None
        super().stop(deleteIntfs=deleteIntfs)


class QcnHost(Host):  # type: ignore[misc]
    """A host whose interfaces carry full checksums (offload off) and no IPv6 chatter."""

    def config(self, **params: Any) -> Any:
        result = super().config(**params)
        for intf in self.intfList():
            self.cmd(f"ethtool --offload {intf.name} rx off tx off sg off >/dev/null 2>&1")
        for conf in IPV6_CONFS:
            self.cmd(f"sysctl -qw net.ipv6.conf.{conf}.disable_ipv6=1")
        return result


class SingleBottleneckTopo(Topo):  # type: ignore[misc]
    """N sources h1..hN and a sink h(N+1) on switch s1; s1's port N+1 is the bottleneck."""

    def build(self, sources: int = 2) -> None:
        s1 = self.addSwitch("s1")
        for i in range(1, sources + 2):
            host = self.addHost(f"h{i}", ip=f"10.0.0.{i}/24", mac=host_mac(i))
            self.addLink(host, s1, port2=i)


class MultihopTopo(Topo):  # type: ignore[misc]
    """Seed 001's shape: senders on s1, both sinks on s2, one s1 -> s2 link between.

    Hot-spot senders h1..hN and innocent senders h(N+1)..h(N+K) on s1 ports 1..N+K; the
    hot-spot sink h(N+K+1) on s2 port 1 (the bottleneck), the innocent sink h(N+K+2) on
    s2 port 2; s1 port N+K+1 <-> s2 port 3.
    """

    def build(self, sources: int = 2, innocent: int = 1) -> None:
        s1, s2 = self.addSwitch("s1"), self.addSwitch("s2")
        senders = sources + innocent
        for i in range(1, senders + 1):
            host = self.addHost(f"h{i}", ip=f"10.0.0.{i}/24", mac=host_mac(i))
            self.addLink(host, s1, port2=i)
        for port, i in ((1, senders + 1), (2, senders + 2)):
            host = self.addHost(f"h{i}", ip=f"10.0.0.{i}/24", mac=host_mac(i))
            self.addLink(host, s2, port2=port)
        self.addLink(s1, s2, port1=senders + 1, port2=3)


SWITCH_LINK_MTU = 1500 + FB_TAG_BYTES
"""Links between switches carry three-point QCN's Fb tag on top of the hosts' 1500-byte
MTU (docs/qcn.md, "Three-point QCN"); the kernel refuses a longer frame on a veth."""


def quiet_switch_interfaces(net: Any) -> None:
    """No IPv6 on the switches' side of each link (root namespace veths): the kernel's own
    router solicitations and MLD reports would enter the peer switch as frames no host
    sent, and flood."""
    for sw in net.switches:
        for intf in sw.intfList():
            conf = Path(f"/proc/sys/net/ipv6/conf/{intf.name}/disable_ipv6")
            if intf.name != "lo" and conf.exists():
                conf.write_text("1")


def widen_switch_links(net: Any) -> None:
    """Give every switch-to-switch interface room for the Fb tag."""
    for link in net.links:
        if isinstance(link.intf1.node, Switch) and isinstance(link.intf2.node, Switch):
            for intf in (link.intf1, link.intf2):
                intf.node.cmd(f"ip link set dev {intf.name} mtu {SWITCH_LINK_MTU}")


def host_mac(i: int) -> str:
    return f"00:00:00:00:00:{i:02x}"


def network_config(
    net: Any,
    cp_ports: dict[str, list[int]],
    cp_params: CpParams | None = None,
    queues: dict[str, list[tuple[int, int, int]]] | None = None,
    pause: PauseWatermarks | None = None,
    *,
    honour_pause_bps: float | None = None,
) -> NetworkConfig:
    """The controller's view of a Mininet network of Bmv2Switches, built as the controller's
    own dataclasses (nothing to parse again): every host-facing port is an edge port,
    ``cp_ports`` run a congestion point with ``cp_params``, each (port, packets/s, buffer
    packets) of ``queues`` is shaped, and ``pause`` guards every switch port's input (seed
    001's switch).  ``honour_pause_bps``: every port facing another switch honours the
    PAUSEs it receives, counted at that link rate (each needs a queue rate in ``queues``:
    its held frames go round at it)."""
    shaped = {
        (sw, port): (pps, depth) for sw, qs in (queues or {}).items() for port, pps, depth in qs
    }
    params = cp_params or CpParams()
    switches = []
    for sw in net.switches:
        ports = []
        for port in sorted(sw.bmv2_ports()):
            link = sw.intfs[port].link
            far = link.intf1 if link.intf2.node is sw else link.intf2
            rate, depth = shaped.get((sw.name, port), (None, None))
            edge = not isinstance(far.node, Switch)
            ports.append(
                PortConfig(
                    port=port,
                    edge=edge,
                    cp=port in cp_ports.get(sw.name, []),
                    cp_params=params,
                    queue_rate_pps=rate,
                    queue_depth_pkts=depth,
                    pause=pause,
                    honour_pause_bps=None
                    if edge or honour_pause_bps is None
                    else round(honour_pause_bps),
                )
            )
        switches.append(
            SwitchConfig(
                name=sw.name,
                grpc=sw.grpc_address,
                device_id=sw.device_id,
                thrift_port=sw.thrift_port,
                cp_mac=f"02:00:00:00:{sw.device_id:02x}:00",
                ports=tuple(ports),
            )
        )
    hosts = []
    for host in net.hosts:
        intf = host.defaultIntf()
        link = intf.link
        far = link.intf2 if link.intf1 is intf else link.intf1
        hosts.append(HostConfig(host.name, intf.MAC(), far.node.name, far.node.ports[far]))
    links = [
        LinkConfig((a.node.name, a.node.ports[a]), (b.node.name, b.node.ports[b]))
        for a, b in ((link.intf1, link.intf2) for link in net.links)
        if isinstance(a.node, Switch) and isinstance(b.node, Switch)
    ]
    return NetworkConfig(tuple(switches), tuple(hosts), tuple(links))
