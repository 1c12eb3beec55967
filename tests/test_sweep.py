"""`qcn sweep` on a real Dask cluster: a scheduler and workers started as separate processes
over loopback (not an in-process fake), driven by the command as a user runs it."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from qcn.core import publish
from qcn.core import scenario as scenarios
from qcn.core.publish import OWNER_MARKER, RESULTS_MARKER, owner_text
from qcn.lab import backends
from qcn.lab.sweep import (
    Point,
    Store,
    SweepError,
    code_version,
    make_points,
    metric_cells,
    parse_grid,
    run_point,
    scheduler_refused,
)
from tests.kit import (
    SLOW_SIM,
    Cluster,
    assert_one_line_error,
    at_a_terminal,
    await_worker,
    ctrl_c,
    group_left,
    qcn,
)

# -- the grid ------------------------------------------------------------------------------


def test_the_qcn_axis_runs_points_with_and_without_qcn() -> None:
    assert parse_grid("qcn=true,false") == ("qcn", [True, False])
    with pytest.raises(SweepError, match="true and false"):
        parse_grid("qcn=1,2")
    sc = scenarios.load("fct").with_overrides({"duration_s": 0.01})
    points = make_points(sc, [("qcn", [True, False])], 1, "sim")
    assert len(points) == 2
    base = sc.to_dict()
    with_qcn, _ = run_point(base, {"qcn": True}, 1, False)
    without, _ = run_point(base, {"qcn": False}, 1, False)
    assert with_qcn.cnms > 0
    assert without.cnms == 0
    assert len(with_qcn.flows) == len(without.flows)  # the same flows, drawn from the seed


def test_a_seed_that_never_recovered_is_counted_not_averaged() -> None:
    rows = [
        {"network.rtt_s": 1e-5, "network.sources": 2, "recovery_ms": 90.0},
        {"network.rtt_s": 1e-5, "network.sources": 2, "recovery_ms": math.inf},
        {"network.rtt_s": 5e-4, "network.sources": 2, "recovery_ms": math.inf},
        {"network.rtt_s": 5e-4, "network.sources": 5, "recovery_ms": math.nan},
        {"network.rtt_s": 5e-4, "network.sources": 5, "recovery_ms": True},
    ]
    cells, never = metric_cells(rows, "recovery_ms", ["network.rtt_s", "network.sources"])
    assert cells == {(1e-5, 2): [90.0], (5e-4, 2): []}
    assert never == {(1e-5, 2): 1, (5e-4, 2): 1}


def test_grid_values_are_toml() -> None:
    assert parse_grid("network.rtt_s=10e-6, 2e-4") == ("network.rtt_s", [10e-6, 2e-4])
    assert parse_grid('qcn.cp.depth_at="dequeue",enqueue') == (
        "qcn.cp.depth_at",
        ["dequeue", "enqueue"],
    )
    with pytest.raises(SweepError, match="expected KEY=V1,V2"):
        parse_grid("network.rtt_s")
    with pytest.raises(SweepError, match="listed twice"):
        parse_grid("network.sources=2,2")


def test_points_are_the_product_times_seeds_with_stable_distinct_keys() -> None:
    sc = scenarios.load("transient")
    grids: list[tuple[str, list[Any]]] = [
        ("network.sources", [2, 4]),
        ("qcn.rp.fb_hat", [False, True]),
    ]
    points = make_points(sc, grids, seeds=3, backend="sim")
    assert len(points) == 2 * 2 * 3
    assert len({p.key for p in points}) == len(points)
    assert [p.key for p in make_points(sc, grids, 3, "sim")] == [p.key for p in points]
    # Another scenario content is another point, even with the same overrides and seed.
    other = make_points(sc.with_overrides({"duration_s": 1.0}), grids, 3, "sim")
    assert not {p.key for p in other} & {p.key for p in points}


def test_a_bad_grid_value_is_refused_before_anything_runs() -> None:
    sc = scenarios.load("transient")
    with pytest.raises(SweepError, match=r"network\.sources"):
        make_points(sc, [("network.sources", [2, "many"])], 1, "sim")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("transient",), "give at least one --grid"),
        (("transient", "--grid", "network.sources"), "expected KEY=V1,V2"),
        (("transient", "--grid", "network.sources=2", "--seeds", "0"), "--seeds"),
        (("transient", "--grid", "nosuch.field=1"), "nosuch"),
        (("transient", "--grid", "network.sources=2", "--out", "/proc/x"), "--out /proc/x"),
        (("transient", "--grid", "network.sources=2", "--out", "x" * 300), "path is too long"),
        (
            ("transient", "--grid", "network.sources=2", "--address", "tcp://127.0.0.1:1"),
            "no Dask scheduler answers",
        ),
    ],
)
def test_sweep_mistakes_are_one_line(args: tuple[str, ...], expected: str, tmp_path: Path) -> None:
    # (a mistake found once the sweep's directory is made leaves it in tmp_path, not in the
    # checkout's results/, where the next run's sweep of another grid was refused)
    out = () if "--out" in args else ("--out", str(tmp_path / "sweep"))
    assert_one_line_error(qcn("sweep", *args, *out, "--duration", "0.05", "--quiet"), expected)


def test_a_scheduler_address_nothing_listens_on_is_refused_at_once() -> None:
    """Connection refused is said before Dask's client would retry it for its 10 s; a
    listening address, or one that is not TCP, is left to the client."""
    import socket  # noqa: PLC0415

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        assert scheduler_refused(f"tcp://127.0.0.1:{port}") is None
        assert scheduler_refused(f"127.0.0.1:{port}") is None
    assert isinstance(scheduler_refused(f"tcp://127.0.0.1:{port}"), ConnectionRefusedError)
    assert scheduler_refused(f"tls://127.0.0.1:{port}") is None


# -- a real cluster ------------------------------------------------------------------------


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "sweep.csv").open() as f:
        return list(csv.DictReader(f))


def timeless(table: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows without the simulator's own timing (wall_s, events_per_s)."""
    return [{k: v for k, v in r.items() if k not in ("wall_s", "events_per_s")} for r in table]


