"""Whether a scenario's QCN parameters fit the network it runs on (docs/experiments.md,
"Rates that fit the parameters").

The standard's rates and byte counts are written for 10 Gb/s hosts: MIN_RATE, R_AI and
R_HAI are fixed fractions of that line rate, and BC_LIMIT a fixed time at it.  The project
scales them with the network only where it scales the whole run (a scenario's ``[bmv2]``
section, ``qcn net up``); a network whose links run at other rates than the parameters
were scaled for (a topology file's own rates) is run as given, and :func:`misfits` says
what does not fit, in words a user can act on.
"""

from __future__ import annotations

from collections import Counter

from qcn.core.params import QueueUnit, RpParams
from qcn.core.scenario import SOURCE_TOPOLOGIES, Scenario
from qcn.core.topology import PortRef, is_generator_spec

STANDARD = RpParams()
"""The standard's reaction point, at its own line rate (10 Gb/s): the proportions below."""
MISFIT_FACTOR = 100.0
"""A rate parameter does not fit a host whose link it is more than this many times the
standard's share of (MIN_RATE: a tenth of the link; R_AI: 5 %; R_HAI: half of it), and the
byte counter when its cycle at the link's rate is more than this many times the standard's
share of the timer (120 us of 15 ms: 0.8 of the timer)."""

FILE_HINT = (
    "Leave the file's rates out (its links then run at network.line_rate_bps), run it "
    "--scaled (BMv2's rates), or --set qcn.rp.* to the links"
)
GENERATOR_HINT = "Set qcn.rp.* to the links' rates, or the links to the parameters'"


def rate_text(bps: float) -> str:
    """``bps`` in the unit that reads best (``10 Mb/s``, ``2.5 Gb/s``, ``800 b/s``)."""
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} b/s"


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
    return out


def _standard_cycle_share() -> float:
    """The standard's byte-counter cycle at its line rate, over its timer (0.008)."""
    return 8 * STANDARD.bc_limit_bytes / STANDARD.line_rate_bps / STANDARD.timer_s


def _ports_that_cannot_drain(sc: Scenario) -> list[str]:
    """CP ports the reaction points cannot relieve: the sources through one, each cut to
    MIN_RATE, still send at least its rate (the bottleneck at its slowest); or a q_eq the
    port's buffer never reaches."""
    topo, rp, cp = sc.topology, sc.params.rp, sc.params.cp
    through = _sources_through(sc)
    slowest_bottleneck = min(
        [sc.initial_capacity_bps, *(c.bottleneck_rate_bps for c in sc.schedule)]
    )
    q_eq_frames = (
        cp.q_eq_pkts if cp.queue_unit is QueueUnit.PACKETS else cp.q_eq / sc.network.frame_bytes
    )
    stuck, starved = [], []
    for ref in topo.cp_ports:
        link = topo.link_at(ref)
        rate = slowest_bottleneck if ref == sc.bottleneck_port else link.rate_bps
        n = through.get(ref, 0)
        if n and n * rp.min_rate_bps >= rate:
            stuck.append(f"{ref} ({n} source{'s' if n > 1 else ''}, {rate_text(rate)})")
        if n and q_eq_frames >= link.buffer_pkts:
            starved.append(f"{ref} ({link.buffer_pkts})")
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


def misfit_line(sc: Scenario) -> str:
    """:func:`misfits` in one line ("" when the parameters fit), with what to do."""
    found = misfits(sc)
    if not found:
        return ""
    spec = sc.network.topology
    is_file = not is_generator_spec(spec) and spec not in SOURCE_TOPOLOGIES
    return (
        f"the QCN parameters do not fit this network (they are written for "
        f"{rate_text(sc.params.rp.line_rate_bps)} hosts, network.line_rate_bps): "
        + "; ".join(found)
        + f". {FILE_HINT if is_file else GENERATOR_HINT} (docs/experiments.md, 'Rates that "
        "fit the parameters')"
    )
