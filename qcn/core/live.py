"""What a live view of a running scenario shares with the run (docs/live.md): the figures
as they are measured, and the congestion points' knobs.

A backend publishes a :class:`LiveRow` into the run's :class:`LiveFeed` as it measures one;
the view (``qcn/cli/live.py``, the page) reads them from its own thread and asks for knob
changes with :meth:`LiveFeed.tune`.  How a change reaches the network is the backend's
:class:`Tuner`: the simulator's (:class:`SimulatedKnobs`) checks it as `qcn ctl set` does
(:meth:`CpParams.with_changes`) and hands it to the model at its next sample, a simulated
instant; on BMv2 the controller writes it (``qcn ctl set``'s own code).  Every change, the
page's or a shell's, is a :class:`KnobChange`; the run writes them to ``knobs.csv``.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from qcn.core.cp_model import CpPortConfig
from qcn.core.errors import QcnError
from qcn.core.params import PROB_ONE, SEED_FRAME_BYTES, CpParams, QueueUnit
from qcn.core.patterns import Kind
from qcn.core.scenario import Scenario
from qcn.core.topology import PortRef, Topology

KNOBS_FILE = "knobs.csv"
KNOBS_HEADER = ("time_s", "port", "field", "old", "new")
QNTZ_LEVELS = 64
"""QntzFb takes 0..63: the histogram's bins."""

ECN_KNOBS = ("signal", "kmin_bytes", "kmax_bytes", "pmax")
"""A port's signal (CNMs, ECN marks or nothing) and DCQCN's marking curve."""
KNOB_FIELDS = ("q_eq_pkts", "w", "p_base", "p_scale", "positive_feedback", "judge", *ECN_KNOBS)
"""The CpParams fields the page turns (positive_feedback: the CP's mode, qcn or ecm; judge:
whether the CP judges the frames its full queue drops)."""

PUBLISH_INTERVAL_S = 0.01
"""The simulator publishes a row per 10 ms simulated: 100 rows a second of a run watched
in real time, which the page draws ten times a second."""
PAGE_LEAD_S = 1.0
"""A simulated run keeps within this much wall-clock time of what its freshest open page
has shown (``PAGE_LEAD_S * speed`` simulated seconds): on a busy machine the run slows to
its page's pace rather than ending before the page has drawn it (docs/live.md)."""
WAIT_SLICE_S = 0.2
"""Waits in the run's main thread are cut in slices this long, so that Ctrl-C ends them."""


class LiveError(QcnError):
    """A knob change the run cannot make (the message is the page's one line)."""


@dataclass(frozen=True)
class LivePort:
    """A port the view follows: the bottleneck and every CP port."""

    name: str
    """As the trace names it (``s1:3``)."""
    switch: str
    number: int
    buffer_pkts: int


@dataclass(frozen=True)
class Phase:
    """A stretch of the schedule over which the bottleneck's capacity is constant."""

    from_s: float
    to_s: float
    capacity_bps: float
    congested: bool
    """The sources offer more than the capacity."""

    def text(self) -> str:
        state = "congested" if self.congested else "uncongested"
        return (
            f"{self.from_s:g}-{self.to_s:g} s: bottleneck {self.capacity_bps / 1e9:g} Gb/s "
            f"({state})"
        )


@dataclass(frozen=True)
class LiveRow:
    """What the run measured at one instant."""

    t_s: float
    """The run's time: simulated, or on BMv2 since the run's start."""
    queue_pkts: tuple[int, ...]
    """Per port of :attr:`LiveFeed.ports`."""
    cnms: tuple[int, ...]
    """CNMs sent so far, per port."""
    drops: int
    """Frames dropped so far, the whole network."""
    current_rate_bps: tuple[float, ...]
    """Per source: its limiter's CR (NaN: not known)."""
    target_rate_bps: tuple[float, ...]
    qntz_counts: tuple[int, ...]
    """CNMs sent so far by QntzFb (0..63), all CP ports together; empty where the backend
    cannot see QntzFb."""


@dataclass(frozen=True)
class KnobChange:
    """One knob turned: a row of ``knobs.csv``."""

    at_s: float
    port: str
    field: str
    old: Any
    new: Any
    by: str
    """Who turned it: "page" (the live view) or "controller" (`qcn ctl set` from a shell)."""


