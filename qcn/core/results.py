"""A run's results: CSV time series, ``summary.json`` and the seeds' two kinds of plot.

Recovery time follows docs/qcn.md: from the moment the bottleneck's capacity is
restored until its throughput, in 1 ms windows, is back to 90 % of
min(capacity, the sum of the sources' maximum rates).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core import control, noise
from qcn.core.fairness import max_min_fair
from qcn.core.flows import (
    SHORT_FLOW_BYTES,
    plot_slowdown,
    slowdown_figure,
    summarize_flows,
    write_flows_csv,
)
from qcn.core.live import q_eq_frames
from qcn.core.patterns import Kind
from qcn.core.scenario import Scenario
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.core.units import rate_text

#: The headline figures of a run (summary.json has these and more), as `qcn run` prints them.
SUMMARY_KEYS = (
    "queue_mean_pkts",
    "queue_max_pkts",
    "drops",
    "jain_fairness",
    "jain_sent",
    "utilization",
    "recovery_ms",
    "queue_mean_settled_pkts",
    "drops_settled",
    "queue_mean_episode_pkts",
    "utilization_episode",
)
RECOVERY_FRACTION = 0.9
WARMUP_FRACTION = 0.1
"""The first 10 % of a run is start-up: queue statistics are taken after it."""
SETTLED_FRACTION = 0.25
"""The last 25 % of a run is its settled state (fairness, settled queue and drops)."""


@dataclass(frozen=True)
class Headline:
    """The port a run's headline figures describe (:data:`SUMMARY_KEYS` but the drops,
    which are the whole network's), and why: docs/experiments.md, "The headline port"."""

    port: str
    reason: str


def headline(sc: Scenario, tr: Trace) -> Headline:
    """The scenario's bottleneck where something names it (the topology, or a schedule
    that changes its rate and whose recovery is measured on it); else, of several CP
    ports followed, the congested one (:func:`most_congested`); else the only one."""
    topo, bottleneck = sc.topology, str(sc.bottleneck_port)
    named = topo.bottleneck is not None and not topo.bottleneck_chosen
    if sc.schedule:
        why = "the scenario's schedule changes its rate and recovery is measured on it"
        if not named:
            why += " (the topology names no bottleneck: the schedule's is its first CP port)"
        return Headline(bottleneck, why)
    if named:
        return Headline(bottleneck, "the topology names it its bottleneck")
    followed = [str(r) for r in topo.cp_ports if str(r) in tr.port_queue_pkts]
    if len(followed) > 1:
        return most_congested(tr, followed, warmup_row(sc, tr))
    return Headline(bottleneck, "the only CP port" if topo.cp_ports else "no port runs a CP")


def most_congested(tr: Trace, ports: list[str], warm: int) -> Headline:
    """Of ``ports`` (in the topology's order), the one with the highest mean queue after
    the warm-up; a tie goes to the most drops, then to the first."""
    means = {p: mean_or_zero(tr.port_queue_pkts[p][warm:]) for p in ports}
    drops = {p: port_drops(tr, p) for p in ports}
    best = max(ports, key=lambda p: (means[p], drops[p]))  # (max keeps the first of equals)
    tied = [p for p in ports if means[p] == means[best]]
    of = f"of {len(ports)} CP ports"
    if means[best] == 0 and drops[best] == 0:
        return Headline(best, f"no CP port saw a queue or a drop: the first {of}")
    why = f"highest mean queue after the warm-up ({means[best]:.3g} pkts) {of}"
    if len(tied) > 1:
        why += f", tied with {len(tied) - 1}: the most drops ({drops[best]})"
    return Headline(best, why)


def port_drops(tr: Trace, port: str) -> int:
    """A followed port's drops: its running count's last, or its total."""
    so_far = tr.port_drops_so_far.get(port)
    return so_far[-1] if so_far else tr.port_counts.get(port, {}).get("drops", 0)


