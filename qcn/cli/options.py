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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qcn.cli import backends
from qcn.core import publish
from qcn.core import scenario as scenarios
from qcn.core.errors import QcnError
from qcn.core.params import ParamError, QcnParams
from qcn.core.scenario import ScenarioError
from qcn.core.tomlfile import read_toml, toml_value

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


def params_overrides(path: Path, sc: scenarios.Scenario) -> dict[str, Any]:
    """A parameter file's fields as scenario overrides (``qcn.cp.w``), checked against the
    scenario's parameters first (an error names the file and the field)."""
    data = read_toml(path, lambda message: ParamError(*message.split(": ", 1)))
    QcnParams.load_with_ports(path, base=sc.params)
    out: dict[str, Any] = {}

    def flatten(prefix: str, node: dict[str, Any]) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                flatten(f"{prefix}{key}.", value)
            else:
                out[f"{prefix}{key}"] = value

    flatten("port_cp.", data.pop("port_cp", {}))  # (a scenario's table, not the parameters')
    flatten("qcn.", data)
    return out


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


def scale_overrides(given: str, sc: scenarios.Scenario) -> dict[str, Any]:
    """``--scale``'s value as ``bmv2.rate_scale`` and ``bmv2.time_scale`` overrides: 'own'
    is the scenario's [bmv2] section; a rate alone keeps rate x time the section's, as the
    capacity model's choice does (qcn.core.capacity)."""
    own = sc.bmv2
    if given == "own":
        return {"bmv2.rate_scale": own.rate_scale, "bmv2.time_scale": own.time_scale}
    try:
        numbers = [float(part) for part in given.split(",")]
    except ValueError:
        numbers = []
    if len(numbers) not in (1, 2):
        raise ScenarioError(f"--scale {given}: give own, RATE or RATE,TIME (e.g. 0.002,50)")
    rate = numbers[0]
    bound = f"(0, {scenarios.MAX_RATE_SCALE:g}]"
    if not 0 < rate <= scenarios.MAX_RATE_SCALE:  # (0 divided below: a ZeroDivisionError)
        raise ScenarioError(f"--scale {given}: RATE must be in {bound} (got {rate:g})")
    time = numbers[1] if len(numbers) == 2 else own.rate_scale * own.time_scale / rate
    if not 0 < time <= scenarios.MAX_TIME_SCALE:
        raise ScenarioError(
            f"--scale {given}: the time scale must be in (0, {scenarios.MAX_TIME_SCALE:g}] "
            f"(got {time:g}{'' if len(numbers) == 2 else ', from RATE'})"
        )
    return {"bmv2.rate_scale": rate, "bmv2.time_scale": time}


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


def check_count(flag: str, value: int, error: type[QcnError]) -> None:
    """A count option must be at least 1: ``error`` says so, naming ``flag``."""
    if value < 1:
        raise error(f"{flag} must be at least 1 (got {value})")


def overrides_from(pairs: Sequence[str] | Mapping[str, Any]) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as overrides (TOML values; anything else as text); a
    mapping (:func:`qcn.run`'s ``set``) is taken as the overrides themselves."""
    if isinstance(pairs, Mapping):
        return dict(pairs)
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ScenarioError(f"--set {pair!r}: expected KEY=VALUE")
        out[key.strip()] = toml_value(value, ScenarioError, f"--set {key.strip()}")
    return out


def load_scenario(
    name: str,
    sets: Sequence[str] | Mapping[str, Any],
    duration_s: float | None,
    params: Path | None = None,
    scale: str | None = None,
) -> tuple[scenarios.Scenario, dict[str, Any]]:
    """A scenario with the command line's ``--params``, ``--set``, ``--duration`` and
    ``--scale`` applied, and those overrides."""
    sc = scenarios.load(name)
    overrides = overrides_from(sets)
    from_file: dict[str, Any] = {}
    if scale is not None:
        both = sorted(k for k in overrides if k.startswith("bmv2"))
        if both:
            raise ScenarioError(
                f"{', '.join(both)}: given by --set and by --scale; one would win silently: "
                "keep one"
            )
        overrides.update(scale_overrides(scale, sc))
    if params is not None:
        from_file = params_overrides(params, sc)
        both = sorted(set(from_file) & set(overrides))
        if both:
            raise ScenarioError(
                f"{', '.join(both)}: given by --params and by --set; one would win silently: "
                "keep one"
            )
        overrides = {**from_file, **overrides}
    if duration_s is not None:
        if "duration_s" in overrides:
            # Which one was meant?  --duration used to win without a word (sweep refuses
            # a --grid and a --set of one key the same way).
            raise ScenarioError(
                "duration_s: given by --set and by --duration; one would win silently: keep one"
            )
        overrides["duration_s"] = duration_s
    if not overrides:
        return sc, overrides
    try:
        return sc.with_overrides(overrides), overrides
    except ScenarioError:
        if from_file:  # (the file's own mistake names the file: it was "with --set")
            sc.with_overrides(from_file, given_by=f"--params {params}")
        raise


def scenario_of(args: argparse.Namespace) -> tuple[scenarios.Scenario, dict[str, Any]]:
    """The scenario the shared options name (:func:`add_scenario`, :func:`add_set`, and
    :func:`add_duration` where the command has it), and the overrides given."""
    return load_scenario(
        args.scenario,
        args.set,
        getattr(args, "duration", None),
        getattr(args, "params", None),
        getattr(args, "scale", None),
    )


def make_results_dir(out: Path, kind: str, error: type[QcnError]) -> None:
    """Create ``out`` for a command's ``kind`` of results (qcn.core.publish.KINDS), marked
    so, or fail with ``error`` before any run: a folder of another kind's or of a user's
    files is refused (qcn.core.publish.check_results_folder)."""
    publish.check_results_folder(out, error, kind=kind)
    try:
        out.mkdir(parents=True, exist_ok=True)
        publish.mark_results(out, kind)
    except OSError as e:
        raise error(f"--out {out}: cannot write results there ({e.strerror})") from None


def require_mininet(command: str, error: type[QcnError]) -> None:
    """Fail with ``error`` when the Mininet backend cannot run here (``command`` needs it)."""
    backends.require_mininet(command, error)
