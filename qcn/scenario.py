"""Experiment scenarios: one TOML file each in ``scenarios/``, shared by every backend.

A scenario is the seeds' single-bottleneck experiment shape: N sources, each behind its own
reaction point on a host link, all sending through one switch port (the congestion point)
whose service rate can change on a schedule::

    name = "transient"
    seed = "000"
    title = "..."
    duration_s = 6.0
    qcn_preset = "2-qcn"             # base parameter set (qcn.params.Preset)

    [qcn.cp]                         # overrides of qcn.params.CpParams
    [qcn.rp]                         # overrides of qcn.params.RpParams

    [network]
    sources = 10
    line_rate_bps = 10e9             # each host link (the RPs' line rate)
    bottleneck_rate_bps = 10e9       # the CP port's initial service rate
    rtt_s = 40e-6                    # source -> CP -> source
    buffer_pkts = 100                # the CP port's buffer
    frame_bytes = 1500

    [workload]
    pattern = "bernoulli"            # "bernoulli" | "constant" | "onoff"
    max_rate_bps = 0.85e9            # each source's offered load
    stagger_s = 0.0                  # source i starts at i * stagger_s
    onoff_sources = []               # sources that follow the on/off pattern
    mean_on_s = 0.020
    mean_off_s = 0.020

    [[schedule]]                     # bottleneck service rate changes
    at_s = 2.0
    bottleneck_rate_bps = 0.5e9

Validation names the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from qcn.params import ParamError, QcnParams

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
Pattern = Literal["bernoulli", "constant", "onoff"]


class ScenarioError(ValueError):
    """An invalid or unknown scenario; the message names the file and the field."""


@dataclass(frozen=True)
class Network:
    sources: int = 10
    line_rate_bps: float = 10e9
    bottleneck_rate_bps: float = 10e9
    rtt_s: float = 40e-6
    buffer_pkts: int = 100
    frame_bytes: int = 1500


@dataclass(frozen=True)
class Workload:
    pattern: Pattern = "bernoulli"
    max_rate_bps: float = 10e9
    stagger_s: float = 0.0
    onoff_sources: tuple[int, ...] = ()
    mean_on_s: float = 0.020
    mean_off_s: float = 0.020


@dataclass(frozen=True)
class RateChange:
    at_s: float
    bottleneck_rate_bps: float


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: str
    title: str
    duration_s: float
    params: QcnParams
    network: Network = field(default_factory=Network)
    workload: Workload = field(default_factory=Workload)
    schedule: tuple[RateChange, ...] = ()
    notes: str = ""

    @property
    def restore_at_s(self) -> float | None:
        """When the bottleneck's capacity is last raised (recovery is measured from it)."""
        rate = self.network.bottleneck_rate_bps
        restore = None
        for change in self.schedule:
            if change.at_s > self.duration_s:
                break
            if change.bottleneck_rate_bps > rate:
                restore = change.at_s
            rate = change.bottleneck_rate_bps
        return restore

    def capacity_at(self, t: float) -> float:
        rate = self.network.bottleneck_rate_bps
        for change in self.schedule:
            if change.at_s <= t:
                rate = change.bottleneck_rate_bps
        return rate

    def with_overrides(self, overrides: dict[str, Any]) -> Scenario:
        """Apply ``{"qcn.rp.fb_hat": True, "duration_s": 2.0, ...}``-style overrides."""
        data = self.to_dict()
        for dotted, value in overrides.items():
            node = data
            *path, last = dotted.split(".")
            for key in path:
                node = node.setdefault(key, {})
                if not isinstance(node, dict):
                    raise ScenarioError(f"--set {dotted}: {key} is not a table")
            node[last] = value
        return parse(data, where=f"{self.name} (with --set)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "title": self.title,
            "duration_s": self.duration_s,
            "notes": self.notes,
            "qcn": self.params.to_dict(),
            "network": dict(vars(self.network)),
            "workload": {**vars(self.workload), "onoff_sources": list(self.workload.onoff_sources)},
            "schedule": [dict(vars(c)) for c in self.schedule],
        }


def available() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def load(name_or_path: str) -> Scenario:
    """A scenario by name (``transient``) or by path to a TOML file."""
    path = Path(name_or_path)
    if not path.suffix:
        path = SCENARIO_DIR / f"{name_or_path}.toml"
    if not path.exists():
        raise ScenarioError(
            f"no scenario '{name_or_path}' (known: {', '.join(available())}; or give a file)"
        )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    return parse(data, where=str(path))


def parse(data: dict[str, Any], where: str = "scenario") -> Scenario:
    try:
        return _parse(data)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None


