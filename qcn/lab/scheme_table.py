"""One scenario under several schemes, side by side: ``qcn run SCENARIO --scheme
qcn,dcqcn,none`` (docs/dcqcn.md, "One scenario, several schemes").

Each scheme's run is a `qcn run` of the same network, traffic and seed, with the scheme's
parameters (:func:`qcn.core.scenario.scheme_overrides`; ``none``: the run without
congestion control, every port silent), written to ``OUT/SCHEME/`` as `qcn run` writes it,
so each figure is reproducible from its run directory.  This module turns the runs into
the comparison: a row per scheme (:func:`scheme_row`), the table (``schemes.md``,
``schemes.json``) and one plot (``schemes.png``).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qcn.core.errors import QcnError
from qcn.core.params import SCHEMES
from qcn.core.publish import write_atomic
from qcn.core.results import headline_view, json_safe, warmup_row
from qcn.core.scenario import Scenario
from qcn.core.stats import percentile
from qcn.core.trace import Trace

NO_SCHEME = "none"
"""The run without congestion control (as ``qcn run --no-qcn``)."""
TABLE_FILE = "schemes.md"
JSON_FILE = "schemes.json"
PLOT_FILE = "schemes.png"


class SchemesChoiceError(QcnError):
    """A ``--scheme`` list that names no scheme, or one twice."""


def parse_schemes(text: str, *, single: bool = False) -> tuple[str, ...]:
    """The schemes a comma-separated list names, in its order (``single``: one scheme, not
    ``none``); one line for a bad name."""
    names = tuple(n.strip() for n in text.split(","))
    known = [*map(str, SCHEMES)] if single else [*map(str, SCHEMES), NO_SCHEME]
    if single and len(names) > 1:
        raise SchemesChoiceError(f"--scheme: one scheme here (got {text!r})")
    for name in names:
        if name not in known:
            hint = difflib.get_close_matches(name, known, n=1)
            did = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise SchemesChoiceError(
                f"--scheme: {name!r} is no scheme{did}; known: {', '.join(known)}"
            )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SchemesChoiceError(f"--scheme: {', '.join(twice)} given twice")
    return names


def headline_queue(sc: Scenario, trace: Trace, summary: dict[str, Any]) -> Trace:
    """The run's trace with its headline port's queue as the queue: the port summary.json's
    figures describe (its ``headline_port``, chosen once, when the run was summarised)."""
    return headline_view(sc, trace, summary["headline_port"])


def scheme_row(
    scheme: str, run_dir: Path, summary: dict[str, Any], sc: Scenario, view: Trace
) -> dict[str, Any]:
    """One scheme's figures: its headline port's queue after the warm-up (mean, as
    summary.json gives it, and p99 of the same samples), the network's drops, Jain's index
    over fair shares, the flows' slowdown, and the notifications its scheme sent (CNMs
    from the CPs, CNPs from the receivers); ``view``: the run's :func:`headline_queue`."""
    flows = summary.get("flows")
    row: dict[str, Any] = {
        "scheme": scheme,
        "run": str(run_dir),
        "port": summary["headline_port"],
        "queue_mean_pkts": summary["queue_mean_pkts"],
        "queue_p99_pkts": percentile(view.queue_pkts[warmup_row(sc, view) :] or [0], 0.99),
        "drops": summary["drops"],
        "jain_fairness": summary.get("jain_fairness"),
        "cnms": summary.get("cnms", 0),
        "cnps": summary.get("cnps", 0),
        "marks": summary.get("marks", 0),
    }
    if flows is not None:
        for size in ("short", "long"):
            figures = flows[f"slowdown_{size}"]
            row[f"slowdown_{size}_p50"] = figures["p50"]
            row[f"slowdown_{size}_p99"] = figures["p99"]
        row["flows_unfinished"] = flows["unfinished"]
        row["slowdown_bins"] = flows["bins"]
    return row


