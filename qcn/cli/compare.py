"""`qcn compare`: a scenario on Mininet/BMv2 and on the simulator, side by side.

The command line and what it prints; the machinery is :mod:`qcn.lab.compare` (docs/layout.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from qcn.cli.options import (
    add_count,
    add_duration,
    add_out,
    add_params,
    add_scale,
    add_scenario,
    add_scheme,
    add_set,
    plain_text,
    scenario_of,
)
from qcn.core.errors import ExitCode
from qcn.core.live import LiveFeed
from qcn.lab.compare import format_table, run_compare

DEFAULT_OUT = Path("results/compare")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="run a scenario on Mininet/BMv2 and on the simulator, side by side",
        description=plain_text(__doc__.split("\n\n")[0]) if __doc__ else None,
    )
    add_scenario(p)
    add_count(p, "--runs", 3, "runs per backend")
    add_duration(p)
    add_set(p)
    add_params(p)
    add_scheme(p)
    add_scale(p)
    add_out(p, None, f"{DEFAULT_OUT}/SCENARIO")
    p.add_argument(
        "--live",
        action="store_true",
        help="serve each BMv2 run's live view (qcn run --live's; its URL is printed): what "
        "watching a run costs it, held to the same targets (docs/live.md)",
    )
    p.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    # (said at once: a live view's URL is read from a pipe)
    rows, out = compare_of(args, say=lambda line: print(line, flush=True))
    print(format_table(rows, args.runs))
    print(f"qcn compare: results in {out}/")
    missed = [r["label"] for r in rows if r["ok"] is False]
    if missed:  # the comparison ran and failed its own check: exit status 1
        print(f"qcn compare: missed its target: {', '.join(missed)}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


def compare_of(
    args: argparse.Namespace, say: Callable[[str], None] = print
) -> tuple[list[dict[str, Any]], Path]:
    """The comparison ``args`` gives (`qcn compare`'s options), run: what the command and
    :func:`qcn.compare` both call (``say``: its lines).  Returns its rows
    (:func:`qcn.lab.compare.compare_rows`) and where its results are."""
    sc, overrides = scenario_of(args)
    out = args.out or DEFAULT_OUT / sc.name
    serve = None
    if args.live:
        from qcn.cli.live import serving  # noqa: PLC0415 - Bokeh only for a live run

        def serve(feed: LiveFeed) -> AbstractContextManager[str]:
            return serving(feed, 0, lambda url: say(f"qcn compare: live view at {url}"))

    rows = run_compare(
        sc, runs=args.runs, out=out, keep=list(overrides), overrides=overrides, serve=serve,
        say=say,
    )  # fmt: skip
    return rows, out
