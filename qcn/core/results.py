"""A run's results: CSV time series, ``summary.json`` and the seeds' two kinds of plot.

Recovery time follows docs/qcn.md: from the moment the bottleneck's capacity is
restored until its throughput, in 1 ms windows, is back to 90 % of
min(capacity, the sum of the sources' maximum rates).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from pathlib import Path
from typing import Any

from qcn.core import noise
from qcn.core.fairness import max_min_fair
from qcn.core.flows import SHORT_FLOW_BYTES, plot_slowdown, summarize_flows, write_flows_csv
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace

#: The headline figures of a run (summary.json has these and more), as `qcn run` prints them.
SUMMARY_KEYS = (
    "queue_mean_pkts",
    "queue_max_pkts",
    "drops",
    "jain_fairness",
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


def summarize(sc: Scenario, tr: Trace, *, qcn: bool, backend: str, seed: int) -> dict[str, Any]:
    times = tr.times_s
    warm = next((i for i, t in enumerate(times) if t >= WARMUP_FRACTION * sc.duration_s), 0)
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
    per_source = [
        sum(tr.source_throughput_bps[k][i] for k in episode) for i in range(len(sc.sources))
    ]
    episode_capacity = sum(tr.capacity_bps[k] for k in episode)
    phases = phase_figures(sc, tr)
    quiet_queue = uncongested_queue(sc, tr)
    return {
        "scenario": sc.name,
        "seed_presentation": sc.seed,
        "backend": backend,
        "qcn": qcn,
        "random_seed": seed,
        "duration_s": sc.duration_s,
        "queue_mean_pkts": sum(queue) / len(queue),
        "queue_max_pkts": max(tr.queue_pkts or [0]),
        # Queue stability: how far the queue swings (after the warm-up; over the episode).
        "queue_std_pkts": pstdev(queue),
        "q_eq_pkts": sc.params.cp.q_eq_pkts,
        "drops": tr.drops,
        "queue_mean_settled_pkts": sum(settled) / len(settled),
        "queue_max_settled_pkts": max(settled),
        # Oscillation once settled: the swing, and how often the queue ran dry (seed 004's
        # "unstable" ECM: the queue swinging between empty and full).
        "queue_std_settled_pkts": pstdev(settled),
        "queue_empty_settled": sum(q == 0 for q in settled) / len(settled),
        "drops_settled": tr.drops - drops_before_tail,
        "cnms": tr.cnms,
        "jain_fairness": jain(per_source),
        "fairness_window_s": [fair_from, fair_to],
        # Over the same window: what the seeds claim of a hot spot (queue near q_eq,
        # throughput at the service rate).
        "queue_mean_episode_pkts": (
            sum(tr.queue_pkts[k] for k in episode) / len(episode) if episode else math.nan
        ),
        "queue_max_episode_pkts": max((tr.queue_pkts[k] for k in episode), default=math.nan),
        "queue_std_episode_pkts": (
            pstdev([tr.queue_pkts[k] for k in episode]) if episode else math.nan
        ),
        "utilization_episode": (
            sum(tr.throughput_bps[k] for k in episode) / episode_capacity
            if episode_capacity
            else math.nan
        ),
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
        **(flow_figures(flow_summary(sc, tr)) if sc.workload.pattern == "flows" else {}),
        **(network_figures(sc, tr, warm, episode) if network_run(tr) else {}),
        **tr.extra,
    }


def network_run(tr: Trace) -> bool:
    """Whether the run followed several ports (a network with more than one CP port):
    then it has ports.csv and the network's figures (:func:`network_figures`)."""
    return len(tr.port_queue_pkts) > 1


def multi_switch(sc: Scenario) -> bool:
    """A network of several switches: its flows' paths differ in length."""
    return len(sc.topology.switches) > 1


def network_figures(sc: Scenario, tr: Trace, warm: int, episode: list[int]) -> dict[str, Any]:
    """A network run's figures: per port (:func:`port_figures`) and, for streams, how the
    sources fared against their max-min fair shares (:func:`share_figures`)."""
    out: dict[str, Any] = {"ports": port_figures(tr, warm)}
    if sc.workload.pattern != "flows":
        out |= share_figures(sc, tr, episode)
    return out


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


def share_figures(sc: Scenario, tr: Trace, episode: list[int]) -> dict[str, Any]:
    """Each source's delivered throughput over the fairness window, its max-min fair share
    there (:func:`fair_shares_bps`), Jain's index over delivered / fair share, and where
    source 0 is the long flow (the parking lot's), its delivered / fair share: below 1,
    it is beaten down."""
    if not episode or not tr.source_delivered_bps:
        return {}
    n = len(sc.sources)
    delivered = [
        sum(tr.source_delivered_bps[k][i] for k in episode) / len(episode) for i in range(n)
    ]
    fair_from, fair_to = fairness_window_s(sc)
    fair = fair_shares_bps(sc, sc.capacity_at((fair_from + fair_to) / 2))
    ratios = [d / f if f else math.nan for d, f in zip(delivered, fair, strict=True)]
    out: dict[str, Any] = {
        "delivered_bps": delivered,
        "fair_share_bps": fair,
        "jain_fair_share": jain(ratios),
    }
    if long_flow(sc):
        out["long_flow_fair_ratio"] = ratios[0]
    return out


