"""PTF tests of DCQCN's congestion point (p4src/control/ecn_marking.p4) on BMv2.

A port whose signal is ECN marks an ECN-capable IPv4 frame CE by the bytes its queue held
when the frame arrived: never at or below kmin, with the model's probability on the ramp
(qcn.core.cp_model.ecn_mark_threshold, the same fixed point), always above kmax.  The
queue a frame finds is set exactly: the pipeline's count of the port's queue (its
occupancy register) is written, and each frame is sent only once the one before it has
left, so it finds that count and nothing more (a frame that leaves takes its own bytes
off again).  Every frame that comes out is checked byte for byte: a marked one differs
from what was sent only in its ECN bits and its (valid) checksum, any other is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

from scapy.layers.inet import IP, UDP, IPOption_Router_Alert
from scapy.layers.l2 import Ether

from qcn.controller.entries import PauseWatermarks, input_port_entry, pause_honour_entry
from qcn.core.cp_model import ecn_mark_threshold
from qcn.core.ecmp import ECN_CE, ECN_ECT0, ECN_ECT1, ECN_NOT_ECT
from qcn.core.frames import pause_frame
from qcn.core.params import PROB_ONE, CpParams, CpSignal, QueueUnit
from qcn.core.pipeline import (
    ETHERTYPE_IPV4,
    PARSE_VSET_FLOW_ETHERTYPES,
    REGISTER_HOLD_UNTIL,
    REGISTER_OCCUPANCY,
)
from qcn.ptf_tests.qcn_base import BOTTLENECK, HOST_IP, HOST_MAC, QcnTest, wait_for

SENDER = 0
KMIN_BYTES = 20_000
KMAX_BYTES = 40_000
CURVE = CpParams(
    signal=CpSignal.ECN,
    kmin_bytes=KMIN_BYTES,
    kmax_bytes=KMAX_BYTES,
    pmax=0.5,
    p_base=1.0,
    p_scale=0.0,
    queue_unit=QueueUnit.PACKETS,
)
"""Pmax 0.5, so a few hundred frames tell the ramp's probabilities apart; p_base 1 (QCN's
CP would sample every frame) to show that an ECN port still sends no CNM; the CP counting
in frames, to show that the curve is in bytes whatever the CP's unit."""
SIGMAS = 5.0
"""How far a count of marks may lie from the model's mean, in binomial standard deviations
(two-sided, about 1 in 1.7 million by chance)."""
FRAME_BYTES = 200


def ecn_frame(seq: int, ecn: int, *, options: bool = False) -> bytes:
    """A UDP frame to the bottleneck with ``ecn`` in its IPv4 ECN field (and a DSCP, which a
    mark keeps), told apart by its IP id and first payload bytes (``seq``); ``options``:
    its IPv4 header carries a Router Alert option (24 bytes, IHL 6)."""
    ip = IP(src=HOST_IP[SENDER], dst=HOST_IP[BOTTLENECK], id=seq & 0xFFFF, tos=0xB8 | ecn)
    if options:
        ip.options = [IPOption_Router_Alert()]
    pkt = Ether(src=HOST_MAC[SENDER], dst=HOST_MAC[BOTTLENECK]) / ip / UDP(sport=10000, dport=5001)
    payload = seq.to_bytes(4, "big")
    return bytes(pkt / (payload + bytes(FRAME_BYTES - len(pkt) - len(payload))))


def seq_of(frame: bytes) -> int:
    """ecn_frame's ``seq`` (its first payload bytes, after a header without options)."""
    return int.from_bytes(frame[42:46], "big")


def checksum_valid(frame: bytes) -> bool:
    """The IPv4 header's checksum as scapy computes it from the rest of the header."""
    ip = Ether(frame)[IP]
    held = ip.chksum
    del ip.chksum
    return bool(IP(bytes(ip)).chksum == held)


def as_marked(frame: bytes) -> bytes:
    """``frame`` marked CE, its checksum computed again (scapy's), nothing else changed."""
    pkt = Ether(frame)
    pkt[IP].tos |= ECN_CE
    del pkt[IP].chksum
    return bytes(pkt)


