"""Congestion Point reference model: the P4 pipeline's per-port computation, in its integers.

This is the oracle for the PTF tests and the CP of the simulator.  Each step names the
P4 statement it mirrors (``p4src/control/congestion_point.p4``).  The encoding of
parameters into data-plane integers (:class:`CpPortConfig.from_params`) is the one the
controller writes into the ``cp_config`` table, so there is one encoder for both.

Per data frame on a CP-enabled egress port::

    qoff    = q - q_eq
    qdelta  = q - q_old
    fb_fp   = -(qoff * 2^4 + w_fixed * qdelta)            # = 16 * Fb
    QntzFb  = 0 if fb_fp >= 0 else (min(-fb_fp, fbmax_fixed) * fb_multiplier) >> 48
    sampled = Bernoulli(p_base + QntzFb * p_scale)    or byte-interval counter ran out
    on a sample: q_old = q; a CNM iff fb_fp < 0
    ECM's CP (positive_feedback): also a message iff fb_fp > 0, flagged positive, its
    QntzFb the same quantisation of +Fb (the sampling still uses the negative QntzFb)

The pipeline computes the feedback only for frames its first stage cannot rule out (a
Bernoulli draw below ``p_max``, or the byte counter running out); the decisions are the
same as computing it for every frame, which is what this model does, so every frame's
Fb is available to the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from qcn.core.params import (
    ECN_SLOPE_SHIFT,
    PROB_ONE,
    QNTZ_FB_MAX,
    QNTZ_SHIFT,
    W_ONE,
    CpJudge,
    CpParams,
    CpSignal,
    QueueDepth,
    SamplingMode,
)

#: ``random(lo, hi)`` with both bounds included, as v1model's ``random()`` draws.
RandomInt = Callable[[int, int], int]

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


@dataclass(frozen=True)
class SampleInterval:
    """One row of the byte-interval table: reload = base - jitter_span/2 + random(0, span)."""

    base_bytes: int
    jitter_span_bytes: int


@dataclass(frozen=True)
class CpPortConfig:
    """The action parameters of one ``cp_config`` table entry (data-plane integers)."""

    q_eq: int
    """In the port's queue unit (packets or bytes)."""
    w_fixed: int
    fbmax_fixed: int
    fb_multiplier: int
    p_base_fixed: int
    p_scale_fixed: int
    sampling: SamplingMode
    intervals: tuple[SampleInterval, ...]
    depth_at: QueueDepth
    judge_dropped: bool = True
    """The arrival CP judges the frames its buffer then drops too (``cp.judge``)."""
    positive_feedback: bool = False
    """ECM's CP: messages for Fb > 0 too."""
    three_point: bool = False
    """Seed 003's three-point mode (the Fb tag, reflection)."""
    reflect_p_base_fixed: int = PROB_ONE
    reflect_p_scale_fixed: int = 0
    p0_fixed: int = 0
    """The end reflection point's probability of reflecting Fb = 0."""
    signal: CpSignal = CpSignal.CNM
    """What the port signals with (CNMs, ECN marks or nothing); a port that sends no CNM
    samples nothing (its sampling probabilities are 0)."""
    kmin_bytes: int = 0
    kmax_bytes: int = 1
    ecn_slope: int = 0
    """ECN marking's ramp: the mark threshold added per byte of queue above kmin, times
    2^ECN_SLOPE_SHIFT (:func:`ecn_mark_threshold`)."""

    @property
    def p_max_fixed(self) -> int:
        """The largest sampling threshold (QntzFb = 63): the pipeline's stage-1 bound."""
        return sample_threshold(QNTZ_FB_MAX, self)

    @classmethod
    def from_params(cls, cp: CpParams) -> CpPortConfig:
        cp.validate()
        if cp.signal is not CpSignal.CNM:
            # Only QCN's CP samples: DCQCN's port and a silent one send no CNM.
            cp = replace(cp, sampling=SamplingMode.BERNOULLI, p_base=0.0, p_scale=0.0)
        w_fixed = round(cp.w * W_ONE)
        fbmax_fixed = (2 * w_fixed + W_ONE) * cp.q_eq
        return cls(
            q_eq=cp.q_eq,
            w_fixed=w_fixed,
            fbmax_fixed=fbmax_fixed,
            # ceil, not round: with it the shift gives floor(|Fb| * 63 / Fbmax) exactly.
            fb_multiplier=math.ceil(QNTZ_FB_MAX * (1 << QNTZ_SHIFT) / fbmax_fixed),
            p_base_fixed=round(cp.p_base * PROB_ONE),
            p_scale_fixed=round(cp.p_scale * PROB_ONE),
            sampling=cp.sampling,
            intervals=tuple(
                SampleInterval(n, 2 * math.floor(n * cp.sample_jitter))
                for n in cp.sample_intervals_bytes
            ),
            depth_at=cp.depth_at,
            judge_dropped=cp.judge is CpJudge.ARRIVALS,
            positive_feedback=cp.positive_feedback,
            three_point=cp.three_point,
            reflect_p_base_fixed=round(cp.reflect_p_base * PROB_ONE),
            reflect_p_scale_fixed=round(cp.reflect_p_scale * PROB_ONE),
            p0_fixed=round(cp.reflect_p0 * PROB_ONE),
            signal=cp.signal,
            kmin_bytes=cp.kmin_bytes,
            kmax_bytes=cp.kmax_bytes,
            ecn_slope=round(
                cp.pmax * PROB_ONE * (1 << ECN_SLOPE_SHIFT) / (cp.kmax_bytes - cp.kmin_bytes)
            ),
        )


