"""Every run carries its provenance (qcn/core/provenance.py): run.toml, the scenario as run,
and provenance.json, everything else a rerun needs; `qcn run --again DIR` reruns it."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from qcn.cli import run as run_command
from qcn.cli.main import main
from qcn.cli.run import AGAIN_KEEPS
from qcn.core import provenance
from qcn.core import scenario as scenarios
from qcn.core.backend import RECORD
from qcn.core.provenance import PROVENANCE_FILE, RUN_FILE, RUN_ITSELF_KEYS
from qcn.core.scenario import ScenarioError
from qcn.lab import backends
from qcn.lab.sweep import Store, make_points, run_point

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
        (["--set", "qcn.cp.w=4", "--no-qcn"], "give none of --no-qcn, --set"),
        (["--scale", "own"], "give none of --scale"),
        (["--params", "p.toml"], "give none of --params"),
        # Each the default's value: it was ignored without a word.
        (["--sample-hz", "100"], "give none of --sample-hz"),
        (["--backend", "auto"], "give none of --backend"),
        (["--switch-scheduling", "realtime"], "give none of --switch-scheduling"),
    ],
)
def test_again_refuses_what_it_would_override(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    assert main(["run", "--again", str(tmp_path), *extra]) == 2
    assert expected in capsys.readouterr().err


def test_every_run_option_is_declared_for_again_and_provenance() -> None:
    """Each of qcn run's options is one --again takes along (AGAIN_KEEPS) or one it
    refuses, with nothing to keep in step by hand; each RunOptions field says whether
    provenance.json records it, and those it records are what a rerun reads back."""
    sub = argparse.ArgumentParser().add_subparsers()
    run_command.register(sub)
    run_parser = sub.choices["run"]
    defaults = run_parser.get_default("option_defaults")
    assert set(defaults) > AGAIN_KEEPS  # (no stale name in it)
    flags = run_parser.format_usage()
    for dest in set(defaults) - AGAIN_KEEPS:
        assert dest == "scenario" or "--" + dest.replace("_", "-") in flags, dest
    assert all(RECORD in f.metadata for f in fields(backends.RunOptions))
    assert backends.RECORDED == ("qcn", "seed", "scaled_by")  # (every backend's)
    own = backends.MININET.options(sample_hz=50.0, pcap=True, inject_stalls=(0.03, 0.5))
    options = backends.RunOptions(seed=7, own=own)
    recorded = options.recorded(backends.MININET)
    assert list(recorded) == [
        "qcn", "seed", "scaled_by", "sample_hz", "realtime_switch", "pinned", "inject_stalls",
        "pcap",
    ]  # fmt: skip
    assert backends.RunOptions.from_recorded(recorded, backends.MININET) == options
    assert list(backends.RunOptions().recorded(backends.SIMULATOR)) == list(backends.RECORDED)


def test_a_backends_own_recorded_options_are_checked_and_older_records_read() -> None:
    """Each backend checks its own recorded options; a record from before each backend
    owned its options (every backend's, at their defaults on the other) reads back."""
    mininet = backends.RunOptions().recorded(backends.MININET)
    with pytest.raises(ScenarioError, match=r"^run.sample_hz = -5: expected in \(0, 1000\]$"):
        backends.RunOptions.from_recorded({**mininet, "sample_hz": -5}, backends.MININET)
    with pytest.raises(ScenarioError, match=r"^run.inject_stalls = \[0.5, 0.03\]: expected"):
        backends.RunOptions.from_recorded(
            {**mininet, "inject_stalls": [0.5, 0.03]}, backends.MININET
        )
    with pytest.raises(ScenarioError, match=r"^run: no pcap$"):
        backends.RunOptions.from_recorded(
            {k: v for k, v in mininet.items() if k != "pcap"}, backends.MININET
        )
    older = {**mininet, "qcn": False, "seed": 3}  # (a simulator's run, as it was recorded)
    again = backends.RunOptions.from_recorded(older, backends.SIMULATOR, (backends.MININET,))
    assert again == backends.RunOptions(qcn=False, seed=3, own=backends.SIMULATOR.options())


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
    env = backends.environment(backends.MININET)
    assert set(env["version"]) == {"project", "p4c", "bmv2"}
    assert all(env["version"].values())
    assert "p4c" not in backends.environment(backends.SIMULATOR)["version"]
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.05}).scaled_for_bmv2()
    trace = backends.run_scenario(sc, backends.SIMULATOR, tmp_path, backends.RunOptions())
    backends.record(tmp_path, sc, trace, backends.MININET, backends.RunOptions(), plots=False)
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
    store.write_point(point, trace, backend=backends.SIMULATOR)
    d = store.point_dir(point)
    assert scenarios.load(str(d / RUN_FILE)).network.sources == 2
    prov = json.loads((d / PROVENANCE_FILE).read_text())
    assert prov["overrides"] == {"duration_s": 0.05, "network.sources": 2}
    assert (prov["backend"], prov["random_seed"]) == ("sim", 1)


