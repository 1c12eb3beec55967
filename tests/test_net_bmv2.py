"""`qcn net`: networks of BMv2 switches as a user launches them (real Mininet, BMv2,
P4Runtime): a leaf-spine through Mininet's CLI, a tutorials topology.json, `qcn net down`
from another shell, and nothing left behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_mininet_bmv2 import leftovers
from tests.toolchain import requires_p4lang, requires_root

pytestmark = [
    requires_p4lang(),
    requires_root(),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="mininet not installed"),
]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
QCN = (sys.executable, "-m", "qcn")
UP_WITHIN_S = 60.0
"""The issue's bound: `qcn net up leaf-spine:2,2,2` starts in under a minute."""


def net_env(tmp_path: Path) -> dict[str, str]:
    """A state file of the test's own, so a test never meets a user's network."""
    return {**os.environ, "QCN_NET_STATE": str(tmp_path / "qcn-net.json")}


def test_a_leaf_spine_through_mininets_cli(tmp_path: Path) -> None:
    out = tmp_path / "net"
    script = "\n".join(
        [
            "pingall",
            f"sh {sys.executable} -m qcn ctl -c {out / 'network.toml'} show --json "
            f"> {tmp_path / 'show.json'}",
            "exit",
        ]
    )
    started = time.monotonic()
    r = subprocess.run(
        [*QCN, "net", "up", "leaf-spine:2,2,2", "--cli", "--out", str(out)],
        input=script + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=net_env(tmp_path),
        timeout=240,
        check=False,
    )
    text = r.stdout + r.stderr
    assert r.returncode == 0, text[-3000:]
    up = re.search(r"qcn net: up: .*", text)
    assert up is not None, text[-3000:]
    assert "Results: 0% dropped (12/12 received)" in text, text[-3000:]
    # Every congestible egress port of every switch runs a CP, and only those.
    show = json.loads((tmp_path / "show.json").read_text())
    with_cp = sorted(f"{sw}:{p['port']}" for sw, ports in show.items() for p in ports if p["cp"])
    assert with_cp == sorted(f"s{s}:{p}" for s in (3, 4) for p in (1, 2, 3, 4))
    assert all(not p["cp"] for sw in ("s1", "s2") for p in show[sw])  # spines cannot congest
    cpids = [p["cpid"] for ports in show.values() for p in ports if p["cp"]]
    assert len(set(cpids)) == len(cpids)  # unique per switch port
    assert time.monotonic() - started < UP_WITHIN_S + 30  # (the pings and exit included)
    assert "qcn ctl -c" in text  # how to reach it
    links, procs = leftovers()
    assert (links, procs) == ("", "")


def test_a_tutorials_topology_runs_unchanged_and_net_down_stops_it(tmp_path: Path) -> None:
    out = tmp_path / "net"
    env = net_env(tmp_path)
    proc = subprocess.Popen(
        [*QCN, "net", "up", str(DATA / "two-leaves.json"), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + UP_WITHIN_S
        for line in proc.stdout:
            lines.append(line)
            if "qcn net: running" in line or time.monotonic() > deadline:
                break
        text = "".join(lines)
        assert "qcn net: running" in text, text[-3000:]
        assert "host commands" in text  # said, not run
        # On-link routes across the file's subnets; its 2 ms link delayed (netem).
        ping = subprocess.run(
            ["mnexec", "-a", host_pid(out, "h1"), "ping", "-c", "3", "-i", "0.2", "10.0.7.3"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert " 0% packet loss" in ping.stdout, ping.stdout + ping.stderr
        # Its 2 ms link: delayed by netem, or said to be not where the kernel has none.
        qdiscs = subprocess.run(
            ["tc", "qdisc", "show", "dev", "s1-eth3"], capture_output=True, text=True, check=True
        ).stdout
        assert "netem" in qdiscs or "has no netem" in text, text
        down = subprocess.run(
            [*QCN, "net", "down"], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopping the network" in down.stdout
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert not (tmp_path / "qcn-net.json").exists()
    links, procs = leftovers()
    assert (links, procs) == ("", "")


def host_pid(out: Path, host: str) -> str:
    """The pid of a host's shell, from the network's own record."""
    hosts = json.loads((out / "hosts.json").read_text())
    return str(hosts[host])


def test_net_down_with_nothing_up_says_so(tmp_path: Path) -> None:
    r = subprocess.run(
        [*QCN, "net", "down"], capture_output=True, text=True, env=net_env(tmp_path), check=False
    )
    assert r.returncode == 0
    assert "no network was running" in r.stdout


def test_a_second_network_is_refused_in_one_line(tmp_path: Path) -> None:
    env = net_env(tmp_path)
    (tmp_path / "qcn-net.json").write_text(json.dumps({"pid": os.getpid(), "out": "elsewhere"}))
    r = subprocess.run(
        [*QCN, "net", "up", "single:2", "--out", str(tmp_path / "n")],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"qcn: error: a network is already up (pid {os.getpid()}, elsewhere): "
        "'qcn net down' stops it"
    ]


def test_a_run_while_another_network_is_up_is_refused_and_leaves_it_alone(
    tmp_path: Path,
) -> None:
    """Every run's switches and interfaces have the same names: a second run used to take
    the first one's for a killed run's leftovers and stop them.  The network's lock now
    refuses it in one line, and 'qcn net down' leaves a run's network alone."""
    from topologies.testbed import hold_network_lock  # noqa: PLC0415

    lock_path = tmp_path / "network.lock"
    env = {**net_env(tmp_path), "QCN_NETWORK_LOCK": str(lock_path)}
    with hold_network_lock(lock_path):
        r = subprocess.run(
            [*QCN, "run", "transient", "--backend", "mininet", "--out", str(tmp_path / "r")],
            capture_output=True, text=True, env=env, check=False, timeout=60,
        )  # fmt: skip
        assert r.returncode == 2
        holder = f"pid {os.getpid()}: {Path(sys.argv[0]).name}"
        assert (
            r.stderr.strip()
            .splitlines()[-1]
            .startswith(f"qcn: error: another qcn network is up ({holder}")
        )
        assert r.stderr.strip().endswith("wait for it to end, or stop it")
        down = subprocess.run(
            [*QCN, "net", "down"], capture_output=True, text=True, env=env, check=False
        )
        assert down.returncode == 0
        assert "a run's network is not stopped by 'qcn net down'" in down.stdout
    # Released: the next one takes it.
    hold_network_lock(lock_path).close()
