"""An emulated network's own noise, and whether a run's results can be taken as QCN's.

An emulation on a shared machine adds what the modelled network does not have: processes
that are not run when they should be.  A switch stalled for longer than it takes the
offered load to fill q_eq makes a queue the modelled network never had, and a QCN
congestion point rightly answers it with CNMs (docs/bmv2.md, "Noise").  So every Mininet
run measures its noise (:mod:`qcn.topologies.noise` reads it from the kernel) and this module
turns the measurement into figures and a verdict:

- **stalls**: per thread of a group (the switch's threads, the senders), how long it waited
  to be run while runnable (the kernel's run-queue delay) in each sample interval;
  consecutive intervals in which one thread waited form one stall of that thread, as long
  as its waits added up;
- **steal**: the share of the machine's CPU time its hypervisor gave to others;
- **the uncongested queue**: how the queue behaved while the offered load was below
  capacity, where a queue above q_eq is the emulation's doing, not the traffic's;
- **the reaction points' latency**: how long each daemon took from a CNM's arrival to its
  source's new rate (its p50 and p99).  A CNM applied late lets a source keep its old rate
  meanwhile: the queue overshoots, the CP sends larger Fb, and the cuts come deeper and
  together (docs/bmv2.md, "The reaction points' latency");
- **the runner's own samples**: how many of the queue's samples it missed (it samples
  every interval; a late sample leaves the queue's trace at its last value meanwhile) and
  its longest gap;
- **the measurement's own reporters**: the sink's longest silence (it reports every sample
  interval; what arrives while it is not run is counted late, or at the run's end never),
  and how many senders wrote their report.  A run whose sink stopped reporting for its last
  25 s carried "0.47 of its load" by its measurement, and was judged ok (docs/experiments.md,
  the three-point transients with a core taken).

The thresholds are the scenario's own where it has one (the tolerable stall) and stated
constants otherwise; docs/bmv2.md gives their reasons.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from qcn.core.params import QueueUnit
from qcn.core.scenario import Scenario

STALL_FLOOR_S = 0.001
"""A wait shorter than this in a sample interval is scheduling as usual, not a stall."""
STALL_BINS_MS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
"""The stall histogram's bin edges (ms); the last bin is open: [100, inf)."""
MAX_STALLS_OVER_TOLERANCE_PER_MIN = 6.0
"""More stalls of the switch than this, each long enough to fill q_eq, and the run is noisy:
one every 10 s is several CNM bursts per congestion episode of the seeds' scenarios."""
MIN_STALLS_ALLOWED = 5
"""However short the run, this many such stalls are allowed: three in a 25 s run are not a
rate (bursty's runs had 0-7 of about 3 ms)."""
MAX_SENDER_SKIPPED_FRACTION = 0.01
"""Senders that were not run for more than this share of the run offered that much less
than the scenario says, so delivered/offered is off by as much."""
MAX_STEAL_FRACTION = 0.05
"""Steal above this: the machine itself was not the emulation's for a twentieth of the time."""
MAX_LATE_NOTIFICATION_FRACTION = 0.01
"""The daemons' notifications (all of them together) applied later than one source takes
to fill q_eq: more than this share and QCN's loop was slower than the modelled network's.
Before it, the slowest daemon's p99 judged; with 161 CNMs a daemon in `make run` that is
its second latest, and one 60 ms scheduling hiccup made a run noisy (docs/bmv2.md)."""
MAX_SINK_SILENCE_S = 1.0
MAX_SINK_SILENCE_FRACTION = 0.01
"""The sink's longest silence allowed: a second, or 1 % of the run if that is longer (it
reports every sample interval, 10 ms; a sink stalled for a second misplaces a second of
the delivered load, at the run's end it loses it)."""
MAX_MISSED_SAMPLE_FRACTION = 0.01
"""The runner missing more than this share of the queue's samples: the queue trace (and
every figure drawn from it) held stale values for that much of the run.  An ordinary
runner beside ten busy senders missed 25 % (docs/bmv2.md, "The runner's samples")."""
QUIET_LOAD = 0.9
"""The uncongested queue judges noise only where the sources offer at most this share of the
capacity: at the whole link's load (bursty's on/off sources) the traffic itself fills the
queue past q_eq."""
MAX_UNCONGESTED_ABOVE_Q_EQ = 0.01
"""An uncongested queue above q_eq in more than this share of its samples.  At the seeds'
uncongested load (0.85 of capacity, Poisson-like arrivals of fixed-size frames) an M/D/1
queue is above 22 frames about 0.04 % of the time; 1 % is 25 times that."""


