"""A live view of a BMv2 network (docs/live.md): what fills its :class:`LiveFeed` and what
turns its knobs.

- :class:`ControllerKnobs` is the feed's tuner: a change is the controller's
  :meth:`SwitchAgent.set_cp`, the code `qcn ctl set` runs, on the run's own primary
  connections (so the checks and their one-line errors are ctl set's).  It also reads each
  CP port's entry back now and then, so that a change made by `qcn ctl set` from a shell
  shows up on the page and in knobs.csv.
- :class:`SwitchLive` publishes a row ten times a second from an ordinary thread: each
  port's queue as the run already samples it (or, for a network left running, read over
  Thrift), the CNMs and tail drops from the pipeline's counters (five times a second),
  and each source's rates from its reaction-point daemon's status file.

Nothing here runs in real time: the switches and the daemons, under SCHED_FIFO, always
come first.  BMv2 counts no QntzFb, so its page has no histogram.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from qcn.core.errors import QcnError
from qcn.core.live import LiveFeed, LiveRow, demote_this_thread, same_entry
from qcn.reaction_point.cli import RpUsageError, read_status
from qcn.reaction_point.daemon import status_files

PUBLISH_INTERVAL_S = 0.1
COUNTERS_EVERY = 2
"""Counters are read every second row (five times a second): each read is a P4Runtime
round trip that the switch answers."""
LIVE_COUNTERS = ("cp_cnms", "tail_drops")
"""What the page draws of the pipeline's counters: three of them (cp_cnms of both CP
instances), in one read; all of them, a read each, were nineteen round trips five times a
second, served by the switch's real-time threads."""
ENTRIES_EVERY = 5
"""Each CP port's entry is read back every fifth row (a shell's `qcn ctl set`)."""


class ControllerKnobs:
    """The live view's tuner on BMv2 (see the module doc).  ``agents``: the run's
    :class:`qcn.controller.agent.SwitchAgent` by switch; ``clock``: the run's time."""

    def __init__(
        self,
        feed: LiveFeed,
        agents: Mapping[str, Any],
        clock: Callable[[], float],
        say: Callable[[str], None] = print,
    ) -> None:
        self.feed, self.agents, self.clock, self.say = feed, agents, clock, say
        self.lock = threading.Lock()
        """One P4Runtime call at a time from the view's threads."""

    def tune(self, port: str, changes: dict[str, Any]) -> None:
        where = self.feed.port(port)
        with self.lock:
            new = self.agents[where.switch].set_cp(where.number, **changes)
            self.feed.record(self.clock(), port, new, "page")

    def look(self) -> None:
        """Record what another controller changed (`qcn ctl set` from a shell)."""
        for port in self.feed.cp_ports:
            where = self.feed.port(port)
            with self.lock:
                held = self.agents[where.switch].read_cp(where.number)
                if held is not None and not same_entry(held[0], self.feed.params(port)):
                    made = self.feed.record(self.clock(), port, held[0], "controller")
                    if made:  # the shell's user sees the run take it (and a test can wait)
                        self.say(
                            "qcn run: another controller set "
                            + ", ".join(f"{c.port} {c.field} {c.old} -> {c.new}" for c in made)
                        )

    def counters(self) -> dict[str, dict[str, int]]:
        """Each followed port's pipeline counters."""
        out = {}
        for p in self.feed.ports:
            with self.lock:
                out[p.name] = self.agents[p.switch].counters(p.number, LIVE_COUNTERS)
        return out


def source_rates(status_dir: Path, host: str, line_rate_bps: float) -> tuple[float, float]:
    """(CR, TR) of ``host``'s reaction point from its daemon's status file: its slowest
    limiter's; a host without a limiter sends at its line rate (TR: NaN)."""
    lowest: tuple[float, float] | None = None
    for path in status_files(status_dir, f"{host}-eth0"):
        try:
            status = read_status(path)
        except RpUsageError:
            continue  # (being rewritten, or gone with its daemon)
        for lim in status["limiters"]:
            pair = (float(lim["current_rate_bps"]), float(lim["target_rate_bps"]))
            if lowest is None or pair[0] < lowest[0]:
                lowest = pair
    return lowest if lowest is not None else (line_rate_bps, math.nan)


class SwitchLive:
    """Fills ``feed`` from a running BMv2 network while it is entered (a context manager):
    ``depths`` gives each followed port's queue now; ``clock`` the run's time."""

    def __init__(
        self,
        feed: LiveFeed,
        agents: Mapping[str, Any],
        *,
        depths: Callable[[], Mapping[str, int]],
        status_dir: Path,
        clock: Callable[[], float],
        say: Callable[[str], None] = print,
    ) -> None:
        self.feed, self.depths, self.status_dir, self.clock = feed, depths, status_dir, clock
        self.say = say
        self.knobs = ControllerKnobs(feed, agents, clock, say)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cnms: dict[str, int] = {}
        self._drops = 0
        self.failures = 0
        """Rows that could not be made (a switch that did not answer in time)."""

    def __enter__(self) -> SwitchLive:
        self.feed.tuner = self.knobs
        self._thread = threading.Thread(target=self._loop, name="qcn-live-bmv2", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.feed.tuner = None

    def _loop(self) -> None:
        demote_this_thread()
        tick = 0
        while not self._stop.wait(PUBLISH_INTERVAL_S):
            try:
                self.publish(tick)
            except (QcnError, OSError) as e:
                self.failures += 1
                if self.failures == 1:
                    self.say(f"live view: a row was lost ({e}); the run goes on")
            tick += 1

    def publish(self, tick: int) -> None:
        """Make and publish one row (``tick``: its number, which says what is read)."""
        feed = self.feed
        if tick % COUNTERS_EVERY == 0:
            counters = self.knobs.counters()
            self._cnms = {name: c["cp_cnms"] for name, c in counters.items()}
            self._drops = sum(c["tail_drops"] for c in counters.values())
        if tick % ENTRIES_EVERY == 0:
            self.knobs.look()
        depths = self.depths()
        rates = [source_rates(self.status_dir, h, feed.line_rate_bps) for h in feed.sources]
        feed.publish(
            LiveRow(
                self.clock(),
                tuple(depths.get(p.name, 0) for p in feed.ports),
                tuple(self._cnms.get(p.name, 0) for p in feed.ports),
                self._drops,
                tuple(cr for cr, _ in rates),
                tuple(tr for _, tr in rates),
                (),
            )
        )


class ThriftDepths:
    """Each followed port's queue, read from the pipeline's count over Thrift (for a
    network that no run samples); one connection per switch, made on first use."""

    def __init__(self, agents: Mapping[str, Any], feed: LiveFeed) -> None:
        self.agents, self.feed = agents, feed
        self._thrifts: dict[str, Any] = {}

    def __call__(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for switch in sorted({p.switch for p in self.feed.ports}):
            ports = [p for p in self.feed.ports if p.switch == switch]
            if switch not in self._thrifts:
                self._thrifts[switch] = self.agents[switch].thrift()
            got = self._thrifts[switch].occupancies([p.number for p in ports])
            out |= {p.name: frames for p, (frames, _) in zip(ports, got, strict=True)}
        return out

    def close(self) -> None:
        for thrift in self._thrifts.values():
            with contextlib.suppress(Exception):
                thrift.close()
        self._thrifts.clear()


def run_clock(start: Callable[[], float]) -> Callable[[], float]:
    """The run's time: seconds since ``start()`` (0 before the run has started)."""

    def clock() -> float:
        began = start()
        return max(0.0, time.monotonic() - began) if began else 0.0

    return clock
