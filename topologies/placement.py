"""Which CPUs a Mininet run's switches and hosts run on (docs/bmv2.md, "Pinned switches").

BMv2 hands every frame from thread to thread (receive, ingress, egress, transmit).  Left
to roam, those threads wake each other across CPUs, and in this virtual machine a wakeup
across CPUs is dear: ``perf`` put a quarter of an unpinned switch's time in context
switches and an eighth in waking threads, and a switch pinned to one CPU took 0.37-0.50 of
a core for the load that took it 0.83-1.16 unpinned.  So each switch runs on one CPU,
every one of its threads there; the switches are spread over the CPUs the run may use but
one, which the hosts' processes (senders, sinks, reaction points, the runner) get to
themselves, so that a frame crosses CPUs once, from its host into the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuPlan:
    """Where a run's processes go: each switch's CPU, and the hosts' CPUs (empty: anywhere)."""

    switch_cpu: dict[str, int]
    host_cpus: tuple[int, ...]
    why: str
    """The plan in words, for the run's progress and its summary."""

    def cpus_of(self, switch: str) -> tuple[int, ...]:
        """The CPUs ``switch``'s threads may use (empty: any)."""
        cpu = self.switch_cpu.get(switch)
        return () if cpu is None else (cpu,)


UNPINNED = CpuPlan({}, (), "not pinned: the kernel places every process")


def usable_cpus() -> list[int]:
    """The CPUs this process (and so the run it starts) may use."""
    return sorted(os.sched_getaffinity(0))


def plan_cpus(switch_frames: Mapping[str, float], cpus: Sequence[int]) -> CpuPlan:
    """Each switch on one CPU, the hosts' processes on another: on ``cpus`` (two or more),
    the first is the hosts', the others take the switches, the busiest switch first onto
    the CPU with the least predicted frames so far (``switch_frames``: each switch's
    frames a second; a switch it does not name counts as none).  On one CPU there is
    nothing to separate: nothing is pinned, and the plan says so."""
    if not switch_frames:
        return UNPINNED
    if len(cpus) < 2:
        return CpuPlan(
            {}, (), f"not pinned: the run may use {len(cpus)} CPU, the switches and hosts share it"
        )
    host_cpu, *switch_cpus = cpus
    frames = dict.fromkeys(switch_cpus, 0.0)
    placed: dict[str, int] = {}
    for name in sorted(switch_frames, key=lambda s: (-switch_frames[s], s)):
        cpu = min(switch_cpus, key=lambda c: (frames[c], c))
        placed[name] = cpu
        frames[cpu] += switch_frames[name]
    by_cpu = {c: sorted(n for n, at in placed.items() if at == c) for c in switch_cpus}
    where = "; ".join(
        f"CPU {c}: {len(names)} switch{'es' if len(names) != 1 else ''}"
        for c, names in by_cpu.items()
        if names
    )
    return CpuPlan(placed, (host_cpu,), f"switches pinned ({where}); hosts on CPU {host_cpu}")


def taskset_prefix(cpus: Sequence[int]) -> list[str]:
    """A command prefix that runs a command (and every thread it starts) on ``cpus``;
    nothing where they are not given."""
    return ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