def mean_or_zero(xs: list[int]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def warmup_row(sc: Scenario, tr: Trace) -> int:
    """The first sample after the warm-up (:data:`WARMUP_FRACTION` of the run)."""
    return next((i for i, t in enumerate(tr.times_s) if t >= WARMUP_FRACTION * sc.duration_s), 0)


def headline_view(sc: Scenario, tr: Trace, port: str) -> Trace:
    """``tr`` with ``port``'s queue, throughput and capacity as its headline series (the
    trace's own are the scenario's bottleneck's).  A backend that did not measure the
    port's throughput leaves it NaN (its utilization is then null)."""
    if port == str(sc.bottleneck_port) or port not in tr.port_queue_pkts:
        return tr
    n = len(tr.times_s)
    return dataclasses.replace(
        tr,
        queue_pkts=tr.port_queue_pkts[port],
        throughput_bps=tr.port_throughput_bps.get(port) or [math.nan] * n,
        capacity_bps=port_capacity_bps(sc, tr, port),
    )


def port_capacity_bps(sc: Scenario, tr: Trace, port: str) -> list[float]:
    """A port's capacity at each sample: for the scenario's bottleneck the trace's own (its
    schedule's rates, as the backend set them), for any other its link's rate."""
    if port == str(sc.bottleneck_port) and tr.capacity_bps:
        return tr.capacity_bps
    switch, _, number = port.rpartition(":")  # (the trace's names: str(PortRef))
    return [sc.topology.link_at(PortRef(switch, int(number))).rate_bps] * len(tr.times_s)


def summarize(sc: Scenario, tr: Trace, *, qcn: bool, backend: str, seed: int) -> dict[str, Any]:
    """summary.json: the headline figures are the headline port's (:func:`headline`)."""
    head = headline(sc, tr)
    tr = headline_view(sc, tr, head.port)
    times = tr.times_s
    warm = warmup_row(sc, tr)
    queue = tr.queue_pkts[warm:] or [0]
    # Delivered over what the bottleneck could have carried (same sample windows).
    delivered = sum(tr.throughput_bps)
    capacity = sum(tr.capacity_bps)
    tail = max(warm, round(len(times) * (1 - SETTLED_FRACTION)))
    settled = tr.queue_pkts[tail:] or [0]
    drops_before_tail = tr.drops_so_far[tail - 1] if 0 < tail <= len(tr.drops_so_far) else 0
    fair_from, fair_to = fairness_window_s(sc)
    # The sample at fair_to already reports the capacity restored then: left out.
    episode = [i for i, t in enumerate(times) if fair_from < t < fair_to]
    fairness = fairness_figures(sc, tr, episode)
    phases = phase_figures(sc, tr)
    quiet_queue = uncongested_queue(sc, tr)
    return {
        "scenario": sc.name,
        "seed_presentation": sc.seed,
        "backend": backend,
        "qcn": qcn,
        "random_seed": seed,
        "duration_s": sc.duration_s,
        "headline_port": head.port,
        "headline_reason": head.reason,
        "queue_mean_pkts": sum(queue) / len(queue),
        "queue_max_pkts": max(tr.queue_pkts or [0]),
        # Queue stability: how far the queue swings (after the warm-up; over the episode).
        "queue_std_pkts": pstdev(queue),
        # As the run began: a live run's changes are knob_changes.
        "q_eq_pkts": sc.params.cp.q_eq_pkts,
        **({"knob_changes": knob_rows(tr)} if tr.knob_changes is not None else {}),
        "drops": tr.drops,
        "queue_mean_settled_pkts": sum(settled) / len(settled),
        "queue_max_settled_pkts": max(settled),
        # Oscillation once settled: the swing, and how often the queue ran dry (seed 004's
        # "unstable" ECM: the queue swinging between empty and full).
        "queue_std_settled_pkts": pstdev(settled),
        "queue_empty_settled": sum(q == 0 for q in settled) / len(settled),
        "drops_settled": tr.drops - drops_before_tail,
        "cnms": tr.cnms,
        "jain_fairness": fairness.jain_fairness,
        "jain_sent": fairness.jain_sent,
        "fairness_window_s": [fair_from, fair_to],
        **episode_figures(tr, episode),
        "utilization": delivered / capacity if capacity else math.nan,
        "recovery_ms": recovery_ms(sc, tr),
        "events": tr.events,
        "events_per_s": tr.events / tr.wall_s if tr.wall_s else None,
        "wall_s": tr.wall_s,
        "phases": phases,
        # The worst uncongested phase: QCN must not throttle a network that is not congested.
        "delivered_offered_uncongested": min(
            (p["delivered_offered"] for p in phases if not p["congested"]), default=math.nan
        ),
        "uncongested_queue": quiet_queue,
        **(
            {
                "noise": noise.report(
                    sc,
                    tr.noise,
                    quiet_queue,
                    (WARMUP_FRACTION * sc.duration_s, quiet_queue["until_s"]),
                    recovery_from_s(sc, tr),
                )
            }
            if tr.noise
            else {}
        ),
        **({"captures": tr.captures} if tr.captures else {}),
        **(flow_figures(flow_summary(sc, tr)) if sc.workload.declared.kind is Kind.FLOWS else {}),
        "sources": fairness.sources,
        **({"long_flow_fair_ratio": fairness.long_flow_ratio} if long_flow(sc) else {}),
        **({"ports": port_figures(tr, warm)} if network_run(tr) else {}),
        **control.summary_figures(sc, control.port_control(sc, tr, warm, tail, qcn=qcn)),
        **tr.extra,
    }


@dataclass(frozen=True)
class Fairness:
    """How the sources shared the network over the fairness window (:func:`fairness_figures`)."""

    jain_fairness: float
    """Jain's index over each source's delivered throughput / its max-min fair share: how
    fairly the network served them (NaN: not known, below)."""
    jain_sent: float
    """Jain's index over what each source sent (sources.csv's throughput_bps): what
    ``jain_fairness`` was until each receiver's share was counted (the seeds' own figure,
    and the one ``qcn compare`` holds BMv2 to)."""
    sources: list[dict[str, Any]]
    """summary.json's ``sources``: per source, its sender and receiver hosts, and its
    ``sent_bps``, ``delivered_bps`` and ``fair_share_bps`` over the window."""
    long_flow_ratio: float
    """Source 0's delivered / fair share (the parking lot's long flow: below 1, beaten
    down)."""


def episode_figures(tr: Trace, episode: list[int]) -> dict[str, float]:
    """Over the fairness window (the sample rows ``episode``): what the seeds claim of a
    hot spot (queue near q_eq, throughput at the service rate)."""
    queue = [tr.queue_pkts[k] for k in episode]
    capacity = sum(tr.capacity_bps[k] for k in episode)
    return {
        "queue_mean_episode_pkts": sum(queue) / len(queue) if queue else math.nan,
        "queue_max_episode_pkts": max(queue, default=math.nan),
        "queue_std_episode_pkts": pstdev(queue) if queue else math.nan,
        "utilization_episode": (
            sum(tr.throughput_bps[k] for k in episode) / capacity if capacity else math.nan
        ),
    }


def knob_rows(tr: Trace) -> list[dict[str, Any]]:
    """summary.json's ``knob_changes``: knobs.csv's rows (the run's time, the port, the
    knob, from, to, and who turned it: the live page or a shell's controller)."""
    return [
        {"t_s": c.at_s, "port": c.port, "knob": c.field, "from": c.old, "to": c.new, "by": c.by}
        for c in tr.knob_changes or []
    ]


def q_eq_steps(sc: Scenario, tr: Trace) -> dict[str, list[tuple[float, float]]]:
    """Each CP port's q_eq in frames over the run, as steps (from time, q_eq): one step
    from 0, and one more at each live change of it (knobs.csv's; the changes made at one
    instant applied together, as they were made)."""
    cp, frame = sc.params.cp, sc.network.frame_bytes
    steps = {str(r): [(0.0, q_eq_frames(cp, frame))] for r in sc.topology.cp_ports}
    held = dict.fromkeys(steps, cp)
    changes = tr.knob_changes or []
    for (at_s, port), group in itertools.groupby(changes, key=lambda c: (c.at_s, c.port)):
        if port not in held:
            continue
        held[port] = held[port].with_changes({c.field: c.new for c in group})
        q_eq = q_eq_frames(held[port], frame)
        if q_eq != steps[port][-1][1]:
            steps[port].append((at_s, q_eq))
    return steps


def network_run(tr: Trace) -> bool:
    """Whether the run followed several ports (a network with more than one CP port):
    then it has ports.csv and summary.json its ``ports`` (:func:`port_figures`)."""
    return len(tr.port_queue_pkts) > 1


def multi_switch(sc: Scenario) -> bool:
    """A network of several switches: its flows' paths differ in length."""
    return len(sc.topology.switches) > 1


def port_figures(tr: Trace, warm: int) -> dict[str, dict[str, Any]]:
    """Per followed port, its queue after the warm-up (mean, max) and its totals (drops,
    CNMs, and what else the backend counted: reflections, pauses); then the ports that
    were not followed but counted something (a drop, an end reflection)."""
    out: dict[str, dict[str, Any]] = {}
    for name, series in tr.port_queue_pkts.items():
        queue = series[warm:] or [0]
        drops = tr.port_drops_so_far.get(name) or [0]
        cnms = tr.port_cnms_so_far.get(name) or [0]
        out[name] = {
            "queue_mean_pkts": sum(queue) / len(queue),
            "queue_max_pkts": max(series or [0]),
            "drops": drops[-1],
            "cnms": cnms[-1],
        }
    for name, counts in tr.port_counts.items():
        out.setdefault(name, {}).update(counts)
    return out


def fairness_figures(sc: Scenario, tr: Trace, episode: list[int]) -> Fairness:
    """Each source's hosts, and over the fairness window (the sample rows ``episode``) what
    it sent, what reached its receiver, and its max-min fair share there
    (:func:`fair_shares_bps`); Jain's index over delivered / fair share and over what was
    sent.  Delivered is not known where the backend did not count it per source (iperf3's
    workloads: NaN); a fair share not for the flows workload, whose flows come and go
    (NaN: its sources have no one rate to share)."""
    n, rows = len(sc.sources), len(episode)
    # Summed over the window as it always was: the seeds' figure, to the last bit.
    sent = [sum(tr.source_throughput_bps[k][i] for k in episode) for i in range(n)]
    nan = [math.nan] * n
    delivered = nan
    if rows and len(tr.source_delivered_bps) == len(tr.times_s):
        delivered = [sum(tr.source_delivered_bps[k][i] for k in episode) / rows for i in range(n)]
    fair = nan
    if sc.workload.declared.kind is not Kind.FLOWS:
        fair_from, fair_to = fairness_window_s(sc)
        fair = fair_shares_bps(sc, sc.capacity_at((fair_from + fair_to) / 2))
    ratios = [d / f if f else math.nan for d, f in zip(delivered, fair, strict=True)]
    return Fairness(
        jain_fairness=jain(ratios) if ratios else math.nan,
        jain_sent=jain(sent),
        sources=[
            {
                "sender": src.host,
                "receiver": src.receiver,
                "sent_bps": total / rows if rows else math.nan,
                "delivered_bps": d,
                "fair_share_bps": f,
            }
            for src, total, d, f in zip(sc.sources, sent, delivered, fair, strict=True)
        ],
        long_flow_ratio=ratios[0] if ratios else math.nan,
    )


def fair_shares_bps(sc: Scenario, bottleneck_bps: float) -> list[float]:
    """The sources' max-min fair rates (qcn.core.fairness.max_min_fair): each source's
    stream crosses its host link and every egress port on its path, each at its link's
    rate (the bottleneck port at ``bottleneck_bps``), and wants its offered rate."""
    topo, bottleneck = sc.topology, sc.bottleneck_port
    capacity: dict[Any, float] = {}
    paths: list[list[Any]] = []
    for i, src in enumerate(sc.sources):
        uplink = ("host link", src.host)
        capacity[uplink] = topo.access_link(src.host).rate_bps
        path: list[Any] = [uplink]
        for ref in sc.stream_refs(i):
            capacity[ref] = bottleneck_bps if ref == bottleneck else topo.link_at(ref).rate_bps
            path.append(ref)
        paths.append(path)
    return max_min_fair(paths, capacity, [sc.workload.max_rate_bps] * len(paths))


def long_flow(sc: Scenario) -> bool:
    """Source 0 crosses more congestion points than any other source: the parking lot's
    long flow."""
    cps = set(sc.topology.cp_ports)

    def crossed(i: int) -> int:
        return sum(ref in cps for ref in sc.stream_refs(i))

    return len(sc.sources) > 1 and all(crossed(0) > crossed(i) for i in range(1, len(sc.sources)))


FLOW_KEYS = (
    "slowdown_short_mean",
    "slowdown_short_p50",
    "slowdown_short_p99",
    "slowdown_long_mean",
    "slowdown_long_p50",
    "slowdown_long_p99",
    "flows_unfinished",
)
"""The flows workload's headline figures, flat in summary.json (for sweeps and compare)."""


def flow_figures(flows: dict[str, Any]) -> dict[str, Any]:
    """summary.json's ``flows`` and its headline figures (:data:`FLOW_KEYS`)."""
    return {
        "flows": flows,
        **{
            f"slowdown_{kind}_{p}": flows[f"slowdown_{kind}"][p]
            for kind in ("short", "long")
            for p in ("mean", "p50", "p99")
        },
        "flows_unfinished": flows["unfinished"],
    }


def flow_summary(sc: Scenario, tr: Trace) -> dict[str, Any]:
    """summary.json's ``flows`` (qcn.core.flows.summarize_flows), short flows below 100 KB
    times the scenario's size scale."""
    return summarize_flows(
        tr.flows, SHORT_FLOW_BYTES * sc.workload.flow_size_scale, by_hops=multi_switch(sc)
    )


def phase_rows(sc: Scenario, tr: Trace) -> list[tuple[float, float, list[int]]]:
    """The phases of the bottleneck's schedule (its rate constant in between) as (from,
    to, sample rows).  The first phase starts after the warm-up; a phase's first sample,
    which still carries the previous rate's queue, is left out."""
    if sc.workload.declared.own_congestion_control:
        return []
    end = sc.duration_s
    if sc.workload.declared.kind is Kind.FLOWS:
        end = sc.flows_until_s  # no flow starts after it: no load is offered
    edges = [WARMUP_FRACTION * sc.duration_s]
    edges += [c.at_s for c in sc.schedule if edges[0] < c.at_s < end]
    edges.append(end)
    out = []
    for a, b in itertools.pairwise(edges):
        rows = [k for k, t in enumerate(tr.times_s) if a < t <= b][1:]
        if rows:
            out.append((a, b, rows))
    return out


def congested(sc: Scenario, a: float, b: float) -> bool:
    """Whether the sources offer more than the bottleneck's capacity in phase [a, b]."""
    return sc.offered_bps(a) > sc.capacity_at((a + b) / 2)


def phase_figures(sc: Scenario, tr: Trace) -> list[dict[str, Any]]:
    """Per phase (:func:`phase_rows`): capacity, offered and delivered load, their ratio,
    whether it was congested (offered above capacity), and its queue.  None on a network
    of several CP ports: its load is not one port's, so no single capacity and offered load
    describe it (its CP ports' figures are ``ports.csv``'s)."""
    if len(sc.topology.cp_ports) > 1:
        return []
    out = []
    for a, b, rows in phase_rows(sc, tr):
        offered = sc.offered_bps(a)
        delivered = sum(tr.throughput_bps[k] for k in rows) / len(rows)
        queue = noise.uncongested_queue(sc, tr.queue_pkts, rows)
        out.append(
            {
                "from_s": a,
                "to_s": b,
                "capacity_bps": sc.capacity_at((a + b) / 2),
                "offered_bps": offered,
                "delivered_bps": delivered,
                "delivered_offered": delivered / offered if offered else math.nan,
                "undelivered_at_start_bits": undelivered_bits(sc, tr, rows[0]),
                "congested": congested(sc, a, b),
                "queue_mean_pkts": queue["mean_pkts"],
                "queue_above_q_eq": queue["above_q_eq"],
                "queue_max_pkts": queue["max_pkts"],
            }
        )
    return out


def undelivered_bits(sc: Scenario, tr: Trace, row: int) -> float:
    """What the sources had offered and the bottleneck had not delivered before sample
    ``row``: the backlog behind their limiters (a source queues what its limiter holds
    back, docs/experiments.md), frames on the way, and drops.  A phase that follows a
    congested one delivers more than it is offered while that backlog drains."""
    total, before = 0.0, 0.0
    for k in range(row):
        dt = tr.times_s[k] - before
        before = tr.times_s[k]
        total += (sc.offered_bps(tr.times_s[k] - dt / 2) - tr.throughput_bps[k]) * dt
    return total


def recovery_from_s(sc: Scenario, tr: Trace) -> float:
    """When the first congested phase ends (inf if none does before the run's end)."""
    ends = [b for a, b, _ in phase_rows(sc, tr) if congested(sc, a, b) and b < sc.duration_s]
    return min(ends, default=math.inf)


def quiet_until_s(sc: Scenario, tr: Trace) -> float:
    """When the first congested phase begins (the run's end if none does): before it, the
    network has never been congested, so its queue is the traffic's and the emulation's
    alone; after a congested phase it also holds QCN's recovery (the sources' backlogs
    draining), which ``--no-qcn`` has no counterpart of."""
    starts = [a for a, b, _ in phase_rows(sc, tr) if congested(sc, a, b)]
    return min(starts, default=sc.duration_s)


def uncongested_queue(sc: Scenario, tr: Trace) -> dict[str, Any]:
    """The queue over the uncongested phases before any congestion (:func:`quiet_until_s`)
    that offer at most :data:`qcn.core.noise.QUIET_LOAD` of the capacity
    (:func:`qcn.core.noise.uncongested_queue`): where a queue above q_eq is the
    emulation's, not the traffic's or QCN's.  The flows workload has none: its flows leave
    at line rate, so they fill q_eq by themselves at any load (docs/fct.md)."""
    until = quiet_until_s(sc, tr)
    rows = [
        k
        for a, b, rs in phase_rows(sc, tr)
        if b <= until and sc.offered_bps(a) <= noise.QUIET_LOAD * sc.capacity_at((a + b) / 2)
        for k in rs
        if sc.workload.declared.kind is not Kind.FLOWS
    ]
    return noise.uncongested_queue(sc, tr.queue_pkts, rows) | {"until_s": until}


def pstdev(xs: list[int] | list[float]) -> float:
    """Population standard deviation (0 for one value)."""
    mean = sum(xs) / len(xs)
    return math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))


