"""Experiment scenarios: one TOML file each in ``scenarios/``, shared by every backend.

A scenario is the seeds' single-bottleneck experiment shape: N sources, each behind its own
reaction point on a host link, all sending through one switch port (the congestion point)
whose service rate can change on a schedule::

    name = "transient"
    seed = "000"
    title = "..."
    duration_s = 6.0
    qcn_preset = "2-qcn"             # base parameter set (qcn.core.params.Preset)

    [qcn.cp]                         # overrides of qcn.core.params.CpParams
    [qcn.rp]                         # overrides of qcn.core.params.RpParams

    [network]
    sources = 10
    line_rate_bps = 10e9             # each host link (the RPs' line rate)
    bottleneck_rate_bps = 10e9       # the CP port's initial service rate
    rtt_s = 40e-6                    # source -> CP -> source
    buffer_pkts = 100                # the CP port's buffer
    frame_bytes = 1500
    topology = "single"              # "single" | "multihop" (below)
    innocent_sources = 0             # multihop: senders to the innocent sink
    innocent_rate_bps = 40e9         # multihop: the innocent sink port's service rate
    pause = false                    # 802.3x PAUSE per input on watermarks (docs/pause.md)
    pause_hi_bytes = 130_000         # seed 001's watermarks
    pause_lo_bytes = 110_000

    [workload]
    pattern = "bernoulli"            # "bernoulli" | "constant" | "onoff" | "tcp" | "udp" | "flows"
    max_rate_bps = 0.85e9            # each source's offered load
    stagger_s = 0.0                  # source i starts at i * stagger_s
    onoff_sources = []               # sources that follow the on/off pattern
    mean_on_s = 0.020
    mean_off_s = 0.020
    hotspot_start_s = 0.0            # tcp, udp: the hot-spot flows' episode
    hotspot_duration_s = 0.0         # (0: the whole run)
    hotspot_period_s = 0.0           # > 0: the episode repeats with this period
    flow_sizes = "seed003"           # flows: "seed003", "web-search", "hadoop" or a CDF file
    load = 0.8                       # flows: of the bottleneck's rate, in flow bytes
    ipc_fraction = 0.5               # flows, seed003: the share of IPC flows
    flow_size_scale = 1.0            # flows: sizes are drawn, then multiplied by this
    drain_fraction = 0.0             # flows: no flow starts in this last part of the run
    rto_s = 1e-3                     # flows: a lost frame is sent again this long after
    transport = "frames"             # flows: "frames" (both backends) or "tcp" (BMv2 only)

The multihop topology is seed 001's output-generated hot spot two hops away: the sources
(hot-spot senders) and the innocent senders share switch s1 and the s1 -> s2 link; on s2
the hot-spot sink's port is the bottleneck (the CP), the innocent sink has its own port.
The "tcp" workload runs real TCP (iperf3, NewReno) through the reaction points' kernel
limiters, so it needs the Mininet backend; "udp" runs iperf3's UDP at the senders' rate
through them instead (seed 001's QCN + PAUSE).  Both go with the multihop topology only.
The "flows" workload is seed 003's dynamic one: flows that finish, measured by their
completion time and slowdown (qcn.core.flows, docs/fct.md).

    [[schedule]]                     # bottleneck service rate changes
    at_s = 2.0
    bottleneck_rate_bps = 0.5e9

    [bmv2]                           # how the run is scaled for BMv2 (see Bmv2Scale)
    rate_scale = 1e-3                # 10 Gb/s -> 10 Mb/s
    time_scale = 10                  # 6 s -> 60 s
    [bmv2.set]                       # then these overrides, as with `qcn run --set`
    "qcn.cp.p_base" = 0.1

Validation names the file and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from qcn.core.errors import QcnError
from qcn.core.flows import (
    FLOW_SIZE_MAX,
    FRAME_BYTES_MAX,
    FRAME_BYTES_MIN,
    MAX_CUT_FRACTION,
    MAX_FLOWS,
    TRANSPORTS,
    FlowArrival,
    FlowSizeError,
    draw_arrivals,
    expected_flows,
    size_distribution,
)
from qcn.core.params import ParamError, QcnParams
from qcn.core.tomlfile import read_toml

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"
Pattern = Literal["bernoulli", "constant", "onoff", "tcp", "udp", "flows"]
PATTERNS = ("bernoulli", "constant", "onoff", "tcp", "udp", "flows")
MININET_PATTERNS = ("tcp", "udp")
"""Workloads of real iperf3 flows: the multihop topology, on Mininet only."""
Topology = Literal["single", "multihop"]


class ScenarioError(QcnError, ValueError):
    """An invalid or unknown scenario; the message names the file and the field."""


@dataclass(frozen=True)
class Network:
    sources: int = 10
    line_rate_bps: float = 10e9
    bottleneck_rate_bps: float = 10e9
    rtt_s: float = 40e-6
    buffer_pkts: int = 100
    frame_bytes: int = 1500
    topology: Topology = "single"
    innocent_sources: int = 0
    innocent_rate_bps: float = 40e9
    pause: bool = False
    """802.3x PAUSE at the bottleneck, as seed 001's switch (simulator): memory partitioned
    per input port (each source may hold ``buffer_pkts`` frames there; no output queue
    limit), an input above ``pause_hi_bytes`` pauses its source, below ``pause_lo_bytes``
    resumes it."""
    pause_hi_bytes: int = 130_000
    pause_lo_bytes: int = 110_000


@dataclass(frozen=True)
class Workload:
    pattern: Pattern = "bernoulli"
    max_rate_bps: float = 10e9
    stagger_s: float = 0.0
    onoff_sources: tuple[int, ...] = ()
    mean_on_s: float = 0.020
    mean_off_s: float = 0.020
    hotspot_start_s: float = 0.0
    hotspot_duration_s: float = 0.0
    hotspot_period_s: float = 0.0
    """> 0: the hot-spot episode repeats every period, as long as one fits in the run."""
    flow_sizes: str = "seed003"
    """flows: the size distribution (qcn.core.flows.size_distribution)."""
    load: float = 0.8
    """flows: what the sources offer together, as a fraction of the bottleneck's initial
    rate, counting the flows' bytes (as HPCC's traffic generator; headers come on top)."""
    ipc_fraction: float = 0.5
    """flows, seed003: the share of flows that are IPC (the seed gives none)."""
    flow_size_scale: float = 1.0
    """flows: drawn sizes are multiplied by this (BMv2's scaling sets it to k * tau)."""
    drain_fraction: float = 0.0
    """flows: no flow starts in this last fraction of the run, so the last ones can finish."""
    rto_s: float = 1e-3
    """flows: a lost frame is sent again this long after it was sent."""
    transport: str = "frames"
    """flows: "frames", acknowledged datagrams sent again after ``rto_s`` (both backends,
    docs/fct.md); "tcp", one kernel TCP connection per flow (Mininet only)."""


@dataclass(frozen=True)
class RateChange:
    at_s: float
    bottleneck_rate_bps: float


@dataclass(frozen=True)
class Bmv2Scale:
    """How a scenario is scaled to what BMv2 in Mininet carries (tens of Mb/s, not 10 Gb/s).

    Rates scale by ``rate_scale`` (k) and times by ``time_scale`` (tau); byte quantities
    (BC_LIMIT, the CP's sampling intervals) by k * tau, so an RP cycle lasts tau times as
    long as in the original, like everything else.  Frame sizes and queue lengths in packets
    do not scale, so a run with k * tau < 1 sees k * tau times as many frames per (scaled)
    event as the original: ``set`` holds the compensating overrides (typically a higher
    sampling probability), stated in each scenario file.
    """

    rate_scale: float = 1e-3
    time_scale: float = 1.0
    set: dict[str, Any] = field(default_factory=dict)


#: Scenario fields (dotted) that are rates, times and byte counts, for Bmv2Scale.
RATE_FIELDS = (
    "network.line_rate_bps",
    "network.bottleneck_rate_bps",
    "network.innocent_rate_bps",
    "workload.max_rate_bps",
    "qcn.rp.line_rate_bps",
    "qcn.rp.min_rate_bps",
    "qcn.rp.rate_unit_bps",
    "qcn.rp.r_ai_bps",
    "qcn.rp.r_hai_bps",
    "qcn.rp.ecm_ru_bps",
    "qcn.rp.ecm_rd_bps",
)
TIME_FIELDS = (
    "duration_s",
    "network.rtt_s",
    "workload.stagger_s",
    "workload.mean_on_s",
    "workload.mean_off_s",
    "workload.hotspot_start_s",
    "workload.hotspot_duration_s",
    "workload.hotspot_period_s",
    "workload.rto_s",
    "qcn.rp.timer_s",
    "qcn.rp.timer_expiry_step_s",
    "qcn.rp.timer_cnm_step_s",
    "qcn.rp.ecm_td_s",
)
BYTE_FIELDS = ("qcn.rp.bc_limit_bytes", "qcn.rp.hai_min_frames")
"""Byte and frame counts: they scale by rate_scale * time_scale."""


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
    bmv2: Bmv2Scale = field(default_factory=Bmv2Scale)
    preset: str = "qcn"
    """The parameter set ``params`` was built on (qcn.core.params.Preset)."""

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

    @property
    def flows_until_s(self) -> float:
        """The flows workload: no flow starts after this (``workload.drain_fraction``)."""
        return self.duration_s * (1 - self.workload.drain_fraction)

    def draw_flows(self, seed: int) -> list[FlowArrival]:
        """The flows workload's flows for random seed ``seed`` (the same on every backend:
        qcn.core.flows.draw_arrivals with this scenario's workload and network)."""
        wl, net = self.workload, self.network
        return draw_arrivals(
            size_distribution(wl.flow_sizes, wl.ipc_fraction),
            sources=net.sources,
            load=wl.load,
            rate_bps=net.bottleneck_rate_bps,
            until_s=self.flows_until_s,
            size_scale=wl.flow_size_scale,
            seed=seed,
        )

    def congested_episode_s(self) -> tuple[float, float] | None:
        """(start, end) of the congestion episode, if the run has one: the bottleneck's last
        reduced-capacity period, or a TCP workload's hot-spot flows."""
        restore = self.restore_at_s
        if restore is not None:
            return max(c.at_s for c in self.schedule if c.at_s < restore), restore
        episodes = self.hotspot_episodes_s()
        if episodes:
            return episodes[0][0], episodes[-1][1]
        return None

    def hotspot_episodes_s(self) -> list[tuple[float, float]]:
        """(start, end) of each hot-spot episode of an iperf3 workload (none: always on)."""
        w = self.workload
        if w.pattern not in MININET_PATTERNS or w.hotspot_duration_s <= 0:
            return []
        if w.hotspot_period_s <= 0:
            return [(w.hotspot_start_s, w.hotspot_start_s + w.hotspot_duration_s)]
        out, begin = [], w.hotspot_start_s
        while begin + w.hotspot_duration_s <= self.duration_s + 1e-9:
            out.append((begin, begin + w.hotspot_duration_s))
            begin += w.hotspot_period_s
        return out

    def offered_bps(self, t: float) -> float:
        """What the sources offer at time ``t`` on average (on/off sources by their duty
        cycle; staggered sources once started)."""
        w = self.workload
        if w.pattern == "flows":
            return w.load * self.network.bottleneck_rate_bps if t < self.flows_until_s else 0.0
        duty = w.mean_on_s / (w.mean_on_s + w.mean_off_s)
        return sum(
            w.max_rate_bps * (duty if i in w.onoff_sources or w.pattern == "onoff" else 1.0)
            for i in range(self.network.sources)
            if i * w.stagger_s <= t
        )

    def capacity_at(self, t: float) -> float:
        rate = self.network.bottleneck_rate_bps
        for change in self.schedule:
            if change.at_s <= t:
                rate = change.bottleneck_rate_bps
        return rate

    def with_overrides(self, overrides: dict[str, Any]) -> Scenario:
        """Apply ``{"qcn.rp.fb_hat": True, "duration_s": 2.0, ...}``-style overrides."""
        data = self.to_dict()
        preset = overrides.get("qcn_preset", self.preset)
        if preset != self.preset:
            # Another base set: keep only what the scenario chose over its own preset, so
            # the new preset's values take effect everywhere else.
            data["qcn"] = _deviations(self.params, self.preset)
        for dotted, value in overrides.items():
            node = data
            *path, last = dotted.split(".")
            for key in path:
                node = node.setdefault(key, {})
                if not isinstance(node, dict):
                    raise ScenarioError(f"--set {dotted}: {key} is not a table")
            node[last] = value
        return parse(data, where=f"{self.name} (with --set)")

    def scaled_for_bmv2(self, keep: Collection[str] = ()) -> Scenario:
        """This scenario in BMv2's units (see :class:`Bmv2Scale`); itself a scenario that
        the simulator can run too, to predict the BMv2 run.  Fields named in ``keep`` (the
        user's ``--set``) keep their values where ``[bmv2.set]`` would override them."""
        k, tau = self.bmv2.rate_scale, self.bmv2.time_scale
        data = self.to_dict()

        def scale(dotted: str, factor: float, kind: type = float) -> None:
            *path, last = dotted.split(".")
            node = data
            for key in path:
                node = node[key]
            node[last] = kind(round(node[last] * factor)) if kind is int else node[last] * factor

        for name in RATE_FIELDS:
            scale(name, k)
        for name in TIME_FIELDS:
            scale(name, tau)
        for name in BYTE_FIELDS:
            scale(name, k * tau, int)
        data["qcn"]["cp"]["sample_intervals_bytes"] = [
            max(64, round(n * k * tau)) for n in data["qcn"]["cp"]["sample_intervals_bytes"]
        ]
        data["qcn"]["rp"]["bc_limit_bytes"] = max(64, data["qcn"]["rp"]["bc_limit_bytes"])
        data["workload"]["flow_size_scale"] *= k * tau
        for change in data["schedule"]:
            change["at_s"] *= tau
            change["bottleneck_rate_bps"] *= k
        data["bmv2"] = {"rate_scale": 1.0, "time_scale": 1.0, "set": {}}
        scaled = parse(data, where=f"{self.name} (scaled for BMv2)")
        compensations = {k: v for k, v in self.bmv2.set.items() if k not in keep}
        return scaled.with_overrides(compensations) if compensations else scaled

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "title": self.title,
            "duration_s": self.duration_s,
            "notes": self.notes,
            "qcn_preset": self.preset,
            "qcn": self.params.to_dict(),
            "network": dict(vars(self.network)),
            "workload": {**vars(self.workload), "onoff_sources": list(self.workload.onoff_sources)},
            "schedule": [dict(vars(c)) for c in self.schedule],
            "bmv2": {**vars(self.bmv2), "set": dict(self.bmv2.set)},
        }


