"""What a network costs BMv2 on this machine, predicted before a run (docs/experiments.md,
"How large a network this machine carries"), and the scale chosen from it.

A BMv2 switch spends a measured CPU time on every frame it forwards
(:data:`FRAME_COST_S`, from ``bench.pipeline_bench``).  The frames each switch must
forward follow from the scenario scaled for BMv2: what each source offers, spread over
its destinations, along each route, each port passing no more than its link carries.
Their sum over the switches, times the cost, is the share of a core the switches will
take.  Where it passes :data:`SWITCH_BUDGET_CORES`, the run is slowed down: rates scale
down and times up by the same factor, so that every byte quantity (flow sizes, byte
counters) stays what the scenario's own scaling made it, and the run lasts longer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass

from qcn.core.scenario import MAX_TIME_SCALE, Scenario, ScenarioError
from qcn.core.topology import PortRef, Topology

FRAME_COST_S = 115e-6
"""A switch's CPU time for one frame it forwards (two-point QCN, 1500-byte frames, all its
threads): fitted to the switches' CPU measured in runs of four networks on this machine
(2026-11-27, quiet; docs/experiments.md, "How large a network this machine carries"),
109-115 us a frame.  ``bench.pipeline_bench``'s 100-byte frames at a steady pace cost 61."""
THREE_POINT_FRAME_COST_S = FRAME_COST_S / 0.78
"""Three-point QCN's pipeline (the Fb tag pushed and popped): 0.77-0.78 of two-point's
frames per CPU-second (bench.pipeline_bench)."""
SWITCH_BUDGET_CORES = 0.4
"""The share of a core the switches may take together (docs/experiments.md): of the runs
measured, those at 0.51 and 0.85 of a core were noise-ok on a quiet machine, those at 0.8
to 1.2 noisy; with another process taking one of the 2 cores there is less."""
OWN_SCALE_MAX_CORES = 1.0
"""A scenario's own [bmv2] scale stands on its own network up to this predicted load: the
seeds' scenarios were measured and held to the simulator at theirs (0.08 to 0.81 of a
core); past it (HPCC's fat-tree: 35 cores) the model chooses there too."""
MAX_RUN_S = 600.0
"""The longest run a chosen scale may make (a scenario's own [bmv2] scale may be longer)."""


@dataclass(frozen=True)
class SwitchLoad:
    frames_per_s: dict[str, float]
    """Each switch: the frames it must forward a second."""
    frame_cost_s: float

    @property
    def cores(self) -> float:
        return sum(self.frames_per_s.values()) * self.frame_cost_s


def switch_load(sc: Scenario) -> SwitchLoad:
    """What ``sc`` (in BMv2's units: :meth:`Scenario.scaled_for_bmv2`) asks of its
    switches: each source's offered load split evenly over its destinations, followed
    along each route (:func:`load_along`)."""
    offered_total = max(sc.offered_bps(t * sc.duration_s / 10) for t in range(10))
    sources = sc.sources
    per_source = offered_total / len(sources) if sources else 0.0
    offers = [
        (src.host, dst, per_source / len(src.destinations))
        for src in sources
        for dst in src.destinations
    ]
    cost = THREE_POINT_FRAME_COST_S if sc.params.cp.three_point else FRAME_COST_S
    return load_along(sc.topology, offers, sc.network.frame_bytes, cost)


def full_line_rate_load(topo: Topology, frame_bytes: int) -> SwitchLoad:
    """What a network asks of its switches when every host sends at its link's rate,
    spread evenly over the hosts it may send to (:meth:`Topology.traffic_basis`): the
    most a user's own traffic on ``qcn net up`` can ask."""
    if topo.pairs:
        basis = topo.traffic_basis()
        fan_out = Counter(src for src, _dst in basis)
        offers = [(src, dst, topo.access_link(src).rate_bps / fan_out[src]) for src, dst in basis]
        return load_along(topo, offers, frame_bytes, FRAME_COST_S)
    # Any host to any other: each switch's hosts' shares to a destination add up to one
    # chain's offer, counted per switch, not per pair (3,968 hosts' 15.7 M pairs took
    # `qcn net show` 67 s; now 62 switches x 3,968 destinations).
    share = {h.name: topo.access_link(h.name).rate_bps / (len(topo.hosts) - 1) for h in topo.hosts}
    home = {h.name: topo.attachment(h.name).switch for h in topo.hosts}
    from_switch: dict[str, float] = {}
    for host, rate in share.items():
        from_switch[home[host]] = from_switch.get(home[host], 0.0) + rate
    by_chain = {
        (switch, dst): total - (share[dst] if home[dst] == switch else 0.0)
        for switch, total in from_switch.items()
        for dst in share
    }
    return load_of_chains(
        topo, {k: v for k, v in by_chain.items() if v > 0}, frame_bytes, FRAME_COST_S
    )