def fairness_window_s(sc: Scenario) -> tuple[float, float]:
    """Where sources contend: the last quarter of the congestion episode if the scenario
    has one (after it no one is held back), else of the run."""
    start, end = sc.congested_episode_s() or (0.0, sc.duration_s)
    return end - SETTLED_FRACTION * (end - start), end


def jain(xs: list[float]) -> float:
    total = sum(xs)
    squares = sum(x * x for x in xs)
    return total * total / (len(xs) * squares) if squares else 1.0


def recovery_ms(sc: Scenario, tr: Trace) -> float | None:
    restore = sc.restore_at_s
    if restore is None:
        return None
    target = RECOVERY_FRACTION * min(
        sc.capacity_at(restore), len(sc.sources) * sc.workload.max_rate_bps
    )
    for t, bps in zip(tr.times_s, tr.throughput_bps, strict=True):
        # A sample at t covers the window (t - dt, t]; the first full window after restore.
        if t > restore and bps >= target:
            return 1e3 * (t - restore)
    return math.inf


SOURCE_CSV_COLUMNS = (
    "time_s",
    "source",
    "sender",
    "receiver",
    "current_rate_bps",
    "target_rate_bps",
    "throughput_bps",
)
"""sources.csv's columns; a network run's adds ``delivered_bps``."""


