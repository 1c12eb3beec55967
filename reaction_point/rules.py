"""The QCN Reaction Point rate rules, as pure code (``docs/qcn.md``, "Reaction Point").

One :class:`RateLimiterRules` is one rate limiter's state machine.  It owns no clock and no
randomness: the caller injects ``clock()`` (seconds, monotonic) and ``uniform()`` (a float in
[0, 1)), and calls

- :meth:`~RateLimiterRules.on_cnm` for every CNM addressed to this limiter
  (``positive=True`` for an ECM CP's message with Fb > 0; with
  ``RpParams.positive_reinforcement``, three-point QCN, a QntzFb of 0 is a reflection
  point's "no congestion" and advances the limiter instead),
- :meth:`~RateLimiterRules.on_transmit` for every frame the limiter sent,
- :meth:`~RateLimiterRules.on_timer` when ``timer_deadline`` has passed (or
  :meth:`~RateLimiterRules.advance` to fire all expired timer cycles at once).

The daemon, the simulator and the tests all construct ``RateLimiterRules(params, clock,
uniform)``, and get the class of the scheme ``params.scheme`` names: each scheme is one
subclass, registered under its name (``class EcmRules(RateLimiterRules, scheme="ecm")``),
so that no rule asks which scheme it runs (``docs/schemes.md``, ``docs/extending.md``):

- ``qcn`` (:class:`QcnRules`): the byte counter, plus the timer and HAI where the
  parameters enable them;
- ``2-qcn`` (:class:`TwoQcnRules`): the byte counter alone (seed 000);
- ``timer-qcn`` (:class:`TimerQcnRules`): the timer alone clocks FR, AI and HAI (seed 004);
- ``ecm`` (:class:`EcmRules`): AIMD on the signed feedback, a drift increase every Td;
- ``dcqcn`` (:class:`DcqcnRules`): a CNP cuts by alpha/2, alpha decays without one; QCN's
  byte counter and timer raise the rate.

The QCN schemes' variants are parts chosen once, when a limiter is made: Fb-hat's cycle
lengths (:class:`FbHatCycles`, seed 000) and seed 004's adaptive timer
(:class:`AdaptiveTimer`) work with every QCN scheme they apply to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from qcn.core.params import (
    QNTZ_FB_MAX,
    DcqcnParams,
    EcmParams,
    RpParams,
    RpScheme,
    SchemeName,
    scheme_def,
)

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


#: The rules class of every scheme, by name (filled by subclassing RateLimiterRules).
RULES: dict[SchemeName, type[RateLimiterRules]] = {}


def rules_class(name: SchemeName) -> type[RateLimiterRules]:
    """The rules of the scheme ``name``."""
    try:
        return RULES[str(name)]
    except KeyError:
        raise ValueError(f"no rate rules for the scheme {name!r} (known: {list(RULES)})") from None


class RateLimiterRules:
    """One rate limiter's state (CR, TR, the clocks' stages) and the events it takes.

    ``RateLimiterRules(params, clock, uniform)`` builds the rules of ``params.scheme``: the
    subclass registered under that name.  A subclass names its scheme as a class keyword
    (``scheme="ecm"``), which must be a scheme of :data:`qcn.core.params.SCHEMES`, and
    overrides the events its scheme handles its own way: :meth:`_feedback` (a CNM),
    :meth:`on_transmit` and :meth:`_end_timer_cycle`, and :meth:`_setup` to take what it
    needs of its parameters.
    """

    scheme: ClassVar[SchemeName] = ""
    """The scheme these rules are (set by the class keyword)."""

    def __init_subclass__(cls, scheme: SchemeName = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not scheme:
            return
        scheme_def(scheme)  # defined in qcn.core.params first: its name and parameters
        if scheme in RULES:
            raise ValueError(f"the scheme {scheme!r} has its rules already ({RULES[scheme]})")
        cls.scheme = scheme
        RULES[scheme] = cls

    def __new__(
        cls, params: RpParams | None = None, *_args: object, **_kwargs: object
    ) -> RateLimiterRules:
        """The rules of ``params.scheme`` (constructed as any class: the caller needs no
        table of schemes).  Without ``params`` (copy and pickle make an instance so) the
        class is the one asked for."""
        kind = rules_class(params.scheme) if cls is RateLimiterRules and params else cls
        return super().__new__(kind)

    def __init__(
        self,
        params: RpParams,
        clock: Callable[[], float],
        uniform: Callable[[], float],
    ) -> None:
        self.p = params
        self._clock = clock
        self._uniform = uniform
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
        self.cnms = 0
        """Congestion CNMs taken (positive reinforcements not counted)."""
        self.reinforcements = 0
        """Three-point QCN: CNMs with QntzFb 0 that advanced the limiter."""
        self._setup(params)

    def _setup(self, params: RpParams) -> None:
        """What the scheme takes from its parameters, once, when a limiter is made (the
        shared state above is set by then)."""

    # -- state -----------------------------------------------------------------------------

    @property
    def stage(self) -> Stage:
        """FR/AI/HAI (a scheme without stages, as ECM, always reports FR)."""
        th = self.p.fast_recovery_th
        if self._hyper_active():
            return Stage.HYPER_ACTIVE_INCREASE
        if self.byte_stage > th or self.time_stage > th:
            return Stage.ACTIVE_INCREASE
        return Stage.FAST_RECOVERY

    @property
    def fb_hat(self) -> int:
        """Seed 000's Fb-hat counter (0 where the scheme keeps none)."""
        return 0

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
        """A CNM carrying QntzFb (0..63); ``positive``: an ECM CP's message with Fb > 0."""
        if not 0 <= qntz_fb <= QNTZ_FB_MAX:
            raise ValueError(f"QntzFb must be in [0, {QNTZ_FB_MAX}], got {qntz_fb}")
        self._feedback(qntz_fb, positive)

    def _feedback(self, qntz_fb: int, positive: bool) -> None:
        """The scheme's answer to a CNM (QntzFb already checked)."""
        raise NotImplementedError

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:  # noqa: ARG002
        """Count ``frames`` sent frames of ``nbytes`` in all (a scheme with a byte counter
        counts the bytes too, and may end its cycle)."""
        self.frames_since_cnm += frames

    def on_timer(self) -> None:
        """The timer cycle ended: the scheme's timer step."""
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
        """The timer cycle ended; the next one starts at ``next_starts``."""
        raise NotImplementedError

    def _hyper_active(self) -> bool:
        return False

    def _jitter(self) -> float:
        j = self.p.jitter
        return 1.0 - j + 2.0 * j * self._uniform()