def test_sweep_on_a_cluster_then_resumes_without_rerunning(
    cluster: Cluster, tmp_path: Path
) -> None:
    out = tmp_path / "sweep"
    args = ("sweep", "transient", "--grid", "network.sources=2,3", "--grid",
            "qcn.rp.fb_hat=false,true", "--seeds", "2", "--duration", "0.2",
            "--address", cluster.address, "--out", str(out))  # fmt: skip
    r = qcn(*args, timeout_s=240)
    assert r.returncode == 0, r.stderr
    assert "8 points run, 0 already done" in r.stdout
    table = rows(out)
    assert len(table) == 8
    assert {(t["network.sources"], t["qcn.rp.fb_hat"], t["seed"]) for t in table} == {
        (s, f, seed) for s in ("2", "3") for f in ("False", "True") for seed in ("1", "2")
    }
    for t in table:
        summary = json.loads((out / "points" / t["key"] / "summary.json").read_text())
        assert summary["sweep_key"] == t["key"]
        assert summary["random_seed"] == int(t["seed"])
        assert float(t["queue_mean_pkts"]) == pytest.approx(summary["queue_mean_pkts"])
    # The same seed gives the same summary: a point is a function of its key.
    again = qcn(*args, timeout_s=240)
    assert again.returncode == 0, again.stderr
    assert "0 points run, 8 already done" in again.stdout
    assert rows(out) == table
    import pyarrow.parquet as pq  # noqa: PLC0415

    assert pq.read_table(out / "sweep.parquet").num_rows == 8
    heatmap = out / "queue_mean_pkts.png"
    assert heatmap.exists()
    # A damaged store: a point's summary that is no report, a point's directory that is a
    # file. Both run again, and the sweep says so.
    (out / "points" / table[0]["key"] / "summary.json").write_text("[]")
    damaged = out / "points" / table[1]["key"]
    for f in damaged.iterdir():
        f.unlink()
    damaged.rmdir()
    damaged.write_text("")
    third = qcn(*args, timeout_s=240)
    assert third.returncode == 0, third.stderr
    assert "2 point(s) damaged on disk, run again" in third.stdout
    assert "2 points run, 6 already done" in third.stdout
    assert timeless(rows(out)) == timeless(table)  # a point is a function of its key
    table = rows(out)
    # Another sweep into the same --out is refused, and the first's table stays whole.
    other = qcn("sweep", "transient", "--grid", "network.sources=4", "--duration", "0.2",
                "--address", cluster.address, "--out", str(out))  # fmt: skip
    assert_one_line_error(other, f"--out {out} holds another sweep (of transient, grid "
                          "network.sources, qcn.rp.fb_hat, 2 seed(s))")  # fmt: skip
    assert rows(out) == table