def backend_refusal(sc: Scenario, backend: str) -> str:
    """Why ``backend`` ("sim" or "mininet") cannot run ``sc`` ("" when it can): the one
    place this is decided (qcn.backends asks it before any run)."""
    if backend == "sim" and sc.network.topology == "multihop":
        return (
            f"{sc.name} runs real iperf3 flows through kernel limiters: the simulator has no "
            "TCP or iperf3 model (run it with --backend mininet)"
        )
    if backend == "sim" and sc.workload.pattern == "flows" and sc.workload.transport == "tcp":
        return (
            f"{sc.name}: workload.transport tcp runs the kernel's TCP: the simulator has no TCP "
            "model (run it with --backend mininet, or transport frames)"
        )
    if backend == "mininet" and sc.network.pause and sc.network.topology != "multihop":
        return (
            f"{sc.name}: network.pause runs on BMv2 in the multihop topology only (seed "
            "001's switches); the single bottleneck runs it with --backend sim"
        )
    return ""


def require_backend(
    sc: Scenario, backend: str, error: type[Exception] = ScenarioError, prefix: str = ""
) -> None:
    """Raise ``error`` (its message ``prefix`` + the reason) when ``backend`` cannot run
    ``sc`` (:func:`backend_refusal`)."""
    refusal = backend_refusal(sc, backend)
    if refusal:
        raise error(prefix + refusal)


