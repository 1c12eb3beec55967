"""Whether a scenario's QCN parameters fit the network it runs on, and the parameters
that would (docs/experiments.md, "Rates that fit the parameters").

The standard's rates and byte counts are written for 10 Gb/s hosts: MIN_RATE, R_AI and
R_HAI are fixed fractions of that line rate, and BC_LIMIT a fixed time at it.  The project
scales them with the network only where it scales the whole run (a scenario's ``[bmv2]``
section, ``qcn net up``); a network whose links run at other rates than the parameters
were scaled for (a topology file's own rates) is run as given.  Before the run,
:func:`misfits` predicts what will fail, from the topology and the parameters alone: a
rate the slowest source link cannot hold, a congestible port MIN_RATE cannot drain, a
q_eq its buffer never reaches, a CP that cannot send CNMs as fast as its sources recover.
:func:`fitted` gives the parameters (and the run's length) that remove every cause found,
which the run writes beside its results for the user to run again with.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, fields, replace
from typing import Any

import tomli_w

from qcn.core.params import (
    QNTZ_FB_MAX,
    TIMER_MAX_S,
    CpJudge,
    CpParams,
    QcnParams,
    QueueUnit,
    RpParams,
    RpScheme,
    SamplingMode,
)
from qcn.core.scenario import MAX_DURATION_S, Scenario, scaled_params
from qcn.core.topology import PortRef
from qcn.core.units import Unit, rate_text, unit_of

STANDARD = RpParams()
"""The standard's reaction point, at its own line rate (10 Gb/s): the proportions below."""
MISFIT_FACTOR = 100.0
"""A rate parameter does not fit a host whose link it is more than this many times the
standard's share of (MIN_RATE: a tenth of the link; R_AI: 5 %; R_HAI: half of it), and the
byte counter when its cycle at the link's rate is more than this many times the standard's
share of the timer (120 us of 15 ms: 0.8 of the timer)."""

FITTED_FILE = "fitted.toml"
"""The parameters :func:`fitted` gives, written beside a run's results."""
MIN_RATE_SHARE_OF_PORT = 0.5
"""A fitted MIN_RATE lets a port's sources, all at MIN_RATE, send at most this share of it."""
CYCLE_SCHEMES = frozenset({RpScheme.QCN, RpScheme.TWO_QCN, RpScheme.TIMER_QCN})
"""The schemes whose increases come in cycles of the byte counter and the timer, which the
CNM check compares with the CP's CNMs (ECM's self-increase is its own: not checked)."""


def misfits(sc: Scenario) -> list[str]:
    """What of ``sc``'s QCN parameters does not fit its network, one phrase each (none: they
    fit).  Judged at the slowest link a source sends on and at every CP port."""
    rp, topo = sc.params.rp, sc.topology
    if not sc.sources:
        return []
    slowest = min(sc.sources, key=lambda s: topo.access_link(s.host).rate_bps).host
    link = topo.access_link(slowest).rate_bps
    out: list[str] = []
    for name, field, value in (
        ("MIN_RATE", "min_rate_bps", rp.min_rate_bps),
        ("R_AI", "r_ai_bps", rp.r_ai_bps),
        ("R_HAI", "r_hai_bps", rp.r_hai_bps),
    ):
        share = getattr(STANDARD, field) / STANDARD.line_rate_bps
        if value >= MISFIT_FACTOR * share * link:
            out.append(
                f"{name} (qcn.rp.{field}) {rate_text(value)} is {value / link:.2g}x "
                f"{slowest}'s {rate_text(link)} link (the standard's: {share:.2g}x)"
            )
    if rp.timer_enabled:
        cycle_s, share = 8 * rp.bc_limit_bytes / link, _standard_cycle_share()
        if cycle_s >= MISFIT_FACTOR * share * rp.timer_s:
            out.append(
                f"a byte-counter cycle (qcn.rp.bc_limit_bytes {rp.bc_limit_bytes}) takes "
                f"{cycle_s:.3g} s at {slowest}'s link, {cycle_s / rp.timer_s:.2g}x the timer "
                f"(the standard's: {share:.2g}x)"
            )
    out += _ports_that_cannot_drain(sc)
    out += _cps_that_cannot_keep_up(sc)
    return out


def sources_text(n: int) -> str:
    return f"{n} source{'s' if n != 1 else ''}"


def _standard_cycle_share() -> float:
    """The standard's byte-counter cycle at its line rate, over its timer (0.008)."""
    return 8 * STANDARD.bc_limit_bytes / STANDARD.line_rate_bps / STANDARD.timer_s


