"""The options the front door's commands share, defined once: the scenario and its
overrides (``--set``, ``--duration``), where results go (``--out``), how many runs or seeds
(``--runs``, ``--seeds``), and their checks.

`qcn run`, `qcn compare`, `qcn sweep` and `qcn schemes` each used to register these with
their own help and their own copy of the checks.  Here each option is registered by one
function and checked by one function; a check takes the command's own error class
(``CompareError``, ``SweepError``, ``SchemesError``), so each command keeps its one-line
messages under its own name while the words are the same everywhere.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from qcn.core import scenario as scenarios
from qcn.lab import scheme_table
from qcn.lab.inputs import load_scenario

SET_HELP = "override a scenario field, e.g. qcn.rp.fb_hat=true (TOML value); repeatable"


def plain_text(doc: str) -> str:
    """A docstring's text as a command's help: plain text, as a terminal shows it (its RST
    and Markdown backticks, and a "qcn NAME:" lead-in, dropped; its first letter a capital)."""
    text = re.sub(r"`+([^`]*)`+", r"\1", " ".join(doc.split()))
    text = re.sub(r"^qcn [a-z]+: ", "", text)
    return text[:1].upper() + text[1:]


def add_scenario(
    p: argparse.ArgumentParser, *, default: str | None = None, optional: bool = False
) -> None:
    """The scenario positional: a name (``qcn run --list``) or a TOML file; ``optional``
    (or with a ``default``) where the command runs without one."""
    what = "a scenario name (qcn run --list) or a TOML file"
    if default is not None:
        p.add_argument("scenario", nargs="?", default=default, help=f"{what} (default {default})")
    elif optional:
        p.add_argument("scenario", nargs="?", help=what)
    else:
        p.add_argument("scenario", help=what)


def add_set(p: argparse.ArgumentParser, help_text: str = SET_HELP) -> None:
    """``--set KEY=VALUE``, repeatable: :func:`overrides_from` reads them."""
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=help_text)


def add_params(p: argparse.ArgumentParser) -> None:
    """``--params FILE``: QCN parameters (a TOML file's [cp] and [rp] tables, as `qcn params`
    and `qcn tune`'s best.toml write them) over the scenario's, in its units."""
    p.add_argument(
        "--params",
        type=Path,
        metavar="FILE",
        help="QCN parameters over the scenario's: TOML [cp], [rp], [port_cp.PORT] (qcn tune's "
        "best.toml)",
    )


def add_scale(p: argparse.ArgumentParser) -> None:
    """``--scale own|RATE[,TIME]``: the BMv2 scale, over the one the capacity model would
    choose (:func:`scale_overrides`)."""
    p.add_argument(
        "--scale",
        metavar="own|RATE[,TIME]",
        help="the Mininet/BMv2 scale, over the one chosen for this machine: 'own' for the "
        "scenario's [bmv2] section; RATE multiplies its rates (times then scale so that byte "
        "quantities stay the section's), RATE,TIME both (docs/experiments.md)",
    )


def add_duration(p: argparse.ArgumentParser) -> None:
    """``--duration S``: the scenario's ``duration_s`` (:func:`load_scenario`)."""
    p.add_argument("--duration", type=float, help="override the scenario's duration, s")


def add_out(p: argparse.ArgumentParser, default: Path | None, where: str) -> None:
    """``--out DIR``; ``where`` says what the default is when it depends on the scenario."""
    p.add_argument("--out", type=Path, default=default, help=f"results directory (default {where})")


def add_count(p: argparse.ArgumentParser, flag: str, default: int, what: str) -> None:
    """A count of at least one (``--runs``, ``--seeds``, ``--workers``: :func:`check_count`)."""
    p.add_argument(flag, type=int, default=default, help=f"{what} (default {default})")


def add_quiet(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def scenario_of(args: argparse.Namespace) -> tuple[scenarios.Scenario, dict[str, Any]]:
    """The scenario the shared options name (:func:`add_scenario`, :func:`add_set`, and
    :func:`add_duration` where the command has it), and the overrides given."""
    check_scheme(args)
    return load_scenario(
        args.scenario,
        args.set,
        getattr(args, "duration", None),
        getattr(args, "params", None),
        getattr(args, "scale", None),
        scheme=getattr(args, "scheme", None),
    )


def add_scheme(p: argparse.ArgumentParser) -> None:
    """``--scheme NAME``: the scenario under another scheme, with that scheme's own
    parameters on its network (:func:`qcn.core.scenario.scheme_overrides`)."""
    p.add_argument(
        "--scheme",
        metavar="NAME",
        help="run the scenario under this scheme (qcn params --help lists them), with the "
        "scheme's own parameters on the scenario's network (docs/dcqcn.md)",
    )


def check_scheme(args: argparse.Namespace) -> None:
    """``--scheme``'s name a scheme's (one line otherwise)."""
    if getattr(args, "scheme", None) is not None:
        scheme_table.parse_schemes(args.scheme, single=True)
