"""qcn.core.stats: the quantile every latency figure is reported with."""

from __future__ import annotations

import random

from qcn.core.stats import SlidingQuantiles, percentile


def test_the_sorted_value_at_q_times_n() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, unsorted
    assert percentile(values, 0.5) == 51.0  # index 50
    assert percentile(values, 0.99) == 100.0  # index 99
    assert percentile([3.0], 0.99) == 3.0
    assert percentile([1.0, 2.0], 1.0) == 2.0  # the last at most


def test_no_values_no_quantile() -> None:
    assert percentile([], 0.5) is None


def test_sliding_quantiles_are_the_windows_percentiles() -> None:
    rng = random.Random(4)
    window = SlidingQuantiles(100)
    seen: list[float] = []
    assert window.quantile(0.99) is None
    for _ in range(1000):
        value = rng.expovariate(1.0)
        window.add(value)
        seen.append(value)
        for q in (0.0, 0.5, 0.99):
            assert window.quantile(q) == percentile(seen[-100:], q)
    assert len(window) == 100
