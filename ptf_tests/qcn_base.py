"""Program-specific PTF helpers: the port map, the switch connection, state reset, frames.

Every test starts from the same switch state: the pipeline pushed, one host per port in
the L2 table, the flood groups, one CNM clone session per port, no CP configured, queues
unlimited, registers cleared.  The switch is programmed through the project's controller
code (qcn.controller.entries over qcn.controller.p4runtime), as the runtime controller does it.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ptf
from ptf import testutils
from ptf.base_tests import BaseTest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.controller.agent import read_counters
from qcn.controller.bmv2_thrift import Bmv2Thrift
from qcn.controller.entries import (
    BMV2_DEFAULT_QUEUE_PKTS,
    CpPort,
    bmv2_queue_pkts,
    cnm_clone_session,
    cp_entries,
    default_cpid,
    edge_entries,
    edge_port_entry,
    flood_groups,
    l2_entry,
)
from qcn.controller.p4runtime import P4RuntimeSwitch
from qcn.core.cp_model import CongestionPoint, CpDecision, CpPortConfig
from qcn.core.frames import (
    CNM,
    CNM_HEADER_BYTES,
    CNM_MAX_MSDU_BYTES,
    ETHERTYPE_AT,
    ETHERTYPE_CNM,
    expected_cnm,
    msdu_offset,
)
from qcn.core.params import CpParams, QueueUnit
from qcn.core.pipeline import COUNTERS, REGISTERS
from qcn.topologies.bmv2 import wait_until

PORTS = (0, 1, 2, 3)
HOST_MAC = {p: f"00:00:00:00:00:{p + 1:02x}" for p in PORTS}
HOST_IP = {p: f"10.0.0.{p + 1}" for p in PORTS}
CP_MAC = "02:00:00:00:00:fe"
BOTTLENECK = 3
"""The egress port the tests congest."""
ALWAYS = CpParams(p_base=1.0, p_scale=0.0, queue_unit=QueueUnit.PACKETS)
"""The arrival CP in packets, sampling every frame: every frame's feedback is visible."""

_switch: P4RuntimeSwitch | None = None


def switch() -> P4RuntimeSwitch:
    """One P4Runtime connection for the whole PTF run (the pipeline is pushed once)."""
    global _switch  # noqa: PLW0603 - one connection shared by all tests in the process
    if _switch is None:
        p = testutils.test_params_get()
        _switch = P4RuntimeSwitch(
            p["grpc_addr"], Path(p["p4info"]), Path(p["bmv2_json"]), timeout_s=10
        ).open()
        atexit.register(_switch.close)
    return _switch


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    return wait_until(condition, timeout_s, interval_s=0.02)


def udp_frame(src: int, dst: int, seq: int, size: int = 1000, src_mac: str | None = None) -> bytes:
    """A UDP frame from host ``src`` to host ``dst`` whose first payload bytes are ``seq``."""
    pkt = (
        Ether(src=src_mac or HOST_MAC[src], dst=HOST_MAC[dst])
        / IP(src=HOST_IP[src], dst=HOST_IP[dst], id=seq & 0xFFFF)
        / UDP(sport=10000, dport=5001)
    )
    payload = seq.to_bytes(4, "big")
    pad = max(0, size - len(pkt) - len(payload))
    return bytes(pkt / (payload + bytes(pad)))


def by_msdu(frames: list[bytes]) -> dict[bytes, bytes]:
    """Sent frames keyed by the MSDU a CNM would encapsulate for them (must be unique)."""
    out = {f[msdu_offset(f) : msdu_offset(f) + CNM_MAX_MSDU_BYTES]: f for f in frames}
    assert len(out) == len(frames), "test frames must differ in their first 64 MSDU bytes"
    return out


def sampled_seq(cnm: bytes) -> int:
    """The sequence number (udp_frame) of the frame a CNM encapsulates."""
    return int.from_bytes(Ether(cnm)[CNM].msdu[30:34], "big")