def test_sigterm_ends_a_sweep_as_ctrl_c_does(tmp_path: Path) -> None:
    """It used to end without a word, leaking the local cluster's semaphores."""
    sweep = subprocess.Popen(
        [sys.executable, "-m", "qcn", "sweep", "transient", "--grid",
         "network.sources=2,3,4,5", "--duration", "3", "--workers", "1",
         "--out", str(tmp_path), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert sweep.stdout is not None
    assert "4 points (0 already done)" in sweep.stdout.readline()
    time.sleep(1.0)  # the local cluster starting, or a point running: either is cut
    sweep.send_signal(signal.SIGTERM)
    _, stderr = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, stderr
    assert "qcn: interrupted" in stderr
    assert "leaked" not in stderr
    assert "Traceback" not in stderr


def test_a_sweep_table_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / RESULTS_MARKER).write_text("sweep\n")  # (a sweep's folder)
    (tmp_path / "sweep.csv").mkdir()
    r = qcn("sweep", "transient", "--grid", "network.sources=2", "--duration", "0.05",
            "--out", str(tmp_path))  # fmt: skip
    assert_one_line_error(r, "sweep.csv is not a file; remove it")


def test_a_worker_killed_mid_sweep_has_its_points_retried(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "qcn", "sweep", "transient", "--grid",
         "network.sources=2,3,4", "--seeds", "2", "--duration", "1.0", "--address",
         cluster.address, "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    victim = cluster.workers[0]
    deadline = time.monotonic() + 120
    while not list((out / "points").glob("*/summary.json")):
        assert sweep.poll() is None, sweep.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)  # mid-sweep: it holds a point
    stdout, stderr = sweep.communicate(timeout=240)
    assert sweep.returncode == 0, stderr
    assert "6 points run" in stdout
    assert len(rows(out)) == 6
    assert victim.poll() is not None


def test_mininet_points_need_a_worker_that_declares_it(cluster: Cluster, tmp_path: Path) -> None:
    """Without one they would wait for ever: the sweep says how to start one instead."""
    r = qcn("sweep", "transient", "--backend", "mininet", "--grid", "qcn.cp.w=2",
            "--duration", "0.05", "--address", cluster.address, "--out", str(tmp_path / "s"),
            "--quiet")  # fmt: skip
    assert_one_line_error(
        r, "declares the mininet resource", f"dask worker {cluster.address}", "mininet=1"
    )


# -- a store's damage and its keys ---------------------------------------------------------


def written_store(out: Path, seeds: int) -> tuple[Store, list[Point]]:
    """A sweep of transient's two sources over ``seeds`` seeds, each point written."""
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.05})
    points = make_points(sc, [("network.sources", [2])], seeds, "sim")
    store = Store(out, sc, ["network.sources"], scaled=False, point_plots=False)
    store.prepare({"test": "damage"})
    for p in points:
        trace, _ = run_point(sc.to_dict(), dict(p.overrides), p.seed, False)
        store.write_point(p, trace, backend=backends.SIMULATOR)
    store.write_table()
    return store, points


