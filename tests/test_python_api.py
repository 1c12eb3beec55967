"""The Python API (qcn/api/, docs/python.md): the same runs, points and best as the
commands, to the last digit; a mistake is the command's one line; tables that name their
hosts and ports and carry their units; `import qcn` light; every public name documented
and docs/python.md's reference current."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from distributed import LocalCluster

import qcn
import qcn.api
from qcn.api import reference
from qcn.api.support import command_args
from qcn.cli.main import main
from qcn.core.provenance import RUN_ITSELF_KEYS
from qcn.lab.backends import MININET

ROOT = Path(__file__).resolve().parent.parent
TRIANGLE = ROOT / "tests" / "data" / "triangle.json"


def figures(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary's figures: all but how long this run took to make."""
    return {k: v for k, v in summary.items() if k not in RUN_ITSELF_KEYS}


def test_a_run_gives_the_commands_figures_to_the_last_digit(tmp_path: Path) -> None:
    cli = tmp_path / "cli"
    argv = ["run", "transient", "--backend", "sim", "--set", "qcn.rp.fb_hat=true"]
    assert main([*argv, "--out", str(cli)]) == 0
    run = qcn.run("transient", set={"qcn.rp.fb_hat": True})
    assert (
        run.summary["recovery_ms"] == json.loads((cli / "summary.json").read_text())["recovery_ms"]
    )
    assert figures(run.summary) == figures(json.loads((cli / "summary.json").read_text()))
    for table in ("queue.csv", "sources.csv"):
        assert (run.directory / table).read_bytes() == (cli / table).read_bytes()
    pd.testing.assert_frame_equal(run.sources, pd.read_csv(cli / "sources.csv"))
    # The run says how to make it from a shell; made so, its run.toml is the command's.
    assert run.provenance["command"] == "qcn run transient --backend sim --set qcn.rp.fb_hat=true"
    ran = run.run_toml.split("\n\n", 1)[1]
    assert ran == (cli / "run.toml").read_text().split("\n\n", 1)[1]
    again = run.again()
    assert again.directory != run.directory
    assert figures(again.summary) == figures(run.summary)
    plots = run.plot()
    assert list(plots) == ["rates", "queue"]
    assert plots["queue"].axes[0].get_ylabel() == "queue (pkts)"
    # The temporary folder is the result's: gone with it.
    where = run.directory
    del run, plots
    assert not where.exists()


def test_tables_name_their_hosts_and_ports_and_carry_units() -> None:
    transient = qcn.run("transient", duration=0.5)
    assert list(transient.queue.columns) == [
        "time_s", "port", "queue_pkts", "throughput_bps", "capacity_bps"
    ]  # fmt: skip
    assert set(transient.queue["port"]) == {transient.summary["headline_port"]}
    sources = transient.sources
    assert list(sources.columns) == [
        "time_s", "source", "sender", "receiver", "current_rate_bps", "target_rate_bps",
        "throughput_bps",
    ]  # fmt: skip
    assert set(sources["sender"]) == {f"h{i}" for i in range(1, 11)}
    assert list(transient.ports.columns) == [
        "time_s", "port", "queue_pkts", "throughput_bps", "drops", "cnms"
    ]  # fmt: skip
    assert transient.ports.empty
    assert transient.flows.empty
    parking = qcn.run("parking-lot", duration=0.05)
    assert set(parking.ports["port"]) >= set(parking.summary["ports"])
    assert "delivered_bps" in parking.sources.columns
    flows = qcn.run("fct", duration=0.05).flows
    assert {"sender", "receiver", "size_bytes", "fct_s", "ideal_fct_s"} <= set(flows.columns)
    assert flows["finished"].dtype == bool
    assert flows["finished"].any()


def one_line_of(call: Callable[[], Any]) -> str:
    """The line a call's QcnError says, checked to come with no traceback from inside the
    project (a notebook shows the call, then the line)."""
    with pytest.raises(qcn.QcnError) as caught:
        call()
    inside = [f.filename for f in traceback.extract_tb(caught.value.__traceback__)
              if "/qcn/cli/" in f.filename or "/qcn/core/" in f.filename]  # fmt: skip
    assert inside == []
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    return str(caught.value)


