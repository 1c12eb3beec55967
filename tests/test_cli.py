"""The `qcn` command line as a user runs it (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def qcn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qcn", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_subcommands() -> None:
    r = qcn("--help")
    assert r.returncode == 0
    assert "params" in r.stdout


def test_params_prints_defaults_and_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    r = qcn("params", "--preset", "2-qcn", "--write", str(out))
    assert r.returncode == 0, r.stderr
    assert "timer_enabled = false" in out.read_text()
    r = qcn("params", str(out), "--check")
    assert r.returncode == 0
    assert "valid" in r.stdout


def test_bad_file_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("[cp]\np_base = 2\n")
    r = qcn("params", str(f))
    assert r.returncode == 2
    assert "cp.p_base: must be in [0, 1]" in r.stderr
    assert "Traceback" not in r.stderr


def test_every_helper_answers_at_the_front_door(tmp_path: Path) -> None:
    """`qcn NAME ARGS` is `python -m MODULE ARGS`, its usage saying `qcn NAME`."""
    r = qcn("--help")
    for name in ("build", "pause", "reproduce", "ptf", "sink", "frames"):
        assert f"    {name}" in r.stdout, name
        helped = qcn(name, "--help")
        assert helped.returncode == 0, (name, helped.stderr)
        assert helped.stdout.startswith(f"usage: qcn {name} "), (name, helped.stdout)
    # The helper's own mistakes stay one line, under its front-door name.
    r = qcn("reproduce", "--seeds", "one", "--out", str(tmp_path))
    assert r.returncode == 2
    assert "qcn reproduce: error: --seeds: a comma-separated list" in r.stderr
    assert "Traceback" not in r.stderr
    r = qcn("pause", "eth0")
    assert r.returncode == 2
    assert "qcn pause: error: the following arguments are required: --line-rate-mbps" in r.stderr


def test_auto_runs_what_bmv2_refuses_on_the_simulator(tmp_path: Path) -> None:
    # The single bottleneck with PAUSE runs on the simulator only: auto chooses it, here
    # (where BMv2 could run other scenarios) as on a machine without the toolchain.
    r = qcn(
        "run", "long-lived", "--quiet", "--duration", "0.005", "--set", "network.pause=true",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("qcn run: long-lived on the simulator")


def test_auto_runs_a_network_too_large_for_bmv2_here_on_the_simulator(tmp_path: Path) -> None:
    """HPCC's 56 switches fit no BMv2 scale on this machine (qcn.core.capacity): auto
    runs the simulator, saying why where BMv2 is installed."""
    r = qcn(
        "run", "hpcc-fat-tree", "--quiet", "--duration", "0.001", "--out", str(tmp_path / "run")
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("qcn run: hpcc-fat-tree on the simulator (")
    if "BMv2 on this machine" in r.stdout:
        assert "its switches would take" in r.stdout