# -- one check of a rerun: its inputs by content, every recorded field as the CLI checks it --

TRIANGLE = Path(__file__).parent / "data" / "triangle.json"
#: A run of a topology file (its own traffic chosen), short.
ON_A_FILE = ["--set", "workload.traffic='incast'", "--duration", "0.05"]


def one_line_error(capsys: pytest.CaptureFixture[str], *expected: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("qcn: error: "), err
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def on_a_file(tmp_path: Path) -> tuple[Path, Path]:
    """A finished run of a topology file of its own: (the run's results, the file)."""
    topo = tmp_path / "tri.json"
    topo.write_bytes(TRIANGLE.read_bytes())
    out = tmp_path / "r"
    run("transient", "--backend", "sim", "--set", f"network.topology='{topo}'", *ON_A_FILE,
        "--out", str(out))  # fmt: skip
    return out, topo


def test_again_refuses_a_run_whose_topology_file_changed(
    on_a_file: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--again` said "again, as DIR ran" after the topology file was edited, and gave
    another summary."""
    out, topo = on_a_file
    topo.write_text(topo.read_text().replace('"0", 2', '"5ms", 2'))
    capsys.readouterr()
    assert main(["run", "--again", str(out), "--quiet"]) == 2
    one_line_error(capsys, f"--again {out}: not the same run: network.topology: {topo} changed",
                   "--with-changed-inputs")  # fmt: skip
    assert not (out.parent / "r-again").exists()
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []
    # With the flag it runs, says so, and records what it read now.
    run("--again", str(out), "--with-changed-inputs")
    captured = capsys.readouterr()
    assert "again, as " + str(out) + " ran but with inputs changed since" in captured.out
    assert f"warning: not the same run as {out}: network.topology" in captured.err
    prov = json.loads((out.parent / "r-again" / PROVENANCE_FILE).read_text())
    assert prov["inputs"]["network.topology"]["sha256"] == provenance.file_sha256(topo)
    run("--again", str(out.parent / "r-again"), "--out", str(out.parent / "third"))


def test_again_refuses_a_run_whose_topology_file_is_gone_or_run_toml_edited(
    on_a_file: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out, topo = on_a_file
    run_toml = out / RUN_FILE
    text = run_toml.read_text().replace("buffer_pkts = 100\n", "buffer_pkts = 50\n")
    assert text != run_toml.read_text()
    run_toml.write_text(text)
    capsys.readouterr()
    assert main(["run", "--again", str(out)]) == 2
    one_line_error(capsys, f"not the same run: {RUN_FILE} was edited since the run")
    topo.unlink()
    run_toml.write_text(text.replace("buffer_pkts = 50\n", "buffer_pkts = 100\n"))
    assert main(["run", "--again", str(out)]) == 2
    one_line_error(capsys, "no such topology file")


def test_again_refuses_a_run_whose_cdf_changed(tmp_path: Path) -> None:
    """The CDF a flows run read is one of its inputs (by content), as a sweep's key has it."""
    cdf = tmp_path / "sizes.cdf"
    cdf.write_text("1000 0\n20000 1\n")
    sc = scenarios.load("fct").with_overrides({"workload.flow_sizes": str(cdf)})
    sim = backends.SIMULATOR
    backends.record(tmp_path, sc, backends.run_scenario(
        sc.with_overrides({"duration_s": 0.01}), sim, tmp_path, backends.RunOptions()),
        sim, backends.RunOptions(), plots=False)  # fmt: skip
    again, recorded = provenance.read(tmp_path)
    assert provenance.changed_inputs(again, recorded) == []
    cdf.write_text("1000 0\n90000 1\n")
    (said,) = provenance.changed_inputs(again, recorded)
    assert said.startswith(f"workload.flow_sizes: {cdf} changed since the run")


@pytest.mark.parametrize("name", scenarios.available())
def test_every_scenario_reads_back_unchanged(tmp_path: Path, name: str) -> None:
    """run.toml and the record agree for every shipped scenario, scaled or not: no rerun is
    refused for a change nobody made."""
    for sc in (scenarios.load(name), scenarios.load(name).scaled_for_bmv2()):
        made = provenance.record(sc, backend="sim",
                                 run=backends.RunOptions().recorded(backends.SIMULATOR),
                                 overrides={}, environment=provenance.environment())  # fmt: skip
        provenance.write(tmp_path, sc, made, in_bmv2_units=False)
        assert provenance.changed_inputs(*provenance.read(tmp_path)) == []


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        # A time scale of -25 made the rerun's sampling grow to 11.6 GB in 45 s.
        (("run", "scaled_by"), -25, "run.scaled_by = -25: expected null or a time scale in"),
        (("run", "scaled_by"), "x", "run.scaled_by = 'x'"),
        (("run", "scaled_by"), 1e-9, "run.scaled_by = 1e-09 does not fit run.toml's duration"),
        (("run", "seed"), None, "run.seed = None: expected a whole number"),
        (("run", "seed"), "abc", "run.seed = 'abc'"),
        (("run", "seed"), 7.5, "run.seed = 7.5"),
        (("run", "seed"), True, "run.seed = True"),
        (("run", "seed"), [1], "run.seed = [1]"),
        (("run", "seed"), ..., "run: no seed"),
        (("run", "qcn"), "no", "run.qcn = 'no': expected true or false"),
        (("run", "sample_hz"), -5, "run.sample_hz: the simulator has no such option"),
        (("run", "pcap"), True, "run.pcap: the simulator has no such option (this was sim)"),
        (("run", "inject_stalls"), [0.03, 0.5], "run.inject_stalls: the simulator has no such"),
        (("run", "bogus"), 1, "run: unknown option 'bogus'"),
        (("run",), 5, "no 'run' table of options"),
        (("overrides",), "abc", "'overrides' is not a table"),
        (("overrides",), 5, "'overrides' is not a table"),
        (("backend",), "bmv3", "backend 'bmv3' is none of"),
        (("inputs",), ..., "'inputs' is not a table"),
    ],
)
def test_a_tampered_provenance_is_one_line_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: tuple[str, ...], value: Any,
    expected: str,
) -> None:  # fmt: skip
    out = tmp_path / "r"
    run("transient", "--backend", "sim", "--duration", "0.01", "--out", str(out))
    prov = json.loads((out / PROVENANCE_FILE).read_text())
    *tables, key = path
    table = prov
    for name in tables:
        table = table[name]
    if value is ...:
        del table[key]
    else:
        table[key] = value
    (out / PROVENANCE_FILE).write_text(json.dumps(prov))
    capsys.readouterr()
    assert main(["run", "--again", str(out)]) == 2
    one_line_error(capsys, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]  # nothing made, nothing left


def test_a_provenance_nested_too_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / RUN_FILE).write_text((scenarios.SCENARIO_DIR / "transient.toml").read_text())
    (tmp_path / PROVENANCE_FILE).write_text("[" * 100_000 + "]" * 100_000)
    assert main(["run", "--again", str(tmp_path)]) == 2
    one_line_error(capsys, f"{PROVENANCE_FILE}: unreadable")


def test_with_changed_inputs_goes_with_again(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "transient", "--with-changed-inputs"]) == 2
    one_line_error(capsys, "--with-changed-inputs goes with --again DIR")


def test_a_sweep_points_key_covers_its_topology_files_content(tmp_path: Path) -> None:
    """A resumed sweep said "2 points (2 already done)" after the topology file was edited,
    and kept queue mean 36.0 where a fresh sweep gives 42.8."""
    topo = tmp_path / "tri.json"
    topo.write_bytes(TRIANGLE.read_bytes())
    sc = scenarios.load("transient").with_overrides(
        {"network.topology": str(topo), "workload.traffic": "incast"}
    )
    grid: list[tuple[str, list[Any]]] = [("qcn.cp.w", [1, 2])]
    before = [p.key for p in make_points(sc, grid, 1, "sim")]
    assert [p.key for p in make_points(sc, grid, 1, "sim")] == before
    topo.write_text(topo.read_text().replace('"0", 2', '"5ms", 2'))
    assert not {p.key for p in make_points(sc, grid, 1, "sim")} & set(before)


def test_again_on_dot_and_dot_dot_writes_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cd DIR; qcn run --again .` was a ValueError traceback; `--again ..` wrote into
    `./..-again`, inside the directory it reran."""
    first = tmp_path / "first"
    run("transient", "--backend", "sim", "--duration", "0.01", "--out", str(first))
    monkeypatch.chdir(first)
    run("--again", ".")
    assert (tmp_path / "first-again" / "summary.json").is_file()
    (first / "inner").mkdir()
    monkeypatch.chdir(first / "inner")
    run("--again", "..", "--force")
    assert sorted(p.name for p in first.iterdir() if p.is_dir()) == ["inner"]


def test_again_with_the_default_seed_given_is_refused_not_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--again DIR --seed 1` ignored --seed silently (1 was the default)."""
    assert main(["run", "--again", str(tmp_path), "--seed", "1"]) == 2
    one_line_error(capsys, "give none of --seed")