def _deviations(params: QcnParams, preset: str) -> dict[str, dict[str, Any]]:
    """The fields of ``params`` that differ from ``preset``'s, as a ``qcn`` table."""
    base, mine = QcnParams.preset(preset).to_dict(), params.to_dict()
    return {sec: {k: v for k, v in mine[sec].items() if base[sec][k] != v} for sec in mine}


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
    data = read_toml(path, ScenarioError)
    return parse(data, where=str(path))


MIN_RATE_BPS = 1e3
MIN_RATE_TEXT = f"must be at least {MIN_RATE_BPS:g} b/s (a slower rate's frame gaps overflow)"
SCENARIO_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")


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
        "bmv2",
    }
    _unknown("", data, known)
    try:
        base = QcnParams.preset(data.get("qcn_preset", "qcn"))
        params = QcnParams.from_dict(data.get("qcn", {}), base)
    except ParamError as e:
        raise ScenarioError(f"qcn.{e}") from None
    network = _table(Network, "network", data.get("network", {}))
    workload = _table(Workload, "workload", data.get("workload", {}))
    raw_schedule = data.get("schedule", [])
    if not isinstance(raw_schedule, list):
        raise ScenarioError(
            f"schedule: must be a list of tables ([[schedule]]), got {raw_schedule!r}"
        )
    schedule = tuple(_table(RateChange, f"schedule[{i}]", c) for i, c in enumerate(raw_schedule))
    bmv2 = _table(Bmv2Scale, "bmv2", data.get("bmv2", {}))
    name = _typed("name", data.get("name"), str)
    if not SCENARIO_NAME.fullmatch(name):
        # It names the results directory (results/NAME): no path, nothing hidden.
        raise ScenarioError(
            f"name: letters, digits, '.', '_' and '-', not starting with '.' (got {name!r})"
        )
    scenario = Scenario(
        name=name,
        seed=str(data.get("seed", "")),
        title=str(data.get("title", "")),
        duration_s=_finite(
            "duration_s", float(_typed("duration_s", data.get("duration_s"), (int, float)))
        ),
        params=params,
        network=network,
        workload=workload,
        schedule=tuple(sorted(schedule, key=lambda c: c.at_s)),
        notes=str(data.get("notes", "")),
        bmv2=bmv2,
        preset=str(data.get("qcn_preset", "qcn")),
    )
    _validate(scenario)
    return scenario