# -- the QCN schemes' variable parts --------------------------------------------------------


class ByteCycles:
    """Byte-counter cycles of BC_LIMIT bytes (the spec's)."""

    fb_hat = 0

    def __init__(self, params: RpParams) -> None:
        self.limit_bytes = float(params.bc_limit_bytes)

    def on_cnm(self, qntz_fb: int) -> None:
        """A cut of ``qntz_fb`` (nothing to count here)."""

    def sent(self, frames: int) -> None:
        """``frames`` more frames sent (nothing to count here)."""

    def cycle_bytes(self) -> float:
        return self.limit_bytes


class FbHatCycles(ByteCycles):
    """Seed 000's Fb-hat: cycles of 50 frames while the recent feedback is small, else 100.
    Fb-hat adds each CNM's QntzFb (saturating at 31) and halves every 50 frames sent."""

    def __init__(self, params: RpParams) -> None:
        super().__init__(params)
        self.frame_bytes = params.frame_bytes
        self.fb_hat = 0
        self._frames_since_halving = 0

    def on_cnm(self, qntz_fb: int) -> None:
        self.fb_hat = min(FB_HAT_MAX, self.fb_hat + qntz_fb)

    def sent(self, frames: int) -> None:
        self._frames_since_halving += frames
        while self._frames_since_halving >= FB_HAT_HALVING_FRAMES:
            self._frames_since_halving -= FB_HAT_HALVING_FRAMES
            self.fb_hat >>= 1

    def cycle_bytes(self) -> float:
        frames = 50 if self.fb_hat <= FB_HAT_SHORT_CYCLE_MAX else 100
        return float(frames * self.frame_bytes)


