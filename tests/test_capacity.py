"""The capacity model (qcn/core/capacity.py): the frames each BMv2 switch must forward, the
share of a core that takes, and the scale a run is slowed to when it would take more."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qcn.core import capacity
from qcn.core import scenario as scenarios
from qcn.core.capacity import (
    BUILT_IN_COST,
    FRAME_COST_S,
    SWITCH_BUDGET_CORES,
    choose_scale,
    switch_load,
    with_chosen_scale,
)
from qcn.core.scenario import ScenarioError
from qcn.lab.inputs import scale_overrides
from tests.kit import qcn

FRAME_BITS = 8 * 1500


def test_a_single_switch_forwards_what_its_sources_offer() -> None:
    sc = scenarios.load("transient").scaled_for_bmv2()  # 10 sources, 8.5 Mb/s each
    load = switch_load(sc)
    assert load.frames_per_s == {"s1": pytest.approx(10 * 8.5e6 / FRAME_BITS)}
    at_rest = BUILT_IN_COST.idle_cores  # one switch's CPU at rest
    assert load.cores == pytest.approx(at_rest + 10 * 8.5e6 / FRAME_BITS * FRAME_COST_S)


def test_a_port_passes_no_more_than_its_link_carries() -> None:
    """A parking lot: the long flow and cross flow 1 share hop 1 (s1 -> s2), which passes
    its link's worth on, each pair's frames in the same share; s2 then also takes cross
    flow 2's own frames."""
    sc = scenarios.load("parking-lot").scaled_for_bmv2()
    topo, hop = sc.topology, sc.network.bottleneck_rate_bps
    offered = sc.offered_bps(0.0) / len(sc.sources)  # each source's
    load = switch_load(sc).frames_per_s
    assert load["s1"] == pytest.approx(2 * offered / FRAME_BITS)
    passed = min(1.0, hop / (2 * offered))
    assert load["s2"] == pytest.approx((2 * offered * passed + offered) / FRAME_BITS)
    assert set(load) == set(topo.switches)


def test_a_network_within_the_budget_keeps_its_own_scale() -> None:
    sc = scenarios.load("fct")  # one switch, 667 frames/s
    choice = choose_scale(sc)
    assert (choice.rate_scale, choice.time_scale, choice.slowed_by) == (1e-3, 250.0, 1.0)
    assert choice.load.cores <= SWITCH_BUDGET_CORES


def test_a_scenarios_own_network_keeps_its_measured_scale() -> None:
    """Its [bmv2] scale was chosen and held to the simulator by qcn compare; the model
    chooses for networks the command line brings."""
    sc = scenarios.load("leaf-spine-fct")
    assert choose_scale(sc).slowed_by > 1  # the model alone would slow it
    chosen, line = with_chosen_scale(sc, ["duration_s", "qcn.cp.w", "network.pause"])
    assert chosen is sc
    assert line.startswith("rates x0.001, times x250 (the scenario's [bmv2] section, measured")
    assert with_chosen_scale(sc, ["network.topology"])[0] is not sc


def test_a_network_over_the_budget_is_slowed_to_it_its_bytes_kept() -> None:
    sc = scenarios.load("leaf-spine-fct").with_overrides(
        {"network.topology": "fat-tree:4", "workload.rto_s": 5e-3}
    )
    own = switch_load(sc.scaled_for_bmv2()).cores
    choice = choose_scale(sc)
    at_rest = choice.load.at_rest_cores  # slowing the rates leaves it as it is
    assert choice.slowed_by == pytest.approx((own - at_rest) / (SWITCH_BUDGET_CORES - at_rest))
    assert choice.load.cores == pytest.approx(SWITCH_BUDGET_CORES)
    # rates down and times up alike: every byte quantity (k * tau) as the scenario made it
    assert choice.rate_scale * choice.time_scale == pytest.approx(1e-3 * 250)
    chosen, line = with_chosen_scale(sc, ["network.topology"])
    assert chosen.bmv2.rate_scale == choice.rate_scale
    assert f"{choice.slowed_by:.2f}x slower" in line
    assert "--scale chooses another" in line


def test_the_command_lines_scale_wins() -> None:
    sc = scenarios.load("leaf-spine-fct").with_overrides(
        {"network.topology": "fat-tree:4", "workload.rto_s": 5e-3, "bmv2.rate_scale": 2e-3}
    )
    chosen, line = with_chosen_scale(sc, ["bmv2.rate_scale"])
    assert chosen is sc
    assert line == "rates x0.002, times x250 (the scale the command line gave)"


def test_a_network_no_scale_fits_is_refused_with_what_would() -> None:
    sc = scenarios.load("leaf-spine-fct").with_overrides(
        {"network.topology": "fat-tree:4", "workload.rto_s": 5e-3, "duration_s": 2.0}
    )
    with pytest.raises(
        ScenarioError, match=r"lasts [0-9,]+ s, over 600 s: at most --duration"
    ) as e:
        with_chosen_scale(sc, ["network.topology"])
    fits = float(str(e.value).split("--duration ")[1].split()[0])
    with_chosen_scale(sc.with_overrides({"duration_s": fits * 0.99}), ["network.topology"])
    assert capacity.MAX_RUN_S == 600.0


def test_a_scenarios_own_network_too_large_for_any_scale_is_refused() -> None:
    """HPCC's fat-tree on BMv2: its own [bmv2] scale would need ~35 cores of switches; no
    scale fits a run of 600 s (qcn run's auto backend then runs the simulator)."""
    sc = scenarios.load("hpcc-fat-tree")
    assert switch_load(sc.scaled_for_bmv2()).cores > capacity.OWN_SCALE_MAX_CORES
    with pytest.raises(ScenarioError, match="hpcc-fat-tree: its switches would take"):
        with_chosen_scale(sc, ())
    # however short the run: its times would scale past what BMv2 scaling takes
    with pytest.raises(ScenarioError, match=r"would scale x[0-9,]+, past the bound of x10000"):
        with_chosen_scale(sc.with_overrides({"duration_s": 0.001}), ())


@pytest.mark.parametrize(
    ("given", "rate_scale", "time_scale"),
    [("own", 1e-3, 250.0), ("0.002", 2e-3, 125.0), ("0.002,50", 2e-3, 50.0)],
)
def test_scale_from_the_command_line(given: str, rate_scale: float, time_scale: float) -> None:
    """--scale: the scenario's own [bmv2] section, a rate with rate x time kept (as the
    model's choice keeps it), or both; the run then says the command line chose."""
    sc = scenarios.load("leaf-spine-fct")  # [bmv2]: rates x0.001, times x250
    overrides = scale_overrides(given, sc)
    assert overrides == {
        "bmv2.rate_scale": rate_scale,
        "bmv2.time_scale": pytest.approx(time_scale),
    }
    big = sc.with_overrides({"network.topology": "fat-tree:4", **overrides})
    chosen, line = with_chosen_scale(big, ["network.topology", *overrides])
    assert chosen is big
    assert line.endswith("(the scale the command line gave)")


def test_qcn_run_says_the_scale_it_was_given(tmp_path: Path) -> None:
    r = qcn(
        "run", "transient", "--backend", "sim", "--scaled", "--scale", "0.002",
        "--duration", "0.05", "--out", str(tmp_path / "o"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "rates x0.002, times x125 (the scale the command line gave)" in r.stdout
    provenance = json.loads((tmp_path / "o" / "provenance.json").read_text())
    assert provenance["overrides"]["bmv2.rate_scale"] == 0.002
