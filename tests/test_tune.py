"""`qcn tune` as a user runs it: a study on the simulator over a real local Dask cluster, its
best setting as a parameter file that reproduces the trial, Ctrl-C and a rerun that continues,
and one line for each mistake."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.publish import RESULTS_MARKER
from qcn.lab.tune import (
    Constraint,
    Objective,
    TuneError,
    default_space,
    pareto_front,
    parse_constraint,
    parse_dimension,
)
from tests.kit import (
    SLOW_SIM,
    assert_one_line_error,
    at_a_terminal,
    await_worker,
    ctrl_c,
    group_left,
    interruptible,
    qcn,
    small_disk,
)
from tests.toolchain import requires_root

ROOT = Path(__file__).resolve().parent.parent
# fct for 0.05 s: 0.2 s a run with the compiled core; its defaults drop frames and leave
# short flows a p99 slowdown some settings halve (docs/tuning.md).
SHORT = ("fct", "--duration", "0.05", "--seeds", "1", "--holdout-seeds", "1")


def trials_of(out: Path) -> list[dict[str, str]]:
    with (out / "trials.csv").open() as f:
        return list(csv.DictReader(f))


def rerun_best(study: Path, scenario: str, out: Path) -> dict[str, object]:
    """`qcn run` of a study's best.toml (valid as a parameter file) on seed 1: its summary."""
    assert qcn("params", str(study / "best.toml"), "--check").returncode == 0
    r = qcn("run", scenario, "--backend", "sim", "--duration", "0.05", "--seed", "1",
            "--params", str(study / "best.toml"), "--out", str(out), "--quiet")  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


def test_a_study_finds_a_setting_its_file_reproduces(tmp_path: Path) -> None:
    """The best trial's figures come back from `qcn run --params best.toml` with its seed,
    exactly: the file is the setting the study measured."""
    out = tmp_path / "study"
    r = qcn("tune", *SHORT, "--trials", "8", "--out", str(out), timeout_s=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"best trial \d+: cp\.q_eq_pkts=\d+", r.stdout), r.stdout
    report = json.loads((out / "tune.json").read_text())
    best = report["best"]
    assert len([t for t in trials_of(out) if t["state"] == "complete"]) == 8
    assert set(best["params"]) >= {"qcn.cp.q_eq_pkts", "qcn.cp.w", "qcn.rp.gd"}
    # Its constraint (drops <= the defaults') held on the search's seed.
    defaults = report["defaults_search_seeds"]
    assert best["search_seeds"]["drops"]["mean"] <= defaults["drops"]["mean"]
    assert report["held_out_seeds"] == [2]
    for name in ("history.png", "importance.png", "best.toml", "trials.csv"):
        assert (out / name).stat().st_size > 0, name
    recorded = tomllib.loads((out / "run.toml").read_text())
    assert recorded["study"]["objectives"] == ["slowdown_short_p99:min"]
    assert recorded["study"]["constraints"] == ["drops<=default"]
    assert recorded["study"]["sampler"].startswith("optuna TPESampler(seed=1")
    assert "qcn.cp.w=0.25:8" in recorded["study"]["space"]
    assert recorded["scenario"]["duration_s"] == 0.05
    summary = rerun_best(out, "fct", tmp_path / "again")
    for metric in ("slowdown_short_p99", "drops"):
        assert summary[metric] == best["search_seeds"][metric]["mean"], metric
    # The defaults on the held-out seed are what `qcn run` gives there.
    r = qcn("run", "fct", "--backend", "sim", "--duration", "0.05", "--seed", "2",
            "--out", str(tmp_path / "defaults"), "--quiet")  # fmt: skip
    held = json.loads((tmp_path / "defaults" / "summary.json").read_text())
    assert held["slowdown_short_p99"] == report["defaults_held_out_seeds"][
        "slowdown_short_p99"]["mean"]  # fmt: skip


