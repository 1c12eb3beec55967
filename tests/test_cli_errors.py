"""Every user mistake is one ``qcn: error:`` line and exit status 2, never a traceback
(the command line run as a user runs it, in a subprocess)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qcn.cli import main as cli
from qcn.core.publish import PARTIAL_MARKER
from qcn.core.scenario import SCENARIO_DIR
from qcn.topologies.netns import namespaces
from tests.kit import SLOW_SIM, assert_one_line_error, fill, interruptible, qcn, small_disk
from tests.toolchain import requires_root

NOT_UTF8 = b"[rp]\nline_rate_bps = 1e9 # \xff\xfe\n"


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "binary.toml").write_bytes(NOT_UTF8)
    (tmp_path / "dir.toml").mkdir()
    scenario = SCENARIO_DIR / "transient.toml"
    text = scenario.read_text()
    (tmp_path / "nan.toml").write_text(text.replace("at_s = 2.0", "at_s = nan", 1))
    (tmp_path / "status").mkdir()
    (tmp_path / "status" / "rp-h1-eth0@4026531840.json").write_text('{"iface": "h1-eth0", "pid"')
    (tmp_path / "status-shape").mkdir()
    (tmp_path / "status-shape" / "rp-h1-eth0@4026531840.json").write_text("[1, 2]")
    (tmp_path / "status-types").mkdir()
    (tmp_path / "status-types" / "rp-h1-eth0@4026531840.json").write_text(
        json.dumps(status_report("h1-eth0") | {"limiters": 5})
    )
    (tmp_path / "status-deep").mkdir()
    (tmp_path / "status-deep" / "rp-h1-eth0@4026531840.json").write_text("[" * 100_000)
    (tmp_path / "deep.toml").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    (tmp_path / "latency.json").write_text(
        '{"hosts": {"h1": {}, "h2": {}}, "switches": {"s1": {}}, '
        '"links": [["h1", "s1-p1", "1.2.3ms"], ["h2", "s1-p2"]]}'
    )
    (tmp_path / "fast.json").write_text(
        '{"hosts": {"h1": {}, "h2": {}}, "switches": {"s1": {}}, '
        '"links": [["h1", "s1-p1", "0.01ms", 1e12], ["h2", "s1-p2"]]}'
    )
    (tmp_path / "port.toml").write_text('[port_cp."s9:9"]\nq_eq_pkts = 30\n')
    (tmp_path / "rate.toml").write_text("[rp]\nline_rate_bps = 1e9\n")
    os.mkfifo(tmp_path / "fifo.toml")  # nobody writes to it: reading it would wait for ever
    return tmp_path


def status_report(iface: str) -> dict[str, object]:
    """A stopped daemon's status report, as the daemon writes it."""
    return {
        "iface": iface,
        "netns_id": 4026531840,
        "pid": 1,
        "running": False,
        "limit_by": "destination",
        "counters": {"cnms_accepted": 3},
        "latency_p50_ms": 0.2,
        "latency_p99_ms": 0.4,
        "limiters": [
            {"limiter": "00:00:00:00:00:02", "current_rate_bps": 5e7, "target_rate_bps": 9e7,
             "applied_rate_bps": 5e7, "stage": "FR", "byte_stage": 1, "time_stage": 0,
             "sent_bytes": 1500}
        ],
    }  # fmt: skip


RUN = ("run", "transient", "--backend", "sim")


def scenarios_sources(name: str) -> int:
    """How many sources scenario ``name`` has."""
    from qcn.core import scenario  # noqa: PLC0415

    return scenario.load(name).network.sources