def tolerable_stall_s(sc: Scenario, *, one_source: bool = False) -> float:
    """How long the switch may stall before the frames arriving meanwhile fill q_eq: q_eq in
    bytes over the load the sources offer together (the scenario's rates, as run).  With
    ``one_source``: how long one sender may, whose frames then follow as a burst (its
    share of the load alone)."""
    cp = sc.params.cp
    per_frame = 1 if cp.queue_unit is QueueUnit.BYTES else sc.network.frame_bytes
    q_eq_bytes = cp.q_eq * per_frame
    sources = 1 if one_source else sc.network.sources
    offered = sc.workload.max_rate_bps * sources
    return 8 * q_eq_bytes / offered if offered > 0 else math.inf


def tolerances_s(sc: Scenario) -> dict[str, float]:
    """Each measured group's tolerable stall: the switch's, and one sender's."""
    return {"switch": tolerable_stall_s(sc), "senders": tolerable_stall_s(sc, one_source=True)}


@dataclass(frozen=True)
class Stall:
    """One thread's consecutive waits: from sample ``first`` to sample ``last``."""

    first: int
    last: int
    length_s: float


def wait_not_behind_own_threads(wait_s: float, others_ran_s: float, cpus: int) -> float:
    """Of a switch thread's wait in one interval, what its own process's other threads do not
    explain.  A SCHED_FIFO thread waits only while every CPU it may use runs something of
    its priority or above (or the kernel): if the switch's other threads ran ``others_ran_s``
    in the interval, they can have held its ``cpus`` CPUs for at most ``others_ran_s / cpus``
    of its wait.  The rest, at least, was another process's or the kernel's: noise.  The
    switch waiting for itself is the emulator at its own pace, which the queue's figures
    judge (docs/bmv2.md, "A switch waiting for itself")."""
    return max(0.0, wait_s - others_ran_s / max(cpus, 1))


def stall_episodes(waits_s: Iterable[float], floor_s: float = STALL_FLOOR_S) -> list[Stall]:
    """One thread's stalls from its per-interval waits: consecutive intervals each with a
    wait of at least ``floor_s`` form one stall, as long as their waits added up."""
    tracker = StallTracker(floor_s)
    for k, w in enumerate(waits_s):
        tracker.add(0, k, w)
    return tracker.finish()


class StallTracker:
    """Stalls of many threads, fed one interval's wait per thread at a time."""

    def __init__(self, floor_s: float = STALL_FLOOR_S) -> None:
        self.floor_s = floor_s
        self.stalls: list[Stall] = []
        self._open: dict[int, tuple[int, int, float]] = {}
        """Per thread: (first sample, last sample, waits so far) of its stall going on."""

    def add(self, thread: int, k: int, wait_s: float) -> None:
        """``thread`` waited ``wait_s`` in sample interval ``k`` (intervals in order)."""
        going = self._open.get(thread)
        if wait_s >= self.floor_s:
            first, _, total = going if going else (k, k, 0.0)
            self._open[thread] = (first, k, total + wait_s)
        elif going:
            self._close(thread)

    def _close(self, thread: int) -> None:
        first, last, total = self._open.pop(thread)
        self.stalls.append(Stall(first, last, total))

    def finish(self) -> list[Stall]:
        for thread in list(self._open):
            self._close(thread)
        return self.stalls