def test_an_interrupted_study_continues_and_loses_no_finished_trial(tmp_path: Path) -> None:
    out = tmp_path / "study"
    args = [sys.executable, "-m", "qcn", "tune", "fct", "--duration", "0.3", "--seeds", "1",
            "--holdout-seeds", "1", "--trials", "8", "--out", str(out),
            "--constraint", "drops<=1e9"]  # fmt: skip
    # The Python engine's pace (seconds a run), so that Ctrl-C comes mid-study; the rerun's
    # compiled core gives the same figures (tests/test_sim_core.py).
    proc = interruptible(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=SLOW_SIM
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 120
    seen = []
    for line in proc.stdout:  # (the progress line comes at most once a second)
        seen.append(line)
        m = re.search(r"(\d+)/8 trials", line)
        if (m and int(m[1]) >= 2) or time.monotonic() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "the same command continues the study" in rest
    before = {t["trial"]: t for t in trials_of(out) if t["state"] == "complete"}
    assert 2 <= len(before) < 8
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"({len(before)} already done)" in r.stdout
    after = {t["trial"]: t for t in trials_of(out) if t["state"] == "complete"}
    assert len(after) == 8
    assert {k: after[k] for k in before} == before  # each finished trial as it was


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--param", "qcn.cp.bogus=1:2"), ("qcn.cp.bogus", "no field")),
        (("--param", "qcn.cp.w=4:2"), ("empty bounds",)),
        (("--param", "network.rtt_s=1e-6:1e-5"), ("QCN parameters",)),
        (("--param", "qcn.cp.w=1:4:log"), ("steps of 0.0625",)),
        (("--param", "qcn.cp.q_eq_pkts=0:50:log"), ("log scale needs LOW above 0",)),
        (("--objective", "latency"), ("--objective latency", "not a figure")),
        (("--objective", "recovery_ms"), ("recovery_ms", "does not produce it")),
        (("--constraint", "drops<<3"), ("expected METRIC<=VALUE",)),
        (("--param", "qcn.cp.w=1:4", "--set", "qcn.cp.w=2.0"), ("tuned", "fixed")),
        (("--objective", "drops", "--objective", "drops"), ("each figure once",)),
        # It tuned the RP's fields alone, without a word; "port_cp.s1:11:  is not a CP port".
        (("--per-port", "--set", 'network.topology="single:1"'), ("(single:1) has no CP port",)),
        (("--param", "port_cp.s1:11=1:2"), ("expected port_cp.PORT.FIELD",)),
    ],
)
def test_a_mistake_is_one_line(tmp_path: Path, args: tuple[str, ...], expected: tuple[str]) -> None:
    r = qcn("tune", *SHORT, "--trials", "2", "--out", str(tmp_path / "s"), *args, timeout_s=120)
    assert_one_line_error(r, *expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # 1 GB after 50 s, deaf to SIGINT; 70 s of silence, then a worker's traceback.
        (("--workers", "100000"), ("--workers 100,000: a local cluster", "at most")),
        (("--seeds", "10000000"), ("30,000,002 runs", "at most 100,000 a study")),
        (("--holdout-seeds", "10000000"), ("20,000,003 runs", "at most 100,000")),
        (("--trials", "100000000"), ("100,000,003 runs",)),
        # A ValueError's traceback each.
        (("--sampler-seed", "-1"), ("--sampler-seed -1: a whole number from 0 to 4,294,967,295",)),
        (("--sampler-seed", "4294967296"), ("--sampler-seed 4294967296",)),
        (("--sampler-seed", "12345678901234567890"), ("--sampler-seed 12345678901234567890",)),
    ],
)
def test_counts_past_their_bounds_are_one_line_before_anything_is_written(
    tmp_path: Path, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    out = tmp_path / "s"
    r = qcn("tune", *SHORT, "--trials", "2", *args, "--out", str(out))
    assert_one_line_error(r, *expected)
    assert not out.exists()


def test_a_constraint_no_trial_meets_is_said_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "s"
    r = qcn("tune", *SHORT, "--trials", "3", "--constraint", "utilization>=2", "--out", str(out),
            timeout_s=120)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.splitlines()[-1:] == [
        f"qcn: error: no trial met the constraints (utilization>=2) in 3 trials: loosen them, "
        f"or widen the space (trials in {out / 'trials.csv'})"
    ]
    assert len(trials_of(out)) == 3


def test_another_study_in_the_same_out_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "s"
    loose = ("--constraint", "drops<=1e9")
    r = qcn("tune", *SHORT, *loose, "--trials", "1", "--out", str(out), timeout_s=120)
    assert r.returncode == 0, r.stderr
    r = qcn("tune", *SHORT, *loose, "--trials", "1", "--objective", "drops", "--out", str(out))
    assert_one_line_error(r, f"--out {out} holds another study")


def test_run_params_conflicts_are_refused(tmp_path: Path) -> None:
    params = tmp_path / "p.toml"
    params.write_text("[cp]\nw = 1.5\n")
    r = qcn("run", "fct", "--backend", "sim", "--params", str(params), "--set", "qcn.cp.w=2.0")
    assert_one_line_error(r, "qcn.cp.w: given by --params and by --set")
    params.write_text("[cp]\nw = 1.3\n")
    assert_one_line_error(qcn("run", "fct", "--backend", "sim", "--params", str(params)), "cp.w")
    r = qcn("run", "--again", str(tmp_path), "--params", str(params))
    assert_one_line_error(r, "--params")


# -- the parts -------------------------------------------------------------------------------


def test_w_is_searched_on_the_data_planes_steps() -> None:
    sc = scenarios.load("fct")
    d = parse_dimension("qcn.cp.w=0.3:8.01", sc)
    assert (d.low, d.high, d.step, d.log) == (0.3125, 8.0, 1 / 16, False)
    assert parse_dimension("qcn.cp.q_eq_pkts=5:60:log", sc).integer
    with pytest.raises(TuneError, match="integer bounds"):
        parse_dimension("qcn.cp.q_eq_pkts=5.5:60", sc)


def test_a_dcqcn_study_searches_the_marking_curve_and_dcqcns_own_fields() -> None:
    """Ports that mark ECN have no q_eq or sampling to tune; Kmin stays below Kmax however
    the two are drawn; DCQCN's own fields are searchable by name too."""
    fct = scenarios.load("fct")
    sc = fct.with_overrides(scenarios.scheme_overrides(fct, "dcqcn"))
    space = {d.key: d for d in default_space(sc)}
    assert set(space) == {
        "qcn.cp.kmin_bytes", "qcn.cp.kmax_bytes", "qcn.cp.pmax", "qcn.rp.r_ai_bps",
        "qcn.rp.timer_s", "qcn.rp.dcqcn.g", "qcn.rp.dcqcn.alpha_timer_s",
    }  # fmt: skip
    assert space["qcn.cp.kmin_bytes"].high < space["qcn.cp.kmax_bytes"].low
    assert space["qcn.cp.kmax_bytes"].high <= sc.network.buffer_pkts * sc.network.frame_bytes
    assert space["qcn.rp.dcqcn.g"].high <= 1.0
    assert parse_dimension("qcn.rp.dcqcn.g=0.001:0.1:log", sc).log
    with pytest.raises(TuneError, match="--per-port: a port's own fields are QCN's CP's"):
        default_space(sc, per_port=True)


def test_constraints_measure_their_excess_against_the_defaults() -> None:
    c = parse_constraint("drops<=default")
    assert c == Constraint("drops", at_most=True, bound=None)
    assert c.excess(90.0, {"drops": 100.0}) == -10.0
    u = parse_constraint("utilization >= 0.9")
    assert u.excess(0.8, {}) == pytest.approx(0.1)
    assert u.excess(0.95, {}) <= 0


class _T:
    def __init__(self, *values: float) -> None:
        self.values = list(values)


def test_the_pareto_front_keeps_what_nothing_beats() -> None:
    objectives = (Objective("slowdown_short_p99", False), Objective("utilization", True))
    a, b, c, d = _T(10, 0.9), _T(20, 0.95), _T(15, 0.85), _T(10, 0.9)
    assert pareto_front([a, b, c, d], objectives) == [a, b, d]
    assert math.isfinite(a.values[0])


# -- a port's own CP fields (networks of several CPs) -----------------------------------------


def test_a_ports_own_q_eq_holds_that_ports_queue_only(tmp_path: Path) -> None:
    """The parking lot's middle hop at q_eq 60, the others at the scenario's 22."""
    queues = {}
    for name, extra in (("own", ("--set", "port_cp.s2:2.q_eq_pkts=60")), ("all", ())):
        r = qcn("run", "parking-lot", "--backend", "sim", "--duration", "0.2", "--quiet",
                "--out", str(tmp_path / name), *extra)  # fmt: skip
        assert r.returncode == 0, r.stderr
        ports = json.loads((tmp_path / name / "summary.json").read_text())["ports"]
        queues[name] = {p: v["queue_mean_pkts"] for p, v in ports.items()}
    assert queues["own"]["s2:2"] > 2 * queues["all"]["s2:2"]
    for other in ("s1:1", "s3:2"):
        assert queues["own"][other] == pytest.approx(queues["all"][other], rel=0.15)
    assert 'port_cp."s2:2"' in (tmp_path / "own" / "run.toml").read_text()


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ("port_cp.s9:9.q_eq_pkts=30", ("port_cp.s9:9: not a CP port", "s1:1, s2:2, s3:2")),
        ("port_cp.s2:2.sampling=1", ("port_cp.s2:2.sampling", "q_eq_pkts, w, p_base, p_scale")),
        ("port_cp.s2:2.w=1.3", ("port_cp.s2:2.w", "multiple of 1/16")),
    ],
)
def test_a_bad_port_setting_is_one_line(setting: str, expected: tuple[str, ...]) -> None:
    r = qcn("run", "parking-lot", "--backend", "sim", "--set", setting)
    assert_one_line_error(r, *expected)


