"""Summary statistics the project reports the same way everywhere."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile (0 <= q < 1) of ``values``: the sorted value at index
    int(q * n), the last at most; None for no values."""
    ranked = sorted(values)
    if not ranked:
        return None
    return ranked[min(len(ranked) - 1, int(q * len(ranked)))]
