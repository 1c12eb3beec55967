"""What a network costs BMv2 on this machine, predicted before a run (docs/experiments.md,
"How large a network this machine carries"), and the scale chosen from it.

A BMv2 switch spends a measured CPU time on every frame it forwards, and some at rest
(:class:`FrameCost`: this machine's BMv2, calibrated by qcn.topologies.calibration; else
:data:`FRAME_COST_S`).  The frames each switch must
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
from dataclasses import dataclass, replace

from qcn.core.scenario import MAX_TIME_SCALE, Scenario, ScenarioError
from qcn.core.topology import PortRef, Topology

FRAME_COST_S = 159e-6
"""A switch's CPU time for one frame it forwards (two-point QCN, 1500-byte frames, all its
threads, placed by the kernel): p4lang's default BMv2 build calibrated on the developers'
machine (2026-11-28; docs/bmv2.md, "The capacity model's calibration").  The figure the
model uses where this machine's BMv2 cannot be calibrated (:data:`BUILT_IN_COST`).  It
matches what runs of four networks took there, 143-156 us a frame (the 115 us fitted
before, times the 1.24-1.36 the switches then took beyond it: docs/experiments.md)."""
THREE_POINT_COST_FACTOR = 1 / 0.78
"""Three-point QCN's pipeline (the Fb tag pushed and popped): 0.77-0.78 of two-point's
frames per CPU-second (bench.pipeline_bench)."""


@dataclass(frozen=True)
class FrameCost:
    """What BMv2 costs on this machine: CPU per frame forwarded, and per switch at rest."""

    frame_s: float
    idle_cores: float
    """One switch's CPU at rest (its gRPC and Thrift threads), in cores."""
    source: str
    """Where the figures come from, in words (said by every command that chooses a scale)."""

    def describe(self) -> str:
        """The figures and their source, in words."""
        return (
            f"BMv2 costs {self.frame_s * 1e6:.0f} us a frame and {self.idle_cores:.3f} of a "
            f"core a switch at rest: {self.source}"
        )

    def because(self, why: str) -> FrameCost:
        return replace(self, source=f"{self.source} ({why})")

    def three_point(self) -> FrameCost:
        return replace(self, frame_s=self.frame_s * THREE_POINT_COST_FACTOR)


BUILT_IN_COST = FrameCost(
    FRAME_COST_S, 0.0015, "the built-in figure, calibrated on the developers' machine"
)
SWITCH_BUDGET_CORES = 0.55
"""The share of a core the switches may take together, predicted with the calibrated cost
(docs/experiments.md): the runs at the scales chosen before calibration, judged noise-ok
with a busy loop taking a core, took 0.50-0.63 of a core (0.4 predicted with the 115 us
fitted then, which fell short by a quarter); 0.4 x 159/115 keeps those scales.  At 0.6
and a build for speed, leaf-spine:2,4,2's switches took 0.85 and the run was noisy
(docs/bmv2.md)."""
OWN_SCALE_MAX_CORES = 2.0
"""A scenario's own [bmv2] scale stands on its own network up to this predicted load: the
seeds' scenarios were measured and held to the simulator at theirs (0.08 to 0.81 of a
core at the built-in 115 us a frame; 0.11 to 1.17 at the 159 us this machine's default
build was calibrated at, unpinned, 2026-11-28); past it (HPCC's fat-tree: 35 cores) the
model chooses there too."""
MAX_RUN_S = 600.0
"""The longest run a chosen scale may make (a scenario's own [bmv2] scale may be longer)."""


@dataclass(frozen=True)
class SwitchLoad:
    frames_per_s: dict[str, float]
    """Each switch: the frames it must forward a second."""
    cost: FrameCost
    switches: int
    """How many switches the network has (each costs its CPU at rest)."""

    @property
    def frame_cost_s(self) -> float:
        return self.cost.frame_s

    @property
    def at_rest_cores(self) -> float:
        """The switches' share at rest, which no rate changes."""
        return self.switches * self.cost.idle_cores

    @property
    def cores(self) -> float:
        return self.at_rest_cores + sum(self.frames_per_s.values()) * self.cost.frame_s


def switch_load(sc: Scenario, cost: FrameCost = BUILT_IN_COST) -> SwitchLoad:
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
    cost = cost.three_point() if sc.params.cp.three_point else cost
    return load_along(sc.topology, offers, sc.network.frame_bytes, cost)


def full_line_rate_load(
    topo: Topology, frame_bytes: int, cost: FrameCost = BUILT_IN_COST
) -> SwitchLoad:
    """What a network asks of its switches when every host sends at its link's rate,
    spread evenly over the hosts it may send to (:meth:`Topology.traffic_basis`): the
    most a user's own traffic on ``qcn net up`` can ask."""
    if topo.pairs:
        basis = topo.traffic_basis()
        fan_out = Counter(src for src, _dst in basis)
        offers = [(src, dst, topo.access_link(src).rate_bps / fan_out[src]) for src, dst in basis]
        return load_along(topo, offers, frame_bytes, cost)
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
    return load_of_chains(topo, {k: v for k, v in by_chain.items() if v > 0}, frame_bytes, cost)


