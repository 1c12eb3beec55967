"""Every numeric parameter states its unit where it is declared (qcn/core/units.py), and
BMv2 scaling reads the unit from there: no list of fields kept beside them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from qcn.core import scenario as scenarios
from qcn.core.scenario import fields_in, unit_roots
from qcn.core.units import Unit, numeric_fields, scaled_fields, unit_of


def test_every_numeric_parameter_has_a_unit() -> None:
    missing = [name for name, f in numeric_fields(unit_roots()) if unit_of(f) is None]
    assert missing == []


def test_a_numeric_field_without_a_unit_is_found() -> None:
    @dataclass(frozen=True)
    class Forgotten:
        step_bps: float = 1e6
        enabled: bool = True  # (not a number)

    found = [name for name, f in numeric_fields({"x": Forgotten}) if unit_of(f) is None]
    assert found == ["x.step_bps"]


def test_the_units_give_the_fields_bmv2_scaling_always_scaled() -> None:
    """The lists kept by hand before the units, pinned: the same fields scale the same way
    (make reproduce's rows and every BMv2 scale stay as they were)."""
    assert set(fields_in(Unit.RATE)) == {
        "network.line_rate_bps", "network.bottleneck_rate_bps", "network.fabric_rate_bps",
        "network.innocent_rate_bps", "workload.max_rate_bps", "qcn.rp.line_rate_bps",
        "qcn.rp.min_rate_bps", "qcn.rp.rate_unit_bps", "qcn.rp.r_ai_bps", "qcn.rp.r_hai_bps",
        "qcn.rp.ecm.ru_bps", "qcn.rp.ecm.rd_bps",
    }  # fmt: skip
    assert set(fields_in(Unit.TIME)) == {
        "duration_s", "network.rtt_s", "workload.stagger_s", "workload.mean_on_s",
        "workload.mean_off_s", "workload.hotspot_start_s", "workload.hotspot_duration_s",
        "workload.hotspot_period_s", "workload.rto_s", "qcn.rp.timer_s",
        "qcn.rp.timer_expiry_step_s", "qcn.rp.timer_cnm_step_s", "qcn.rp.ecm.td_s",
        "qcn.rp.dcqcn.alpha_timer_s", "qcn.rp.dcqcn.cnp_interval_s",
    }  # fmt: skip
    assert set(fields_in(Unit.VOLUME)) == {
        "workload.flow_size_scale", "qcn.cp.sample_intervals_bytes", "qcn.rp.bc_limit_bytes",
        "qcn.rp.hai_min_frames",
    }  # fmt: skip


@pytest.mark.parametrize("name", ["transient", "leaf-spine-fct", "parking-lot", "fct"])
def test_scaling_follows_the_units(name: str) -> None:
    sc = scenarios.load(name)
    k, tau = sc.bmv2.rate_scale, sc.bmv2.time_scale
    scaled = sc.scaled_for_bmv2()
    before, after = sc.to_dict(), scaled.to_dict()
    overridden = set(sc.bmv2.set)

    def value(data: dict[str, object], dotted: str) -> object:
        """The field's value in a scenario's dict (None: the dict leaves it out)."""
        node: object = data
        for key in dotted.split("."):
            assert isinstance(node, dict)
            node = node.get(key)
        return node

    for unit, factor in ((Unit.RATE, k), (Unit.TIME, tau), (Unit.VOLUME, k * tau)):
        for dotted in fields_in(unit):
            if dotted in overridden or dotted == "qcn.cp.sample_intervals_bytes":
                continue  # ([bmv2.set] wins; the intervals have a floor: below)
            old, new = value(before, dotted), value(after, dotted)
            assert isinstance(old, int | float)
            assert isinstance(new, int | float)
            if dotted == "qcn.rp.bc_limit_bytes":
                assert new == max(64, round(old * factor)), dotted
            else:
                assert new == pytest.approx(old * factor, abs=0.5 if isinstance(old, int) else 0)
    for dotted in scaled_fields(unit_roots(), Unit.SIZE) + scaled_fields(unit_roots(), Unit.NONE):
        if dotted not in overridden and not dotted.startswith("workload.flow"):
            assert value(after, dotted) == value(before, dotted), dotted