def _validate(s: Scenario) -> None:
    n, w = s.network, s.workload
    multihop = n.topology == "multihop"
    checks = [
        ("duration_s", 1e-3 <= s.duration_s <= 3600, "must be in [0.001, 3600]"),
        ("network.sources", 1 <= n.sources <= 1000, "must be in [1, 1000]"),
        ("network.line_rate_bps", n.line_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        ("network.bottleneck_rate_bps", n.bottleneck_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        ("network.rtt_s", 0 < n.rtt_s < 1, "must be in (0, 1)"),
        ("network.buffer_pkts", n.buffer_pkts >= 1, "must be at least 1"),
        (
            "network.frame_bytes",
            FRAME_BYTES_MIN <= n.frame_bytes <= FRAME_BYTES_MAX,
            f"must be in [{FRAME_BYTES_MIN}, {FRAME_BYTES_MAX}]",
        ),
        ("workload.pattern", w.pattern in PATTERNS, f"must be one of {', '.join(PATTERNS)}"),
        (
            "network.topology",
            n.topology in ("single", "multihop"),
            "must be single or multihop",
        ),
        (
            "network.innocent_sources",
            0 <= n.innocent_sources <= 100 and (n.innocent_sources == 0 or multihop),
            "must be in [0, 100], and 0 unless network.topology is multihop",
        ),
        ("network.innocent_rate_bps", n.innocent_rate_bps >= MIN_RATE_BPS, MIN_RATE_TEXT),
        (
            "network.pause_lo_bytes",
            not n.pause or 0 < n.pause_lo_bytes < n.pause_hi_bytes <= n.buffer_pkts * n.frame_bytes,
            "the watermarks need 0 < pause_lo_bytes < pause_hi_bytes <= the buffer's bytes "
            "(buffer_pkts * frame_bytes)",
        ),
        (
            "workload.hotspot_duration_s",
            w.hotspot_start_s >= 0
            and w.hotspot_duration_s >= 0
            and w.hotspot_start_s + w.hotspot_duration_s <= s.duration_s,
            "the hot-spot episode (hotspot_start_s, hotspot_duration_s) must lie in the run",
        ),
        (
            "workload.max_rate_bps",
            MIN_RATE_BPS <= w.max_rate_bps <= n.line_rate_bps or w.pattern == "flows",
            f"must be in [{MIN_RATE_BPS:g}, network.line_rate_bps]",  # (unused by flows)
        ),
        ("workload.stagger_s", w.stagger_s >= 0, "must be >= 0"),
        (
            "workload.onoff_sources",
            all(0 <= i < n.sources for i in w.onoff_sources),
            "must list source indices below network.sources",
        ),
        (
            "workload.mean_on_s",
            min(w.mean_on_s, w.mean_off_s) >= 1e-6,
            "on and off means must be at least 1 us (shorter ones leave the simulator "
            "drawing periods for ever)",
        ),
        ("workload.load", 0 < w.load <= 1, "must be in (0, 1]"),
        ("workload.transport", w.transport in TRANSPORTS, f"must be {' or '.join(TRANSPORTS)}"),
        ("workload.ipc_fraction", 0 <= w.ipc_fraction <= 1, "must be in [0, 1]"),
        ("workload.flow_size_scale", 0 < w.flow_size_scale <= 1e6, "must be in (0, 1e6]"),
        (
            "workload.drain_fraction",
            0 <= w.drain_fraction < 1,
            "must be in [0, 1)",
        ),
    ]
    for name, ok, message in checks:
        if not ok:
            raise ScenarioError(f"{name}: {message}")
    if (w.pattern in MININET_PATTERNS) != multihop:
        raise ScenarioError(
            "workload.pattern: tcp and udp go with network.topology = multihop, and only they"
        )
    if w.pattern == "flows":
        _validate_flows(s)
    if w.hotspot_period_s and w.hotspot_period_s <= w.hotspot_duration_s:
        raise ScenarioError(
            "workload.hotspot_period_s: must be longer than hotspot_duration_s (or 0)"
        )
    if abs(s.params.rp.line_rate_bps - n.line_rate_bps) > 1e-6 * n.line_rate_bps:
        raise ScenarioError(
            "qcn.rp.line_rate_bps must equal network.line_rate_bps (the RPs' host links)"
        )
    b = s.bmv2
    if not (0 < b.rate_scale <= 1 and 0 < b.time_scale <= 1e4):
        raise ScenarioError("bmv2: rate_scale must be in (0, 1] and time_scale in (0, 1e4]")
    for i, c in enumerate(s.schedule):
        if c.at_s < 0 or c.bottleneck_rate_bps < MIN_RATE_BPS:
            raise ScenarioError(
                f"schedule[{i}]: needs at_s >= 0 and a rate of at least {MIN_RATE_BPS:g} b/s"
            )


def _validate_flows(s: Scenario) -> None:
    """The ``flows`` workload: a size distribution that loads, and a timeout that never
    fires for a frame that was delivered (docs/fct.md, "Transport")."""
    n, w = s.network, s.workload
    if n.pause or n.topology != "single":
        raise ScenarioError(
            "workload.pattern: flows run on the single bottleneck without network.pause"
        )
    try:
        sizes = size_distribution(w.flow_sizes, w.ipc_fraction)
    except FlowSizeError as e:
        raise ScenarioError(f"workload.flow_sizes: {e}") from None
    if sizes.mean_bytes * w.flow_size_scale < 1:
        raise ScenarioError("workload.flow_sizes: the mean flow (times flow_size_scale) is < 1 B")
    cut = sizes.fraction_above(FLOW_SIZE_MAX / w.flow_size_scale)
    if cut > MAX_CUT_FRACTION:
        raise ScenarioError(
            f"workload.flow_sizes: {cut:.3g} of the flows (times flow_size_scale) would be "
            f"larger than the {FLOW_SIZE_MAX} bytes the flow header carries"
        )
    flows = expected_flows(sizes, w.load, n.bottleneck_rate_bps, s.flows_until_s, w.flow_size_scale)
    if flows > MAX_FLOWS:
        raise ScenarioError(
            f"workload: some {flows:.3g} flows (load x rate x time / mean size); at most "
            f"{MAX_FLOWS:,} (a larger workload.flow_size_scale, a lower load or a shorter run)"
        )
    slowest = min([n.bottleneck_rate_bps, *(c.bottleneck_rate_bps for c in s.schedule)])
    worst_wait_s = n.rtt_s + 8 * n.buffer_pkts * n.frame_bytes / slowest
    if w.rto_s <= worst_wait_s:
        raise ScenarioError(
            f"workload.rto_s: must exceed the RTT plus a full buffer's drain at the slowest "
            f"bottleneck rate ({worst_wait_s:.3g} s), so that only lost frames are sent again"
        )


def _table(cls: type, name: str, values: Any) -> Any:
    """Build dataclass ``cls`` from a TOML table, type-checked against the field defaults."""
    if not isinstance(values, dict):
        raise ScenarioError(f"{name}: must be a table")
    defaults = {
        f.name: f.default
        if f.default is not MISSING
        else (f.default_factory() if f.default_factory is not MISSING else None)
        for f in fields(cls)
    }
    _unknown(f"{name}.", values, set(defaults))
    kinds = {f.name: f.type for f in fields(cls)}
    out = {}
    for key, raw in values.items():
        out[key] = _field_value(f"{name}.{key}", kinds[key], defaults[key], raw)
    missing = [k for k, d in defaults.items() if d is None and k not in out]
    if missing:
        raise ScenarioError(f"{name}: missing {', '.join(missing)}")
    return cls(**out)


def _field_value(name: str, kind: Any, default: Any, raw: Any) -> Any:
    """One TOML value checked against its field: a bool is not a number, numbers are finite,
    and a list holds what its field's annotation says."""
    if kind == "float" or isinstance(default, float):
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ScenarioError(f"{name}: must be a number (got {raw!r})")
        return _finite(name, float(raw))  # TOML 10 for a float field is fine
    if kind == "int" or (isinstance(default, int) and not isinstance(default, bool)):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ScenarioError(f"{name}: must be a whole number (got {raw!r})")
        return raw
    if kind == "tuple[int, ...]":
        if not isinstance(raw, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw
        ):
            raise ScenarioError(f"{name}: must be a list of whole numbers (got {raw!r})")
        return tuple(raw)
    if default is not None and not isinstance(raw, type(default)):
        raise ScenarioError(f"{name}: must be a {type(default).__name__} (got {raw!r})")
    return raw


def _finite(name: str, value: float) -> float:
    if not math.isfinite(value):
        raise ScenarioError(f"{name}: must be a finite number (got {value!r})")
    return value


def _typed(name: str, value: Any, kinds: type | tuple[type, ...]) -> Any:
    if value is None or isinstance(value, bool) or not isinstance(value, kinds):
        raise ScenarioError(f"{name}: required, of type {kinds}")
    return value


def _unknown(prefix: str, data: dict[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            raise ScenarioError(f"{prefix}{key}: unknown field (known: {', '.join(sorted(known))})")
