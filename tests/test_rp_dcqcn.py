"""DCQCN's reaction point (reaction_point/rules.py's DcqcnRules) against an independent
implementation of the paper's pseudocode, written here from docs/dcqcn.md ("The reaction
point") and not from the rules: the alpha timer is a real timer here (an event every K),
the two clocks' stages are counted as the paper counts them, and the increase is the
paper's three cases.  Both are driven by the same random CNP / frame / time events, a
million in all, and every rate is compared to 1e-9; plus hand-computed sequences."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

import pytest

from qcn.core.params import DcqcnParams, ParamError, QcnParams, RpParams
from qcn.reaction_point.rules import DcqcnRules, RateLimiterRules, Stage
from tests.test_rp_schemes import Clock

DCQCN = QcnParams.preset("dcqcn").rp
LINE = DCQCN.line_rate_bps


@dataclass
class PaperRp:
    """DCQCN's reaction point as the paper states it, event by event (no shared code)."""

    p: RpParams
    uniform: random.Random
    rc: float = 0.0
    rt: float = 0.0
    alpha: float = 0.0
    t_stage: int = 0
    bc_stage: int = 0
    bytes_left: float = 0.0
    increase_at: float = math.inf
    alpha_at: float = math.inf
    cut: bool = False

    def __post_init__(self) -> None:
        self.rc = self.rt = self.p.line_rate_bps
        self.alpha = self.p.own(DcqcnParams).alpha_initial

    def _jitter(self) -> float:
        j = self.p.jitter
        return 1.0 - j + 2.0 * j * self.uniform.random()

    def run_timers(self, now: float) -> None:
        """Every timer that expires by ``now``, in time order (alpha's first on a tie)."""
        own = self.p.own(DcqcnParams)
        while min(self.increase_at, self.alpha_at) <= now:
            if self.alpha_at <= self.increase_at:
                self.alpha = (1 - own.g) * self.alpha  # K passed without a CNP
                self.alpha_at += own.alpha_timer_s
            else:
                self.t_stage += 1
                self.increase_at += self.p.timer_s * self._jitter()
                self.raise_rate()

    def cnp(self, now: float) -> None:
        own = self.p.own(DcqcnParams)
        self.cut = True
        self.rt = self.rc
        self.rc = max(self.p.min_rate_bps, self.rc * (1 - self.alpha / 2))
        self.alpha = (1 - own.g) * self.alpha + own.g
        self.alpha_at = now + own.alpha_timer_s
        self.t_stage = self.bc_stage = 0
        self.bytes_left = self.p.bc_limit_bytes * self._jitter()
        if self.p.timer_enabled:
            self.increase_at = now + self.p.timer_s * self._jitter()

    def sent(self, nbytes: int) -> None:
        if not self.cut:
            return
        self.bytes_left -= nbytes
        if self.bytes_left <= 0:
            self.bc_stage += 1
            self.bytes_left = self.p.bc_limit_bytes * self._jitter()
            self.raise_rate()

    def raise_rate(self) -> None:
        f = self.p.fast_recovery_th
        if max(self.t_stage, self.bc_stage) <= f:
            pass  # fast recovery: towards the rate before the cut
        elif min(self.t_stage, self.bc_stage) > f and self.p.hai_enabled:
            self.rt += (min(self.t_stage, self.bc_stage) - f) * self.p.r_hai_bps
        else:
            self.rt += self.p.r_ai_bps
        self.rc = min(self.p.line_rate_bps, (self.rt + self.rc) / 2)


CASES = {
    # The paper's values, a byte counter short enough to count.
    "paper, 150 KB byte counter": replace(DCQCN, bc_limit_bytes=150_000),
    "paper as given (10 MB)": DCQCN,
    "jittered cycles, fast timer": replace(DCQCN, jitter=0.15, timer_s=20e-6),
    "byte counter alone": replace(DCQCN, timer_enabled=False, bc_limit_bytes=30_000),
    "no HAI, g 1/16, K 10 us": replace(DCQCN, hai_enabled=False, bc_limit_bytes=60_000).with_own(
        g=1 / 16, alpha_timer_s=10e-6
    ),
    "high floor, alpha from 0.5": replace(DCQCN, min_rate_bps=2e9).with_own(alpha_initial=0.5),
}
EVENTS_PER_CASE = 1_000_000 // len(CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_the_rules_are_the_papers_pseudocode_over_random_events(case: str) -> None:
    params = CASES[case]
    params.validate()
    clock = Clock()
    rules_draws, paper_draws = random.Random(7), random.Random(7)
    rules = RateLimiterRules(params, clock, rules_draws.random)
    assert isinstance(rules, DcqcnRules)
    paper = PaperRp(params, paper_draws)
    events = random.Random(f"dcqcn {case}")
    cnp_share = events.choice((0.002, 0.01, 0.05))
    regimes: set[Stage] = set()
    for _ in range(EVENTS_PER_CASE):
        clock.now += events.expovariate(1 / 2e-6)  # a 1500-byte frame at 6 Gb/s, on average
        rules.advance(clock.now)
        paper.run_timers(clock.now)
        if events.random() < cnp_share:
            rules.on_cnm(0)
            paper.cnp(clock.now)
        else:
            rules.on_transmit(1500)
            paper.sent(1500)
        # (plain comparisons: pytest.approx a million times costs more than the rules)
        assert abs(rules.current_rate_bps - paper.rc) <= 1e-9 * paper.rc, (clock.now, paper)
        assert abs(rules.target_rate_bps - paper.rt) <= 1e-9 * paper.rt, (clock.now, paper)
        assert rules.byte_stage == paper.bc_stage
        assert rules.time_stage == paper.t_stage
        regimes.add(rules.stage)
    assert rules.alpha == pytest.approx(paper.alpha, rel=1e-9)
    # The drive reached the regimes the parameters allow.
    assert Stage.FAST_RECOVERY in regimes
    assert Stage.ACTIVE_INCREASE in regimes
    if params.hai_enabled and params.timer_enabled and params.bc_limit_bytes < 1_000_000:
        assert Stage.HYPER_ACTIVE_INCREASE in regimes