def test_points_damaged_in_other_ways_are_named_and_run_again(tmp_path: Path) -> None:
    """A summary.json made a directory failed every rerun with "Is a directory" (the point
    neither named nor run again); a string in a figure ended the table in pyarrow's
    ArrowTypeError traceback."""
    out = tmp_path / "sweep"
    store, (dir_point, text_point, good) = written_store(out, 3)
    summary = store.point_dir(dir_point) / "summary.json"
    summary.unlink()
    summary.mkdir()
    (summary / "x").write_text("")
    text = store.point_dir(text_point) / "summary.json"
    text.write_text(json.dumps(json.loads(text.read_text()) | {"queue_mean_pkts": "x"}))
    again = Store(out, store.sc, store.grid_keys, scaled=False, point_plots=False)
    again.prepare({"test": "damage"})
    assert [again.done(p) for p in (dir_point, text_point, good)] == [False, False, True]
    assert again.corrupted == [dir_point.label, text_point.label]
    for p in (dir_point, text_point):
        trace, _ = run_point(store.sc.to_dict(), dict(p.overrides), p.seed, False)
        again.write_point(p, trace, backend=backends.SIMULATOR)
    again.write_table()
    assert len(rows(out)) == 3
    assert json.loads(summary.read_text())["sweep_key"] == dir_point.key
    # A column of numbers and text (whatever put it there) is text, not a traceback.
    again.rows[good.key]["events"] = "many"
    import pyarrow.parquet as pq  # noqa: PLC0415

    again.write_table()
    assert pq.read_table(out / "sweep.parquet").column("events").type == "string"


