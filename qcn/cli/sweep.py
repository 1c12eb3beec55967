"""`qcn sweep`: a parameter study — every point of a grid of scenario overrides, times random
seeds — run in parallel on Dask distributed, with the results gathered.

The command line and what it prints; the machinery is :mod:`qcn.lab.sweep` (docs/layout.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qcn.cli.options import (
    add_count,
    add_duration,
    add_out,
    add_params,
    add_quiet,
    add_scenario,
    add_scheme,
    add_set,
    plain_text,
    scenario_of,
)
from qcn.core import publish
from qcn.lab import backends
from qcn.lab.sweep import SweepError, SweepReport, check_address, parse_grid, sweep

DEFAULT_OUT = Path("results/sweeps")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a scenario over a grid of parameters and seeds, in parallel (Dask)",
        description=plain_text(__doc__.split("\n\n")[0]) if __doc__ else None,
    )
    add_scenario(p)
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a scenario field and its values (TOML), e.g. network.rtt_s=10e-6,200e-6; "
        "repeat for more axes",
    )
    add_count(p, "--seeds", 1, "random seeds per point (1..N)")
    p.add_argument(
        "--backend",
        choices=backends.names(),
        default=backends.ANYWHERE.name,
        help="sim: the packet simulator, points in parallel; mininet: BMv2 in Mininet, one "
        "point at a time (default: %(default)s)",
    )
    p.add_argument("--scaled", action="store_true", help="sim: the scenario as scaled for BMv2")
    add_count(p, "--workers", 2, "local cluster: worker processes")
    p.add_argument("--address", help="join this Dask scheduler (tcp://HOST:PORT) instead")
    add_out(p, None, f"{DEFAULT_OUT}/SCENARIO")
    add_set(p, "a fixed override of a scenario field, for every point (TOML value)")
    add_params(p)
    add_scheme(p)
    add_duration(p)
    add_quiet(p)
    p.add_argument(
        "--no-point-plots",
        action="store_true",
        help="write each point's CSVs and summary but not its two plots (faster)",
    )
    p.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    report, _out = sweep_of(args)
    print(
        f"qcn sweep: {report.ran} points run, {report.skipped} already done, "
        f"in {report.wall_s:.1f} s"
    )
    if report.table:
        print(f"  table: {report.table[0]} and {report.table[1]}")
    for path in report.plots:
        print(f"  plot: {path}")
    return 0


def sweep_of(args: argparse.Namespace, say: Any = print) -> tuple[SweepReport, Path]:
    """The sweep ``args`` gives (`qcn sweep`'s options; ``grid``: ``KEY=V1,V2,...`` texts or
    checked axes, :func:`grid_axis`), run: what the command and :func:`qcn.sweep` both
    call (``say``: its lines).  Returns its report and where its results are."""
    sc, overrides = scenario_of(args)
    if not args.grid:
        raise SweepError("give at least one --grid KEY=V1,V2,...")
    grids = [g if isinstance(g, tuple) else parse_grid(g) for g in args.grid]
    both = sorted({key for key, _ in grids} & set(overrides))
    if both:
        raise SweepError(
            f"{', '.join(both)}: given by --grid and by --set (or --duration); the grid "
            "would win silently: keep one"
        )
    check_address(args.address)
    out = publish.resolve_out(args.out or DEFAULT_OUT / sc.name, SweepError)
    report = sweep(
        sc,
        grids,
        seeds=args.seeds,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        out=out,
        scaled=args.scaled,
        quiet=args.quiet,
        point_plots=not args.no_point_plots,
        overrides=overrides,
        say=say,
    )
    return report, out
