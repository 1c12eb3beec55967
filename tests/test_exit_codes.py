"""One exit-status convention for every command (docs/reliability.md, "Exit codes"), and
the first hour's mistakes each one line: an interface that is not there, no network up, a
port taken; a sink that does not flood the terminal."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qcn.cli import main as cli
from qcn.controller import cli as controller_cli
from qcn.core.errors import ExitCode
from qcn.topologies.rawframes import ACTIONS
from tests.kit import assert_one_line_error, qcn

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"


def test_the_docs_list_every_exit_code_the_code_has() -> None:
    text = DOCS.read_text()
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = [int(m) for m in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)]
    assert documented == [int(c) for c in ExitCode]


# -- 3: a program the command needs is not installed ------------------------------------------


@pytest.fixture
def no_tools(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds none of the p4lang toolchain (nor anything else)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    return {**os.environ, "PATH": str(empty)}


@pytest.mark.parametrize(
    "args",
    [
        ("ptf",),
        ("build", "--out", "{d}/build"),
        ("run", "transient", "--backend", "mininet", "--out", "{d}/run"),
        ("net", "up", "single:2", "--out", "{d}/net"),
        ("compare", "transient", "--runs", "1", "--out", "{d}/compare"),
        ("schemes", "--out", "{d}/schemes"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_missing_tool_is_exit_status_3(
    tmp_path: Path, no_tools: dict[str, str], args: tuple[str, ...]
) -> None:
    """`qcn ptf` without the toolchain used to say "skipped" and exit 0; `qcn build` without
    p4c exited 1 and the others 2."""
    r = qcn(*(a.format(d=tmp_path) for a in args), env=no_tools)
    assert r.returncode == ExitCode.TOOL_MISSING, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.splitlines()
    assert line.startswith("qcn: error: ")
    assert "not installed" in line


def test_a_program_p4c_refuses_is_exit_status_1(tmp_path: Path, no_tools: dict[str, str]) -> None:
    """The build ran, and failed: a p4c that refuses the program (a stand-in on PATH)."""
    p4c = Path(no_tools["PATH"]) / "p4c"
    p4c.write_text("#!/bin/sh\necho 'qcn_cp.p4(1): error: refused' >&2\nexit 1\n")
    p4c.chmod(p4c.stat().st_mode | stat.S_IXUSR)
    r = qcn("build", "--out", str(tmp_path / "build"), env=no_tools)
    assert r.returncode == ExitCode.FAILED, r.stderr
    assert r.stderr.startswith("qcn: error: p4c refused ")
    assert "qcn_cp.p4(1): error: refused" in r.stderr


# -- 2: the first hour's mistakes, one line each -------------------------------------------


def missing_interface() -> str:
    """An interface name that exists nowhere here."""
    name = f"qcnno{os.getpid() % 100000}"
    assert not Path(f"/sys/class/net/{name}").exists()
    return name


@pytest.mark.parametrize("action", list(ACTIONS))
def test_frames_on_a_missing_interface_is_one_line(action: str) -> None:
    """Every `qcn frames` action (the issue's `qcn frames count h1-eth0 --seconds 5` was an
    OSError traceback)."""
    iface = missing_interface()
    extra = ("--seconds", "5") if action in ("count", "capture", "arrivals") else ()
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "frames", action, iface, *extra],
        input="00" * 60, capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    root = os.geteuid() == 0
    assert_one_line_error(
        r, f"no interface named {iface}" if root else f"{iface}: raw sockets need root"
    )


def test_the_pause_agent_and_the_daemon_name_a_missing_interface() -> None:
    iface = missing_interface()
    r = qcn("pause", iface, "--line-rate-mbps", "100")
    assert r.returncode == ExitCode.USAGE
    assert r.stderr == f"pause agent: no interface named {iface}\n"
    r = qcn("rp", "start", "--iface", iface)
    assert_one_line_error(r, iface)


def test_ctl_with_no_network_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`qcn ctl set` where no network file is: it said only "qcn-network.toml: cannot
    read".  (In this process: the network file is looked for in the working directory.)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(controller_cli, "DEFAULT_CONFIG", Path("qcn-network.toml"))
    assert cli.main(["ctl", "set", "s1", "3", "--q-eq-pkts", "22"]) == ExitCode.USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("qcn: error: no network is up (no qcn-network.toml here)")
    for hint in ("'qcn net up NET'", "writes results/net/network.toml", "-c FILE"):
        assert hint in line
    # With qcn net up's file there, it names that file.
    (tmp_path / "results" / "net").mkdir(parents=True)
    (tmp_path / "results" / "net" / "network.toml").write_text("")
    assert cli.main(["ctl", "show"]) == ExitCode.USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("give it with -c results/net/network.toml")


def test_a_sink_on_a_taken_port_is_one_line() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("0.0.0.0", 0))
        port = taken.getsockname()[1]
        r = qcn("sink", "--port", str(port))
    assert_one_line_error(r, f"cannot receive on UDP port {port}: Address already in use")
    assert_one_line_error(qcn("sink", "--interval", "0"), "--interval must be in")


def test_a_quiet_sink_reports_once_a_second() -> None:
    """`qcn sink` with no traffic printed `{"rx": {}}` a hundred times a second; unless told
    otherwise it reports once a second (the experiments give their sample interval)."""
    sink = subprocess.Popen(
        [sys.executable, "-m", "qcn", "sink", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert sink.stdout is not None
    try:
        first = sink.stdout.readline()  # the line that says it is ready
        began = time.monotonic()
        assert first.startswith('{"t": ')
        second = sink.stdout.readline()
        assert time.monotonic() - began >= 0.9, second
    finally:
        sink.terminate()
        sink.communicate(timeout=10)
    assert sink.returncode == 0
