"""`qcn run`'s own logic (qcn/run.py) that needs no backend: its overrides, its stall
option and its results directory; the runs themselves are in test_simulator.py,
test_backends.py and test_mininet_bmv2.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from qcn.core.results import PARTIAL_MARKER
from qcn.core.scenario import ScenarioError
from qcn.run import load_scenario, overrides_from, parse_stalls, prepare_out


def test_overrides_are_toml_values_and_text_otherwise() -> None:
    assert overrides_from(["qcn.cp.w=4", "network.pause=true", "qcn_preset=qcn", "a = 1e9"]) == {
        "qcn.cp.w": 4,
        "network.pause": True,
        "qcn_preset": "qcn",
        "a": 1e9,
    }
    with pytest.raises(ScenarioError, match="expected KEY=VALUE"):
        overrides_from(["qcn.cp.w"])


def test_load_scenario_applies_sets_and_duration() -> None:
    sc, overrides = load_scenario("transient", ["qcn.cp.w=4"], 0.5)
    assert overrides == {"qcn.cp.w": 4, "duration_s": 0.5}
    assert (sc.params.cp.w, sc.duration_s) == (4.0, 0.5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [(None, None), ("30/500", (0.03, 0.5)), ("0.5/60000", (0.0005, 60.0))],
)
def test_stalls_are_milliseconds(text: str | None, expected: tuple[float, float] | None) -> None:
    assert parse_stalls(text) == (pytest.approx(expected) if expected else None)


@pytest.mark.parametrize("text", ["30", "500/30", "0/10", "x/y", "10/70000", "-1/10"])
def test_bad_stalls_are_refused(text: str) -> None:
    with pytest.raises(ScenarioError, match="expected STALL_MS/PERIOD_MS"):
        parse_stalls(text)


def test_results_are_staged_beside_out_and_marked_partial(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    staged = prepare_out(out, "transient")
    assert not out.exists()
    assert staged.staging.parent == out.parent
    assert staged.staging.name.startswith(".b.partial-")
    assert "incomplete" in (staged.staging / PARTIAL_MARKER).read_text()
    (staged.staging / "summary.json").write_text("{}")
    staged.publish()
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert not staged.staging.exists()
    with pytest.raises(ScenarioError, match="holds results already; pass --force"):
        prepare_out(out, "transient")
    again = prepare_out(out, "transient", force=True)
    (again.staging / "queue.csv").write_text("")
    assert again.keep_partial() == out.with_name("b.partial")  # the old results stay whole
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert sorted(p.name for p in out.with_name("b.partial").iterdir()) == [
        PARTIAL_MARKER,
        "queue.csv",
    ]
    for bad in (Path(), Path(".")):
        with pytest.raises(ScenarioError, match="not the current one"):
            prepare_out(bad, "transient")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ScenarioError, match="cannot write results there"):
        prepare_out(blocker / "out", "transient")
