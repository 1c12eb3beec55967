"""QCN parameters: every default of the spec's table, defined once, with units in the names.

A parameter set is plain data (frozen dataclasses) that round-trips through TOML::

    [cp]                      # congestion point, per egress port
    q_eq_pkts = 22
    w = 2.0
    ...
    [rp]                      # reaction point, per rate limiter
    line_rate_bps = 10e9
    ...

Sources: seeds 002 and 004 unless a field's docstring says otherwise (see
``docs/qcn.md``, "Defaults").  Validation names the field and the allowed range.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import tomli_w

from qcn.core.errors import QcnError
from qcn.core.publish import write_atomic
from qcn.core.tomlfile import read_toml
from qcn.core.units import plain, rate, rate_text, seconds, size, volume

#: Frame size of every seed's workload (bytes).  q_eq = 33 KB = 22 frames of this size.
SEED_FRAME_BYTES = 1500

#: QntzFb is a 6-bit field: 0..63.
QNTZ_FB_MAX = 63
TIMER_MAX_S = 60.0
"""The longest timer cycle a parameter set takes (rp.timer_s)."""
PAUSE_QUANTUM_BITS = 512
"""802.3x: a pause quantum is the time of 512 bits at the link's rate (here, not with the
frame in qcn.core.frames, so that the simulator needs no scapy)."""
PAUSE_QUANTA_MAX = 0xFFFF

#: DCQCN's marking curve (Zhu et al., SIGCOMM 2015, its parameter table; docs/dcqcn.md).
DCQCN_KMIN_BYTES = 5_000
DCQCN_KMAX_BYTES = 200_000
DCQCN_PMAX = 0.01
ECN_QUEUE_MAX_BYTES = 1 << 24
"""The deepest queue a marking threshold may name (16 MB): the pipeline's ramp arithmetic
stays within 64 bits below it (``ECN_SLOPE_SHIFT``)."""

#: The 802.1Qau byte-interval sampling table, indexed by QntzFb >> 3 (bytes; 1 KB = 1000 B).
STANDARD_SAMPLE_INTERVALS_BYTES: tuple[int, ...] = (
    150_000,
    75_000,
    50_000,
    37_500,
    30_000,
    25_000,
    21_500,
    18_500,
)


class ParamError(QcnError, ValueError):
    """A parameter value outside its allowed range; ``field`` names it (e.g. ``cp.q_eq_pkts``)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


class SamplingMode(StrEnum):
    """How a CP picks the frames it samples."""

    BERNOULLI = "bernoulli"
    """Seeds 002/003: each frame with probability p_base + QntzFb * p_scale."""
    BYTE_INTERVAL = "byte-interval"
    """802.1Qau standard (seed 004): every N bytes, N from the interval table by QntzFb >> 3."""


class QueueDepth(StrEnum):
    """Which queue depth a CP takes as q, and so which frames it judges.

    The standard's CP (and the seeds') samples arriving frames against the queue they find:
    ``arrival``, for which the pipeline counts each CP port's queue itself.  BMv2 shows its
    own queue only in egress, as a frame leaves it: ``enqueue`` and ``dequeue`` judge
    departing frames, up to a queueing delay later, by BMv2's depths (for comparison).
    """

    ARRIVAL = "arrival"
    """The pipeline's count of the port's queue as the frame arrives (the standard's CP):
    judged in ingress, in packets or bytes (``queue_unit``)."""
    ENQUEUE = "enqueue"
    """standard_metadata.enq_qdepth: the depth this frame found on arrival (the spec's q)."""
    DEQUEUE = "dequeue"
    """standard_metadata.deq_qdepth: the depth it leaves behind, i.e. the queue now.  With a
    deep queue the enqueue depth is a queueing delay old by the time the CNM goes out, so
    the CP keeps signalling a full queue after the sources have cut (see
    scenarios/transient.toml)."""


class CpJudge(StrEnum):
    """Which arriving frames the arrival CP judges (docs/qcn.md, "Which frames the CP
    judges")."""

    ARRIVALS = "arrivals"
    """Every arriving data frame, the ones its buffer then drops included: the CP sees the
    load offered to its port, as htsim's QcnQueue does and as the seeds' "1 sample every
    150 KB" of arriving traffic reads.  Where the buffer is full, this is what keeps the
    CNMs coming at the arrival rate rather than the drain rate."""
    ADMITTED = "admitted"
    """Only the frames its buffer admits (for comparison): a full buffer's CP then hears
    arrivals at the rate the port drains, and can lose control of a port fed far faster
    than it drains (docs/experiments.md, "When control is lost")."""


class QueueUnit(StrEnum):
    """What q, q_eq and Fb count (the arrival CP; BMv2's own depths count packets)."""

    BYTES = "bytes"
    """802.1Qau's and the seeds' unit: q_eq = 33 KB."""
    PACKETS = "packets"
    """Frames: the same decisions as bytes when every frame is 1500 bytes."""


class CpSignal(StrEnum):
    """What a CP port signals congestion with (``docs/dcqcn.md``, "The switch"): a port
    runs QCN's CP, DCQCN's marking or neither, chosen per port."""

    CNM = "cnm"
    """QCN's CP (and ECM's, three-point's): sampled frames, a CNM to each one's source."""
    ECN = "ecn"
    """DCQCN's congestion point: ECN-capable IPv4 frames marked CE with a probability that
    rises linearly from 0 at kmin_bytes to pmax at kmax_bytes of the port's queue (every
    frame above kmax_bytes); the receiver's notification point answers with CNPs."""
    NONE = "none"
    """Neither: the queue is still counted (and measured), nothing is signalled."""


class RpScheme(StrEnum):
    """The names of the reaction point's built-in schemes (``docs/schemes.md``): each is
    defined once, in :data:`SCHEMES`, and its rules are one class of
    ``reaction_point/rules.py``."""

    QCN = "qcn"
    TWO_QCN = "2-qcn"
    TIMER_QCN = "timer-qcn"
    ECM = "ecm"
    DCQCN = "dcqcn"