def knob_value(value: Any) -> Any:
    """A parameter as knobs.csv and the page write it (an enum as its name in files)."""
    return value.value if isinstance(value, Enum) else value


def shown(value: Any) -> Any:
    """A parameter as knobs.csv and the page write it: an enum by its name in files, a
    number as the shortest decimal that the data plane's fixed point (1/2^24) holds the
    same, so that a probability read back from a switch is 0.01, not 0.009999990463."""
    if isinstance(value, float) and math.isfinite(value):
        fixed = round(value * PROB_ONE)
        for digits in range(1, 10):
            short = round(value, digits)
            if round(short * PROB_ONE) == fixed:
                return short
        return value
    return knob_value(value)


def derived_q_eq(cp: CpParams) -> CpParams:
    """``cp`` with q_eq_bytes 0 wherever it says nothing q_eq_pkts does not: in packets mode
    (it is not used), and in bytes mode when it is q_eq_pkts frames of the seeds' size (a
    switch read back holds q_eq in bytes, so ``qcn ctl show`` reads q_eq_bytes=33000 where
    the run was given q_eq_pkts 22 alone)."""
    if cp.queue_unit is QueueUnit.PACKETS or cp.q_eq_bytes == cp.q_eq_pkts * SEED_FRAME_BYTES:
        return replace(cp, q_eq_bytes=0) if cp.q_eq_bytes else cp
    return cp


def changed_fields(old: CpParams, new: CpParams) -> list[tuple[str, Any, Any]]:
    """(field, old, new) for every CpParams field that differs as shown (q_eq_bytes only
    where it says more than q_eq_pkts: :func:`derived_q_eq`)."""
    old, new = derived_q_eq(old), derived_q_eq(new)
    out = []
    for f in fields(CpParams):
        a, b = shown(getattr(old, f.name)), shown(getattr(new, f.name))
        if a != b:
            out.append((f.name, a, b))
    return out


def same_entry(a: CpParams, b: CpParams) -> bool:
    """Whether two parameter sets make the same data-plane entry (what a switch holds is
    read back in its integers)."""
    return CpPortConfig.from_params(a) == CpPortConfig.from_params(b)


def q_eq_frames(cp: CpParams, frame_bytes: int) -> float:
    """q_eq in frames, whichever unit the CP counts (the plots draw queues in frames)."""
    if cp.queue_unit is QueueUnit.PACKETS:
        return float(cp.q_eq)
    return cp.q_eq / frame_bytes


def phases(sc: Scenario) -> list[Phase]:
    """The schedule's phases over the whole run."""
    edges = [0.0, *(c.at_s for c in sc.schedule if 0 < c.at_s < sc.duration_s), sc.duration_s]
    out = []
    for a, b in itertools.pairwise(edges):
        mid = (a + b) / 2
        capacity = sc.capacity_at(mid)
        congested = sc.workload.declared.kind is not Kind.FLOWS and sc.offered_bps(mid) > capacity
        out.append(Phase(a, b, capacity, congested))
    return out


def live_ports(topo: Topology, bottleneck: PortRef | None) -> list[LivePort]:
    """The ports a run measures and the view follows: every CP port and the bottleneck, in
    the topology's order (the simulator's ``measured``, the Mininet run's sampled ports)."""
    cp_ports = set(topo.cp_ports)
    return [
        LivePort(str(ref), ref.switch, ref.port, topo.link_at(ref).buffer_pkts)
        for ref in topo.port_refs()
        if ref in cp_ports or ref == bottleneck
    ]


@dataclass
class PageSeen:
    """What one open page has shown (acknowledged by the browser, not only sent to it)."""

    t_s: float = 0.0
    """The run's time of the last row the page has taken in."""
    saw_end: bool = False
    """The page has shown that the run is over."""


class Tuner(Protocol):
    """How a backend makes a knob change (raising a QcnError it cannot make)."""

    def tune(self, port: str, changes: dict[str, Any]) -> None: ...


