"""Per-flow ECMP through the action selector (p4src/control/forwarding.p4), on BMv2.

A destination reached by three equal-cost ports, as the controller programs it
(qcn.controller.entries.forwarding_entries): each flow's frames all leave by one port, the
port qcn.core.ecmp computes from its 5-tuple (the simulator's choice), and the flows
spread over all three.  Frames without a 5-tuple, and every frame while the parser reads
no IPv4 (per-destination), take the destination's own port.
"""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.controller.entries import forwarding_entries
from qcn.core.ecmp import DATA_PORT, choose_port, five_tuple_hash, flow_port
from qcn.core.pipeline import ETHERTYPE_IPV4, PARSE_VSET_FLOW_ETHERTYPES
from qcn.ptf_tests.qcn_base import HOST_IP, HOST_MAC, QcnTest

SENDER = 0
SPREAD = (1, 2, 3)
"""The destination's equal-cost ports."""
OWN_PORT = 2
"""Its per-destination port."""
FAR_MAC = "00:00:00:00:00:99"
FAR_IP = "10.0.1.9"
FLOWS = 48
FRAMES_PER_FLOW = 3
FLOW_OF_PORT = {flow_port(f): f for f in range(FLOWS)}


def flow_frame(flow: int, seq: int) -> bytes:
    pkt = (
        Ether(src=HOST_MAC[SENDER], dst=FAR_MAC)
        / IP(src=HOST_IP[SENDER], dst=FAR_IP, id=seq)
        / UDP(sport=flow_port(flow), dport=DATA_PORT)
    )
    return bytes(pkt / bytes(200))


class EcmpTest(QcnTest):
    def program(self, distance: int, *, per_flow: bool = True) -> None:
        plain, ecmp = forwarding_entries({FAR_MAC: OWN_PORT}, {FAR_MAC: (SPREAD, distance)})
        assert not plain
        self.sw.insert([*ecmp.members, *ecmp.groups])
        self.sw.insert(list(ecmp.entries))
        flows = [ETHERTYPE_IPV4.to_bytes(2, "big")] if per_flow else []
        self.thrift.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, flows)

    def tearDown(self) -> None:
        self.thrift.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, [])
        QcnTest.tearDown(self)

    def ports_taken(self, frames_per_flow: int = FRAMES_PER_FLOW) -> dict[int, set[int]]:
        """Each flow: the ports its frames left by.  A round of one frame per flow at a
        time: a port's BMv2 queue holds 64, which one round cannot exceed."""
        taken: dict[int, set[int]] = {}
        for seq in range(frames_per_flow):
            for flow in range(FLOWS):
                self.send(SENDER, flow_frame(flow, seq))
            got = self.collect()
            assert not got[SENDER], "nothing goes back to the sender"
            assert sum(len(f) for f in got.values()) == FLOWS
            for port, frames in got.items():
                for frame in frames:
                    flow = FLOW_OF_PORT[Ether(frame)[UDP].sport]
                    taken.setdefault(flow, set()).add(port)
        return taken


class EachFlowKeepsThePortTheModelChooses(EcmpTest):
    """At each of three distances (three windows of the hash): one port per flow, the
    model's, and every port used."""

    def runTest(self) -> None:
        for distance in (1, 2, 3):
            if distance > 1:
                self.tearDown()
                self.setUp()
            self.program(distance)
            taken = self.ports_taken()
            for flow in range(FLOWS):
                hashed = five_tuple_hash(HOST_IP[SENDER], FAR_IP, flow_port(flow), DATA_PORT)
                assert taken[flow] == {choose_port(SPREAD, hashed, distance)}, (distance, flow)
            used = {p for ports in taken.values() for p in ports}
            assert used == set(SPREAD), (distance, used)


class FramesWithoutATupleTakeTheDestinationsPort(EcmpTest):
    """A frame of another EtherType; and IPv4 while the parser reads none (per-destination
    ECMP's pipeline): the destination's own port."""

    def runTest(self) -> None:
        self.program(1)
        other = bytes(Ether(src=HOST_MAC[SENDER], dst=FAR_MAC, type=0x88B5) / bytes(100))
        for _ in range(5):
            self.send(SENDER, other)
        got = self.collect()
        assert [len(got[p]) for p in SPREAD] == [5 if p == OWN_PORT else 0 for p in SPREAD]
        self.tearDown()
        self.setUp()
        self.program(1, per_flow=False)
        taken = self.ports_taken()
        assert all(ports == {OWN_PORT} for ports in taken.values())