def histogram(
    stalls_s: Sequence[float], edges_ms: Sequence[float] = STALL_BINS_MS
) -> dict[str, int]:
    """Stalls counted by length, one bin per pair of edges plus the open last one, keyed
    like "2-5ms" and "100ms+"; shorter than the first edge is not counted."""
    names = [f"{a:g}-{b:g}ms" for a, b in itertools.pairwise(edges_ms)]
    names.append(f"{edges_ms[-1]:g}ms+")
    bins = dict.fromkeys(names, 0)
    for s in stalls_s:
        i = bisect.bisect_right(edges_ms, s * 1e3)
        if i:
            bins[names[i - 1]] += 1
    return bins


@dataclass
class GroupWaits:
    """One group of threads' stalls, and how long its threads waited in all."""

    stalls: list[Stall] = field(default_factory=list)
    waited_s: float = 0.0
    """Every thread's waits added up."""
    threads: int = 0
    """How many threads the group had (at most, over the run)."""
    ran_s: float = 0.0
    """Every thread's time on a CPU added up (the switches': what the capacity model
    predicts, qcn.core.capacity)."""
    behind_own_s: float = 0.0
    """The switches': the part of their threads' waits that their own other threads explain
    (:func:`wait_not_behind_own_threads`), left out of their stalls."""
    helper_threads: int = 0
    """The switches': how many of ``threads`` serve the control plane (gRPC's, named apart
    from their process): counted in ``ran_s`` and ``waited_s``, never in ``stalls``."""

    def figures(self, run_s: float, tolerance_s: float) -> dict[str, Any]:
        lengths = [s.length_s for s in self.stalls]
        over = [s for s in lengths if s >= tolerance_s]
        minutes = run_s / 60 if run_s > 0 else math.nan

        def per_thread(seconds: float) -> float:
            """A share of the run, for an average thread."""
            return seconds / (self.threads * run_s) if self.threads and run_s > 0 else math.nan

        return {
            "threads": self.threads,
            "threads_not_judged": self.helper_threads,
            "stalls": len(lengths),
            "longest_ms": 1e3 * max(lengths, default=0.0),
            "waited_per_thread": per_thread(self.waited_s),
            "histogram": histogram(lengths),
            "over_tolerance": len(over),
            "over_tolerance_per_min": len(over) / minutes if minutes else math.nan,
            "cores": self.ran_s / run_s if run_s > 0 else math.nan,
            "waited_behind_own_threads_per_thread": per_thread(self.behind_own_s),
        }


@dataclass(frozen=True)
class DaemonLatency:
    """One reaction-point daemon's latency figures (its status file's)."""

    p50_ms: float
    p99_ms: float
    timed: int = 0
    """Notifications timed over the whole run."""
    late: int | None = None
    """Of them, later than the senders' tolerable stall (None: not counted)."""


@dataclass
class NoiseRecording:
    """What a Mininet run measured of its own noise (raw; :func:`report` makes figures)."""

    interval_s: float
    run_s: float = 0.0
    groups: dict[str, GroupWaits] = field(default_factory=dict)
    steal_fractions: list[float] = field(default_factory=list)
    """The machine's steal, one value per second of the run."""
    sender_skipped_s: float = 0.0
    """What the senders reported they were not run for, added up (they skip it)."""
    senders: int = 0
    scheduling: str = ""
    """How the switch was scheduled (e.g. "SCHED_FIFO 20", "nice -10 (...)")."""
    injected: str = ""
    """Stalls injected on purpose (a test of this verdict), or empty."""
    times_s: list[float] = field(default_factory=list)
    """Each sample's time, seconds into the run (stalls count samples from 0)."""
    depths: list[int] = field(default_factory=list)
    """The CP port's queue (frames) at each sample."""
    rp_scheduling: str = ""
    """How the reaction-point daemons were scheduled (e.g. "SCHED_FIFO 10")."""
    rp_latencies: list[DaemonLatency] = field(default_factory=list)
    """Each daemon's that took CNMs: a CNM's arrival to its limiter's new rate."""
    sink_times_s: list[float] | None = None
    """When the sink reported, seconds into the run (None: the experiment has no sink's
    reports to judge)."""
    runner_scheduling: str = ""
    """How the runner, which takes the samples, was scheduled while it measured."""
    senders_reported: int | None = None
    """How many of the ``senders`` wrote their report (None: their reports are not asked
    for)."""