def test_a_per_port_study_writes_each_ports_setting_and_its_file_reproduces_it(
    tmp_path: Path,
) -> None:
    out = tmp_path / "study"
    r = qcn("tune", "parking-lot", "--duration", "0.05", "--per-port", "--objective",
            "jain_fairness", "--constraint", "none", "--trials", "3", "--seeds", "1",
            "--holdout-seeds", "1", "--out", str(out), timeout_s=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((out / "tune.json").read_text())
    best = report["best"]["params"]
    assert {k.rsplit(".", 1)[0] for k in best if k.startswith("port_cp.")} == {
        "port_cp.s1:1",
        "port_cp.s2:2",
        "port_cp.s3:2",
    }
    text = (out / "best.toml").read_text()
    assert '[port_cp."s2:2"]' in text
    summary = rerun_best(out, "parking-lot", tmp_path / "again")
    assert summary["jain_fairness"] == report["best"]["search_seeds"]["jain_fairness"]["mean"]


# -- a study's folder, inputs and journal ---------------------------------------------------

LOOSE = ("--constraint", "none")


def test_a_study_refuses_another_commands_folder_and_a_users(tmp_path: Path) -> None:
    """Over a run's results it exited 0 and replaced their run.toml (`--again` then failed);
    over a user's folder, their run.toml; over a sweep, its runs went into the sweep's
    points/.  A sweep made before the marker is known by its sweep.json."""
    run = tmp_path / "run"
    r = qcn("run", "fct", "--backend", "sim", "--duration", "0.05", "--out", str(run), "--quiet")
    assert r.returncode == 0, r.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "run.toml").write_text("x = 1\n")
    sweep = tmp_path / "sweep"
    (sweep / "points").mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    before = {d: sorted(p.name for p in d.rglob("*")) for d in (run, mine, sweep)}
    run_toml = (run / "run.toml").read_text()
    for out, said in (
        (run, "holds a run's results (qcn run), not a study (qcn tune)"),
        (mine, "holds files that are not qcn's results (run.toml)"),
        (sweep, "holds a sweep (qcn sweep), not a study (qcn tune)"),
    ):
        r = qcn("tune", *SHORT, *LOOSE, "--trials", "1", "--out", str(out))
        assert_one_line_error(r, f"--out {out} {said}")
    assert {d: sorted(p.name for p in d.rglob("*")) for d in before} == before
    assert (run / "run.toml").read_text() == run_toml
    assert (mine / "run.toml").read_text() == "x = 1\n"


