"""Which process a process id names: an id alone can be reused, an id and a start time name
one process (the reaction-point daemon's status, a dead run's leftovers)."""

from __future__ import annotations

import os
from pathlib import Path


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if there is none, or
    it has ended: a zombie (ended, not yet reaped; where PID 1 does not reap, as in some
    containers, it stays) counted as live, and what it left was never cleaned up."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields 3 (state) and 22; the command name (field 2) may hold spaces: count from ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None if there is none."""
    ticks = process_start_ticks(pid)
    if ticks is None:
        return None
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return int(line.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")
    return None
