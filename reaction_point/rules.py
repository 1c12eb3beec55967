"""The QCN Reaction Point rate rules, as pure code (``docs/qcn.md``, "Reaction Point").

One :class:`RateLimiterRules` is one rate limiter's state machine.  It owns no clock and no
randomness: the caller injects ``clock()`` (seconds, monotonic) and ``uniform()`` (a float in
[0, 1)), and calls

- :meth:`on_cnm` for every CNM addressed to this limiter (``positive=True`` for an ECM CP's
  message with Fb > 0; with ``RpParams.positive_reinforcement``, three-point QCN, a QntzFb
  of 0 is a reflection point's "no congestion" and advances the limiter instead),
- :meth:`on_transmit` for every frame the limiter sent,
- :meth:`on_timer` when :attr:`timer_deadline` has passed (or :meth:`advance` to fire all
  expired timer cycles at once).

The daemon, the simulator and the tests all drive this same class, for every scheme of
``RpParams.scheme`` (``docs/schemes.md``):

- ``qcn``: the byte counter, plus the timer and HAI where the parameters enable them;
- ``2-qcn``: the byte counter alone (seed 000);
- ``timer-qcn``: the timer alone clocks FR, AI and HAI (seed 004);
- ``ecm``: AIMD on the signed feedback, a drift increase every Td (seed 004).

Seed 004's adaptive timer (``RpParams.adaptive_timer``) works with every timer-clocked scheme.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from qcn.core.params import QNTZ_FB_MAX, RpParams, RpScheme

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
        scheme = params.scheme
        self._byte_clocked = scheme in (RpScheme.QCN, RpScheme.TWO_QCN)
        """The byte counter clocks increases (QCN and 2-QCN)."""
        self._timer_clocked = scheme is RpScheme.TIMER_QCN or (
            scheme is RpScheme.QCN and params.timer_enabled
        )
        """The QCN timer clocks increases (full QCN and timer-only QCN)."""
        self._ecm = scheme is RpScheme.ECM
        self._hai = params.hai_enabled and scheme in (RpScheme.QCN, RpScheme.TIMER_QCN)
        self.timer_period_s = params.timer_s
        """T: the timer's base period (it moves only with the adaptive timer)."""
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
        """Congestion CNMs taken (positive reinforcements not counted)."""
        self.reinforcements = 0
        """Three-point QCN: CNMs with QntzFb 0 that advanced the limiter."""

    # -- state -----------------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        """FR/AI/HAI (ECM has no stages: it always reports FR)."""
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

    def on_cnm(self, qntz_fb: int, positive: bool = False) -> None:
        """A CNM carrying QntzFb (0..63): QCN's multiplicative decrease, or ECM's AIMD step
        (``positive``: the ECM CP's Fb > 0; QCN schemes ignore such a message)."""
        p = self.p
        if not 0 <= qntz_fb <= QNTZ_FB_MAX:
            raise ValueError(f"QntzFb must be in [0, {QNTZ_FB_MAX}], got {qntz_fb}")
        if self._ecm:
            self._ecm_feedback(qntz_fb, positive)
            return
        if positive:
            return  # QCN has no positive feedback
        if qntz_fb == 0 and p.positive_reinforcement:
            self._reinforce()
            return
        if p.adaptive_timer and self.timer_deadline is not None:
            # Dinged before the timer expired: a longer period (seed 004, "T + b or T * d").
            self._set_timer_period(self.timer_period_s * p.timer_cnm_factor + p.timer_cnm_step_s)
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
        if self._timer_clocked:
            self.timer_deadline = self._clock() + self._timer_cycle()

    def _reinforce(self) -> None:
        """Three-point QCN's positive reinforcement (seed 003): the cycles running end now,
        as if they had expired, with one increase step (docs/qcn.md, "QntzFb 0").
        A limiter never cut has nothing to recover."""
        if self.cnms == 0:
            return
        self.reinforcements += 1
        if self._byte_clocked:
            self.byte_stage += 1
            self.bytes_left = self._byte_cycle()
        if self._timer_clocked:
            self.time_stage += 1
            self.timer_deadline = self._clock() + self._timer_cycle()
        self._increase()

    def _ecm_feedback(self, qntz_fb: int, positive: bool) -> None:
        """ECM: r += Gi * Fb * Ru on Fb > 0, r *= 1 - Gd * |Fb| on Fb < 0, in seed 004's
        units (QntzFb back to pages by ``ecm_fb_max``); each message restarts the drift."""
        p = self.p
        fb = qntz_fb * p.ecm_fb_max / QNTZ_FB_MAX
        if positive:
            if self.cnms == 0:
                return  # never throttled: nothing to increase
            rate = self.current_rate_bps + p.ecm_gi * fb * p.ecm_ru_bps
        else:
            rate = self.current_rate_bps * (1 - p.ecm_gd * fb)
        self.cnms += 1
        self.current_rate_bps = min(p.line_rate_bps, max(p.min_rate_bps, rate))
        self.target_rate_bps = self.current_rate_bps
        self.frames_since_cnm = 0
        self.timer_deadline = self._clock() + p.ecm_td_s

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:
        """Count ``frames`` sent frames of ``nbytes`` in all; may end a byte-counter cycle."""
        self.frames_since_cnm += frames
        if self.p.fb_hat:
            self._frames_since_fb_hat_halving += frames
            while self._frames_since_fb_hat_halving >= FB_HAT_HALVING_FRAMES:
                self._frames_since_fb_hat_halving -= FB_HAT_HALVING_FRAMES
                self.fb_hat >>= 1
        if self.cnms == 0 or not self._byte_clocked:
            return  # never throttled, or no byte counter: no cycles to clock
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
        """One more timer stage; the next cycle (shorter after FR) starts at ``next_starts``.
        ECM: one drift step of Rd."""
        p = self.p
        if self._ecm:
            self.current_rate_bps = min(p.line_rate_bps, self.current_rate_bps + p.ecm_rd_bps)
            self.target_rate_bps = self.current_rate_bps
            self.timer_deadline = next_starts + p.ecm_td_s
            return
        if p.adaptive_timer:
            # Expired without a CNM: a shorter period (seed 004, "T - a or T * c").
            self._set_timer_period(
                self.timer_period_s * p.timer_expiry_factor - p.timer_expiry_step_s
            )
        self.time_stage += 1
        self.timer_deadline = next_starts + self._timer_cycle()
        self._increase()

    def _set_timer_period(self, period_s: float) -> None:
        span = self.p.adaptive_timer_span
        self.timer_period_s = min(self.p.timer_s * span, max(self.p.timer_s / span, period_s))

    # -- the rules -------------------------------------------------------------------------

    @property
    def _hai_stages(self) -> int:
        """The stage count HAI goes by: the lower of the two clocks' (timer-only QCN: the
        timer stands for both)."""
        if not self._byte_clocked:
            return self.time_stage
        return min(self.byte_stage, self.time_stage)

    def _hyper_active(self) -> bool:
        """HAI: both clocks past FR and 500 frames sent since the last CNM (seed 004)."""
        return (
            self._hai
            and self._hai_stages > self.p.fast_recovery_th
            and self.frames_since_cnm >= self.p.hai_min_frames
        )

    def _increase(self) -> None:
        p = self.p
        th = p.fast_recovery_th
        if self._hyper_active():
            self.target_rate_bps += p.r_hai_bps * (self._hai_stages - th)
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
        period = self.timer_period_s
        if p.shorten_cycles_after_fr and self.time_stage >= p.fast_recovery_th:
            period /= 2
        return period * self._jitter()
