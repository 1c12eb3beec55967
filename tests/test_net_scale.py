"""`qcn net up`'s line rate, chosen so that this machine's BMv2 switches keep up with every
host sending at it (qcn.core.capacity; docs/experiments.md)."""

from __future__ import annotations

import argparse

import pytest

from qcn.cli.net import NET_LINE_RATE_BPS, NET_TIME_SCALE, NetError, chosen_topology, net_params
from qcn.core import capacity
from qcn.core.params import SEED_FRAME_BYTES


def chosen(topology: str, line_rate: float | None = None) -> tuple[float, float, str]:
    topo, time_scale, line = chosen_topology(
        argparse.Namespace(topology=topology, line_rate=line_rate, ecmp="per-destination")
    )
    host = topo.hosts[0].name
    return topo.access_link(host).rate_bps, time_scale, line


def test_a_network_within_the_budget_keeps_the_default() -> None:
    rate, time_scale, line = chosen("single:2")
    assert (rate, time_scale) == (NET_LINE_RATE_BPS, NET_TIME_SCALE)
    assert line.startswith("scale: links at 10 Mb/s (the default): every host sending")
    assert "within the budget of 0.55" in line


def test_a_larger_network_is_slowed_to_the_budget_its_bytes_kept() -> None:
    rate, time_scale, line = chosen("leaf-spine:2,2,2")  # 1.24 of a core at 10 Mb/s
    # 10 Mb/s * (0.55 - 0.006) / (1.24 - 0.006), two digits, rounded down: the four
    # switches' share at rest (0.0015 of a core each) stays what it is at any rate
    assert rate == 4.3e6
    assert rate * time_scale == pytest.approx(NET_LINE_RATE_BPS * NET_TIME_SCALE)
    assert "links at 4.3 Mb/s, not 10 Mb/s" in line
    assert "1.24 of a core, over the budget of 0.55; at this 0.54, within it" in line
    topo, _, _ = chosen_topology(
        argparse.Namespace(topology="leaf-spine:2,2,2", line_rate=None, ecmp="per-destination")
    )
    load = capacity.full_line_rate_load(topo, SEED_FRAME_BYTES)
    assert load.cores <= capacity.SWITCH_BUDGET_CORES
    # The reaction points' parameters follow: the byte counter stays 150 KB x 1e-3 x 250.
    params = net_params(topo, None, time_scale)
    assert params.rp.line_rate_bps == 4.3e6
    assert params.rp.bc_limit_bytes == pytest.approx(150e3 * 1e-3 * 250)


def test_the_given_line_rate_wins_and_an_overload_is_said() -> None:
    rate, time_scale, line = chosen("fat-tree:4", 5e6)
    assert (rate, time_scale) == (5e6, NET_TIME_SCALE)
    assert "links at 5 Mb/s (--line-rate)" in line
    assert "4.38 of a core, over the budget of 0.55: keep your traffic below that" in line


def test_a_network_no_rate_fits_is_refused_in_one_line() -> None:
    refused = r"leaf-spine:16,32,32: .* would run at 20 kb/s, .* past the bound of x10000"
    with pytest.raises(NetError, match=refused):
        chosen("leaf-spine:16,32,32")
