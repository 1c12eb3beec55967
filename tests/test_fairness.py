"""Max-min fair shares by water filling (qcn.core.fairness), and the parking lot's figures
that rest on them (qcn.core.results)."""

from __future__ import annotations

import pytest

from qcn.core import scenario as scenarios
from qcn.core.fairness import FairnessError, max_min_fair
from qcn.core.results import fair_shares_bps, long_flow


def test_the_parking_lot_gives_every_flow_half_a_hop() -> None:
    hops = ["hop1", "hop2", "hop3"]
    paths = [hops, ["hop1"], ["hop2"], ["hop3"]]  # the long flow, then one cross flow a hop
    assert max_min_fair(paths, dict.fromkeys(hops, 10.0)) == [5.0, 5.0, 5.0, 5.0]


def test_water_filling_freezes_flows_at_their_tightest_link() -> None:
    """Bertsekas and Gallager's example, in spirit: a link shared by three flows fills
    first (each 1/3); the flow alone with one of them on a wider link takes the rest."""
    capacity = {"a": 1.0, "b": 1.0}
    paths = [["a"], ["a"], ["a", "b"], ["b"]]
    shares = max_min_fair(paths, capacity)
    assert shares == pytest.approx([1 / 3, 1 / 3, 1 / 3, 2 / 3])
    # Every link is either full or carries no frozen-early flow's spare.
    assert sum(shares[i] for i in (0, 1, 2)) == pytest.approx(1.0)
    assert sum(shares[i] for i in (2, 3)) == pytest.approx(1.0)


def test_demands_cap_a_flow_and_leave_the_rest_to_the_others() -> None:
    shares = max_min_fair([["l"], ["l"], ["l"]], {"l": 9.0}, demands=[1.0, 10.0, 10.0])
    assert shares == pytest.approx([1.0, 4.0, 4.0])
    assert max_min_fair([[], ["l"]], {"l": 2.0}, demands=[3.0, 5.0]) == [3.0, 2.0]
    assert max_min_fair([["l"]], {"l": 2.0}, demands=[0.0]) == [0.0]


def test_what_cannot_be_shared_is_an_error() -> None:
    with pytest.raises(FairnessError, match="no limit"):
        max_min_fair([[]], {})
    with pytest.raises(FairnessError, match="no capacity for link 'x'"):
        max_min_fair([["x"]], {})
    with pytest.raises(FairnessError, match="2 flows but 1 demands"):
        max_min_fair([["l"], ["l"]], {"l": 1.0}, demands=[1.0])


def test_a_scenarios_fair_shares_follow_its_topology() -> None:
    base = scenarios.load("transient").with_overrides({"schedule": []})
    lot = base.with_overrides({"network.topology": "parking-lot:3"})
    # Sources offer 0.85 Gb/s: below half a hop, so each gets its demand.
    assert fair_shares_bps(lot, 10e9) == [0.85e9] * 4
    # The schedule's rate is the bottleneck's (the first hop) alone.
    assert fair_shares_bps(lot, 1e9) == [0.5e9, 0.5e9, 0.85e9, 0.85e9]
    assert long_flow(lot)
    single = base  # ten sources into one 10 Gb/s sink: 1 Gb/s each, 0.85 wanted
    assert fair_shares_bps(single, 5e9) == pytest.approx([0.5e9] * 10)
    assert not long_flow(single)