class FixedTimer:
    """The timer's period T stays what the parameters say."""

    def after_expiry(self, period_s: float) -> float:
        return period_s

    def after_cnm(self, period_s: float) -> float:
        return period_s


class AdaptiveTimer(FixedTimer):
    """Seed 004's adaptive timer: T * c - a after an expiry, T * d + b after a CNM that came
    before expiry, within [T0 / span, T0 * span] (``docs/schemes.md``)."""

    def __init__(self, params: RpParams) -> None:
        self.p = params

    def after_expiry(self, period_s: float) -> float:
        return self._bounded(period_s * self.p.timer_expiry_factor - self.p.timer_expiry_step_s)

    def after_cnm(self, period_s: float) -> float:
        return self._bounded(period_s * self.p.timer_cnm_factor + self.p.timer_cnm_step_s)

    def _bounded(self, period_s: float) -> float:
        span = self.p.adaptive_timer_span
        return min(self.p.timer_s * span, max(self.p.timer_s / span, period_s))


# -- the schemes ------------------------------------------------------------------------------


class QcnRules(RateLimiterRules, scheme=RpScheme.QCN):
    """802.1Qau QCN: a CNM cuts CR by Gd * QntzFb; the byte counter, and the timer where
    ``rp.timer_enabled``, clock fast recovery, active increase and (``rp.hai_enabled``)
    hyper-active increase."""

    def _setup(self, params: RpParams) -> None:
        """The variants this limiter runs, chosen once."""
        self._cycles = FbHatCycles(params) if params.fb_hat else ByteCycles(params)
        self._period = AdaptiveTimer(params) if params.adaptive_timer else FixedTimer()
        self._reinforces = params.positive_reinforcement
        self._hai = params.hai_enabled

    @property
    def fb_hat(self) -> int:
        return self._cycles.fb_hat

    def _timer_runs(self) -> bool:
        """Whether the timer clocks increases (full QCN: where the parameters enable it)."""
        return self.p.timer_enabled

    def _feedback(self, qntz_fb: int, positive: bool) -> None:
        """QCN's multiplicative decrease (a positive message is not QCN's: ignored)."""
        p = self.p
        if positive:
            return  # QCN has no positive feedback
        if qntz_fb == 0 and self._reinforces:
            self._reinforce()
            return
        if self.timer_deadline is not None:
            # Dinged before the timer expired (seed 004's adaptive timer: T + b or T * d).
            self.timer_period_s = self._period.after_cnm(self.timer_period_s)
        self.cnms += 1
        # Extra fast recovery: a CNM during the first FR cycle keeps TR.
        if self.byte_stage != 0:
            self.target_rate_bps = self.current_rate_bps
        self.current_rate_bps = max(p.min_rate_bps, self.current_rate_bps * (1 - p.gd * qntz_fb))
        self.byte_stage = 0
        self.time_stage = 0
        self.frames_since_cnm = 0
        self._cycles.on_cnm(qntz_fb)
        self.bytes_left = self._byte_cycle()
        if self._timer_runs():
            self.timer_deadline = self._clock() + self._timer_cycle()

    def _reinforce(self) -> None:
        """Three-point QCN's positive reinforcement (seed 003): the cycles running end now,
        as if they had expired, with one increase step (docs/qcn.md, "QntzFb 0").
        A limiter never cut has nothing to recover."""
        if self.cnms == 0:
            return
        self.reinforcements += 1
        self._restart_byte_counter()
        if self._timer_runs():
            self.time_stage += 1
            self.timer_deadline = self._clock() + self._timer_cycle()
        self._increase()

    def _restart_byte_counter(self) -> None:
        """One more byte-counter stage, a new cycle (a reinforcement's, as an expiry's)."""
        self.byte_stage += 1
        self.bytes_left = self._byte_cycle()

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:
        """Count ``frames`` sent frames of ``nbytes`` in all; may end a byte-counter cycle."""
        self.frames_since_cnm += frames
        self._cycles.sent(frames)
        if self.cnms == 0:
            return  # never throttled: no cycles to clock
        self.bytes_left -= nbytes
        if self.bytes_left < 0:
            self.byte_stage += 1
            self.bytes_left = self._byte_cycle()
            self._increase()

    def _end_timer_cycle(self, next_starts: float) -> None:
        """One more timer stage; the next cycle (shorter after FR) starts at ``next_starts``."""
        # Expired without a CNM (seed 004's adaptive timer: T - a or T * c).
        self.timer_period_s = self._period.after_expiry(self.timer_period_s)
        self.time_stage += 1
        self.timer_deadline = next_starts + self._timer_cycle()
        self._increase()

    # -- the rules -------------------------------------------------------------------------

    @property
    def _hai_stages(self) -> int:
        """The stage count HAI goes by: the lower of the two clocks'."""
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

    def _byte_cycle(self) -> float:
        p = self.p
        limit = self._cycles.cycle_bytes()
        if p.shorten_cycles_after_fr and self.byte_stage >= p.fast_recovery_th:
            limit /= 2
        return limit * self._jitter()

    def _timer_cycle(self) -> float:
        p = self.p
        period = self.timer_period_s
        if p.shorten_cycles_after_fr and self.time_stage >= p.fast_recovery_th:
            period /= 2
        return period * self._jitter()


