"""One scenario under other schemes (`qcn run SCENARIO --scheme A,B,...`,
qcn/lab/scheme_table.py; `--scheme NAME` of run, compare, sweep and tune): the parameters
each scheme runs with, the table, the plot, and each row reproducible from its run
directory."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.params import CpSignal, DcqcnParams, QcnParams
from qcn.lab.scheme_table import SchemesChoiceError, parse_schemes
from tests.kit import assert_one_line_error, qcn


def test_a_scheme_runs_with_its_own_preset_on_the_scenarios_network() -> None:
    fct = scenarios.load("fct")  # QCN, R_AI 3 Mb/s
    dcqcn = fct.with_overrides(scenarios.scheme_overrides(fct, "dcqcn"))
    preset = QcnParams.preset("dcqcn")
    assert dcqcn.params.rp.scheme == "dcqcn"
    assert dcqcn.params.cp.signal is CpSignal.ECN
    assert dcqcn.params.rp.r_ai_bps == preset.rp.r_ai_bps  # not QCN's 3 Mb/s
    assert dcqcn.params.rp.timer_s == preset.rp.timer_s
    fast = fct.with_overrides({"network.line_rate_bps": 40e9, "qcn.rp.line_rate_bps": 40e9})
    assert fast.with_overrides(scenarios.scheme_overrides(fast, "dcqcn")).params.rp == replace(
        preset.rp, line_rate_bps=40e9
    )  # the network's line rate, the rest the preset's
    assert dcqcn.network == fct.network
    assert dcqcn.workload == fct.workload
    assert scenarios.scheme_overrides(fct, "qcn") == {}  # its own: as it is


def test_a_bad_schemes_list_is_one_line() -> None:
    assert parse_schemes("qcn, dcqcn,none") == ("qcn", "dcqcn", "none")
    with pytest.raises(SchemesChoiceError, match=r"'dcqnc' is no scheme \(did you mean 'dcqcn'"):
        parse_schemes("qcn,dcqnc")
    with pytest.raises(SchemesChoiceError, match="qcn given twice"):
        parse_schemes("qcn,none,qcn")
    assert_one_line_error(
        qcn("run", "fct", "--scheme", "qcn,nope", "--backend", "sim"), "'nope' is no scheme"
    )
    assert_one_line_error(
        qcn("run", "fct", "--scheme", "qcn,none", "--no-qcn"), "give 'none' among the schemes"
    )
    for command in ("compare", "sweep", "tune"):
        assert_one_line_error(qcn(command, "fct", "--scheme", "dcqnc"), "did you mean 'dcqcn'")
    assert_one_line_error(qcn("tune", "fct", "--scheme", "none"), "'none' is no scheme")


def test_one_scheme_is_one_run_under_it(tmp_path: Path) -> None:
    r = qcn("run", "transient", "--scheme", "dcqcn", "--backend", "sim", "--duration", "0.01",
            "--out", str(tmp_path / "d"), "--quiet", timeout_s=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    ran = scenarios.load(str(tmp_path / "d" / "run.toml"))
    assert ran.params == QcnParams.preset("dcqcn")
    r = qcn("run", "transient", "--scheme", "none", "--backend", "sim", "--duration", "0.01",
            "--out", str(tmp_path / "n"), "--quiet", timeout_s=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "n" / "summary.json").read_text())["qcn"] is False


def test_the_schemes_side_by_side_each_run_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    r = qcn(
        "run", "fct", "--scheme", "qcn,none", "--backend", "sim", "--duration", "0.02",
        "--out", str(out), "--quiet", timeout_s=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    table = (out / "schemes.md").read_text()
    assert "| [qcn](qcn/) |" in table
    assert "| [none](none/) |" in table
    assert (out / "schemes.png").stat().st_size > 10_000
    rows = {row["scheme"]: row for row in json.loads((out / "schemes.json").read_text())["schemes"]}
    assert rows["qcn"]["cnms"] > 0
    assert rows["none"]["cnms"] == 0
    for name in ("qcn", "none"):
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["drops"] == rows[name]["drops"]
        assert rows[name]["queue_p99_pkts"] >= rows[name]["queue_mean_pkts"]
    assert rows["qcn"]["slowdown_bins"]
    # A row's run again from its own directory gives its figures.
    again = qcn("run", "--again", str(out / "qcn"), "--quiet", timeout_s=300)
    assert again.returncode == 0, again.stderr
    rerun = json.loads((out / "qcn-again" / "summary.json").read_text())
    assert (rerun["drops"], rerun["cnms"]) == (rows["qcn"]["drops"], rows["qcn"]["cnms"])


def test_a_scenario_says_how_it_runs_another_scheme() -> None:
    """hpcc-fat-tree's [schemes.dcqcn]: HPCC's simulator's DCQCN for that fabric."""
    fat = scenarios.load("hpcc-fat-tree")
    dcqcn = fat.with_overrides(scenarios.scheme_overrides(fat, "dcqcn"))
    cp, rp = dcqcn.params.cp, dcqcn.params.rp
    assert (cp.kmin_bytes, cp.kmax_bytes, cp.pmax) == (400_000, 1_600_000, 0.2)
    assert (rp.r_ai_bps, rp.r_hai_bps, rp.min_rate_bps, rp.fast_recovery_th) == (
        20e6,
        200e6,
        1e9,
        1,
    )
    assert rp.own(DcqcnParams).alpha_timer_s == 50e-6
    assert dcqcn.schemes == ()  # applied: DCQCN is now its own scheme
    assert scenarios.parse(fat.to_dict()).schemes == fat.schemes
    # Scaled for BMv2, the table's times and rates scale as the scenario's own fields do,
    # and the scenario's own table stays as it was (its nested table once scaled in place).
    before = copy.deepcopy(fat.schemes)
    scaled = dict(dict(fat.scaled_for_bmv2().schemes)["dcqcn"])
    fat.scaled_for_bmv2()
    assert fat.schemes == before
    assert scaled["qcn.rp.r_ai_bps"] == pytest.approx(20e6 * fat.bmv2.rate_scale)
    assert scaled["qcn.cp.kmax_bytes"] == 1_600_000  # a queue's size: unscaled


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"qcn": {"rp": {"r_ai_bps": 1e6}}}, "schemes.qcn: the scenario's own scheme"),
        ({"dcqcn": {"rp": {"r_ai_bps": -1}}}, "schemes.dcqcn.rp.r_ai_bps: must be in"),
        ({"dcqcn": {"cp": {"kmin": 1}}}, "schemes.dcqcn.cp.kmin: unknown parameter"),
        ({"dcqnc": {"rp": {}}}, "schemes.dcqnc.preset: must be one of"),
        ({"dcqcn": {"r_ai_bps": 1}}, "schemes.dcqcn: must hold tables of parameters"),
    ],
)
def test_a_bad_schemes_table_is_named(table: dict[str, Any], message: str) -> None:
    data = scenarios.load("fct").to_dict()
    with pytest.raises(scenarios.ScenarioError, match=re.escape(message)):
        scenarios.parse({**data, "schemes": table})