def test_a_study_continued_on_changed_inputs_is_refused(tmp_path: Path) -> None:
    """Its CDF edited between --trials 1 and --trials 2, the study went on (exit 0), its
    best a trial of the old CDF; with study.json gone and another objective, the journal's
    slowdowns were taken as drops."""
    cdf = tmp_path / "sizes.cdf"
    cdf.write_text("1000 0\n20000 1\n")
    out = tmp_path / "s"
    args = ("tune", *SHORT, *LOOSE, "--set", f'workload.flow_sizes="{cdf}"', "--out", str(out))
    r = qcn(*args, "--trials", "1", timeout_s=120)
    assert r.returncode == 0, r.stdout + r.stderr
    identity = json.loads((out / "study.json").read_text())
    assert identity["study"]["inputs"]["workload.flow_sizes"]["path"] == str(cdf)
    # A study made before the marker and the inputs' record is still the project's, and
    # continues (its inputs recorded from then on).
    (out / RESULTS_MARKER).unlink()
    del identity["study"]["inputs"]
    (out / "study.json").write_text(json.dumps(identity))
    r = qcn(*args, "--trials", "2", timeout_s=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(1 already done)" in r.stdout
    assert "inputs" in json.loads((out / "study.json").read_text())["study"]
    assert (out / RESULTS_MARKER).read_text() == "study\n"
    cdf.write_text("1000 0\n90000 1\n")
    assert_one_line_error(
        qcn(*args, "--trials", "3"),
        f"--out {out} holds another study: workload.flow_sizes: {cdf} changed since the study",
    )
    (out / "study.json").unlink()
    r = qcn(*args, "--trials", "3", "--objective", "drops:max")
    assert_one_line_error(r, "study.journal is there without study.json: what its trials")
    assert trials_of(out)[0]["state"] == "complete"  # (the study as it was)


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("study") / "s"
    r = qcn("tune", *SHORT, *LOOSE, "--trials", "2", "--out", str(out), timeout_s=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def tampered(text: str) -> str:
    """The first finished trial's objective made text."""
    return re.sub(r'("state":1,"values":)\[[^]]*\]', r'\1"abc"', text, count=1)


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda j: j.write_text(j.read_text() + "hello world\n"), "is not a JSON record"),
        (lambda j: j.write_bytes(j.read_bytes() + bytes(range(200, 256)) + b"\n"), "not a JSON"),
        (lambda j: (j.unlink(), j.mkdir()), "(not a file)"),
        (lambda j: j.write_text(j.read_text() + '{"op_code": 99}\n'), "Optuna cannot apply"),
        (lambda j: j.write_text(j.read_text() + "[1]\n"), "no operation of a journal"),
        (lambda j: j.write_text(tampered(j.read_text())), "has not 1 number(s) as its objec"),
    ],
    ids=["garbage", "binary", "a folder", "an unknown op", "no op", "a tampered value"],
)
def test_a_damaged_journal_is_one_line_naming_it(
    finished_study: Path, tmp_path: Path, damage: Any, said: str
) -> None:
    """Each was a traceback (JSONDecodeError, UnicodeDecodeError, IsADirectoryError,
    AssertionError, TypeError)."""
    out = tmp_path / "s"
    shutil.copytree(finished_study, out)
    damage(out / "study.journal")
    r = qcn("tune", *SHORT, *LOOSE, "--trials", "3", "--out", str(out))
    assert_one_line_error(r, f"{out / 'study.journal'}: not a study's journal, or damaged", said)