def uncongested_queue(
    sc: Scenario, queue_pkts: Sequence[int], rows: Sequence[int]
) -> dict[str, Any]:
    """The queue over the samples ``rows`` (those of the uncongested phases): its mean, the
    share above q_eq, the samples at 90 % of the buffer or more, and its maximum."""
    q_eq, buffer = sc.params.cp.q_eq_pkts, sc.network.buffer_pkts
    qs = [queue_pkts[k] for k in rows]
    if not qs:
        return {"samples": 0, "mean_pkts": math.nan, "above_q_eq": math.nan, "max_pkts": 0}
    return {
        "samples": len(qs),
        "mean_pkts": sum(qs) / len(qs),
        "above_q_eq": sum(q > q_eq for q in qs) / len(qs),
        "near_buffer_samples": sum(q >= 0.9 * buffer for q in qs),
        "max_pkts": max(qs),
    }


EXCURSION_LOOKBACK_S = 0.05
"""A rise above q_eq follows a stall if the stall ended at most this long before it (or
was going on)."""


def excursions(
    sc: Scenario, rec: NoiseRecording, span_s: tuple[float, float] = (0.0, math.inf)
) -> dict[str, int]:
    """Where the uncongested queue's rises above q_eq came from: each rise (a sample above
    q_eq after one at or below it, within ``span_s``, while the sources offer less than
    the capacity) counted by what preceded it within :data:`EXCURSION_LOOKBACK_S`: a switch
    stall of at least its tolerable length (:func:`tolerances_s`), else such a sender
    stall, else nothing measured."""
    q_eq = sc.params.cp.q_eq_pkts
    lookback = max(1, round(EXCURSION_LOOKBACK_S / rec.interval_s))
    tolerance = tolerances_s(sc)

    def stalled(group: str, k: int) -> bool:
        stalls = rec.groups[group].stalls if group in rec.groups else []
        return any(
            s.length_s >= tolerance[group] and s.first <= k and s.last >= k - lookback
            for s in stalls
        )

    out = {"rises": 0, "after_switch_stall": 0, "after_sender_stall": 0, "unexplained": 0}
    for k in range(1, len(rec.depths)):
        t = rec.times_s[k]
        if not span_s[0] <= t < span_s[1] or sc.offered_bps(t) > QUIET_LOAD * sc.capacity_at(t):
            continue
        if not rec.depths[k - 1] <= q_eq < rec.depths[k]:
            continue
        out["rises"] += 1
        if stalled("switch", k):
            out["after_switch_stall"] += 1
        elif stalled("senders", k):
            out["after_sender_stall"] += 1
        else:
            out["unexplained"] += 1
    return out