def load_along(
    topo: Topology, offers: list[tuple[str, str, float]], frame_bytes: int, cost: FrameCost
) -> SwitchLoad:
    """The frames each switch forwards a second for ``offers`` (source host, destination
    host, b/s), each followed along its route (:func:`load_of_chains`)."""
    # A route is its first switch's chain: offers from one switch to one host add up
    # (a leaf's 32 hosts to all the others: a thousandth of the pairs' chains to follow).
    by_chain: dict[tuple[str, str], float] = {}
    for src, dst, rate in offers:
        key = (topo.attachment(src).switch, dst)
        by_chain[key] = by_chain.get(key, 0.0) + rate
    return load_of_chains(topo, by_chain, frame_bytes, cost)


def load_of_chains(
    topo: Topology,
    by_chain: dict[tuple[str, str], float],
    frame_bytes: int,
    cost: FrameCost,
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
    return SwitchLoad(frames, cost, len(topo.switches))


@dataclass(frozen=True)
class ScaleChoice:
    rate_scale: float
    time_scale: float
    load: SwitchLoad
    """The switches' load at the chosen scale."""
    slowed_by: float
    """How much slower than the scenario's own [bmv2] scale (1: its own)."""
    own_cores: float
    """The switches' load at the scenario's own scale."""

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
            f"{self.own_cores:.2f} of a core, over the budget of {SWITCH_BUDGET_CORES:g} "
            f"(predicted at {self.load.frame_cost_s * 1e6:.0f} us a frame: "
            f"{self.load.cost.source}); --scale chooses another"
        )


class ScaleError(ValueError):
    pass


def choose_scale(sc: Scenario, cost: FrameCost = BUILT_IN_COST) -> ScaleChoice:
    """The scale that keeps the switches within :data:`SWITCH_BUDGET_CORES`: the
    scenario's own [bmv2] scale if it does, else its rates slowed and its times stretched
    by the same factor (the switches' cost at rest stays what it is: the frames' share
    must fit beside it).  A network no scale fits within :data:`MAX_RUN_S` raises
    ScaleError, saying what would."""
    own = switch_load(sc.scaled_for_bmv2(), cost)
    if own.cores <= SWITCH_BUDGET_CORES:
        return ScaleChoice(sc.bmv2.rate_scale, sc.bmv2.time_scale, own, 1.0, own.cores)
    at_rest = own.at_rest_cores
    if at_rest >= SWITCH_BUDGET_CORES / 2:
        raise ScaleError(
            f"{sc.network.topology}: its {own.switches} switches would take {at_rest:.2f} of a "
            f"core at rest alone, half the budget of {SWITCH_BUDGET_CORES:g} or more "
            f"({cost.source}): a smaller network, or the simulator"
        )
    slower = (own.cores - at_rest) / (SWITCH_BUDGET_CORES - at_rest)
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
    return ScaleChoice(k, tau, switch_load(scaled.scaled_for_bmv2(), cost), slower, own.cores)


SCALE_FIELDS = ("bmv2", "bmv2.rate_scale", "bmv2.time_scale")
LOAD_FIELDS = (
    "network", "network.topology", "network.sources", "network.innocent_sources",
    "network.line_rate_bps", "network.bottleneck_rate_bps", "network.fabric_rate_bps",
    "network.innocent_rate_bps", "workload", "workload.pattern", "workload.traffic",
    "workload.load", "workload.max_rate_bps",
)  # fmt: skip
"""A --set of any of these makes another network or load than the scenario's [bmv2] scale
was measured on: the capacity model chooses its scale."""


def with_chosen_scale(
    sc: Scenario, given: Collection[str], cost: FrameCost = BUILT_IN_COST
) -> tuple[Scenario, str]:
    """``sc`` at the scale a BMv2 run of it takes, and the choice in words (``given``: the
    command line's --set keys; ``cost``: this machine's BMv2, qcn.topologies.calibration):
    the scale --set gave; else, on the scenario's own network, its [bmv2] scale, chosen
    and held to the simulator by measurement (qcn compare); on another network or load
    (:data:`LOAD_FIELDS`), the capacity model's (:func:`choose_scale`).
    A network that fits no scale raises ScenarioError."""
    k, tau = sc.bmv2.rate_scale, sc.bmv2.time_scale
    if any(key in SCALE_FIELDS for key in given):
        return sc, f"rates x{k:g}, times x{tau:g} (the scale the command line gave)"
    if not any(key in LOAD_FIELDS for key in given):
        cores = switch_load(sc.scaled_for_bmv2(), cost).cores
        if cores <= OWN_SCALE_MAX_CORES:
            return sc, (
                f"rates x{k:g}, times x{tau:g} (the scenario's [bmv2] section, measured; the "
                f"switches' predicted load {cores:.2f} of a core)"
            )
    try:
        choice = choose_scale(sc, cost)
    except ScaleError as e:
        raise ScenarioError(str(e)) from None
    if choice.slowed_by == 1:
        return sc, (
            f"rates x{choice.rate_scale:g}, times x{choice.time_scale:g} (the scenario's "
            f"[bmv2] section; the switches' predicted load {choice.load.cores:.2f} of a core, "
            f"{cost.source})"
        )
    chosen = sc.with_overrides(
        {"bmv2.rate_scale": choice.rate_scale, "bmv2.time_scale": choice.time_scale}
    )
    return chosen, choice.line(sc)