def write_csvs(out: Path, sc: Scenario, tr: Trace) -> None:
    """queue.csv, sources.csv, (flows workload) flows.csv and (a network run) ports.csv:
    what was measured, as it stands (an interrupted run writes these alone, beside its
    PARTIAL marker).  sources.csv and flows.csv name each source's or flow's sender and
    receiver hosts; a network run's sources.csv also has each source's delivered
    throughput, and a network of several switches' flows.csv each flow's hops."""
    out.mkdir(parents=True, exist_ok=True)
    network = network_run(tr) and len(tr.source_delivered_bps) == len(tr.times_s)
    with (out / "queue.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_s", "queue_pkts", "throughput_bps", "capacity_bps"])
        for row in zip(tr.times_s, tr.queue_pkts, tr.throughput_bps, tr.capacity_bps, strict=True):
            w.writerow([f"{row[0]:.6f}", row[1], f"{row[2]:.0f}", f"{row[3]:.0f}"])
    with (out / "sources.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*SOURCE_CSV_COLUMNS, *(["delivered_bps"] if network else [])])
        delivered = tr.source_delivered_bps if network else [[]] * len(tr.times_s)
        for t, crs, trs, tps, dls in zip(
            tr.times_s,
            tr.source_current_rate_bps,
            tr.source_target_rate_bps,
            tr.source_throughput_bps,
            delivered,
            strict=True,
        ):
            for i, (src, cr, target, tp) in enumerate(zip(sc.sources, crs, trs, tps, strict=True)):
                cells = [f"{t:.6f}", i, src.host, src.receiver, f"{cr:.0f}", f"{target:.0f}"]
                w.writerow([*cells, f"{tp:.0f}", *([f"{dls[i]:.0f}"] if network else [])])
    if sc.workload.declared.kind is Kind.FLOWS:
        write_flows_csv(out / "flows.csv", tr.flows, sc.sources, hops=multi_switch(sc))
    if network_run(tr):
        write_ports_csv(out / "ports.csv", tr)


PORT_CSV_COLUMNS = ("time_s", "port", "queue_pkts", "throughput_bps", "drops", "cnms")
"""ports.csv's columns."""


def write_ports_csv(path: Path, tr: Trace) -> None:
    """ports.csv: per sample and followed port (the bottleneck and every CP port), its
    queue, throughput, and drops and CNMs so far."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(PORT_CSV_COLUMNS)
        for name, queue in tr.port_queue_pkts.items():
            # (A backend that counts a port's drops and CNMs only at the end leaves them
            # blank here: summary.json's ports have the totals.)
            rate = tr.port_throughput_bps.get(name) or [math.nan] * len(queue)
            blank: list[int | str] = [""] * len(queue)
            drops: list[int | str] = [*tr.port_drops_so_far.get(name, [])] or blank
            cnms: list[int | str] = [*tr.port_cnms_so_far.get(name, [])] or blank
            for row in zip(tr.times_s, queue, rate, drops, cnms, strict=True):
                w.writerow([f"{row[0]:.6f}", name, row[1], f"{row[2]:.0f}", row[3], row[4]])


def write(
    out: Path, sc: Scenario, tr: Trace, summary: dict[str, Any], *, plots: bool = True
) -> list[Path]:
    """Write CSVs, summary.json and (unless ``plots`` is false) plots into ``out``; return
    the plot paths."""
    write_csvs(out, sc, tr)
    (out / "summary.json").write_text(json.dumps(json_safe(summary), indent=2) + "\n")
    if not plots:
        return []
    figures = plot(out, sc, tr)
    if "flows" in summary:
        figures.append(plot_slowdown(out / "slowdown.png", *slowdown_curves(sc, summary)))
    return figures


def slowdown_curves(sc: Scenario, summary: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """slowdown.png's title and its one curve (the run's flows, named QCN or no QCN)."""
    label = "QCN" if summary["qcn"] else "no QCN"
    return plot_title(sc, "slowdown by flow size"), {label: summary["flows"]}


def plot_title(sc: Scenario, what: str) -> str:
    """A plot's title: the scenario, what the plot shows, and the network the run used
    (Scenario.network_title: a scenario's own title names the network it was written
    for, which ``--set network.topology`` replaces)."""
    return f"{sc.name}: {what}, on {sc.network_title}"


def json_safe(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by null: JSON has no such numbers, and
    a figure with no value (no congestion episode, no recovery) is null, not invalid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


QUEUE_PANELS_MAX = 8
"""queue.png draws up to this many ports as small multiples (a panel each); more, as one
line each on one panel."""


LEGEND_ROWS = 24
"""A legend of more lines than this takes another column."""
RATES_LEGEND_LINES_MAX = 13
"""rates.png's panels name their lines (sources, capacities) up to this many."""
LEGEND_LINES_MAX = 4 * LEGEND_ROWS
"""Past this many lines a legend names only the headline port: a thousand ports' legend
is unreadable, and took matplotlib 15 s to lay out (ports.csv lists them all)."""


