"""Every run carries its provenance (qcn/core/provenance.py): run.toml, the scenario as run,
and provenance.json, everything else a rerun needs; `qcn run --again DIR` reruns it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qcn import backends
from qcn.cli import main
from qcn.core import provenance
from qcn.core import scenario as scenarios
from qcn.core.provenance import PROVENANCE_FILE, RUN_FILE, RUN_ITSELF_KEYS
from qcn.sweep import Store, make_points, run_point

#: A short transient with a hot spot in it, so the reaction points have work to do.
SHORT = ["--duration", "0.3", "--set", "schedule=[{at_s=0.1,bottleneck_rate_bps=0.5e9}]"]


def run(*args: str) -> None:
    assert main(["run", *args, "--quiet"]) == 0


def without_run_itself(path: Path) -> str:
    """summary.json's text without the lines about the run itself (its wall time)."""
    keys = "|".join(RUN_ITSELF_KEYS)
    lines = path.read_text().splitlines(keepends=True)
    return "".join(line for line in lines if not re.match(rf'\s*"({keys})":', line))


def test_a_run_records_its_scenario_and_provenance(tmp_path: Path) -> None:
    out = tmp_path / "r"
    run("transient", "--backend", "sim", "--seed", "3", "--set", "qcn.cp.w=4", *SHORT,
        "--out", str(out))  # fmt: skip
    sc = scenarios.load(str(out / RUN_FILE))
    expected = scenarios.load("transient").with_overrides(
        {"qcn.cp.w": 4, "duration_s": 0.3,
         "schedule": [{"at_s": 0.1, "bottleneck_rate_bps": 0.5e9}]}
    )  # fmt: skip
    assert sc == expected  # every field, the overrides applied
    prov = json.loads((out / PROVENANCE_FILE).read_text())
    assert prov["command"].startswith("qcn run transient --backend sim --seed 3")
    assert prov["overrides"]["qcn.cp.w"] == 4
    assert (prov["backend"], prov["random_seed"], prov["run"]["qcn"]) == ("sim", 3, True)
    assert prov["version"]["project"] == provenance.project_version() != "unknown"
    assert prov["machine"]["cores"] >= 1
    assert prov["machine"]["kernel"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", prov["date"])
    assert "p4c" not in prov["version"]  # a simulator run names no toolchain


def test_again_reproduces_a_simulator_runs_summary_byte_for_byte(tmp_path: Path) -> None:
    first = tmp_path / "first"
    run("transient", "--backend", "sim", "--seed", "2", *SHORT, "--out", str(first))
    summary = json.loads((first / "summary.json").read_text())
    assert summary["cnms"] > 0  # the run had congestion to answer
    run("--again", str(first))
    again = tmp_path / "first-again"
    assert without_run_itself(again / "summary.json") == without_run_itself(first / "summary.json")
    # The same scenario, field for field (the header's comments say who made it, when).
    body = [(d / RUN_FILE).read_text().split("\n\n", 1)[1] for d in (first, again)]
    assert body[0] == body[1]
    assert json.loads((again / PROVENANCE_FILE).read_text())["command"].endswith(
        f"--again {first} --quiet"
    )
    # run.toml is a scenario file: run with the same seed, it gives the same summary.
    by_file = tmp_path / "by-file"
    run(str(first / RUN_FILE), "--backend", "sim", "--seed", "2", "--out", str(by_file))
    assert without_run_itself(by_file / "summary.json") == without_run_itself(
        first / "summary.json"
    )


def test_again_reruns_a_scaled_simulation_as_it_ran(tmp_path: Path) -> None:
    """A run scaled for BMv2 is recorded scaled (its [bmv2] section the identity) and rerun
    with the same time scale for its sampling, not scaled twice."""
    first = tmp_path / "scaled"
    run("transient", "--backend", "sim", "--scaled", "--duration", "0.3", "--out", str(first))
    sc = scenarios.load(str(first / RUN_FILE))
    assert (sc.bmv2.rate_scale, sc.bmv2.time_scale) == (1.0, 1.0)
    assert sc.duration_s == pytest.approx(0.3 * scenarios.load("transient").bmv2.time_scale)
    run("--again", str(first), "--out", str(tmp_path / "again"))
    assert without_run_itself(tmp_path / "again" / "summary.json") == without_run_itself(
        first / "summary.json"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["transient"], "give none of a scenario"),
        (["--seed", "4"], "give none of --seed"),
        (["--set", "qcn.cp.w=4", "--no-qcn"], "give none of --set, --no-qcn"),
    ],
)
def test_again_refuses_what_it_would_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    assert main(["run", "--again", str(tmp_path), *extra]) == 2
    assert expected in capsys.readouterr().err


def test_again_on_results_without_provenance_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "summary.json").write_text("{}")
    assert main(["run", "--again", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no {RUN_FILE} and {PROVENANCE_FILE}" in err
    assert "Traceback" not in err


def test_a_bmv2_runs_provenance_names_the_toolchain(tmp_path: Path) -> None:
    """What a Mininet run records beside its results (no switch is started here: a short
    simulation's trace is recorded as the Mininet backend records its own)."""
    env = backends.environment("mininet")
    assert set(env["version"]) == {"project", "p4c", "bmv2"}
    assert all(env["version"].values())
    assert "p4c" not in backends.environment("sim")["version"]
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.05}).scaled_for_bmv2()
    trace = backends.run_scenario(sc, "sim", tmp_path, backends.RunOptions())
    backends.record(tmp_path, sc, trace, "mininet", backends.RunOptions(), plots=False)
    run_toml = (tmp_path / RUN_FILE).read_text()
    p4c, bmv2 = env["version"]["p4c"], env["version"]["bmv2"]
    assert f"p4c {p4c}; bmv2 {bmv2}" in run_toml.split("\n\n", 1)[0]  # its header
    prov = json.loads((tmp_path / PROVENANCE_FILE).read_text())
    assert (prov["version"]["p4c"], prov["version"]["bmv2"]) == (p4c, bmv2)


def test_each_sweep_point_carries_its_provenance(tmp_path: Path) -> None:
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.05})
    (point,) = make_points(sc, [("network.sources", [2])], 1, "sim")
    store = Store(tmp_path, sc, ["network.sources"], scaled=False, point_plots=False,
                  overrides={"duration_s": 0.05})  # fmt: skip
    store.prepare({"test": "provenance"})
    trace, _ = run_point(sc.to_dict(), dict(point.overrides), point.seed, False)
    store.write_point(point, trace, backend="sim")
    d = store.point_dir(point)
    assert scenarios.load(str(d / RUN_FILE)).network.sources == 2
    prov = json.loads((d / PROVENANCE_FILE).read_text())
    assert prov["overrides"] == {"duration_s": 0.05, "network.sources": 2}
    assert (prov["backend"], prov["random_seed"]) == ("sim", 1)
