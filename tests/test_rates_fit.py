"""Rates and parameters that fit each other (docs/experiments.md, "Rates that fit the
parameters"): a topology file's link without a rate runs at the scenario's line rate
(scaled with it for BMv2), the rates a file gives are taken once, parameters that do not
fit the links are said in one line, BMv2 refuses a simulator's rate, and a run that starts
no flow or delivers nothing fails in one line, with no nan and no negative count."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from qcn.cli.run import run_failure
from qcn.core import fit
from qcn.core import scenario as scenarios
from qcn.core.results import summarize
from qcn.core.scenario import BMV2_MAX_LINK_RATE_BPS, Scenario, ScenarioError
from qcn.core.topology import LinkDefaults, PortRef
from qcn.core.topology import load as load_topology
from qcn.lab import backends
from qcn.simulator.engine import Simulation
from qcn.topologies.measurement import Recording
from qcn.topologies.traces import drops_known_by_the_end, sink_trace
from tests.kit import assert_one_line_error, qcn

DATA = Path(__file__).parent / "data"
TRIANGLE = DATA / "triangle.json"
"""p4lang/tutorials' format: four hosts on three switches, one link of 2 Mb/s, the others
without a bandwidth."""
INCAST = {"network.topology": str(TRIANGLE), "workload.traffic": "incast"}


def triangle_with_rates(tmp_path: Path, host_mbps: float) -> Path:
    """The triangle with every link's bandwidth given: the hosts' ``host_mbps``."""
    data = json.loads(TRIANGLE.read_text())
    data["links"] = [
        [*link[:2], "0", link[3] if len(link) > 3 else host_mbps] for link in data["links"]
    ]
    path = tmp_path / "triangle-rates.json"
    path.write_text(json.dumps(data))
    return path


def long_lived(overrides: dict[str, Any]) -> Scenario:
    return scenarios.load("long-lived").with_overrides(overrides)


def test_a_link_without_a_rate_runs_at_the_scenarios_line_rate() -> None:
    sc = long_lived(INCAST)
    topo = sc.topology
    assert topo.access_link("h1").rate_bps == sc.network.line_rate_bps == 10e9
    assert topo.link_at(PortRef("s1", 2)).rate_bps == 2e6  # the file's own
    # Scaled for BMv2, the line rate scales and the file's own rate is taken as it is.
    scaled = sc.scaled_for_bmv2()
    assert scaled.topology.access_link("h1").rate_bps == pytest.approx(10e6)
    assert scaled.topology.link_at(PortRef("s1", 2)).rate_bps == 2e6
    # `qcn net up FILE`: the --line-rate.
    net = load_topology(str(TRIANGLE), LinkDefaults(line_rate_bps=20e6))
    assert net.access_link("h4").rate_bps == 20e6


def test_file_rate_scale_scales_only_the_rates_a_file_gives() -> None:
    sc = long_lived({**INCAST, "network.file_rate_scale": 0.5})
    assert sc.topology.access_link("h1").rate_bps == 10e9
    assert sc.topology.link_at(PortRef("s1", 2)).rate_bps == 1e6


def test_a_toml_file_without_rates_follows_the_line_rate_for_bmv2(tmp_path: Path) -> None:
    path = tmp_path / "star.toml"
    hosts = ("h1", "h2", "h3")
    path.write_text(
        '[[switch]]\nname = "s1"\n'
        + "".join(f'[[host]]\nname = "{h}"\n[[link]]\na = "{h}"\nb = "s1"\n' for h in hosts)
    )
    sc = long_lived({"network.topology": str(path), "workload.traffic": "incast"})
    assert sc.scaled_for_bmv2().topology.access_link("h1").rate_bps == pytest.approx(10e6)


def test_no_source_is_pinned_at_its_minimum_rate_on_the_triangle() -> None:
    """Before: the triangle's links ran at 10 Mb/s under parameters for 10 Gb/s, and every
    source sat at MIN_RATE for the whole run with the queue full."""
    sc = long_lived(INCAST)
    assert fit.misfits(sc) == []
    tr = Simulation(sc, seed=1).run()
    floor = sc.params.rp.min_rate_bps
    for i in range(len(sc.sources)):
        rates = [row[i] for row in tr.source_current_rate_bps]
        assert max(rates) > 10 * floor, i
    summary = summarize(sc, tr, qcn=True, backend="sim", seed=1)
    assert summary["queue_mean_settled_pkts"] < sc.network.buffer_pkts / 2


def test_parameters_that_do_not_fit_the_links_are_said(tmp_path: Path) -> None:
    slow = triangle_with_rates(tmp_path, 10)
    sc = long_lived({"network.topology": str(slow), "workload.traffic": "incast"})
    assert sc.offered_bps(0.1) == 3 * 10e6  # each source at most its link's 10 Mb/s
    found = fit.misfits(sc)
    assert found[0].startswith("MIN_RATE (qcn.rp.min_rate_bps) 10 Mb/s is 1x h1's 10 Mb/s link")
    assert any(m.startswith("R_HAI") for m in found)
    assert any(m.startswith("a byte-counter cycle") for m in found)
    assert any("s3:4 (3 sources, 10 Mb/s)" in m and "cannot drain" in m for m in found)
    line = fit.misfit_line(sc, "Run X instead.")
    assert "\n" not in line
    assert line.endswith(". Run X instead. (docs/experiments.md, 'Rates that fit the parameters')")
    # --scaled: the scenario's rates scale once, the file's stay, and they fit.
    assert fit.misfits(sc.scaled_for_bmv2()) == []
    # The triangle's own 2 Mb/s link against 10 Gb/s hosts, when traffic crosses it.
    perm = long_lived({**INCAST, "workload.traffic": "permutation"})
    assert fit.misfits(perm) == [
        "at MIN_RATE 10 Mb/s the sources still send at or above the rate of "
        "s2:2 (1 source, 2 Mb/s): its queue cannot drain"
    ]


def test_a_q_eq_above_the_buffer_is_said() -> None:
    sc = long_lived({**INCAST, "network.buffer_pkts": 20})
    assert fit.misfits(sc) == [
        "q_eq (22 frames) is at or above the buffer of s3:4 (20): its CP never signals"
    ]


@pytest.mark.parametrize("name", scenarios.available())
def test_every_scenario_fits_its_own_parameters(name: str) -> None:
    sc = scenarios.load(name)
    assert fit.misfits(sc) == []
    assert fit.misfits(sc.scaled_for_bmv2()) == []


def test_bmv2_refuses_a_file_at_a_simulators_rates(tmp_path: Path) -> None:
    fast = triangle_with_rates(tmp_path, 10_000)  # 10 Gb/s, as the simulator's scenarios
    sc = long_lived({"network.topology": str(fast), "workload.traffic": "incast"})
    with pytest.raises(ScenarioError, match="the link h1 - s1:1 runs at 10000 Mb/s, more than"):
        sc.scaled_for_bmv2()
    # A scenario already in BMv2's units (a run.toml of one) is refused before it runs.
    as_bmv2 = sc.with_overrides({"network.port_service": "bmv2"})
    assert "more than BMv2 carries" in backends.MININET.refusal(as_bmv2)
    assert backends.MININET.refusal(sc) == ""  # (not scaled yet)
    assert backends.SIMULATOR.refusal(as_bmv2) == ""
    assert BMV2_MAX_LINK_RATE_BPS == 1e9
    r = qcn("run", "long-lived", "--backend", "sim", "--scaled", "--set",
            f"network.topology={fast}", "--set", 'workload.traffic="incast"',
            "--out", str(tmp_path / "out"))  # fmt: skip
    assert_one_line_error(r, "more than BMv2 carries", "network.file_rate_scale")


def test_the_run_warns_in_one_line_and_records_it(tmp_path: Path) -> None:
    slow = triangle_with_rates(tmp_path, 10)
    out = tmp_path / "out"
    r = qcn("run", "long-lived", "--backend", "sim", "--duration", "0.02", "--set",
            f"network.topology={slow}", "--set", 'workload.traffic="incast"',
            "--out", str(out), "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    warnings = [x for x in r.stderr.splitlines() if "warning" in x]
    assert len(warnings) == 1
    assert warnings[0].startswith("qcn run: warning: the QCN parameters do not fit this network")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters_misfit"][0].startswith("MIN_RATE")


def test_a_run_that_starts_no_flow_fails_in_one_line(tmp_path: Path) -> None:
    """Before: `flows: 0 started ... nan` and exit status 0."""
    slow = triangle_with_rates(tmp_path, 10)
    out = tmp_path / "out"
    r = qcn("run", "leaf-spine-fct", "--backend", "sim", "--set", f"network.topology={slow}",
            "--set", "workload.rto_s=1.0", "--out", str(out), "--quiet")  # fmt: skip
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "nan" not in r.stdout
    assert "0 started" in r.stdout
    errors = [x for x in r.stderr.splitlines() if x.startswith("qcn: error:")]
    assert errors == [
        f"qcn: error: the run started no flow: workload.load of the "
        "destinations' links over the run (less workload.drain_fraction) came "
        f"to less than one flow of workload.flow_sizes; its results are in {out}/"
    ]
    assert (out / "summary.json").exists()  # what it measured is kept


def test_a_run_that_delivers_nothing_fails() -> None:
    sc = long_lived({**INCAST, "duration_s": 0.01, "workload.stagger_s": 1.0})
    tr = Simulation(sc, seed=1).run()
    tr.source_delivered_bps = [[0.0] * len(sc.sources) for _ in tr.times_s]
    tr.throughput_bps = [0.0] * len(tr.times_s)
    summary = summarize(sc, tr, qcn=True, backend="sim", seed=1)
    assert run_failure(summary, tr).startswith("the run delivered nothing")
    assert run_failure(summary, Simulation(sc, seed=1).run()) == ""


def test_drops_counted_from_late_frames_never_fall() -> None:
    # A sink counted 6 frames lost that arrived later: its count fell from 10 to 4.
    assert drops_known_by_the_end([0, 3, 10, 10, 4, 4, 5], 5) == [0, 3, 4, 4, 4, 4, 5]
    assert drops_known_by_the_end([2, 1], -1) == [0, 0]


def test_a_bmv2_runs_settled_drops_are_never_negative() -> None:
    """The BMv2 trace of a sink whose count fell by 6 after the settled window began (late
    frames it had counted lost): drops_settled was -6."""
    sc = long_lived({**INCAST, "duration_s": 0.1})
    rec = Recording(start=100.0)
    rec.queue = [(100.0 + k * 0.01, 50) for k in range(12)]
    rec.capacity = [(100.0, sc.initial_capacity_bps)]
    lost = [0, 2, 4, 6, 8, 10, 12, 14, 16, 10, 10, 10]  # 6 taken back at 0.09 s
    rec.sinks = {
        "h4": [
            (100.0 + k * 0.01 + 1e-4, {"10.0.1.1": [100 * k, 150_000 * k, n]})
            for k, n in enumerate(lost)
        ]
    }
    tr = sink_trace(sc, rec, 0.01, qcn=True, source_ips=["10.0.1.1", "10.0.2.2", "10.0.3.3"],
                    at_bottleneck=[True, True, True])  # fmt: skip
    assert tr.drops == 10
    assert tr.drops_so_far == sorted(tr.drops_so_far)
    summary = summarize(sc, tr, qcn=True, backend="mininet", seed=1)
    assert summary["drops_settled"] >= 0
    assert not math.isnan(summary["drops"])