def line_label(port: str, head: Headline, lines: int) -> str | None:
    """A port's line's legend label: the headline port's always, the others' while the
    legend stays readable (None: no entry)."""
    if port == head.port:
        return f"{port} (headline)"
    return port if lines <= LEGEND_LINES_MAX else None


def queue_plot_ports(sc: Scenario, tr: Trace, head: Headline) -> list[str]:
    """The ports queue.png draws, in the topology's order: every CP port the run followed
    whose queue was ever above zero, and the headline port whatever its queue."""
    cps = {str(r) for r in sc.topology.cp_ports}
    return [
        str(r)
        for r in sc.topology.port_refs()
        if str(r) == head.port or (str(r) in cps and max(tr.port_queue_pkts.get(str(r)) or [0]))
    ]


def port_queue(tr: Trace, port: str, head: Headline) -> list[int]:
    """A drawn port's queue series (the headline port's may be the trace's own)."""
    return tr.port_queue_pkts.get(port) or (tr.queue_pkts if port == head.port else [])


def step_xy(steps: list[tuple[float, float]], end_s: float) -> tuple[list[float], list[float]]:
    """A step series (from time, value) as x, y to draw with ``where="post"`` up to
    ``end_s``."""
    xs = [t for t, _ in steps] + [end_s]
    ys = [v for _, v in steps] + [steps[-1][1]]
    return xs, ys


