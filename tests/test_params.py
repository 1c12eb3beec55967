"""Parameter sets: spec defaults, TOML round trip, and validation naming the field."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from qcn.core.params import (
    CpJudge,
    CpParams,
    ParamError,
    QcnParams,
    QueueDepth,
    QueueUnit,
    SamplingMode,
)


def test_defaults_are_the_spec_table() -> None:
    p = QcnParams()
    assert (p.cp.q_eq_pkts, p.cp.w, p.cp.p_base, p.cp.p_scale) == (22, 2.0, 0.01, 0.09 / 64)
    r = p.rp
    assert (r.gd, r.min_rate_bps, r.bc_limit_bytes, r.timer_s) == (1 / 128, 10e6, 150_000, 0.015)
    assert (r.r_ai_bps, r.r_hai_bps, r.fast_recovery_th, r.jitter) == (5e6, 50e6, 5, 0.15)
    assert r.rate_unit_bps == 1e6
    # The standard's CP: arriving frames, counted in bytes; q_eq = 33 KB = 22 frames.
    assert (p.cp.depth_at, p.cp.queue_unit, p.cp.q_eq) == ("arrival", "bytes", 33_000)
    assert p.cp.fb_max == 110 * 1500
    assert replace(p.cp, queue_unit=QueueUnit.PACKETS).fb_max == 110


def test_two_qcn_preset() -> None:
    r = QcnParams.preset("2-qcn").rp
    assert not r.timer_enabled
    assert not r.hai_enabled
    assert not r.shorten_cycles_after_fr
    assert r.r_ai_bps == 25e6


def test_round_trip(tmp_path: Path) -> None:
    p = QcnParams.from_dict(
        {
            "cp": {
                "q_eq_pkts": 17,
                "sampling": "byte-interval",
                "depth_at": "dequeue",
                "queue_unit": "packets",
                "judge": "admitted",
            },
            "rp": {"r_ai_bps": 3e6},
        }
    )
    assert p.cp.sampling is SamplingMode.BYTE_INTERVAL
    assert p.cp.depth_at is QueueDepth.DEQUEUE
    f = tmp_path / "p.toml"
    p.save(f)
    assert QcnParams.load(f) == p


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"cp": {"q_eq_pkts": 0}}, "cp.q_eq_pkts"),
        ({"cp": {"q_eq_pkts": 2.5}}, "cp.q_eq_pkts"),
        # Fbmax too large for exact quantisation (bytes mode: 1000 frames of 1500 B)
        ({"cp": {"q_eq_pkts": 1000}}, "cp.q_eq_bytes"),
        ({"cp": {"q_eq_pkts": 2048, "queue_unit": "packets"}}, "cp.q_eq_pkts"),
        ({"cp": {"w": -1}}, "cp.w"),
        ({"cp": {"w": 0.3}}, "cp.w"),
        ({"cp": {"p_base": 1.5}}, "cp.p_base"),
        ({"cp": {"p_base": -0.1}}, "cp.p_base"),
        ({"cp": {"p_scale": 0.5}}, "cp.p_scale"),
        ({"cp": {"p_base": 0.5, "p_scale": 0.01}}, "cp.p_scale"),
        ({"cp": {"sampling": "sometimes"}}, "cp.sampling"),
        ({"cp": {"depth_at": "departure"}}, "cp.depth_at"),
        ({"cp": {"queue_unit": "frames"}}, "cp.queue_unit"),
        ({"cp": {"sample_intervals_bytes": [1, 2]}}, "cp.sample_intervals_bytes"),
        ({"cp": {"sample_intervals_bytes": [150000] * 7 + [0]}}, "cp.sample_intervals_bytes[7]"),
        ({"cp": {"sample_jitter": 1.0}}, "cp.sample_jitter"),
        ({"cp": {"qeq": 3}}, "cp.qeq"),
        ({"cp": {"reflect_p0": 1.5}}, "cp.reflect_p0"),
        ({"cp": {"reflect_p_base": -0.5}}, "cp.reflect_p_base"),
        ({"cp": {"reflect_p_base": 0.5, "reflect_p_scale": 0.01}}, "cp.reflect_p_scale"),
        ({"cp": {"three_point": 1}}, "cp.three_point"),
        ({"cp": {"three_point": True, "positive_feedback": True}}, "cp.three_point"),
        (
            {"cp": {"three_point": True, "depth_at": "enqueue", "queue_unit": "packets"}},
            "cp.three_point",
        ),
        ({"rp": {"line_rate_bps": 0}}, "rp.line_rate_bps"),
        ({"rp": {"min_rate_bps": 20e9}}, "rp.min_rate_bps"),
        ({"rp": {"rate_unit_bps": 0}}, "rp.rate_unit_bps"),
        ({"rp": {"gd": 0}}, "rp.gd"),
        ({"rp": {"gd": 0.5}}, "rp.gd"),
        ({"rp": {"bc_limit_bytes": 0}}, "rp.bc_limit_bytes"),
        ({"rp": {"timer_s": 0}}, "rp.timer_s"),
        ({"rp": {"r_ai_bps": -1}}, "rp.r_ai_bps"),
        ({"rp": {"r_hai_bps": "fast"}}, "rp.r_hai_bps"),
        ({"rp": {"fast_recovery_th": 0}}, "rp.fast_recovery_th"),
        ({"rp": {"jitter": 2}}, "rp.jitter"),
        ({"rp": {"hai_min_frames": -5}}, "rp.hai_min_frames"),
        ({"rp": {"timer_enabled": "yes"}}, "rp.timer_enabled"),
        ({"rp": {"frame_bytes": 10}}, "rp.frame_bytes"),
        ({"rq": {}}, "rq"),
    ],
)
def test_invalid_field_refused_with_its_name(data: dict[str, object], field: str) -> None:
    with pytest.raises(ParamError) as e:
        QcnParams.from_dict(data)
    assert e.value.field == field
    assert str(e.value).startswith(field + ":")


def test_unknown_field_suggests_nearest() -> None:
    with pytest.raises(ParamError, match="did you mean 'q_eq_pkts'"):
        QcnParams.from_dict({"cp": {"q_eq_pkt": 3}})


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("[cp]\nw = -2\n")
    with pytest.raises(ParamError, match=r"bad\.toml: cp\.w: must be in \[0, 64\]"):
        QcnParams.load(f)
    f.write_text("[cp\n")
    with pytest.raises(ParamError, match="not valid TOML"):
        QcnParams.load(f)
    with pytest.raises(ParamError, match="cannot read"):
        QcnParams.load(tmp_path / "missing.toml")


def test_bytes_mode_q_eq_and_its_limits() -> None:
    assert CpParams(q_eq_pkts=30).q_eq == 45_000  # follows the frame count...
    assert CpParams(q_eq_pkts=30, q_eq_bytes=26_000).q_eq == 26_000  # ...unless set (seed 001)
    with pytest.raises(ParamError, match=r"cp\.queue_unit.*enqueue depth counts packets"):
        CpParams(depth_at=QueueDepth.ENQUEUE).validate()
    with pytest.raises(ParamError, match=r'cp\.judge.*set judge = "admitted"'):
        CpParams(depth_at=QueueDepth.ENQUEUE, queue_unit=QueueUnit.PACKETS).validate()
    CpParams(
        depth_at=QueueDepth.ENQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED
    ).validate()
    # Exact quantisation needs (2w+1) * q_eq * 16 <= 2^24: 209,715 bytes at w = 2.
    CpParams(q_eq_bytes=209_715).validate()
    with pytest.raises(ParamError, match=r"cp\.q_eq_bytes.*exact quantisation"):
        CpParams(q_eq_bytes=209_716).validate()


def test_probabilities_read_back_from_a_switch_pass_their_check() -> None:
    """long-lived's BMv2 sampling (p_base 0.05, p_scale 0.95/63: exactly 1 at QntzFb 63) as
    a switch holds it, in 24-bit fixed point, sums to 1 + 9e-7: `qcn ctl set s3 4
    --q-eq-pkts 44` during such a run was refused ("must be in [0, 1] (got 1)")."""
    from qcn.core.params import PROB_ONE  # noqa: PLC0415

    def read_back(x: float) -> float:
        return round(x * PROB_ONE) / PROB_ONE

    held = CpParams(p_base=read_back(0.05), p_scale=read_back(0.95 / 63))
    assert held.p_base + 63 * held.p_scale > 1
    assert held.with_changes({"q_eq_pkts": 44}).q_eq_pkts == 44
    with pytest.raises(ParamError, match="is a probability"):
        held.with_changes({"p_scale": 0.951 / 63})  # 1.001: still refused


def test_a_min_rate_below_the_rate_unit_says_how_the_two_relate() -> None:
    """Issue 63: --set qcn.rp.min_rate_bps=10000 was refused with an error about
    rp.rate_unit_bps, a field the user never set."""
    with pytest.raises(ParamError) as e:
        QcnParams.from_dict({"rp": {"min_rate_bps": 10_000}})
    assert e.value.field == "rp.min_rate_bps"
    assert str(e.value) == (
        "rp.min_rate_bps: MIN_RATE 10 kb/s is less than one rate unit (rate_unit_bps, 1 Mb/s): "
        "a limiter's rate is a whole number of units and never below MIN_RATE, so MIN_RATE is "
        "at least one unit; give rate_unit_bps (beside min_rate_bps) 10000 or less too"
    )
    both = QcnParams.from_dict({"rp": {"min_rate_bps": 10_000, "rate_unit_bps": 10_000}})
    assert both.rp.min_rate_bps == both.rp.rate_unit_bps == 10_000
