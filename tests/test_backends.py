"""The seam every command runs a scenario through (qcn/lab/backends.py), on the simulator; the
Mininet branch runs in tests/test_mininet_bmv2.py through `qcn run` and `qcn compare`."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pytest

from qcn.core import patterns as traffic_patterns
from qcn.core import scenario as scenarios
from qcn.core.backend import RECORD, Flag, backend_flags, backend_option, flag_of
from qcn.core.patterns import PYTHON_ENGINE, Kind, TrafficPattern
from qcn.core.results import summarize
from qcn.core.scenario import ScenarioError
from qcn.lab import backends
from qcn.simulator import engine
from qcn.simulator.engine import Simulation
from qcn.topologies.backend import MininetOptions

VOLATILE = ("wall_s", "events_per_s")


def steady(summary: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in summary.items() if k not in VOLATILE}


def test_the_seam_runs_what_the_simulator_runs(tmp_path: Path) -> None:
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.3})
    options = backends.RunOptions(seed=3, qcn=False)
    trace, summary = backends.run_and_record(sc, backends.SIMULATOR, tmp_path, options, plots=False)
    alone = Simulation(sc, seed=3, qcn=False).run()
    direct = summarize(sc, alone, qcn=False, backend="sim", seed=3)
    assert steady(summary) == steady(direct)
    assert trace.cnms == 0
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["random_seed"] == 3
    assert written["qcn"] is False
    assert {p.name for p in tmp_path.iterdir()} >= {"summary.json", "queue.csv", "sources.csv"}


def test_scaled_by_models_bmv2s_run() -> None:
    """Scaled for BMv2: sampled as often in BMv2's time, the CP judging departing frames."""
    base = scenarios.load("transient").with_overrides({"duration_s": 0.3})
    sc = base.scaled_for_bmv2()
    tau = base.bmv2.time_scale
    seam = backends.run_scenario(sc, backends.SIMULATOR, Path(), backends.RunOptions(scaled_by=tau))
    direct = Simulation(sc, sample_interval_s=1e-3 * tau, cp_at_departure=True).run()
    plain = Simulation(sc).run()
    assert seam.times_s == direct.times_s
    assert seam.queue_pkts == direct.queue_pkts
    assert len(plain.times_s) == pytest.approx(tau * len(seam.times_s), rel=0.01)


def test_record_adds_what_the_command_adds(tmp_path: Path) -> None:
    sc = scenarios.load("bursty").with_overrides({"duration_s": 0.1})
    options = backends.RunOptions()
    trace = backends.run_scenario(sc, backends.SIMULATOR, tmp_path, options)
    summary, plots = backends.record(
        tmp_path, sc, trace, backends.SIMULATOR, options, plots=False, extra={"sweep_key": "k1"}
    )
    assert plots == []
    assert summary["sweep_key"] == "k1"
    assert json.loads((tmp_path / "summary.json").read_text())["sweep_key"] == "k1"


def test_what_a_backend_refuses_is_decided_once() -> None:
    multihop = scenarios.load("tcp-multihop")
    assert "no TCP or iperf3 model" in backends.SIMULATOR.refusal(multihop)
    assert backends.MININET.refusal(multihop) == ""
    paused = scenarios.load("transient").with_overrides({"network.pause": True})
    assert "needs a link between switches" in backends.MININET.refusal(paused)
    assert backends.SIMULATOR.refusal(paused) == ""
    with pytest.raises(ScenarioError, match="no TCP or iperf3 model"):
        backends.run_scenario(multihop, backends.SIMULATOR, Path(), backends.RunOptions())
    with pytest.raises(KeyError, match=r"both: .*no TCP or iperf3 model"):
        backends.require(multihop, backends.SIMULATOR, KeyError, "both: ")
    backends.require(multihop, backends.MININET, KeyError)  # runs there: nothing raised
    # The simulator asks the same question when used on its own.
    with pytest.raises(ScenarioError, match="no TCP or iperf3 model"):
        Simulation(multihop)