class CpDecision(NamedTuple):
    """What the CP computed for one frame (a tuple: made once per frame, and cheap to make)."""

    q: int
    qoff: int
    qdelta: int
    fb_fp: int
    """16 * Fb (Fb = -(qoff + w * qdelta)); negative means congestion."""
    qntz_fb: int
    """QntzFb of the message: of -Fb (Fb < 0), or of +Fb for a positive ECM message."""
    sampled: bool
    positive: bool = False
    """An ECM CP's message for Fb > 0 (the CNM's fb_positive flag)."""

    @property
    def cnm(self) -> bool:
        """A CNM is sent for a sampled frame with Fb < 0 (or, ECM, flagged positive)."""
        return self.sampled and (self.fb_fp < 0 or self.positive)

    @property
    def fb(self) -> float:
        return self.fb_fp / W_ONE

    @property
    def cnm_qoff(self) -> int:
        """cnmQOffset as the 16-bit signed field carries it (saturated)."""
        return max(INT16_MIN, min(INT16_MAX, self.qoff))

    @property
    def cnm_qdelta(self) -> int:
        return max(INT16_MIN, min(INT16_MAX, self.qdelta))


def quantize(fb_fp: int, cfg: CpPortConfig) -> int:
    """QntzFb of a scaled feedback, by multiply-and-shift as the data plane does it."""
    if fb_fp >= 0:
        return 0
    return quantize_magnitude(-fb_fp, cfg)


def quantize_magnitude(magnitude: int, cfg: CpPortConfig) -> int:
    """QntzFb of |Fb| (scaled), saturated at Fbmax."""
    return min(QNTZ_FB_MAX, (min(magnitude, cfg.fbmax_fixed) * cfg.fb_multiplier) >> QNTZ_SHIFT)


def sample_threshold(qntz_fb: int, cfg: CpPortConfig) -> int:
    """Bernoulli mode: a frame is sampled iff random(0, PROB_ONE - 1) < this."""
    return cfg.p_base_fixed + qntz_fb * cfg.p_scale_fixed


class CongestionPoint:
    """The state and computation of one CP (one egress port)."""

    def __init__(self, cfg: CpPortConfig, rand: RandomInt) -> None:
        self.cfg = cfg
        self._rand = rand
        self._bernoulli = cfg.sampling is SamplingMode.BERNOULLI
        self._p_max_fixed = cfg.p_max_fixed
        self.q_old = 0
        """Register ``q_old``: q at the previous sample (0 after reset, as BMv2 registers)."""
        self.bytes_to_sample = 0
        """Register ``bytes_to_sample``: 0 after reset, so the first frame is sampled."""

    def reconfigure(self, cfg: CpPortConfig) -> None:
        """New parameters from the next frame on, as a modified ``cp_config`` entry takes
        effect in the pipeline: the registers (q_old, bytes_to_sample) keep their values."""
        self.cfg = cfg
        self._bernoulli = cfg.sampling is SamplingMode.BERNOULLI
        self._p_max_fixed = cfg.p_max_fixed

    def on_frame(self, q: int, frame_bytes: int) -> CpDecision:
        """Process one data frame; ``q`` is the queue depth it is judged by (in the port's
        unit): the queue it found on arrival, or on BMv2's departure CP the depth BMv2
        reports (``cfg.depth_at``).  Computes every frame's Fb."""
        if self._bernoulli:
            return self._judge(q, self._rand(0, PROB_ONE - 1))
        self.bytes_to_sample -= frame_bytes
        return self._judge(q, 0)

    def sample(self, q: int, frame_bytes: int) -> CpDecision | None:
        """The pipeline's two stages: None for a frame stage 1 rules out (a Bernoulli draw
        at or above p_max, or the byte counter not run out), which is not sampled and
        changes nothing else; otherwise :meth:`on_frame`'s decision.  The same draws and
        decisions as :meth:`on_frame`, for a tenth of the work (the simulator's path)."""
        if self._bernoulli:
            r = self._rand(0, PROB_ONE - 1)
            if r >= self._p_max_fixed:
                return None
            return self._judge(q, r)
        self.bytes_to_sample -= frame_bytes
        if self.bytes_to_sample > 0:
            return None
        return self._judge(q, 0)

    def _judge(self, q: int, r: int) -> CpDecision:
        """Stage 2: Fb, QntzFb, the sampling decision (draw ``r`` in Bernoulli mode) and
        the state a sample changes."""
        cfg = self.cfg
        qoff = q - cfg.q_eq
        qdelta = q - self.q_old
        fb_fp = -(qoff * W_ONE + cfg.w_fixed * qdelta)
        qntz = quantize(fb_fp, cfg)
        if self._bernoulli:
            sampled = r < sample_threshold(qntz, cfg)
        else:
            sampled = self.bytes_to_sample <= 0
            if sampled:
                row = cfg.intervals[qntz >> 3]
                self.bytes_to_sample = (
                    row.base_bytes
                    - row.jitter_span_bytes // 2
                    + self._rand(0, row.jitter_span_bytes)
                )
        if sampled:
            self.q_old = q
        if cfg.positive_feedback and fb_fp > 0:
            return CpDecision(
                q, qoff, qdelta, fb_fp, quantize_magnitude(fb_fp, cfg), sampled, positive=True
            )
        return CpDecision(q, qoff, qdelta, fb_fp, qntz, sampled)