@dataclass(frozen=True)
class CongestiblePort:
    """A CP port and the sources that send through it."""

    ref: PortRef
    rate_bps: float
    """Its rate (the bottleneck's slowest, where a schedule changes it)."""
    sources: int
    buffer_pkts: int


def congestible_ports(sc: Scenario) -> list[CongestiblePort]:
    """Every CP port some source sends through."""
    topo, through = sc.topology, _sources_through(sc)
    slowest_bottleneck = min(
        [sc.initial_capacity_bps, *(c.bottleneck_rate_bps for c in sc.schedule)]
    )
    out = []
    for ref in topo.cp_ports:
        n = through.get(ref, 0)
        if n:
            link = topo.link_at(ref)
            rate = slowest_bottleneck if ref == sc.bottleneck_port else link.rate_bps
            out.append(CongestiblePort(ref, rate, n, link.buffer_pkts))
    return out


def _ports_that_cannot_drain(sc: Scenario) -> list[str]:
    """CP ports the reaction points cannot relieve: the sources through one, each cut to
    MIN_RATE, still send at least its rate (the bottleneck at its slowest); or a q_eq the
    port's buffer never reaches."""
    rp = sc.params.rp
    q_eq_frames = _q_eq_frames(sc)
    stuck, starved = [], []
    for port in congestible_ports(sc):
        n = port.sources
        if n * rp.min_rate_bps >= port.rate_bps:
            stuck.append(f"{port.ref} ({sources_text(n)}, {rate_text(port.rate_bps)})")
        if q_eq_frames >= port.buffer_pkts:
            starved.append(f"{port.ref} ({port.buffer_pkts})")
    out = []
    if stuck:
        out.append(
            f"at MIN_RATE {rate_text(rp.min_rate_bps)} the sources still send at or above "
            f"the rate of {_some(stuck)}: {'its queue' if len(stuck) == 1 else 'their queues'} "
            "cannot drain"
        )
    if starved:
        out.append(
            f"q_eq ({q_eq_frames:g} frames) is at or above the buffer of {_some(starved)}: "
            f"{'its CP never signals' if len(starved) == 1 else 'their CPs never signal'}"
        )
    return out


def _q_eq_frames(sc: Scenario) -> float:
    cp = sc.params.cp
    return cp.q_eq_pkts if cp.queue_unit is QueueUnit.PACKETS else cp.q_eq / sc.network.frame_bytes


def full_buffer_sampling(sc: Scenario) -> float:
    """The share of arriving frames the CP samples where its buffer is full (QntzFb 63):
    Bernoulli's p_base + 63 p_scale, or a frame per the shortest byte interval."""
    cp = sc.params.cp
    if cp.sampling is SamplingMode.BERNOULLI:
        return min(1.0, cp.p_base + QNTZ_FB_MAX * cp.p_scale)
    return min(1.0, sc.network.frame_bytes / min(cp.sample_intervals_bytes))


def increases_per_s(rp: RpParams, rate_bps: float) -> float:
    """How often a source at ``rate_bps`` raises its rate: its byte counter's cycles and its
    timer's (the increases that undo a cut: fast recovery, then active increase)."""
    return rate_bps / (8 * rp.bc_limit_bytes) + (1 / rp.timer_s if rp.timer_enabled else 0.0)


def _cps_that_cannot_keep_up(sc: Scenario) -> list[str]:
    """CP ports whose CNMs cannot bring their sources down.  A cut is undone by the source's
    next FAST_RECOVERY_TH increases (fast recovery halves the gap to the target each time):
    to bring a source down, the CP must reach it at least once in that many of its
    increases, at every rate between where the sources start (their link's rate) and
    where they must end (their share of the port, or MIN_RATE).  With its buffer full
    the CP samples the arriving frames (cp.judge = "arrivals"), or only those it admits,
    which arrive as fast as the port drains ("admitted")."""
    rp, cp = sc.params.rp, sc.params.cp
    if rp.scheme not in CYCLE_SCHEMES:
        return []
    topo, frame_bits = sc.topology, 8 * sc.network.frame_bytes
    p = full_buffer_sampling(sc)
    start = min(*(topo.access_link(s.host).rate_bps for s in sc.sources), sc.workload.max_rate_bps)
    out = []
    for port in congestible_ports(sc):
        n = port.sources
        if n * start <= port.rate_bps:
            continue  # (its sources together cannot fill it)
        for rate in (start, max(port.rate_bps / n, rp.min_rate_bps)):
            if cp.judge is CpJudge.ARRIVALS:
                per_source = p * rate / frame_bits
            else:
                per_source = p * port.rate_bps / frame_bits / n
            increases = increases_per_s(rp, rate)
            if per_source * rp.fast_recovery_th < increases:
                why = (
                    "it judges only the frames its buffer admits, which come as fast as it "
                    "drains (qcn.cp.judge)"
                    if cp.judge is CpJudge.ADMITTED
                    else "it samples too few of them (qcn.cp.p_base, p_scale)"
                )
                out.append(
                    f"the CP of {port.ref} cannot bring its {sources_text(n)} down: with its "
                    f"buffer full it sends each about {per_source:.3g} CNMs a second ({why}), "
                    f"while a source at {rate_text(rate)} raises its rate "
                    f"{increases:.3g} times a second"
                )
                break
    return out