def fair_shares_bps(sc: Scenario, bottleneck_bps: float) -> list[float]:
    """The sources' max-min fair rates (qcn.core.fairness.max_min_fair): each source's
    stream crosses its host link and every egress port on its path, each at its link's
    rate (the bottleneck port at ``bottleneck_bps``), and wants its offered rate."""
    topo, bottleneck = sc.topology, sc.bottleneck_port
    capacity: dict[Any, float] = {}
    paths: list[list[Any]] = []
    for src in sc.sources:
        uplink = ("host link", src.host)
        capacity[uplink] = topo.access_link(src.host).rate_bps
        path: list[Any] = [uplink]
        for ref in topo.path(src.host, src.destinations[0]):
            capacity[ref] = bottleneck_bps if ref == bottleneck else topo.link_at(ref).rate_bps
            path.append(ref)
        paths.append(path)
    return max_min_fair(paths, capacity, [sc.workload.max_rate_bps] * len(paths))


def long_flow(sc: Scenario) -> bool:
    """Source 0 crosses more congestion points than any other source: the parking lot's
    long flow."""
    cps = set(sc.topology.cp_ports)

    def crossed(i: int) -> int:
        src = sc.sources[i]
        return sum(ref in cps for ref in sc.topology.path(src.host, src.destinations[0]))

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
    if sc.workload.pattern == "tcp":
        return []
    end = sc.duration_s
    if sc.workload.pattern == "flows":
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
                "congested": congested(sc, a, b),
                "queue_mean_pkts": queue["mean_pkts"],
                "queue_above_q_eq": queue["above_q_eq"],
                "queue_max_pkts": queue["max_pkts"],
            }
        )
    return out


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
        if sc.workload.pattern != "flows"
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


def write_csvs(out: Path, sc: Scenario, tr: Trace) -> None:
    """queue.csv, sources.csv, (flows workload) flows.csv and (a network run) ports.csv:
    what was measured, as it stands (an interrupted run writes these alone, beside its
    PARTIAL marker).  A network run's sources.csv also has each source's delivered
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
        w.writerow(
            ["time_s", "source", "current_rate_bps", "target_rate_bps", "throughput_bps"]
            + (["delivered_bps"] if network else [])
        )
        delivered = tr.source_delivered_bps if network else [[]] * len(tr.times_s)
        for t, crs, trs, tps, dls in zip(
            tr.times_s,
            tr.source_current_rate_bps,
            tr.source_target_rate_bps,
            tr.source_throughput_bps,
            delivered,
            strict=True,
        ):
            for i, (cr, target, tp) in enumerate(zip(crs, trs, tps, strict=True)):
                cells = [f"{t:.6f}", i, f"{cr:.0f}", f"{target:.0f}", f"{tp:.0f}"]
                w.writerow(cells + ([f"{dls[i]:.0f}"] if network else []))
    if sc.workload.pattern == "flows":
        write_flows_csv(out / "flows.csv", tr.flows, hops=multi_switch(sc))
    if network_run(tr):
        write_ports_csv(out / "ports.csv", tr)


def write_ports_csv(path: Path, tr: Trace) -> None:
    """ports.csv: per sample and followed port (the bottleneck and every CP port), its
    queue, throughput, and drops and CNMs so far."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_s", "port", "queue_pkts", "throughput_bps", "drops", "cnms"])
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
        figures.append(
            plot_slowdown(
                out / "slowdown.png",
                f"{sc.name}: slowdown by flow size, on {sc.network_title}",
                {"QCN" if summary["qcn"] else "no QCN": summary["flows"]["bins"]},
            )
        )
    return figures


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


def plot(out: Path, sc: Scenario, tr: Trace) -> list[Path]:
    import matplotlib  # noqa: PLC0415 - only runs that write results need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rates = out / "rates.png"
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i in range(len(sc.sources)):
        ax.plot(
            tr.times_s,
            [row[i] / 1e9 for row in tr.source_current_rate_bps],
            lw=0.8,
            label=f"RP {i}",
        )
    ax.plot(tr.times_s, [c / 1e9 for c in tr.capacity_bps], "k--", lw=1, label="capacity")
    ax.set(xlabel="time (s)", ylabel="rate (Gb/s)", title=f"{sc.title}: source rates (CR)")
    if len(sc.sources) <= 12:
        ax.legend(fontsize=7, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(rates, dpi=120)
    plt.close(fig)

    queue = out / "queue.png"
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(tr.times_s, tr.queue_pkts, lw=0.8, label="bottleneck queue")
    ax.axhline(sc.params.cp.q_eq_pkts, color="r", ls="--", lw=1, label="q_eq")
    ax.axhline(sc.network.buffer_pkts, color="k", ls=":", lw=1, label="buffer")
    ax.set(xlabel="time (s)", ylabel="queue (packets)", title=f"{sc.title}: queue")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(queue, dpi=120)
    plt.close(fig)
    return [rates, queue]