def test_every_backend_declares_itself_and_its_own_options() -> None:
    """Each registered backend is a Backend whose own options hold their defaults, each
    field with its flag (or none) and how its recorded value is checked; no two backends
    declare one flag."""
    assert set(backends.names()) == {b.name for b in backends.AUTO_ORDER}
    flags: list[str] = []
    for b in backends.BACKENDS.values():
        assert isinstance(b.title, str)
        assert b.patterns
        b.options()  # (every field has its default)
        for f in fields(b.options):
            assert RECORD in f.metadata, (b.name, f.name)
        flags += [flag_of(f) for f in backend_flags(b.options)]
    assert len(flags) == len(set(flags))
    assert backends.ANYWHERE.missing() == ""


def test_bmv2_serves_frames_and_says_so_for_bytes(tmp_path: Path) -> None:
    """A scaled scenario kept at bytes cannot run on BMv2: refused before Mininet starts."""
    sc = scenarios.load("fct").with_overrides({"network.port_service": "bytes"})
    scaled = sc.scaled_for_bmv2(keep=["network.port_service"])
    with pytest.raises(ScenarioError, match="shaped in frames per second"):
        backends.run_scenario(scaled, backends.MININET, tmp_path, backends.RunOptions())
    assert list(tmp_path.iterdir()) == []


def test_a_pattern_only_the_python_engine_declares_is_refused_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A traffic pattern declared once (qcn.core.patterns), generated by the Python engine
    alone: that engine runs it; the compiled core and Mininet refuse it in one line each,
    before anything is written (an engine that did not know a pattern ran it as a constant
    source).  Nothing else lists it."""
    from qcn.cli.main import main  # noqa: PLC0415
    from qcn.simulator import compiled  # noqa: PLC0415

    pareto = TrafficPattern(
        "pareto", Kind.HOST_SOURCE, frozenset({PYTHON_ENGINE}), mininet=False, summary="test"
    )
    monkeypatch.setattr(traffic_patterns, "DECLARED", (*traffic_patterns.DECLARED, pareto))
    monkeypatch.setitem(engine.FRAME_GAPS, "pareto", engine.constant_gap)
    sc = scenarios.load("transient").with_overrides(
        {"workload.pattern": "pareto", "duration_s": 0.01}
    )
    Simulation(sc)  # the Python engine declares it
    assert compiled.unsupported(sc) == "the compiled core has no traffic pattern 'pareto'"
    with pytest.raises(ScenarioError, match=r"^the Mininet backend has no traffic pattern"):
        backends.require(sc, backends.MININET)
    with pytest.raises(ScenarioError, match=r"^the Mininet backend has no traffic pattern"):
        backends.MININET.check(sc, backends.RunOptions())
    monkeypatch.setenv("QCN_SIM_ENGINE", "compiled")
    if compiled.CORE_MISSING is None:
        with pytest.raises(ScenarioError, match=r"^QCN_SIM_ENGINE=compiled: the compiled core "):
            backends.require(sc, backends.SIMULATOR)
    monkeypatch.setenv("QCN_SIM_ENGINE", "auto")
    backends.require(sc, backends.SIMULATOR)  # (auto: the Python engine runs it)
    if compiled.CORE_MISSING is None:  # (and says so, once)
        capsys.readouterr()
        compiled.make_simulation(sc)
        assert capsys.readouterr().err == (
            "simulator: the Python engine runs this scenario, about 20x slower: the compiled "
            "core has no traffic pattern 'pareto'\n"
        )
    file = tmp_path / "pareto.toml"
    file.write_text(
        (scenarios.SCENARIO_DIR / "transient.toml")
        .read_text()
        .replace('pattern = "bernoulli"', 'pattern = "pareto"')
    )
    assert 'pattern = "pareto"' in file.read_text()
    refusals = {
        "compiled": "QCN_SIM_ENGINE=compiled: the compiled core has no traffic pattern 'pareto'",
    }
    if compiled.CORE_MISSING is None:
        monkeypatch.setenv("QCN_SIM_ENGINE", "compiled")
        assert main(["run", str(file), "--backend", "sim", "--out", str(tmp_path / "c")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert refusals["compiled"] in err
        assert not (tmp_path / "c").exists()
    monkeypatch.setenv("QCN_SIM_ENGINE", "python")
    neither = replace(pareto, engines=frozenset())  # now neither engine
    monkeypatch.setattr(traffic_patterns, "DECLARED", (*traffic_patterns.DECLARED[:-1], neither))
    assert main(["run", str(file), "--backend", "sim", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "the simulator's Python engine has no traffic pattern 'pareto'" in err


def test_each_host_source_pattern_the_python_engine_declares_has_its_generator() -> None:
    declared = set(traffic_patterns.of_kind(Kind.HOST_SOURCE))
    assert declared & set(traffic_patterns.generated_by(PYTHON_ENGINE)) == set(engine.FRAME_GAPS)


def test_a_new_host_source_pattern_is_its_declaration_and_its_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pareto gaps (heavy-tailed, shape 2.5), added as a user would: a declaration
    (qcn.core.patterns) and the Python engine's generator, nothing else.  The engine runs
    it: its source offers its rate on average, in gaps of the Pareto's spread (a constant
    source's are all one gap), and the run is the seed's to the last frame."""
    shape = 2.5
    gaps: list[float] = []

    def pareto_gap(sim: Simulation, s: engine.Source) -> float:
        mean = sim.frame_bits / s.offered_bps
        gap = float(mean * (shape - 1) / shape / (1.0 - sim.rng.random()) ** (1 / shape))
        gaps.append(gap)
        return gap

    pareto = TrafficPattern(
        "pareto", Kind.HOST_SOURCE, frozenset({PYTHON_ENGINE}), mininet=False, summary="Pareto gaps"
    )
    monkeypatch.setattr(traffic_patterns, "DECLARED", (*traffic_patterns.DECLARED, pareto))
    monkeypatch.setitem(engine.FRAME_GAPS, "pareto", pareto_gap)
    sc = scenarios.load("transient").with_overrides(
        {"workload.pattern": "pareto", "duration_s": 0.2}
    )
    backends.require(sc, backends.SIMULATOR)
    first = Simulation(sc).run()
    n, mean = len(gaps), sum(gaps) / len(gaps)
    expected = 8 * sc.network.frame_bytes / sc.workload.max_rate_bps  # (a frame at its rate)
    assert n > 1_000
    assert mean == pytest.approx(expected, rel=0.1)
    assert max(gaps) > 3 * expected  # (its tail; a constant source has one gap)
    assert min(gaps) < expected
    gaps.clear()
    assert Simulation(sc).run().port_queue_pkts == first.port_queue_pkts  # (the seed's)
    assert len(gaps) == n


