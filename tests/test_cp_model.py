"""The CP reference model against the spec's formulas (docs/qcn.md, "Congestion Point").

In packets: the model is unit-free (q, q_eq and Fb in one unit), and the spec writes its
formulas in frames; test_bytes_is_packets_scaled covers bytes."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qcn.core.cp_model import (
    CongestionPoint,
    CpPortConfig,
    FbTag,
    end_reflection,
    overwrite_fb_tag,
    quantize,
)
from qcn.core.params import PROB_ONE, CpParams, QueueUnit, SamplingMode

ALWAYS = CpParams(queue_unit=QueueUnit.PACKETS, p_base=1.0, p_scale=0.0)


def spec_qntz_fb(q: int, q_old: int, cp: CpParams) -> int:
    """QntzFb exactly as the spec writes it, in rational arithmetic."""
    w = Fraction(cp.w)
    fb = -((q - cp.q_eq_pkts) + w * (q - q_old))
    if fb >= 0:
        return 0
    fb_max = (2 * w + 1) * cp.q_eq_pkts
    return min(63, math.floor(-fb * 63 / fb_max))


def cp_at(cp: CpParams, q_old: int, rand: random.Random | None = None) -> CongestionPoint:
    point = CongestionPoint(CpPortConfig.from_params(cp), (rand or random.Random(1)).randint)
    point.q_old = q_old
    return point


def test_hand_computed_feedback() -> None:
    point = cp_at(ALWAYS, q_old=22)
    d = point.on_frame(q=30, frame_bytes=1500)
    # qoff = 8, qdelta = 8, Fb = -(8 + 2*8) = -24, Fbmax = 5*22 = 110, 24*63/110 = 13.7
    assert (d.qoff, d.qdelta, d.fb, d.qntz_fb, d.sampled, d.cnm) == (8, 8, -24.0, 13, True, True)
    assert point.q_old == 30


def test_queue_below_equilibrium_gives_no_cnm() -> None:
    point = cp_at(ALWAYS, q_old=10)
    d = point.on_frame(q=10, frame_bytes=1500)
    assert d.fb == 12.0
    assert d.qntz_fb == 0
    assert d.sampled
    assert not d.cnm


def test_saturates_at_63() -> None:
    point = cp_at(ALWAYS, q_old=0)
    assert point.on_frame(q=1000, frame_bytes=1500).qntz_fb == 63


def test_q_old_only_moves_on_samples() -> None:
    point = cp_at(CpParams(queue_unit=QueueUnit.PACKETS, p_base=0.0, p_scale=0.0), q_old=5)
    for q in (40, 50, 60):
        d = point.on_frame(q=q, frame_bytes=1500)
        assert not d.sampled
        assert d.qdelta == q - 5
    assert point.q_old == 5


@given(
    q=st.integers(0, 3000),
    q_old=st.integers(0, 3000),
    q_eq=st.integers(1, 400),
    w16=st.integers(0, 64),
)
def test_quantisation_is_exactly_the_spec_floor(q: int, q_old: int, q_eq: int, w16: int) -> None:
    cp = CpParams(queue_unit=QueueUnit.PACKETS, q_eq_pkts=q_eq, w=w16 / 16)
    if cp.fb_max * 16 > 1 << 16:
        return
    d = cp_at(replace(cp, p_base=1.0, p_scale=0.0), q_old).on_frame(q, 1500)
    assert d.qntz_fb == spec_qntz_fb(q, q_old, cp)
    assert 0 <= d.qntz_fb <= 63
    assert d.cnm == (d.fb < 0)


@given(q_old=st.integers(0, 500), qs=st.lists(st.integers(0, 500), min_size=2, max_size=30))
def test_qntzfb_non_decreasing_in_q(q_old: int, qs: list[int]) -> None:
    cfg = CpPortConfig.from_params(CpParams(queue_unit=QueueUnit.PACKETS))
    values = [quantize(-((q - 22) * 16 + cfg.w_fixed * (q - q_old)), cfg) for q in sorted(qs)]
    assert values == sorted(values)


def test_bernoulli_threshold_encoding() -> None:
    cfg = CpPortConfig.from_params(CpParams(queue_unit=QueueUnit.PACKETS))
    assert cfg.p_base_fixed == round(0.01 * PROB_ONE)
    assert cfg.p_base_fixed + 63 * cfg.p_scale_fixed == pytest.approx(0.09859375 * PROB_ONE, abs=64)


def test_bernoulli_sampling_rate() -> None:
    point = cp_at(CpParams(queue_unit=QueueUnit.PACKETS, p_base=0.1, p_scale=0.0), q_old=0)
    n = 20_000
    hits = sum(point.on_frame(q=0, frame_bytes=1500).sampled for _ in range(n))
    sd = math.sqrt(n * 0.1 * 0.9)
    assert abs(hits - n * 0.1) < 4 * sd


def test_byte_interval_sampling_with_jitter() -> None:
    cp = CpParams(queue_unit=QueueUnit.PACKETS, sampling=SamplingMode.BYTE_INTERVAL)
    point = cp_at(cp, q_old=0, rand=random.Random(3))
    assert point.on_frame(q=0, frame_bytes=1500).sampled  # register starts at 0
    gaps: list[int] = []
    since = 0
    for _ in range(20_000):
        since += 1500
        if point.on_frame(q=0, frame_bytes=1500).sampled:
            gaps.append(since)
            since = 0
    # QntzFb 0 -> 150 KB +/- 15 %, rounded up to whole 1500-byte frames.
    assert min(gaps) >= 127_500
    assert max(gaps) <= 172_500 + 1500
    assert max(gaps) - min(gaps) > 20_000


def test_byte_interval_shrinks_under_congestion() -> None:
    cp = CpParams(
        queue_unit=QueueUnit.PACKETS, sampling=SamplingMode.BYTE_INTERVAL, sample_jitter=0.0
    )
    point = cp_at(cp, q_old=200)
    point.on_frame(q=200, frame_bytes=1500)  # QntzFb 63 -> interval 18.5 KB
    assert point.bytes_to_sample == 18_500


@pytest.mark.parametrize(
    "cp",
    [
        CpParams(queue_unit=QueueUnit.PACKETS),
        CpParams(queue_unit=QueueUnit.PACKETS, p_base=0.02, p_scale=0.2 / 64),
        CpParams(queue_unit=QueueUnit.PACKETS, sampling=SamplingMode.BYTE_INTERVAL),
        CpParams(queue_unit=QueueUnit.PACKETS, positive_feedback=True, p_base=0.05, p_scale=0.0),
    ],
    ids=["bernoulli", "bernoulli-steep", "byte-interval", "ecm"],
)
def test_two_stages_decide_as_computing_every_frame(cp: CpParams) -> None:
    """sample() (the pipeline's stage 1 first) and on_frame() (Fb for every frame) draw the
    same numbers and send the same CNMs for the same frames, from the same state."""
    every = CongestionPoint(CpPortConfig.from_params(cp), random.Random(7).randint)
    staged = CongestionPoint(CpPortConfig.from_params(cp), random.Random(7).randint)
    walk = random.Random(3)
    q, sent = 0, 0
    for _ in range(20_000):
        q = max(0, min(120, q + walk.choice((-2, -1, 0, 1, 1, 2))))
        size = walk.choice((64, 1500, 9000))
        full = every.on_frame(q, size)
        fast = staged.sample(q, size)
        if fast is None:
            assert not full.sampled
        else:
            assert fast == full
        assert (staged.q_old, staged.bytes_to_sample) == (every.q_old, every.bytes_to_sample)
        sent += full.cnm
    assert sent > 100  # the walk congests: the comparison covered CNMs


@given(
    st.integers(0, 200), st.integers(0, 200), st.integers(1, 60), st.integers(0, 64),
    st.sampled_from([64, 1000, 1500, 9000]),
)  # fmt: skip
def test_bytes_is_packets_scaled(q: int, q_old: int, q_eq: int, w16: int, size: int) -> None:
    """Every frame of ``size`` bytes: bytes mode decides exactly as packets mode."""
    pkts = CpParams(queue_unit=QueueUnit.PACKETS, q_eq_pkts=q_eq, w=w16 / 16)
    in_bytes = replace(pkts, queue_unit=QueueUnit.BYTES, q_eq_bytes=q_eq * size)
    if in_bytes.fb_max * 16 > 1 << 24:
        return  # outside exact quantisation: validation refuses it
    a, b = cp_at(pkts, q_old), cp_at(in_bytes, q_old * size)
    da, db = a.on_frame(q, size), b.on_frame(q * size, size)
    assert (da.qntz_fb, da.sampled, da.cnm) == (db.qntz_fb, db.sampled, db.cnm)
    assert db.fb_fp == da.fb_fp * size


# -- three-point QCN -----------------------------------------------------------------------

THREE_POINT = replace(ALWAYS, three_point=True)


def draw(value: int):  # type: ignore[no-untyped-def]
    """A v1model random() that always returns ``value``."""
    return lambda _lo, _hi: value


def test_three_point_cp_overwrites_only_a_less_negative_fb() -> None:
    d = cp_at(THREE_POINT, q_old=22).on_frame(q=30, frame_bytes=1500)  # QntzFb 13
    cfg = CpPortConfig.from_params(THREE_POINT)
    for held in (13, 20, 63):  # as negative or more: the tag stays
        tag = FbTag(False, held, 0xAB, 1, 1)
        assert overwrite_fb_tag(d, tag, cfg, cpid=7, rand=draw(0)) == tag
    fresh = overwrite_fb_tag(d, FbTag(), cfg, cpid=7, rand=draw(0))
    assert fresh == FbTag(True, 13, 7, 8, 8)  # reflect_p_base 1: always reflected
    # Below the equilibrium (Fb > 0) or not sampled: nothing.
    calm = cp_at(THREE_POINT, q_old=10).on_frame(q=10, frame_bytes=1500)
    assert overwrite_fb_tag(calm, FbTag(), cfg, cpid=7, rand=draw(0)) == FbTag()
    assert overwrite_fb_tag(d._replace(sampled=False), FbTag(), cfg, 7, draw(0)) == FbTag()


def test_three_point_cp_reflects_with_base_plus_qntzfb_times_scale() -> None:
    params = replace(THREE_POINT, reflect_p_base=0.25, reflect_p_scale=0.5 / 64)
    cfg = CpPortConfig.from_params(params)
    d = cp_at(params, q_old=22).on_frame(q=30, frame_bytes=1500)  # QntzFb 13
    threshold = round(0.25 * PROB_ONE) + 13 * round(0.5 / 64 * PROB_ONE)
    assert overwrite_fb_tag(d, FbTag(), cfg, 7, draw(threshold - 1)).reflected
    carried = overwrite_fb_tag(d, FbTag(), cfg, 7, draw(threshold))
    assert (carried.reflected, carried.qntz_fb) == (False, 13)


def test_end_reflection_point() -> None:
    cfg = CpPortConfig.from_params(replace(THREE_POINT, reflect_p0=0.25))
    p0 = round(0.25 * PROB_ONE)
    zero = FbTag()
    assert end_reflection(zero, cfg, cpid=9, rand=draw(p0 - 1)) == FbTag(cpid=9)
    assert end_reflection(zero, cfg, cpid=9, rand=draw(p0)) is None
    negative = FbTag(False, 20, 0xAB, 3, 1)
    assert end_reflection(negative, cfg, cpid=9, rand=draw(PROB_ONE - 1)) == negative
    assert end_reflection(negative._replace(reflected=True), cfg, 9, draw(0)) is None
    assert end_reflection(zero._replace(reflected=True), cfg, 9, draw(0)) is None
