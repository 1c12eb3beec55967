"""What the commands and the API take in, checked once: a scenario with its overrides
(``--params``, ``--set``, ``--duration``, ``--scale``), counts, and a results folder.
Each check takes its caller's own error class (``CompareError``, ``SweepError``...), so
each command keeps its one-line messages under its own name while the words are the same
everywhere.  The command-line flags that give them are :mod:`qcn.cli.options`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qcn.core import publish
from qcn.core import scenario as scenarios
from qcn.core.errors import QcnError
from qcn.core.params import ParamError, QcnParams
from qcn.core.scenario import ScenarioError
from qcn.core.tomlfile import read_toml, toml_value
from qcn.lab import backends


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
    *,
    scheme: str | None = None,
) -> tuple[scenarios.Scenario, dict[str, Any]]:
    """A scenario with the command line's ``--scheme``, ``--params``, ``--set``,
    ``--duration`` and ``--scale`` applied, and those overrides (the scheme's
    parameters first: the rest are over them)."""
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
    if scheme is not None:
        overrides = {**scenarios.scheme_overrides(sc, scheme), **overrides}
    if not overrides:
        return sc, overrides
    try:
        return sc.with_overrides(overrides), overrides
    except ScenarioError:
        if from_file:  # (the file's own mistake names the file: it was "with --set")
            sc.with_overrides(from_file, given_by=f"--params {params}")
        raise


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
