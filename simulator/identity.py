"""Do the two engines give the same runs?  Every field of the trace, compared exactly.

    python -m qcn.simulator.identity [--seeds 1,2,3] [--only TEXT] [--duration S]

Runs each of ``make reproduce``'s rows (and the paths it does not take: no QCN, BMv2's
departure CP at both depths, ``--scaled``) on the Python engine and on the compiled core,
for each seed, and compares the two traces field by field (every sample of every series,
the counts, the extra figures, every flow's record; the wall time aside) and the two
summaries.  Exit status 1 if any differs.  docs/simulator.md gives the last full run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from qcn.core import scenario as scenarios
from qcn.core.results import summarize
from qcn.core.scenario import Scenario
from qcn.core.trace import Trace
from qcn.simulator.compiled import CompiledSimulation
from qcn.simulator.engine import Simulation
from qcn.simulator.reproduce import (
    BURSTY_ROWS,
    FCT_ROWS,
    LEAF_SPINE_ROWS,
    PARKING_LOT_ROWS,
    PAUSE_ROWS,
    ROWS,
    SCHEME_ROWS,
    THREE_POINT_ROWS,
    three_point,
)

SLOW_PORT = {"network.bottleneck_rate_bps": 5e5}
"""The bottleneck at 0.5 Mb/s under sources at 10 Gb/s: its buffer full all the time."""

#: Summary keys that time the run, not what it measured.
VOLATILE = ("wall_s", "events_per_s", "realtime_factor")


@dataclass(frozen=True)
class Case:
    label: str
    scenario: str
    overrides: dict[str, Any]
    qcn: bool = True
    cp_at_departure: bool = False
    sample_interval_s: float = 1e-3
    scaled: bool = False
    """The scenario as scaled for BMv2 (``--scaled``)."""


def cases() -> list[Case]:
    """make reproduce's rows, and the paths they leave out."""
    rows = [
        *ROWS,
        *SCHEME_ROWS,
        *PAUSE_ROWS,
        *THREE_POINT_ROWS,
        *FCT_ROWS,
        *BURSTY_ROWS,
        *PARKING_LOT_ROWS,
        *LEAF_SPINE_ROWS,
    ]
    out = [Case(r.label, r.scenario, r.overrides) for r in rows]
    out += [
        Case("transient, no QCN", "transient", {}, qcn=False),
        Case("fct, no QCN", "fct", {}, qcn=False),
        *(
            Case(
                f"robustness, departure CP ({depth})",
                "robustness",
                {
                    "qcn.cp.depth_at": depth,
                    "qcn.cp.queue_unit": "packets",
                    "qcn.cp.judge": "admitted",
                },
                cp_at_departure=True,
            )
            for depth in ("enqueue", "dequeue")
        ),
        # A port fed 20,000x faster than it drains: its buffer full, the frames it drops
        # judged by its CP (cp.judge = "arrivals", two- and three-point) or not.
        *(
            Case(f"long-lived into 0.5 Mb/s, {label}", "long-lived", {**SLOW_PORT, **extra})
            for label, extra in (
                ("the CP judging arrivals", {}),
                ("the CP judging admitted frames", {"qcn.cp.judge": "admitted"}),
                ("3-point, the CP judging arrivals", three_point(0.025)),
            )
        ),
        Case("parking lot, 2-point, PAUSE", "parking-lot", {"network.pause": True}),
        # BMv2's queues: every frame a full one's time (and the PAUSE drain counted so).
        Case("fct, ports served as BMv2's", "fct", {"network.port_service": "bmv2"}),
        Case(
            "parking lot, PAUSE, ports served as BMv2's",
            "parking-lot",
            {"network.pause": True, "network.port_service": "bmv2"},
        ),
        Case("parking lot, each CP port its own CP fields", "parking-lot", own_cp_fields()),
        Case("leaf-spine, per-flow ECMP", "leaf-spine-fct", {"network.ecmp": "per-flow"}),
        Case(
            "leaf-spine, ports served as BMv2's (unshaped spines)",
            "leaf-spine-fct",
            {"network.port_service": "bmv2"},
        ),
        *dcqcn_cases(),
    ]
    return out


