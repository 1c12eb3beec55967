"""A reaction-point scheme is one unit: one definition (qcn.core.params.SCHEMES), one rules
class (qcn.reaction_point.rules), its own parameters, one name everywhere (docs/schemes.md)."""

from __future__ import annotations

import argparse
import ast
import copy
from pathlib import Path

import pytest

from qcn.cli.main import build_parser
from qcn.core import scenario as scenarios
from qcn.core.params import (
    SCHEMES,
    EcmParams,
    ParamError,
    QcnParams,
    RpParams,
    RpScheme,
    scheme_names,
)
from qcn.reaction_point.rules import (
    RULES,
    EcmRules,
    QcnRules,
    RateLimiterRules,
    TimerQcnRules,
    TwoQcnRules,
)

RULES_SOURCE = Path(__file__).resolve().parent.parent / "reaction_point" / "rules.py"


def test_every_scheme_has_its_rules_and_every_rules_class_its_scheme() -> None:
    assert list(SCHEMES) == list(RpScheme) == scheme_names()
    assert set(RULES) == set(SCHEMES)
    for name, cls in RULES.items():
        assert cls.scheme == name


@pytest.mark.parametrize(
    ("name", "cls"),
    [("qcn", QcnRules), ("2-qcn", TwoQcnRules), ("timer-qcn", TimerQcnRules), ("ecm", EcmRules)],
)
def test_the_rules_are_the_named_schemes(name: str, cls: type[RateLimiterRules]) -> None:
    rules = RateLimiterRules(QcnParams.preset(name).rp, lambda: 0.0, lambda: 0.5)
    assert type(rules) is cls
    assert QcnParams.preset(name).rp.scheme == name


def test_the_rules_never_ask_which_scheme_they_run() -> None:
    """No branch on a scheme's identity (``if self._ecm:``, ``scheme is RpScheme.ECM``): each
    scheme is its own class."""
    tree = ast.parse(RULES_SOURCE.read_text())
    # Where a class registers under its name, and where the constructor picks it, are
    # the two places that may read the name.
    dispatch = {"__init_subclass__", "__new__"}
    rules = [
        fn
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.name not in dispatch
    ]
    offenders = []
    for node in (n for fn in rules for n in ast.walk(fn)):
        if isinstance(node, ast.Compare | ast.If | ast.IfExp | ast.BoolOp):
            names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if names & {"RpScheme", "scheme", "_ecm", "_byte_clocked", "_timer_clocked"}:
                offenders.append(node.lineno)
    assert offenders == []


def test_ecm_parameters_are_its_own_and_the_old_spelling_loads() -> None:
    base = QcnParams.preset("ecm")
    new = QcnParams.from_dict({"rp": {"ecm": {"gi": 0.0053333, "td_s": 2e-3}}}, base)
    old = QcnParams.from_dict({"rp": {"ecm_gi": 0.0053333, "ecm_td_s": 2e-3}}, base)
    assert new == old
    assert new.rp.own(EcmParams) == EcmParams(gi=0.0053333, td_s=2e-3)
    assert new.rp == base.rp.with_own(gi=0.0053333, td_s=2e-3)
    assert "[rp.ecm]" in new.dumps()
    assert "ecm_gi" not in new.dumps()
    # A scenario's overrides, in either spelling.
    sc = scenarios.load("robustness")
    one = sc.with_overrides({"qcn_preset": "ecm", "qcn.rp.ecm.gi": 0.0053333})
    two = sc.with_overrides({"qcn_preset": "ecm", "qcn.rp.ecm_gi": 0.0053333})
    assert one.params == two.params
    assert one.params.rp.own(EcmParams).gi == 0.0053333


def test_a_schemes_parameters_are_checked_by_name() -> None:
    with pytest.raises(ParamError, match=r"rp\.ecm\.gii: unknown parameter; did you mean 'gi'"):
        QcnParams.from_dict({"rp": {"ecm": {"gii": 1.0}}})
    with pytest.raises(ParamError, match=r"rp\.ecm\.gd: must be in"):
        QcnParams.from_dict({"rp": {"ecm": {"gd": 0.5}}})
    with pytest.raises(ParamError, match=r"rp\.ecm: must be a table"):
        QcnParams.from_dict({"rp": {"ecm": 1}})
    with pytest.raises(ParamError, match=r"rp\.scheme: must be one of"):
        QcnParams.from_dict({"rp": {"scheme": "bcn"}})
    with pytest.raises(ParamError, match="no parameters of its own"):
        RpParams().with_own(gi=1.0)


def test_equal_parameters_compare_equal_however_built() -> None:
    """A scheme's defaults are not stored, so a set built with them equals one without."""
    assert RpParams(scheme_params=(EcmParams(),)) == RpParams()
    assert hash(RpParams(scheme_params=(EcmParams(),))) == hash(RpParams())


def _choices(parser: argparse.ArgumentParser, *path: str) -> list[str]:
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    action = next(a for a in parser._actions if "--preset" in a.option_strings)
    return list(action.choices or [])


def test_the_daemon_the_simulator_and_the_cli_name_a_scheme_the_same_way() -> None:
    parser = build_parser()
    assert _choices(parser, "params") == list(SCHEMES)
    assert _choices(parser, "rp", "start") == list(SCHEMES)
    for name in SCHEMES:  # a scenario's qcn_preset and rp.scheme: the same names
        sc = scenarios.load("robustness").with_overrides({"qcn_preset": name})
        assert sc.params.rp.scheme == name


def test_a_limiter_copies_as_its_schemes_class() -> None:
    """copy and pickle make an instance without the constructor's arguments."""
    rules = RateLimiterRules(QcnParams.preset("ecm").rp, lambda: 0.0, lambda: 0.5)
    rules.on_cnm(30)
    twin = copy.deepcopy(rules)
    assert type(twin) is EcmRules
    assert twin.current_rate_bps == rules.current_rate_bps