def report(
    sc: Scenario,
    rec: NoiseRecording,
    queue: dict[str, Any],
    span_s: tuple[float, float] = (0.0, math.inf),
    recovery_from_s: float = math.inf,
) -> dict[str, Any]:
    """summary.json's ``noise``: the figures and a verdict ("ok" or "noisy") with every
    reason, each with its figure and the threshold it passed.  ``queue`` is
    :func:`uncongested_queue`'s over the uncongested time ``span_s`` before any congestion
    (the rises are counted there too).

    Stalls from ``recovery_from_s`` on (the end of the first congestion) are reported apart
    and judge nothing: there the sources' backlogs drain at line rate, the switch's own
    threads keep its CPUs busy and wait for each other (a SCHED_FIFO thread cannot wait for
    an ordinary process), i.e. the emulator at its capacity, not other processes' noise
    (docs/bmv2.md, "Noise")."""
    tolerances = tolerances_s(sc)
    tolerance = tolerances["switch"]
    groups = _group_figures(rec, tolerances, recovery_from_s)
    reaction = reaction_points(rec, tolerances["senders"])
    steal = rec.steal_fractions
    skipped = rec.sender_skipped_s / (rec.senders * rec.run_s) if rec.senders and rec.run_s else 0.0
    steal_mean = sum(steal) / len(steal) if steal else 0.0
    sink = sink_silence(rec)
    samples = runner_samples(rec)
    reasons = _reasons(
        rec, groups=groups, tolerance=tolerance, skipped=skipped, reaction=reaction,
        steal_mean=steal_mean, sink=sink, queue=queue, samples=samples,
    )  # fmt: skip
    return {
        "verdict": "noisy" if reasons else "ok",
        "reasons": reasons,
        "tolerable_stall_ms": tolerance * 1e3,
        "stalls_judged_until_s": recovery_from_s,
        "sample_interval_ms": rec.interval_s * 1e3,
        "switch_scheduling": rec.scheduling,
        "stalls": groups,
        "steal_mean": steal_mean,
        "steal_max_per_s": max(steal, default=0.0),
        "sender_skipped_fraction": skipped,
        "samples": samples,
        "uncongested_queue": queue,
        "uncongested_rises": excursions(sc, rec, span_s),
        **({"reaction_points": reaction} if reaction else {}),
        **({"sink": sink} if sink is not None else {}),
        **({"senders_reported": rec.senders_reported} if rec.senders_reported is not None
           else {}),
        **({"injected": rec.injected} if rec.injected else {}),
    }  # fmt: skip


def _group_figures(
    rec: NoiseRecording, tolerances: dict[str, float], recovery_from_s: float
) -> dict[str, dict[str, Any]]:
    """Each group's stalls (switch, reaction points, senders), those before the recovery
    judged and those after it apart."""
    split = bisect.bisect_left(rec.times_s, recovery_from_s)

    def judged(s: Stall) -> bool:
        """Whether a stall began before the recovery (always, if no congestion ended)."""
        return math.isinf(recovery_from_s) or s.first < split

    groups = {}
    for name, g in rec.groups.items():
        limit = tolerances.get(name, tolerances["switch"])
        before = GroupWaits(
            [s for s in g.stalls if judged(s)],
            g.waited_s,
            g.threads,
            g.ran_s,
            g.behind_own_s,
            g.helper_threads,
        )
        after = GroupWaits([s for s in g.stalls if not judged(s)], 0.0, g.threads)
        late = after.figures(rec.run_s, limit)
        groups[name] = before.figures(rec.run_s, limit) | {
            "tolerable_stall_ms": 1e3 * limit,
            "after_congestion": {
                k: late[k] for k in ("stalls", "longest_ms", "over_tolerance", "histogram")
            },
        }
    return groups