def dcqcn_cases() -> list[Case]:
    """DCQCN (ECN marks, the receivers' CNPs, its rules) on the paths it takes: a single
    bottleneck (congested from the start, so that a short run marks), with PAUSE, a
    parking lot, the flows workload on one switch and on a leaf-spine."""
    dcqcn = {"qcn_preset": "dcqcn"}
    congested = {**dcqcn, "network.bottleneck_rate_bps": 5e9}
    return [
        Case("transient, DCQCN, a 5 Gb/s bottleneck", "transient", congested),
        Case(
            "transient, DCQCN + PAUSE, a 2 Gb/s bottleneck",
            "transient",
            {**dcqcn, "network.bottleneck_rate_bps": 2e9, "network.pause": True},
        ),
        Case("parking lot, DCQCN", "parking-lot", dcqcn),
        Case("fct, DCQCN", "fct", dcqcn),
        Case("leaf-spine, DCQCN", "leaf-spine-fct", dcqcn),
    ]


def own_cp_fields() -> dict[str, Any]:
    """The parking lot's three CP ports, each with a field of its own (port_cp)."""
    first, second, third = sorted(str(p) for p in scenarios.load("parking-lot").topology.cp_ports)
    return {
        f"port_cp.{first}.q_eq_pkts": 10,
        f"port_cp.{second}.w": 4.0,
        f"port_cp.{third}.p_base": 0.05,
    }


def scaled(case: Case) -> Case:
    """The case as ``--scaled`` runs it (the scenario as scaled for BMv2, its departure CP,
    its sample interval)."""
    sc = scenarios.load(case.scenario).with_overrides(case.overrides).scaled_for_bmv2()
    return Case(
        f"{case.label}, scaled",
        case.scenario,
        case.overrides,
        case.qcn,
        cp_at_departure=True,
        sample_interval_s=1e-3 * sc.bmv2.time_scale,
        scaled=True,
    )


def same(a: Any, b: Any) -> bool:
    """Exactly equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(type(a) is type(b) and a == b)


def trace_fields(tr: Trace) -> dict[str, Any]:
    out = {k: v for k, v in vars(tr).items() if k not in ("wall_s", "flows")}
    out["flows"] = [asdict(f) for f in tr.flows]
    return out


def differences(a: Trace, b: Trace, sa: dict[str, Any], sb: dict[str, Any]) -> list[str]:
    """What differs between two runs: trace fields, then summary keys."""
    fa, fb = trace_fields(a), trace_fields(b)
    out = [f"trace.{k}" for k in fa if not same(fa[k], fb.get(k))]
    out += [f"summary.{k}" for k in sa if k not in VOLATILE and not same(sa[k], sb.get(k))]
    return out


def run_case(case: Case, seed: int, duration: float | None) -> tuple[list[str], float, float, int]:
    """(differences, the Python engine's wall, the core's wall, events)."""
    sc: Scenario = scenarios.load(case.scenario).with_overrides(case.overrides)
    if case.scaled:
        sc = sc.scaled_for_bmv2()
    if duration is not None:
        sc = sc.with_overrides({"duration_s": min(duration, sc.duration_s)})
    kwargs: dict[str, Any] = {
        "seed": seed,
        "qcn": case.qcn,
        "cp_at_departure": case.cp_at_departure,
        "sample_interval_s": case.sample_interval_s,
    }
    t0 = time.perf_counter()
    py = Simulation(sc, **kwargs).run()
    t1 = time.perf_counter()
    cc = CompiledSimulation(sc, **kwargs).run()
    t2 = time.perf_counter()
    sa = summarize(sc, py, qcn=case.qcn, backend="sim", seed=seed)
    sb = summarize(sc, cc, qcn=case.qcn, backend="sim", seed=seed)
    return differences(py, cc, sa, sb), t1 - t0, t2 - t1, py.events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--only", default="", help="the cases whose label contains this")
    parser.add_argument("--duration", type=float, default=None, help="cap every run (s)")
    parser.add_argument("--scaled", action="store_true", help="also each case --scaled")
    args = parser.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",")]
    chosen = [c for c in cases() if args.only in c.label]
    if args.scaled:
        chosen += [scaled(c) for c in chosen if c.qcn and not c.cp_at_departure]
    failed = 0
    total_py = total_core = 0.0
    for case in chosen:
        for seed in seeds:
            diff, t_py, t_core, events = run_case(case, seed, args.duration)
            total_py += t_py
            total_core += t_core
            verdict = "same" if not diff else "DIFFERS: " + ", ".join(diff)
            print(
                f"{case.label}, seed {seed}: {verdict} ({events:,} events; Python "
                f"{t_py:.2f} s, core {t_core:.3f} s)",
                flush=True,
            )
            failed += bool(diff)
    print(
        f"{len(chosen) * len(seeds) - failed} of {len(chosen) * len(seeds)} runs the same; "
        f"Python engine {total_py:.1f} s, compiled core {total_core:.1f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
