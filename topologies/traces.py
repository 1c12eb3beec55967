"""A Mininet experiment's recording on the run's time grid: the :class:`Trace` every
backend fills, so results (CSV, summary, plots) come from the same code as the simulator's.

The pieces both experiments share are here: the grid, the queue and the capacity at a
grid point, and each source's limiter (CR, TR) from the reaction points' CSVs.
"""

from __future__ import annotations

import bisect
import csv
import math
from pathlib import Path

from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from qcn.topologies.measurement import Recording


def grid(rec: Recording, duration_s: float, dt: float) -> list[tuple[float, float]]:
    """(seconds into the run, monotonic time) of every grid point, from the first interval."""
    return [(k * dt, rec.start + k * dt) for k in range(1, int(duration_s / dt) + 1)]


LimiterRows = dict[int, list[tuple[float, float, float]]]


def read_limiter_logs(rp_dir: Path, hosts: list[str]) -> LimiterRows:
    """Each host's limiter rows (monotonic time, CR, TR), by source index, from the CSVs the
    daemons wrote (one per limiter)."""
    out = {}
    for i, name in enumerate(hosts):
        rows: list[tuple[float, float, float]] = []
        for path in sorted(rp_dir.glob(f"rp-{name}-eth0-*.csv")):
            with path.open() as f:
                for r in csv.DictReader(f):
                    rows.append(
                        (
                            float(r["monotonic_s"]),
                            float(r["current_rate_bps"]),
                            float(r["target_rate_bps"]),
                        )
                    )
        out[i] = sorted(rows)
    return out


class GridReader:
    """Looks up what was recorded at a monotonic time (the last value at or before it)."""

    def __init__(self, sc: Scenario, rec: Recording, *, qcn: bool) -> None:
        self.sc, self.rec, self.qcn = sc, rec, qcn
        self._queue_times = [t for t, _ in rec.queue]
        self._capacity_times = [t for t, _ in rec.capacity]
        self._limiter_times = {i: [r[0] for r in rows] for i, rows in rec.limiter_rows.items()}

    def queue_at(self, t: float) -> int:
        i = bisect.bisect_right(self._queue_times, t) - 1
        return self.rec.queue[i][1] if i >= 0 else 0

    def capacity_at(self, t: float) -> float:
        i = bisect.bisect_right(self._capacity_times, t) - 1
        return self.rec.capacity[max(i, 0)][1] if self.rec.capacity else math.nan

    def rates_at(self, t: float, sources: int) -> tuple[list[float], list[float]]:
        """Every source's (CR, TR) at ``t``: its limiter's, or line rate before its first
        CNM (no limiter); without QCN the offered rate and no target."""
        line, crs, trs = self.sc.network.line_rate_bps, [], []
        for i in range(sources):
            li = bisect.bisect_right(self._limiter_times.get(i, []), t) - 1
            if not self.qcn:
                crs.append(self.sc.workload.max_rate_bps)
                trs.append(math.nan)
            elif li < 0:
                crs.append(line)
                trs.append(line)
            else:
                _, cr, target = self.rec.limiter_rows[i][li]
                crs.append(cr)
                trs.append(target)
        return crs, trs

    def append_common(self, tr: Trace, elapsed_s: float, t: float, sources: int) -> None:
        """The grid point's time, queue, capacity and limiter rates."""
        tr.times_s.append(elapsed_s)
        tr.queue_pkts.append(self.queue_at(t))
        tr.capacity_bps.append(self.capacity_at(t))
        crs, trs = self.rates_at(t, sources)
        tr.source_current_rate_bps.append(crs)
        tr.source_target_rate_bps.append(trs)


def port_throughputs(
    sc: Scenario, ports: list[str], per_source: list[list[float]]
) -> dict[str, list[float]]:
    """Each of ``ports``' throughput on the grid, from what the sinks counted of each
    source (``per_source``: the trace's rows): the sum over the sources whose traffic
    crosses it, every destination's path (what reached the sinks, so a frame dropped
    further on is not counted).  A port that some of a source's destinations cross and
    others do not is left out: its share of that source is not known."""
    topo = sc.topology
    crossed = {
        name: [
            {name in {str(r) for r in topo.path(s.host, d)} for d in s.destinations}
            for s in sc.sources
        ]
        for name in ports
    }
    return {
        name: [sum(row[i] for i, c in enumerate(cs) if c == {True}) for row in per_source]
        for name, cs in crossed.items()
        if all(c in ({True}, {False}) for c in cs)
    }


def sink_trace(
    sc: Scenario,
    rec: Recording,
    dt: float,
    *,
    qcn: bool,
    source_ips: list[str],
    at_bottleneck: list[bool],
) -> Trace:
    """A run's trace from its sinks' per-source counts (sequence numbers), on the grid:
    each source's delivered throughput and losses (summed over the sinks that hear it), the
    bottleneck's throughput from the sources whose traffic crosses it."""
    tr, reader = Trace(), GridReader(sc, rec, qcn=qcn)
    n = len(source_ips)
    sinks = [(rows, [t for t, _ in rows]) for _, rows in sorted(rec.sinks.items())]
    zero = [0, 0, 0]

    def counts_at(t: float) -> list[list[int]]:
        """Each source's [frames, bytes, lost] at ``t``, over every sink."""
        out = [[0, 0, 0] for _ in range(n)]
        for rows, times in sinks:
            i = bisect.bisect_right(times, t) - 1
            if i < 0:
                continue
            rx = rows[i][1]
            for k, ip in enumerate(source_ips):
                c = rx.get(ip, zero)
                out[k] = [a + b for a, b in zip(out[k], c, strict=True)]
        return out

    previous = [zero] * n
    gaps_so_far = []
    for elapsed, t in grid(rec, sc.duration_s, dt):
        reader.append_common(tr, elapsed, t, n)
        now = counts_at(t)
        per_source = [8 * (now[k][1] - previous[k][1]) / dt for k in range(n)]
        previous = now
        gaps_so_far.append(sum(c[2] for c in now))
        tr.source_throughput_bps.append(per_source)
        tr.throughput_bps.append(
            sum(b for b, hot in zip(per_source, at_bottleneck, strict=True) if hot)
        )
    final = counts_at(math.inf)
    tr.drops = max(sum(c[2] for c in final), 0)
    tr.drops_so_far = drops_known_by_the_end(gaps_so_far, tr.drops)
    tr.frames_in = sum(c[0] for c in final) + tr.drops
    tr.cnms = rec.cnms
    tr.events = len(rec.queue)
    return tr


def drops_known_by_the_end(gaps_so_far: list[int], final: int) -> list[int]:
    """The drops up to each sample, as the whole run tells them: the fewest the sinks
    counted at that sample or any later one (``final``: their last count, after the run).

    A sink counts a gap in a source's sequence numbers as lost when it sees it, and takes
    it back when the missing frame arrives after all (topologies/sink.py): a frame
    overtaken on its way is counted lost until it comes.  So the count at one sample can
    exceed a later one's, and the drops between two samples, taken as their difference,
    came out negative (a BMv2 run's ``drops_settled: -6``, summary.json: the settled
    window's drops are the last count less the one before the window).  The fewest
    counted from a sample on leaves out the frames that were still coming: it never
    falls, it ends at ``final``, and no difference of it is negative.
    """
    out, fewest = [0] * len(gaps_so_far), final
    for i in range(len(gaps_so_far) - 1, -1, -1):
        fewest = min(fewest, gaps_so_far[i])
        out[i] = max(fewest, 0)  # (a duplicate frame is taken back too)
    return out