# -- DCQCN's marking (p4src/control/ecn_marking.p4; docs/dcqcn.md, "The switch") -------------


def ecn_mark_threshold(q_bytes: int, cfg: CpPortConfig) -> int:
    """An ECN-capable frame that finds ``q_bytes`` in its port's queue is marked CE iff
    random(0, PROB_ONE - 1) is below this: 0 below kmin, the ramp up to pmax * PROB_ONE at
    kmax, PROB_ONE (every frame) above kmax."""
    if q_bytes > cfg.kmax_bytes:
        return PROB_ONE
    if q_bytes <= cfg.kmin_bytes:
        return 0
    return ((q_bytes - cfg.kmin_bytes) * cfg.ecn_slope) >> ECN_SLOPE_SHIFT


def ecn_marks(q_bytes: int, cfg: CpPortConfig, rand: RandomInt) -> bool:
    """Whether the port marks an ECN-capable frame finding ``q_bytes`` queued.  One draw,
    and only on the ramp (kmin < q <= kmax), where the outcome is not already known: the
    simulator and the pipeline draw alike."""
    if q_bytes > cfg.kmax_bytes:
        return True
    if q_bytes <= cfg.kmin_bytes:
        return False
    return rand(0, PROB_ONE - 1) < ecn_mark_threshold(q_bytes, cfg)


# -- three-point QCN (p4src/control/three_point.p4; docs/qcn.md, "Three-point QCN") ----------


class FbTag(NamedTuple):
    """The Fb tag a data frame carries between the edges (the scapy layer is
    :class:`qcn.core.frames.FbTagHeader`); a fresh tag is ``FbTag()``: Fb = 0."""

    reflected: bool = False
    qntz_fb: int = 0
    cpid: int = 0
    qoff: int = 0
    qdelta: int = 0


def reflect_threshold(qntz_fb: int, cfg: CpPortConfig) -> int:
    """A negative Fb is reflected iff random(0, PROB_ONE - 1) < this (CP and end alike)."""
    return cfg.reflect_p_base_fixed + qntz_fb * cfg.reflect_p_scale_fixed


def overwrite_fb_tag(
    decision: CpDecision, tag: FbTag, cfg: CpPortConfig, cpid: int, rand: RandomInt
) -> FbTag:
    """A three-point CP on one frame (congestion_point.p4's overwrite_fb_tag): a sampled
    Fb < 0 with a larger QntzFb than the tag's takes the tag over, reflected by this CP
    (its CNM sent, the bit set) iff a draw is below :func:`reflect_threshold`.  Anything
    else leaves the tag as it was, and the CP sends nothing."""
    if not (decision.sampled and decision.fb_fp < 0 and decision.qntz_fb > tag.qntz_fb):
        return tag
    reflected = rand(0, PROB_ONE - 1) < reflect_threshold(decision.qntz_fb, cfg)
    return FbTag(reflected, decision.qntz_fb, cpid, decision.cnm_qoff, decision.cnm_qdelta)


def end_reflection(tag: FbTag, cfg: CpPortConfig, cpid: int, rand: RandomInt) -> FbTag | None:
    """The end reflection point (three_point.p4's reflect_fb): the tag its CNM carries, or
    None.  Reflected already: nothing; Fb < 0: with :func:`reflect_threshold`, under the
    measuring CP's CPID; Fb = 0: with P0, under this port's CPID.  One draw per frame."""
    below = cfg.p0_fixed if tag.qntz_fb == 0 else reflect_threshold(tag.qntz_fb, cfg)
    r = rand(0, PROB_ONE - 1)
    if tag.reflected or r >= below:
        return None
    return tag if tag.qntz_fb else tag._replace(cpid=cpid)
