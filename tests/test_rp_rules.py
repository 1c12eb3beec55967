"""The RP rules against hand-computed sequences (docs/qcn.md, "Reaction Point")."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qcn.core.params import ParamError, QcnParams, RpParams
from qcn.reaction_point.rules import RateLimiterRules, Stage

FRAME = 1500
NO_JITTER = RpParams(jitter=0.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make(
    params: RpParams = NO_JITTER, seed: int | None = None
) -> tuple[RateLimiterRules, FakeClock]:
    clock = FakeClock()
    uniform = random.Random(seed).random if seed is not None else (lambda: 0.5)
    return RateLimiterRules(params, clock, uniform), clock


def send_until_cycle_ends(rp: RateLimiterRules) -> int:
    """Send 1500-byte frames until the byte counter ends a cycle; return the frame count."""
    stage = rp.byte_stage
    frames = 0
    while rp.byte_stage == stage:
        rp.on_transmit(FRAME)
        frames += 1
        assert frames < 10_000
    return frames


def test_cnm_cuts_rate_by_gd_times_qntzfb() -> None:
    rp, _ = make()
    rp.on_cnm(63)
    assert rp.current_rate_bps == 5_078_125_000.0  # 10G * (1 - 63/128)
    assert rp.target_rate_bps == 10e9  # first cut in cycle 0: TR kept
    assert rp.stage is Stage.FAST_RECOVERY


def test_five_fast_recovery_cycles_then_active_increase_byte_counter() -> None:
    rp, _ = make()
    rp.on_cnm(63)
    expected_fr = [
        7_539_062_500.0,
        8_769_531_250.0,
        9_384_765_625.0,
        9_692_382_812.5,
        9_846_191_406.25,
    ]
    for cr in expected_fr:
        # BC_LIMIT = 150000 B; the cycle ends when BC < 0, i.e. on the 101st frame.
        assert send_until_cycle_ends(rp) == 101
        assert rp.current_rate_bps == cr
        assert rp.target_rate_bps == 10e9
        assert rp.stage is Stage.FAST_RECOVERY
    # After TH cycles the byte counter runs half cycles (75000 B: 51 frames) and AI adds R_AI.
    assert send_until_cycle_ends(rp) == 51
    assert rp.stage is Stage.ACTIVE_INCREASE
    assert rp.target_rate_bps == 10_005_000_000.0
    assert rp.current_rate_bps == 9_925_595_703.125
    assert send_until_cycle_ends(rp) == 51
    assert rp.target_rate_bps == 10_010_000_000.0
    assert rp.current_rate_bps == 9_967_797_851.5625


def test_timer_cycles_then_hyper_active_increase() -> None:
    rp, clock = make()
    rp.on_cnm(63)
    # Five 15 ms FR timer cycles, then 7.5 ms cycles.
    for i, deadline in enumerate([0.015, 0.030, 0.045, 0.060, 0.075, 0.0825], start=1):
        assert rp.timer_deadline == pytest.approx(deadline)
        clock.now = rp.timer_deadline or 0.0
        assert rp.advance(clock.now) == 1
        assert rp.time_stage == i
    assert rp.stage is Stage.ACTIVE_INCREASE  # timer in AI, byte counter in FR
    assert rp.target_rate_bps == 10_005_000_000.0
    assert rp.current_rate_bps == 9_925_595_703.125
    # Byte cycles 1..5: one side in AI -> AI steps.
    expected = [
        (10_010_000_000.0, 9_967_797_851.5625),
        (10_015_000_000.0, 9_991_398_925.78125),
        (10_020_000_000.0, 10e9),
        (10_025_000_000.0, 10e9),
        (10_030_000_000.0, 10e9),
    ]
    for tr, cr in expected:
        send_until_cycle_ends(rp)
        assert (rp.target_rate_bps, rp.current_rate_bps) == (tr, cr)
    # Byte stage 6 with 5*101+51 = 556 >= 500 frames since the CNM: HAI, i = 6 - 5 = 1.
    send_until_cycle_ends(rp)
    stage_now: Stage = rp.stage  # a fresh read: mypy would keep the earlier narrowing
    assert stage_now is Stage.HYPER_ACTIVE_INCREASE
    assert rp.target_rate_bps == 10_080_000_000.0
    clock.now = rp.timer_deadline or 0.0
    rp.advance(clock.now)  # time stage 7: min(6, 7) - 5 = 1
    assert rp.target_rate_bps == 10_130_000_000.0
    send_until_cycle_ends(rp)  # byte stage 7: min(7, 7) - 5 = 2
    assert rp.target_rate_bps == 10_230_000_000.0
    assert rp.current_rate_bps == 10e9
    assert rp.at_line_rate


def test_hai_needs_500_frames_since_cnm() -> None:
    params = replace(NO_JITTER, hai_min_frames=10_000)
    rp, clock = make(params)
    rp.on_cnm(63)
    for _ in range(6):
        clock.now = rp.timer_deadline or 0.0
        rp.advance(clock.now)
    for _ in range(6):
        send_until_cycle_ends(rp)
    assert rp.byte_stage == 6
    assert rp.time_stage == 6
    assert rp.stage is Stage.ACTIVE_INCREASE  # 556 frames < 10000
    assert rp.target_rate_bps == 10e9 + 7 * 5e6  # one AI step per event past FR


def test_extra_fast_recovery_keeps_target_in_first_cycle_only() -> None:
    rp, _ = make()
    rp.on_cnm(63)
    rp.on_cnm(63)  # still in cycle 0: TR stays at 10G
    assert rp.target_rate_bps == 10e9
    assert rp.current_rate_bps == 10e9 * (65 / 128) ** 2
    send_until_cycle_ends(rp)
    cr = rp.current_rate_bps
    rp.on_cnm(32)  # after a cycle: TR = CR before the cut
    assert rp.target_rate_bps == cr
    assert rp.current_rate_bps == cr * (1 - 32 / 128)


def test_target_rate_reduction_when_tr_exceeds_ten_times_cr() -> None:
    rp, _ = make()
    for _ in range(4):
        rp.on_cnm(63)
    assert rp.current_rate_bps == pytest.approx(664_987_601.339817)
    send_until_cycle_ends(rp)  # byte stage 1 and TR (10G) > 10 * CR (6.65G): TR /= 8
    assert rp.target_rate_bps == 1_250_000_000.0
    assert rp.current_rate_bps == pytest.approx(957_493_800.6699085)


def test_min_rate_floor() -> None:
    rp, _ = make()
    for _ in range(100):
        rp.on_cnm(63)
    assert rp.current_rate_bps == 10e6


def test_two_qcn_mode_byte_counter_only() -> None:
    params = replace(QcnParams.preset("2-qcn").rp, jitter=0.0)
    rp, clock = make(params)
    rp.on_cnm(63)
    assert rp.timer_deadline is None
    clock.now = 10.0
    assert rp.advance(clock.now) == 0
    for _ in range(5):
        assert send_until_cycle_ends(rp) == 101
    # No halving in 2-QCN: AI cycles are 100-frame cycles too, with R_AI = 25 Mb/s.
    assert send_until_cycle_ends(rp) == 101
    assert rp.target_rate_bps == 10_025_000_000.0
    assert rp.current_rate_bps == 9_935_595_703.125
    for _ in range(20):
        send_until_cycle_ends(rp)
    assert rp.stage is Stage.ACTIVE_INCREASE  # never HAI


def test_fb_hat_shrinks_cycles_when_no_recent_feedback() -> None:
    params = replace(QcnParams.preset("2-qcn").rp, jitter=0.0, fb_hat=True)
    rp, _ = make(params)
    rp.on_cnm(63)
    assert rp.fb_hat == 31  # saturates at 31
    # Fb-hat 31 > 1 at the cycle start: 100 frames (150 KB); halved every 50 frames sent.
    assert send_until_cycle_ends(rp) == 101
    assert rp.fb_hat == 31 >> 2
    assert send_until_cycle_ends(rp) == 101  # started with Fb-hat 7
    assert rp.fb_hat == 1  # 202 frames: halved 4 times, 31 -> 15 -> 7 -> 3 -> 1
    assert send_until_cycle_ends(rp) == 51  # Fb-hat <= 1: 50-frame cycle
    rp.on_cnm(2)
    assert rp.fb_hat == 2
    assert send_until_cycle_ends(rp) == 101


def test_jitter_keeps_cycles_within_15_percent() -> None:
    rp, clock = make(RpParams(), seed=7)
    rp.on_cnm(10)
    lengths = []
    for _ in range(200):
        start = rp.timer_deadline or 0.0
        clock.now = start
        rp.on_timer()
        assert rp.timer_deadline is not None
        lengths.append((rp.timer_deadline - clock.now) / (0.015 if rp.time_stage < 5 else 0.0075))
        if rp.time_stage > 50:
            rp.on_cnm(1)
    assert min(lengths) >= 0.85
    assert max(lengths) <= 1.15
    assert max(lengths) - min(lengths) > 0.2  # jitter is really applied
    frames = [send_until_cycle_ends(rp) for _ in range(5)]
    assert all(86 <= f <= 116 for f in frames[:4])  # 100 frames +/- 15 % (+1 for BC < 0)


def test_two_point_qntzfb_zero_is_a_cut_of_nothing_that_restarts_recovery() -> None:
    # Two-point QCN: a CNM means Fb < 0; QntzFb 0 is a feedback below one quantum. The RP
    # treats it as every CNM (docs/qcn.md, "QntzFb 0"): no cut, TR = CR, cycles restart.
    rp, _ = make()
    rp.on_cnm(63)
    send_until_cycle_ends(rp)
    send_until_cycle_ends(rp)
    assert (rp.current_rate_bps, rp.byte_stage) == (8_769_531_250.0, 2)
    rp.on_cnm(0)
    assert rp.current_rate_bps == 8_769_531_250.0
    assert rp.target_rate_bps == 8_769_531_250.0
    assert (rp.byte_stage, rp.time_stage, rp.cnms, rp.reinforcements) == (0, 0, 2, 0)
    assert send_until_cycle_ends(rp) == 101  # a whole new cycle


def test_positive_reinforcement_ends_the_cycle_at_once_with_one_step() -> None:
    params = replace(QcnParams.preset("2-qcn").rp, jitter=0.0, positive_reinforcement=True)
    rp, _ = make(params)
    rp.on_cnm(0)  # never cut: nothing to recover, and no cut either
    assert (rp.current_rate_bps, rp.cnms, rp.reinforcements) == (10e9, 0, 0)
    rp.on_cnm(63)
    for _ in range(20):
        rp.on_transmit(FRAME)  # 20 of the cycle's 101 frames sent
    expected_fr = [7_539_062_500.0, 8_769_531_250.0, 9_384_765_625.0, 9_692_382_812.5]
    for stage, cr in enumerate(expected_fr, start=1):
        rp.on_cnm(0)  # as the byte counter's expiry: FR's step, TR kept
        assert (rp.byte_stage, rp.current_rate_bps, rp.target_rate_bps) == (stage, cr, 10e9)
        assert rp.bytes_left == 150_000  # a new cycle from here
    rp.on_cnm(0)
    assert (rp.byte_stage, rp.target_rate_bps) == (5, 10e9)  # the last fast-recovery step
    rp.on_cnm(0)  # stage 6: active increase, R_AI = 25 Mb/s
    assert rp.stage is Stage.ACTIVE_INCREASE
    assert rp.target_rate_bps == 10_025_000_000.0
    assert rp.current_rate_bps == 9_935_595_703.125
    assert (rp.cnms, rp.reinforcements, rp.frames_since_cnm) == (1, 6, 20)
    # The byte counter goes on as before: reinforcements and expiries are the same steps.
    assert send_until_cycle_ends(rp) == 101
    assert rp.target_rate_bps == 10_050_000_000.0


def test_positive_reinforcement_ends_the_timer_cycle_too() -> None:
    params = replace(NO_JITTER, positive_reinforcement=True)
    rp, clock = make(params)
    rp.on_cnm(63)
    clock.now = 0.010  # 10 ms into the first 15 ms timer cycle
    rp.on_cnm(0)
    assert (rp.byte_stage, rp.time_stage) == (1, 1)
    assert rp.timer_deadline == 0.010 + 0.015
    assert rp.current_rate_bps == 7_539_062_500.0  # one step, not one per clock
    for _ in range(4):
        rp.on_cnm(0)
    # Past fast recovery both cycles are halved, as after expiries.
    assert rp.timer_deadline == 0.010 + 0.0075
    assert rp.bytes_left == 75_000


def test_positive_reinforcement_is_not_for_ecm() -> None:
    with pytest.raises(ParamError, match="positive_reinforcement"):
        replace(QcnParams.preset("ecm").rp, positive_reinforcement=True).validate()


def test_invalid_qntzfb_rejected() -> None:
    rp, _ = make()
    with pytest.raises(ValueError, match="QntzFb"):
        rp.on_cnm(64)


@st.composite
def events(draw: st.DrawFn) -> list[tuple[str, int]]:
    kinds = st.sampled_from(["cnm", "tx", "timer"])
    return draw(st.lists(st.tuples(kinds, st.integers(0, 63)), max_size=300))


@settings(max_examples=200, deadline=None)
@given(events(), st.booleans(), st.integers(0, 2**32))
def test_rate_stays_in_bounds_and_cnm_never_raises_it(
    seq: list[tuple[str, int]], two_qcn: bool, seed: int
) -> None:
    params = QcnParams.preset("2-qcn" if two_qcn else "qcn").rp
    rp, clock = make(params, seed=seed)
    for kind, value in seq:
        before = rp.current_rate_bps
        if kind == "cnm":
            rp.on_cnm(value)
            assert rp.current_rate_bps <= before
        elif kind == "tx":
            rp.on_transmit(64 + value * 100)
        else:
            clock.now += 0.001 * value
            rp.advance(clock.now)
        assert params.min_rate_bps <= rp.current_rate_bps <= params.line_rate_bps
