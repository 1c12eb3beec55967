"""What several test modules use: the command line run as a user runs it, the one-line
error every user mistake must be, and a PAUSE-gated link between two namespaces (its
fixture, ``link``, is in tests/conftest.py)."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qcn.core.frames import pause_frame
from qcn.reaction_point.tc import HtbLimiters
from qcn.topologies.netns import send_frames

# -- the command line ------------------------------------------------------------------------


def qcn(
    *args: str, cwd: Path | None = None, timeout_s: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qcn", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=timeout_s,
        env=env,
    )


def interruptible(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """A child process that takes Ctrl-C (SIGINT) as a user's terminal gives it.  A suite
    started as a shell's background job (`make test &`, CI under nohup) runs with SIGINT
    ignored (POSIX), its children inherit that, and Python keeps ignoring it: a test's
    Ctrl-C would go unseen.  A handler set here is reset to the default in the child."""
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(args, text=True, **kwargs)
    finally:
        signal.signal(signal.SIGINT, ignored)


def at_a_terminal(args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    """A command as a terminal runs it: in a process group of its own, the foreground one,
    whose every process a Ctrl-C reaches (:func:`ctrl_c`)."""
    return interruptible(args, process_group=0, **kwargs)


def ctrl_c(proc: subprocess.Popen[str]) -> None:
    """Ctrl-C at a terminal: SIGINT to the command's whole process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)


