"""Per-flow ECMP's arithmetic (qcn.core.ecmp), the paths it gives the simulator, and the
selector program the controller writes for it.  On BMv2, ptf_tests/test_ecmp.py checks
that the pipeline chooses the same ports."""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path

import pytest
from finsy import P4IndirectAction, P4TableAction, P4TableEntry

from qcn.controller import config
from qcn.controller.entries import forwarding_entries
from qcn.controller.errors import ConfigError
from qcn.core import ecmp
from qcn.core import scenario as scenarios
from qcn.core.ecmp import DATA_PORT, choose_port, five_tuple_hash, flow_port, hash_shift
from qcn.core.errors import QcnError
from qcn.core.params import CpParams
from qcn.core.pipeline import ACTION_FORWARD_BY_FLOW, TABLE_ECMP, TABLE_L2
from qcn.core.topology import LinkDefaults, PortRef, Topology
from qcn.core.topology import load as load_topology
from qcn.simulator.engine import Simulation
from qcn.topologies.network import network_config


def mac_of(entry: P4TableEntry) -> str:
    assert entry.match is not None
    return str(entry.match["dst_addr"])


def per_flow(spec: str) -> Topology:
    from dataclasses import replace  # noqa: PLC0415

    return replace(load_topology(spec, LinkDefaults()), ecmp="per-flow")


def test_the_hash_is_ieee_crc32_of_the_13_byte_tuple() -> None:
    assert zlib.crc32(b"123456789") == 0xCBF43926  # the CRC-32 check value
    key = bytes([10, 0, 0, 1, 10, 0, 0, 2, 17, 0x27, 0x10, 0x13, 0x89])
    assert five_tuple_hash("10.0.0.1", "10.0.0.2", 10000, 5001) == zlib.crc32(key)


def test_a_switch_chooses_by_its_window_among_ports_in_order() -> None:
    hashed = 0x00_AB_CD_07
    assert [hash_shift(d) for d in (1, 2, 3, 4)] == [0, 8, 16, 0]
    assert choose_port((7, 3, 5), hashed, 1) == [3, 5, 7][0xCD07 % 3]
    assert choose_port((7, 3, 5), hashed, 2) == [3, 5, 7][0xABCD % 3]
    assert choose_port((7, 3, 5), hashed, 3) == [3, 5, 7][0x00AB % 3]


def test_flows_send_from_ports_below_the_ephemeral_ones() -> None:
    assert flow_port(0) == 10_000
    assert flow_port(19_999) == 29_999
    assert flow_port(20_000) == 10_000
    assert ecmp.SOURCE_PORT not in {DATA_PORT, *range(10_000, 30_000)}


def test_a_flow_takes_the_path_its_hash_chooses_and_flows_spread() -> None:
    topo = per_flow("leaf-spine:2,2,2")
    src, dst = topo.hosts[0].name, topo.hosts[-1].name
    leaf = topo.attachment(src).switch
    uplinks = tuple(p for p in topo.ports(leaf) if not topo.is_edge(PortRef(leaf, p)))
    spines: Counter[str] = Counter()
    for flow in range(64):
        hashed = topo.flow_hash(src, dst, flow_port(flow))
        assert hashed is not None
        path = topo.path(src, dst, hashed)
        assert path[0] == PortRef(leaf, choose_port(uplinks, hashed, 2))
        assert path[-1] == topo.attachment(dst)
        spines[path[1].switch] += 1
    assert len(spines) == 2
    assert min(spines.values()) >= 16, spines
    # Per destination: one path, whatever the flow, and no hash is asked for.
    one = load_topology("leaf-spine:2,2,2", LinkDefaults())
    assert one.flow_hash(src, dst, 10_000) is None
    assert one.path(src, dst, 12345) == one.path(src, dst)


