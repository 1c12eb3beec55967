"""One scenario under several schemes (`qcn run SCENARIO --schemes ...`, qcn/lab/scheme_table.py):
the parameters each scheme runs with, the table, the plot, and each row reproducible from
its run directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qcn.core import scenario as scenarios
from qcn.core.params import CpSignal, QcnParams
from qcn.lab.scheme_table import SchemesChoiceError, parse_schemes
from tests.kit import assert_one_line_error, qcn


def test_a_scheme_runs_with_its_own_preset_on_the_scenarios_network() -> None:
    fct = scenarios.load("hpcc-fat-tree")  # QCN, R_AI 30 Mb/s, 100 Gb/s links
    dcqcn = fct.with_overrides(scenarios.scheme_overrides(fct, "dcqcn"))
    preset = QcnParams.preset("dcqcn")
    assert dcqcn.params.rp.scheme == "dcqcn"
    assert dcqcn.params.cp.signal is CpSignal.ECN
    assert dcqcn.params.rp.r_ai_bps == preset.rp.r_ai_bps  # not QCN's 30 Mb/s
    assert dcqcn.params.rp.min_rate_bps == preset.rp.min_rate_bps
    assert dcqcn.params.rp.line_rate_bps == 100e9  # the network's
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
        qcn("run", "fct", "--schemes", "qcn,nope", "--backend", "sim"), "'nope' is no scheme"
    )
    assert_one_line_error(
        qcn("run", "fct", "--schemes", "qcn,none", "--no-qcn"), "give 'none' among --schemes"
    )


def test_the_schemes_side_by_side_each_run_reproducible(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    r = qcn(
        "run", "fct", "--schemes", "qcn,none", "--backend", "sim", "--duration", "0.02",
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
