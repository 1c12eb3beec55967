"""`qcn schemes`: seed 001's four ways of managing congestion, on Mininet/BMv2.

The command line and what it prints; the machinery is :mod:`qcn.lab.schemes` (docs/layout.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qcn.cli.options import (
    add_count,
    add_out,
    add_scenario,
    add_set,
    plain_text,
    scenario_of,
)
from qcn.lab.schemes import EPISODES, format_tables, run_schemes

DEFAULT_OUT = Path("results/schemes")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "schemes",
        help="seed 001's four schemes (TCP, +QCN, +PAUSE, QCN+PAUSE) on Mininet/BMv2",
        description=plain_text(__doc__.split("\n\n")[0]) if __doc__ else None,
    )
    add_scenario(p, default="tcp-multihop")
    add_count(p, "--runs", 1, "runs per scheme and episode")
    p.add_argument(
        "--episodes",
        default=",".join(EPISODES),
        help=f"comma-separated, of {', '.join(EPISODES)} (default: all)",
    )
    add_set(p)
    add_out(p, DEFAULT_OUT, str(DEFAULT_OUT))
    p.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    sc, overrides = scenario_of(args)
    episodes = [e.strip() for e in args.episodes.split(",") if e.strip()]
    table = run_schemes(
        sc,
        runs=args.runs,
        episodes=episodes,
        out=args.out,
        keep=list(overrides),
        overrides=overrides,
    )
    print(format_tables(table, sc.bmv2.rate_scale, args.runs))
    print(f"qcn schemes: results in {args.out}/")
    return 0
