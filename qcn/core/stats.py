"""Summary statistics the project reports the same way everywhere."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile (0 <= q < 1) of ``values``: the sorted value at index
    int(q * n), the last at most; None for no values."""
    ranked = sorted(values)
    if not ranked:
        return None
    return ranked[min(len(ranked) - 1, int(q * len(ranked)))]


class SlidingQuantiles:
    """The quantiles (as :func:`percentile` takes them) of the last ``window`` values added,
    kept sorted as they come: adding one is a binary search and a move of at most
    ``window`` pointers (a few microseconds), reading a quantile is one index.  Sorting the
    whole window each time a daemon wrote its status held the GIL about a millisecond a
    sort, and CNMs waited behind it."""

    def __init__(self, window: int) -> None:
        self.window = window
        self._order: deque[float] = deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._order)

    def add(self, value: float) -> None:
        if len(self._order) == self.window:
            del self._sorted[bisect.bisect_left(self._sorted, self._order.popleft())]
        self._order.append(value)
        bisect.insort(self._sorted, value)

    def quantile(self, q: float) -> float | None:
        ranked = self._sorted
        if not ranked:
            return None
        return ranked[min(len(ranked) - 1, int(q * len(ranked)))]
