"""What a run recorded, whichever backend ran it: one row per sample interval.

The simulator and the Mininet/BMv2 experiments both fill a :class:`Trace`;
:mod:`qcn.core.results` turns it into CSVs, ``summary.json`` and plots.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qcn.core.flows import FlowRecord
from qcn.core.live import KnobChange
from qcn.core.noise import NoiseRecording


@dataclass
class Trace:
    """What the run recorded, one row per sample interval."""

    times_s: list[float] = field(default_factory=list)
    queue_pkts: list[int] = field(default_factory=list)
    throughput_bps: list[float] = field(default_factory=list)
    capacity_bps: list[float] = field(default_factory=list)
    source_current_rate_bps: list[list[float]] = field(default_factory=list)
    source_target_rate_bps: list[list[float]] = field(default_factory=list)
    source_throughput_bps: list[list[float]] = field(default_factory=list)
    drops_so_far: list[int] = field(default_factory=list)
    """Drops up to each sample (every port's)."""
    source_delivered_bps: list[list[float]] = field(default_factory=list)
    """Per source, the bytes of its that reached their destination in each interval (as
    ``source_throughput_bps`` counts what it sent)."""
    port_queue_pkts: dict[str, list[int]] = field(default_factory=dict)
    """Per port (``str(PortRef)``: the bottleneck and every CP port), its queue at each
    sample; ``queue_pkts`` is the bottleneck's."""
    port_throughput_bps: dict[str, list[float]] = field(default_factory=dict)
    port_drops_so_far: dict[str, list[int]] = field(default_factory=dict)
    port_cnms_so_far: dict[str, list[int]] = field(default_factory=dict)
    """Per port, the CNMs it sent up to each sample (intermediate and end reflections
    included)."""
    port_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per port, its totals: drops, cnms, and with three-point QCN its reflections
    (cp_reflections as an intermediate reflection point, fb_ and p0_reflections as the
    end reflection point); with PAUSE, how often it was paused (``paused``)."""
    drops: int = 0
    cnms: int = 0
    frames_in: int = 0
    events: int = 0
    wall_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    """Backend-specific figures that go into summary.json as they are."""
    noise: NoiseRecording | None = None
    """An emulation's own noise (Mininet runs); summary.json's ``noise`` is made from it."""
    captures: list[str] = field(default_factory=list)
    """Packet captures the run wrote, relative to its results directory."""
    flows: list[FlowRecord] = field(default_factory=list)
    """The flows workload: every flow started, finished or not."""
    knob_changes: list[KnobChange] | None = None
    """A live run's knob changes, in order (knobs.csv's rows; none made: empty); None: the
    run was not live.  summary.json's ``knob_changes`` and queue.png's q_eq steps are made
    from them."""