def rate_unit(values_bps: list[float]) -> tuple[float, str]:
    """(divisor, name) that shows these rates in Gb/s, or Mb/s if all are below 1 Gb/s."""
    top = max((v for v in values_bps if math.isfinite(v)), default=0.0)
    return (1e9, "Gb/s") if top >= 1e9 else (1e6, "Mb/s")


def plot(out: Path, sc: Scenario, tr: Trace) -> list[Path]:
    """rates.png, queue.png and (a network run) ports.png: see docs/experiments.md."""
    plt = pyplot()
    return [save(plt, fig, out / name) for name, fig in figures(plt, sc, tr).items()]


def figures(
    plt: Any, sc: Scenario, tr: Trace, summary: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The plots a run writes, as figures by file name, made with ``plt`` (pyplot, or what
    makes figures as its ``subplots`` does): rates.png, queue.png, (a network run)
    ports.png, and (``summary`` given, of the flows workload) slowdown.png."""
    head = headline(sc, tr)
    out = {
        "rates.png": rates_figure(plt, sc, tr, head),
        "queue.png": queue_figure(plt, sc, tr, head),
    }
    if network_run(tr):
        out["ports.png"] = ports_figure(plt, sc, tr, head)
    if summary is not None and "flows" in summary:
        out["slowdown.png"] = slowdown_figure(plt, *slowdown_curves(sc, summary))
    return out


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files (imported only by runs that plot)."""
    import matplotlib  # noqa: PLC0415 - only runs that write results need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def outside_legend(ax: Any, **kw: Any) -> None:
    """A legend beside the axes, on the right, where it hides nothing drawn."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def save(plt: Any, fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=120, bbox_inches="tight")  # (the legends outside the axes kept)
    plt.close(fig)
    return path


def crossed_ports(sc: Scenario) -> list[set[str]]:
    """Per source, the switch egress ports its traffic leaves through: its stream's path,
    or its flows' destinations' paths (each destination's own route)."""
    topo = sc.topology
    if sc.workload.declared.kind is not Kind.FLOWS:
        return [{str(r) for r in sc.stream_refs(i)} for i in range(len(sc.sources))]
    return [
        {str(r) for d in src.destinations for r in topo.path(src.host, d)} for src in sc.sources
    ]


@dataclass(frozen=True)
class RatePanel:
    """One panel of rates.png: the sources drawn and the ports whose capacity is."""

    title: str
    sources: list[int]
    ports: list[str]


def rate_panels(sc: Scenario, tr: Trace, head: Headline) -> tuple[list[RatePanel], bool]:
    """rates.png's panels, and whether their rate axis is logarithmic: a panel for each
    port queue.png draws (:func:`queue_plot_ports`), with the sources whose traffic
    crosses it, then one of the sources that cross none of them; past
    :data:`QUEUE_PANELS_MAX` ports, one panel of every source and every such port's
    capacity, on a log axis (a 0.5 Mb/s port's capacity was drawn at 0 on a Gb/s axis)."""
    ports = queue_plot_ports(sc, tr, head)
    everyone = list(range(len(sc.sources)))
    if len(ports) > QUEUE_PANELS_MAX:
        every = RatePanel(f"every source; the {len(ports)} ports queue.png draws", everyone, ports)
        return [every], True
    crossing = crossed_ports(sc)
    panels = [
        RatePanel(
            f"through {port}" + (" (headline)" if port == head.port else ""),
            [i for i in everyone if port in crossing[i]],
            [port],
        )
        for port in ports
    ]
    rest = [i for i in everyone if not crossing[i] & set(ports)]
    if rest:
        panels.append(RatePanel("through none of these ports", rest, []))
    return panels, False


def capacity_lines(sc: Scenario, tr: Trace, ports: list[str]) -> list[tuple[str, list[float]]]:
    """The capacity lines of ``ports``: one per distinct series (ports of one rate share
    a line), each labelled with its ports and, where it is one rate, that rate."""
    by_series: dict[tuple[float, ...], list[str]] = {}
    for port in ports:
        by_series.setdefault(tuple(port_capacity_bps(sc, tr, port)), []).append(port)
    out = []
    for series, named in by_series.items():
        who = ", ".join(named) if len(named) <= 3 else f"{len(named)} ports ({named[0]}, ...)"
        rate = f": {rate_text(series[0])}" if len(set(series)) == 1 else ""
        out.append((f"capacity of {who}{rate}", list(series)))
    return out


CAPACITY_LOG_RATIO = 50.0
"""A panel of rates.png whose capacity is below its highest rate over this is drawn on a log
axis: on a linear one it would lie within 2 % of zero (a 0.5 Mb/s port's among 10 Gb/s
sources lay on it)."""


def low_capacity(capacities: list[tuple[str, list[float]]], drawn: list[float]) -> bool:
    """Whether a panel's lowest capacity is too low beside its highest rate to be seen on a
    linear axis (:data:`CAPACITY_LOG_RATIO`)."""
    lowest = min((c for _, series in capacities for c in series if c > 0), default=math.inf)
    top = max((v for v in drawn if math.isfinite(v)), default=0.0)
    return top > CAPACITY_LOG_RATIO * lowest


def rates_figure(plt: Any, sc: Scenario, tr: Trace, head: Headline) -> Any:
    """rates.png: every source's current rate, labelled with its sender and receiver, in
    the panel of each drawn port its traffic crosses, against that port's capacity
    (:func:`rate_panels`)."""
    panels, many = rate_panels(sc, tr, head)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, 4.5 if len(panels) == 1 else 1.2 + 2.2 * len(panels)),
        sharex=True, squeeze=False,
    )  # fmt: skip
    rates = tr.source_current_rate_bps
    for (ax,), panel in zip(axes, panels, strict=True):
        capacities = capacity_lines(sc, tr, panel.ports)
        drawn = [row[i] for row in rates for i in panel.sources]
        drawn += [c for _, series in capacities for c in series]
        div, unit = rate_unit(drawn)
        for i in panel.sources:
            ax.plot(
                tr.times_s, [row[i] / div for row in rates], lw=0.8, color=f"C{i % 10}",
                label=sc.sources[i].label,
            )  # fmt: skip
        for label, series in capacities:
            ax.plot(tr.times_s, [c / div for c in series], "k--", lw=1, label=label)
        if many or low_capacity(capacities, drawn):
            ax.set_yscale("log")
        ax.set(ylabel=f"rate ({unit})", title=panel.title)
        if len(panel.sources) + len(capacities) <= RATES_LEGEND_LINES_MAX:
            outside_legend(ax, fontsize=7)
    axes[-1][0].set_xlabel("time (s)")
    title = plot_title(sc, "source rates (CR) against each port's capacity")
    fig.suptitle(textwrap.fill(title, 100), fontsize=10)
    fig.tight_layout()
    return fig