class LiveFeed:
    """The figures of a running scenario and its knobs, shared between the backend's thread
    and the view's (every method may be called from either)."""

    def __init__(
        self,
        *,
        name: str,
        title: str,
        topo: Topology,
        bottleneck: PortRef | None,
        sources: list[str],
        source_labels: list[str],
        cp: CpParams | None,
        frame_bytes: int,
        duration_s: float | None,
        schedule: list[Phase],
        speed: float | None,
        yields_to_network: bool,
    ) -> None:
        self.name, self.title = name, title
        self.ports = live_ports(topo, bottleneck)
        self.cp_ports = [str(r) for r in topo.cp_ports] if cp is not None else []
        """The ports with a CP to tune (none without QCN)."""
        self.sources = sources
        """The sending hosts, in source order."""
        self.source_labels = source_labels
        """Each source as the page's legend names it: sender and receiver, where it has one
        (qcn.core.scenario.SourceHost.label)."""
        self.line_rate_bps = max((topo.access_link(s).rate_bps for s in sources), default=1e9)
        self.frame_bytes = frame_bytes
        self.duration_s = duration_s
        """The run's length (None: a network that runs until it is stopped)."""
        self.phases = schedule
        self.speed = speed
        """Simulated seconds per wall-clock second (None: as fast as it runs, or BMv2's
        real time)."""
        self.yields_to_network = yields_to_network
        """The view's threads give way to the network (BMv2: its switches and reaction
        points run in real time, under SCHED_FIFO: :func:`demote_this_thread`); a simulated
        run has none to protect, and its view runs at the process's own priority."""
        self._lock = threading.Lock()
        self._page_change = threading.Condition(self._lock)
        self._pages: dict[int, PageSeen] = {}
        self._page_ids = itertools.count(1)
        self._notes: list[str] = []
        self.held_s = 0.0
        """Wall-clock seconds the simulated run has waited for its page so far."""
        self._rows: list[LiveRow] = []
        self._q_eq: list[tuple[float, ...]] = []
        self._changes: list[KnobChange] = []
        self._cp: dict[str, CpParams] = dict.fromkeys(self.cp_ports, cp) if cp else {}
        self.tuner: Tuner | None = None
        self.viewer = threading.Event()
        """Set when a page first opens (a simulated run waits for it)."""
        self.finished = threading.Event()
        """Set when the run is over."""

    @classmethod
    def of_scenario(
        cls,
        sc: Scenario,
        *,
        cp: CpParams | None,
        speed: float | None,
        yields_to_network: bool = True,
    ) -> LiveFeed:
        """The feed of a run of ``sc`` (``cp``: its CPs' parameters; None: no QCN;
        ``yields_to_network``: :attr:`yields_to_network`, False for the simulator)."""
        return cls(
            name=sc.name,
            title=sc.title,
            topo=sc.topology,
            bottleneck=sc.bottleneck_port,
            sources=[s.host for s in sc.sources],
            source_labels=[s.label for s in sc.sources],
            cp=cp,
            frame_bytes=sc.network.frame_bytes,
            duration_s=sc.duration_s,
            schedule=phases(sc),
            speed=speed,
            yields_to_network=yields_to_network,
        )

    @classmethod
    def of_network(cls, topo: Topology, *, cp: CpParams | None, frame_bytes: int) -> LiveFeed:
        """The feed of a network left running (``qcn net up``): every host may send."""
        return cls(
            name=topo.name,
            title=topo.describe(),
            topo=topo,
            bottleneck=None,
            sources=[h.name for h in topo.hosts],
            source_labels=[h.name for h in topo.hosts],  # (each may send to any other)
            cp=cp,
            frame_bytes=frame_bytes,
            duration_s=None,
            schedule=[],
            speed=None,
            yields_to_network=True,  # `qcn net up`: BMv2's switches
        )

    def port(self, name: str) -> LivePort:
        for p in self.ports:
            if p.name == name:
                return p
        raise LiveError(f"port {name} is not followed in this run")

    # -- the backend's side ------------------------------------------------------------------

    def publish(self, row: LiveRow) -> None:
        with self._lock:
            self._rows.append(row)
            self._q_eq.append(self._q_eq_now())

    def _q_eq_now(self) -> tuple[float, ...]:
        """Each port's q_eq in frames (NaN where no CP runs)."""
        return tuple(
            q_eq_frames(self._cp[p.name], self.frame_bytes) if p.name in self._cp else math.nan
            for p in self.ports
        )

    def record(self, at_s: float, port: str, new: CpParams, by: str) -> list[KnobChange]:
        """``port``'s CP now has ``new``: its changes (as :func:`changed_fields` shows
        them), logged at ``at_s``."""
        with self._lock:
            old = self._cp[port]
            made = [KnobChange(at_s, port, f, a, b, by) for f, a, b in changed_fields(old, new)]
            self._cp[port] = new
            self._changes += made
        return made

    def wait_for_viewer(self, poll_s: float = WAIT_SLICE_S) -> None:
        """Block until a page has opened (polled, so that Ctrl-C ends the wait)."""
        while not self.viewer.wait(poll_s):
            pass

    def shown_s(self) -> float | None:
        """The run's time the freshest open page has shown (None: no page is open)."""
        with self._lock:
            return max((p.t_s for p in self._pages.values()), default=None)

    def wait_for_page(self, t_s: float, clock: Callable[[], float] = time.monotonic) -> float:
        """Block until an open page has shown the run at ``t_s`` or later, or no page is
        open; the wall-clock seconds waited."""

        def shown() -> bool:
            return not self._pages or max(p.t_s for p in self._pages.values()) >= t_s

        with self._page_change:
            if shown():
                return 0.0
            start = clock()
            while not self._page_change.wait_for(shown, WAIT_SLICE_S):
                pass
            waited = clock() - start
            self.held_s += waited
        return waited

    def note(self, text: str) -> None:
        """A line for every page's log: a change the run could not take, and why."""
        with self._lock:
            self._notes.append(text)

    # -- the view's side ---------------------------------------------------------------------

    def rows_since(self, start: int) -> tuple[list[LiveRow], list[tuple[float, ...]]]:
        """The rows published from index ``start`` on, with each port's q_eq at each."""
        with self._lock:
            return self._rows[start:], self._q_eq[start:]

    def open_page(self) -> int:
        """A page has drawn itself (its browser says so): its id for :meth:`page_shown`."""
        with self._page_change:
            page = next(self._page_ids)
            self._pages[page] = PageSeen()
            self._page_change.notify_all()
        return page

    def page_shown(self, page: int, t_s: float, *, saw_end: bool = False) -> None:
        """Page ``page`` has taken in the rows up to the run's time ``t_s`` (and, with
        ``saw_end``, that the run is over)."""
        with self._page_change:
            if page in self._pages:
                seen = self._pages[page]
                seen.t_s = max(seen.t_s, t_s)
                seen.saw_end |= saw_end
                self._page_change.notify_all()

    def close_page(self, page: int) -> None:
        """Page ``page`` is gone (its session was discarded): the run stops waiting for it."""
        with self._page_change:
            self._pages.pop(page, None)
            self._page_change.notify_all()

    def wait_for_pages_to_end(self, timeout_s: float) -> bool:
        """Block until every open page has shown that the run is over (at most
        ``timeout_s``); whether they all have."""
        with self._page_change:
            return self._page_change.wait_for(
                lambda: all(p.saw_end for p in self._pages.values()), timeout_s
            )

    def notes_since(self, start: int) -> list[str]:
        with self._lock:
            return self._notes[start:]

    def changes_since(self, start: int) -> list[KnobChange]:
        with self._lock:
            return self._changes[start:]

    def changes(self) -> list[KnobChange]:
        return self.changes_since(0)

    def params(self, port: str) -> CpParams:
        with self._lock:
            return self._cp[port]

    def tune(self, port: str, changes: dict[str, Any]) -> None:
        """Change ``port``'s CP: a QcnError, in one line, where the run cannot."""
        if port not in self._cp:
            raise LiveError(f"port {port} runs no CP in this run")
        if self.finished.is_set():
            raise LiveError("the run is over: nothing to tune")
        if self.tuner is None:
            raise LiveError("the run has not started yet")
        self.tuner.tune(port, changes)