def load_along(
    topo: Topology, offers: list[tuple[str, str, float]], frame_bytes: int, frame_cost_s: float
) -> SwitchLoad:
    """The frames each switch forwards a second for ``offers`` (source host, destination
    host, b/s), each followed along its route (:func:`load_of_chains`)."""
    # A route is its first switch's chain: offers from one switch to one host add up
    # (a leaf's 32 hosts to all the others: a thousandth of the pairs' chains to follow).
    by_chain: dict[tuple[str, str], float] = {}
    for src, dst, rate in offers:
        key = (topo.attachment(src).switch, dst)
        by_chain[key] = by_chain.get(key, 0.0) + rate
    return load_of_chains(topo, by_chain, frame_bytes, frame_cost_s)


def load_of_chains(
    topo: Topology,
    by_chain: dict[tuple[str, str], float],
    frame_bytes: int,
    frame_cost_s: float,
) -> SwitchLoad:
    """The frames each switch forwards a second for what each (first switch, destination
    host) chain is offered, b/s: a port offered more than its link carries passes its
    link's worth, the same share of every chain's frames through it."""
    frame_bits = 8 * frame_bytes
    # Ports as (switch, port) tuples: a PortRef's hash is a Python call, and 3,968 hosts'
    # 246 k chains made them most of the time.
    paths: list[tuple[float, list[tuple[str, int]]]] = []
    through: dict[tuple[str, int], float] = {}
    for (home, dst), rate in by_chain.items():
        chain = [(ref.switch, ref.port) for ref in topo.chain(home, dst)]
        paths.append((rate, chain))
        for key in chain:
            through[key] = through.get(key, 0.0) + rate
    passed = {
        key: min(1.0, topo.link_at(PortRef(*key)).rate_bps / bps)
        for key, bps in through.items()
        if bps
    }
    frames: dict[str, float] = {}
    for offered, chain in paths:
        rate = offered
        for key in chain:  # the frames reaching this switch, then what its port passes on
            frames[key[0]] = frames.get(key[0], 0.0) + rate / frame_bits
            rate *= passed.get(key, 1.0)
    return SwitchLoad(frames, frame_cost_s)


@dataclass(frozen=True)
class ScaleChoice:
    rate_scale: float
    time_scale: float
    load: SwitchLoad
    """The switches' load at the chosen scale."""
    slowed_by: float
    """How much slower than the scenario's own [bmv2] scale (1: its own)."""

    def line(self, sc: Scenario) -> str:
        """The choice and why, in one line."""
        own = f"its own [bmv2] scale (rates x{sc.bmv2.rate_scale:g}, times x{sc.bmv2.time_scale:g})"
        frames = sum(self.load.frames_per_s.values())
        if self.slowed_by == 1:
            return (
                f"scale: {own}: the switches' predicted load {self.load.cores:.2f} of a core "
                f"({frames:,.0f} frames/s over {len(self.load.frames_per_s)} switches) is "
                f"within the budget of {SWITCH_BUDGET_CORES:g}"
            )
        return (
            f"scale: rates x{self.rate_scale:.3g}, times x{self.time_scale:.4g} "
            f"({self.slowed_by:.2f}x slower than {own}): at its own the switches would take "
            f"{self.load.cores * self.slowed_by:.2f} of a core, over the budget of "
            f"{SWITCH_BUDGET_CORES:g} (predicted, {self.load.frame_cost_s * 1e6:.0f} us a "
            "frame: docs/experiments.md); --scale chooses another"
        )


class ScaleError(ValueError):
    pass