#: A scheme's name as a parameter file, a scenario and the command line spell it
#: (``rp.scheme``, ``qcn_preset``, ``--preset``): a key of :data:`SCHEMES`.
SchemeName: TypeAlias = str


@dataclass(frozen=True)
class SchemeParams:
    """The parameters a scheme has of its own, beside the reaction point's shared ones.

    A subclass is a frozen dataclass of numbers, whole numbers and booleans; a parameter
    file holds it as the table ``[rp.NAME]`` and a scenario override spells a field
    ``qcn.rp.NAME.FIELD``.  Kept apart from :class:`RpParams`' flat fields so that a new
    scheme brings its parameters with it instead of adding fields every other scheme
    ignores (ECM's six were flat ``ecm_*`` fields)."""

    def validate(self, where: str, rp: RpParams) -> None:
        """Raise :class:`ParamError` naming ``where.FIELD`` for a value out of range
        (``rp``: the reaction point's shared parameters, for bounds that depend on them)."""


P = TypeVar("P", bound=SchemeParams)


@dataclass(frozen=True)
class CpParams:
    """Congestion-point parameters of one egress port."""

    q_eq_pkts: int = size(22)
    """Equilibrium queue depth, packets (33 KB of 1500 B frames; seed 001 used 26 KB)."""
    w: float = plain(2.0)
    """Weight of qdelta in Fb = -(qoff + w * qdelta); a multiple of 1/16 (fixed point)."""
    p_base: float = plain(0.01)
    """Bernoulli sampling probability at QntzFb = 0."""
    p_scale: float = plain(0.09 / 64)
    """Added sampling probability per QntzFb step (about 10 % in all at QntzFb = 63)."""
    sampling: SamplingMode = SamplingMode.BERNOULLI
    """Sampling mode: the seeds' Bernoulli or the standard's byte interval."""
    sample_intervals_bytes: tuple[int, ...] = volume(STANDARD_SAMPLE_INTERVALS_BYTES)
    """Byte-interval mode: bytes between samples for QntzFb >> 3 = 0..7."""
    sample_jitter: float = plain(0.15)
    """Byte-interval mode: each interval is drawn uniformly within +/- this fraction."""
    depth_at: QueueDepth = QueueDepth.ARRIVAL
    """The queue depth taken as q: arriving frames against the queue they find (the
    standard), or on BMv2 departing frames by BMv2's depths (simulator/engine.py models
    both)."""
    queue_unit: QueueUnit = QueueUnit.BYTES
    """What q counts: bytes (the standard) or packets.  Bytes need ``depth_at = arrival``."""
    judge: CpJudge = CpJudge.ARRIVALS
    """Which frames the arrival CP judges: every arriving data frame, the ones its buffer
    drops included, or only the admitted ones.  The departure CP (``depth_at`` enqueue or
    dequeue) sees only frames that leave: it needs ``admitted``."""
    q_eq_bytes: int = size(0)
    """Bytes mode's q_eq; 0: q_eq_pkts frames of 1500 bytes (33 KB at the default)."""
    positive_feedback: bool = False
    """ECM's CP: a sampled frame with Fb > 0 gets a message too, flagged positive
    (``docs/schemes.md``, "The ECM message").  QCN's CP sends only Fb < 0."""
    three_point: bool = False
    """Seed 003's three-point QCN on this port (``docs/qcn.md``, "Three-point QCN"): as
    a CP, a sampled Fb < 0 overwrites a less negative Fb in the frame's Fb tag and is
    reflected by the CP with probability reflect_p_base + QntzFb * reflect_p_scale; as a
    host-facing port, frames from the host get a tag and frames to it meet the end
    reflection point.  Pair it with ``rp.positive_reinforcement``."""
    reflect_p_base: float = plain(1.0)
    """Three-point: the probability of reflecting a negative Fb at QntzFb 0, at the CP and
    at the end reflection point alike.  The seed gives no function; 1 reflects every
    sampled Fb < 0 at its CP (whose sampling already grows with |Fb|), so P0 = 0 is
    two-point QCN, as the seed's own rows at reflection 0 are."""
    reflect_p_scale: float = plain(0.0)
    """Three-point: added reflection probability per QntzFb step."""
    reflect_p0: float = plain(0.0)
    """Three-point, the end reflection point: the probability P0 of reflecting Fb = 0
    (seed 003's "reflection probability": 0, 2.5 and 5 %)."""
    signal: CpSignal = CpSignal.CNM
    """What the port signals with: QCN's CNMs, DCQCN's ECN marks, or nothing."""
    kmin_bytes: int = size(DCQCN_KMIN_BYTES)
    """ECN marking: no mark while the port's queue is below this (DCQCN paper: 5 KB)."""
    kmax_bytes: int = size(DCQCN_KMAX_BYTES)
    """ECN marking: the probability reaches pmax here, and every frame above it is marked
    (DCQCN paper: 200 KB)."""
    pmax: float = plain(DCQCN_PMAX)
    """ECN marking: the mark probability at kmax_bytes (DCQCN paper: 1 %)."""

    @property
    def q_eq(self) -> int:
        """q_eq in the port's queue unit."""
        if self.queue_unit is QueueUnit.PACKETS:
            return self.q_eq_pkts
        return self.q_eq_bytes or self.q_eq_pkts * SEED_FRAME_BYTES

    @property
    def fb_max(self) -> float:
        """Fbmax = (2w + 1) * q_eq: the |Fb| that quantises to 63 (in the queue unit)."""
        return (2 * self.w + 1) * self.q_eq

    def validate(self) -> None:
        _check_int("cp.q_eq_pkts", self.q_eq_pkts, 1, 2047)
        _check_choice("cp.queue_unit", self.queue_unit, QueueUnit)
        _check_int("cp.q_eq_bytes", self.q_eq_bytes, 0, FB_MAX_FP_LIMIT // W_ONE)
        _check_range("cp.w", self.w, 0.0, 64.0)
        if not float(self.w * W_ONE).is_integer():
            raise ParamError("cp.w", f"must be a multiple of 1/{W_ONE} (got {self.w})")
        if self.fb_max * W_ONE > FB_MAX_FP_LIMIT:
            raise ParamError(
                "cp.q_eq_bytes" if self.queue_unit is QueueUnit.BYTES else "cp.q_eq_pkts",
                f"(2w+1)*q_eq must be at most {FB_MAX_FP_LIMIT // W_ONE} for exact quantisation "
                f"(got {self.fb_max:g} {self.queue_unit.value})",
            )
        _check_linear_probability("cp", "p_base", self.p_base, "p_scale", self.p_scale)
        _check_choice("cp.sampling", self.sampling, SamplingMode)
        if len(self.sample_intervals_bytes) != 8:
            raise ParamError("cp.sample_intervals_bytes", "must list exactly 8 intervals")
        for i, n in enumerate(self.sample_intervals_bytes):
            _check_int(f"cp.sample_intervals_bytes[{i}]", n, 64, 10_000_000)
        _check_range("cp.sample_jitter", self.sample_jitter, 0.0, 0.99)
        _check_choice("cp.depth_at", self.depth_at, QueueDepth)
        if self.queue_unit is QueueUnit.BYTES and self.depth_at is not QueueDepth.ARRIVAL:
            raise ParamError(
                "cp.queue_unit",
                f"BMv2's {self.depth_at.value} depth counts packets: bytes need depth_at = "
                "arrival (or set queue_unit = packets)",
            )
        if not isinstance(self.positive_feedback, bool):
            raise ParamError("cp.positive_feedback", "must be true or false")
        if not isinstance(self.three_point, bool):
            raise ParamError("cp.three_point", "must be true or false")
        _check_linear_probability(
            "cp", "reflect_p_base", self.reflect_p_base, "reflect_p_scale", self.reflect_p_scale
        )
        _check_range("cp.reflect_p0", self.reflect_p0, 0.0, 1.0)
        if self.three_point and self.positive_feedback:
            raise ParamError("cp.three_point", "is QCN's; ECM's CP (positive_feedback) has none")
        if self.three_point and self.depth_at is not QueueDepth.ARRIVAL:
            raise ParamError(
                "cp.three_point",
                "the Fb tag is written in ingress, by the arrival CP: set depth_at = arrival",
            )
        _check_choice("cp.judge", self.judge, CpJudge)
        _check_choice("cp.signal", self.signal, CpSignal)
        _check_int("cp.kmin_bytes", self.kmin_bytes, 0, ECN_QUEUE_MAX_BYTES - 1)
        _check_int("cp.kmax_bytes", self.kmax_bytes, self.kmin_bytes + 1, ECN_QUEUE_MAX_BYTES)
        _check_range("cp.pmax", self.pmax, 0.0, 1.0)
        if self.signal is CpSignal.ECN and self.depth_at is not QueueDepth.ARRIVAL:
            raise ParamError(
                "cp.signal",
                "ECN marking reads the port's queue in bytes as the pipeline counts it on "
                "arrival: set depth_at = arrival",
            )
        if self.signal is CpSignal.ECN and (self.three_point or self.positive_feedback):
            raise ParamError(
                "cp.signal",
                "a port marks ECN (DCQCN) or runs QCN's or ECM's CP, not both: set "
                "three_point and positive_feedback false",
            )
        if self.judge is CpJudge.ARRIVALS and self.depth_at is not QueueDepth.ARRIVAL:
            raise ParamError(
                "cp.judge",
                f"the departure CP (depth_at = {self.depth_at.value}) sees only the frames that "
                'leave, never a dropped one: set judge = "admitted" (or depth_at = arrival)',
            )

    def with_changes(self, changes: dict[str, Any]) -> CpParams:
        """These parameters with ``changes`` (field -> value, as `qcn ctl set` and the live
        view give them) applied and checked: a ParamError names the first bad field.  A new
        q_eq_pkts given without q_eq_bytes clears q_eq_bytes, so that bytes mode follows the
        new frame count; a departure depth given without judge judges the admitted frames
        (the only ones that leave)."""
        if "q_eq_pkts" in changes and "q_eq_bytes" not in changes:
            changes = {**changes, "q_eq_bytes": 0}
        if changes.get("depth_at", "arrival") != "arrival" and "judge" not in changes:
            changes = {**changes, "judge": CpJudge.ADMITTED.value}
        return QcnParams.from_dict({"cp": dict(changes)}, QcnParams(cp=self)).cp

    def never_sampling(self) -> CpParams:
        """The same CP that never samples: a run without QCN keeps its CPs on their ports,
        so the queues are still measured at the same per-frame cost, and no CNM is sent."""
        return replace(
            self,
            sampling=SamplingMode.BERNOULLI,
            p_base=0.0,
            p_scale=0.0,
            three_point=False,
            signal=CpSignal.NONE,
        )


@dataclass(frozen=True)
class RpParams:
    """Reaction-point parameters of one rate limiter."""

    line_rate_bps: float = rate(10e9)
    """Rate of the host link; a limiter at this rate is released."""
    min_rate_bps: float = rate(10e6)
    """MIN_RATE: CR never goes below this."""
    rate_unit_bps: float = rate(1e6)
    """R_unit: granularity of rates written to a real limiter."""
    gd: float = plain(1 / 128)
    """Gd: CR *= 1 - Gd * QntzFb on a CNM (at most a ~50 % cut)."""
    bc_limit_bytes: int = volume(150_000)
    """BC_LIMIT: bytes in one byte-counter cycle (100 frames of 1500 B)."""
    timer_s: float = seconds(0.015)
    """TIMER_PERIOD: length of one timer cycle."""
    r_ai_bps: float = rate(5e6)
    """R_AI: target-rate step in active increase (seed 003: 3 Mb/s; 2-QCN of seed 000: 25 Mb/s)."""
    r_hai_bps: float = rate(50e6)
    """R_HAI: target-rate step unit in hyper-active increase."""
    fast_recovery_th: int = plain(5)
    """FAST_RECOVERY_TH: fast-recovery cycles before active increase."""
    jitter: float = plain(0.15)
    """Byte-counter and timer cycles are drawn uniformly within +/- this fraction."""
    hai_min_frames: int = volume(500)
    """Frames that must be sent since the last CNM before hyper-active increase."""
    timer_enabled: bool = True
    """False for 2-QCN: the byte counter alone clocks the cycles."""
    hai_enabled: bool = True
    """False for 2-QCN: no hyper-active increase."""
    shorten_cycles_after_fr: bool = True
    """Halve byte-counter and timer cycles after fast recovery (False for 2-QCN)."""
    fb_hat: bool = False
    """Seed 000's Fb-hat cycle shrinking: 50-frame cycles while Fb-hat <= 1, else 100."""
    frame_bytes: int = size(SEED_FRAME_BYTES)
    """Frame size the Fb-hat variant counts cycles in."""
    positive_reinforcement: bool = False
    """Seed 003's three-point QCN: a CNM with QntzFb 0 (a reflection point saw Fb = 0)
    ends the current cycles at once, one increase step, instead of a zero-size cut."""
    scheme: SchemeName = RpScheme.QCN
    """The reaction point's scheme: a name of :data:`SCHEMES` (qcn, 2-qcn, timer-qcn, ecm)."""
    adaptive_timer: bool = False
    """Seed 004's adaptive timer: the timer period T moves with the feedback (below)."""
    timer_expiry_factor: float = plain(0.9)
    """Adaptive timer, the c of seed 004: after a cycle ends by expiry, T = T * c - a."""
    timer_expiry_step_s: float = seconds(0.0)
    """Adaptive timer, the a of seed 004 (seconds)."""
    timer_cnm_factor: float = plain(1.25)
    """Adaptive timer, the d of seed 004: on a CNM before expiry, T = T * d + b."""
    timer_cnm_step_s: float = seconds(0.0)
    """Adaptive timer, the b of seed 004 (seconds)."""
    adaptive_timer_span: float = plain(4.0)
    """Adaptive timer: T stays within [timer_s / span, timer_s * span]."""
    scheme_params: tuple[SchemeParams, ...] = ()
    """The schemes' own parameters (:class:`SchemeParams`) that differ from their defaults,
    at most one set per scheme; read them with :meth:`own`.  In TOML each scheme's set is
    its table ``[rp.NAME]``."""

    def __post_init__(self) -> None:
        # One canonical form, so that equal parameters compare equal however they were
        # built: a scheme's defaults are not stored, the rest in a fixed order.
        kept = {type(x): x for x in self.scheme_params if x != type(x)()}
        ordered = tuple(kept[k] for k in sorted(kept, key=lambda k: k.__qualname__))
        object.__setattr__(self, "scheme_params", ordered)

    def own(self, kind: type[P]) -> P:
        """The parameters of type ``kind`` (a scheme's :class:`SchemeParams`) in force."""
        for x in self.scheme_params:
            if type(x) is kind:
                return x
        return kind()

    def with_own(self, **changes: Any) -> RpParams:
        """These parameters with fields of the selected scheme's own ones changed
        (``ecm.with_own(gi=0.0053333)``)."""
        kind = scheme_def(self.scheme).params
        if kind is None:
            raise ParamError(f"rp.{self.scheme}", "this scheme has no parameters of its own")
        mine = replace(self.own(kind), **changes)
        others = tuple(x for x in self.scheme_params if type(x) is not kind)
        return replace(self, scheme_params=(*others, mine))

    def validate(self) -> None:
        _check_range("rp.line_rate_bps", self.line_rate_bps, 1e3, 1e13)
        _check_range("rp.min_rate_bps", self.min_rate_bps, 1.0, self.line_rate_bps)
        _check_range("rp.rate_unit_bps", self.rate_unit_bps, 1.0, self.line_rate_bps)
        if self.rate_unit_bps > self.min_rate_bps:
            raise ParamError(
                "rp.min_rate_bps",
                f"MIN_RATE {rate_text(self.min_rate_bps)} is less than one rate unit "
                f"(rate_unit_bps, {rate_text(self.rate_unit_bps)}): a limiter's rate is a "
                "whole number of units and never below MIN_RATE, so MIN_RATE is at least one "
                f"unit; give rate_unit_bps (beside min_rate_bps) {self.min_rate_bps:g} or "
                "less too",
            )
        _check_range("rp.gd", self.gd, 0.0, 1.0 / QNTZ_FB_MAX, low_open=True)
        _check_int("rp.bc_limit_bytes", self.bc_limit_bytes, 64, 1 << 30)
        _check_range("rp.timer_s", self.timer_s, 1e-6, TIMER_MAX_S)
        _check_range("rp.r_ai_bps", self.r_ai_bps, 0.0, self.line_rate_bps)
        _check_range("rp.r_hai_bps", self.r_hai_bps, 0.0, self.line_rate_bps)
        _check_int("rp.fast_recovery_th", self.fast_recovery_th, 1, 100)
        _check_range("rp.jitter", self.jitter, 0.0, 0.99)
        _check_int("rp.hai_min_frames", self.hai_min_frames, 0, 1 << 30)
        for name in (
            "timer_enabled",
            "hai_enabled",
            "shorten_cycles_after_fr",
            "fb_hat",
            "adaptive_timer",
            "positive_reinforcement",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ParamError(f"rp.{name}", "must be true or false")
        _check_int("rp.frame_bytes", self.frame_bytes, 60, 9216)
        scheme = scheme_def(self.scheme)
        _check_range("rp.timer_expiry_factor", self.timer_expiry_factor, 0.01, 1.0)
        _check_range("rp.timer_cnm_factor", self.timer_cnm_factor, 1.0, 100.0)
        _check_range("rp.timer_expiry_step_s", self.timer_expiry_step_s, 0.0, self.timer_s)
        _check_range("rp.timer_cnm_step_s", self.timer_cnm_step_s, 0.0, 60.0)
        _check_range("rp.adaptive_timer_span", self.adaptive_timer_span, 1.0, 1000.0)
        if scheme.check is not None:
            scheme.check(self)
        for other in SCHEMES.values():
            if other.params is not None:
                self.own(other.params).validate(f"rp.{other.name}", self)


#: Seed 004's ECM queue unit: 64-byte pages (``docs/schemes.md``).
ECM_PAGE_BYTES = 64
#: Seed 004's ECM Qeq, in pages.
ECM_Q_EQ_PAGES = 375
#: Seed 004's stability-adjusted ECM Gi (its standard Gi is EcmParams.gi's default).
ECM_GI_STABLE = 0.0053333
#: The ECM CP's sampling probability, flat in Fb: seed 004 gives none; its two ECM
#: recoveries (3 ms, 214 ms) each imply about 5 % (docs/schemes.md, "Sampling").
ECM_SAMPLE_PROBABILITY = 0.05


@dataclass(frozen=True)
class EcmParams(SchemeParams):
    """ECM's own parameters (seed 004; ``[rp.ecm]``)."""

    gi: float = plain(0.53333)
    """Gi: r += Gi * Fb * Ru on Fb > 0 (seed 004; 0.0053333 stability-adjusted)."""
    gd: float = plain(0.00026667)
    """Gd: r *= 1 - Gd * |Fb| on Fb < 0 (Gd * fb_max = 1/2, as QCN's largest cut)."""
    ru_bps: float = rate(1e6)
    """Ru: the rate unit of the increase on Fb > 0."""
    rd_bps: float = rate(1e6)
    """Rd: the drift, added every Td without a message."""
    td_s: float = seconds(1e-3)
    """Td: the drift period."""
    fb_max: float = plain(1875.0)
    """The |Fb| that QntzFb 63 stands for, in seed 004's queue unit (64-byte pages):
    (2W + 1) * Qeq = 5 * 375.  The CP quantises in its own unit; this turns QntzFb back
    into the seed's Fb, so Gi and Gd keep seed 004's values."""

    def validate(self, where: str, rp: RpParams) -> None:
        _check_range(f"{where}.gi", self.gi, 0.0, 100.0)
        _check_range(f"{where}.fb_max", self.fb_max, 1.0, 1e9)
        _check_range(f"{where}.gd", self.gd, 0.0, 1.0 / self.fb_max, low_open=True)
        _check_range(f"{where}.ru_bps", self.ru_bps, 0.0, rp.line_rate_bps)
        _check_range(f"{where}.rd_bps", self.rd_bps, 0.0, rp.line_rate_bps)
        _check_range(f"{where}.td_s", self.td_s, 1e-6, 60.0)


#: DCQCN's reaction and notification points (Zhu et al., SIGCOMM 2015; docs/dcqcn.md gives
#: each value's source).
DCQCN_G = 1 / 256
DCQCN_ALPHA_TIMER_S = 55e-6
DCQCN_CNP_INTERVAL_S = 50e-6
DCQCN_CNP_INTERVAL_MAX_S = 60.0
"""The longest N a notification point takes (``rp.dcqcn.cnp_interval_s``, a receiver's
``--cnp-interval``)."""
DCQCN_TIMER_S = 55e-6
DCQCN_BYTE_COUNTER_BYTES = 10_000_000
DCQCN_R_AI_BPS = 40e6


@dataclass(frozen=True)
class DcqcnParams(SchemeParams):
    """DCQCN's own parameters (``[rp.dcqcn]``); its byte counter, timer, R_AI, R_HAI, F
    and MIN_RATE are the reaction point's shared fields (bc_limit_bytes, timer_s, ...)."""

    g: float = plain(DCQCN_G)
    """g: alpha = (1 - g) * alpha + g on a CNP, alpha = (1 - g) * alpha every alpha_timer_s
    without one."""
    alpha_timer_s: float = seconds(DCQCN_ALPHA_TIMER_S)
    """K: alpha decays once per this period without a CNP (restarted by each CNP)."""
    alpha_initial: float = plain(1.0)
    """alpha before the first CNP (the paper's and HPCC's: 1, so the first cut halves)."""
    cnp_interval_s: float = seconds(DCQCN_CNP_INTERVAL_S)
    """N: the receiver's notification point sends a flow at most one CNP per this period."""

    def validate(self, where: str, rp: RpParams) -> None:  # noqa: ARG002
        _check_range(f"{where}.g", self.g, 0.0, 1.0, low_open=True)
        _check_range(f"{where}.alpha_timer_s", self.alpha_timer_s, 1e-7, 60.0)
        _check_range(f"{where}.alpha_initial", self.alpha_initial, 0.0, 1.0)
        _check_range(f"{where}.cnp_interval_s", self.cnp_interval_s, 0.0, DCQCN_CNP_INTERVAL_MAX_S)


@dataclass(frozen=True)
class SchemeDef:
    """One reaction-point scheme, defined once: its name (what ``rp.scheme``, a scenario's
    ``qcn_preset``, ``qcn params --preset`` and ``qcn rp start --preset`` all say), its
    own parameters, its whole parameter set and the rules it adds between the shared
    fields.  Its rate rules are the class of ``reaction_point/rules.py`` registered under
    the same name (``docs/extending.md``)."""

    name: SchemeName
    summary: str
    """One line: what the scheme is and whose it is."""
    params: type[SchemeParams] | None = None
    """Its own parameters (the table ``[rp.NAME]``), if it has any."""
    preset: Callable[[], QcnParams] | None = None
    """Its whole parameter set, CP included; None: the spec's defaults with this scheme."""
    check: Callable[[RpParams], None] | None = None
    """Raise :class:`ParamError` where the shared fields contradict the scheme."""

    def parameter_set(self) -> QcnParams:
        if self.preset is not None:
            return self.preset()
        return QcnParams(rp=RpParams(scheme=self.name))


#: Every scheme by name, in the order they are listed.
SCHEMES: dict[SchemeName, SchemeDef] = {}


def register_scheme(scheme: SchemeDef) -> SchemeDef:
    """Add ``scheme`` to :data:`SCHEMES` (a name or a parameter type may be taken once)."""
    if scheme.name in SCHEMES:
        raise ValueError(f"a scheme named {scheme.name!r} is defined already")
    if scheme.name in {f.name for f in fields(RpParams)}:
        raise ValueError(f"{scheme.name!r} is a field of RpParams: its table would hide it")
    if scheme.params is not None and any(s.params is scheme.params for s in SCHEMES.values()):
        raise ValueError(f"{scheme.params.__name__} belongs to another scheme already")
    SCHEMES[scheme.name] = scheme
    return scheme


def scheme_def(name: SchemeName, where: str = "rp.scheme") -> SchemeDef:
    """The scheme named ``name``; a ParamError naming ``where`` if there is none."""
    scheme = SCHEMES.get(str(name))
    if scheme is None:
        raise ParamError(where, f"must be one of {list(SCHEMES)} (got {name!r})")
    return scheme


def scheme_names() -> list[SchemeName]:
    return list(SCHEMES)


#: Preset names are scheme names: one list (``qcn params --preset``, ``qcn_preset``).
Preset = RpScheme


@dataclass(frozen=True)
class QcnParams:
    """A complete parameter set: one CP configuration and one RP configuration."""

    cp: CpParams = field(default_factory=CpParams)
    rp: RpParams = field(default_factory=RpParams)

    @classmethod
    def preset(cls, name: SchemeName) -> QcnParams:
        """The scheme ``name``'s whole parameter set (:attr:`SchemeDef.preset`)."""
        return scheme_def(name, "preset").parameter_set()

    def validate(self) -> QcnParams:
        """Raise ParamError for the first invalid field; return self for chaining."""
        self.cp.validate()
        self.rp.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        """Every field, the schemes' own parameters each as its table (``rp.ecm``)."""
        d = asdict(self)
        d["cp"]["sampling"] = self.cp.sampling.value
        d["cp"]["depth_at"] = self.cp.depth_at.value
        d["cp"]["queue_unit"] = self.cp.queue_unit.value
        d["cp"]["judge"] = self.cp.judge.value
        d["cp"]["signal"] = self.cp.signal.value
        d["rp"]["scheme"] = str(self.rp.scheme)
        d["cp"]["sample_intervals_bytes"] = list(self.cp.sample_intervals_bytes)
        del d["rp"]["scheme_params"]
        for scheme in SCHEMES.values():
            if scheme.params is not None:
                d["rp"][scheme.name] = asdict(self.rp.own(scheme.params))
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: QcnParams | None = None) -> QcnParams:
        """Build from nested dicts; missing fields keep ``base``'s (default: spec) values."""
        base = base or cls()
        _reject_unknown("", data, ["cp", "rp"])
        cp_in = _section(data, "cp")
        rp_in = _section(data, "rp")
        cp = replace(base.cp, **_coerce(CpParams, "cp", cp_in))
        return cls(cp=cp, rp=_rp_from_dict(rp_in, base.rp)).validate()

    def dumps(self) -> str:
        return tomli_w.dumps(self.to_dict())

    def save(self, path: Path) -> None:
        """Write as TOML, whole or not at all (a full disk used to leave a 0-byte file); a
        place that cannot be written is a ParamError naming it."""
        try:
            write_atomic(path, self.dumps())
        except OSError as e:
            raise ParamError(str(path), f"cannot write: {e.strerror}") from None

    @classmethod
    def load_with_ports(
        cls, path: Path, base: QcnParams | None = None
    ) -> tuple[QcnParams, dict[str, dict[str, Any]]]:
        """A parameter file that may also give ports their own CP fields (``[port_cp."s2:3"]``,
        :data:`PORT_CP_FIELDS`, as `qcn tune --per-port` writes it): the parameters, and
        each port's own fields, checked as the port's CP would take them (its port names
        are checked against a network by the scenario that uses them)."""
        data = read_toml(path, lambda message: ParamError(*message.split(": ", 1)))
        ports = data.pop("port_cp", {})
        try:
            params = cls.from_dict(data, base)
        except ParamError as e:
            raise ParamError(f"{path}: {e.field}", str(e).split(": ", 1)[1]) from None
        if not isinstance(ports, dict) or not all(isinstance(v, dict) for v in ports.values()):
            raise ParamError(f"{path}: port_cp", "must be a table of ports' tables")
        for port, own in ports.items():
            for name in own:
                if name not in PORT_CP_FIELDS:
                    raise ParamError(
                        f"{path}: port_cp.{port}.{name}",
                        f"a port's own CP fields are {', '.join(PORT_CP_FIELDS)}",
                    )
            try:
                replace(params.cp, **_coerce(CpParams, "cp", own)).validate()
            except ParamError as e:
                field = e.field.removeprefix("cp.")
                raise ParamError(
                    f"{path}: port_cp.{port}.{field}", str(e).split(": ", 1)[1]
                ) from None
        return params, ports

    @classmethod
    def load(cls, path: Path, base: QcnParams | None = None) -> QcnParams:
        """Read a TOML parameter file; errors name the file and the field."""
        data = read_toml(path, lambda message: ParamError(*message.split(": ", 1)))
        try:
            return cls.from_dict(data, base)
        except ParamError as e:
            raise ParamError(f"{path}: {e.field}", str(e).split(": ", 1)[1]) from None


PORT_CP_FIELDS = (
    "q_eq_pkts", "w", "p_base", "p_scale", "signal", "kmin_bytes", "kmax_bytes", "pmax",
)  # fmt: skip
"""The CP fields a port may hold of its own (a scenario's ``port_cp``): those BMv2's scaling
leaves alone (q_eq in frames, ECN marking's thresholds in bytes, the rest without a unit), so
a port's own value means the same on both backends."""


def port_cp_values(values: dict[str, Any]) -> dict[str, Any]:
    """A port's own CP fields as CpParams takes them (a signal's name as its CpSignal);
    a value of the wrong type is a ParamError naming ``cp.FIELD``."""
    return _coerce(CpParams, "cp", values)


def _two_qcn_check(rp: RpParams) -> None:
    for name in ("timer_enabled", "hai_enabled", "shorten_cycles_after_fr"):
        if getattr(rp, name):
            raise ParamError(
                f"rp.{name}",
                '2-qcn has no timer, HAI or shortened cycles; set rp.scheme = "qcn" to add them',
            )


def _timer_qcn_check(rp: RpParams) -> None:
    if not rp.timer_enabled:
        raise ParamError("rp.timer_enabled", "timer-qcn is clocked by the timer alone")


def _ecm_check(rp: RpParams) -> None:
    if rp.positive_reinforcement:
        raise ParamError(
            "rp.positive_reinforcement", "is three-point QCN's; ECM has no Fb = 0 message"
        )


def _two_qcn_preset() -> QcnParams:
    return QcnParams(
        rp=RpParams(
            scheme=RpScheme.TWO_QCN,
            timer_enabled=False,
            hai_enabled=False,
            shorten_cycles_after_fr=False,
            r_ai_bps=25e6,
        )
    )


def _ecm_preset() -> QcnParams:
    return QcnParams(
        cp=CpParams(
            q_eq_pkts=ECM_Q_EQ_PAGES * ECM_PAGE_BYTES // SEED_FRAME_BYTES,
            positive_feedback=True,
            sampling=SamplingMode.BERNOULLI,
            p_base=ECM_SAMPLE_PROBABILITY,
            p_scale=0.0,
        ),
        rp=RpParams(scheme=RpScheme.ECM, min_rate_bps=1e6, rate_unit_bps=1e6),
    )


def _dcqcn_check(rp: RpParams) -> None:
    for name, why in (
        ("shorten_cycles_after_fr", "DCQCN's cycles keep their length"),
        ("fb_hat", "Fb-hat is seed 000's"),
        ("adaptive_timer", "the adaptive timer is seed 004's"),
        ("positive_reinforcement", "positive reinforcement is three-point QCN's"),
    ):
        if getattr(rp, name):
            raise ParamError(f"rp.{name}", f"{why}: set it false for dcqcn")


def _dcqcn_preset() -> QcnParams:
    """The paper's values (docs/dcqcn.md): marks on 5-200 KB at up to 1 %, a 55 us timer,
    a 10 MB byte counter, R_AI 40 Mb/s, no jitter."""
    return QcnParams(
        cp=CpParams(signal=CpSignal.ECN),
        rp=RpParams(
            scheme=RpScheme.DCQCN,
            timer_s=DCQCN_TIMER_S,
            bc_limit_bytes=DCQCN_BYTE_COUNTER_BYTES,
            r_ai_bps=DCQCN_R_AI_BPS,
            jitter=0.0,
            shorten_cycles_after_fr=False,
        ),
    )


register_scheme(
    SchemeDef(
        RpScheme.QCN,
        "full QCN (seeds 002, 004): byte counter + timer, AI and HAI; Fb-hat, the adaptive "
        "timer and positive reinforcement as its parameters",
    )
)
register_scheme(
    SchemeDef(
        RpScheme.TWO_QCN,
        "seed 000's 2-QCN: the byte counter alone, 100-frame cycles, AI 25 Mb/s",
        preset=_two_qcn_preset,
        check=_two_qcn_check,
    )
)
register_scheme(
    SchemeDef(
        RpScheme.TIMER_QCN,
        "seed 004's timer-only QCN: full QCN's parameters, the timer alone clocking",
        check=_timer_qcn_check,
    )
)
register_scheme(
    SchemeDef(
        RpScheme.ECM,
        "seed 004's ECM (BCN's successor): AIMD on signed feedback, a drift every Td; "
        "Qeq 375 pages, Rmin 1 Mb/s",
        params=EcmParams,
        preset=_ecm_preset,
        check=_ecm_check,
    )
)
register_scheme(
    SchemeDef(
        RpScheme.DCQCN,
        "DCQCN (Zhu et al., SIGCOMM 2015): ECN marks on a RED curve, CNPs from the receiver, "
        "cuts by alpha, QCN's byte counter and timer",
        params=DcqcnParams,
        preset=_dcqcn_preset,
        check=_dcqcn_check,
    )
)


# Data-plane fixed-point formats.  The controller encodes parameters with these, the P4
# pipeline computes with them, and the CP reference model (qcn.core.cp_model) mirrors it.
W_FRAC_BITS = 4
"""w is carried as w_fixed = w * 2^W_FRAC_BITS; Fb is computed scaled by the same factor."""
W_ONE = 1 << W_FRAC_BITS
QNTZ_SHIFT = 48
"""QntzFb = (|Fb_fp| * fb_multiplier) >> QNTZ_SHIFT, fb_multiplier = ceil(63 * 2^48 / Fbmax_fp)."""
FB_MAX_FP_LIMIT = 1 << 24
"""Largest Fbmax_fp for which multiply-and-shift equals floor(|Fb| * 63 / Fbmax) exactly:
the multiplier's rounding adds less than Fbmax_fp / 2^48 <= 1 / Fbmax_fp, which never
carries the quotient past an integer (docs/qcn.md, "Quantisation"); and the product,
at most 63 * 2^48 + Fbmax_fp, stays below 2^54 in the pipeline's 64 bits.  Bytes mode's
Fbmax = (2w + 1) * 33 KB * 16 is well inside."""
PROB_FRAC_BITS = 24
"""Probabilities are carried as p * 2^PROB_FRAC_BITS and compared with a random value below it."""
PROB_ONE = 1 << PROB_FRAC_BITS
ECN_SLOPE_SHIFT = 16
"""ECN marking: on the ramp a frame is marked iff random(0, PROB_ONE - 1) <
((q - kmin) * ecn_slope) >> ECN_SLOPE_SHIFT, ecn_slope = round(pmax * PROB_ONE *
2^ECN_SLOPE_SHIFT / (kmax - kmin)) (qcn.core.cp_model.ecn_mark_threshold).  The product is
at most pmax * 2^40 on the ramp: 64 bits hold it."""


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    sec = data.get(name, {})
    if not isinstance(sec, dict):
        raise ParamError(name, "must be a table")
    return sec


def _reject_unknown(prefix: str, data: dict[str, Any], known: list[str]) -> None:
    for key in data:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            did = f"; did you mean '{hint[0]}'?" if hint else f"; known: {', '.join(known)}"
            raise ParamError(f"{prefix}{key}", f"unknown parameter{did}")


#: ECM's parameters as they were spelled before they became its own (``rp.ecm_gi`` is now
#: ``rp.ecm.gi``): still read, with their old meaning, so older files keep loading.  Where
#: both are given the old spelling wins: a scenario's ``--set qcn.rp.ecm_gi=...`` lands
#: beside the ``ecm`` table the scenario already holds, and is the later word.
LEGACY_RP_FIELDS: dict[str, tuple[SchemeName, str]] = {
    f"ecm_{name}": (RpScheme.ECM, name)
    for name in ("gi", "gd", "ru_bps", "rd_bps", "td_s", "fb_max")
}


def _rp_from_dict(values: dict[str, Any], base: RpParams) -> RpParams:
    """The ``[rp]`` table over ``base``: its shared fields, and each scheme's own table."""
    values = dict(values)
    tables: dict[SchemeName, dict[str, Any]] = {}
    for scheme in SCHEMES.values():
        if scheme.params is not None and scheme.name in values:
            table = values.pop(scheme.name)
            if not isinstance(table, dict):
                raise ParamError(f"rp.{scheme.name}", "must be a table")
            tables[scheme.name] = dict(table)
    for old, (name, key) in LEGACY_RP_FIELDS.items():
        if old in values:
            tables.setdefault(name, {})[key] = values.pop(old)
    shared = [f.name for f in fields(RpParams) if f.name != "scheme_params"]
    known = shared + [s.name for s in SCHEMES.values() if s.params is not None]
    _reject_unknown("rp.", values, known)
    rp = replace(base, **_coerce(RpParams, "rp", values))
    own = {type(x): x for x in base.scheme_params}
    for name, table in tables.items():
        kind = SCHEMES[name].params
        assert kind is not None
        own[kind] = replace(base.own(kind), **_coerce(kind, f"rp.{name}", table))
    return replace(rp, scheme_params=tuple(own.values()))


#: Parameter fields whose TOML value is an enum's value, by annotation.
ENUM_FIELD_TYPES: dict[str, type[StrEnum]] = {
    "SamplingMode": SamplingMode,
    "QueueDepth": QueueDepth,
    "QueueUnit": QueueUnit,
    "CpJudge": CpJudge,
    "CpSignal": CpSignal,
}


def _coerce(cls: type, section: str, values: dict[str, Any]) -> dict[str, Any]:
    """Type-check one TOML table against a dataclass; ints are accepted for floats."""
    types = {f.name: f.type for f in fields(cls)}
    _reject_unknown(f"{section}.", values, list(types))
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{section}.{key}"
        kind = types[key]
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParamError(name, f"must be a number (got {value!r})")
            out[key] = float(value)
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ParamError(name, f"must be a whole number (got {value!r})")
            out[key] = value
        elif kind == "bool":
            if not isinstance(value, bool):
                raise ParamError(name, f"must be true or false (got {value!r})")
            out[key] = value
        elif kind == "SchemeName":
            # A built-in scheme's name is its RpScheme; a scheme added later, its own.
            scheme = scheme_def(value, name) if isinstance(value, str) else None
            if scheme is None:
                raise ParamError(name, f"must be one of {list(SCHEMES)} (got {value!r})")
            out[key] = RpScheme(scheme.name) if scheme.name in set(RpScheme) else scheme.name
        elif kind in ENUM_FIELD_TYPES:
            enum = ENUM_FIELD_TYPES[kind]
            try:
                out[key] = enum(value)
            except ValueError:
                allowed = ", ".join(repr(m.value) for m in enum)
                raise ParamError(name, f"must be one of {allowed} (got {value!r})") from None
        elif kind == "tuple[int, ...]":
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise ParamError(name, "must be a list of whole numbers")
            out[key] = tuple(value)
        else:  # pragma: no cover - a new field type without a coercion rule
            raise AssertionError(f"no TOML coercion for {name}: {kind}")
    return out


def _check_choice(name: str, value: object, choices: type[StrEnum]) -> None:
    """``value`` one of ``choices`` (a field read from a file is converted before this)."""
    if not isinstance(value, choices):
        raise ParamError(name, f"must be one of {[c.value for c in choices]}")


def _check_range(name: str, value: float, lo: float, hi: float, *, low_open: bool = False) -> None:
    bad_type = isinstance(value, bool) or not isinstance(value, int | float)
    if bad_type or math.isnan(value) or value > hi or value < lo or (low_open and value == lo):
        left = "(" if low_open else "["
        raise ParamError(name, f"must be in {left}{lo:g}, {hi:g}] (got {value!r})")


def _check_linear_probability(
    section: str, base_name: str, base: float, scale_name: str, scale: float
) -> None:
    """A probability base + QntzFb * scale: each part in range, and at QntzFb 63 in [0, 1]."""
    _check_range(f"{section}.{base_name}", base, 0.0, 1.0)
    _check_range(f"{section}.{scale_name}", scale, 0.0, 1.0 / QNTZ_FB_MAX)
    top = base + QNTZ_FB_MAX * scale
    # Within the data plane's rounding: values read back from a switch are its fixed-point
    # integers over PROB_ONE, each off by up to half a unit (base + 63 scales: 32 units).
    if top > 1.0 + (1 + QNTZ_FB_MAX) / (2 * PROB_ONE):
        raise ParamError(
            f"{section}.{scale_name}",
            f"{base_name} + 63 * {scale_name} is a probability and must be in [0, 1] (got {top:g})",
        )


def _check_int(name: str, value: int, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ParamError(name, f"must be a whole number in [{lo}, {hi}] (got {value!r})")
