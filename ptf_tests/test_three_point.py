"""PTF tests of seed 003's three-point QCN on BMv2 (p4src/control/three_point.p4).

The switch under test plays every role: host-facing ports push and remove the Fb tag and
are the end reflection points; the other ports lead to "other switches", whose tagged
frames PTF sends in.  Tags, CNMs and decisions are checked against the reference model
(qcn.core.cp_model: overwrite_fb_tag, end_reflection) and the frame layer
(qcn.core.frames: push_fb_tag, pop_fb_tag, expected_reflection).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from ptf import testutils
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Dot1Q, Ether

from qcn.core.cp_model import FbTag
from qcn.core.frames import CNM_HEADER_BYTES, expected_reflection, pop_fb_tag, push_fb_tag
from qcn.core.params import CpParams, QueueUnit
from qcn.ptf_tests.qcn_base import (
    ALWAYS,
    BOTTLENECK,
    CP_MAC,
    HOST_IP,
    HOST_MAC,
    QcnTest,
    by_msdu,
    udp_frame,
    wait_for,
)
from qcn.ptf_tests.test_cp import BURST_GAP_S, CongestionTest

THREE_POINT = CpParams(three_point=True)


class FbTagAtTheEdgesTest(QcnTest):
    """Host 0's port is three-point: its frames get a fresh tag; host 1's is two-point.
    Ports 2 and 3 lead to other switches: tags stay on there, and come off towards hosts.
    The queues the pipeline counts return to empty although the frames changed length."""

    def runTest(self) -> None:
        self.host_port(0, THREE_POINT)
        self.host_port(1, CpParams())
        # Queues counted where frames gain the tag (towards port 2) and lose it (port 0).
        counting = CpParams(p_base=0.0, p_scale=0.0, queue_unit=QueueUnit.PACKETS)
        for port in (0, 2):
            self.enable_cp(counting, port=port)
        to_switch = udp_frame(0, 2, seq=1)
        self.send(0, to_switch)
        testutils.verify_packet(self, push_fb_tag(to_switch), 2)
        # Under an 802.1Q tag, the Fb tag follows it.
        vlan = bytes(
            Ether(src=HOST_MAC[0], dst=HOST_MAC[2])
            / Dot1Q(vlan=5, prio=3)
            / IP(src=HOST_IP[0], dst=HOST_IP[2])
            / UDP()
            / bytes(60)
        )
        self.send(0, vlan)
        testutils.verify_packet(self, push_fb_tag(vlan), 2)
        # A tag the host wrote itself is reset: only the network's CPs write Fb.
        forged = udp_frame(0, 2, seq=2)
        self.send(0, push_fb_tag(forged, FbTag(True, 40, 99, 1, 2)))
        testutils.verify_packet(self, push_fb_tag(forged), 2)
        # Host to host: the tag pushed at port 0 never reaches host 1 (a two-point port).
        to_host = udp_frame(0, 1, seq=3)
        self.send(0, to_host)
        testutils.verify_packet(self, to_host, 1)
        # From another switch towards either host: removed (P0 = 0: no reflection).
        for dst in (0, 1):
            frame = udp_frame(2, dst, seq=4 + dst)
            self.send(2, push_fb_tag(frame, FbTag(False, 0, 0, 0, 0)))
            testutils.verify_packet(self, frame, dst)
        # Between switches it stays on, unchanged.
        through = push_fb_tag(udp_frame(2, 3, seq=7), FbTag(False, 9, 5, 1, 1))
        self.send(2, through)
        testutils.verify_packet(self, through, 3)
        # Flooded frames lose it, and a host's broadcast gets none.
        arp = bytes(Ether(src=HOST_MAC[2], dst="ff:ff:ff:ff:ff:ff", type=0x0806) / bytes(46))
        self.send(2, push_fb_tag(arp))
        testutils.verify_packets(self, arp, [0, 1, 3])
        own = bytes(Ether(src=HOST_MAC[0], dst="ff:ff:ff:ff:ff:ff", type=0x0806) / bytes(46))
        self.send(0, own)
        testutils.verify_packets(self, own, [1, 2, 3])
        testutils.verify_no_other_packets(self)
        # Egress takes off what ingress counted, though the frame grew or shrank between.
        for port in (0, 2):
            self.assertEqual(self.occupancy(port), (0, 0), f"port {port}'s queue count")


class FbOverwrittenOnlyWhenMoreNegativeTest(CongestionTest):
    """A three-point CP towards another switch, every frame sampled, its Fb spanning 0..63
    in a burst (q_eq 5 frames).  Frames arrive tagged QntzFb 0, 30 or 63: a tag leaves with
    the CP's Fb only where that QntzFb is larger, exactly as the model computes it.  With
    reflect_p_base 0 the CP reflects nothing; with 1 it reflects every overwrite."""

    INCOMING = (0, 30, 63)
    UPSTREAM_CPID = 0xAB

    def burst_tagged(self, first_seq: int) -> tuple[list[FbTag], dict[int, list[bytes]]]:
        sent = [
            udp_frame(0, BOTTLENECK, seq)
            for seq in range(first_seq, first_seq + 3 * len(self.INCOMING) * 5)
        ]
        tags = [
            FbTag(False, self.INCOMING[i % 3], self.UPSTREAM_CPID, 1, 1) for i in range(len(sent))
        ]
        self.sent = sent
        return tags, self.burst([push_fb_tag(f, t) for f, t in zip(sent, tags, strict=True)])

    def check(self, reflect: bool) -> None:
        params = replace(
            ALWAYS, q_eq_pkts=5, three_point=True, reflect_p_base=1.0 if reflect else 0.0
        )
        cp = self.enable_cp(params, modify=reflect)
        cnms_before = self.counters(BOTTLENECK)["cp_cnms"]
        tags, out = self.burst_tagged(first_seq=1000 if reflect else 0)
        self.assertEqual(len(out[BOTTLENECK]), len(tags), "every data frame is forwarded")
        overwritten = {k: 0 for k in self.INCOMING}
        kept = {k: 0 for k in self.INCOMING}
        for frame, sent, tag in zip(out[BOTTLENECK], self.sent, tags, strict=True):
            bare, got = pop_fb_tag(frame)
            self.assertEqual(bare, sent)
            assert got is not None
            if got == tag:
                kept[tag.qntz_fb] += 1
                continue
            overwritten[tag.qntz_fb] += 1
            self.assertGreater(got.qntz_fb, tag.qntz_fb, f"{tag} became {got}")
            self.assertEqual((got.cpid, got.reflected), (cp.cpid, reflect))
            decision = self.model_decision_at(got.qoff, got.qdelta, params)
            self.assertEqual(got.qntz_fb, decision.qntz_fb)
        self.assertEqual(overwritten[63], 0, "nothing is more negative than QntzFb 63")
        self.assertGreaterEqual(overwritten[0], 10)
        self.assertGreater(overwritten[30], 0)
        self.assertGreater(kept[30], 0, "a less negative Fb leaves the tag alone")
        cnms = self.cnms(out[0])
        self.assertEqual(len(cnms), sum(overwritten.values()) if reflect else 0)
        self.assertEqual(self.counters(BOTTLENECK)["cp_cnms"] - cnms_before, len(cnms))
        sent_by_msdu = by_msdu(self.sent)
        for cnm in cnms:
            i = self.sent.index(sent_by_msdu[cnm[CNM_HEADER_BYTES:]])
            _, reflected = pop_fb_tag(out[BOTTLENECK][i])
            assert reflected is not None
            want = expected_reflection(push_fb_tag(self.sent[i], tags[i]), reflected, CP_MAC)
            assert want is not None
            self.assertEqual(cnm.hex(), bytes(want).hex())

    def runTest(self) -> None:
        self.check(reflect=False)
        self.thrift.set_queue_rate(0, BOTTLENECK)
        self.assertTrue(wait_for(lambda: self.occupancy() == (0, 0)))
        self.check(reflect=True)


class EndReflectionPointTest(QcnTest):
    """Host 0's port reflects with certainty (P0 = 1, reflect_p_base = 1): a reflected tag
    silences it; an unreflected Fb < 0 goes back under its CP's CPID, Fb = 0 under the
    port's own, byte for byte as the model builds them, out of the port the frame came in."""

    def runTest(self) -> None:
        own_cpid = self.host_port(0, replace(THREE_POINT, reflect_p0=1.0))
        tags = [
            FbTag(True, 0, 0, 0, 0),
            FbTag(True, 20, 0x77, 3, 1),
            FbTag(False, 20, 0x77, 3, 1),
            FbTag(False, 0, 0, 0, 0),
        ]
        frames = [udp_frame(2, 0, seq) for seq in range(len(tags))]
        for frame, tag in zip(frames, tags, strict=True):
            self.send(2, push_fb_tag(frame, tag))
            time.sleep(BURST_GAP_S)
        out = self.collect()
        self.assertEqual(out[0], frames, "every frame reaches the host, untagged")
        cnms = self.cnms(out[2])
        self.assertEqual(len(cnms), 2, "only the two unreflected tags are reflected")
        for cnm, (frame, reflected) in zip(
            cnms,
            [(frames[2], tags[2]), (frames[3], tags[3]._replace(cpid=own_cpid))],
            strict=True,
        ):
            want = expected_reflection(push_fb_tag(frame, reflected), reflected, CP_MAC)
            assert want is not None
            self.assertEqual(cnm.hex(), bytes(want).hex())
        self.assertEqual(out[1] + out[3], [])
        c = self.counters(0)
        self.assertEqual((c["fb_reflections"], c["p0_reflections"]), (1, 1))