def test_a_killed_sweeps_leftovers_are_cleaned(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    store, (p,) = written_store(out, 1)
    child = subprocess.Popen(["true"])
    child.wait()
    killed = store.out / "points" / f".{p.key}.partial-{child.pid}"
    killed.mkdir()
    (killed / OWNER_MARKER).write_text(owner_text(child.pid, ticks=1))
    # A directory that merely has such a name is not a sweep's: it stays.
    (store.out / "points" / f".{p.key}.old-{child.pid}").mkdir()
    store.prepare({"test": "damage"})
    assert sorted(d.name for d in (out / "points").iterdir()) == [
        f".{p.key}.old-{child.pid}",
        p.key,
    ]


def test_a_points_key_covers_its_cdf_files_content(tmp_path: Path) -> None:
    """The key hashed the CDF's path: after the file was edited, a resumed sweep kept the
    stale figures (slowdown p50 1.11 where the edited file gives 1.88)."""
    cdf = tmp_path / "sizes.cdf"
    cdf.write_text("1000 0\n20000 1\n")
    sc = scenarios.load("fct").with_overrides({"workload.flow_sizes": str(cdf)})
    grid: list[tuple[str, list[Any]]] = [("workload.load", [0.5, 0.8])]
    before = [p.key for p in make_points(sc, grid, 2, "sim")]
    assert [p.key for p in make_points(sc, grid, 2, "sim")] == before
    cdf.write_text("1000 0\n90000 1\n")
    assert not {p.key for p in make_points(sc, grid, 2, "sim")} & set(before)


def test_thousands_of_seeds_are_keyed_at_once() -> None:
    """qcn sweep --seeds 3000 printed nothing for 40 s: each point hashed every source file
    (~17 ms); the code is hashed once a process now."""
    code_version.cache_clear()
    began = time.perf_counter()
    points = make_points(scenarios.load("transient"), [("qcn.cp.w", [1, 2])], 3000, "sim")
    assert len(points) == 6000
    assert code_version.cache_info().misses == 1
    assert time.perf_counter() - began < 10


def test_a_sweep_line_plot_reads_in_units_and_says_what_its_bars_are() -> None:
    """Its x axis read 0.000025 0.000050..., its y label was the key recovery_ms, and its
    error bars were not explained."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from qcn.lab.sweep import line_figure  # noqa: PLC0415

    cells = {(25e-6,): [100.0, 120.0, 110.0], (50e-6,): [150.0, 170.0, 160.0],
             (100e-6,): [200.0, 210.0, 205.0]}  # fmt: skip
    fig = line_figure(cells, "network.rtt_s", "recovery_ms", "robustness (qcn)")
    fig.canvas.draw()
    (ax,) = fig.axes
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert {"50 µs", "100 µs"} <= set(ticks), ticks
    assert not any("0.0000" in t for t in ticks)
    assert ax.get_xlabel() == "network.rtt_s (s)"
    assert ax.get_ylabel() == "recovery time (ms)"
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [
        "mean of 3 seeds; bars: smallest to largest"
    ]
    plt.close(fig)


def test_a_sweep_refuses_another_commands_folder_and_a_users(tmp_path: Path) -> None:
    """A sweep wrote into any --out but another sweep's: a study's, a run's, a user's."""
    folders = {"study": "study.json", "run": "summary.json", "mine": "notes.txt"}
    for name, held in folders.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / held).write_text("{}")
    for name, said in (
        ("study", "holds a study (qcn tune), not a sweep (qcn sweep)"),
        ("run", "holds a run's results (qcn run), not a sweep"),
        ("mine", "holds files that are not qcn's results (notes.txt)"),
    ):
        r = qcn("sweep", "transient", "--grid", "network.sources=2", "--duration", "0.05",
                "--out", str(tmp_path / name))  # fmt: skip
        assert_one_line_error(r, f"--out {tmp_path / name} {said}")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == sorted(
        [*folders, *(f"{name}/{held}" for name, held in folders.items())]
    )


SWEEP_OF_SIX = ["sweep", "transient", "--grid", "network.sources=2,3,4,5,6,7", "--duration",
                "0.3", "--no-point-plots", "--quiet"]  # fmt: skip


@pytest.mark.parametrize("when", ["as its workers start", "mid-sweep, twice", "at its end"])
def test_ctrl_c_at_a_terminal_is_one_line_whenever_it_comes(tmp_path: Path, when: str) -> None:
    """A terminal's Ctrl-C (SIGINT to the whole process group) reached the workers too: in
    the first seconds 32-159 lines of stderr with 2-7 tracebacks, or "Nanny failed to
    start" and exit 1; pressed twice, 210 lines and 12 tracebacks; at the sweep's end, exit
    0 and a worker's traceback.  Each moment is a state of the sweep, polled."""
    out = tmp_path / "sweep"
    sweep = at_a_terminal([sys.executable, "-m", "qcn", *SWEEP_OF_SIX, "--out", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert sweep.stdout is not None
    assert "6 points (0 already done)" in sweep.stdout.readline()
    await_worker(sweep)  # (its workers start, each still importing)
    if when != "as its workers start":
        landed = 1 if when == "mid-sweep, twice" else 6
        deadline = time.monotonic() + 120
        while len(list((out / "points").glob("*/summary.json"))) < landed:
            assert sweep.poll() is None, sweep.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
    ctrl_c(sweep)
    if when == "mid-sweep, twice":
        ctrl_c(sweep)
    stdout, stderr = sweep.communicate(timeout=60)
    if when == "at its end" and sweep.returncode == 0:  # (it had ended: it says so alone)
        assert stderr == "", stderr
        assert "6 points run" in stdout
    else:
        assert sweep.returncode == 130, stderr
        assert stderr.splitlines() == ["qcn: interrupted"]
    assert group_left(sweep.pid) == []


def test_a_killed_sweeps_scratch_folders_are_removed_by_the_next(tmp_path: Path) -> None:
    """kill -9 of a sweep left an empty /tmp/qcn-point-XXXX per point in flight, and the
    next run did not remove them.  A user's own folder of that name stays."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "qcn", "sweep", "transient", "--grid", "network.sources=2,3",
         "--duration", "3", "--workers", "1", "--out", str(tmp_path / "killed"), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**env, **SLOW_SIM},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (left := list(scratch.glob("qcn-point-*"))):  # (a point in flight)
        assert sweep.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sweep.kill()
    sweep.wait()
    # Its workers go with it (their ids are in the folders' names).
    for pid in (int(m[1]) for p in left if (m := re.match(r"qcn-point-(\d+)-", p.name))):
        while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.01)
    (scratch / "qcn-point-1-mine").mkdir()
    r = qcn("sweep", "transient", "--grid", "network.sources=2", "--duration", "0.05", "--out",
            str(tmp_path / "next"), "--workers", "1", "--quiet", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [p.name for p in scratch.glob("*qcn-point-*")] == ["qcn-point-1-mine"]


def test_a_scratch_folder_is_named_only_once_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI (2026-11-28): the kill above fell between a point's folder and its marker, and
    the unmarked qcn-point-PID-XXXX stayed.  A folder is now made hidden, marked, renamed;
    a hidden one of a gone process (a kill before its marker) goes with the dead ones."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with publish.scratch() as path:
        assert path.name.startswith(f"qcn-point-{os.getpid()}-")
        assert publish.owner(path, os.getpid()) == "live"
        assert [p.name for p in tmp_path.iterdir()] == [path.name]
    assert list(tmp_path.iterdir()) == []
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    for name in (f".qcn-point-{gone}-cut", f".qcn-point-{os.getpid()}-mine", ".qcn-point-1-x"):
        (tmp_path / name).mkdir()
    publish.remove_dead_scratch()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".qcn-point-1-x",
        f".qcn-point-{os.getpid()}-mine",
    ]


def test_a_zombies_scratch_folder_is_a_dead_runs(tmp_path: Path) -> None:
    """Where PID 1 does not reap (this container), a killed sweep's worker stays a zombie;
    its folder counted as a live run's and stayed (the test above, 3 of 6 runs)."""
    child = subprocess.Popen([sys.executable, "-c", "import os; print(os.getpid())"],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert child.stdout is not None
    pid = int(child.stdout.readline())
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 30
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":  # (ended, not yet reaped)
        assert time.monotonic() < deadline
        time.sleep(0.01)
    folder = tmp_path / f"qcn-point-{pid}-x"
    folder.mkdir()
    (folder / OWNER_MARKER).write_text(owner_text(pid, _ticks(stat)))
    try:
        assert publish.owner(folder, pid) == "dead"
    finally:
        child.wait()
        child.stdout.close()


def _ticks(stat: Path) -> int:
    return int(stat.read_text().rsplit(")", 1)[1].split()[19])


TWICE = """
import sys
import tempfile
from pathlib import Path
from qcn.lab import backends
from qcn.lab.sweep import Store, make_points, run_point
from qcn.core import scenario as scenarios

sc = scenarios.load("transient").with_overrides({"duration_s": 0.01})
points = make_points(sc, [("network.sources", [2, 3])], 1, "sim")
traces = {p.key: run_point(sc.to_dict(), dict(p.overrides), p.seed, False)[0] for p in points}
store = Store(Path(sys.argv[1]), sc, ["network.sources"], scaled=False, point_plots=False)
print("ready", flush=True)
sys.stdin.readline()
store.prepare({"test": "at once"})
for _ in range(25):
    for p in points:
        store.write_point(p, traces[p.key], backend=backends.SIMULATOR)
        store.write_table()
"""


def test_two_sweeps_writing_one_out_at_once_both_finish(tmp_path: Path) -> None:
    """Two identical sweeps to one --out at once: one said "cannot write the results in
    OUT: No such file or directory" (1 in 4 tries), the folder whole and holding the other's
    points: both wrote sweep.csv.tmp and sweep.json.tmp, and put the same point in place.
    Here two processes write the same two points and the table 25 times each, at once."""
    out = tmp_path / "sweep"
    writers = [
        subprocess.Popen([sys.executable, "-c", TWICE, str(out)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    for w in writers:  # (both ready, then both go)
        assert w.stdout is not None
        assert w.stdout.readline() == "ready\n", w.communicate()
    for w in writers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    for w in writers:
        _, stderr = w.communicate(timeout=120)
        assert w.returncode == 0, stderr
    assert len(rows(out)) == 2
    assert sorted(p.name for p in (out / "points").iterdir()) == sorted(r["key"] for r in rows(out))
    assert [p.name for p in out.iterdir() if "tmp" in p.name] == []
