"""Wireshark's view of the real pipeline's CNMs: CNMs BMv2 emitted, decoded by the real
tshark with the project's dissector (qcn/wireshark/qcn.lua), every field equal to the scapy
layer's value for the same bytes (tests/test_wireshark.py does the same for frames the scapy
layers built)."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from qcn.core.frames import CNM_MAX_MSDU_BYTES, CNTag
from qcn.ptf_tests.qcn_base import ALWAYS, BOTTLENECK, HOST_IP, HOST_MAC, QcnTest
from qcn.wireshark import decode, mismatches

SLOW_PPS = 100
GAP_S = 0.0005
"""Frames sent this far apart (or as fast as Python manages, at least ~300/s) arrive faster
than SLOW_PPS drains: 110 of them take the queue past 64 frames."""
RISING = 110
LIMIT_PKTS = 200
"""The pipeline's buffer: above q_eq 64, so the first phase's queue can rise through it."""
DRAIN_GAP_S = 0.025
"""Frames this far apart find 2 or 3 frames gone since the last (each adds one): qdelta < 0."""


def frame(seq: int, *, size: int, tagged: bool) -> bytes:
    """A UDP frame from port 0's host to the bottleneck's, CN-TAG-tagged (flow id = seq) or
    not; ``seq`` in the IP id and payload keeps every MSDU different."""
    eth = Ether(src=HOST_MAC[0], dst=HOST_MAC[BOTTLENECK])
    if tagged:
        eth /= CNTag(flow_id=seq)
    pkt = eth / IP(src=HOST_IP[0], dst=HOST_IP[BOTTLENECK], id=seq) / UDP(sport=10000, dport=5001)
    return bytes(pkt / (seq.to_bytes(4, "big") + bytes(max(0, size - len(pkt) - 4))))


class TsharkDecodesPipelineCnmsTest(QcnTest):
    """Two phases on one port, the CP changed live between them:

    1. q_eq 64 frames (w 4, Fbmax 576), a burst rising through q_eq one frame per sample:
       frames finding 61 to 68 get Fb = -(q - 64 + 4) between -1 and -8, QntzFb 0, those
       below 64 with a negative qoff;
    2. q_eq 2 (Fbmax 18), the deep queue drained slowly: QntzFb 63 with qdelta < 0.

    Frames alternate tagged/untagged and 60/1000 bytes: the long ones' MSDUs are cut at 64
    bytes and must raise the truncation warning, the short ones' must not."""

    def runTest(self) -> None:
        if shutil.which("tshark") is None:
            self.skipTest("tshark not installed (make sysdeps)")
        self.enable_cp(replace(ALWAYS, q_eq_pkts=64, w=4.0), limit_pkts=LIMIT_PKTS)
        self.thrift.set_queue_rate(SLOW_PPS, BOTTLENECK)
        for seq in range(RISING):
            self.send(0, frame(seq, size=1000 if seq % 4 < 2 else 60, tagged=seq % 2 == 1))
            time.sleep(GAP_S)
        self.enable_cp(replace(ALWAYS, q_eq_pkts=2, w=4.0), modify=True, limit_pkts=LIMIT_PKTS)
        for seq in range(RISING, RISING + 20):
            self.send(0, frame(seq, size=1000 if seq % 4 < 2 else 60, tagged=seq % 2 == 1))
            time.sleep(DRAIN_GAP_S)
        cnms = self.cnms(self.collect(ports=(0,), quiet_s=1.0)[0])
        self.assertGreater(len(cnms), 10)
        decoded = decode(cnms)
        self.assertEqual(len(decoded), len(cnms))
        for cnm, got in zip(cnms, decoded, strict=True):
            self.assertEqual(mismatches(cnm, got), {}, cnm.hex())
        fields = [d.fields for d in decoded]
        qntz = {f["qcn.cnm.qntzfb"] for f in fields}
        self.assertIn("0", qntz)
        self.assertIn("63", qntz)
        self.assertTrue(any(int(f["qcn.cnm.qoff"]) < 0 for f in fields), "a negative qoff")
        self.assertTrue(any(int(f["qcn.cnm.qdelta"]) < 0 for f in fields), "a negative qdelta")
        tagged = [d for d in decoded if "qcn.cntag.flow_id" in d.fields]
        self.assertTrue(tagged and len(tagged) < len(decoded), "tagged and untagged MSDUs")
        for d in decoded:
            long_frame = int(d.fields["qcn.cnm.msdu_len"]) == CNM_MAX_MSDU_BYTES
            self.assertEqual(d.experts, {"qcn.cnm.msdu.truncated"} if long_frame else set())