class QcnTest(BaseTest):  # type: ignore[misc]
    """Base of every test: a clean switch, its controller connection and Thrift."""

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.dataplane: Any = ptf.dataplane_instance
        self.sw = switch()
        self.thrift = Bmv2Thrift(port=int(testutils.test_param_get("thrift_port")))
        self.sw._call(self.sw.switch.delete_all(), what="delete_all")
        self.sw.insert(
            [
                *(l2_entry(HOST_MAC[p], p) for p in PORTS),
                *flood_groups(list(PORTS)),
                *(cnm_clone_session(p) for p in PORTS),
            ]
        )
        self.thrift.set_queue_rate(0)
        self.thrift.set_queue_depth(BMV2_DEFAULT_QUEUE_PKTS)
        for reg in REGISTERS:
            self.thrift.register_reset(reg)
        for counter in COUNTERS.values():
            self.thrift.counter_reset(counter)
        self.dataplane.flush()

    def tearDown(self) -> None:
        self.thrift.set_queue_rate(0)
        self.thrift.close()
        BaseTest.tearDown(self)

    # -- configuration --------------------------------------------------------------------

    def enable_cp(
        self,
        params: CpParams,
        port: int = BOTTLENECK,
        *,
        modify: bool = False,
        limit_pkts: int = BMV2_DEFAULT_QUEUE_PKTS,
        limit_bytes: int | None = None,
    ) -> CpPort:
        """A CP on ``port``, its buffer the pipeline's (BMv2's own queue deeper, as the
        controller sets it)."""
        cp = CpPort.with_default_cpid(port, params, CP_MAC, limit_pkts, limit_bytes)
        (self.sw.modify if modify else self.sw.insert)(cp_entries(cp))
        self.thrift.set_queue_depth(bmv2_queue_pkts(limit_pkts), port)
        return cp

    def occupancy(self, port: int = BOTTLENECK) -> tuple[int, int]:
        """The pipeline's count of the port's queue: (frames, bytes)."""
        return self.thrift.occupancy(port)

    def mark_edge(self, port: int) -> None:
        self.sw.insert([edge_port_entry(port)])

    def host_port(self, port: int, params: CpParams) -> int:
        """``port`` faces a host, in three-point mode if ``params`` say so (its Fb tag push
        and end reflection point, as the controller writes them); returns its CPID."""
        cpid = default_cpid(CP_MAC, port)
        self.sw.insert(edge_entries(port, params, cpid, CP_MAC))
        return cpid

    def counters(self, port: int) -> dict[str, int]:
        return read_counters(self.sw, port)

    # -- traffic --------------------------------------------------------------------------

    def send(self, port: int, frame: bytes) -> None:
        testutils.send_packet(self, port, frame)

    def collect(
        self, ports: tuple[int, ...] = PORTS, quiet_s: float = 0.5
    ) -> dict[int, list[bytes]]:
        """Every frame the switch emits until it has been quiet for ``quiet_s``."""
        got: dict[int, list[bytes]] = {p: [] for p in ports}
        while True:
            res = self.dataplane.poll(timeout=quiet_s)
            if res.packet is None:
                return got
            if res.port in got:
                got[res.port].append(bytes(res.packet))

    @staticmethod
    def cnms(frames: list[bytes]) -> list[bytes]:
        at = ETHERTYPE_AT
        return [f for f in frames if f[at : at + 2] == ETHERTYPE_CNM.to_bytes(2, "big")]

    @staticmethod
    def model_decision(cnm: bytes, params: CpParams) -> CpDecision:
        """The reference model's decision for the sample a CNM reports (q, q_old from it)."""
        qoff = int.from_bytes(cnm[24:26], "big", signed=True)
        qdelta = int.from_bytes(cnm[26:28], "big", signed=True)
        return QcnTest.model_decision_at(qoff, qdelta, params)

    @staticmethod
    def model_decision_at(qoff: int, qdelta: int, params: CpParams) -> CpDecision:
        """The reference model's decision for a sample with this qoff and qdelta."""
        q = qoff + params.q_eq
        point = CongestionPoint(CpPortConfig.from_params(params), lambda lo, _hi: lo)
        point.q_old = q - qdelta
        return point.on_frame(q, 1500)

    def assert_cnm_exact(self, cnm: bytes, sent: dict[bytes, bytes], cp: CpPort) -> bytes:
        """The CNM must be byte for byte what the reference model and frame layer give."""
        sampled = sent.get(cnm[CNM_HEADER_BYTES:])
        self.assertIsNotNone(sampled, f"CNM for a frame that was not sent: {cnm.hex()}")
        assert sampled is not None
        decision = self.model_decision(cnm, cp.params)
        want = expected_cnm(sampled, decision, cp.cpid, CP_MAC)
        self.assertIsNotNone(want, f"the model sends no CNM for {cnm.hex()}")
        assert want is not None
        self.assertEqual(cnm.hex(), bytes(want).hex())
        return sampled