def test_the_first_cnp_halves_the_rate_and_moves_alpha_by_g() -> None:
    clock = Clock()
    rp = RateLimiterRules(DCQCN, clock, lambda: 0.5)
    rp.on_cnm(0)
    assert rp.current_rate_bps == LINE / 2  # alpha 1: CR * (1 - 1/2)
    assert rp.target_rate_bps == LINE
    assert isinstance(rp, DcqcnRules)
    assert rp.alpha == 1.0  # (1 - g) * 1 + g
    clock.now = 54e-6
    rp.on_cnm(0)  # within K: no decay; alpha is still 1
    assert rp.current_rate_bps == LINE / 4
    assert rp.target_rate_bps == LINE / 2


def test_alpha_decays_once_per_k_without_a_cnp() -> None:
    clock = Clock()
    rp = RateLimiterRules(DCQCN.with_own(alpha_initial=0.5), clock, lambda: 0.5)
    assert isinstance(rp, DcqcnRules)
    rp.on_cnm(0)
    g = 1 / 256
    after_cut = (1 - g) * 0.5 + g
    assert rp.alpha == after_cut
    clock.now = 3.5 * 55e-6  # three decays, the fourth not yet
    assert rp.alpha == pytest.approx(after_cut * (1 - g) ** 3, rel=1e-12)
    before = rp.current_rate_bps
    rp.advance(clock.now)
    rp.on_cnm(0)
    decayed = after_cut * (1 - g) ** 3
    assert rp.current_rate_bps == pytest.approx(rp.target_rate_bps * (1 - decayed / 2))
    assert rp.target_rate_bps > before  # the timer's three increases raised CR first
    assert rp.alpha == pytest.approx((1 - g) * decayed + g, rel=1e-12)


def test_fast_recovery_then_additive_then_hyper_increase_by_the_timer() -> None:
    """Timer cycles alone (a byte counter too long to end): F = 5 cycles of fast recovery,
    then R_AI per cycle; HAI needs both clocks past F, so the timer alone never reaches it."""
    clock = Clock()
    rp = RateLimiterRules(DCQCN, clock, lambda: 0.5)
    rp.on_cnm(0)
    cr, tr = LINE / 2, LINE
    for cycle in range(1, 9):
        clock.now = cycle * 55e-6
        assert rp.advance(clock.now) == 1
        if cycle > 5:
            tr += 40e6
        cr = min(LINE, (cr + tr) / 2)
        assert rp.current_rate_bps == pytest.approx(cr, rel=1e-12)
        assert rp.target_rate_bps == pytest.approx(tr, rel=1e-12)


def test_hyper_increase_when_both_clocks_are_past_f() -> None:
    clock = Clock()
    params = replace(DCQCN, bc_limit_bytes=1500)  # a byte cycle a frame
    rp = RateLimiterRules(params, clock, lambda: 0.5)
    rp.on_cnm(0)
    rp.on_cnm(0)  # CR = LINE / 4, TR = LINE / 2
    for cycle in range(1, 7):
        clock.now = cycle * 55e-6
        rp.advance(clock.now)  # time stage 6
    for _ in range(6):
        rp.on_transmit(1500)  # byte stage 6
    tr = rp.target_rate_bps
    rp.on_transmit(1500)  # byte stage 7, time stage 6: HAI by min - F = 1
    assert rp.target_rate_bps == pytest.approx(tr + 50e6, rel=1e-12)


def test_dcqcn_refuses_qcns_variants_in_one_line() -> None:
    with pytest.raises(ParamError, match=r"rp.fb_hat: Fb-hat is seed 000's: set it false"):
        replace(DCQCN, fb_hat=True).validate()
    with pytest.raises(ParamError, match=r"rp.shorten_cycles_after_fr"):
        RpParams(scheme="dcqcn").validate()
    with pytest.raises(ParamError, match=r"rp.dcqcn.g: must be in \(0, 1\]"):
        DCQCN.with_own(g=0.0).validate()


def test_the_preset_is_the_papers_table() -> None:
    params = QcnParams.preset("dcqcn")
    own = params.rp.own(DcqcnParams)
    assert (params.cp.signal.value, params.cp.kmin_bytes, params.cp.kmax_bytes) == (
        "ecn",
        5_000,
        200_000,
    )
    assert params.cp.pmax == 0.01
    assert (own.g, own.alpha_timer_s, own.cnp_interval_s) == (1 / 256, 55e-6, 50e-6)
    assert (params.rp.timer_s, params.rp.bc_limit_bytes, params.rp.r_ai_bps) == (
        55e-6,
        10_000_000,
        40e6,
    )
    assert params.rp.fast_recovery_th == 5
    assert QcnParams.from_dict(params.to_dict()) == params