def _figure(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def format_table(scenario: str, backend: str, rows: Sequence[dict[str, Any]]) -> str:
    """The comparison as a Markdown table, a row per scheme."""
    flows = any("slowdown_bins" in r for r in rows)
    head = ["scheme", "queue mean (pkts)", "queue p99 (pkts)", "drops", "Jain"]
    if flows:
        head += ["short p50/p99", "long p50/p99", "unfinished"]
    head += ["CNMs", "CNPs", "ECN marks"]
    lines = [
        f"# {scenario} under each scheme ({backend})",
        "",
        "The queue is each run's headline port's after the warm-up (summary.json's "
        "headline_port: the first row's is " + rows[0]["port"] + "), drops the whole "
        "network's; slowdown is FCT over the ideal FCT (docs/fct.md); each row's run is in "
        "its directory.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        cells = [
            f"[{r['scheme']}]({Path(r['run']).name}/)",
            _figure(r["queue_mean_pkts"]),
            _figure(r["queue_p99_pkts"]),
            _figure(r["drops"]),
            _figure(r["jain_fairness"]),
        ]
        if flows:
            cells += [
                f"{_figure(r.get('slowdown_short_p50'))}/{_figure(r.get('slowdown_short_p99'))}",
                f"{_figure(r.get('slowdown_long_p50'))}/{_figure(r.get('slowdown_long_p99'))}",
                _figure(r.get("flows_unfinished")),
            ]
        cells += [_figure(r["cnms"]), _figure(r["cnps"]), _figure(r["marks"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(
    path: Path, scenario: str, rows: Sequence[dict[str, Any]], traces: Sequence[Trace]
) -> None:
    """One figure, the schemes side by side: the headline port's queue over time, and the
    flows' slowdown by size (p50 solid, p99 dashed) or, without flows, each source's
    delivered rate."""
    import matplotlib  # noqa: PLC0415 - only a comparison that writes its results needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (queue_ax, other_ax) = plt.subplots(1, 2, figsize=(13, 4.5))
    for i, (row, trace) in enumerate(zip(rows, traces, strict=True)):
        color = f"C{i}"
        queue_ax.plot(trace.times_s, trace.queue_pkts, lw=0.8, color=color, label=row["scheme"])
        bins = row.get("slowdown_bins")
        if bins is not None:
            sizes = [b["size_max_bytes"] for b in bins]
            other_ax.plot(sizes, [b["p50"] for b in bins], "-o", ms=3, color=color,
                          label=f"{row['scheme']} p50")  # fmt: skip
            other_ax.plot(sizes, [b["p99"] for b in bins], "--", color=color,
                          label=f"{row['scheme']} p99")  # fmt: skip
        else:
            delivered = [sum(s) / len(s) / 1e6 if s else 0.0 for s in trace.source_delivered_bps]
            width = 0.8 / len(rows)
            other_ax.bar([k + i * width for k in range(len(delivered))], delivered, width,
                         color=color, label=row["scheme"])  # fmt: skip
    queue_ax.set(xlabel="time (s)", ylabel=f"queue at {rows[0]['port']} (pkts)")
    queue_ax.legend(fontsize=8)
    if any("slowdown_bins" in r for r in rows):
        other_ax.set(xlabel="flow size (bytes, each bin's largest)", ylabel="slowdown")
        if any(r.get("slowdown_bins") for r in rows):
            other_ax.set_xscale("log")
            other_ax.set_yscale("log")
    else:
        other_ax.set(xlabel="source", ylabel="mean delivered rate (Mb/s)")
    other_ax.legend(fontsize=8)
    other_ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(f"{scenario}: {', '.join(r['scheme'] for r in rows)}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(
    out: Path, scenario: str, backend: str, rows: Sequence[dict[str, Any]], traces: Sequence[Trace]
) -> list[Path]:
    """The table, its JSON and the plot, in ``out``; the paths written."""
    table, data, figure = out / TABLE_FILE, out / JSON_FILE, out / PLOT_FILE
    write_atomic(table, format_table(scenario, backend, rows))
    write_atomic(data, json.dumps(json_safe({"scenario": scenario, "backend": backend,
                                             "schemes": list(rows)}), indent=1))  # fmt: skip
    plot(figure, scenario, rows, traces)
    return [table, data, figure]