def _reasons(
    rec: NoiseRecording,
    *,
    groups: dict[str, dict[str, Any]],
    tolerance: float,
    skipped: float,
    reaction: dict[str, Any] | None,
    steal_mean: float,
    sink: dict[str, Any] | None,
    queue: dict[str, Any],
    samples: dict[str, Any],
) -> list[str]:
    """Why the run is noisy, each with its figure and the threshold it passed ([]: ok)."""
    reasons = []
    switch = groups.get("switch")
    allowed = max(MIN_STALLS_ALLOWED, MAX_STALLS_OVER_TOLERANCE_PER_MIN * rec.run_s / 60)
    if switch and switch["over_tolerance"] > allowed:
        reasons.append(
            f"the switch stalled {switch['over_tolerance']} times for {tolerance * 1e3:.1f} ms "
            f"or more (long enough to fill q_eq; {switch['over_tolerance_per_min']:.1f}/min, "
            f"allowed {MAX_STALLS_OVER_TOLERANCE_PER_MIN:g}/min or {MIN_STALLS_ALLOWED}), longest "
            f"{switch['longest_ms']:.0f} ms"
        )
    if skipped > MAX_SENDER_SKIPPED_FRACTION:
        reasons.append(
            f"the senders were not run for {100 * skipped:.1f} % of their time (allowed "
            f"{100 * MAX_SENDER_SKIPPED_FRACTION:g} %): they offered that much less"
        )
    if reaction and reaction_points_late(reaction):
        if "late_fraction" in reaction:
            reasons.append(
                f"the reaction points applied {reaction['late']} of {reaction['notifications']}"
                f" notifications ({100 * reaction['late_fraction']:.1f} %, allowed "
                f"{100 * MAX_LATE_NOTIFICATION_FRACTION:g} %) later than "
                f"{reaction['tolerable_latency_ms']:.0f} ms, in which one source fills q_eq "
                f"(the slowest daemon's p99 {reaction['latency_p99_ms']:.0f} ms): QCN's loop "
                "was slower than the modelled network's"
            )
        else:
            reasons.append(
                f"the reaction points applied CNMs up to {reaction['latency_p99_ms']:.0f} ms "
                f"late (the slowest daemon's p99; allowed {reaction['tolerable_latency_ms']:.0f}"
                " ms, in which one source fills q_eq): QCN's loop was slower than the modelled "
                "network's"
            )
    if steal_mean > MAX_STEAL_FRACTION:
        reasons.append(
            f"the hypervisor stole {100 * steal_mean:.1f} % of the CPU (allowed "
            f"{100 * MAX_STEAL_FRACTION:g} %)"
        )
    if sink is not None and sink["longest_silence_s"] > sink["allowed_s"]:
        end = "the run's end" if sink["at_the_end"] else f"{sink['silent_to_s']:.1f} s"
        reasons.append(
            f"the sink did not report for {sink['longest_silence_s']:.1f} s (from "
            f"{sink['silent_from_s']:.1f} s to {end}, while the queue changed "
            f"{sink['queue_changes']} times; allowed {sink['allowed_s']:.1f} s): what it "
            + ("received then is not measured" if sink["at_the_end"] else "received then is "
               "counted late, in the wrong samples")
        )  # fmt: skip
    if samples["missed_fraction"] > MAX_MISSED_SAMPLE_FRACTION:
        reasons.append(
            f"the runner missed {samples['missed']} of the queue's {samples['due']} samples "
            f"({100 * samples['missed_fraction']:.1f} %, allowed "
            f"{100 * MAX_MISSED_SAMPLE_FRACTION:g} %; the longest gap "
            f"{samples['longest_gap_ms']:.0f} ms): the queue's trace held stale values"
        )
    if rec.senders_reported is not None and rec.senders_reported < rec.senders:
        missing = rec.senders - rec.senders_reported
        reasons.append(
            f"{missing} of {rec.senders} senders wrote no report: what they offered, and how "
            "long they were not run, are not known"
        )
    above = queue.get("above_q_eq", 0.0)
    if above > MAX_UNCONGESTED_ABOVE_Q_EQ:  # NaN (no such phase) passes
        reasons.append(
            f"while uncongested the queue was above q_eq in {100 * above:.1f} % of samples "
            f"(allowed {100 * MAX_UNCONGESTED_ABOVE_Q_EQ:g} %; the modelled traffic: ~0.04 %)"
        )
    return reasons


def runner_samples(rec: NoiseRecording) -> dict[str, Any]:
    """The runner's queue samples: how many fell due (one per interval of the run), how
    many it missed (a gap of k intervals misses k - 1), and its longest gap."""
    gaps = [b - a for a, b in itertools.pairwise(rec.times_s)]
    missed = sum(max(0, round(gap / rec.interval_s) - 1) for gap in gaps)
    due = len(rec.times_s) + missed
    return {
        "scheduling": rec.runner_scheduling,
        "due": due,
        "missed": missed,
        "missed_fraction": missed / due if due else 0.0,
        "longest_gap_ms": 1e3 * max(gaps, default=0.0),
    }