def _parse(data: dict[str, Any]) -> Scenario:
    known = {
        "name",
        "seed",
        "title",
        "duration_s",
        "notes",
        "qcn_preset",
        "qcn",
        "network",
        "workload",
        "schedule",
    }
    _unknown("", data, known)
    try:
        base = QcnParams.preset(data.get("qcn_preset", "qcn"))
        params = QcnParams.from_dict(data.get("qcn", {}), base)
    except ParamError as e:
        raise ScenarioError(f"qcn.{e}") from None
    network = _table(Network, "network", data.get("network", {}))
    workload = _table(Workload, "workload", data.get("workload", {}))
    schedule = tuple(
        _table(RateChange, f"schedule[{i}]", c) for i, c in enumerate(data.get("schedule", []))
    )
    scenario = Scenario(
        name=_typed("name", data.get("name"), str),
        seed=str(data.get("seed", "")),
        title=str(data.get("title", "")),
        duration_s=float(_typed("duration_s", data.get("duration_s"), (int, float))),
        params=params,
        network=network,
        workload=workload,
        schedule=tuple(sorted(schedule, key=lambda c: c.at_s)),
        notes=str(data.get("notes", "")),
    )
    _validate(scenario)
    return scenario


def _validate(s: Scenario) -> None:
    n, w = s.network, s.workload
    checks = [
        ("duration_s", 0 < s.duration_s <= 600, "must be in (0, 600]"),
        ("network.sources", 1 <= n.sources <= 1000, "must be in [1, 1000]"),
        ("network.line_rate_bps", n.line_rate_bps > 0, "must be positive"),
        ("network.bottleneck_rate_bps", n.bottleneck_rate_bps > 0, "must be positive"),
        ("network.rtt_s", 0 < n.rtt_s < 1, "must be in (0, 1)"),
        ("network.buffer_pkts", n.buffer_pkts >= 1, "must be at least 1"),
        ("network.frame_bytes", 64 <= n.frame_bytes <= 9216, "must be in [64, 9216]"),
        (
            "workload.pattern",
            w.pattern in ("bernoulli", "constant", "onoff"),
            "must be bernoulli, constant or onoff",
        ),
        (
            "workload.max_rate_bps",
            0 < w.max_rate_bps <= n.line_rate_bps,
            "must be in (0, network.line_rate_bps]",
        ),
        ("workload.stagger_s", w.stagger_s >= 0, "must be >= 0"),
        (
            "workload.onoff_sources",
            all(0 <= i < n.sources for i in w.onoff_sources),
            "must list source indices below network.sources",
        ),
        ("workload.mean_on_s", w.mean_on_s > 0 and w.mean_off_s > 0, "means must be positive"),
    ]
    for name, ok, message in checks:
        if not ok:
            raise ScenarioError(f"{name}: {message}")
    if abs(s.params.rp.line_rate_bps - n.line_rate_bps) > 1e-6 * n.line_rate_bps:
        raise ScenarioError(
            "qcn.rp.line_rate_bps must equal network.line_rate_bps (the RPs' host links)"
        )
    for i, c in enumerate(s.schedule):
        if c.at_s < 0 or c.bottleneck_rate_bps <= 0:
            raise ScenarioError(f"schedule[{i}]: needs at_s >= 0 and a positive rate")


def _table(cls: type, name: str, values: Any) -> Any:
    """Build dataclass ``cls`` from a TOML table, type-checked against the field defaults."""
    if not isinstance(values, dict):
        raise ScenarioError(f"{name}: must be a table")
    defaults = {f.name: f.default if f.default is not MISSING else None for f in fields(cls)}
    _unknown(f"{name}.", values, set(defaults))
    out = {}
    for key, raw in values.items():
        default = defaults[key]
        value: Any = raw
        if isinstance(raw, int) and not isinstance(raw, bool) and not isinstance(default, int):
            value = float(raw)  # TOML 10 for a float field
        if isinstance(default, tuple) and isinstance(raw, list):
            value = tuple(raw)
        if default is not None and not isinstance(value, type(default)):
            raise ScenarioError(f"{name}.{key}: must be a {type(default).__name__} (got {raw!r})")
        out[key] = value
    missing = [k for k, d in defaults.items() if d is None and k not in out]
    if missing:
        raise ScenarioError(f"{name}: missing {', '.join(missing)}")
    return cls(**out)


def _typed(name: str, value: Any, kinds: type | tuple[type, ...]) -> Any:
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        raise ScenarioError(f"{name}: required, of type {kinds}")
    return value


def _unknown(prefix: str, data: dict[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            raise ScenarioError(f"{prefix}{key}: unknown field (known: {', '.join(sorted(known))})")