def command_line_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``qcn ARGV`` says after ``error:`` (its parser's refusals too)."""
    with contextlib.suppress(SystemExit):  # (the parser's refusals exit)
        main(argv)
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    return line.split("error: ", 1)[1]


MISTAKES: list[tuple[Callable[[], Any], list[str]]] = [
    (lambda: qcn.run("no-such-scenario"), ["run", "no-such-scenario", "--backend", "sim"]),
    (lambda: qcn.run("transient", set={"qcn.cp.nope": 1}),
     ["run", "transient", "--backend", "sim", "--set", "qcn.cp.nope=1"]),
    (lambda: qcn.run("transient", backend="nope"), ["run", "transient", "--backend", "nope"]),
    (lambda: qcn.run("transient", seed=1, duration=-1),
     ["run", "transient", "--backend", "sim", "--duration", "-1"]),
    (lambda: qcn.Network("nope.json"), ["net", "show", "nope.json"]),
    (lambda: qcn.Network(TRIANGLE, ecmp="sideways"),
     ["net", "show", str(TRIANGLE), "--ecmp", "sideways"]),
    (lambda: qcn.sweep("transient", {"qcn": [1, 2]}), ["sweep", "transient", "--grid", "qcn=1,2"]),
    (lambda: qcn.sweep("transient", {}), ["sweep", "transient"]),
    (lambda: qcn.tune("fct", objective="nope"), ["tune", "fct", "--objective", "nope"]),
    (lambda: qcn.tune("fct", param={"qcn.cp.w": (4, 2)}),
     ["tune", "fct", "--param", "qcn.cp.w=4:2"]),
]  # fmt: skip


@pytest.mark.parametrize(("call", "argv"), MISTAKES, ids=[" ".join(a) for _, a in MISTAKES])
def test_a_mistake_is_the_commands_one_line(
    call: Callable[[], Any], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert one_line_of(call) == command_line_of(argv, capsys)


@pytest.mark.skipif(not MININET.missing(), reason="BMv2 runs here: qcn compare would run it")
def test_compare_without_the_toolchain_is_the_commands_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = one_line_of(lambda: qcn.compare("transient", runs=1))
    assert said == command_line_of(["compare", "transient", "--runs", "1"], capsys)
    assert "p4c" in said or "root" in said


def test_a_network_as_net_show_sees_it() -> None:
    net = qcn.Network(TRIANGLE)
    assert net.name == "triangle"
    assert list(net.hosts["host"]) == ["h1", "h2", "h3", "h4"]
    ports = net.ports.set_index("port")
    assert ports.loc["s1:2", "sim_rate_bps"] == 2e6  # (the file's 2 Mb/s link)
    assert ports.loc["s1:2", "to"] == "s2:2"
    assert set(net.cp_ports) == set(ports.index[ports["sim_cp"] == "CP"])
    assert net.routes("h1", "h4") == ["s1:3", "s3:4"]
    assert one_line_of(lambda: net.routes("h1", "h9")).startswith("triangle: no host 'h9'")
    assert len(net.draw().axes) == 1
    # A run on it: the network given as itself.
    run = qcn.run("long-lived", set={"network.topology": net, "workload.traffic": "incast"},
                  duration=0.05)  # fmt: skip
    assert run.scenario.topology.name == "triangle"


def test_the_api_takes_the_commands_defaults() -> None:
    """Each call's defaults are its command's (but for run's backend: the simulator)."""
    for fn, command in ((qcn.sweep, "sweep"), (qcn.tune, "tune"), (qcn.compare, "compare"),
                        (qcn.run, "run")):  # fmt: skip
        args = command_args(command, record=False, scenario="-")
        for p in inspect.signature(fn).parameters.values():
            if p.name in ("seeds", "workers", "trials", "holdout_seeds", "sampler_seed",
                          "runs", "seed", "duration", "address", "params", "scale"):  # fmt: skip
                assert getattr(args, p.name) == p.default, (command, p.name)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A Dask scheduler and one worker, as a notebook would point a sweep at one."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,  # type: ignore[no-untyped-call]
                      dashboard_address=None, silence_logs=logging.ERROR) as c:  # fmt: skip
        yield str(c.scheduler_address)


def test_sweep_and_tune_give_the_commands_points_and_best(
    tmp_path: Path, cluster: str, capsys: pytest.CaptureFixture[str]
) -> None:
    short = ["--duration", "0.05", "--address", cluster]
    assert main(["sweep", "long-lived", "--grid", "qcn=true,false", "--seeds", "2",
                 "--no-point-plots", "--out", str(tmp_path / "sweep"), *short]) == 0  # fmt: skip
    table = qcn.sweep("long-lived", {"qcn": [True, False]}, seeds=2, duration=0.05,
                      address=cluster)  # fmt: skip
    command = pd.read_parquet(tmp_path / "sweep" / "sweep.parquet")
    same = [c for c in command.columns if c not in RUN_ITSELF_KEYS]
    assert len(table) == 4
    pd.testing.assert_frame_equal(table[same], command[same])

    assert main(["tune", "fct", "--seeds", "1", "--holdout-seeds", "1", "--trials", "2",
                 "--constraint", "none", "--out", str(tmp_path / "tune"), *short]) == 0  # fmt: skip
    said = capsys.readouterr().out
    study = qcn.tune("fct", seeds=1, holdout_seeds=1, trials=2, constraint=[], duration=0.05,
                     address=cluster)  # fmt: skip
    best = json.loads((tmp_path / "tune" / "tune.json").read_text())["best"]
    assert study.best is not None
    assert study.best["trial"] == best["trial"]
    assert study.params == best["params"]
    pd.testing.assert_frame_equal(study.trials, pd.read_csv(tmp_path / "tune" / "trials.csv"))
    assert study.lines[0] in said
    assert study.best_file.read_text() == (tmp_path / "tune" / "best.toml").read_text()


def test_importing_qcn_is_light_and_its_names_are_the_apis() -> None:
    assert set(qcn.API) == set(qcn.api.__all__)
    assert {n for n in dir(qcn) if not n.startswith("_")} >= set(qcn.API)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = qcn.nope


def test_every_public_name_has_a_docstring_and_types() -> None:
    for name in qcn.API:
        obj = getattr(qcn, name)
        assert inspect.getdoc(obj), name
        callables = [obj]
        if inspect.isclass(obj):
            callables = [m.fget if isinstance(m, property) else m
                         for n, m in vars(obj).items() if not n.startswith("_")
                         and (inspect.isfunction(m) or isinstance(m, property))]  # fmt: skip
            for attr, kind, doc in reference.attributes(obj):
                assert kind, (name, attr)
                assert doc, (name, attr)
        for fn in callables:
            assert inspect.getdoc(fn), (name, fn)
            sig = inspect.signature(fn)
            assert sig.return_annotation is not sig.empty, (name, fn)
            untyped = [p.name for p in sig.parameters.values()
                       if p.annotation is p.empty and p.name != "self"]  # fmt: skip
            assert untyped == [], (name, fn)


def test_the_reference_in_docs_is_current() -> None:
    page = reference.PAGE.read_text()
    assert page == reference.page_with(page, reference.reference()), (
        "docs/python.md's reference is stale: python -m qcn.api.reference --write"
    )
    for name in qcn.API:
        assert f"qcn.{name}" in page