def choose_scale(sc: Scenario) -> ScaleChoice:
    """The scale that keeps the switches within :data:`SWITCH_BUDGET_CORES`: the
    scenario's own [bmv2] scale if it does, else its rates slowed and its times stretched
    by the same factor.  A network no scale fits within :data:`MAX_RUN_S` raises
    ScaleError, saying what would."""
    own = switch_load(sc.scaled_for_bmv2())
    if own.cores <= SWITCH_BUDGET_CORES:
        return ScaleChoice(sc.bmv2.rate_scale, sc.bmv2.time_scale, own, 1.0)
    slower = own.cores / SWITCH_BUDGET_CORES
    k, tau = sc.bmv2.rate_scale / slower, sc.bmv2.time_scale * slower
    if tau > MAX_TIME_SCALE:
        raise ScaleError(
            f"{sc.network.topology}: its switches would take {own.cores:.2f} of a core at "
            f"the scenario's scale; slowed to the budget of {SWITCH_BUDGET_CORES:g} its times "
            f"would scale x{tau:,.0f}, past the bound of x{MAX_TIME_SCALE:g}: a smaller "
            "network, or the simulator"
        )
    run_s = sc.duration_s * tau
    if run_s > MAX_RUN_S:
        fits = MAX_RUN_S / tau
        raise ScaleError(
            f"{sc.network.topology}: its switches would take {own.cores:.2f} of a core at "
            f"the scenario's scale; slowed to the budget of {SWITCH_BUDGET_CORES:g} a run of "
            f"{sc.duration_s:g} s lasts {run_s:,.0f} s, over {MAX_RUN_S:g} s: at most "
            f"--duration {fits:.3g} fits, or a smaller network, or the simulator"
        )
    scaled = sc.with_overrides({"bmv2.rate_scale": k, "bmv2.time_scale": tau})
    return ScaleChoice(k, tau, switch_load(scaled.scaled_for_bmv2()), slower)


SCALE_FIELDS = ("bmv2", "bmv2.rate_scale", "bmv2.time_scale")
LOAD_FIELDS = (
    "network", "network.topology", "network.sources", "network.innocent_sources",
    "network.line_rate_bps", "network.bottleneck_rate_bps", "network.fabric_rate_bps",
    "network.innocent_rate_bps", "workload", "workload.pattern", "workload.traffic",
    "workload.load", "workload.max_rate_bps",
)  # fmt: skip
"""A --set of any of these makes another network or load than the scenario's [bmv2] scale
was measured on: the capacity model chooses its scale."""


def with_chosen_scale(sc: Scenario, given: Collection[str]) -> tuple[Scenario, str]:
    """``sc`` at the scale a BMv2 run of it takes, and the choice in words (``given``: the
    command line's --set keys): the scale --set gave; else, on the scenario's own network,
    its [bmv2] scale, chosen and held to the simulator by measurement (qcn compare); on
    another network or load (:data:`LOAD_FIELDS`), the capacity model's
    (:func:`choose_scale`).
    A network that fits no scale raises ScenarioError."""
    k, tau = sc.bmv2.rate_scale, sc.bmv2.time_scale
    if any(key in SCALE_FIELDS for key in given):
        return sc, f"rates x{k:g}, times x{tau:g} (the scale the command line gave)"
    if not any(key in LOAD_FIELDS for key in given):
        cores = switch_load(sc.scaled_for_bmv2()).cores
        if cores <= OWN_SCALE_MAX_CORES:
            return sc, (
                f"rates x{k:g}, times x{tau:g} (the scenario's [bmv2] section, measured; the "
                f"switches' predicted load {cores:.2f} of a core)"
            )
    try:
        choice = choose_scale(sc)
    except ScaleError as e:
        raise ScenarioError(str(e)) from None
    if choice.slowed_by == 1:
        return sc, (
            f"rates x{choice.rate_scale:g}, times x{choice.time_scale:g} (the scenario's "
            f"[bmv2] section; the switches' predicted load {choice.load.cores:.2f} of a core)"
        )
    chosen = sc.with_overrides(
        {"bmv2.rate_scale": choice.rate_scale, "bmv2.time_scale": choice.time_scale}
    )
    return chosen, choice.line(sc)
