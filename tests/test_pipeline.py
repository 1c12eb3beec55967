"""Every P4 name Python uses (qcn.core.pipeline) against the compiled program: the P4Info's
tables, match fields, actions, parameters and counters, and the BMv2 JSON's registers and
counters.  Also the build configuration, which needs no toolchain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from finsy import P4Schema

from qcn.core import pipeline
from qcn.core.cp_model import CpPortConfig
from qcn.core.params import CpParams, CpSignal
from tests.toolchain import requires_tools

Compiled = tuple[P4Schema, dict[str, Any]]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    p4info, bmv2_json = pipeline.compile_program(out_dir=tmp_path_factory.mktemp("build"))
    return P4Schema(p4info), json.loads(bmv2_json.read_text())


@requires_tools("p4c")
def test_tables_match_fields_and_actions(compiled: Compiled) -> None:
    schema, _ = compiled
    for table, (fields, actions) in pipeline.TABLES.items():
        t = schema.tables[table]
        assert tuple(f.alias for f in t.match_fields) == fields, table
        assert set(actions) <= {ref.alias for ref in t.actions}, table


@requires_tools("p4c")
def test_action_parameters_in_order(compiled: Compiled) -> None:
    schema, _ = compiled
    for action, params in pipeline.ACTION_PARAMS.items():
        assert tuple(p.name for p in schema.actions[action].params) == params, action


@requires_tools("p4c")
def test_counters_and_registers(compiled: Compiled) -> None:
    schema, bmv2 = compiled
    for alias, full in pipeline.COUNTERS.items():
        assert schema.counters[alias].name == full
    assert {r["name"] for r in bmv2["register_arrays"]} >= set(pipeline.REGISTERS)
    assert {c["name"] for c in bmv2["counter_arrays"]} >= set(pipeline.COUNTERS.values())


def test_cp_port_integers_carry_the_action_parameter_names() -> None:
    """One name per quantity: the data-plane integers are the action's parameters."""
    cfg = vars(CpPortConfig.from_params(CpParams()))
    identity = {"cpid", "cp_mac"}  # (the port's; the signal is CpPortConfig's, by its code)
    params = pipeline.CP_ACTION_PARAMS[pipeline.CP_ACTION_COMPUTE_FEEDBACK]
    assert set(params) - identity <= set(cfg)


def test_ecn_marking_integers_carry_the_action_parameter_names() -> None:
    cfg = vars(CpPortConfig.from_params(CpParams(signal=CpSignal.ECN)))
    assert set(pipeline.ACTION_PARAMS[pipeline.ACTION_MARK_ECN]) <= set(cfg)


def test_build_dir_follows_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QCN_BUILD_DIR", str(tmp_path))
    assert pipeline.outputs() == (tmp_path / "qcn_cp.p4info.txtpb", tmp_path / "qcn_cp.json")
    monkeypatch.delenv("QCN_BUILD_DIR")
    assert pipeline.build_dir() == Path(pipeline.__file__).resolve().parents[2] / "build"


def test_p4c_command_is_the_one_place(tmp_path: Path) -> None:
    cmd = pipeline.p4c_command(pipeline.source_dir() / "qcn_cp.p4", tmp_path)
    assert cmd[:7] == ["p4c", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16"]
    assert str(tmp_path / "qcn_cp.p4info.txtpb") in cmd


def test_missing_p4c_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no p4c on it
    with pytest.raises(pipeline.PipelineBuildError, match="p4c: not installed"):
        pipeline.compile_program(out_dir=tmp_path / "out")