CASES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("params file not UTF-8", ("params", "{d}/binary.toml"), ("binary.toml", "not UTF-8")),
    ("scenario not UTF-8", ("run", "{d}/binary.toml", "--backend", "sim"), ("not UTF-8",)),
    ("network not UTF-8", ("ctl", "-c", "{d}/binary.toml", "show"), ("not UTF-8",)),
    ("scenario is a directory", ("run", "{d}/dir.toml", "--backend", "sim"), ("directory",)),
    ("params is a directory", ("params", "{d}/dir.toml"), ("directory",)),
    ("schedule not a list", (*RUN, "--set", "schedule=5"), ("schedule: must be a list",)),
    (
        "onoff_sources strings",
        (*RUN, "--set", 'workload.onoff_sources=["a"]'),
        ("workload.onoff_sources: must be a list of whole numbers",),
    ),
    (
        "onoff_sources floats",
        (*RUN, "--set", "workload.onoff_sources=[1.5]"),
        ("workload.onoff_sources",),
    ),
    (
        "a bool is not a count",
        (*RUN, "--set", "network.sources=true"),
        ("network.sources: must be a whole number",),
    ),
    (
        "infinite rate",
        (*RUN, "--set", "network.bottleneck_rate_bps=inf"),
        ("network.bottleneck_rate_bps: must be a finite number",),
    ),
    (
        "infinite stagger",
        (*RUN, "--set", "workload.stagger_s=inf"),
        ("workload.stagger_s: must be a finite number",),
    ),
    (
        "NaN in a schedule",
        ("run", "{d}/nan.toml", "--backend", "sim"),
        ("schedule[0].at_s: must be a finite number",),
    ),
    ("params into a missing dir", ("params", "--write", "{d}/no/such/p.toml"), ("cannot write",)),
    (
        "corrupt status file",
        ("rp", "status", "--status-dir", "{d}/status"),
        ("not a status file",),
    ),
    (
        "status file of another shape",
        ("rp", "status", "--status-dir", "{d}/status-shape"),
        ("not a status file",),
    ),
    (
        "status file with a number for its limiters",
        ("rp", "status", "--status-dir", "{d}/status-types"),
        ("not a status file of qcn rp (a field of another type)",),
    ),
    (
        "status file nested 100,000 deep",
        ("rp", "status", "--status-dir", "{d}/status-deep"),
        ("not a status file (not JSON)",),
    ),
    ("deep TOML to run", ("run", "{d}/deep.toml", "--backend", "sim"), ("nested too deeply",)),
    ("deep TOML to params", ("params", "{d}/deep.toml"), ("nested too deeply",)),
    ("deep TOML to compare", ("compare", "{d}/deep.toml"), ("nested too deeply",)),
    (
        "deep TOML to rp start",
        ("rp", "start", "--iface", "lo", "--params", "{d}/deep.toml"),
        ("deep.toml", "nested too deeply"),
    ),
    (
        "deep --set",
        (*RUN, "--set", "duration_s=" + "[" * 5000 + "]" * 5000),
        ("--set duration_s: arrays or tables nested too deeply",),
    ),
    (
        "deep --grid",
        ("sweep", "transient", "--grid", "qcn.cp.w=1," + "[" * 5000 + "]" * 5000),
        ("--grid qcn.cp.w: arrays or tables nested too deeply",),
    ),
    (
        "--set with a line break injecting a key",
        (*RUN, "--set", "duration_s=0.01\nnetwork.sources=500"),
        ("--set duration_s: a value is one line",),
    ),
    (
        "--set duration_s and --duration",
        (*RUN, "--set", "duration_s=5", "--duration", "0.01"),
        ("duration_s: given by --set and by --duration",),
    ),
    (
        "sweep --set duration_s and --duration",
        ("sweep", "transient", "--grid=qcn.cp.w=1,2", "--set=duration_s=5", "--duration=0.01"),
        ("duration_s: given by --set and by --duration",),
    ),
    ("send port", ("rp", "send", "--dst", "10.0.0.2", "--port", "70000"), ("--port",)),
    ("send start-at", ("rp", "send", "--dst", "10.0.0.2", "--start-at", "1e12"), ("--start-at",)),
    ("send negative duration", ("rp", "send", "--dst", "10.0.0.2", "--duration", "-1"), ("dur",)),
    (
        "send NaN duration",
        ("rp", "send", "--dst", "10.0.0.2", "--duration", "nan"),
        ("duration_s must be a finite number",),
    ),
    (
        "send broadcast",
        ("rp", "send", "--dst", "255.255.255.255"),
        ("destination 255.255.255.255: a unicast host address is needed",),
    ),
    ("send multicast", ("rp", "send", "--dst", "224.0.0.1"), ("a unicast host address",)),
    (
        "send tiny load",
        ("rp", "send", "--dst", "10.0.0.2", "--pattern", "bernoulli", "--load", "1e-320"),
        ("load must be in [1e-06, 1]",),
    ),
    ("send tiny rate", ("rp", "send", "--dst", "10.0.0.2", "--rate-bps", "1e-300"), ("rate must",)),
    (
        "send tiny on/off mean",
        ("rp", "send", "--dst", "10.0.0.2", "--pattern", "onoff", "--mean-on-ms", "1e-12"),
        ("on/off means must be in",),
    ),
    (
        "send NaN rate",
        ("rp", "send", "--dst", "10.0.0.2", "--rate-bps", "nan"),
        ("rate_bps must be a finite number",),
    ),
    ("unwritable --out", (*RUN, "--out", "/proc/qcn-results"), ("--out /proc/qcn-results",)),
    ("stalls not a pair", (*RUN, "--inject-stalls", "30"), ("STALL_MS/PERIOD_MS",)),
    ("stall over its period", (*RUN, "--inject-stalls", "50/20"), ("0 < STALL_MS < PERIOD_MS",)),
    ("stall NaN", (*RUN, "--inject-stalls", "nan/100"), ("--inject-stalls 'nan/100'",)),
    ("stalls on the simulator", (*RUN, "--inject-stalls", "30/500"), ("needs the Mininet",)),
    ("pcap on the simulator", (*RUN, "--pcap"), ("--pcap needs the Mininet/BMv2 backend",)),
    (
        "send report unwritable",
        ("rp", "send", "--dst", "127.0.0.1", "--duration", "0.05", "--report", "/proc/x.json"),
        ("--report /proc/x.json",),
    ),
    ("ctl timeout NaN", ("ctl", "--timeout", "nan", "show"), ("--timeout must be in (0, 3600]",)),
    ("ctl timeout 0", ("ctl", "--timeout", "0", "show"), ("(got 0)",)),
    ("ctl timeout -1", ("ctl", "--timeout", "-1", "show"), ("(got -1)",)),
    ("ctl timeout inf", ("ctl", "--timeout", "inf", "show"), ("(got inf)",)),
    ("ctl run interval NaN", ("ctl", "run", "--interval", "nan"), ("--interval must be",)),
    ("ctl run interval 0", ("ctl", "run", "--interval", "0"), ("--interval must be",)),
    ("run --out empty", (*RUN, "--out", ""), ("--out: give a directory",)),
    (
        "a source rate of 1e-300",
        (*RUN, "--set", "workload.max_rate_bps=1e-300"),
        ("workload.max_rate_bps: must be in [1000, network.line_rate_bps]",),
    ),
    (
        "a bottleneck of 1e-300",
        (*RUN, "--set", "network.bottleneck_rate_bps=1e-300"),
        ("network.bottleneck_rate_bps: must be at least 1000 b/s",),
    ),
    ("run a nanosecond", (*RUN, "--duration", "1e-9"), ("duration_s: must be in [0.001, 3600]",)),
    (
        "on/off means of a picosecond",
        (*RUN, "--set", "workload.mean_on_s=1e-12"),
        ("on and off means must be at least 1 us",),
    ),
    ("a FIFO as the scenario", ("run", "{d}/fifo.toml"), ("not a regular file",)),
    # A table replaced by a scalar was an AttributeError traceback.
    (
        "a table set to a number",
        (*RUN, "--set", "network=1"),
        ("--set network: network is a table",),
    ),
    (
        "sweep: a table set to a number",
        ("sweep", "transient", "--set", "network=1", "--out", "{d}/sw"),
        ("--set network: network is a table",),
    ),
    (
        "sweep: a table gridded over numbers",
        ("sweep", "transient", "--grid", "network=1,2", "--out", "{d}/sw"),
        ("--set network: network is a table",),
    ),
    (
        "compare: a table set to a number",
        ("compare", "transient", "--set", "network=1"),
        ("--set network: network is a table",),
    ),
    # A topology the file check passed and a later step raised on.
    ("net show: a bad latency", ("net", "show", "{d}/latency.json"), ("latency must be like",)),
    (
        "run: a bad latency",
        (*RUN, "--set", 'network.topology="{d}/latency.json"'),
        ("latency must be like",),
    ),
    (
        "sweep: a bad latency",
        ("sweep", "transient", "--set", 'network.topology="{d}/latency.json"', "--out", "{d}/sw"),
        ("latency must be like",),
    ),
    (
        "compare: a bad latency",
        ("compare", "transient", "--set", 'network.topology="{d}/latency.json"'),
        ("latency must be like",),
    ),
    (
        "a generator's digit that is no number",
        ("net", "show", "single:²"),
        ("N must be a whole number",),
    ),
    (
        "a buffer past the core's integers",
        (*RUN, "--set", "network.buffer_pkts=9223372036854775807"),
        ("network.buffer_pkts: must be in [1, 1,000,000]",),
    ),
    # Counts no machine holds, refused before any work (qcn/core/resources.py).
    (
        "a hundred thousand local workers",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--workers", "100000", "--out", "{d}/sw"),
        ("--workers 100,000: a local cluster of 100,000 worker processes needs ~19,531.2 GB",),
    ),
    (
        "ten million seeds",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--seeds", "10000000", "--out", "{d}/sw"),
        ("20,000,000 points (2 grid combinations x 10,000,000 seeds): at most 100,000",),
    ),
    (
        "a simulation larger than memory",
        (
            "run",
            "long-lived",
            "--backend",
            "sim",
            "--duration",
            "3600",
            "--set",
            'network.topology="leaf-spine:16,32,32"',
            "--set",
            'workload.traffic="permutation"',
            "--out",
            "{d}/o",
        ),
        ("a simulation of 3600 s on leaf-spine:16,32,32 needs ~53.4 GB", "available"),
    ),
    (
        "a drawing of a thousand nodes",
        ("net", "draw", "leaf-spine:16,32,32", "-o", "{d}/ls.png"),
        ("1,072 switches and hosts: a drawing of more than 300 is unreadable",),
    ),
    (
        "a scale that is no number",
        (*RUN, "--scaled", "--scale", "fast"),
        ("--scale fast: give own, RATE or RATE,TIME",),
    ),
    (
        "a scale past BMv2's bounds",
        (*RUN, "--scaled", "--scale", "2"),
        ("--scale 2: RATE must be in (0, 1]",),
    ),
    # A ZeroDivisionError's traceback, in each command that takes --scale.
    ("a scale of 0, scaled", (*RUN, "--scaled", "--scale", "0"), ("--scale 0: RATE must be",)),
    ("a scale of 0", ("run", "transient", "--scale", "0"), ("--scale 0: RATE must be",)),
    ("a scale of 0, compared", ("compare", "transient", "--scale", "0"), ("--scale 0: RATE",)),
    (
        "a scale whose time is past BMv2's bounds",
        (*RUN, "--scaled", "--scale", "1e-9"),
        ("--scale 1e-9: the time scale must be in (0, 10000] (got 2.5e+08, from RATE)",),
    ),
    (
        "a scale given twice",
        (*RUN, "--scaled", "--scale", "own", "--set", "bmv2.time_scale=5"),
        ("bmv2.time_scale: given by --set and by --scale",),
    ),
    ("a scale for the simulator", (*RUN, "--scale", "own"), ("--scale needs the Mininet",)),
    ("a link of 1e12 Mb/s", ("net", "show", "{d}/fast.json"), ("rate must be from 1 kb/s",)),
    # A --params file's mistake was said to be "(with --set)", the file not named.
    (
        "a --params file's port that is no CP port",
        ("run", "fct", "--backend", "sim", "--params", "{d}/port.toml"),
        ("fct (with --params {d}/port.toml): port_cp.s9:9: not a CP port",),
    ),
    (
        "a --params file's line rate",
        ("run", "fct", "--backend", "sim", "--params", "{d}/rate.toml"),
        ("fct (with --params {d}/rate.toml): qcn.rp.line_rate_bps must equal",),
    ),
    # Accepted until --scaled, or ignored without a word.
    (
        "an unknown bmv2.set key",
        (*RUN, "--set", 'bmv2.set={{"qcn.cp.nope" = 1}}'),
        ("bmv2.set: 'qcn.cp.nope' is no field of the scenario",),
    ),
    (
        "an incast sink without incast traffic",
        (*RUN, "--set", 'workload.incast_sink="h1"'),
        ('workload.incast_sink: only with workload.traffic = "incast"',),
    ),
    ("name with a path", (*RUN, "--set", 'name="../../x"'), ("name: letters, digits",)),
    (
        "sweep grid and set",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--set", "qcn.cp.w=4"),
        ("qcn.cp.w: given by --grid and by --set",),
    ),
    (
        "sweep grid repeats a number",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,1.0"),
        ("--grid qcn.cp.w: a value is listed twice",),
    ),
    (
        "sweep address not a url",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--address", "not a url"),
        ("--address 'not a url': expected",),
    ),
    (
        "sweep address empty",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--address", ""),
        ("--address '': expected",),
    ),
    (
        "sweep address port",
        ("sweep", "transient", "--grid", "qcn.cp.w=1,2", "--address", "tcp://h:99999"),
        ("port must be in [1, 65535]",),
    ),
    (
        "line rate below the preset's increases",
        ("rp", "start", "--iface", "lo", "--line-rate-bps", "1e7"),
        ("--line-rate-bps 1e+07: rp.r_hai_bps", "give smaller ones in a --params file"),
    ),
    (
        "max limiters",
        ("rp", "start", "--iface", "lo", "--max-limiters", "0"),
        ("--max-limiters",),
    ),
    (
        "late after",
        ("rp", "start", "--iface", "lo", "--late-after-ms", "-3"),
        ("--late-after-ms -3: give a positive number of milliseconds",),
    ),
]


