"""docs/extending.md's worked examples, built as the page writes them: its code blocks are
run here as they stand, then what they add runs on the simulator through qcn.lab.backends."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

import qcn.core.params as params_module
import qcn.reaction_point.rules as rules_module
from qcn.core import scenario as scenarios
from qcn.core.params import SCHEMES, QcnParams
from qcn.core.provenance import RUN_FILE
from qcn.core.scenario import Scenario
from qcn.lab import backends
from qcn.reaction_point.rules import RULES, RateLimiterRules

PAGE = Path(__file__).resolve().parent.parent / "docs" / "extending.md"


def section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def blocks(title: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(title), flags=re.DOTALL)


@pytest.fixture
def toy_scheme(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The page's toy scheme, defined as its two code blocks say (step 1 in
    qcn/core/params.py's namespace, step 2 in reaction_point/rules.py's), and removed
    again afterwards."""
    define, rules = blocks("Adding a scheme", "python")
    # Copies of the two registries for the test's while (their functions read them by
    # their module's global names, so registering fills the copies).
    monkeypatch.setattr(params_module, "SCHEMES", dict(SCHEMES))
    monkeypatch.setattr(rules_module, "RULES", dict(RULES))
    in_params = dict(vars(params_module))
    exec(define, in_params)  # the page's own code
    monkeypatch.setattr(params_module, "AimdParams", in_params["AimdParams"], raising=False)
    in_rules = dict(vars(rules_module))
    in_rules["AimdParams"] = in_params["AimdParams"]
    exec(rules, in_rules)
    return {"params": in_params["AimdParams"], "rules": in_rules["AimdRules"]}


def hot_spot(sc: Scenario, **overrides: Any) -> Scenario:
    """``sc`` shortened to a 0.3 s run with a hot spot from 0.1 s on."""
    return sc.with_overrides(
        {"duration_s": 0.3, "schedule": [{"at_s": 0.1, "bottleneck_rate_bps": 0.5e9}],
         **overrides}
    )  # fmt: skip


def run_sim(sc: Scenario, out: Path) -> dict[str, Any]:
    """A short `qcn run --backend sim`, through the one seam every command uses."""
    out.mkdir()
    options = backends.RunOptions(seed=1)
    _trace, summary = backends.run_and_record(sc, backends.SIMULATOR, out, options, plots=False)
    return summary


def test_a_toy_scheme_added_as_documented_runs_on_the_simulator(
    toy_scheme: dict[str, Any], tmp_path: Path
) -> None:
    aimd = toy_scheme["params"]
    # Step 1: a name known everywhere, its parameters in their own table.
    assert "aimd" in params_module.SCHEMES
    p = QcnParams.from_dict({"rp": {"scheme": "aimd", "aimd": {"beta": 0.25}}})
    assert p.rp.own(aimd).beta == 0.25
    assert "[rp.aimd]" in QcnParams.preset("aimd").dumps()
    with pytest.raises(params_module.ParamError, match=r"rp\.aimd\.beta: must be in"):
        QcnParams.from_dict({"rp": {"scheme": "aimd", "aimd": {"beta": 0.0}}})
    # Its fields' units: scaled for BMv2, its rate and its period follow the scale.
    sc = scenarios.load("transient").with_overrides({"qcn.rp.scheme": "aimd"})
    scaled = sc.scaled_for_bmv2().params.rp.own(aimd)
    assert scaled.step_bps == pytest.approx(50e6 * sc.bmv2.rate_scale)
    assert scaled.period_s == pytest.approx(1e-3 * sc.bmv2.time_scale)
    assert scaled.beta == 0.5
    # Step 2: the daemon's and the simulator's constructor builds its rules.
    rules = RateLimiterRules(p.rp, lambda: 0.0, lambda: 0.5)
    assert type(rules) is toy_scheme["rules"]
    rules.on_cnm(1)
    assert rules.current_rate_bps == 10e9 * 0.75
    assert rules.advance(3.5e-3) == 3
    assert rules.current_rate_bps == 10e9 * 0.75 + 3 * 50e6
    # Step 3: selected by name, as a scenario override, it runs on the simulator.
    base = scenarios.load("transient")
    toy = run_sim(hot_spot(base, **{"qcn.rp.scheme": "aimd"}), tmp_path / "toy")
    qcn = run_sim(hot_spot(base), tmp_path / "qcn")
    assert toy["cnms"] > 0
    assert toy["queue_mean_episode_pkts"] != qcn["queue_mean_episode_pkts"]
    gentle = run_sim(
        hot_spot(base, **{"qcn_preset": "aimd", "qcn.rp.aimd.beta": 0.1}), tmp_path / "gentle"
    )
    assert gentle["queue_mean_episode_pkts"] != toy["queue_mean_episode_pkts"]
    recorded = (tmp_path / "gentle" / RUN_FILE).read_text()
    assert 'scheme = "aimd"' in recorded
    assert "[qcn.rp.aimd]\nbeta = 0.1\n" in recorded


