"""802.3x PAUSE honoured by the switch's ports (p4src/control/port_hold.p4), on BMv2.

A PAUSE arriving at a port that honours PAUSE holds the frames queued for it: none leaves
until the pause time is over or a PAUSE of 0 lifts it, and all the while they stay in the
pipeline's counts (their input's buffered bytes, the port's occupancy).  Then they leave
in the order they came, none lost.
"""

from __future__ import annotations

import time

from qcn.controller.entries import PauseWatermarks, input_port_entry, pause_honour_entry
from qcn.core.frames import pause_frame
from qcn.core.pipeline import REGISTER_HOLD_UNTIL, REGISTER_INPUT_BYTES
from qcn.ptf_tests.qcn_base import (
    ALWAYS,
    BOTTLENECK,
    HOST_MAC,
    QcnTest,
    udp_frame,
    wait_for,
)

FRAME = 1000
SENDER = 0
HELD = BOTTLENECK
LINK_BPS = 1_000_000
"""The held port's link: a pause quantum is 512 µs."""
QUANTUM_S = 512 / LINK_BPS
PACE_PPS = 200
"""The held port's BMv2 queue rate: the pace its held frames go round at."""
SLACK_S = 0.02
"""How long after a PAUSE is sent a frame already on its way may still leave."""
COUNTED = PauseWatermarks(
    hi_bytes=60 * FRAME,
    lo_bytes=50 * FRAME,
    partition_bytes=80 * FRAME,
    pause_quanta=1,
    refresh_us=1_000_000,
)
"""The sender's input is counted, never paused (the tests send fewer than hi)."""


def seq_of(frame: bytes) -> int:
    """udp_frame's sequence number (the first payload bytes)."""
    return int.from_bytes(frame[42:46], "big")


class HoldTest(QcnTest):
    def honour(self, port: int = HELD) -> None:
        self.sw.insert(
            [
                input_port_entry(SENDER, COUNTED, push_fb_tag=False),
                pause_honour_entry(port, LINK_BPS),
            ]
        )
        self.thrift.set_queue_rate(PACE_PPS, port)

    def pause(self, quanta: int, port: int = HELD) -> float:
        """A PAUSE into ``port`` from its peer; returns when it was sent (time.time())."""
        sent = time.time()
        self.send(port, pause_frame(HOST_MAC[port], quanta))
        return sent

    def held(self, port: int = HELD) -> bool:
        return self.thrift.register_read(REGISTER_HOLD_UNTIL, port) != 0

    def input_bytes(self, port: int = SENDER) -> int:
        return self.thrift.register_read(REGISTER_INPUT_BYTES, port)

    def send_frames(self, seqs: range, gap_s: float = 0.0) -> list[bytes]:
        frames = [udp_frame(SENDER, HELD, s, size=FRAME) for s in seqs]
        for f in frames:
            self.send(SENDER, f)
            if gap_s:
                time.sleep(gap_s)
        return frames

    def arrivals(self, quiet_s: float) -> list[tuple[int, float]]:
        """(seq, time.time()) of each frame out of the held port until ``quiet_s`` of
        silence."""
        got: list[tuple[int, float]] = []
        while True:
            res = self.dataplane.poll(port_number=HELD, timeout=quiet_s)
            if res.packet is None:
                return got
            got.append((seq_of(bytes(res.packet)), res.time))


class HeldForPauseTimeTest(HoldTest):
    """Frames queued behind a PAUSE of 1500 quanta (0.77 s) leave after it, in order."""

    def runTest(self) -> None:
        self.honour()
        hold_s = 1500 * QUANTUM_S
        paused_at = self.pause(1500)
        self.assertTrue(wait_for(self.held), "the PAUSE was not taken")
        self.send_frames(range(10))
        self.assertTrue(wait_for(lambda: self.input_bytes() == 10 * FRAME, 1.0))
        got = self.arrivals(quiet_s=1.5)
        self.assertEqual([s for s, _ in got], list(range(10)))
        first = got[0][1] - paused_at
        self.assertGreaterEqual(first, hold_s, f"a frame left {first:.3f}s after the PAUSE")
        self.assertLess(first, hold_s + 0.5)
        self.assertTrue(wait_for(lambda: self.input_bytes() == 0))
        self.assertGreater(self.counters(HELD)["hold_rounds"], 0)
        self.assertEqual(self.counters(HELD)["order_late"], 0)


