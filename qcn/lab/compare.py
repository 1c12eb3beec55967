"""`qcn compare`: a scenario on Mininet/BMv2 and on the simulator, side by side.

    qcn compare transient [--runs 3] [--duration S] [--set KEY=VALUE] [--out DIR] [--live]

Both run the scenario as scaled for BMv2 (its ``[bmv2]`` section) with the same CP: the
arrival CP by default, the same model on both; with ``depth_at`` enqueue or dequeue the
simulator models BMv2's departure CP (``--scaled``).  Each backend runs ``--runs``
times (the simulator with seeds 1..N, BMv2 as it comes); the table gives each figure's mean
and range on both, their ratio, and whether it meets its fidelity target:

- queue mean over the congestion episode and recovery: within 25 % of the simulator's;
- onset drops (all but the settled last quarter's): within 2x;
- Jain's index over what the sources sent, over the episode's last quarter (``jain_sent``;
  on BMv2 what its sinks counted of them): within 0.1;
- the maximum queue over the episode: within 2x.

With the flows workload (the ``fct`` scenario) the figures are the flows' instead, each
run drawing the same flows on both backends (seed k): p50 slowdown of short and of long
flows within 1.5x of the simulator's, their p99 within 2x (a tail of timeouts), drops and
unfinished flows shown.

Streams over a network of several CPs (the ``parking-lot`` scenario): the CP ports' mean
queue within 25 %, Jain over the sources' delivered / max-min fair rates within 0.1, the
long flow's delivered / fair rate (the beat-down) within 0.15; drops and CNMs shown.

Results: ``OUT/sim-K/`` and ``OUT/mininet-K/`` (each backend's declared name: :func:`run_folder`)
as `qcn run` writes them, ``OUT/compare.json``.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core import capacity
from qcn.core.backend import Backend
from qcn.core.errors import QcnError
from qcn.core.live import LiveFeed
from qcn.core.noise import verdict_line
from qcn.core.patterns import Kind
from qcn.core.results import json_safe
from qcn.core.scenario import Scenario
from qcn.lab import backends
from qcn.lab.inputs import (
    check_count,
    make_results_dir,
    require_mininet,
)

MODEL = backends.SIMULATOR
"""The reference compare holds BMv2 to: the first of each row (``rows[MODEL.name]``)."""
EMULATION = backends.MININET
"""What it holds to the model: the second (``rows[EMULATION.name]``)."""


def run_folder(out: Path, backend: Backend, k: int) -> Path:
    """Run ``k``'s results on ``backend`` in a comparison's ``out``, named by the backend's
    declared name (``tune``'s verification reads them back by the same)."""
    return out / f"{backend.name}-{k}"


class CompareError(QcnError):
    """A comparison that cannot run (no Mininet backend here, a bad --runs)."""


@dataclass(frozen=True)
class Figure:
    """One compared figure and its fidelity target."""

    key: str
    label: str
    kind: str
    """"ratio": BMv2 / simulator within [lo, hi]; "diff": |BMv2 - simulator| <= hi."""
    lo: float
    hi: float


FIGURES = (
    Figure("queue_mean_episode_pkts", "queue mean, episode (pkts)", "ratio", 0.75, 1.25),
    Figure("queue_max_episode_pkts", "queue max, episode (pkts)", "ratio", 0.5, 2.0),
    Figure("onset_drops", "onset drops", "ratio", 0.5, 2.0),
    Figure("drops_settled", "settled drops", "info", 0.0, 0.0),
    Figure("jain_sent", "Jain over sent rates", "diff", 0.0, 0.1),
    Figure("utilization_episode", "utilization, episode", "info", 0.0, 0.0),
    Figure("recovery_ms", "recovery (ms, BMv2 time)", "ratio", 0.75, 1.25),
    Figure("delivered_offered_uncongested", "delivered/offered, uncongested", "info", 0, 0),
)


FLOW_FIGURES = (
    Figure("slowdown_short_p50", "short flows' slowdown, p50", "ratio", 1 / 1.5, 1.5),
    Figure("slowdown_short_p99", "short flows' slowdown, p99", "ratio", 0.5, 2.0),
    Figure("slowdown_long_p50", "long flows' slowdown, p50", "ratio", 1 / 1.5, 1.5),
    Figure("slowdown_long_p99", "long flows' slowdown, p99", "ratio", 0.5, 2.0),
    Figure("drops", "drops", "info", 0.0, 0.0),
    Figure("flows_unfinished", "unfinished flows", "info", 0.0, 0.0),
)


NETWORK_FIGURES = (
    Figure("cp_queue_mean_pkts", "queue mean over the CP ports", "ratio", 0.75, 1.25),
    Figure("jain_fairness", "Jain over fair shares", "diff", 0.0, 0.1),
    Figure("long_flow_fair_ratio", "long flow / its fair share", "diff", 0.0, 0.15),
    Figure("drops", "drops", "info", 0.0, 0.0),
    Figure("cnms", "CNMs", "info", 0.0, 0.0),
)
"""Streams over a network of several CPs (the parking lot): the queues the CPs hold, how
fairly the sources share (each against its max-min fair rate), and the long flow's share
(the beat-down); drops and CNMs shown."""


def figures_for(sc: Scenario) -> tuple[Figure, ...]:
    """What is compared for ``sc``: the flows' figures for the flows workload; a stream
    network's over several CP ports; else the single bottleneck's."""
    if sc.workload.declared.kind is Kind.FLOWS:
        return FLOW_FIGURES
    if len(sc.topology.cp_ports) > 1:
        return NETWORK_FIGURES
    return FIGURES


def figures_of(summary: dict[str, Any], figures: tuple[Figure, ...] = FIGURES) -> dict[str, float]:
    """The compared figures of one run's summary (NaN where it has none)."""
    out = {}
    for f in figures:
        if f.key == "onset_drops":
            value = summary["drops"] - summary["drops_settled"]
        elif f.key == "cp_queue_mean_pkts":
            queues = [p["queue_mean_pkts"] for p in summary.get("ports", {}).values()
                      if "queue_mean_pkts" in p]  # fmt: skip
            value = statistics.fmean(queues) if queues else None
        else:
            value = summary.get(f.key)
        out[f.key] = float(value) if isinstance(value, int | float) else math.nan
    return out


def _stats(values: list[float]) -> tuple[float, float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    return statistics.fmean(finite), min(finite), max(finite)


def compare_rows(
    sim: list[dict[str, float]],
    bmv2: list[dict[str, float]],
    figures: tuple[Figure, ...] = FIGURES,
) -> list[dict[str, Any]]:
    """Per figure: both backends' mean and range, the ratio or difference, and the verdict
    (None where the figure has no target or a side has no value)."""
    rows = []
    for f in figures:
        s_mean, s_lo, s_hi = _stats([r[f.key] for r in sim])
        b_mean, b_lo, b_hi = _stats([r[f.key] for r in bmv2])
        ratio = b_mean / s_mean if s_mean else math.nan
        ok: bool | None = None
        if math.isfinite(s_mean) and math.isfinite(b_mean):
            if f.kind == "ratio" and s_mean:
                ok = f.lo <= ratio <= f.hi
            elif f.kind == "diff":
                ok = abs(b_mean - s_mean) <= f.hi
        rows.append(
            {
                "figure": f.key,
                "label": f.label,
                MODEL.name: [s_mean, s_lo, s_hi],
                EMULATION.name: [b_mean, b_lo, b_hi],
                "ratio": ratio,
                "target": _target(f),
                "ok": ok,
            }
        )
    return rows


def _target(f: Figure) -> str:
    if f.kind == "ratio" and math.isclose(f.lo * f.hi, 1.0):
        return f"within {f.hi:g}x"
    if f.kind == "ratio":
        return f"ratio in [{f.lo:g}, {f.hi:g}]"
    if f.kind == "diff":
        return f"within {f.hi:g}"
    return ""


def format_table(rows: list[dict[str, Any]], runs: int) -> str:
    def cell(mean: float, lo: float, hi: float) -> str:
        if not math.isfinite(mean):
            return "-"
        return f"{mean:.3g} ({lo:.3g}-{hi:.3g})" if runs > 1 else f"{mean:.3g}"

    lines = [
        f"{'figure':32} {'simulator':>22} {'BMv2':>22} {'BMv2/sim':>9}  target",
    ]
    for r in rows:
        verdict = {True: "ok", False: "MISSED", None: ""}[r["ok"]]
        ratio = f"{r['ratio']:.2f}" if math.isfinite(r["ratio"]) else "-"
        lines.append(
            f"{r['label']:32} {cell(*r[MODEL.name]):>22} {cell(*r[EMULATION.name]):>22} "
            f"{ratio:>9}  "
            f"{r['target']} {verdict}".rstrip()
        )
    return "\n".join(lines)


def run_compare(
    sc: Scenario,
    *,
    runs: int,
    out: Path,
    keep: list[str],
    say: Callable[[str], None] = print,
    overrides: dict[str, Any] | None = None,
    serve: Callable[[LiveFeed], AbstractContextManager[Any]] | None = None,
) -> list[dict[str, Any]]:
    """Run both backends ``runs`` times on the scaled scenario; write and return the rows
    (``overrides``: the command line's, kept in each run's provenance; ``serve``: a live
    view of each BMv2 run's feed while it runs, to measure what watching it costs; the
    front door serves it, :mod:`qcn.cli.live`)."""
    check_count("--runs", runs, CompareError)
    for backend in backends.BACKENDS.values():
        backends.require(sc, backend, CompareError, "qcn compare runs both backends: ")
    require_mininet("qcn compare", CompareError)
    cost = backends.bmv2_cost(say)
    sc, chosen = capacity.with_chosen_scale(sc, keep, cost)
    say(f"qcn compare: {sc.name}: {chosen}")
    say(f"qcn compare: {cost.describe()}")
    scaled = sc.scaled_for_bmv2(keep=keep)
    figures = figures_for(sc)
    make_results_dir(out, "compare", CompareError)
    sim, bmv2, verdicts = [], [], []
    for k in range(1, runs + 1):
        say(f"qcn compare: {sc.name}: simulator run {k}/{runs} (seed {k})")
        options = backends.RunOptions(seed=k, scaled_by=sc.bmv2.time_scale)
        _trace, summary = backends.run_and_record(
            scaled,
            MODEL,
            run_folder(out, MODEL, k),
            options,
            plots=False,
            overrides=overrides,
        )
        sim.append(figures_of(summary, figures))
    for k in range(1, runs + 1):
        say(f"qcn compare: {sc.name}: BMv2 run {k}/{runs} ({scaled.duration_s:g} s)")
        with _live_view(scaled, serve) as feed:
            options = backends.RunOptions(seed=k, say=lambda _m: None, live=feed)
            _trace, summary = backends.run_and_record(
                scaled, EMULATION, run_folder(out, EMULATION, k), options, overrides=overrides
            )
        if "noise" in summary:
            verdicts.append(verdict_line(summary["noise"]))
            say(f"qcn compare: BMv2 run {k}: {verdicts[-1]}")
        bmv2.append(figures_of(summary, figures))
    rows = compare_rows(sim, bmv2, figures)
    (out / "compare.json").write_text(
        json.dumps(
            json_safe({"scenario": sc.name, "runs": runs, "rows": rows, "bmv2_noise": verdicts}),
            indent=2,
        )
        + "\n"
    )
    return rows


@contextlib.contextmanager
def _live_view(
    sc: Scenario, serve: Callable[[LiveFeed], AbstractContextManager[Any]] | None
) -> Iterator[LiveFeed | None]:
    """A BMv2 run's live feed, served by ``serve`` while the block runs, or None."""
    if serve is None:
        yield None
        return
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    with serve(feed):
        yield feed
