"""The measurement loop of a Mininet experiment, and what it records.

While the traffic runs, :func:`measure` samples at a fixed interval: it applies the
scenario's schedule (queue-rate changes of the bottleneck port, over Thrift), reads every
CP port's queue depth from the pipeline's own count (the ``occupancy`` register's frames,
one Thrift call per switch), samples
the emulation's own noise (:mod:`qcn.topologies.noise`), lets the experiment do its own
per-sample work, checks the helper processes, and prints progress once a second.  Times
are monotonic; :mod:`qcn.topologies.traces` puts them on the run's grid.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from thrift.Thrift import TException

from qcn.core.scenario import Scenario
from qcn.core.topology import PortRef
from qcn.topologies.errors import ExperimentError
from qcn.topologies.network import frames_per_s
from qcn.topologies.noise import NoiseMonitor

SOURCE_START_DELAY_S = 2.0
"""The traffic starts this long after the loop is entered (the sources start meanwhile)."""


@dataclass
class Recording:
    """What a run measured, in raw form (monotonic timestamps)."""

    queue: list[tuple[float, int]] = field(default_factory=list)
    """The bottleneck port's depth."""
    ports: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    """Every sampled CP port's depth, by port ("s1:3")."""
    sinks: dict[str, list[tuple[float, dict[str, list[int]]]]] = field(default_factory=dict)
    """Each receiving host's sink: its cumulative counts per source IP, [frames, bytes,
    lost], in time order."""
    capacity: list[tuple[float, float]] = field(default_factory=list)
    limiter_rows: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)
    """Per source index: (monotonic time, CR, TR) at every limiter change."""
    cnms: int = 0
    start: float = 0.0


@dataclass(frozen=True)
class Hooks:
    """What an experiment adds to the loop."""

    start_traffic: Callable[[float], None]
    """Start the traffic so that it begins at the given monotonic time."""
    on_sample: Callable[[float | None, float], None]
    """Per sample: seconds into the run (None: the last sample, after the drain) and the
    monotonic time."""
    progress_detail: Callable[[int], str]
    """The progress line's figures, given the CP port's depth."""
    check: Callable[[], None]
    """Raise if a helper process failed."""


def rate_pps(sc: Scenario, rate_bps: float) -> int:
    """A rate in the scenario's frames per second (BMv2 shapes queues in packets/s)."""
    return frames_per_s(rate_bps, sc.network.frame_bytes)


def measure(
    sc: Scenario,
    *,
    thrifts: Mapping[str, Any],
    ports: Sequence[PortRef],
    interval_s: float,
    hooks: Hooks,
    progress: Callable[[str], None],
    noise: NoiseMonitor | None = None,
    rec: Recording | None = None,
) -> Recording:
    """Run the scenario's traffic for its duration and record it (see the module doc);
    into ``rec`` if given, so that an interrupted run still holds what it measured.
    ``thrifts``: a Thrift connection per switch; ``ports``: the ports sampled (the
    scenario's bottleneck among them)."""
    rec = rec if rec is not None else Recording()
    bottleneck = sc.bottleneck_port
    by_switch: dict[str, list[int]] = {}
    for ref in ports:
        by_switch.setdefault(ref.switch, []).append(ref.port)
        rec.ports.setdefault(str(ref), [])
    pending = list(sc.schedule)
    start = rec.start = time.monotonic() + SOURCE_START_DELAY_S
    hooks.start_traffic(start)
    time.sleep(max(0.0, start - time.monotonic()))
    # The bottleneck port's own rate (a topology file's link may give it), as the simulator
    # takes it: network.bottleneck_rate_bps is a generator's, and utilization on a file's
    # 0.5 Mb/s port was taken against the hosts' scaled line rate (0.059 for 0.99).
    rec.capacity.append((start, sc.initial_capacity_bps))
    next_sample, next_progress, end = start, start + 1.0, start + sc.duration_s
    while (now := time.monotonic()) < end:
        while pending and now - start >= pending[0].at_s:
            change = pending.pop(0)
            thrifts[bottleneck.switch].set_queue_rate(
                rate_pps(sc, change.bottleneck_rate_bps), bottleneck.port
            )
            rec.capacity.append((time.monotonic(), change.bottleneck_rate_bps))
            progress(
                f"qcn run: t={now - start:.1f} s: bottleneck -> "
                f"{change.bottleneck_rate_bps / 1e6:g} Mb/s"
            )
        depths = read_depths(thrifts, by_switch, now - start)
        t = time.monotonic()
        for ref, frames in depths.items():
            rec.ports[str(ref)].append((t, frames))
        depth = depths[bottleneck]
        rec.queue.append((t, depth))
        if noise is not None:
            noise.sample(t, depth)
        hooks.on_sample(now - start, t)
        hooks.check()
        if now >= next_progress:
            shown = progress_port(sc, depths)
            progress(
                f"qcn run: t={now - start:5.1f}/{sc.duration_s:g} s  "
                + hooks.progress_detail(depths[shown])
                + ("" if shown == bottleneck else f"  (queue: {shown}, the deepest CP port)")
            )
            next_progress += 1.0
        next_sample += interval_s
        time.sleep(max(0.0, next_sample - time.monotonic()))
    # Let the last frames drain into the sinks before counting.
    time.sleep(min(1.0, 10 * interval_s))
    hooks.on_sample(None, time.monotonic())
    return rec


def progress_port(sc: Scenario, depths: dict[PortRef, int]) -> PortRef:
    """The port whose queue the progress line shows: the bottleneck where something names
    it (the topology, a schedule), else the deepest CP port now, as the run's headline
    port is the most congested one (qcn.core.results.headline)."""
    topo = sc.topology
    named = sc.schedule or (topo.bottleneck is not None and not topo.bottleneck_chosen)
    cps = [r for r in topo.cp_ports if r in depths]
    if named or len(cps) < 2:
        return sc.bottleneck_port
    return max(cps, key=lambda r: depths[r])  # (max keeps the first of equals)


def read_depths(
    thrifts: Mapping[str, Any], by_switch: Mapping[str, list[int]], elapsed_s: float
) -> dict[PortRef, int]:
    """Every measured port's queue now, in frames; a switch that no longer answers (it
    crashed, or something killed it) is an ExperimentError naming it, not a traceback."""
    depths = {}
    sw = ""
    try:
        # Every switch asked before any answer is awaited: six switches' reads took the
        # runner 2.8 ms of its 10 ms one after the other (docs/bmv2.md).
        for sw in by_switch:
            thrifts[sw].ask_occupancies()
        for sw, numbers in by_switch.items():
            occupancies = thrifts[sw].asked_occupancies(numbers)
            for port, (frames, _) in zip(numbers, occupancies, strict=True):
                depths[PortRef(sw, port)] = frames
    except (TException, OSError):
        raise ExperimentError(
            f"switch {sw} stopped answering at t={elapsed_s:.1f} s (it crashed or was "
            f"killed; its log is {sw}.log in the results)"
        ) from None
    return depths
