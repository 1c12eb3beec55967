"""`qcn run`'s own logic (qcn/run.py) that needs no backend: its overrides, its stall
option and its results directory; the runs themselves are in test_simulator.py,
test_backends.py and test_mininet_bmv2.py."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from qcn.core.publish import PARTIAL_MARKER, old_path, staging_path
from qcn.core.scenario import ScenarioError
from qcn.options import load_scenario, overrides_from
from qcn.run import StagedResults, parse_stalls, prepare_out


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
    killed.mkdir()
    (killed / PARTIAL_MARKER).write_text("")
    (killed / "queue.csv").write_text("measured")
    beyond = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process has it
    empty = staging_path(out, beyond)
    empty.mkdir()
    (empty / PARTIAL_MARKER).write_text("")
    old = old_path(out, pid)
    old.mkdir()
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
    old.mkdir()
    prepare_out(out, "fct", force=True)
    assert not old.exists()


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
    killed = staging_path(out, dead_pid())
    killed.mkdir()
    (killed / "queue.csv").write_text("measured")
    staged = prepare_out(out, "fct")  # not refused: X stays free for this run
    assert not out.exists()
    assert (out.with_name("X.partial") / "queue.csv").read_text() == "measured"
    assert staged.staging.exists()