class P0ReflectionRateTest(QcnTest):
    """Hosts 0 and 1 on three-point ports; 10,000 frames from host 1 reach host 0 with
    Fb = 0, and host 0's port reflects them with P0 = 0.25: the count lies within the
    binomial's two-sided 99.9 % interval."""

    N = 10_000
    P0 = 0.25

    def runTest(self) -> None:
        self.host_port(1, THREE_POINT)
        self.host_port(0, replace(THREE_POINT, reflect_p0=self.P0))
        # A CP that never samples, only to count the frames that reached port 0.
        counting = CpParams(p_base=0.0, p_scale=0.0, queue_unit=QueueUnit.PACKETS)
        self.enable_cp(counting, port=0, limit_pkts=self.N)
        for seq in range(self.N):
            self.send(1, udp_frame(1, 0, seq, size=100))
            if seq % 20 == 19:
                time.sleep(BURST_GAP_S)
        self.assertTrue(
            wait_for(lambda: self.counters(0)["cp_frames"] == self.N, timeout_s=60),
            f"{self.counters(0)['cp_frames']} of {self.N} frames reached port 0",
        )
        self.dataplane.flush()
        c = self.counters(0)
        k, n, p = c["p0_reflections"], self.N, self.P0
        half_width = 3.29 * math.sqrt(n * p * (1 - p))
        self.assertLess(abs(k - n * p), half_width, f"{k} reflections of {n} at P0 = {p}")
        self.assertEqual(c["fb_reflections"], 0)
