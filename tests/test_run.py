"""`qcn run`'s own logic (qcn/cli/run.py) that needs no backend: its overrides, its stall
option and its results directory; the runs themselves are in test_simulator.py,
test_backends.py and test_mininet_bmv2.py."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qcn.cli.run import StagedResults, prepare_out
from qcn.core import publish
from qcn.core.publish import (
    OWNER_MARKER,
    PARTIAL_MARKER,
    RESULTS_MARKER,
    old_path,
    owner_text,
    staging_path,
)
from qcn.core.scenario import ScenarioError
from qcn.lab.inputs import load_scenario, overrides_from
from qcn.topologies.backend import parse_stalls
from tests.kit import SLOW_SIM, small_disk
from tests.toolchain import requires_root


def test_overrides_are_toml_values_and_text_otherwise() -> None:
    assert overrides_from(["qcn.cp.w=4", "network.pause=true", "qcn_preset=qcn", "a = 1e9"]) == {
        "qcn.cp.w": 4,
        "network.pause": True,
        "qcn_preset": "qcn",
        "a": 1e9,
    }
    with pytest.raises(ScenarioError, match="expected KEY=VALUE"):
        overrides_from(["qcn.cp.w"])


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("duration_s=0.01\nnetwork.sources=500", "a value is one line"),
        ("duration_s=0.01\rnetwork.sources=500", "a value is one line"),
        ('notes="""a\nb"""', "a value is one line"),
        ("duration_s=" + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_a_set_is_one_value_or_refused(pair: str, message: str) -> None:
    """A line break used to start a second key, which was parsed and silently dropped."""
    with pytest.raises(ScenarioError, match=message):
        overrides_from([pair])


def test_set_and_duration_of_one_field_are_refused() -> None:
    with pytest.raises(ScenarioError, match="given by --set and by --duration"):
        load_scenario("transient", ["duration_s=5"], 0.01)


def test_load_scenario_applies_sets_and_duration() -> None:
    sc, overrides = load_scenario("transient", ["qcn.cp.w=4"], 0.5)
    assert overrides == {"qcn.cp.w": 4, "duration_s": 0.5}
    assert (sc.params.cp.w, sc.duration_s) == (4.0, 0.5)


@pytest.mark.parametrize(
    ("text", "expected"), [("30/500", (0.03, 0.5)), ("0.5/60000", (0.0005, 60.0))]
)
def test_stalls_are_milliseconds(text: str, expected: tuple[float, float]) -> None:
    assert parse_stalls(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["30", "500/30", "0/10", "x/y", "10/70000", "-1/10"])
def test_bad_stalls_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected STALL_MS/PERIOD_MS"):
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
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "summary.json"]
    assert (out / RESULTS_MARKER).read_text() == "run\n"  # (the project's: it stays)
    assert not staged.staging.exists()
    with pytest.raises(ScenarioError, match="holds results already; pass --force"):
        prepare_out(out, "transient")
    again = prepare_out(out, "transient", force=True)
    (again.staging / "queue.csv").write_text("")
    assert again.keep_partial() == out.with_name("b.partial")  # the old results stay whole
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "summary.json"]
    assert sorted(p.name for p in out.with_name("b.partial").iterdir()) == [
        RESULTS_MARKER,
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


def dead_pid() -> int:
    """The id of a process that has ended."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_two_runs_to_one_fresh_out_cannot_both_publish(tmp_path: Path) -> None:
    """Both checked a fresh --out before either finished: the second to finish used to
    replace the first's results without --force, both reporting success."""
    out = tmp_path / "X"
    first = prepare_out(out, "fct")
    second = StagedResults(out, staging_path(out, pid=1))  # another process's staging
    second.staging.mkdir()
    (second.staging / PARTIAL_MARKER).write_text("")
    (second.staging / "summary.json").write_text("second")
    (first.staging / "summary.json").write_text("first")
    second.publish()
    with pytest.raises(ScenarioError, match="another run put its results there while"):
        first.publish()
    assert (out / "summary.json").read_text() == "second"
    kept = out.with_name("X.partial")
    assert (kept / "summary.json").read_text() == "first"
    assert "complete, but another run put its own" in (kept / PARTIAL_MARKER).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X", "X.partial"]


def test_an_interrupted_run_never_deletes_earlier_partial_results(tmp_path: Path) -> None:
    out = tmp_path / "X"
    out.mkdir()
    (out / "summary.json").write_text("published")
    precious = out.with_name("X.partial")
    precious.mkdir()
    (precious / "queue.csv").write_text("precious")
    for n in (2, 3):
        staged = prepare_out(out, "fct", force=True)
        (staged.staging / "queue.csv").write_text(f"cut {n}")
        assert staged.keep_partial() == out.with_name(f"X.partial-{n}")
    assert (precious / "queue.csv").read_text() == "precious"
    assert (out / "summary.json").read_text() == "published"
    assert (out.with_name("X.partial-3") / "queue.csv").read_text() == "cut 3"


