"""The other schemes of seed 004 against hand-computed sequences: ECM, timer-only QCN, the
adaptive timer (docs/schemes.md), and the ECM CP's positive message."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qcn.core.cp_model import CongestionPoint, CpPortConfig
from qcn.core.frames import CNM, expected_cnm, parse_cnm
from qcn.core.params import CpParams, ParamError, QcnParams, RpParams, RpScheme
from qcn.reaction_point.rules import RateLimiterRules, Stage

LINE = 10e9
ECM = replace(QcnParams.preset("ecm").rp, jitter=0.0)
TIMER_QCN = replace(QcnParams.preset("timer-qcn").rp, jitter=0.0)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(params: RpParams) -> tuple[RateLimiterRules, Clock]:
    clock = Clock()
    return RateLimiterRules(params, clock, lambda: 0.5), clock


def stage_of(rp: RateLimiterRules) -> Stage:
    """The stage now (a call, so the checker does not carry one comparison to the next)."""
    return rp.stage


# -- ECM -------------------------------------------------------------------------------------


def test_ecm_decrease_is_gd_times_fb_in_pages() -> None:
    rp, _ = make(ECM)
    rp.on_cnm(63)  # |Fb| = 1875 pages: r *= 1 - 0.00026667 * 1875
    assert rp.current_rate_bps == pytest.approx(LINE * (1 - 0.50000625), rel=1e-12)
    rp.on_cnm(21)  # |Fb| = 625 pages
    assert rp.current_rate_bps == pytest.approx(LINE * 0.49999375 * (1 - 0.16666875), rel=1e-12)


def test_ecm_increase_is_gi_times_fb_times_ru() -> None:
    rp, _ = make(ECM)
    rp.on_cnm(63)
    before = rp.current_rate_bps
    rp.on_cnm(21, positive=True)  # +0.53333 * 625 * 1 Mb/s = 333.33125 Mb/s
    assert rp.current_rate_bps - before == pytest.approx(333.33125e6, rel=1e-12)
    stable, _ = make(ECM.with_own(gi=0.0053333))
    stable.on_cnm(63)
    low = stable.current_rate_bps
    stable.on_cnm(63, positive=True)  # +0.0053333 * 1875 * 1 Mb/s
    assert stable.current_rate_bps - low == pytest.approx(9.9999375e6, rel=1e-12)


def test_ecm_positive_feedback_never_throttles_and_never_exceeds_line_rate() -> None:
    rp, _ = make(ECM)
    rp.on_cnm(63, positive=True)  # not rate limited: nothing to raise
    assert (rp.current_rate_bps, rp.cnms) == (LINE, 0)
    rp.on_cnm(1)
    for _ in range(20):
        rp.on_cnm(63, positive=True)
    assert rp.current_rate_bps == LINE
    assert rp.at_line_rate


def test_ecm_drifts_by_rd_every_td_without_a_message() -> None:
    rp, clock = make(ECM)
    rp.on_cnm(63)
    cut = rp.current_rate_bps
    assert rp.timer_deadline == pytest.approx(1e-3)
    assert rp.advance(3.5e-3) == 3  # at 1, 2 and 3 ms
    assert rp.current_rate_bps == pytest.approx(cut + 3e6)
    clock.now = 3.6e-3
    rp.on_cnm(0, positive=True)  # a message restarts the drift period
    assert rp.timer_deadline == pytest.approx(4.6e-3)
    assert rp.advance(4.5e-3) == 0


def test_ecm_floor_is_rmin() -> None:
    rp, _ = make(ECM)
    for _ in range(100):
        rp.on_cnm(63)
    assert rp.current_rate_bps == 1e6  # seed 004: Rmin 1 Mb/s


def test_ecm_ignores_the_byte_counter() -> None:
    rp, _ = make(ECM)
    rp.on_cnm(63)
    cut = rp.current_rate_bps
    rp.on_transmit(10**9, frames=10**6)
    assert rp.current_rate_bps == cut
    assert rp.byte_stage == 0


# -- timer-only QCN --------------------------------------------------------------------------


def test_timer_only_qcn_fast_recovery_then_ai_then_hai_by_the_timer_alone() -> None:
    rp, _ = make(TIMER_QCN)
    rp.on_cnm(32)  # CR = 10G * (1 - 32/128); TR kept (extra fast recovery)
    assert (rp.current_rate_bps, rp.target_rate_bps) == (7.5e9, LINE)
    rp.on_transmit(10**9)  # the byte counter does not clock
    assert rp.byte_stage == 0
    # Five FR cycles of T = 15 ms: CR halves its distance to TR each time.
    expected = [8.75e9, 9.375e9, 9.6875e9, 9.84375e9, 9.921875e9]
    seen = []
    for k in range(1, 6):
        assert rp.timer_deadline == pytest.approx(0.015 * k)
        rp.advance(0.015 * k)
        seen.append(rp.current_rate_bps)
    assert seen == expected
    assert stage_of(rp) is Stage.FAST_RECOVERY
    # Then AI with T/2: TR + R_AI.
    assert rp.timer_deadline == pytest.approx(0.075 + 0.0075)
    rp.advance(0.0825)
    assert stage_of(rp) is Stage.ACTIVE_INCREASE
    assert rp.target_rate_bps == LINE + 5e6
    assert rp.current_rate_bps == (9.921875e9 + LINE + 5e6) / 2
    # 500 frames since the CNM: HAI, TR + R_HAI * (time_stage - 5).
    rp.on_transmit(1500 * 500, frames=500)
    rp.advance(0.09)
    assert stage_of(rp) is Stage.HYPER_ACTIVE_INCREASE
    assert rp.target_rate_bps == LINE + 5e6 + 50e6 * 2


def test_two_qcn_scheme_refuses_a_timer() -> None:
    with pytest.raises(ParamError, match=r"rp\.timer_enabled: 2-qcn has no timer"):
        QcnParams.from_dict({"rp": {"timer_enabled": True}}, base=QcnParams.preset("2-qcn"))
    with pytest.raises(ParamError, match=r"rp\.scheme: must be one of"):
        QcnParams.from_dict({"rp": {"scheme": "bcn"}})


def test_qcn_ignores_positive_messages() -> None:
    rp, _ = make(RpParams(jitter=0.0))
    rp.on_cnm(63, positive=True)
    assert (rp.current_rate_bps, rp.cnms) == (LINE, 0)


# -- the adaptive timer -----------------------------------------------------------------------


def test_adaptive_timer_shrinks_on_expiry_and_grows_when_dinged() -> None:
    rp, clock = make(replace(TIMER_QCN, adaptive_timer=True))
    rp.on_cnm(10)
    assert rp.timer_deadline == pytest.approx(0.015)
    rp.advance(0.015)  # expired: T = 15 ms * 0.9
    assert rp.timer_period_s == pytest.approx(0.0135)
    assert rp.timer_deadline == pytest.approx(0.0285)
    clock.now = 0.020
    rp.on_cnm(10)  # dinged before expiry: T = 13.5 ms * 1.25
    assert rp.timer_period_s == pytest.approx(0.016875)
    assert rp.timer_deadline == pytest.approx(0.036875)


def test_adaptive_timer_additive_steps_and_bounds() -> None:
    p = replace(
        TIMER_QCN,
        adaptive_timer=True,
        timer_expiry_factor=1.0,
        timer_expiry_step_s=0.001,
        timer_cnm_factor=1.0,
        timer_cnm_step_s=0.002,
    )
    rp, clock = make(p)
    rp.on_cnm(10)
    rp.advance(0.015)  # T - a
    assert rp.timer_period_s == pytest.approx(0.014)
    rp.advance(10.0)  # many expiries: T never below T0 / span
    assert rp.timer_period_s == pytest.approx(0.015 / 4)
    clock.now = 10.0
    for _ in range(100):
        rp.on_cnm(10)  # T + b each time, at most T0 * span
    assert rp.timer_period_s == pytest.approx(0.015 * 4)


# -- the ECM CP and its message --------------------------------------------------------------


def ecm_cp() -> CongestionPoint:
    cfg = CpPortConfig.from_params(QcnParams.preset("ecm").cp)
    return CongestionPoint(cfg, lambda lo, _hi: lo)  # every frame sampled


def test_ecm_cp_sends_positive_feedback_below_qeq() -> None:
    """In bytes (the default): q_eq = 16 frames of 1500 B = 24 KB, ECM's Qeq."""
    cp = ecm_cp()
    frame = 1500
    d = cp.on_frame(0, frame)  # Fb = -(0 - 16) = 16 = 12.6 of 63 steps of Fbmax 80 (frames)
    assert (d.positive, d.qntz_fb, d.cnm) == (True, 12, True)
    d = cp.on_frame(16 * frame, frame)  # qoff 0, qdelta +16: Fb = -32 -> QntzFb 25
    assert (d.positive, d.qntz_fb, d.cnm) == (False, 25, True)
    d = cp.on_frame(16 * frame, frame)  # Fb = 0: no message
    assert not d.cnm
    qcn = CongestionPoint(CpPortConfig.from_params(CpParams()), lambda lo, _hi: lo)
    assert not qcn.on_frame(0, 1500).cnm  # QCN's CP: never positive


def test_ecm_message_bytes_carry_the_positive_flag() -> None:
    frame = bytes.fromhex("0200000000020200000000010800") + bytes(50)
    d = ecm_cp().on_frame(0, len(frame))
    pkt = expected_cnm(frame, d, cpid=0x1122334455667788, cp_mac="02:00:00:00:00:fe")
    assert pkt is not None
    raw = bytes(pkt)
    # version 0 | reserved 0 | fb_positive 1 | QntzFb 12 = 0b0000_00000_1_001100
    assert raw[14:16] == bytes.fromhex("004c")
    info = parse_cnm(raw)
    assert (info.fb_positive, info.qntz_fb) == (True, 12)
    assert CNM(raw[14:]).fb_positive == 1


def test_scheme_round_trips_through_toml() -> None:
    p = QcnParams.preset("ecm")
    back = QcnParams.from_dict(p.to_dict())
    assert back == p
    assert back.rp.scheme is RpScheme.ECM
    assert 'scheme = "ecm"' in p.dumps()