def _sources_through(sc: Scenario) -> Counter[PortRef]:
    """How many sources send through each port.  A source reaches most hosts (all-to-all)
    or few: the ports of the chains from its switch to every host are counted once per
    switch, and each source subtracts the chains of the hosts it does not send to, or adds
    those of the few it does (path by path this was 23 s at 1,024 hosts)."""
    topo = sc.topology
    hosts = [h.name for h in topo.hosts]
    by_home: dict[str, list[tuple[str, ...]]] = {}
    for src in sc.sources:
        by_home.setdefault(topo.attachment(src.host).switch, []).append(src.destinations)
    through: Counter[PortRef] = Counter()
    for home, destinations in by_home.items():
        every: Counter[PortRef] = Counter()  # each port: the hosts whose chain crosses it
        most = 0  # sources of this switch that send to most hosts
        for dsts in destinations:
            if 2 * len(dsts) <= len(hosts):
                through.update({r for d in dsts for r in topo.chain(home, d)})
                continue
            if not every:
                every.update(r for d in hosts for r in topo.chain(home, d))
            most += 1
            sent = set(dsts)
            missed = Counter(r for d in hosts if d not in sent for r in topo.chain(home, d))
            through.subtract(r for r, n in missed.items() if n >= every[r])
        for r in every:
            through[r] += most
    return +through


def _some(items: list[str], shown: int = 3) -> str:
    """The first ``shown`` of ``items``, and how many more."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more CP ports" if more > 0 else "")


@dataclass(frozen=True)
class Fit:
    """Parameters fitted to a network (:func:`fitted`): the fields that change, in the
    units of the scenario the user gave (unscaled where the run is scaled for BMv2), as a
    ``--params`` file gives them."""

    changes: dict[str, dict[str, Any]]
    """{"cp": {...}, "rp": {...}}: the fields the fit changes, nothing else."""
    duration_s: float
    rate_scale: float
    """The standard's rates times this: the slowest congestible port (or source link) over
    the parameters' line rate."""
    time_scale: float
    """The timer (and with the rate scale, the byte counts) times this."""
    to: str
    """What the rates are fitted to (a port or a source link), in words."""

    def toml(self) -> str:
        """The parameter file (``qcn run --params``), its first lines saying what it fits."""
        head = (
            f"# QCN parameters fitted to {self.to} (docs/experiments.md, 'Rates that fit the "
            f"parameters'): rates x{self.rate_scale:.3g}, the timer x{self.time_scale:.3g}.\n"
            f"# Only what the fit changes; run it for at least --duration {self.duration_s:g}\n"
        )
        return head + tomli_w.dumps({k: v for k, v in self.changes.items() if v})

    def fields_set(self) -> list[str]:
        """The fields the file sets, as ``--set`` names them (``qcn.rp.min_rate_bps``)."""
        return [f"qcn.{table}.{name}" for table, fields in self.changes.items() for name in fields]


