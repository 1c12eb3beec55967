"""Whether each congestion point kept control of its port (docs/experiments.md, "When
control is lost").

A CP keeps control when its CNMs bring its sources down to what the port drains.  Where
they do not, a run's headline can still look settled (a queue "held" at the buffer, a
fairness over what the sources send), so every run judges each CP port it followed, after
the warm-up, from what it measured:

- how often its queue sat at its buffer (within a frame of it);
- its CNMs and drops a second;
- the mean current rate (CR) of the sources that send through it, over the run's last
  quarter.

A port whose queue sat at its buffer for at least :data:`MOST_OF_THE_RUN` of the run
**lost control** if its sources stayed above :data:`ABOVE_MIN_RATE` times MIN_RATE: the
CP could have cut them further and did not.  Sources at MIN_RATE that still overrun it
mean MIN_RATE cannot drain the port (``min-rate``): the CP did all it could.  Otherwise
the CP ``held`` the port.  A run without QCN, or with PAUSE (no output buffer limit), is
not judged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qcn.core.fit import sources_text
from qcn.core.patterns import Kind
from qcn.core.scenario import Scenario
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.core.units import rate_text

MOST_OF_THE_RUN = 0.5
"""A port at its buffer in at least this share of the samples after the warm-up sat there
for most of the run."""
ABOVE_MIN_RATE = 2.0
"""Sources whose mean CR is above this many times MIN_RATE were not brought down."""
LOST = "lost"
MIN_RATE_CANNOT_DRAIN = "min-rate"
HELD = "held"


@dataclass(frozen=True)
class PortControl:
    """What one CP port's run says of its control (summary.json's ``control``)."""

    port: str
    cnms: int
    drops: int
    cnms_per_s: float
    drops_per_s: float
    at_buffer: float
    """The share of the samples after the warm-up with the queue within a frame of the
    buffer."""
    sources: tuple[str, ...]
    """The hosts whose traffic crosses the port (judged only where the queue sat at the
    buffer: empty otherwise)."""
    sources_rate_bps: float | None
    """Their mean CR over the run's last quarter, per source (None where not judged)."""
    verdict: str

    def figures(self) -> dict[str, Any]:
        """summary.json's ``control`` entry of the port."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "port"}
        return out | {"sources": list(self.sources)}

    def lost_text(self, duration_s: float, min_rate_bps: float) -> str:
        """The port's figures in words, as the run's line and ``control_lost`` give them."""
        rate = self.sources_rate_bps
        sources = (
            f"its {sources_text(len(self.sources))} still at {rate_text(rate)} (MIN_RATE "
            f"{rate_text(min_rate_bps)})"
            if rate is not None
            else "its sources' rates not known"
        )
        return (
            f"{self.cnms:,} CNMs in {duration_s:g} s, queue at the buffer "
            f"{self.at_buffer:.0%} of the run, {self.drops:,} drops; {sources}"
        )


def port_control(sc: Scenario, tr: Trace, warm: int, tail: int, *, qcn: bool) -> list[PortControl]:
    """Each CP port the run followed, judged (none: a run without QCN or with PAUSE).
    ``warm``: the first sample after the warm-up; ``tail``: the first of the last
    quarter."""
    if not qcn or sc.network.pause or not tr.times_s:
        return []
    topo, seconds = sc.topology, sc.duration_s
    out = []
    for ref in topo.cp_ports:
        name = str(ref)
        queue = _queue(sc, tr, name)
        if queue is None:
            continue
        after = queue[warm:] or [0]
        buffer = topo.link_at(ref).buffer_pkts
        at_buffer = sum(q >= buffer - 1 for q in after) / len(after)
        drops, cnms = _total(sc, tr, name, "drops"), _total(sc, tr, name, "cnms")
        sources: tuple[str, ...] = ()
        rate: float | None = None
        verdict = HELD
        if at_buffer >= MOST_OF_THE_RUN:
            through = _sources_through(sc, ref)
            sources = tuple(sc.sources[i].host for i in through)
            rate = _mean_rate(tr, through, tail)
            floor = ABOVE_MIN_RATE * sc.params.rp.min_rate_bps
            # (Sources whose rates are not known were not shown to be at MIN_RATE.)
            verdict = MIN_RATE_CANNOT_DRAIN if rate is not None and rate <= floor else LOST
        out.append(
            PortControl(
                name,
                cnms,
                drops,
                cnms / seconds if seconds else 0.0,
                drops / seconds if seconds else 0.0,
                at_buffer,
                sources,
                rate,
                verdict,
            )
        )
    return out


def summary_figures(sc: Scenario, controls: Sequence[PortControl]) -> dict[str, Any]:
    """summary.json's ``control`` (every judged port) and, where a port lost control,
    ``control_lost`` (each such port's figures in words)."""
    if not controls:
        return {}
    out: dict[str, Any] = {"control": {c.port: c.figures() for c in controls}}
    lost = {
        c.port: c.lost_text(sc.duration_s, sc.params.rp.min_rate_bps)
        for c in controls
        if c.verdict == LOST
    }
    if lost:
        out["control_lost"] = lost
    return out


def control_lines(summary: dict[str, Any], min_rate_bps: float) -> list[str]:
    """The run's lines (none where every CP held its port): one for the ports whose CP lost
    control, one for those MIN_RATE could not drain."""
    out = []
    lost: dict[str, str] = summary.get("control_lost") or {}
    if lost:
        ports = "; ".join(f"{port}: {text}" for port, text in lost.items())
        out.append(
            f"QCN lost control of {len(lost)} port{'s' if len(lost) > 1 else ''} ({ports}); "
            "the figures above describe a queue held at its buffer by drops, not by QCN "
            "(summary.json's control; docs/experiments.md, 'When control is lost')"
        )
    stuck = [
        f"{port} (queue at the buffer {c['at_buffer']:.0%} of the run, {c['drops']:,} drops; "
        f"{', '.join(c['sources'])} at {rate_text(c['sources_rate_bps'] or 0.0)})"
        for port, c in (summary.get("control") or {}).items()
        if c["verdict"] == MIN_RATE_CANNOT_DRAIN
    ]
    if stuck:
        out.append(
            f"MIN_RATE {rate_text(min_rate_bps)} could not drain {'; '.join(stuck)}: its "
            "sources sat at MIN_RATE and still overran it (docs/experiments.md, 'When control "
            "is lost')"
        )
    return out


def _queue(sc: Scenario, tr: Trace, port: str) -> list[int] | None:
    """The port's queue series (the single bottleneck's is the trace's own)."""
    if port in tr.port_queue_pkts:
        return tr.port_queue_pkts[port]
    if port == str(sc.bottleneck_port) and not tr.port_queue_pkts:
        return tr.queue_pkts
    return None


def _total(sc: Scenario, tr: Trace, port: str, what: str) -> int:
    """The port's ``what`` ("drops" or "cnms") over the run: its running count's last, the
    backend's count at the end, or (the single bottleneck) the trace's own."""
    so_far = (tr.port_drops_so_far if what == "drops" else tr.port_cnms_so_far).get(port)
    if so_far:
        return so_far[-1]
    if port in tr.port_counts:
        return tr.port_counts[port].get(what, 0)
    if port != str(sc.bottleneck_port):
        return 0
    return tr.drops if what == "drops" else tr.cnms


def _sources_through(sc: Scenario, ref: PortRef) -> list[int]:
    """The sources whose traffic crosses ``ref``: a stream's path to its first destination;
    with the flows workload, a path to any of its destinations."""
    topo = sc.topology
    if sc.workload.declared.kind is not Kind.FLOWS:
        return [i for i in range(len(sc.sources)) if ref in sc.stream_refs(i)]
    return [
        i
        for i, s in enumerate(sc.sources)
        if any(ref in topo.path(s.host, d) for d in s.destinations)
    ]


def _mean_rate(tr: Trace, sources: list[int], tail: int) -> float | None:
    """The mean CR per source of ``sources`` over the samples from ``tail`` on."""
    rows = tr.source_current_rate_bps[tail:]
    if not sources or not rows:
        return None
    return sum(row[i] for row in rows for i in sources) / (len(rows) * len(sources))
