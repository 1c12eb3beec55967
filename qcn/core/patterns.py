"""Each traffic pattern a scenario's ``workload.pattern`` names, declared once: what kind of
traffic it is, and which simulator engines and which backends generate it.

Everything that asks about a pattern reads this: the scenario's checks and offered load,
the figures a run reports, the backends' ``patterns`` and refusals, the engines' lists.
Only a pattern's generators (the engines' source loops, ``reaction_point/sources.py``,
the Mininet experiments' traffic) name it, to generate it.  docs/extending.md, "Adding a
traffic pattern", walks through adding one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What a pattern's traffic is, which decides how a run measures and reports it."""

    HOST_SOURCE = "host source"
    """Each source host sends frames of its own at the rate its reaction point allows:
    the streams QCN's seeds run (their figures: queue, rates, fairness, recovery)."""
    FLOWS = "flows"
    """Flows of sizes drawn from a distribution, arriving at a load (their figures: flow
    completion times and slowdowns)."""
    PROGRAM = "program"
    """A program's own traffic through the kernel's limiters (iperf3's TCP or UDP, seed
    001's): the Mininet backend only, on the multihop topology, in hot-spot episodes."""


PYTHON_ENGINE = "python"
"""The simulator's Python engine (``QCN_SIM_ENGINE=python``: simulator/engine.py)."""
COMPILED_CORE = "compiled"
"""The simulator's compiled core (``QCN_SIM_ENGINE=compiled``: simulator/_core.cpp)."""
BOTH_ENGINES = frozenset({PYTHON_ENGINE, COMPILED_CORE})


@dataclass(frozen=True)
class TrafficPattern:
    """A traffic pattern: its name, its kind, and what generates it."""

    name: str
    """As ``workload.pattern`` names it."""
    kind: Kind
    engines: frozenset[str]
    """The simulator engines that generate it (:data:`PYTHON_ENGINE`, :data:`COMPILED_CORE`);
    none: the simulator refuses it."""
    mininet: bool
    """The Mininet backend runs it (a host source by reaction_point/sources.py, the flows by
    the flow sender, a program's by the program)."""
    summary: str
    """What it sends, in a few words."""
    duty_cycled: bool = False
    """Its sources are on and off (mean_on_s, mean_off_s): what they offer is their rate
    times the duty cycle."""
    own_congestion_control: bool = False
    """Its senders back off on their own (the kernel's TCP): a change of the bottleneck's
    rate is not a phase whose figures are QCN's."""


DECLARED: tuple[TrafficPattern, ...] = (
    TrafficPattern(
        "bernoulli",
        Kind.HOST_SOURCE,
        BOTH_ENGINES,
        mininet=True,
        summary="a frame in each slot of the line rate with the source's load as probability",
    ),
    TrafficPattern(
        "constant",
        Kind.HOST_SOURCE,
        BOTH_ENGINES,
        mininet=True,
        summary="frames evenly spaced at the source's rate",
    ),
    TrafficPattern(
        "onoff",
        Kind.HOST_SOURCE,
        BOTH_ENGINES,
        mininet=True,
        summary="a constant rate in exponential on periods, silence in off periods",
        duty_cycled=True,
    ),
    TrafficPattern(
        "tcp",
        Kind.PROGRAM,
        frozenset(),
        mininet=True,
        summary="iperf3's TCP (the kernel's)",
        own_congestion_control=True,
    ),
    TrafficPattern("udp", Kind.PROGRAM, frozenset(), mininet=True, summary="iperf3's UDP"),
    TrafficPattern(
        "flows",
        Kind.FLOWS,
        BOTH_ENGINES,
        mininet=True,
        summary="flows of sizes drawn from a distribution, arriving at a load",
    ),
)
"""Every pattern, in the order the scenario format lists them."""


def declared() -> dict[str, TrafficPattern]:
    """Every declared pattern by name (read when asked: a test may declare one more)."""
    return {p.name: p for p in DECLARED}


def names() -> tuple[str, ...]:
    """Every declared pattern's name."""
    return tuple(p.name for p in DECLARED)


def pattern(name: str) -> TrafficPattern:
    """The declared pattern ``name``; a KeyError for one not declared (a scenario's
    validation refuses it first).  (A walk of six: no table built per call.)"""
    for p in DECLARED:
        if p.name == name:
            return p
    raise KeyError(name)


def generated_by(engine: str) -> tuple[str, ...]:
    """The patterns the simulator engine ``engine`` generates."""
    return tuple(p.name for p in DECLARED if engine in p.engines)


def on_mininet(kind: Kind | None = None) -> tuple[str, ...]:
    """The patterns the Mininet backend runs (of ``kind``, if given)."""
    return tuple(p.name for p in DECLARED if p.mininet and kind in (None, p.kind))


def of_kind(kind: Kind) -> tuple[str, ...]:
    """The patterns of ``kind``."""
    return tuple(p.name for p in DECLARED if p.kind is kind)