def fitted(sc: Scenario, units: tuple[float, float] = (1.0, 1.0)) -> Fit:
    """The parameters that remove what :func:`misfits` finds on ``sc``, as the standard's
    proportions hold them on the network's slowest congestible port:

    - rates (MIN_RATE, R_AI, R_HAI, the rate unit) scaled by that port's rate over the
      parameters' line rate (or by a slower source link's, or lower still, so that its
      sources at MIN_RATE send at most :data:`MIN_RATE_SHARE_OF_PORT` of it); the line
      rate itself is the hosts' and stays;
    - the timer by the inverse, at most :data:`TIMER_MAX_S`, and the byte counts by both
      (as a scenario scaled for BMv2: a cycle lasts as many frames at the scaled rates);
    - q_eq below every congestible port's buffer; the CP judging arrivals, at the
      standard's sampling at least;
    - the run's length by the time scale too, so that it spans as many timer cycles as
      the scenario's (a 0.5 Mb/s port, tests/data/slow-link.json: 0.2 s to 800 s; at
      48-200 s the settled queue was 1 frame in one or two of three seeds, the sources
      still climbing back from the onset's cuts, at 400 and 800 s 24-25 frames in all
      three, q_eq 22).

    ``units``: the (rate, time) scale ``sc`` runs at (a BMv2 run's); the fit is given in
    the units of the scenario before it, as ``--params`` and ``--duration`` take them."""
    rp = sc.params.rp
    line, ports = rp.line_rate_bps, congestible_ports(sc)
    scale, to = 1.0, "the parameters' line rate"
    for src in sc.sources:
        rate = sc.topology.access_link(src.host).rate_bps
        if rate / line < scale:
            scale, to = rate / line, f"{src.host}'s link ({rate_text(rate)})"
    for port in ports:
        own = min(
            port.rate_bps / line,
            MIN_RATE_SHARE_OF_PORT * port.rate_bps / (port.sources * rp.min_rate_bps),
        )
        if own < scale:
            scale = own
            to = f"{port.ref} ({rate_text(port.rate_bps)}, {sources_text(port.sources)})"
    time_scale = min(1 / scale, TIMER_MAX_S / rp.timer_s) if scale < 1 else 1.0
    params = scaled_params(sc.params, scale, time_scale)
    cp = replace(params.cp, judge=CpJudge.ARRIVALS)
    smallest = min((p.buffer_pkts for p in ports), default=None)
    if smallest is not None and _q_eq_frames(sc) >= smallest:
        cp = replace(cp, q_eq_pkts=max(1, smallest // 2), q_eq_bytes=0)
    params = replace(params, cp=cp, rp=replace(params.rp, line_rate_bps=line)).validate()
    if _cps_that_cannot_keep_up(replace(sc, params=params)):
        standard = QcnParams().cp
        params = replace(
            params,
            cp=replace(
                params.cp,
                sampling=SamplingMode.BERNOULLI,
                p_base=max(params.cp.p_base, standard.p_base),
                p_scale=max(params.cp.p_scale, standard.p_scale),
            ),
        ).validate()
    rate_unit, time_unit = units
    return Fit(
        _changes(sc.params, params, rate_unit, time_unit),
        float(f"{min(MAX_DURATION_S, sc.duration_s * time_scale / time_unit):.3g}"),
        scale,
        time_scale,
        to,
    )


def _changes(
    before: QcnParams, after: QcnParams, rate_unit: float, time_unit: float
) -> dict[str, dict[str, Any]]:
    """The fields ``after`` changes from ``before``, in units ``rate_unit`` and
    ``time_unit`` times larger (a BMv2 run's back in the user's: each field by its unit)."""
    factor = {Unit.RATE: rate_unit, Unit.TIME: time_unit, Unit.VOLUME: rate_unit * time_unit}
    units = {
        table: {f.name: unit_of(f) for f in fields(cls)}
        for table, cls in (("cp", CpParams), ("rp", RpParams))
    }
    old, new = before.to_dict(), after.to_dict()
    out: dict[str, dict[str, Any]] = {}
    for table in ("cp", "rp"):
        out[table] = {}
        for name, value in new[table].items():
            if isinstance(value, dict) or _same(old[table].get(name), value):
                continue  # (a scheme's own table: the fit leaves it)
            f = factor.get(units[table].get(name) or Unit.NONE, 1.0)
            out[table][name] = _in_units(value, f)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return bool(a == b)


def _in_units(value: Any, factor: float) -> Any:
    """``value`` divided by ``factor`` (a list element by element), whole numbers kept so."""
    if factor == 1.0 or isinstance(value, bool | str):
        return value
    if isinstance(value, list):
        return [_in_units(v, factor) for v in value]
    if isinstance(value, int):
        return max(1, round(value / factor))
    return value / factor


def misfit_line(sc: Scenario, advice: str = "") -> str:
    """:func:`misfits` in one line ("" when the parameters fit), and ``advice``: what to
    run instead (the fitted parameters, as the run that says it writes them)."""
    found = misfits(sc)
    if not found:
        return ""
    return (
        f"the QCN parameters do not fit this network (they are written for "
        f"{rate_text(sc.params.rp.line_rate_bps)} hosts, network.line_rate_bps): "
        + "; ".join(found)
        + (f". {advice}" if advice else "")
        + " (docs/experiments.md, 'Rates that fit the parameters')"
    )
