"""Reading an emulation's noise from the kernel while a Mininet run runs, and making some.

- :class:`NoiseMonitor` samples, at the run's sample interval, how long each thread of a
  group (the switch's threads, the senders) waited to run while runnable: the second field
  of ``/proc/PID/task/TID/schedstat``, the kernel's run-queue delay in ns (a switch's
  thread: only what its own other threads' running does not explain).  Its files stay
  open and are re-read with ``pread`` (about 2 µs each).  Once a second it also reads the
  machine's steal time from ``/proc/stat``.  :mod:`qcn.core.noise` turns the recording into
  figures and a verdict.
- :class:`StallInjector` makes stalls on purpose, to test that verdict: it pins the
  switch's threads to one CPU and runs a busier real-time process there for D ms every
  P ms, so the switch waits while the hosts on the other CPU keep sending.
- :func:`realtime_available` says whether this machine lets a process take a real-time
  priority (a container without CAP_SYS_NICE, or an RT-throttled cgroup, refuses it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from qcn.core.noise import GroupWaits, NoiseRecording, StallTracker, wait_not_behind_own_threads
from qcn.core.signals import stop_on_signals

PROC = Path("/proc")
STEAL_PERIOD_S = 1.0
REFRESH_PERIOD_S = 1.0
"""How often a group's list of threads is read again (senders start after the loop does)."""
INJECTOR_PRIORITY = 90
"""The injector's SCHED_FIFO priority: above any switch's (qcn.topologies.mininet_bmv2)."""


def realtime_available() -> bool:
    """Whether a process here may take SCHED_FIFO (probed with chrt on a throwaway one)."""
    try:
        probe = subprocess.run(["chrt", "-f", "1", "true"], capture_output=True, check=False)
    except OSError:
        return False
    return probe.returncode == 0


def threads_of(pid: int) -> list[int]:
    """The thread ids of ``pid`` (none if it is gone)."""
    try:
        return [int(t) for t in os.listdir(PROC / str(pid) / "task")]
    except OSError:
        return []


