"""Mininet nodes: BMv2 switches running the congestion-point pipeline, and hosts.

Naming (Mininet's usual scheme): switches sK, interfaces ``{node}-eth{port}``; a switch's
interface sK-ethP is its BMv2 port P.  The networks themselves are
:class:`qcn.core.topology.Topology` (built by :mod:`qcn.topologies.network`).

- :class:`Bmv2Switch` starts ``simple_switch_grpc`` through :class:`qcn.topologies.bmv2.Bmv2Process`
  (ports, device id, Thrift port, a log file per switch at warning level unless
  ``trace=True``), waits until its gRPC port answers, shows its log tail when it fails, and
  deletes its interfaces when it stops (Mininet leaves them behind otherwise,
  docs/bmv2.md).
- :class:`QcnHost` turns checksum offload off: TCP/UDP frames would otherwise cross BMv2
  with partial checksums and be dropped by the receiver (ping still works, hiding it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mininet.node import Host, Switch

from qcn.core.frames import FB_TAG_BYTES
from qcn.topologies.bmv2 import Bmv2Config, Bmv2Process
from qcn.topologies.netns import IPV6_CONFS
from qcn.topologies.network import address
from qcn.topologies.placement import UNPINNED, CpuPlan

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


RUNNER_REALTIME_PRIORITY = 5
"""The runner's own SCHED_FIFO priority while it measures, when the switches have theirs:
below the reaction points and the sinks, which must never wait for it, above every
ordinary process (docs/bmv2.md, "The runner's samples")."""


class Bmv2Switch(Switch):  # type: ignore[misc]
    """A BMv2 simple_switch_grpc as a Mininet switch (root namespace, gRPC on loopback)."""

    def __init__(
        self,
        name: str,
        log_dir: Path = Path("/tmp"),
        trace: bool = False,
        realtime_priority: int = 0,
        cpu_plan: CpuPlan = UNPINNED,
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        self.realtime_priority = realtime_priority
        self.cpus = cpu_plan.cpus_of(name)
        addr = address(name)
        self.device_id = addr.device_id
        self.grpc_port = addr.grpc_port
        self.thrift_port = addr.thrift_port
        self.log_dir = Path(log_dir)
        self.trace = trace
        self.process: Bmv2Process | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def bmv2_ports(self) -> dict[int, str]:
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def start(self, _controllers: list[Any]) -> None:
        # Recorded before it starts: stop() ends a switch interrupted while it starts.
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
                cpus=self.cpus,
            )
        )
        self.process.start()

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
