"""Networks as data (qcn/core/topology.py): generators, files, routes, congestion points,
flooding, and what the controller and the drawing derive from them."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from qcn.controller import config as network_file
from qcn.core import topology as topologies
from qcn.core.netdraw import draw
from qcn.core.params import CpParams
from qcn.core.topology import (
    GENERATORS,
    LinkDefaults,
    PortRef,
    Topology,
    TopologyError,
    generate,
    load,
    parse_toml,
)
from qcn.topologies.network import address, network_config

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def cp_names(t: Topology) -> list[str]:
    return [str(p) for p in t.cp_ports]


@pytest.mark.parametrize(
    ("spec", "switches", "hosts", "cps"),
    [
        ("single:3", 1, 4, ["s1:4"]),
        ("multihop:2,1", 2, 5, ["s2:1"]),
        ("parking-lot:3", 4, 8, ["s1:1", "s2:2", "s3:2"]),
        ("leaf-spine:2,2,2", 4, 4, [f"s{s}:{p}" for s in (3, 4) for p in (1, 2, 3, 4)]),
    ],
)
def test_generators_build_their_networks(
    spec: str, switches: int, hosts: int, cps: list[str]
) -> None:
    t = generate(spec)
    assert (len(t.switches), len(t.hosts)) == (switches, hosts)
    assert cp_names(t) == cps
    for src, dst in t.traffic_basis():  # every pair's path ends at its destination
        assert t.far_end(t.path(src, dst)[-1]).node == dst


@pytest.mark.parametrize(
    ("spec", "switches", "hosts", "links", "ports"),
    [
        # k^3/4 hosts; (k/2)^2 cores of k ports; k pods of k/2 + k/2 switches of k ports.
        ("fat-tree:4", 20, 16, 48, {"core": 4, "agg": 4, "tor": 4}),
        ("fat-tree:6", 45, 54, 162, {"core": 6, "agg": 6, "tor": 6}),
        # HPCC's fat.txt: 16 cores of 5 pods; aggregation: 4 ToRs + 4 cores; ToR: 16 + 4.
        ("hpcc-fat-tree", 56, 320, 480, {"core": 5, "agg": 8, "tor": 20}),
    ],
)
def test_fat_trees_are_built_as_their_papers_say(
    spec: str, switches: int, hosts: int, links: int, ports: dict[str, int]
) -> None:
    t = generate(spec, LinkDefaults(line_rate_bps=100e9, fabric_rate_bps=400e9))
    assert (len(t.switches), len(t.hosts), len(t.links)) == (switches, hosts, links)
    tors = {t.attachment(h.name).switch for h in t.hosts}
    linked = {s: {t.far_end(PortRef(s, p)).node for p in t.ports(s)} for s in t.switches}
    aggs = {s for s in t.switches if s not in tors and linked[s] & tors}
    cores = set(t.switches) - tors - aggs
    for role, members in (("core", cores), ("agg", aggs), ("tor", tors)):
        assert {len(t.ports(s)) for s in members} == {ports[role]}, role
    assert all(linked[c] <= aggs for c in cores)  # cores link aggregation switches only
    for h in t.hosts:
        assert t.access_link(h.name).rate_bps == 100e9
    assert {t.link_at(PortRef(s, p)).rate_bps for s in aggs for p in t.ports(s)} == {400e9}
    # Across pods: up to a core and down (5 switches); the cores share the destinations:
    # from any pod's hosts, every core port carries as many destinations as any other.
    far = t.hosts[-1].name
    assert t.hops(t.hosts[0].name, far) == 5
    sources = [h.name for h in t.hosts[: len(t.hosts) // ports["core"]]]  # the first pod's
    crossed = Counter(r for s in sources for h in t.hosts if h.name != s for r in t.path(s, h.name))
    # (a core's port p faces pod p: port 1 the sources' own pod, which nothing leaves by)
    downlinks = {crossed[PortRef(c, p)] for c in cores for p in t.ports(c) if p != 1}
    assert len(downlinks) == 1
    assert downlinks.pop() > 0


def test_a_fat_tree_needs_an_even_k() -> None:
    with pytest.raises(TopologyError, match="fat-tree:5: K must be even"):
        load("fat-tree:5")
    with pytest.raises(TopologyError, match="hpcc-fat-tree:2: hpcc-fat-tree takes no arguments"):
        load("hpcc-fat-tree:2")


def test_single_is_the_seeds_shape() -> None:
    d = LinkDefaults(line_rate_bps=10e9, bottleneck_rate_bps=0.5e9, delay_s=20e-6, buffer_pkts=100)
    t = generate("single:10", d)
    assert t.bottleneck == PortRef("s1", 11)
    assert t.link_at(t.bottleneck).rate_bps == 0.5e9
    assert t.pairs == tuple((f"h{i}", "h11") for i in range(1, 11))
    assert [h.ip for h in t.hosts[:2]] == ["10.0.0.1/24", "10.0.0.2/24"]  # as every run had
    assert t.hosts[0].mac == "00:00:00:00:00:01"
    # A source's loop through its switch: its link both ways.
    assert 2 * t.access_link("h1").delay_s == pytest.approx(40e-6)


def test_equal_cost_paths_carry_destinations_in_turn() -> None:
    t = generate("leaf-spine:2,2,2")
    # From leaf s3, the spines s1 (port 3) and s2 (port 4): h3 one way, h4 the other.
    assert t.path("h1", "h3") == [PortRef("s3", 3), PortRef("s1", 2), PortRef("s4", 1)]
    assert t.path("h1", "h4") == [PortRef("s3", 4), PortRef("s2", 2), PortRef("s4", 2)]
    assert t.hops("h1", "h2") == 1
    assert t.hops("h1", "h4") == 3
    big = generate("leaf-spine:4,8,16")
    uplinks = [big.path("h1", h.name)[0].port for h in big.hosts[16:]]
    assert sorted(set(uplinks)) == [17, 18, 19, 20]
    assert (
        max(uplinks.count(p) for p in set(uplinks)) - min(uplinks.count(p) for p in set(uplinks))
        <= 1
    )


def test_flooding_follows_a_spanning_tree() -> None:
    t = generate("leaf-spine:2,2,2")
    links = sum(len(ports) for ports in t.flood_ports.values()) - len(t.hosts)
    assert links == 2 * (len(t.switches) - 1)  # a tree's links, both ends
    assert t.flood_ports["s2"] == (1,)  # s2 -> s4 is off the tree: s4 hears s1 instead


def test_congestible_is_judged_on_the_traffic() -> None:
    t = generate("single:4")
    assert cp_names(t) == ["s1:5"]
    anywhere = t.with_traffic([])  # any host may send to any other: every port can congest
    assert cp_names(anywhere) == [f"s1:{p}" for p in range(1, 6)]
    # A spine port to a leaf: fed by the other leaves' uplinks; two leaves cannot congest it.
    assert not generate("leaf-spine:2,2,2").congestible(PortRef("s1", 1))
    assert generate("leaf-spine:2,3,2").congestible(PortRef("s1", 1))


def test_cp_overrides() -> None:
    t = generate("parking-lot:2").with_overrides(
        cp_off=[PortRef("s1", 1)], cp_on=[PortRef("s3", 2)]
    )
    assert cp_names(t) == ["s2:2", "s3:2"]
    assert cp_names(t.with_overrides(cp_mode="none")) == ["s3:2"]


def test_traffic_matrices() -> None:
    t = generate("leaf-spine:2,2,2")
    assert t.traffic_pairs("incast", sink="h2") == [("h1", "h2"), ("h3", "h2"), ("h4", "h2")]
    perm = t.traffic_pairs("permutation")
    assert sorted(d for _, d in perm) == ["h1", "h2", "h3", "h4"]
    assert all(s != d for s, d in perm)
    assert t.traffic_pairs("permutation") == perm  # the same every time
    assert t.flow_destinations("all-to-all")[0] == ("h1", ("h2", "h3", "h4"))
    with pytest.raises(TopologyError, match="no traffic of its own"):
        t.traffic_pairs("topology")


def test_a_tutorials_file_runs_as_it_is() -> None:
    t = load(str(DATA / "two-leaves.json"))
    assert t.switches == ("s1", "s2", "s3")
    assert [h.ip for h in t.hosts] == ["10.0.5.1/24", "10.0.6.2/24", "10.0.7.3/24"]
    assert t.link_at(PortRef("s1", 3)).delay_s == pytest.approx(2e-3)
    assert t.link_at(PortRef("s1", 3)).rate_bps == 5e6
    assert t.link_at(PortRef("s2", 2)).delay_s == pytest.approx(1.5e-3)  # a number: ms
    # No bandwidth: the loader's line rate (a scenario's, `qcn net up --line-rate`).
    assert t.link_at(PortRef("s1", 1)).rate_bps == topologies.LinkDefaults().line_rate_bps
    assert t.emulate_delays
    assert any("host commands" in n for n in t.notes)
    assert any("runtime_json" in n for n in t.notes)
    assert t.path("h1", "h3") == [PortRef("s1", 4), PortRef("s2", 1)]  # the direct link
    assert 3 not in t.flood_ports["s2"] or 2 not in t.flood_ports["s2"]  # the loop is cut


def test_a_toml_file() -> None:
    text = """
    [defaults]
    rate_bps = 20e6
    [[switch]]
    name = "s1"
    [[switch]]
    name = "s2"
    [[host]]
    name = "h1"
    [[host]]
    name = "h2"
    ip = "10.0.9.2/24"
    [[link]]
    a = "h1"
    b = "s1"
    [[link]]
    a = "s1:7"
    b = "s2"
    rate_bps = 5e6
    delay_s = 1e-3
    [[link]]
    a = "h2"
    b = "s2"
    [cp]
    ports = "all"
    off = ["s2:2"]
    """
    t = parse_toml(tomllib.loads(text), name="two")
    assert t.ports("s1") == [1, 7]
    assert t.ports("s2") == [1, 2]
    assert cp_names(t) == ["s1:1", "s1:7", "s2:1"]
    assert t.link_at(PortRef("s1", 7)).rate_bps == 5e6
    assert t.bottleneck == PortRef("s1", 1)  # the first CP port unless named
    assert t.hosts[1].ip == "10.0.9.2/24"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuch:3", "'nosuch:3' is neither a generator"),
        ("single:0", r"N must be a whole number in \[1, 1000\]"),
        ("leaf-spine:2,2", "leaf-spine takes S,L,H"),
        ("parking-lot:x", "H must be a whole number"),
        ("nofile.toml", "no such topology file"),
        ("topo.yaml", "neither a generator"),
        ("single:²", "N must be a whole number"),  # a digit to str.isdigit, not to int()
        ("leaf-spine:2,٢,2", "L must be a whole number"),
    ],
)
def test_bad_specs_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        load(spec)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["switch"].append({"name": "leaf1"}), "switches are named s1, s2"),
        (lambda d: d["link"].append({"a": "h1", "b": "s1:3"}), "host h1 has 2 links"),
        (lambda d: d["link"].append({"a": "s1:1", "b": "s1:2"}), "port 1 is used twice"),
        (lambda d: d["host"].append({"name": "h3"}), "host h3 has 0 links"),
        (lambda d: d["link"][0].update(rate_bps=0), "rate must be from 1 kb/s to 10 Tb/s"),
        # 1e12 Mb/s was taken.
        (lambda d: d["link"][0].update(rate_bps=1e18), r"10 Tb/s \(got 1e\+18 b/s\)"),
        (lambda d: d["link"][0].update(delay_s=-1), r"delay must be in \[0, 1\)"),
        (lambda d: d["link"][0].update(b="s9"), "no switch or host named 's9'"),
        (lambda d: d.update(cp={"on": ["s1:40"]}), "s1:40: no such switch port"),
        (lambda d: d.update(traffic=[["h1", "h1"]]), "two different hosts"),
        (lambda d: d.update(colour="red"), "colour: unknown field"),
        (lambda d: d["host"][0].update(mac="01:00:00:00:00:01"), "not a unicast MAC"),
        # Accepted before, or passed on to fail in the core.
        (lambda d: d["host"][0].update(mac="00:00:00:00:00:00"), "not a unicast MAC"),
        (lambda d: d["host"][0].update(mac="ff:ff:ff:ff:ff:ff"), "not a unicast MAC"),
        (lambda d: d["host"][0].update(ip="0.0.0.0/0"), "unspecified"),
        (lambda d: d["host"][0].update(ip="255.255.255.255/32"), "the broadcast address"),
        (lambda d: d["host"][0].update(ip="224.0.0.1/24"), "multicast"),
        (lambda d: d["host"][0].update(ip="127.0.0.1/8"), "loopback"),
        (lambda d: d["host"][0].update(ip="10.0.0.255/24"), "subnet's own broadcast"),
        (lambda d: d["host"][0].update(ip="10.0.0.0/24"), "subnet's own network"),
        (
            lambda d: d["link"][0].update(buffer_pkts=9223372036854775807),
            "buffer must be 1 to 1,000,000 packets",
        ),
        (
            lambda d: d.update(defaults={"buffer_pkts": 2**40}),
            "buffer must be 1 to 1,000,000 packets",
        ),
    ],
)
def test_bad_files_are_one_line(edit: object, message: str) -> None:
    data: dict[str, object] = {
        "switch": [{"name": "s1"}],
        "host": [{"name": "h1"}, {"name": "h2"}],
        "link": [{"a": "h1", "b": "s1:1"}, {"a": "h2", "b": "s1:2"}],
    }
    edit(data)  # type: ignore[operator]
    with pytest.raises(TopologyError, match=message):
        parse_toml(data, name="bad")


def test_the_controller_view_derives_from_the_topology() -> None:
    t = generate("leaf-spine:2,2,2", LinkDefaults(line_rate_bps=10e6))
    cfg = network_config(t, cp_params=CpParams(), frame_bytes=1500)
    leaf = cfg.switch("s3")
    assert [p.port for p in leaf.ports if p.cp] == [1, 2, 3, 4]
    assert [p.edge for p in leaf.ports] == [True, True, False, False]
    assert {p.queue_rate_pps for p in leaf.ports} == {833}  # 10 Mb/s of 1500-byte frames
    assert cfg.switch("s1").ports[0].queue_rate_pps is None  # a spine port cannot congest
    assert (leaf.device_id, leaf.grpc, leaf.cp_mac) == (3, address("s3").grpc, "02:00:00:00:03:00")
    for sw in t.switches:  # the controller routes as the topology does
        assert cfg.l2_ports(sw) == {t.host_by_name[h].mac: p for h, p in t.routes[sw].items()}
        assert cfg.flood_ports(sw) == list(t.flood_ports[sw])
    # qcn net up's network.toml: read back, the same configuration.
    assert network_file.parse(tomllib.loads(network_file.dumps(cfg))) == cfg
    # A port's own CP parameters (a scenario's port_cp) are that port's, and only its.
    own = CpParams(q_eq_pkts=40, w=4.0)
    cfg = network_config(t, cp_params=CpParams(), frame_bytes=1500, port_cp={"s3:2": own})
    assert [p.cp_params for p in cfg.switch("s3").ports if p.cp] == [
        CpParams(),
        own,
        CpParams(),
        CpParams(),
    ]
    assert network_file.parse(tomllib.loads(network_file.dumps(cfg))) == cfg


def test_the_docs_example_generator_builds_and_routes() -> None:
    """docs/topology.md, "Adding a generator": its code, as written there."""
    text = (ROOT / "docs" / "topology.md").read_text()
    code = re.search(r"## Adding a generator.*?```python\n(.*?)```", text, re.S)
    assert code is not None
    namespace = dict(vars(topologies))
    exec(code[1], namespace)
    try:
        ring = generate("ring:6")
        assert len(ring.switches) == 6
        assert ring.pairs[0] == ("h1", "h4")
        assert ring.hops("h1", "h4") == 4  # three ring links either way: the lower port
        assert cp_names(ring)  # the opposite hosts' streams share ring links
    finally:
        GENERATORS.pop("ring", None)


def test_a_drawing_marks_the_cp_ports(tmp_path: Path) -> None:
    out = draw(generate("parking-lot:3"), tmp_path / "pl.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tutorials_json_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"hosts": {}, "switches": {"s1": {}}, "links": [["h1"]]}))
    with pytest.raises(TopologyError, match=r"links\[0\]: must be \[a, b\]"):
        load(str(bad))
    bad.write_text("{")
    with pytest.raises(TopologyError, match="not a JSON topology"):
        load(str(bad))


TUTORIALS_OK = {
    "hosts": {"h1": {"ip": "10.0.1.1/24", "mac": "08:00:00:00:01:11"}, "h2": {}},
    "switches": {"s1": {}},
    "links": [["h1", "s1-p1"], ["h2", "s1-p2"]],
}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Tracebacks before.
        (json.dumps(TUTORIALS_OK | {"links": [["h1", "s1-p1", "1.2.3ms"], ["h2", "s1-p2"]]}),
         "latency must be like '5ms'"),
        (json.dumps(TUTORIALS_OK | {"links": [["h1", "s1-p1", "."], ["h2", "s1-p2"]]}),
         "latency must be like '5ms'"),
        (json.dumps(TUTORIALS_OK | {"hosts": {"h1": {"commands": 5}, "h2": {}}}),
         r"hosts.h1.commands: must be a list of strings"),
        (json.dumps(TUTORIALS_OK | {"hosts": {"h1": {"ip": 5}, "h2": {}}}),
         r"hosts.h1.ip: must be a non-empty string"),
        (json.dumps(TUTORIALS_OK | {"hosts": {"h1": 5, "h2": {}}}), "hosts.h1: must be an object"),
        (json.dumps(TUTORIALS_OK | {"switches": {"s1": 5}}), "switches.s1: must be an object"),
        # Accepted before, silently wrong (item 7).
        ('{"hosts": {"h1": {}, "h1": {}, "h2": {}}, "switches": {"s1": {}}, "links": []}',
         "key 'h1' appears twice"),
        ('{"hosts": {"h1": {}, "h2": {}}, "switches": {"s3": {}, "s3": {}}, "links": []}',
         "key 's3' appears twice"),
        (json.dumps(TUTORIALS_OK | {"hosts": ["h1", "h2", 7]}), r"hosts\[2\]: must be a non-empty"),
        (json.dumps(TUTORIALS_OK | {"switches": ["s1", None]}), r"switches\[1\]: must be a non"),
        (json.dumps(TUTORIALS_OK | {"hosts": {"h1": {"ip": "127.0.0.1/8"}, "h2": {}}}),
         "loopback"),
        (json.dumps(TUTORIALS_OK | {"hosts": {"h1": {"mac": "00:00:00:00:00:00"}, "h2": {}}}),
         "not a unicast MAC"),
    ],
)  # fmt: skip
def test_a_bad_tutorials_file_is_one_error(tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "t.json"
    bad.write_text(text)
    with pytest.raises(TopologyError, match=message):
        load(str(bad))


def test_a_good_tutorials_latency_still_reads() -> None:
    for latency, seconds in (("5ms", 5e-3), ("0.5ms", 5e-4), (".5 s", 0.5), ("7", 7e-6), (2, 2e-3)):
        assert topologies._tutorials_latency("x", latency) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "spec",
    ["single:5", "multihop:3,2", "parking-lot:4", "leaf-spine:2,3,2", "leaf-spine:4,4,8",
     str(DATA / "triangle.json"), str(DATA / "two-leaves.json")],
)  # fmt: skip
def test_congestible_ports_by_destination_are_those_path_by_path(spec: str) -> None:
    """Any-to-any traffic's inputs per port, found once per destination and switch (it was
    path by path: 20 s for leaf-spine:16,32,32), are what every path gives."""
    t = load(spec)
    anyone = Topology(t.name, t.switches, t.hosts, t.links)  # no traffic of its own
    expected: dict[PortRef, set[int]] = {ref: set() for ref in anyone.port_refs()}
    for src, dst in anyone.traffic_basis():
        entered = anyone.attachment(src).port
        for ref in anyone.path(src, dst):
            expected[ref].add(entered)
            entered = anyone.far_end(ref).port
    assert anyone._inputs_by_output == expected