class TwoQcnRules(QcnRules, scheme=RpScheme.TWO_QCN):
    """Seed 000's 2-QCN: the byte counter alone clocks FR and AI; no timer, no HAI."""

    def _timer_runs(self) -> bool:
        return False

    def _hyper_active(self) -> bool:
        return False


class TimerQcnRules(QcnRules, scheme=RpScheme.TIMER_QCN):
    """Seed 004's timer-only QCN: the timer alone clocks FR, AI and HAI; the byte counter
    does not count (``docs/schemes.md``, "Timer-only QCN")."""

    def _timer_runs(self) -> bool:
        return True

    def _restart_byte_counter(self) -> None:
        """No byte counter: a reinforcement steps the timer alone."""

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:
        """Frames are counted (for HAI and Fb-hat), bytes not."""
        RateLimiterRules.on_transmit(self, nbytes, frames)
        self._cycles.sent(frames)

    @property
    def _hai_stages(self) -> int:
        """With one clock, the timer stands for both."""
        return self.time_stage


class EcmRules(RateLimiterRules, scheme=RpScheme.ECM):
    """ECM, BCN's successor (seed 004): r += Gi * Fb * Ru on Fb > 0, r *= 1 - Gd * |Fb| on
    Fb < 0, and a drift of Rd every Td without a message (``docs/schemes.md``, "ECM")."""

    def _setup(self, params: RpParams) -> None:
        self.ecm = params.own(EcmParams)

    def _feedback(self, qntz_fb: int, positive: bool) -> None:
        """AIMD in seed 004's units (QntzFb back to pages by ``fb_max``); each message
        restarts the drift."""
        p, ecm = self.p, self.ecm
        fb = qntz_fb * ecm.fb_max / QNTZ_FB_MAX
        if positive:
            if self.cnms == 0:
                return  # never throttled: nothing to increase
            rate = self.current_rate_bps + ecm.gi * fb * ecm.ru_bps
        else:
            rate = self.current_rate_bps * (1 - ecm.gd * fb)
        self.cnms += 1
        self.current_rate_bps = min(p.line_rate_bps, max(p.min_rate_bps, rate))
        self.target_rate_bps = self.current_rate_bps
        self.frames_since_cnm = 0
        self.timer_deadline = self._clock() + ecm.td_s

    def _end_timer_cycle(self, next_starts: float) -> None:
        """One drift step of Rd."""
        self.current_rate_bps = min(self.p.line_rate_bps, self.current_rate_bps + self.ecm.rd_bps)
        self.target_rate_bps = self.current_rate_bps
        self.timer_deadline = next_starts + self.ecm.td_s