def cpu_times() -> tuple[int, int]:
    """(steal, total) jiffies of the whole machine, from /proc/stat's first line."""
    fields = [int(x) for x in (PROC / "stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


def thread_name(pid: int, tid: int) -> str:
    """A thread's name (its ``comm``; empty if it is gone)."""
    try:
        return (PROC / str(pid) / "task" / str(tid) / "comm").read_text().strip()
    except OSError:
        return ""


NO_CPUS: frozenset[int] = frozenset()
"""A thread whose CPUs were not read (it ended first)."""


class _Group:
    """One group's open schedstat files and last readings."""

    def __init__(self, pids: Callable[[], list[int]], one_device: bool = False) -> None:
        self.pids = pids
        self.one_device = one_device
        """The processes are devices whose threads wait for each other (switches): a
        thread's waits behind the group's threads that run on the same CPUs (its own
        switch's, and those of the switches pinned with it) are left out of its stalls
        (qcn.core.noise.wait_not_behind_own_threads)."""
        self.fds: dict[int, int] = {}
        self.last: dict[int, tuple[int, int]] = {}  # (on a CPU, waiting) ns
        self.cpus: dict[int, frozenset[int]] = {}  # thread -> the CPUs it may use
        self.helpers: set[int] = set()
        """A device's threads named apart from its process (gRPC's, which serve P4Runtime
        and forward no frame): read once a second for the CPU they took, never judged for
        stalls (docs/bmv2.md, "Which threads are judged")."""
        self.waits = GroupWaits()
        self.tracker = StallTracker()

    def refresh(self) -> None:
        for pid in self.pids():
            process_name = thread_name(pid, pid) if self.one_device else ""
            for tid in threads_of(pid):
                if self.one_device:
                    with contextlib.suppress(OSError):  # (a stall injector pins them later)
                        self.cpus[tid] = frozenset(os.sched_getaffinity(tid))
                    # (named again each time: a thread may take its name after it starts)
                    if tid not in self.helpers and thread_name(pid, tid) != process_name:
                        self.helpers.add(tid)
                if tid in self.fds:
                    continue
                try:
                    fd = os.open(PROC / str(pid) / "task" / str(tid) / "schedstat", os.O_RDONLY)
                except OSError:
                    continue
                self.fds[tid] = fd
                self.last[tid] = self._read(fd) or (0, 0)
        self.waits.threads = max(self.waits.threads, len(self.fds))
        self.waits.helper_threads = max(self.waits.helper_threads, len(self.helpers))

    @staticmethod
    def _read(fd: int) -> tuple[int, int] | None:
        """A thread's schedstat: its time on a CPU and waiting for one, in ns."""
        try:
            ran, waited = os.pread(fd, 96, 0).split()[:2]
            return int(ran), int(waited)
        except (OSError, ValueError):
            return None  # the thread has ended

    def sample(self, k: int, *, helpers: bool) -> None:
        """Sample ``k``: each judged thread's wait since the last one (and, with
        ``helpers``, the helper threads' time since they were last read)."""
        deltas: dict[int, tuple[float, float]] = {}  # thread -> (ran, waited) s
        ran_on: dict[frozenset[int], float] = {}  # the group's threads' time, by CPU set
        for tid, fd in list(self.fds.items()):
            helper = tid in self.helpers
            if helper and not helpers:
                continue
            now = self._read(fd)
            if now is None:
                os.close(fd)
                del self.fds[tid], self.last[tid]
                self.cpus.pop(tid, None)
                self.helpers.discard(tid)
                self.tracker.add(tid, k, 0.0)  # ends a stall it was in
                continue
            ran_s = (now[0] - self.last[tid][0]) / 1e9
            wait_s = (now[1] - self.last[tid][1]) / 1e9
            self.last[tid] = now
            if helper:  # counted, never judged
                self.waits.ran_s += ran_s
                self.waits.waited_s += wait_s
                continue
            deltas[tid] = (ran_s, wait_s)
            cpus = self.cpus.get(tid, NO_CPUS)
            ran_on[cpus] = ran_on.get(cpus, 0.0) + ran_s
        for tid, (ran_s, wait_s) in deltas.items():
            self.waits.ran_s += ran_s
            self.waits.waited_s += wait_s
            stalled_s = wait_s
            if self.one_device:
                cpus = self.cpus.get(tid, NO_CPUS)
                others_s = ran_on[cpus] - ran_s
                stalled_s = wait_not_behind_own_threads(wait_s, others_s, len(cpus))
                self.waits.behind_own_s += wait_s - stalled_s
            self.tracker.add(tid, k, stalled_s)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        self.waits.stalls = self.tracker.finish()


class NoiseMonitor:
    """Samples the run-queue waits of named groups of processes (all their threads) and the
    machine's steal; :meth:`finish` returns the :class:`NoiseRecording`."""

    def __init__(
        self,
        groups: dict[str, Callable[[], list[int]]],
        interval_s: float,
        scheduling: str,
        devices: frozenset[str] = frozenset(),
    ) -> None:
        """``devices``: the groups whose processes are each one device (the switches):
        their threads' waits for each other are not their stalls."""
        self._groups = {name: _Group(pids, name in devices) for name, pids in groups.items()}
        self.rec = NoiseRecording(interval_s=interval_s, scheduling=scheduling)
        self._started: float | None = None
        self._next_refresh = 0.0
        self._steal_at = 0.0
        self._steal_last = (0, 0)

    def sample(self, now: float, depth: int) -> None:
        """One sample at monotonic time ``now``, the CP port's queue then ``depth`` frames
        (the first sample starts the run's clock)."""
        if self._started is None:
            self._started = self._steal_at = now
            self._steal_last = cpu_times()
        refresh = now >= self._next_refresh
        if refresh:
            for g in self._groups.values():
                g.refresh()
            self._next_refresh = now + REFRESH_PERIOD_S
        for g in self._groups.values():
            g.sample(len(self.rec.times_s), helpers=refresh)
        if now - self._steal_at >= STEAL_PERIOD_S:
            steal, total = cpu_times()
            d_total = total - self._steal_last[1]
            if d_total > 0:
                self.rec.steal_fractions.append((steal - self._steal_last[0]) / d_total)
            self._steal_last, self._steal_at = (steal, total), now
        self.rec.run_s = now - self._started
        self.rec.times_s.append(self.rec.run_s)
        self.rec.depths.append(depth)

    def finish(self) -> NoiseRecording:
        for name, g in self._groups.items():
            g.close()
            self.rec.groups[name] = g.waits
        return self.rec


class StallInjector:
    """Stalls one CPU for ``stall_s`` every ``period_s`` with a SCHED_FIFO busy loop, after
    pinning the given processes' threads to that CPU (restored by :meth:`stop`)."""

    def __init__(self, stall_s: float, period_s: float, pids: list[int], cpu: int = 0) -> None:
        if not 0 < stall_s < period_s:
            raise ValueError(f"a stall must be shorter than its period ({stall_s}, {period_s})")
        self.stall_s, self.period_s, self.pids, self.cpu = stall_s, period_s, pids, cpu
        self._proc: subprocess.Popen[bytes] | None = None
        self._affinity: dict[int, set[int]] = {}

    def describe(self) -> str:
        return f"{self.stall_s * 1e3:g} ms every {self.period_s * 1e3:g} ms on CPU {self.cpu}"

    def start(self) -> StallInjector:
        for pid in self.pids:
            for tid in threads_of(pid):
                with contextlib.suppress(OSError):
                    self._affinity[tid] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, {self.cpu})
        self._proc = subprocess.Popen(
            [sys.executable, "-c", SPIN.format(self.stall_s, self.period_s, self.cpu)],
            start_new_session=True,
        )
        return self

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for tid, cpus in self._affinity.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)
        self._affinity.clear()


SPIN = "from qcn.topologies.noise import spin; spin({!r}, {!r}, {!r})"
"""The injector's child."""


def spin(stall_s: float, period_s: float, cpu: int) -> None:
    """The injector's loop: busy for ``stall_s`` on ``cpu`` at the start of every
    ``period_s``, the first a period from now.  It takes its CPU and real-time priority only
    once started (the interpreter's start-up would otherwise be a stall of its own)."""
    stop_on_signals(lambda: sys.exit(0), (signal.SIGTERM,))
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(INJECTOR_PRIORITY))
    next_start = time.monotonic() + period_s
    time.sleep(period_s)
    while True:
        end = next_start + stall_s
        while time.monotonic() < end:
            pass
        next_start += period_s
        time.sleep(max(0.0, next_start - time.monotonic()))
