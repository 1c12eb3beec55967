"""`qcn schemes`: seed 001's four ways of managing congestion, on Mininet/BMv2.

    qcn schemes [tcp-multihop] [--runs 1] [--episodes 500ms,periodic] [--out DIR]

Seed 001 runs TCP only, TCP + QCN, TCP + QCN + PAUSE and QCN + PAUSE (UDP sources behind
the reaction points) through a multihop hot spot, for one 500 ms congestion episode and
for a periodic one (here 100 ms on, 100 ms off, from 50 ms on: docs/seeds.md).  Each
(episode, scheme) is a `qcn run` of the scenario with the scheme's overrides, as scaled for
BMv2; the tables give the innocent and hot-spot throughput per scheme beside the ideal, in
the seed's units (BMv2's rates divided by the scenario's rate scale), and the PAUSEs sent.

Results: ``OUT/EPISODE/SCHEME[-K]/`` as `qcn run` writes them, ``OUT/schemes.json``,
``OUT/schemes.md`` (the tables) and ``OUT/queue-EPISODE.png`` (the hot-spot queue over
time, one panel per scheme).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core.errors import QcnError
from qcn.core.patterns import Kind
from qcn.core.results import json_safe
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from qcn.lab import backends
from qcn.lab.inputs import (
    check_count,
    make_results_dir,
    require_mininet,
)


class SchemesError(QcnError):
    """A scheme comparison that cannot run (no Mininet backend, a bad option)."""


@dataclass(frozen=True)
class Scheme:
    name: str
    qcn: bool
    overrides: dict[str, Any]


SCHEMES = (
    Scheme("tcp", qcn=False, overrides={}),
    Scheme("tcp+qcn", qcn=True, overrides={}),
    Scheme("tcp+qcn+pause", qcn=True, overrides={"network.pause": True}),
    Scheme("qcn+pause", qcn=True, overrides={"network.pause": True, "workload.pattern": "udp"}),
)
EPISODES: dict[str, dict[str, Any]] = {
    "500ms": {},
    # Seed 001's "periodic 100 ms" congestion: 100 ms on, 100 ms off (a choice, docs/seeds.md),
    # the last episode ending 50 ms before the run does, so that its frames are delivered.
    "periodic": {
        "workload.hotspot_start_s": 0.05,
        "workload.hotspot_duration_s": 0.1,
        "workload.hotspot_period_s": 0.2,
    },
}
FIGURES = (
    "innocent_throughput_bps",
    "innocent_ideal_bps",
    "hotspot_throughput_bps",
    "hotspot_ideal_bps",
    "drops",
    "switch_drops",
    "queue_mean_episode_pkts",
    "pause_frames_sent",
    "frames_unplaced",
)


def run_schemes(
    sc: Scenario,
    *,
    runs: int,
    episodes: list[str],
    out: Path,
    keep: list[str],
    say: Callable[[str], None] = print,
    overrides: dict[str, Any] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """Every (episode, scheme) ``runs`` times; the mean of each figure, by episode and
    scheme.  Writes the results, the tables and the queue plots into ``out``
    (``overrides``: the command line's, kept in each run's provenance with the scheme's)."""
    if sc.workload.declared.kind is not Kind.PROGRAM:
        raise SchemesError(
            f"{sc.name}: the schemes are seed 001's, with real TCP or UDP (workload.pattern "
            "tcp or udp, as tcp-multihop)"
        )
    check_count("--runs", runs, SchemesError)
    unknown = [e for e in episodes if e not in EPISODES]
    if unknown:
        raise SchemesError(f"unknown episode {unknown[0]!r} (known: {', '.join(EPISODES)})")
    require_mininet("qcn schemes", SchemesError)
    make_results_dir(out, "schemes", SchemesError)
    table: dict[str, dict[str, dict[str, float]]] = {}
    total, done = len(episodes) * len(SCHEMES) * runs, 0
    for episode in episodes:
        table[episode] = {}
        traces: dict[str, Trace] = {}
        for scheme in SCHEMES:
            mine = {**EPISODES[episode], **scheme.overrides}
            scaled = sc.with_overrides(mine).scaled_for_bmv2(keep=[*keep, *mine])
            figures: list[dict[str, float]] = []
            for k in range(1, runs + 1):
                done += 1
                say(f"qcn schemes: [{done}/{total}] {episode}, {scheme.name}, run {k}/{runs}")
                d = out / episode / (scheme.name + (f"-{k}" if runs > 1 else ""))
                options = backends.RunOptions(qcn=scheme.qcn, seed=k, say=lambda _m: None)
                trace, summary = backends.run_and_record(
                    scaled, backends.MININET, d, options, overrides={**(overrides or {}), **mine}
                )
                figures.append({f: float(summary.get(f) or 0.0) for f in FIGURES})
                traces.setdefault(scheme.name, trace)
            table[episode][scheme.name] = {
                f: statistics.fmean(r[f] for r in figures) for f in FIGURES
            }
        plot_queues(out / f"queue-{episode}.png", episode, traces)
    rate_scale = sc.bmv2.rate_scale
    (out / "schemes.json").write_text(
        json.dumps(
            json_safe(
                {"scenario": sc.name, "runs": runs, "rate_scale": rate_scale, "table": table}
            ),
            indent=2,
        )
        + "\n"
    )
    (out / "schemes.md").write_text(format_tables(table, rate_scale, runs))
    return table


def format_tables(
    table: dict[str, dict[str, dict[str, float]]], rate_scale: float, runs: int
) -> str:
    """Seed 001's two tables per episode: innocent and hot-spot throughput per scheme
    beside the ideal, in the seed's Gb/s (BMv2's rates / the rate scale)."""

    def gbps(bps: float) -> str:
        return f"{bps / rate_scale / 1e9:.2f}"

    lines = []
    for episode, rows in table.items():
        lines += [
            f"### {episode} congestion ({runs} run{'s' if runs > 1 else ''} each)",
            "",
            "| scheme | innocent (Gb/s) | ideal | hot spot (Gb/s) | ideal | switches' drops "
            "| frames not placed | PAUSEs |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, r in rows.items():
            lines.append(
                f"| {name} | {gbps(r['innocent_throughput_bps'])} | "
                f"{gbps(r['innocent_ideal_bps'])} | {gbps(r['hotspot_throughput_bps'])} | "
                f"{gbps(r['hotspot_ideal_bps'])} | {r['switch_drops']:.0f} | "
                f"{r['frames_unplaced']:.0f} | {r['pause_frames_sent']:.0f} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot_queues(path: Path, episode: str, traces: dict[str, Trace]) -> None:
    """The hot-spot queue over time, one panel per scheme."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 2.2 * len(traces)), sharex=True)
    for ax, (name, tr) in zip(axes, traces.items(), strict=True):
        ax.plot(tr.times_s, tr.queue_pkts, lw=0.8)
        ax.set_ylabel("queue (pkts)")
        ax.set_title(name, fontsize=9, loc="left")
    axes[-1].set_xlabel("time (s, as run on BMv2: the scenario's times x its time scale)")
    fig.suptitle(f"seed 001, {episode} congestion: the hot-spot queue per scheme")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