class DcqcnRules(RateLimiterRules, scheme=RpScheme.DCQCN):
    """DCQCN's reaction point (Zhu et al., SIGCOMM 2015; ``docs/dcqcn.md``).

    Each notification is a CNP (its QntzFb, if any, is not read):
    TR = CR, CR *= 1 - alpha / 2 (never below MIN_RATE), then alpha = (1 - g) * alpha + g;
    both clocks' stages to 0, a new byte-counter cycle and timer cycle.  alpha decays,
    alpha = (1 - g) * alpha, once every K (``alpha_timer_s``) after the last CNP without
    another; the decays are applied when alpha is next read, all at once ((1 - g)^n), which
    is the paper's timer without an event every K for every limiter.

    The increase is QCN's: each byte-counter cycle (``bc_limit_bytes``, counted once cut)
    and each timer cycle (``timer_s``, where ``timer_enabled``) ends with one stage more on
    its clock and a step: fast recovery while neither clock is past F (TR kept), active
    increase (TR += R_AI) while one is, hyper-active (TR += R_HAI * (min - F), where
    ``hai_enabled``) once both are; then CR = min((CR + TR) / 2, line rate).  A byte cycle
    ends when its count reaches 0 or less; cycles are drawn within ``jitter`` as QCN's.
    """

    def _setup(self, params: RpParams) -> None:
        own = params.own(DcqcnParams)
        self._g = own.g
        self._alpha_period_s = own.alpha_timer_s
        self._alpha = own.alpha_initial
        self._alpha_since: float | None = None
        """When the alpha timer last restarted (a CNP); None: never cut, alpha as set."""

    @property
    def alpha(self) -> float:
        """alpha now, the decays since the last CNP applied."""
        return self._alpha_at(self._clock())

    def _alpha_at(self, now: float) -> float:
        if self._alpha_since is None:
            return self._alpha
        decays = math.floor((now - self._alpha_since) / self._alpha_period_s)
        return self._alpha * (1.0 - self._g) ** decays if decays > 0 else self._alpha

    def _feedback(self, qntz_fb: int, positive: bool) -> None:  # noqa: ARG002
        p = self.p
        now = self._clock()
        alpha = self._alpha_at(now)
        self.cnms += 1
        self.target_rate_bps = self.current_rate_bps
        self.current_rate_bps = max(p.min_rate_bps, self.current_rate_bps * (1 - alpha / 2))
        self._alpha = (1 - self._g) * alpha + self._g
        self._alpha_since = now
        self.byte_stage = 0
        self.time_stage = 0
        self.frames_since_cnm = 0
        self.bytes_left = p.bc_limit_bytes * self._jitter()
        if p.timer_enabled:
            self.timer_deadline = now + p.timer_s * self._jitter()

    def on_transmit(self, nbytes: int, frames: int = 1) -> None:
        """Count ``frames`` sent frames of ``nbytes`` in all; may end a byte-counter cycle."""
        self.frames_since_cnm += frames
        if self.cnms == 0:
            return  # never cut: no cycles to clock
        self.bytes_left -= nbytes
        if self.bytes_left <= 0:
            self.byte_stage += 1
            self.bytes_left = self.p.bc_limit_bytes * self._jitter()
            self._increase()

    def _end_timer_cycle(self, next_starts: float) -> None:
        self.time_stage += 1
        self.timer_deadline = next_starts + self.p.timer_s * self._jitter()
        self._increase()

    def _hyper_active(self) -> bool:
        return self.p.hai_enabled and min(self.byte_stage, self.time_stage) > (
            self.p.fast_recovery_th
        )

    def _increase(self) -> None:
        p = self.p
        th = p.fast_recovery_th
        if self._hyper_active():
            self.target_rate_bps += p.r_hai_bps * (min(self.byte_stage, self.time_stage) - th)
        elif self.byte_stage > th or self.time_stage > th:
            self.target_rate_bps += p.r_ai_bps
        self.current_rate_bps = min(
            (self.current_rate_bps + self.target_rate_bps) / 2, p.line_rate_bps
        )