def test_a_journal_cut_short_drops_its_last_record_and_the_study_goes_on(
    finished_study: Path, tmp_path: Path
) -> None:
    """What a crash mid-write leaves: the next run glued its first record onto the partial
    line and failed, and so did every run after it."""
    out = tmp_path / "s"
    shutil.copytree(finished_study, out)
    journal = out / "study.journal"
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-40])
    r = qcn("tune", *SHORT, *LOOSE, "--trials", "3", "--out", str(out), "--quiet", timeout_s=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        f"qcn tune: {journal}: its last record was cut short (a stop while it was written): dropped"
    ]
    assert journal.read_bytes().startswith(whole[: whole.rfind(b"\n", 0, len(whole) - 40) + 1])
    assert len([t for t in trials_of(out) if t["state"] == "complete"]) == 3
    r = qcn("tune", *SHORT, *LOOSE, "--trials", "3", "--out", str(out), timeout_s=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(3 already done)" in r.stdout
    assert "cut short" not in r.stderr


@pytest.mark.parametrize("when", ["as its workers start", "mid-study, twice"])
def test_ctrl_c_at_a_terminal_is_one_line(tmp_path: Path, when: str) -> None:
    """A terminal's Ctrl-C (SIGINT to the whole process group) reached the workers too: in
    the first two seconds 32-159 lines of stderr with 2-7 tracebacks, at 0.7 s "Nanny failed
    to start" and exit 1; pressed twice, 210 lines and 12 tracebacks."""
    out = tmp_path / "s"
    study = at_a_terminal(
        [sys.executable, "-m", "qcn", "tune", *SHORT, *LOOSE, "--trials", "8", "--out",
         str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    await_worker(study)  # (its workers start, each still importing)
    if when == "mid-study, twice":
        deadline = time.monotonic() + 120
        while not list((out / "points").glob("*/summary.json")):  # (the defaults' run)
            assert study.poll() is None, study.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ctrl_c(study)
    ctrl_c(study)
    _, stderr = study.communicate(timeout=60)
    assert study.returncode == 130, stderr
    assert stderr.splitlines() == ["qcn: interrupted"]
    assert group_left(study.pid) == []
    assert sorted(p.name for p in out.iterdir() if p.suffix in (".log", ".tmp")) == []


@requires_root()
def test_a_full_disk_mid_study_is_one_line_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The one-line error came after 19-23 lines of Dask's "Compute Failed ... Traceback"
    (a worker's full disk), and trials.csv.tmp was left in --out."""
    with small_disk(tmp_path / "disk", size="400k") as disk:
        out = disk / "s"
        r = qcn("tune", *SHORT, *LOOSE, "--trials", "8", "--out", str(out), "--quiet",
                timeout_s=120)  # fmt: skip
        assert r.returncode == 2, r.stdout + r.stderr
        (line,) = r.stderr.splitlines()
        assert line.startswith(f"qcn: error: cannot write the study in {out}: No space left")
        assert [p for p in out.rglob("*") if ".tmp" in p.name or ".partial-" in p.name] == []
        # Dask's log is there if the line names it (a full disk may have kept it empty).
        assert (out / "dask.log").exists() == line.endswith(f"(Dask's log: {out / 'dask.log'})")


DASK_SAYS = """
import logging, sys
from pathlib import Path
import distributed  # (its configuration: the loggers' own handlers on stderr)
from qcn.lab.sweep import dask_logged_to, dask_said
log = Path(sys.argv[1])
with dask_logged_to(log):
    for name in ("tornado.application", "distributed.client", "distributed"):
        logging.getLogger(name).error("said by %s", name)
    print(dask_said(log))
"""


def test_every_logger_of_dasks_says_into_its_log_not_the_terminal(tmp_path: Path) -> None:
    """CI (2026-11-28): pressed twice mid-study, Dask's own NameError (distributed's sync()
    cancelled before its future exists) came through ``tornado.application``'s handler."""
    log = tmp_path / "dask.log"
    r = subprocess.run([sys.executable, "-c", DASK_SAYS, str(log)], capture_output=True,
                       text=True, timeout=60, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    said = [line.split(" - ")[1:] for line in log.read_text().splitlines()]
    assert said == [
        [name, "ERROR", f"said by {name}"]
        for name in ("tornado.application", "distributed.client", "distributed")
    ]
