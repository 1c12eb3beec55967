"""The QCN Reaction Point rate rules, as pure code (``docs/qcn.md``, "Reaction Point").

One :class:`RateLimiterRules` is one rate limiter's state machine.  It owns no clock and no
randomness: the caller injects ``clock()`` (seconds, monotonic) and ``uniform()`` (a float in
[0, 1)), and calls

- :meth:`on_cnm` for every CNM addressed to this limiter,
- :meth:`on_transmit` for every frame the limiter sent,
- :meth:`on_timer` when :attr:`timer_deadline` has passed (or :meth:`advance` to fire all
  expired timer cycles at once).

The daemon, the simulator and the tests all drive this same class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from qcn.core.params import RpParams

#: Fb-hat is a 5-bit saturating counter (seed 000).
FB_HAT_MAX = 31
#: Fb-hat is halved every this many frames sent (seed 000).
FB_HAT_HALVING_FRAMES = 50
#: A cycle is short (50 frames, not 100) while Fb-hat is at most this (seed 000).
FB_HAT_SHORT_CYCLE_MAX = 1


class Stage(StrEnum):
    """The rate-increase regime a limiter is in."""

    FAST_RECOVERY = "FR"
    ACTIVE_INCREASE = "AI"
    HYPER_ACTIVE_INCREASE = "HAI"


@dataclass(frozen=True)
class RateSnapshot:
    """What changed the rate, for logs and tests."""

    event: str
    current_rate_bps: float
    target_rate_bps: float
    byte_stage: int
    time_stage: int


class RateLimiterRules:
    """The RP algorithm of one rate limiter (CR, TR, byte counter, timer)."""

    def __init__(
        self,
        params: RpParams,
        clock: Callable[[], float],
        uniform: Callable[[], float],
    ) -> None:
        self.p = params
        self._clock = clock
        self._uniform = uniform
        self.current_rate_bps = params.line_rate_bps
        self.target_rate_bps = params.line_rate_bps
        self.byte_stage = 0
        self.time_stage = 0
        self.bytes_left = 0.0
        """BC: bytes left in the current byte-counter cycle."""
        self.timer_deadline: float | None = None
        """When the current timer cycle ends (None: no timer running)."""
        self.frames_since_cnm = 0
        self.fb_hat = 0
        self._frames_since_fb_hat_halving = 0
        self.cnms = 0

    # -- state -----------------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        th = self.p.fast_recovery_th
        if self._hyper_active():
            return Stage.HYPER_ACTIVE_INCREASE
        if self.byte_stage > th or self.time_stage > th:
            return Stage.ACTIVE_INCREASE
        return Stage.FAST_RECOVERY

    @property
    def at_line_rate(self) -> bool:
        """True when the limiter may be released (CR back at line rate)."""
        return self.current_rate_bps >= self.p.line_rate_bps

    def snapshot(self, event: str) -> RateSnapshot:
        return RateSnapshot(
            event, self.current_rate_bps, self.target_rate_bps, self.byte_stage, self.time_stage
        )

    # -- events ----------------------------------------------------------------------------

    def on_cnm(self, qntz_fb: int) -> None:
        """Multiplicative decrease on a CNM carrying QntzFb (0..63)."""
        p = self.p
        if not 0 <= qntz_fb <= 63:
            raise ValueError(f"QntzFb must be in [0, 63], got {qntz_fb}")
        self.cnms += 1
        # Extra fast recovery: a CNM during the first FR cycle keeps TR.
        if self.byte_stage != 0:
            self.target_rate_bps = self.current_rate_bps
        self.current_rate_bps = max(p.min_rate_bps, self.current_rate_bps * (1 - p.gd * qntz_fb))
        self.byte_stage = 0
        self.time_stage = 0
        self.frames_since_cnm = 0
        if p.fb_hat:
            self.fb_hat = min(FB_HAT_MAX, self.fb_hat + qntz_fb)
        self.bytes_left = self._byte_cycle()
        if p.timer_enabled:
            self.timer_deadline = self._clock() + self._timer_cycle()

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:
        """Count ``frames`` sent frames of ``nbytes`` in all; may end a byte-counter cycle."""
        self.frames_since_cnm += frames
        if self.p.fb_hat:
            self._frames_since_fb_hat_halving += frames
            while self._frames_since_fb_hat_halving >= FB_HAT_HALVING_FRAMES:
                self._frames_since_fb_hat_halving -= FB_HAT_HALVING_FRAMES
                self.fb_hat >>= 1
        if self.cnms == 0:
            return  # never throttled: no cycles to clock
        self.bytes_left -= nbytes
        if self.bytes_left < 0:
            self.byte_stage += 1
            self.bytes_left = self._byte_cycle()
            self._increase()

    def on_timer(self) -> None:
        """The timer cycle ended: one more timer stage, then increase."""
        if self.timer_deadline is None:
            return
        self._end_timer_cycle(next_starts=self._clock())

    def advance(self, now: float) -> int:
        """Fire every timer cycle that ended by ``now``; return how many fired."""
        fired = 0
        while self.timer_deadline is not None and self.timer_deadline <= now:
            self._end_timer_cycle(next_starts=self.timer_deadline)
            fired += 1
        return fired

    def _end_timer_cycle(self, next_starts: float) -> None:
        """One more timer stage; the next cycle (shorter after FR) starts at ``next_starts``."""
        self.time_stage += 1
        self.timer_deadline = next_starts + self._timer_cycle()
        self._increase()

    # -- the rules -------------------------------------------------------------------------

    def _hyper_active(self) -> bool:
        th = self.p.fast_recovery_th
        return (
            self.p.hai_enabled
            and self.byte_stage > th
            and self.time_stage > th
            and self.frames_since_cnm >= self.p.hai_min_frames
        )

    def _increase(self) -> None:
        p = self.p
        th = p.fast_recovery_th
        if self._hyper_active():
            self.target_rate_bps += p.r_hai_bps * (min(self.byte_stage, self.time_stage) - th)
        elif self.byte_stage > th or self.time_stage > th:
            self.target_rate_bps += p.r_ai_bps
        # else fast recovery: TR unchanged
        if (self.byte_stage == 1 or self.time_stage == 1) and (
            self.target_rate_bps > 10 * self.current_rate_bps
        ):
            self.target_rate_bps /= 8
        self.current_rate_bps = min(
            (self.current_rate_bps + self.target_rate_bps) / 2, p.line_rate_bps
        )

    def _jitter(self) -> float:
        j = self.p.jitter
        return 1.0 - j + 2.0 * j * self._uniform()

    def _byte_cycle(self) -> float:
        p = self.p
        if p.fb_hat:
            frames = 50 if self.fb_hat <= FB_HAT_SHORT_CYCLE_MAX else 100
            limit = float(frames * p.frame_bytes)
        else:
            limit = float(p.bc_limit_bytes)
        if p.shorten_cycles_after_fr and self.byte_stage >= p.fast_recovery_th:
            limit /= 2
        return limit * self._jitter()

    def _timer_cycle(self) -> float:
        p = self.p
        period = p.timer_s
        if p.shorten_cycles_after_fr and self.time_stage >= p.fast_recovery_th:
            period /= 2
        return period * self._jitter()