def test_leftovers_of_dead_runs_are_dealt_with_by_the_next(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kill -9 left .X.partial-PID (with results, or the marker alone) and .X.old-PID (a
    --force run that died between its two renames); the next run to X used to leave them."""
    out, pid = tmp_path / "X", dead_pid()
    killed = staging_path(out, pid)
    made_by_dead_run(killed, pid)
    (killed / PARTIAL_MARKER).write_text("")
    (killed / "queue.csv").write_text("measured")
    beyond = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    empty = staging_path(out, beyond)
    made_by_dead_run(empty, beyond)
    (empty / PARTIAL_MARKER).write_text("")
    old = old_path(out, pid)
    made_by_dead_run(old, pid)
    (old / "summary.json").write_text("the last published")
    staged = prepare_out(out, "fct", force=True)
    err = capsys.readouterr().err
    assert f"restored {out}: a run (PID {pid}) died replacing it" in err
    assert f"a run (PID {pid}) died unfinished: its partial results are in" in err
    assert (out / "summary.json").read_text() == "the last published"
    assert (out.with_name("X.partial") / "queue.csv").read_text() == "measured"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["X", "X.partial", staged.staging.name]
    )
    # A live run's staging (this process's, here) is left alone.
    other = prepare_out(tmp_path / "Y", "fct")
    prepare_out(tmp_path / "Y", "fct")
    assert other.staging.exists()
    # And old results superseded by a published run go.
    made_by_dead_run(old, pid)
    prepare_out(out, "fct", force=True)
    assert not old.exists()
    assert not (out / OWNER_MARKER).exists()  # (results put back are the user's)


def made_by_dead_run(path: Path, pid: int) -> None:
    """``path`` as a run of process ``pid`` (ended) made it: its owner marker."""
    path.mkdir()
    (path / OWNER_MARKER).write_text(owner_text(pid, ticks=1))


def users_own(path: Path, content: str = "mine") -> Path:
    path.mkdir()
    (path / "notes.txt").write_text(content)
    return path


def test_a_users_directories_named_like_leftovers_are_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`results/.t.old-1999`, a user's own directory, was deleted by the next `--force` run
    to t; `.t.partial-1999` was moved to t.partial; a `.t.old-N` with no t was "restored" as
    its results.  Only a directory with a run's owner marker, of its name's process, is
    ever a leftover."""
    pid = dead_pid()
    out = tmp_path / "t"
    out.mkdir()
    (out / "summary.json").write_text("published")
    old, partial = users_own(old_path(out, pid)), users_own(staging_path(out, pid))
    # A marker of another process than the name's is not its run's either.
    other = users_own(old_path(out, pid + 1))
    (other / OWNER_MARKER).write_text(owner_text(pid, ticks=1))
    staged = prepare_out(out, "transient", force=True)
    (staged.staging / "summary.json").write_text("new")
    staged.publish()
    assert (out / "summary.json").read_text() == "new"
    assert "qcn run:" not in capsys.readouterr().err
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted(["t", old.name, partial.name, other.name])
    for d in (old, partial, other):
        assert (d / "notes.txt").read_text() == "mine"
    # With no t, a user's .t.old-N is not "restored" as its results.
    shutil.rmtree(out)
    prepare_out(out, "transient")
    assert not out.exists()
    assert (old / "notes.txt").read_text() == "mine"


def test_a_users_directory_with_this_runs_staging_name_is_not_removed(tmp_path: Path) -> None:
    """The run removed whatever had its own staging name (a reused process id's)."""
    out = tmp_path / "t"
    users_own(staging_path(out))
    with pytest.raises(ScenarioError, match=r"is in the way \(not a run's\); move it"):
        prepare_out(out, "transient")
    assert (staging_path(out) / "notes.txt").read_text() == "mine"


def test_a_run_killed_outright_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    """A real run's staging carries its marker: after kill -9, the next run to the same
    --out knows it for a dead run's and deals with it."""
    out = tmp_path / "X"
    slow = subprocess.Popen(
        [sys.executable, "-m", "qcn", "run", "transient", "--backend", "sim", "--quiet",
         "--duration", "3", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SLOW_SIM,
    )  # fmt: skip
    staging = staging_path(out, slow.pid)
    deadline = time.monotonic() + 30
    while publish.owner(staging, slow.pid) != "live":
        assert slow.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    slow.send_signal(signal.SIGKILL)
    slow.wait()
    assert publish.owner(staging, slow.pid) == "dead"
    staged = prepare_out(out, "transient")
    assert sorted(p.name for p in tmp_path.iterdir()) == [staged.staging.name]


def test_a_failure_right_after_staging_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(_self: Path, *_: object, **__: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(ScenarioError, match="No space left on device"):
        prepare_out(tmp_path / "r", "transient")
    assert list(tmp_path.iterdir()) == []


def test_a_symlinked_out_is_where_it_points(tmp_path: Path) -> None:
    """--force on a symlinked --out used to leave a .X.old-PID symlink: the results now go
    where the link points, and the link stays."""
    target = tmp_path / "disk" / "results"
    target.mkdir(parents=True)
    (target / "summary.json").write_text("old")
    link = tmp_path / "X"
    link.symlink_to(target)
    staged = prepare_out(link, "transient", force=True)
    assert staged.out == target
    (staged.staging / "summary.json").write_text("new")
    staged.publish()
    assert link.is_symlink()
    assert (link / "summary.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X", "disk"]
    assert [p.name for p in target.parent.iterdir()] == ["results"]


def test_an_out_longer_than_path_max_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--out: the path is too long"):
        prepare_out(tmp_path.joinpath(*["d" * 200] * 25, "out"), "transient")
    with pytest.raises(ScenarioError, match="--out: the path is too long"):
        prepare_out(tmp_path / ("x" * 250), "transient")


def test_a_dead_runs_results_go_beside_out_and_the_next_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "X"
    pid = dead_pid()
    killed = staging_path(out, pid)
    made_by_dead_run(killed, pid)
    (killed / "queue.csv").write_text("measured")
    staged = prepare_out(out, "fct")  # not refused: X stays free for this run
    assert not out.exists()
    assert (out.with_name("X.partial") / "queue.csv").read_text() == "measured"
    assert staged.staging.exists()


# -- what is the project's: --force replaces nothing else ----------------------------------


def test_force_replaces_only_the_projects_results(tmp_path: Path) -> None:
    """ "holds results already; pass --force" was said of any folder, and --force on a
    folder of notes deleted notes.txt and photos/.  Results made before the marker are
    still the project's (their summary.json)."""
    notes = users_own(tmp_path / "notes")
    (notes / "photos").mkdir()
    for force in (False, True):
        with pytest.raises(ScenarioError) as refused:
            prepare_out(notes, "transient", force=force)
        assert f"--out {notes} holds files that are not qcn's results (notes.txt, photos/)" in str(
            refused.value
        )
        assert ("--force replaces only qcn's own" in str(refused.value)) == force
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]
    assert (notes / "notes.txt").read_text() == "mine"
    old = tmp_path / "old"
    old.mkdir()
    (old / "summary.json").write_text("a run's, before the marker")
    staged = prepare_out(old, "transient", force=True)
    (staged.staging / "summary.json").write_text("new")
    staged.publish()
    assert (old / "summary.json").read_text() == "new"
    assert (old / RESULTS_MARKER).read_text() == "run\n"


@pytest.mark.parametrize(
    ("where", "why"),
    [("/etc", "a system folder"), ("/usr/lib", "a system folder"), ("/", "the root folder")],
)
@pytest.mark.parametrize("force", [False, True])
def test_the_systems_folders_are_never_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, why: str, force: bool
) -> None:
    """/etc was told "holds results already; pass --force", and so was / through a link."""
    # (were it taken, nothing is made beside it: /.etc.partial-PID)
    monkeypatch.setattr(publish, "make_staging", lambda p: pytest.fail(f"staged {p}"))
    link = tmp_path / "link"
    link.symlink_to(where)
    for out in (Path(where), link):
        with pytest.raises(ScenarioError, match=f"{why} is never a results folder"):
            prepare_out(out, "transient", force=force)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_a_symbolic_link_loop_is_one_line(tmp_path: Path) -> None:
    """A loop made the run say that another run had put its results there."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ScenarioError, match="Too many levels of symbolic links"):
        prepare_out(tmp_path / "a", "transient")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@requires_root()
def test_a_mount_point_or_a_read_only_one_is_one_line(tmp_path: Path) -> None:
    """--out a link to a read-only mount made the run say that another run had put its
    results there (the rename onto a mount point failed)."""
    with small_disk(tmp_path / "disk") as disk:
        link = tmp_path / "link"
        link.symlink_to(disk)
        for force in (False, True):
            with pytest.raises(ScenarioError, match="a mount point: results are put in place"):
                prepare_out(link, "transient", force=force)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(ScenarioError, match=r"cannot write results there \(Read-only"):
            prepare_out(disk / "inside", "transient")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "link"]


def test_auto_asks_for_the_bmv2_cost_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`qcn run` choosing Mininet/BMv2 by itself looks the machine's BMv2 cost up once (its
    calibration: the binary and the pipeline hashed) and scales the run with that one."""
    import argparse  # noqa: PLC0415

    from qcn.cli import run as run_command  # noqa: PLC0415
    from qcn.core.capacity import BUILT_IN_COST  # noqa: PLC0415
    from qcn.lab import backends  # noqa: PLC0415

    asked: list[bool] = []

    def cost(*, measure: bool = True) -> object:
        asked.append(measure)
        return BUILT_IN_COST

    monkeypatch.setattr(run_command, "_cost", cost)
    monkeypatch.setattr(backends, "choose_backend", lambda _r: (backends.MININET, "BMv2"))
    monkeypatch.setattr(backends, "require", lambda _sc, _b: None)
    sub = argparse.ArgumentParser().add_subparsers()
    run_command.register(sub)
    prepared = run_command.fresh_run(sub.choices["run"].parse_args(["transient"]))
    assert prepared.backend is backends.MININET
    assert asked == [True]
    assert BUILT_IN_COST.describe() in prepared.why