def demote_this_thread() -> None:
    """Make the calling thread an ordinary one (SCHED_OTHER, niceness at least 0): a thread
    inherits its creator's scheduling, and a live view must never take a CPU from the
    switches and the reaction points, which run under SCHED_FIFO."""
    tid = threading.get_native_id()
    with contextlib.suppress(OSError, AttributeError):
        if os.sched_getscheduler(tid) != os.SCHED_OTHER:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, tid) < 0:
            os.setpriority(os.PRIO_PROCESS, tid, 0)


def write_knobs(out: Path, changes: list[KnobChange]) -> Path:
    """``out/knobs.csv``: every knob change of the run, in order (a header alone: none)."""
    path = out / KNOBS_FILE
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(KNOBS_HEADER)
        for c in changes:
            w.writerow([f"{c.at_s:.6f}", c.port, c.field, c.old, c.new])
    return path


# -- the simulator -----------------------------------------------------------------------------


class LiveModel(Protocol):
    """What a simulation offers a live view (both engines)."""

    def live_row(self) -> LiveRow: ...

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None: ...


SIM_KNOBS = (frozenset(KNOB_FIELDS) - {"signal"}) | {"q_eq_bytes", "sampling", "sample_jitter"}
"""What the simulator changes at a port mid-run (its queue unit, where q is taken and
three-point mode are the whole network's, and so is whether a port marks ECN: its
marking curve changes, its signal does not)."""


