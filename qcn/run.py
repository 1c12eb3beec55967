"""`qcn run`: run a scenario on a backend and write its results."""

from __future__ import annotations

import argparse
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

from qcn import scenario as scenarios
from qcn.scenario import ScenarioError

DEFAULT_OUT = Path("results")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run an experiment scenario (scenarios/*.toml) and write CSVs, summary, plots",
        description="Run one of the seeds' experiments. Results go to --out "
        "(default results/SCENARIO): queue.csv, sources.csv, summary.json, rates.png, queue.png.",
    )
    p.add_argument("scenario", nargs="?", help="a scenario name (see --list) or a TOML file")
    p.add_argument("--list", action="store_true", help="list the scenarios")
    p.add_argument("--out", type=Path, help="results directory")
    p.add_argument("--no-qcn", action="store_true", help="the same run without QCN")
    p.add_argument("--duration", type=float, help="override the scenario's duration, s")
    p.add_argument("--seed", type=int, default=1, help="random seed (same seed, same summary)")
    p.add_argument(
        "--backend",
        choices=["auto", "sim", "mininet"],
        default="auto",
        help="sim: the packet simulator; mininet: BMv2 in Mininet; auto: pick (default)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. qcn.rp.fb_hat=true (TOML value)",
    )
    p.set_defaults(func=_run)


def _overrides(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {pair!r}: expected KEY=VALUE")
        try:
            out[key.strip()] = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            out[key.strip()] = value.strip()
    return out


def choose_backend(requested: str) -> tuple[str, str]:
    """The backend to use and why, in one line."""
    if requested == "sim":
        return "sim", "simulator (requested)"
    if requested == "mininet":
        raise ScenarioError("the Mininet/BMv2 backend is not implemented yet; use --backend sim")
    have = all(shutil.which(t) for t in ("p4c", "simple_switch_grpc"))
    if have:
        return "sim", "simulator (the Mininet/BMv2 backend is not implemented yet)"
    return "sim", "simulator (no p4lang toolchain on this machine)"


def _run(args: argparse.Namespace) -> int:
    if args.list:
        for name in scenarios.available():
            sc = scenarios.load(name)
            print(f"{name:14} seed {sc.seed:4} {sc.title}")
        return 0
    if not args.scenario:
        raise ScenarioError("give a scenario name (qcn run --list) or a file")
    sc = scenarios.load(args.scenario)
    overrides = _overrides(args.set)
    if args.duration is not None:
        overrides["duration_s"] = args.duration
    if overrides:
        sc = sc.with_overrides(overrides)
    backend, why = choose_backend(args.backend)
    print(f"qcn run: {sc.name} on the {why}", flush=True)
    from simulator.engine import Simulation  # noqa: PLC0415 - heavy only when running
    from simulator.results import SUMMARY_KEYS, summarize, write  # noqa: PLC0415

    out = args.out or DEFAULT_OUT / sc.name
    qcn = not args.no_qcn
    trace = Simulation(sc, seed=args.seed, qcn=qcn).run()
    summary = summarize(sc, trace, qcn=qcn, backend=backend, seed=args.seed)
    plots = write(out, sc, trace, summary)
    print(json.dumps({k: summary[k] for k in SUMMARY_KEYS}))
    print(
        f"qcn run: {trace.events:,} events in {trace.wall_s:.1f} s "
        f"({summary['events_per_s']:,.0f} events/s); results in {out}/"
    )
    for p in plots:
        print(f"  plot: {p}")
    return 0