def processes(*, pgid: int | None = None, ppid: int | None = None) -> list[str]:
    """The running processes of group ``pgid``, or children of ``ppid`` (not the zombies
    that only await their reaper), as "PID command" lines."""
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            state, parent, group = status.read_text().rsplit(")", 1)[1].split()[:3]
            if state != "Z" and (int(group) == pgid or int(parent) == ppid):
                cmd = (status.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{status.parent.name} {cmd.decode(errors='replace')[:120]}")
    return found


def group_left(pgid: int, timeout_s: float = 15) -> list[str]:
    """The processes of group ``pgid`` still running after ``timeout_s`` (polled)."""
    deadline = time.monotonic() + timeout_s
    while (left := processes(pgid=pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def await_worker(proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Until a command has started a Dask worker process (a child spawned by
    multiprocessing), polled."""
    deadline = time.monotonic() + timeout_s
    while not any("spawn_main" in p for p in processes(ppid=proc.pid)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)


#: A simulation long enough to watch, stop or race: the Python engine's (the compiled core
#: runs these in a fraction of a second; tests/test_sim_core.py stops the core mid-run).
SLOW_SIM = {**os.environ, "QCN_SIM_ENGINE": "python"}


def assert_one_line_error(r: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("qcn: error: "), lines
    for text in expected:
        assert text in lines[0]


# -- a small disk ----------------------------------------------------------------------------


@contextlib.contextmanager
def small_disk(where: Path, *, full: bool = False, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted at ``where`` (root) for the block; ``full``: filled
    up first by a file named ``filler``, so that the next write fails with ENOSPC."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        if full:
            fill(where)
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(disk: Path) -> None:
    """Fill ``disk`` up with a file named ``filler``."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):
        while True:
            os.write(fd, bytes(4096))
    os.close(fd)


# -- a Dask cluster of real processes -------------------------------------------------------

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    address: str
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_worker(self, tmp: Path, resources: str = "") -> subprocess.Popen[bytes]:
        """A worker process; ``resources``: what it declares (``mininet=1``)."""
        declared = ["--resources", resources] if resources else []
        w = subprocess.Popen(
            [DASK, "worker", self.address, "--nthreads", "1", "--nworkers", "1",
             "--no-dashboard", "--local-directory", str(tmp), "--death-timeout", "30",
             *declared],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self.workers.append(w)
        return w

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client  # noqa: PLC0415

        with Client(self.address, timeout="20s") as c:
            c.wait_for_workers(n, timeout=60)


# -- a PAUSE-gated link ----------------------------------------------------------------------

PEER_MAC = "02:00:00:00:77:02"


DATA_ETHERTYPE = 0x88B5
"""IEEE's local experimental EtherType: the test's paced frames."""
PACE_PPS = 1000


@dataclass
class Link:
    """The gated interface (``host_if``) and its peer; frames are paced out of
    ``source_if`` (default: the gated interface itself) to ``frame_dst``."""

    host_ns: str
    peer_ns: str
    host_if: str = "pz-h"
    peer_if: str = "pz-p"
    source_if: str | None = None
    frame_dst: str = PEER_MAC


def in_ns(ns: str, *args: str) -> list[str]:
    return ["ip", "netns", "exec", ns, sys.executable, *args]


def started(cmd: list[str], ready: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert ready in line, f"{cmd}: {line!r}"
    return proc


def largest_gap(
    link: Link,
    line_rate_mbps: float,
    pauses: list[int],
    *,
    gap_s: float = 0.0,
    rp_tree: bool = False,
) -> float:
    """Pace frames out of the host's interface under the agent for 3 s, send PAUSEs of
    these quanta from the peer 0.5 s in, ``gap_s`` apart, and return the longest silence
    seen.
    ``rp_tree``: the reaction point's HTB tree (line-rate class) hangs under the gate."""
    agent = started(
        in_ns(
            link.host_ns,
            "-m",
            "qcn.reaction_point.pause",
            link.host_if,
            "--line-rate-mbps",
            str(line_rate_mbps),
        ),
        "honouring",
    )
    tree = None
    try:
        if rp_tree:
            tree = HtbLimiters(link.host_if, netns=link.host_ns, line_rate_bps=line_rate_mbps * 1e6)
            tree.open()
        silence = paced_silence(link, pauses, gap_s=gap_s)
    finally:
        if tree is not None:
            tree.close()
        agent.terminate()
        summary, _ = agent.communicate(timeout=10)
    assert agent.returncode == 0
    assert f"{sum(1 for q in pauses if q)} pauses" in summary, summary
    return silence


def paced_silence(link: Link, pauses: list[int], *, gap_s: float = 0.0) -> float:
    """Pace full-size frames from ``link.source_if`` (or its gated interface) to its peer
    for 3 s, send PAUSEs of these quanta from the peer 0.5 s in, ``gap_s`` apart, and
    return the longest silence the peer saw (whatever honours the PAUSEs: an agent's gate,
    or a switch port)."""
    rx = started(
        in_ns(
            link.peer_ns,
            "-m",
            "qcn.topologies.rawframes",
            "arrivals",
            link.peer_if,
            "--ethertype",
            str(DATA_ETHERTYPE),
            "--seconds",
            "5.5",  # the pacer's start-up (up to a second beside busy loops) and its 3 s
        ),
        "ready",
    )
    # Full-size frames: a held gate lets the one at its head through (docs/pause.md).
    dst = bytes.fromhex(link.frame_dst.replace(":", ""))
    frame = dst + bytes.fromhex("02000000770188b5") + bytes(1486)
    source = link.source_if or link.host_if
    # 3 s: the PAUSEs' own helper takes up to a second and more to start beside busy loops,
    # and its PAUSE must land while the frames still flow.
    pace = ["pace", source, "--rate", str(PACE_PPS), "--duration", "3"]
    pacer = subprocess.Popen(
        in_ns(link.host_ns, "-m", "qcn.topologies.rawframes", *pace),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert pacer.stdin is not None
    assert pacer.stderr is not None
    pacer.stdin.write(frame.hex())
    pacer.stdin.close()
    # The PAUSEs go 0.5 s after the frames start, not after the pacer's start-up (a second
    # beside a busy loop: the frames then came too late for the window, 1 run in 6).
    assert pacer.stderr.readline() == "pacing\n"
    began = time.monotonic()
    time.sleep(max(0.0, began + 0.5 - time.monotonic()))
    if pauses:
        # One helper process sends them all: starting one takes a variable ~0.1 s.
        frames = [pause_frame(PEER_MAC, q) for q in pauses]
        send_frames(link.peer_ns, link.peer_if, frames, gap_s=gap_s)
    pacer.wait(timeout=10)
    out, _ = rx.communicate(timeout=10)
    times = [float(t) for t in out.split()[1:] if t]  # after "ready"
    assert len(times) > PACE_PPS, "the paced frames must arrive"
    return max(b - a for a, b in itertools.pairwise(times))
