"""Max-min fair shares: what each flow would get if the network shared every link fairly.

The parking lot's question (docs/topology.md, qcn-spec's "Paths with several CPs") is how
far a flow crossing several congested links falls below its fair share ("beat-down").
The fair share is the max-min fair allocation, computed by water filling: every flow's
rate rises together; when a link is full (or a flow reaches its demand) the flows through
it stop and keep their rate, and the others rise on.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from qcn.core.errors import QcnError

RELATIVE_SLACK = 1e-12
"""A link whose spare capacity is below this share of it counts as full (rounding)."""


Link = TypeVar("Link", bound=Hashable)
"""Whatever names a link (a port, a host's uplink)."""


class FairnessError(QcnError, ValueError):
    """Shares that cannot be computed: a flow with no limit, or an unknown link."""


def max_min_fair(
    paths: Sequence[Sequence[Link]],
    capacity: Mapping[Link, float],
    demands: Sequence[float] | None = None,
) -> list[float]:
    """The max-min fair rate of each flow: flow i crosses the links ``paths[i]`` (each
    once) and wants at most ``demands[i]`` (none: as much as it can get).  Water filling,
    as in Bertsekas and Gallager, "Data Networks", 6.5.2."""
    n = len(paths)
    want = list(demands) if demands is not None else [float("inf")] * n
    if len(want) != n:
        raise FairnessError(f"{n} flows but {len(want)} demands")
    users: dict[Link, list[int]] = {}
    for i, path in enumerate(paths):
        for link in dict.fromkeys(path):
            if link not in capacity:
                raise FairnessError(f"flow {i}: no capacity for link {link!r}")
            users.setdefault(link, []).append(i)
    for i in range(n):
        if not paths[i] and want[i] == float("inf"):
            raise FairnessError(f"flow {i} crosses no link and has no demand: no limit")
    rate = [0.0] * n
    active = {i for i in range(n) if want[i] > 0}
    spare = {link: float(capacity[link]) for link in users}
    while active:
        # The largest equal rise before a link fills or a flow reaches its demand.
        rise = min(want[i] - rate[i] for i in active)
        for link, flows in users.items():
            k = sum(1 for i in flows if i in active)
            if k:
                rise = min(rise, spare[link] / k)
        for i in active:
            rate[i] += rise
        for link, flows in users.items():
            spare[link] -= rise * sum(1 for i in flows if i in active)
        done = {i for i in active if rate[i] >= want[i] * (1 - RELATIVE_SLACK)}
        for link, flows in users.items():
            if spare[link] <= RELATIVE_SLACK * capacity[link]:
                done.update(i for i in flows if i in active)
        active -= done
    return rate
