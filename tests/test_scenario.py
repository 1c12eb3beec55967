"""Scenario overrides (qcn/core/scenario.py): a preset given on the command line takes
effect, and the scenario's own explicit choices survive it."""

from __future__ import annotations

import pytest

from qcn.core import scenario as scenarios
from qcn.core.params import CpSignal, QcnParams


def test_a_preset_override_replaces_the_scenarios_base_set() -> None:
    sc = scenarios.load("transient")  # qcn_preset = "2-qcn"
    assert (sc.preset, sc.params.rp.timer_enabled, sc.params.rp.r_ai_bps) == ("2-qcn", False, 25e6)
    full = sc.with_overrides({"qcn_preset": "qcn"})
    assert full.preset == "qcn"
    assert full.params.rp == QcnParams.preset("qcn").rp  # the transient sets no RP field
    assert full.params.rp.timer_enabled
    assert full.params.rp.hai_enabled
    assert full.params.rp.r_ai_bps == 5e6


def test_explicit_choices_survive_a_preset_change_and_later_overrides_win() -> None:
    sc = scenarios.load("transient").with_overrides({"qcn.cp.q_eq_pkts": 30})
    full = sc.with_overrides({"qcn_preset": "qcn", "qcn.rp.r_ai_bps": 7e6})
    assert full.params.cp.q_eq_pkts == 30
    assert full.params.rp.r_ai_bps == 7e6
    assert full.params.rp.timer_enabled


def test_the_preset_survives_scaling_for_bmv2() -> None:
    full = scenarios.load("transient").with_overrides({"qcn_preset": "qcn"})
    scaled = full.scaled_for_bmv2(keep=["qcn_preset"])
    assert scaled.preset == "qcn"
    assert scaled.params.rp.timer_enabled
    assert scaled.params.rp.r_ai_bps == 5e6 * full.bmv2.rate_scale


def test_a_port_holds_its_own_signal_and_marking_curve() -> None:
    """port_cp carries DCQCN's per-port fields (PORT_CP_FIELDS): the signal by its name,
    the curve's thresholds and pmax; a value of the wrong type is one line naming it."""
    sc = scenarios.load("transient")
    port = str(sc.topology.cp_ports[0])
    data = sc.to_dict()
    data["port_cp"] = {
        port: {"signal": "ecn", "kmin_bytes": 1_000, "kmax_bytes": 9_000, "pmax": 0.2}
    }
    own = scenarios.parse(data).cp_for(port)
    assert (own.signal, own.kmin_bytes, own.kmax_bytes, own.pmax) == (
        CpSignal.ECN,
        1_000,
        9_000,
        0.2,
    )
    assert sc.cp_for(port).signal is CpSignal.CNM
    for fields, message in (
        ({"signal": "red"}, f"port_cp.{port}.signal: must be one of"),
        ({"kmin_bytes": 1.5}, f"port_cp.{port}.kmin_bytes: must be a whole number"),
        ({"kmin_bytes": 9_000, "kmax_bytes": 9_000}, f"port_cp.{port}.kmax_bytes: must be"),
    ):
        data["port_cp"] = {port: fields}
        with pytest.raises(scenarios.ScenarioError) as e:
            scenarios.parse(data)
        assert str(e.value).startswith(f"scenario: {message}"), str(e.value)