class HeldFramesStayCountedTest(HoldTest):
    """Held, the frames stay in their input's bytes and their CP port's occupancy; a PAUSE
    of 0 sends them on at once, in order."""

    def runTest(self) -> None:
        self.enable_cp(ALWAYS, HELD, limit_pkts=64)
        self.honour()
        self.pause(0xFFFF)  # 33.6 s
        self.assertTrue(wait_for(self.held))
        self.send_frames(range(12))
        # Every frame went round at least once: each met the hold at the head of the queue.
        self.assertTrue(wait_for(lambda: self.counters(HELD)["hold_rounds"] >= 24, 5.0))
        self.assertEqual(self.input_bytes(), 12 * FRAME)
        self.assertEqual(self.occupancy(HELD), (12, 12 * FRAME))
        self.assertEqual(self.arrivals(quiet_s=0.2), [], "a frame left a held port")
        lifted_at = self.pause(0)
        got = self.arrivals(quiet_s=0.5)
        self.assertEqual([s for s, _ in got], list(range(12)))
        # After the lift, at most a round of the queue (12 frames at the pace) goes by
        # before the first leaves: the frames left in their order, not the round's.
        self.assertLess(got[0][1] - lifted_at, 13 / PACE_PPS + 0.3)
        self.assertTrue(wait_for(lambda: self.occupancy(HELD) == (0, 0)))
        self.assertEqual(self.input_bytes(), 0)


class StreamThroughHoldsTest(HoldTest):
    """A stream at 100 frames/s through two short holds: every frame arrives once, nothing
    leaves during a hold, the frames that met a hold leave in the order they came, and
    every frame that passed an older one is counted (docs/pause.md: a newcomer after the
    lift does not wait for held frames still going round)."""

    def runTest(self) -> None:
        self.honour()
        hold_quanta = 400  # 0.2 s
        hold_s = hold_quanta * QUANTUM_S
        frames = 0
        holds = []
        sent_at: dict[int, float] = {}
        for _ in range(2):
            for phase in ("before", "during"):
                if phase == "during":
                    holds.append(self.pause(hold_quanta))
                for seq in range(frames, frames + 15):
                    sent_at[seq] = time.time()
                    self.send_frames(range(seq, seq + 1))
                    time.sleep(0.01)
                frames += 15
        got = self.arrivals(quiet_s=2.0)
        seqs = [s for s, _ in got]
        self.assertEqual(sorted(seqs), list(range(frames)), "a frame lost or duplicated")
        for paused_at in holds:
            # The PAUSE reaches the pipeline a little after it is sent (a frame already on
            # its way may still leave); from then on nothing leaves for hold_s.
            during = [t - paused_at for _, t in got if SLACK_S < t - paused_at < hold_s]
            self.assertEqual(during, [], "frames left a held port")
            # Met the hold: sent while it was surely in force at the switch (a frame sent
            # in its last moments may reach the switch after the lift, and pass).
            met = [
                s for s in seqs if paused_at + SLACK_S < sent_at[s] < paused_at + hold_s - SLACK_S
            ]
            # Several frames met it (15 sent 10 ms apart; a busy machine stretches each
            # sleep, and once only 10 fell inside the hold).
            self.assertGreaterEqual(len(met), 5)
            self.assertEqual(met, sorted(met), "held frames left out of their order")
        passed = sum(any(later < s for later in seqs[i + 1 :]) for i, s in enumerate(seqs))
        self.assertLessEqual(passed, self.counters(HELD)["order_late"])


class OrderPerInputTest(HoldTest):
    """Two inputs into a held port: after the lift each input's frames leave in the order
    they came (the order is kept per input, docs/pause.md), none lost, and both count."""

    def runTest(self) -> None:
        other = 1
        self.honour()
        self.sw.insert([input_port_entry(other, COUNTED, push_fb_tag=False)])
        self.pause(0xFFFF)
        self.assertTrue(wait_for(self.held))
        for seq in range(20):
            src = SENDER if seq % 2 == 0 else other
            self.send(src, udp_frame(src, HELD, seq, size=FRAME))
        inputs = (SENDER, other)
        self.assertTrue(
            wait_for(lambda: sum(self.input_bytes(i) for i in inputs) == 20 * FRAME, 2.0)
        )
        self.assertTrue(wait_for(lambda: self.counters(HELD)["hold_rounds"] >= 40, 5.0))
        self.assertEqual(self.arrivals(quiet_s=0.2), [], "a frame left a held port")
        self.pause(0)
        got = [s for s, _ in self.arrivals(quiet_s=0.5)]
        self.assertEqual(sorted(got), list(range(20)))
        for parity in (0, 1):
            mine = [s for s in got if s % 2 == parity]
            self.assertEqual(mine, sorted(mine), f"input {inputs[parity]} out of order: {got}")
        self.assertEqual(self.counters(HELD)["order_late"], 0)
        self.assertTrue(wait_for(lambda: all(self.input_bytes(i) == 0 for i in inputs)))


class NotHonouredWithoutEntryTest(HoldTest):
    """A port without a pause_honour entry counts a PAUSE and keeps sending."""

    def runTest(self) -> None:
        self.honour(port=1)  # another port honours; the held port does not
        self.thrift.set_queue_rate(PACE_PPS, HELD)
        self.pause(0xFFFF)
        self.send_frames(range(5))
        got = self.arrivals(quiet_s=0.5)
        self.assertEqual([s for s, _ in got], list(range(5)))
        self.assertFalse(self.held())
        self.assertEqual(self.counters(HELD)["pause_received"], 1)