def sink_silence(rec: NoiseRecording) -> dict[str, Any] | None:
    """The sink's longest silence in the run (between two reports, from the run's start to
    the first, or from the last to the run's end), with how many times the CP port's queue
    changed meanwhile (the switch was forwarding while the sink was silent); None if the
    experiment had no sink's reports to judge."""
    if rec.sink_times_s is None:
        return None
    times = sorted(t for t in rec.sink_times_s if 0.0 <= t <= rec.run_s)
    a, b = max(itertools.pairwise([0.0, *times, rec.run_s]), key=lambda ab: ab[1] - ab[0])
    inside = [k for k, t in enumerate(rec.times_s) if a < t <= b and k > 0]
    return {
        "reports": len(times),
        "longest_silence_s": b - a,
        "silent_from_s": a,
        "silent_to_s": b,
        "at_the_end": b == rec.run_s and b > a,
        "queue_changes": sum(rec.depths[k] != rec.depths[k - 1] for k in inside),
        "allowed_s": max(MAX_SINK_SILENCE_S, MAX_SINK_SILENCE_FRACTION * rec.run_s),
    }


def reaction_points(rec: NoiseRecording, tolerance_s: float) -> dict[str, Any] | None:
    """The daemons' CNM-to-rate latency: the median of their p50s, the worst p99, and the
    share of all their notifications applied later than ``tolerance_s`` (one sender's
    tolerable stall: a CNM that late lets its source fill q_eq meanwhile), which the
    verdict judges where every daemon counted it (else the worst p99).  None if no daemon
    took a CNM."""
    daemons = rec.rp_latencies
    if not daemons:
        return None
    figures: dict[str, Any] = {
        "scheduling": rec.rp_scheduling,
        "daemons": len(daemons),
        "latency_p50_ms": statistics.median(d.p50_ms for d in daemons),
        "latency_p99_ms": max(d.p99_ms for d in daemons),
        "tolerable_latency_ms": 1e3 * tolerance_s,
    }
    counted = [(d.timed, d.late) for d in daemons if d.late is not None]
    if len(counted) == len(daemons):
        timed = sum(t for t, _ in counted)
        late = sum(n for _, n in counted)
        figures |= {
            "notifications": timed,
            "late": late,
            "late_fraction": late / timed if timed else 0.0,
            "late_fraction_worst_daemon": max((n / t for t, n in counted if t), default=0.0),
        }
    return figures


def reaction_points_late(reaction: dict[str, Any]) -> bool:
    """Whether the daemons were too late: more than :data:`MAX_LATE_NOTIFICATION_FRACTION`
    of their notifications past the tolerable latency (or, not counted, the worst p99)."""
    if "late_fraction" in reaction:
        return bool(reaction["late_fraction"] > MAX_LATE_NOTIFICATION_FRACTION)
    return bool(reaction["latency_p99_ms"] > reaction["tolerable_latency_ms"])


def verdict_line(noise: dict[str, Any]) -> str:
    """The verdict in one line, for people."""
    if noise["verdict"] == "ok":
        sw = noise["stalls"].get("switch", {})
        rp = noise.get("reaction_points")
        latency = f"; CNM to rate p99 {rp['latency_p99_ms']:.0f} ms" if rp else ""
        return (
            f"emulation noise ok: switch ({noise['switch_scheduling']}) stalls over "
            f"{noise['tolerable_stall_ms']:.1f} ms: {sw.get('over_tolerance', 0)}, longest "
            f"{sw.get('longest_ms', 0.0):.0f} ms; steal {100 * noise['steal_mean']:.1f} %"
            f"{latency}"
        )
    return "NOISY EMULATION, results are not QCN's alone: " + "; ".join(noise["reasons"])