@pytest.mark.parametrize(
    ("args", "expected"), [(a, e) for _, a, e in CASES], ids=[name for name, _, _ in CASES]
)
def test_user_mistake_is_one_line(
    files: Path, args: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    r = qcn(*(a.format(d=files) for a in args))
    assert_one_line_error(r, *(e.format(d=files) for e in expected))


@requires_root()
def test_an_unroutable_destination_is_one_line() -> None:
    ns = f"unr{os.getpid() % 100000}"
    with namespaces(ns):
        r = subprocess.run(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "qcn", "rp", "send",
             "--dst", "10.9.9.9", "--duration", "0.05"],
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    assert_one_line_error(r, "cannot send to 10.9.9.9: Network is unreachable")


@requires_root()
def test_a_full_disk_is_one_line_and_nothing_looks_complete(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        r = qcn(*RUN, "--duration", "0.5", "--quiet", "--out", str(disk / "out"))
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr
        assert r.stderr.splitlines()[-1] == (
            "qcn: error: cannot write the results: No space left on device"
        )
        assert (disk / "out" / PARTIAL_MARKER).exists()


def test_unwritable_out_fails_before_the_run() -> None:
    began = time.monotonic()
    r = qcn(*RUN, "--out", "/proc/qcn-results")
    assert time.monotonic() - began < 10  # the run itself takes longer than this
    assert "qcn run: transient on" not in r.stdout


def test_sim_run_shows_progress_and_writes_strict_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = qcn(*RUN, "--duration", "2.5", "--out", str(out), env=SLOW_SIM)
    assert r.returncode == 0, r.stderr
    progress = [line for line in r.stderr.splitlines() if "ETA" in line]
    assert progress, r.stderr
    assert "/2.5 s" in progress[0]
    summary = json.loads(
        (out / "summary.json").read_text(),
        parse_constant=lambda c: pytest.fail(f"{c} in summary.json"),
    )
    assert summary["scenario"] == "transient"
    assert not (out / PARTIAL_MARKER).exists()


def test_a_run_never_silently_replaces_results(tmp_path: Path) -> None:
    """A second run into a results directory is refused in one line and leaves it alone;
    with --force it replaces it whole."""
    out = tmp_path / "out"
    assert qcn(*RUN, "--duration", "0.3", "--quiet", "--out", str(out)).returncode == 0
    before = (out / "summary.json").read_text()
    r = qcn(*RUN, "--duration", "0.4", "--quiet", "--out", str(out))
    assert_one_line_error(r, f"--out {out} holds results already; pass --force")
    assert (out / "summary.json").read_text() == before
    r = qcn(*RUN, "--duration", "0.4", "--quiet", "--force", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["duration_s"] == 0.4
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging left beside it


def test_quiet_run_prints_no_progress(tmp_path: Path) -> None:
    r = qcn(*RUN, "--duration", "1.2", "--quiet", "--out", str(tmp_path / "q"))
    assert r.returncode == 0, r.stderr
    assert "ETA" not in r.stderr


def test_interrupted_results_are_marked_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import qcn.core.results  # noqa: PLC0415

    def interrupted(*_: object) -> list[Path]:
        raise KeyboardInterrupt

    monkeypatch.setattr(qcn.core.results, "plot", interrupted)
    out = tmp_path / "cut"
    code = cli.main([*RUN, "--duration", "0.3", "--quiet", "--out", str(out)])
    assert code == 130
    assert (out / "summary.json").exists()
    assert "incomplete" in (out / PARTIAL_MARKER).read_text()
    err = capsys.readouterr().err
    assert "qcn: interrupted" in err
    assert f"partial results in {out}/" in err
    # Over results already there (--force), they stay whole; the cut run goes beside them.
    (out / PARTIAL_MARKER).unlink()
    code = cli.main([*RUN, "--duration", "0.3", "--quiet", "--force", "--out", str(out)])
    assert code == 130
    assert not (out / PARTIAL_MARKER).exists()
    assert (tmp_path / "cut.partial" / PARTIAL_MARKER).exists()


def test_one_bad_status_file_hides_no_other_daemon(tmp_path: Path) -> None:
    """A status file that is not one is skipped in a line of its own (exit status 1); the
    other daemons' are shown (the first bad one used to end the command)."""
    good = tmp_path / "rp-h1-eth0@4026531840.json"
    good.write_text(json.dumps(status_report("h1-eth0")))
    bad = tmp_path / "rp-h2-eth0@4026531840.json"
    bad.write_text(json.dumps(status_report("h2-eth0") | {"limiters": [{"limiter": 5}]}))
    r = qcn("rp", "status", "--status-dir", str(tmp_path))
    assert r.returncode == 1
    assert "h1-eth0 (pid 1, stopped, per destination)" in r.stdout
    assert "limiter 00:00:00:00:00:02" in r.stdout
    assert r.stderr == (
        f"qcn rp status: skipped {bad}: not a status file of qcn rp (a field of another type)\n"
    )
    r = qcn("rp", "status", "--status-dir", str(tmp_path), "--json")
    assert r.returncode == 1
    assert [x["iface"] for x in json.loads(r.stdout)] == ["h1-eth0"]


@requires_root()
def test_a_full_disk_leaves_no_empty_file(tmp_path: Path) -> None:
    """qcn params --write and qcn wireshark --install on a full disk: one line, and the
    file is the old one or none (both used to leave a 0-byte file)."""
    with small_disk(tmp_path / "disk") as disk:
        (disk / "old.toml").write_text("[rp]\n")
        fill(disk)
        r = qcn("params", "--write", str(disk / "p.toml"))
        assert_one_line_error(r, "cannot write", "No space left on device")
        r = qcn("params", "--write", str(disk / "old.toml"))
        assert_one_line_error(r, "cannot write")
        assert (disk / "old.toml").read_text() == "[rp]\n"
        r = qcn("wireshark", "--install", "--plugin-dir", str(disk / "plugins"))
        assert_one_line_error(r, "cannot install the plugin", "No space left on device")
        assert sorted(p.name for p in disk.rglob("*")) == ["filler", "old.toml", "plugins"]


def test_two_runs_to_one_fresh_out_do_not_both_succeed(tmp_path: Path) -> None:
    """The second to finish is told, in one line, and keeps its results beside (both used
    to report success, the later replacing the earlier without --force)."""
    out = tmp_path / "X"
    slow = subprocess.Popen(
        [sys.executable, "-m", "qcn", *RUN, "--duration", "3", "--quiet", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=SLOW_SIM,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not (tmp_path / f".X.partial-{slow.pid}").exists():
        assert slow.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    fast = qcn(*RUN, "--duration", "0.05", "--quiet", "--out", str(out))
    assert fast.returncode == 0, fast.stderr
    _, err = slow.communicate(timeout=120)
    assert slow.returncode == 2
    assert err.splitlines()[-1] == (
        f"qcn: error: --out {out}: another run put its results there while this one ran; "
        f"this run's are in {out}.partial/"
    )
    assert json.loads((out / "summary.json").read_text())["duration_s"] == 0.05
    assert json.loads((tmp_path / "X.partial" / "summary.json").read_text())["duration_s"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X", "X.partial"]


@pytest.mark.parametrize("scenario", ["transient", "fct"])
def test_a_simulation_interrupted_keeps_what_it_measured(tmp_path: Path, scenario: str) -> None:
    """Ctrl-C in the middle of a simulation kept the PARTIAL marker alone."""
    out = tmp_path / "cut"
    run = interruptible(
        [sys.executable, "-m", "qcn", "run", scenario, "--backend", "sim", "--duration",
         "5", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=SLOW_SIM,
    )  # fmt: skip
    assert run.stderr is not None
    for _ in range(2):  # (two progress lines: the simulation is under way)
        progress = run.stderr.readline()
        assert "ETA" in progress, progress
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "Traceback" not in err
    assert (out / PARTIAL_MARKER).exists()
    with (out / "queue.csv").open() as f:
        queue = list(csv.DictReader(f))
    assert len(queue) > 10
    assert 0 < float(queue[-1]["time_s"]) < 5
    with (out / "sources.csv").open() as f:
        sources = scenarios_sources(scenario)
        assert len(list(csv.DictReader(f))) == len(queue) * sources
    if scenario == "fct":
        assert (out / "flows.csv").read_text().count("\n") > 1


@pytest.mark.parametrize("engine", ["garbage", "pythön"])
def test_an_unknown_simulator_engine_is_one_line_before_anything_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    engine: str,
) -> None:
    """QCN_SIM_ENGINE=garbage was a ValueError traceback in run, --again and reproduce, and
    a worker's traceback in sweep."""
    done = tmp_path / "done"
    assert cli.main([*RUN, "--duration", "0.01", "--quiet", "--out", str(done)]) == 0
    monkeypatch.setenv("QCN_SIM_ENGINE", engine)
    expected = f"QCN_SIM_ENGINE='{engine}': expected one of auto, compiled, python"
    commands = [
        [*RUN, "--duration", "0.01", "--out", str(tmp_path / "run")],
        ["run", "--again", str(done), "--out", str(tmp_path / "again")],
        ["sweep", "transient", "--grid", "qcn.cp.w=1,2", "--out", str(tmp_path / "sweep")],
        ["reproduce", "--seeds", "1"],
    ]
    capsys.readouterr()
    for argv in commands:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.splitlines() == [f"qcn{' reproduce' * (argv[0] == 'reproduce')}: error: "
                                    f"{expected}"], argv  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done"]


@pytest.mark.parametrize("command", [RUN, ("sweep", "transient", "--grid", "qcn.cp.w=1,2")])
def test_a_relative_out_from_a_deleted_directory_is_one_line(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A FileNotFoundError traceback: the shell's directory was removed."""
    gone = tmp_path / "gone"
    gone.mkdir()
    r = subprocess.run(
        ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone),
         sys.executable, "-m", "qcn", *command, "--out", "rel"],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert_one_line_error(r, "--out rel: the current directory no longer exists")


#: `python -m qcn ARGS` once Python's own start-up (its site module) is done, said on
#: stderr: no project code can run before that, so a test times its Ctrl-C from there.
AFTER_PYTHON_STARTS = (
    "import runpy, sys; sys.stderr.write('started\\n'); sys.stderr.flush(); "
    "sys.argv[0] = 'qcn'; runpy.run_module('qcn', run_name='__main__')"
)


# (At 0.02-0.1 s Python itself may be inside an import lock's callback, where it prints
# "Exception ignored" of its own: not the project's code.)
@pytest.mark.parametrize("delay_s", [0.3, 0.6])
def test_ctrl_c_while_still_importing_is_one_line(tmp_path: Path, delay_s: float) -> None:
    """Ctrl-C in a command's first second or so (still importing) printed a KeyboardInterrupt
    traceback."""
    p = interruptible(
        [sys.executable, "-c", AFTER_PYTHON_STARTS, *RUN, "--quiet", "--out", str(tmp_path / "o")],
        stderr=subprocess.PIPE,
    )
    assert p.stderr is not None
    assert p.stderr.readline() == "started\n"
    time.sleep(delay_s)  # (a point in the imports: which one is the test's parameter)
    p.send_signal(signal.SIGINT)
    rest = p.stderr.read()
    assert p.wait(timeout=60) == 130, rest
    assert "Traceback" not in rest
    assert rest.splitlines()[-1] == "qcn: interrupted", rest


def test_the_largest_generator_is_shown_in_seconds() -> None:
    """`net show leaf-spine:32,62,64` (3,968 hosts) ran over 280 s with no output; its
    congestible ports were judged pair by pair.  Then ~2.5 s; since it shows BMv2's rates
    too (qcn net up's scale predicted over 246 k routes), 15.6 s with a compile taking the
    2 cores (5.2 s without that column, on the same machine then)."""
    began = time.monotonic()
    r = qcn("net", "show", "leaf-spine:32,62,64", timeout_s=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        "leaf-spine:32,62,64: 94 switches, 3968 hosts, 5952 links, 7936 CP ports"
    )
    assert time.monotonic() - began < 30