def test_a_toy_workload_added_as_documented_runs_on_the_simulator(tmp_path: Path) -> None:
    (cdf,) = blocks("Adding a workload", "text")
    path = tmp_path / "toy.cdf"
    path.write_text(cdf)
    sc = scenarios.load("fct").with_overrides(
        {"workload.flow_sizes": str(path), "duration_s": 0.02}
    )
    summary = run_sim(sc, tmp_path / "run")
    assert summary["flows"]["started"] > 0
    with (tmp_path / "run" / "flows.csv").open() as f:
        sizes = [int(row["size_bytes"]) for row in csv.DictReader(f)]
    assert sizes
    assert max(sizes) <= 1_000_000
    below = sum(s <= 10_000 for s in sizes) / len(sizes)
    assert 0.3 < below < 0.7  # half the toy's flows are under 10 KB
    inputs = json.loads((tmp_path / "run" / "provenance.json").read_text())["inputs"]
    assert inputs["workload.flow_sizes"]["path"] == str(path)


def test_the_topology_section_points_at_the_tested_generator_example() -> None:
    text = section("Adding a topology")
    assert "(topology.md#adding-a-generator)" in text
    generator = (PAGE.parent / "topology.md").read_text()
    assert "## Adding a generator" in generator
    assert "tests/test_topology.py" in generator


def test_a_backend_added_as_documented_runs_and_reruns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's toy backend, defined in the simulator layer's namespace as step 1 says
    and registered as step 2 says: `qcn run` runs on it, --again reruns on it, and what it
    does not take is refused in one line."""
    import qcn.simulator.backend as simulator_backend  # noqa: PLC0415
    from qcn.cli.main import main  # noqa: PLC0415
    from qcn.core.backend import Backend  # noqa: PLC0415

    (code,) = blocks("Adding a backend", "python")
    namespace = dict(vars(simulator_backend))
    namespace["engine"] = __import__("qcn.simulator.engine", fromlist=["engine"])
    exec(code, namespace)  # the page's own code
    toy: Backend = namespace["PythonEngine"]()
    monkeypatch.setattr(backends, "BACKENDS", {**backends.BACKENDS, toy.name: toy})
    out = tmp_path / "r"
    run = ["run", "transient", "--backend", "sim-python", "--duration", "0.02", "--quiet"]
    assert main([*run, "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "sim-python"
    assert "simulator's Python engine (requested)" in capsys.readouterr().out
    assert json.loads((out / "provenance.json").read_text())["backend"] == "sim-python"
    again = tmp_path / "again"
    assert main(["run", "--again", str(out), "--out", str(again), "--quiet"]) == 0
    assert json.loads((again / "summary.json").read_text())["backend"] == "sim-python"
    # The same run as the simulator's on its Python engine: the same draws, the same figures.
    monkeypatch.setenv("QCN_SIM_ENGINE", "python")
    sim = tmp_path / "sim"
    assert main([*run[:3], "sim", *run[4:], "--out", str(sim)]) == 0
    mine = json.loads((sim / "summary.json").read_text())
    timing = {"backend", "wall_s", "events_per_s"}
    assert {k: v for k, v in mine.items() if k not in timing} == {
        k: v for k, v in summary.items() if k not in timing
    }
    capsys.readouterr()
    assert main([*run, "--live", "--out", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("qcn: error: --live needs the simulator or the Mininet/BMv2 backend"), (
        err
    )


def test_a_scenario_made_from_a_runs_own_file_runs(tmp_path: Path) -> None:
    """The page's recipe: a run's run.toml, copied and edited, is a scenario of its own."""
    from qcn.cli.main import main  # noqa: PLC0415

    assert "copy it, edit it, run it" in section("Adding a scenario").replace("\n", " ")
    first = tmp_path / "first"
    assert main(["run", "transient", "--backend", "sim", "--duration", "0.02", "--quiet",
                 "--out", str(first)]) == 0  # fmt: skip
    mine = tmp_path / "my.toml"
    text = (first / RUN_FILE).read_text()
    assert "\nsources = 10\n" in text
    mine.write_text(text.replace("\nsources = 10\n", "\nsources = 4\n"))
    second = tmp_path / "second"
    assert main(["run", str(mine), "--backend", "sim", "--quiet", "--out", str(second)]) == 0
    rerun = scenarios.load(str(second / RUN_FILE))
    assert rerun.network.sources == 4
    assert rerun.duration_s == 0.02
    with (second / "sources.csv").open() as f:
        assert {row["source"] for row in csv.DictReader(f)} == {"0", "1", "2", "3"}