class SimulatedKnobs:
    """The simulator's :class:`Tuner`: a change is checked at once, as `qcn ctl set` checks
    it, and applied to the model at the next sample; knobs.csv logs it at that simulated
    time.  A change asked for after the run's last sample is refused (:meth:`close`): on
    the page, in one line."""

    def __init__(self, feed: LiveFeed) -> None:
        self.feed = feed
        self._lock = threading.Lock()
        self._asked = {p: feed.params(p) for p in feed.cp_ports}
        """Each port's parameters with every change asked for so far."""
        self._pending: list[tuple[str, dict[str, Any], CpParams]] = []
        self._closed: str | None = None
        """Why no change is taken any more (None: the run takes them)."""

    def tune(self, port: str, changes: dict[str, Any]) -> None:
        refused = sorted(changes.keys() - SIM_KNOBS)
        if refused:
            raise LiveError(
                f"the simulator changes {', '.join(sorted(SIM_KNOBS))} mid-run, not "
                f"{', '.join(refused)}"
            )
        with self._lock:
            if self._closed is not None:
                raise LiveError(self._closed)
            new = self._asked[port].with_changes(changes)  # ParamError: ctl set's line
            self._asked[port] = new
            self._pending.append((port, changes, new))

    def apply(self, model: LiveModel, now_s: float) -> None:
        """Hand the model every change asked for since the last sample."""
        with self._lock:
            pending, self._pending = self._pending, []
        for port, _changes, new in pending:
            model.set_port_cp(port, CpPortConfig.from_params(new))
            self.feed.record(now_s, port, new, "page")

    def close(self, why: str) -> None:
        """Take no more changes (``why``: the page's line); a change asked for since the
        last sample was never made, and the page says so."""
        with self._lock:
            self._closed = why
            pending, self._pending = self._pending, []
        for port, changes, _new in pending:
            asked = ", ".join(f"{k} {v}" for k, v in changes.items())
            self.feed.note(f"{port} {asked}: refused, {why}")


class SimulationLive:
    """The hook a simulation calls at each of its samples (its ``progress``): it applies
    the knobs' changes, publishes a row every :data:`PUBLISH_INTERVAL_S`, and paces the run
    to ``feed.speed`` simulated seconds per second of the wall clock, and to its page: it
    never runs more than :data:`PAGE_LEAD_S` of the wall clock ahead of what the freshest
    open page has shown."""

    def __init__(
        self,
        feed: LiveFeed,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.feed = feed
        self.knobs = SimulatedKnobs(feed)
        feed.tuner = self.knobs
        self._clock, self._sleep = clock, sleep
        self._started: float | None = None
        self._published = -math.inf
        self._now_s = 0.0

    def on_sample(self, model: LiveModel, now_s: float) -> None:
        self._now_s = now_s
        self.knobs.apply(model, now_s)
        if now_s - self._published < PUBLISH_INTERVAL_S - 1e-9:  # (samples' float sums)
            return
        self._published = now_s
        self.feed.publish(model.live_row())
        speed = self.feed.speed
        if speed is None:
            return
        wall = self._clock()
        if self._started is None:
            self._started = wall - now_s / speed
        ahead = self._started + now_s / speed - wall
        if ahead > 0:
            self._sleep(ahead)
        # The page: a run that waited for it goes on at its speed from there (it does not
        # race to make the wait up).
        self._started += self.feed.wait_for_page(now_s - PAGE_LEAD_S * speed, self._clock)

    def close(self) -> None:
        """The simulation is over: a change asked for after its last sample is refused."""
        self.knobs.close(f"the run ended at {self._now_s:.3f} s before it could take it")