@dataclass(frozen=True)
class WithQueueLog(MininetOptions):
    """A new Mininet option, declared as topologies/backend.py declares its own."""

    queue_log: bool = backend_option(
        False, Flag("log every queue sample"), lambda x: isinstance(x, bool), "true or false"
    )


def test_a_new_mininet_option_is_one_field_of_its_backends_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Declared once, in the backend's options: `qcn run` has its flag and help, refuses it
    on the simulator in one line, records it, and `--again` reads it back and refuses it
    given again (RunOptions has no backend's field to add)."""
    from qcn.cli.main import build_parser, main  # noqa: PLC0415

    monkeypatch.setattr(type(backends.MININET), "options", WithQueueLog)
    parser = build_parser()
    run = ["run", "transient", "--duration", "0.01"]
    args = parser.parse_args([*run, "--queue-log", "--sample-hz", "50"])
    own = backends.backend_options(backends.MININET, args)
    assert own == WithQueueLog(queue_log=True, sample_hz=50.0)
    options = backends.RunOptions(own=own)
    recorded = options.recorded(backends.MININET)
    assert recorded["queue_log"] is True
    assert backends.RunOptions.from_recorded(recorded, backends.MININET) == options
    with pytest.raises(ScenarioError, match=r"^run.queue_log = 'yes': expected true or false"):
        backends.RunOptions.from_recorded({**recorded, "queue_log": "yes"}, backends.MININET)
    with pytest.raises(ScenarioError, match=r"^--queue-log needs the Mininet/BMv2 backend$"):
        backends.backend_options(backends.SIMULATOR, parser.parse_args([*run, "--queue-log"]))
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    helped = capsys.readouterr().out
    assert "--queue-log" in helped
    assert "mininet: log every queue sample" in helped
    assert main(["run", "--again", "anywhere", "--queue-log"]) == 2
    assert "give none of --queue-log" in capsys.readouterr().err