def test_a_fat_trees_flows_between_pods_use_every_core() -> None:
    """Two choices on the way up (ToR, then aggregation switch): each takes its own window
    of the hash, so one pair's flows reach all four cores.  With one window for both, CRC's
    linearity would tie the second choice to the first: two cores."""
    topo = per_flow("fat-tree:4")
    src, dst = topo.hosts[0].name, topo.hosts[-1].name
    cores = set(topo.switches[:4])  # fat-tree:K numbers its (K/2)^2 cores first
    assert all(not topo.is_edge(PortRef(c, p)) for c in cores for p in topo.ports(c))
    used: set[str] = set()
    for flow in range(200):
        path = topo.path(src, dst, topo.flow_hash(src, dst, flow_port(flow)))
        used.update(ref.switch for ref in path if ref.switch in cores)
    assert used == cores, used
    tied: set[str] = set()
    for flow in range(200):
        hashed = topo.flow_hash(src, dst, flow_port(flow))
        assert hashed is not None
        here, through = topo.attachment(src).switch, []
        while here != topo.attachment(dst).switch:
            ports, _ = topo._equal_cost_to(topo.attachment(dst).switch)[here]
            port = choose_port(ports, hashed, 1)  # the same window at every switch
            through.append(here)
            here = topo.far_end(PortRef(here, port)).node
        tied.update(s for s in through if s in cores)
    assert len(tied) < len(cores)


def test_the_controller_programs_each_leaf_with_the_topologys_choices() -> None:
    topo = per_flow("leaf-spine:2,2,2")
    net = network_config(topo, cp_params=CpParams(), frame_bytes=1500)
    assert net.ecmp == "per-flow"
    leaf = topo.attachment(topo.hosts[0].name).switch
    choices = net.ecmp_choices(leaf)
    far = [h for h in topo.hosts if topo.attachment(h.name).switch != leaf]
    assert set(choices) == {h.mac for h in far}
    uplinks = tuple(p for p in topo.ports(leaf) if not topo.is_edge(PortRef(leaf, p)))
    assert all(c == (uplinks, 2) for c in choices.values())
    plain, program = forwarding_entries(net.l2_ports(leaf), choices)
    assert {mac_of(e) for e in plain} == {h.mac for h in topo.hosts if h.mac not in choices}
    # One member per port, in port order; one group per set of ports.
    assert [m.member_id for m in program.members] == [p + 1 for p in sorted(uplinks)]
    assert [[m.member_id for m in g.members or ()] for g in program.groups] == [
        [p + 1 for p in sorted(uplinks)]
    ]
    for e in program.entries:
        if e.table_id == TABLE_L2:
            assert isinstance(e.action, P4TableAction)
            assert e.action.name == ACTION_FORWARD_BY_FLOW
            assert e.action.args == {
                "port": net.l2_ports(leaf)[mac_of(e)],
                "hash_shift": hash_shift(2),
            }
    l2 = [e for e in program.entries if e.table_id == TABLE_L2]
    grouped = [e for e in program.entries if e.table_id == TABLE_ECMP]
    assert all(isinstance(e.action, P4IndirectAction) for e in grouped)
    assert len(grouped) == len(l2) == len(far)
    # Per destination: no program, the l2 entries as before.
    assert (
        network_config(
            load_topology("leaf-spine:2,2,2", LinkDefaults()),
            cp_params=CpParams(),
            frame_bytes=1500,
        ).ecmp_choices(leaf)
        == {}
    )


def test_the_network_file_keeps_the_routing(tmp_path: Path) -> None:
    net = network_config(per_flow("leaf-spine:2,2,2"), cp_params=CpParams(), frame_bytes=1500)
    path = tmp_path / "network.toml"
    path.write_text(config.dumps(net))
    assert config.load(path).ecmp == "per-flow"
    text = path.read_text().replace('ecmp = "per-flow"', 'ecmp = "per-packet"')
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"routing.ecmp: must be one of per-destination"):
        config.load(path)


def test_a_scenario_chooses_per_flow_and_a_bad_mode_is_one_line() -> None:
    sc = scenarios.load("leaf-spine-fct").with_overrides({"network.ecmp": "per-flow"})
    assert sc.topology.ecmp == "per-flow"
    with pytest.raises(QcnError, match=r"network\.ecmp: must be one of"):
        scenarios.load("leaf-spine-fct").with_overrides({"network.ecmp": "random"})


def test_the_simulators_flows_follow_their_own_paths() -> None:
    sc = scenarios.load("leaf-spine-fct").with_overrides(
        {"network.ecmp": "per-flow", "duration_s": 0.005}
    )
    sim = Simulation(sc, seed=1)
    assert sim.arrivals
    spines: set[str] = set()
    for n, (a, route) in enumerate(zip(sim.arrivals, sim.arrival_routes, strict=True)):
        refs = sc.flow_refs(n, a)
        assert [sim.port_by_ref[r] for r in refs] == list(route.ports)
        spines.update(r.switch for r in refs[1:-1])
    assert len(spines) == 2