def queue_figure(plt: Any, sc: Scenario, tr: Trace, head: Headline) -> Any:
    """queue.png: each drawn port's queue (:func:`queue_plot_ports`) against its q_eq (a
    step wherever a live change moved it) and the buffer; the headline port marked."""
    ports = queue_plot_ports(sc, tr, head)
    steps = q_eq_steps(sc, tr)
    end = sc.duration_s
    panels = len(ports) if len(ports) <= QUEUE_PANELS_MAX else 1
    fig, axes = plt.subplots(
        panels, 1, figsize=(9, 4.5 if panels == 1 else 1.2 + 1.6 * panels),
        sharex=True, sharey=True, squeeze=False,
    )  # fmt: skip
    named = ", ".join(ports) if len(ports) <= QUEUE_PANELS_MAX else f"{len(ports)} ports"
    title = plot_title(sc, f"queue at {named}; the headline port is {head.port}: {head.reason}")
    for k, port in enumerate(ports):
        ax = axes[min(k, panels - 1)][0]
        mark = line_label(port, head, len(ports))
        # The headline port stands out: thicker, and black among many lines on one panel.
        style = {"lw": 1.2, "color": "k" if panels < len(ports) else None}
        style = style if port == head.port else {"lw": 0.8}
        line = ax.plot(tr.times_s, port_queue(tr, port, head), label=mark, **style)[0]
        if port in steps and (panels > 1 or len(set(map(tuple, steps.values()))) > 1):
            xs, ys = step_xy(steps[port], end)
            color = "r" if panels > 1 else line.get_color()
            label = f"q_eq {port}" if mark is not None else None
            ax.step(xs, ys, where="post", color=color, ls="--", lw=1, label=label)
    if panels == 1 and steps and len(set(map(tuple, steps.values()))) == 1:
        xs, ys = step_xy(next(iter(steps.values())), end)
        axes[0][0].step(xs, ys, where="post", color="r", ls="--", lw=1, label="q_eq")
    for (ax,) in axes:
        ax.axhline(sc.network.buffer_pkts, color="k", ls=":", lw=1, label="buffer")
        ax.set_ylabel("queue (pkts)")
        outside_legend(ax, fontsize=7, ncol=1 + min(len(ports), LEGEND_LINES_MAX) // LEGEND_ROWS)
    axes[-1][0].set_xlabel("time (s)")
    fig.suptitle(textwrap.fill(title, 100), fontsize=10)
    fig.tight_layout()
    return fig


def ports_figure(plt: Any, sc: Scenario, tr: Trace, head: Headline) -> Any:
    """ports.png (ports.csv drawn): every followed port's queue and throughput, a line
    each, the headline port's the thicker."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    rates = [v for series in tr.port_throughput_bps.values() for v in series]
    div, unit = rate_unit(rates)
    lines = len(tr.port_queue_pkts)
    for k, (port, queue) in enumerate(tr.port_queue_pkts.items()):
        label = line_label(port, head, lines)
        style = {"lw": 1.4 if port == head.port else 0.7, "color": f"C{k % 10}", "label": label}
        top.plot(tr.times_s, queue, **style)
        rate = tr.port_throughput_bps.get(port)
        if rate:
            bottom.plot(tr.times_s, [v / div for v in rate], **style)
    top.set(ylabel="queue (pkts)", title=plot_title(sc, "every followed port (ports.csv)"))
    bottom.set(xlabel="time (s)", ylabel=f"throughput ({unit})")
    if not rates:
        bottom.text(0.5, 0.5, "the ports' throughput was not measured", ha="center",
                    va="center", transform=bottom.transAxes)  # fmt: skip
    outside_legend(top, fontsize=7, ncol=1 + min(lines, LEGEND_LINES_MAX) // LEGEND_ROWS)
    fig.tight_layout()
    return fig