class EcnTest(QcnTest):
    """An ECN port on the bottleneck, frames through it one at a time at a set depth."""

    seq = 0

    def setUp(self) -> None:
        QcnTest.setUp(self)
        # The parser reads IPv4 where a port marks ECN (qcn.controller.agent).
        self.thrift.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, [ETHERTYPE_IPV4.to_bytes(2, "big")])

    def tearDown(self) -> None:
        self.thrift.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, [])
        QcnTest.tearDown(self)

    def at_depth(self, q_bytes: int) -> None:
        """The port's queue as the next frame finds it: ``q_bytes`` (the pipeline's count)."""
        self.thrift.register_write(REGISTER_OCCUPANCY, BOTTLENECK, q_bytes)

    def through(self, ecn: int, *, options: bool = False) -> tuple[bytes, bytes]:
        """(sent, received): one frame through the bottleneck, sent once every frame before
        it has left (so the queue it finds is the one set)."""
        EcnTest.seq += 1
        sent = ecn_frame(EcnTest.seq, ecn, options=options)
        self.send(SENDER, sent)
        res = self.dataplane.poll(port_number=BOTTLENECK, timeout=2.0)
        self.assertIsNotNone(res.packet, f"frame {EcnTest.seq} did not come out")
        return sent, bytes(res.packet)

    def marks(self, q_bytes: int, n: int, ecn: int = ECN_ECT0, *, options: bool = False) -> int:
        """How many of ``n`` frames finding ``q_bytes`` queued came out marked; each frame
        out is the one sent, marked (only its ECN bits and a valid checksum changed) or not."""
        self.at_depth(q_bytes)
        marked = 0
        for _ in range(n):
            sent, got = self.through(ecn, options=options)
            if got == sent:
                continue
            self.assertEqual(got.hex(), as_marked(sent).hex(), f"at q = {q_bytes}")
            self.assertTrue(checksum_valid(got), f"at q = {q_bytes}")
            marked += 1
        self.assertEqual(self.occupancy(), (0, q_bytes), "a frame stayed counted")
        return marked

    def assert_no_cnm(self) -> None:
        self.assertEqual(self.collect(quiet_s=0.2), {p: [] for p in (0, 1, 2, 3)})
        c = self.counters(BOTTLENECK)
        self.assertEqual((c["cp_samples"], c["cp_cnms"]), (0, 0))


class NoMarkAtOrBelowKminTest(EcnTest):
    """At and below kmin no frame is marked (no draw: certain)."""

    def runTest(self) -> None:
        self.enable_cp(CURVE)
        for q in (0, KMIN_BYTES // 2, KMIN_BYTES - 1, KMIN_BYTES):
            self.assertEqual(self.marks(q, 20), 0, f"a frame marked at q = {q}")
        self.assertEqual(self.marks(KMIN_BYTES, 40, ECN_ECT1), 0)
        self.assertEqual(self.counters(BOTTLENECK)["ecn_marks"], 0)
        self.assert_no_cnm()


class RampMarksWithModelProbabilityTest(EcnTest):
    """Between kmin and kmax, and at kmax, the marks of a few hundred frames lie within
    binomial bounds of the model's probability (ecn_mark_threshold / PROB_ONE)."""

    def runTest(self) -> None:
        cp = self.enable_cp(CURVE)
        total = 0
        for q, n in ((KMIN_BYTES + (KMAX_BYTES - KMIN_BYTES) // 4, 300), (KMAX_BYTES, 300)):
            p = ecn_mark_threshold(q, cp.encoded) / PROB_ONE
            k = self.marks(q, n)
            half_width = SIGMAS * math.sqrt(n * p * (1 - p))
            self.assertLess(abs(k - n * p), half_width, f"{k} of {n} marked at q = {q}, p = {p}")
            total += k
        self.assertEqual(self.counters(BOTTLENECK)["ecn_marks"], total)
        self.assert_no_cnm()


class AboveKmaxEveryEctFrameMarkedTest(EcnTest):
    """Above kmax every ECT(0) and ECT(1) frame is marked CE (certain), one with IPv4
    options too (its checksum covers them); CE stays CE."""

    def runTest(self) -> None:
        self.enable_cp(CURVE)
        for q in (KMAX_BYTES + 1, 10 * KMAX_BYTES):
            for ecn in (ECN_ECT0, ECN_ECT1):
                self.assertEqual(self.marks(q, 25, ecn), 25, f"q = {q}, ECN field {ecn}")
                self.assertEqual(self.marks(q, 5, ecn, options=True), 5, f"q = {q}, options")
        self.assertEqual(self.marks(10 * KMAX_BYTES, 10, ECN_CE), 0, "a CE frame was changed")
        self.assertEqual(self.counters(BOTTLENECK)["ecn_marks"], 120)
        self.assert_no_cnm()


class NonEctFramesUntouchedTest(EcnTest):
    """A frame that is not ECN-capable leaves as it came at any depth."""

    def runTest(self) -> None:
        self.enable_cp(CURVE)
        for q in (0, KMIN_BYTES + 1, (KMIN_BYTES + KMAX_BYTES) // 2, KMAX_BYTES, 10 * KMAX_BYTES):
            self.assertEqual(self.marks(q, 10, ECN_NOT_ECT), 0, f"q = {q}")
        self.assertEqual(self.counters(BOTTLENECK)["ecn_marks"], 0)
        self.assert_no_cnm()


class SilentPortTest(EcnTest):
    """A port whose signal is none neither marks an ECN-capable frame nor sends a CNM, its
    queue deep past kmax (its CP still counts the frames: the queue is measured)."""

    def runTest(self) -> None:
        self.enable_cp(replace(CURVE, signal=CpSignal.NONE))
        self.assertEqual(self.marks(10 * KMAX_BYTES, 20, ECN_ECT0), 0)
        self.assertEqual(self.marks(10 * KMAX_BYTES, 20, ECN_ECT1), 0)
        c = self.counters(BOTTLENECK)
        self.assertEqual((c["ecn_marks"], c["cp_frames"]), (0, 40))
        self.assert_no_cnm()


class CnmPortSignalsTheSameDepthTest(EcnTest):
    """The depth the tests above set congests QCN's CP: with signal cnm the same frames
    draw CNMs (so the ECN and none ports' silence is theirs), and none is marked."""

    def runTest(self) -> None:
        self.enable_cp(replace(CURVE, signal=CpSignal.CNM, queue_unit=QueueUnit.BYTES))
        self.assertEqual(self.marks(10 * KMAX_BYTES, 10, ECN_ECT0), 0)
        cnms = self.cnms(self.collect(quiet_s=0.2)[SENDER])
        self.assertEqual(len(cnms), 10)
        self.assertEqual(self.counters(BOTTLENECK)["cp_cnms"], 10)


HELD_FRAMES = 40
HOLD_LINK_BPS = 1_000_000
HOLD_PACE_PPS = 200
"""The held port's BMv2 queue rate: the pace its held frames go round at, then leave."""
COUNTED = PauseWatermarks(
    hi_bytes=100 * FRAME_BYTES,
    lo_bytes=50 * FRAME_BYTES,
    partition_bytes=200 * FRAME_BYTES,
    pause_quanta=1,
    refresh_us=1_000_000,
)
"""The sender's input counted (so the held port keeps its frames), never paused."""


class HeldQueueMarksByArrivalTest(EcnTest):
    """The queue built for real (the port held by a PAUSE, p4src/control/port_hold.p4, its
    frames counted as they join it): frame i finds i frames ahead of it, so those finding at
    most kmin leave unmarked, those finding more than kmax marked."""

    def queued(self, frames: int) -> bool:
        return self.occupancy()[0] == frames

    def runTest(self) -> None:
        kmin, kmax = 10 * FRAME_BYTES, 30 * FRAME_BYTES
        self.enable_cp(replace(CURVE, kmin_bytes=kmin, kmax_bytes=kmax))
        self.sw.insert(
            [
                input_port_entry(SENDER, COUNTED, push_fb_tag=False),
                pause_honour_entry(BOTTLENECK, HOLD_LINK_BPS),
            ]
        )
        self.thrift.set_queue_rate(HOLD_PACE_PPS, BOTTLENECK)
        self.send(BOTTLENECK, pause_frame(HOST_MAC[BOTTLENECK], 0xFFFF))
        sent = [ecn_frame(1000 + i, ECN_ECT0) for i in range(HELD_FRAMES)]
        try:
            self.assertTrue(
                wait_for(lambda: self.thrift.register_read(REGISTER_HOLD_UNTIL, BOTTLENECK) != 0)
            )
            for i, frame in enumerate(sent):
                # Each once the one before is queued: it finds exactly i frames ahead (and
                # BMv2's packet capture loses frames sent back to back).
                self.send(SENDER, frame)
                self.assertTrue(wait_for(partial(self.queued, i + 1)), f"frame {i} not queued")
            self.assertEqual(self.occupancy(), (HELD_FRAMES, HELD_FRAMES * FRAME_BYTES))
        finally:
            # Lifted whatever happened: no held frame is left for the next test.
            self.send(BOTTLENECK, pause_frame(HOST_MAC[BOTTLENECK], 0))
            got = self.collect(quiet_s=0.5)[BOTTLENECK]
        # By sequence number: once the hold lifts, frames of a long held queue may leave out
        # of order (p4src/control/port_hold.p4, ORDER_SEARCH_ROUNDS).
        self.assertEqual(len(got), HELD_FRAMES)
        by_seq = {seq_of(f): f for f in got}
        self.assertEqual(sorted(by_seq), [seq_of(f) for f in sent])
        for i, frame in enumerate(sent):
            out, q = by_seq[seq_of(frame)], i * FRAME_BYTES
            if q <= kmin:
                self.assertEqual(out.hex(), frame.hex(), f"frame {i} (q = {q}) was changed")
            elif q > kmax:
                self.assertEqual(out.hex(), as_marked(frame).hex(), f"frame {i} (q = {q})")
            else:
                self.assertIn(out, (frame, as_marked(frame)), f"frame {i} (q = {q})")
        self.assertTrue(wait_for(lambda: self.occupancy() == (0, 0)))
