"""A network as data: switches, hosts and links, and everything derived from them.

One :class:`Topology` holds a network's facts; every consumer derives from it and none
states a port number again:

- the controller's view (:func:`qcn.controller.config.from_topology`): forwarding, flooding,
  a congestion point per congestible port, queue shaping;
- the Mininet backend (:mod:`qcn.topologies.network`): one BMv2 switch per switch, one host
  per host, links with their ports;
- the simulator (:mod:`qcn.simulator.engine`): an output queue per switch port, with the
  link's rate, delay and buffer and the port's CP;
- the drawing (``qcn net draw``).

Where a topology comes from (docs/topology.md):

- a generator, ``NAME[:ARGS]`` (:data:`GENERATORS`): ``single:N``, ``multihop``,
  ``parking-lot:H``, ``leaf-spine:S,L,H``, ``fat-tree:K``, ``hpcc-fat-tree``; their rates,
  delays and buffers come from a scenario's ``[network]`` table (:class:`LinkDefaults`);
- a TOML file of switches, hosts and links (:func:`parse_toml`);
- p4lang/tutorials' ``topology.json`` (:func:`parse_tutorials_json`).

Derived, never written: ports in link order where a file leaves them out; routes
(shortest paths, equal-cost ties spread over destinations); which egress ports can
congest (the inputs routed to a port can together exceed its rate); the flooding tree
(a spanning tree over the switches, so a looped network never floods for ever); each
path's delay and hop count.
"""

from __future__ import annotations

import ipaddress
import json
import math
import random
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any, Literal

from qcn.core.ecmp import DATA_PORT, EcmpMode, choose_port, five_tuple_hash
from qcn.core.errors import QcnError
from qcn.core.tomlfile import read_toml


class TopologyError(QcnError, ValueError):
    """An invalid topology; the message names the file or generator and the field."""


MAX_PORT = 510
"""BMv2's port_t is 9 bits and 511 is its drop port (qcn.controller.config.MAX_PORT)."""
MAX_SWITCHES = 250
"""Switch sK's CNMs come from 02:00:00:00:K:00 and its gRPC/Thrift ports from K: a byte."""
MAX_HOSTS = 4000
MAX_BUFFER_PKTS = 1_000_000
"""A port's buffer, in frames (a link's, a file's default, a scenario's network.buffer_pkts):
1.5 GB of 1500-byte frames; the compiled core and BMv2 take 64-bit and 32-bit counts, and a
larger one (2**63 - 1) passed every check and failed in the core (docs/reliability.md)."""
MAX_RATE_BPS = 1e13
"""A link's rate: at most 10 Tb/s, the bound a reaction point's line rate has
(qcn.core.params, rp.line_rate_bps); 1e12 Mb/s in a file was taken."""
HOST_PORT = 0
"""A host has one interface, ``hN-eth0``: its end of a link is port 0."""
CpMode = Literal["congestible", "all", "none"]
CP_MODES: tuple[CpMode, ...] = ("congestible", "all", "none")
Traffic = Literal["topology", "all-to-all", "incast", "permutation"]
TRAFFIC: tuple[Traffic, ...] = ("topology", "all-to-all", "incast", "permutation")


@dataclass(frozen=True, order=True)
class PortRef:
    """A switch's port: ``s2:3``."""

    switch: str
    port: int

    def __str__(self) -> str:
        return f"{self.switch}:{self.port}"

    @property
    def interface(self) -> str:
        """Its Mininet interface (sK-ethP), also a root-namespace veth."""
        return f"{self.switch}-eth{self.port}"


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    """With its prefix length: ``10.0.0.1/24``."""
    mac: str

    @property
    def address(self) -> str:
        return self.ip.split("/", 1)[0]


@dataclass(frozen=True)
class End:
    """One end of a link: a switch's port, or a host (port :data:`HOST_PORT`)."""

    node: str
    port: int = HOST_PORT


@dataclass(frozen=True)
class Link:
    a: End
    b: End
    rate_bps: float
    """The link's rate, both ways: each switch egress port on it serves at this rate."""
    delay_s: float = 0.0
    """One way."""
    buffer_pkts: int = 100
    """The buffer of each switch egress port on the link."""

    def ends(self) -> tuple[End, End]:
        return self.a, self.b


@dataclass(frozen=True)
class LinkDefaults:
    """A generator's rates, delay and buffer (a scenario's ``[network]`` table)."""

    line_rate_bps: float = 10e9
    """Host links."""
    bottleneck_rate_bps: float = 10e9
    """single: the sink's link; multihop: the hot-spot sink's; parking-lot: every hop."""
    fabric_rate_bps: float = 0.0
    """leaf-spine: leaf-to-spine links, fat-trees: links between switches (0: line rate);
    multihop: the s1-s2 link (0: the fastest of the line and innocent rates)."""
    innocent_rate_bps: float = 40e9
    """multihop: the innocent sink's link."""
    delay_s: float = 20e-6
    """Every link, one way: a source's loop through its first switch is twice this."""
    buffer_pkts: int = 100


@dataclass(frozen=True)
class Topology:
    """A network: switches, hosts, links; and what traffic its generator meant."""

    name: str
    switches: tuple[str, ...]
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]
    cp_mode: CpMode = "congestible"
    """Which switch egress ports run a CP (before ``cp_on``/``cp_off``): those that can
    congest, all of them, or none."""
    cp_on: frozenset[PortRef] = frozenset()
    cp_off: frozenset[PortRef] = frozenset()
    pairs: tuple[tuple[str, str], ...] = ()
    """Its traffic, (source, destination) in source order: a generator's own, a file's,
    or a scenario's (:meth:`with_traffic`); empty: any host may send to any other.  Which
    ports can congest is judged on it."""
    bottleneck: PortRef | None = None
    """The port a scenario's schedule changes and whose queue is "the" queue (single,
    multihop: the sink's port; otherwise the first CP port unless a file names one)."""
    bottleneck_chosen: bool = False
    """A file named no bottleneck: it is the first CP port, chosen again when the traffic
    or the CP ports change (a scenario's incast may not cross the first one of before)."""
    emulate_delays: bool = False
    """BMv2 emulates the links' delays (netem) where true: a file's latencies are the
    user's; a generator's delays model the scenario's RTT, which the emulation has of its
    own (docs/topology.md, "Delays")."""
    ecmp: EcmpMode = "per-destination"
    """Where a destination has equal-cost paths: each destination takes one
    (:func:`shortest_path_routes`), or each flow, by its 5-tuple (:mod:`qcn.core.ecmp`)."""
    notes: tuple[str, ...] = ()
    """What was read and not applied (one line each, said when the network starts)."""

    def __post_init__(self) -> None:
        _check(self)

    # -- the graph -----------------------------------------------------------------------

    @cached_property
    def _ports(self) -> dict[str, dict[int, tuple[Link, End]]]:
        """switch -> port -> (link, the far end)."""
        out: dict[str, dict[int, tuple[Link, End]]] = {s: {} for s in self.switches}
        for link in self.links:
            for near, far in ((link.a, link.b), (link.b, link.a)):
                if near.node in out:
                    out[near.node][near.port] = (link, far)
        return out

    @cached_property
    def host_by_name(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def _host_links(self) -> dict[str, tuple[Link, End]]:
        """host -> (its link, the switch end)."""
        out = {}
        for link in self.links:
            for near, far in ((link.a, link.b), (link.b, link.a)):
                if near.node in self.host_by_name:
                    out[near.node] = (link, far)
        return out

    def ports(self, switch: str) -> list[int]:
        return sorted(self._ports[switch])

    def port_refs(self) -> list[PortRef]:
        """Every switch port, switch by switch."""
        return [PortRef(s, p) for s in self.switches for p in self.ports(s)]

    def link_at(self, ref: PortRef) -> Link:
        return self._ports[ref.switch][ref.port][0]

    def far_end(self, ref: PortRef) -> End:
        return self._ports[ref.switch][ref.port][1]

    def is_edge(self, ref: PortRef) -> bool:
        """The port faces a host."""
        return self.far_end(ref).node in self.host_by_name

    def attachment(self, host: str) -> PortRef:
        """The switch port ``host`` hangs on."""
        end = self._host_links[host][1]
        return PortRef(end.node, end.port)

    def access_link(self, host: str) -> Link:
        return self._host_links[host][0]

    def host_index(self, host: str) -> int:
        return next(i for i, h in enumerate(self.hosts) if h.name == host)

    @cached_property
    def _switch_neighbours(self) -> dict[str, list[tuple[int, str]]]:
        """switch -> [(its port, the neighbouring switch)], by port."""
        out: dict[str, list[tuple[int, str]]] = {s: [] for s in self.switches}
        for s in self.switches:
            for port, (_, far) in sorted(self._ports[s].items()):
                if far.node in out:
                    out[s].append((port, far.node))
        return out

    @cached_property
    def routes(self) -> dict[str, dict[str, int]]:
        """switch -> destination host -> egress port (:func:`shortest_path_routes`)."""
        attachments = [(h.name, *self._attachment_tuple(h.name)) for h in self.hosts]
        return shortest_path_routes(self._switch_neighbours, attachments)

    def _attachment_tuple(self, host: str) -> tuple[str, int]:
        ref = self.attachment(host)
        return ref.switch, ref.port

    @property
    def spreads_flows(self) -> bool:
        """Per-flow ECMP: a pair's flows may take different paths."""
        return self.ecmp == "per-flow"

    def path(self, src: str, dst: str, flow_hash: int | None = None) -> list[PortRef]:
        """The switch egress ports a frame from ``src`` to ``dst`` leaves through, in
        order (the last faces ``dst``); with per-flow ECMP, those of the flow whose 5-tuple
        hashes to ``flow_hash`` (qcn.core.ecmp; None: the destination's own path, as
        frames without a 5-tuple take it)."""
        if flow_hash is None or not self.spreads_flows:
            return list(self.chain(self.attachment(src).switch, dst, src))
        home = self.attachment(dst)
        choices = self._equal_cost_to(home.switch)
        out: list[PortRef] = []
        here = self.attachment(src).switch
        while here != home.switch:
            if here not in choices:
                raise TopologyError(f"{self.name}: no path from {src} to {dst}")
            ports, distance = choices[here]
            out.append(PortRef(here, choose_port(ports, flow_hash, distance)))
            here = self.far_end(out[-1]).node
        out.append(home)
        return out

    def flow_hash(self, src: str, dst: str, sport: int) -> int | None:
        """The 5-tuple hash of UDP from ``src``'s port ``sport`` to ``dst``'s data port
        (None: per-destination ECMP, which needs none)."""
        if not self.spreads_flows:
            return None
        by_name = self.host_by_name
        return five_tuple_hash(by_name[src].address, by_name[dst].address, sport, DATA_PORT)

    def _equal_cost_to(self, home: str) -> dict[str, tuple[tuple[int, ...], int]]:
        known = self._equal_cost.get(home)
        if known is None:
            known = self._equal_cost[home] = equal_cost_next_hops(self._switch_neighbours, home)
        return known

    @cached_property
    def _equal_cost(self) -> dict[str, dict[str, tuple[tuple[int, ...], int]]]:
        return {}

    @cached_property
    def _chains(self) -> dict[tuple[str, str], tuple[PortRef, ...]]:
        return {}

    def chain(self, switch: str, dst: str, src: str = "") -> tuple[PortRef, ...]:
        """The egress ports from ``switch`` to ``dst`` (routes are per destination, so a
        path is its first switch's chain: found once, kept)."""
        known = self._chains.get((switch, dst))
        if known is not None:
            return known
        out: list[PortRef] = []
        here = switch
        while True:
            port = self.routes[here].get(dst)
            if port is None:
                raise TopologyError(f"{self.name}: no path from {src or switch} to {dst}")
            out.append(PortRef(here, port))
            far = self.far_end(out[-1])
            if far.node == dst:
                break
            here = far.node
            if len(out) > len(self.switches):
                raise TopologyError(f"{self.name}: a routing loop from {src or switch} to {dst}")
        self._chains[(switch, dst)] = found = tuple(out)
        return found

    def one_way_delay_s(self, src: str, dst: str) -> float:
        """Propagation from ``src`` to ``dst``: every link on the path."""
        return self.access_link(src).delay_s + sum(
            self.link_at(ref).delay_s for ref in self.path(src, dst)
        )

    def hops(self, src: str, dst: str) -> int:
        """Switches a frame from ``src`` to ``dst`` crosses."""
        return len(self.path(src, dst))

    def traffic_basis(self) -> list[tuple[str, str]]:
        """The host pairs that may send: the topology's own traffic, or every pair."""
        if self.pairs:
            return list(self.pairs)
        return [(s.name, d.name) for s in self.hosts for d in self.hosts if s is not d]

    @cached_property
    def _inputs_by_output(self) -> dict[PortRef, set[int]]:
        """Each egress port -> the ports of its switch that frames leaving by it entered
        by, over :meth:`traffic_basis`."""
        out: dict[PortRef, set[int]] = {ref: set() for ref in self.port_refs()}
        if self.pairs:
            for src, dst in self.pairs:
                entered = self.attachment(src).port
                for ref in self.path(src, dst):
                    out[ref].add(entered)
                    entered = self.far_end(ref).port
            return out
        # Any host to any other: by destination, each switch's route to it followed once
        # (the frames from every source of a switch take one path on from there).  Path by
        # path, this was 20 s for leaf-spine:16,32,32's million pairs (docs/reliability.md).
        homes: dict[str, list[int]] = {}
        for h in self.hosts:
            ref = self.attachment(h.name)
            homes.setdefault(ref.switch, []).append(ref.port)
        for target in self.hosts:
            own = self.attachment(target.name)
            walked: set[str] = set()
            for switch, ports in homes.items():
                sources = ports if switch != own.switch else [p for p in ports if p != own.port]
                if sources:
                    self._follow_route(switch, target.name, sources, walked, out)
        return out

    def _follow_route(
        self, here: str, dst: str, entered: list[int], walked: set[str],
        out: dict[PortRef, set[int]],
    ) -> None:  # fmt: skip
        """Add ``entered`` (ports of ``here``) to the inputs of ``here``'s egress port
        towards ``dst``, and each later hop's entry port to its egress port's; stop where a
        switch was already followed towards ``dst`` (the rest is the same from there)."""
        for _ in range(len(self.switches) + 1):
            port = self.routes[here].get(dst)
            if port is None:
                raise TopologyError(f"{self.name}: no path from {here} to {dst}")
            ref = PortRef(here, port)
            out[ref].update(entered)
            if here in walked:
                return
            walked.add(here)
            far = self.far_end(ref)
            if far.node == dst:
                return
            here, entered = far.node, [far.port]
        raise TopologyError(f"{self.name}: a routing loop towards {dst}")

    def congestible(self, ref: PortRef) -> bool:
        """What may arrive for this egress port (each input the traffic sends out of it,
        at its link's rate) exceeds the port's rate: docs/topology.md, "Congestion
        points"."""
        inputs = self._inputs_by_output[ref]
        arriving = sum(self.link_at(PortRef(ref.switch, q)).rate_bps for q in inputs)
        return arriving > self.link_at(ref).rate_bps * (1 + 1e-9)

    @cached_property
    def cp_ports(self) -> tuple[PortRef, ...]:
        """The egress ports that run a congestion point."""
        out = []
        for ref in self.port_refs():
            on = self.cp_mode == "all" or (self.cp_mode == "congestible" and self.congestible(ref))
            if (on or ref in self.cp_on) and ref not in self.cp_off:
                out.append(ref)
        return tuple(out)

    @cached_property
    def shaped_ports(self) -> tuple[PortRef, ...]:
        """The egress ports whose queue can build: each CP port and every congestible
        one (BMv2 serves them at their link's rate; elsewhere nothing can arrive faster
        than the link carries, and BMv2's pacing of small frames as full ones is spared)."""
        cps = set(self.cp_ports)
        return tuple(r for r in self.port_refs() if r in cps or self.congestible(r))

    @cached_property
    def flood_ports(self) -> dict[str, tuple[int, ...]]:
        """switch -> the ports a flooded frame may use: every host port and the links of
        :func:`spanning_tree`, so a looped network never floods for ever."""
        tree = spanning_tree(self._switch_neighbours)
        return {
            s: tuple(p for p in self.ports(s) if self.is_edge(PortRef(s, p)) or p in tree[s])
            for s in self.switches
        }

    # -- traffic -------------------------------------------------------------------------

    def traffic_pairs(
        self, traffic: Traffic, *, sink: str = "", seed: int = 1
    ) -> list[tuple[str, str]]:
        """(source, destination) of one stream per source host: the generator's own pairs,
        every host but ``sink`` into it (incast), or a random derangement (permutation).
        All-to-all is for flows (:meth:`flow_destinations`)."""
        names = [h.name for h in self.hosts]
        if traffic == "topology":
            if not self.pairs:
                raise TopologyError(
                    f"{self.name} has no traffic of its own: choose workload.traffic "
                    "(incast, permutation; all-to-all with flows)"
                )
            return list(self.pairs)
        if traffic == "incast":
            target = sink or names[-1]
            if target not in names:
                raise TopologyError(f"workload.incast_sink: no host {target!r} in {self.name}")
            return [(n, target) for n in names if n != target]
        if traffic == "permutation":
            return list(zip(names, derangement(names, seed), strict=True))
        raise TopologyError("all-to-all traffic is for flows (workload.pattern = flows)")

    def flow_destinations(
        self, traffic: Traffic, *, sink: str = "", seed: int = 1
    ) -> list[tuple[str, tuple[str, ...]]]:
        """Each source host of flows and the destinations its flows are drawn from
        (uniformly; one: every flow goes there)."""
        if traffic == "all-to-all":
            names = tuple(h.name for h in self.hosts)  # (sliced: hosts^2 names at C speed)
            return [(n, names[:i] + names[i + 1 :]) for i, n in enumerate(names)]
        return [(s, (d,)) for s, d in self.traffic_pairs(traffic, sink=sink, seed=seed)]

    def with_traffic(self, pairs: Sequence[tuple[str, str]]) -> Topology:
        """The same network carrying ``pairs`` (empty: any host to any other)."""
        return _with_default_bottleneck(replace(self, pairs=tuple(pairs)))

    def with_overrides(
        self, *, cp_mode: CpMode | None = None, cp_on: Iterable[PortRef] = (),
        cp_off: Iterable[PortRef] = (),
    ) -> Topology:  # fmt: skip
        return _with_default_bottleneck(
            replace(
                self,
                cp_mode=cp_mode or self.cp_mode,
                cp_on=self.cp_on | frozenset(cp_on),
                cp_off=self.cp_off | frozenset(cp_off),
            )
        )

    def scaled(self, rate_scale: float, time_scale: float) -> Topology:
        """Rates times ``rate_scale``, delays times ``time_scale`` (BMv2's units)."""
        links = tuple(
            replace(lk, rate_bps=lk.rate_bps * rate_scale, delay_s=lk.delay_s * time_scale)
            for lk in self.links
        )
        return replace(self, links=links)

    def describe(self) -> str:
        """One line: what it is."""
        return (
            f"{self.name}: {len(self.switches)} switch{'es' if len(self.switches) > 1 else ''}, "
            f"{len(self.hosts)} hosts, {len(self.links)} links, "
            f"{len(self.cp_ports)} CP port{'s' if len(self.cp_ports) != 1 else ''}"
        )


Neighbours = Mapping[str, Sequence[tuple[int, str]]]
"""switch -> [(its port, the switch on the other end)], by port: the switches' graph."""


def _distances_to(neighbours: Neighbours, switch: str) -> dict[str, int]:
    """Hops from every switch to ``switch`` (absent: unreachable)."""
    dist = {switch: 0}
    queue = deque([switch])
    while queue:
        node = queue.popleft()
        for _, neighbour in neighbours[node]:
            if neighbour not in dist:
                dist[neighbour] = dist[node] + 1
                queue.append(neighbour)
    return dist


def shortest_path_routes(
    neighbours: Neighbours, attachments: Sequence[tuple[str, str, int]]
) -> dict[str, dict[str, int]]:
    """switch -> destination -> egress port, for destinations attached as (name, switch,
    port): a shortest path; where k next hops are equally short, the i-th destination takes
    the (i mod k)-th of them by port, so equal-cost paths carry destinations in turn and
    each destination keeps one path (docs/topology.md, "Routes").  The one routing of the
    project: the controller's network files use it too."""
    out: dict[str, dict[str, int]] = {s: {} for s in neighbours}
    # The next hops towards a switch, found once per switch (per host, they were found
    # again for each of the 64 hosts of a leaf), each with the divisor of its tier.
    next_hops: dict[str, dict[str, tuple[list[int], int]]] = {}
    for index, (name, home, port) in enumerate(attachments):
        if home not in next_hops:
            next_hops[home] = _tiered_next_hops(neighbours, home)
        out[home][name] = port
        for s, (hops, divisor) in next_hops[home].items():
            out[s][name] = hops[index // divisor % len(hops)]
    return out


def equal_cost_next_hops(
    neighbours: Neighbours, home: str
) -> dict[str, tuple[tuple[int, ...], int]]:
    """Each switch that reaches ``home`` (but ``home``): its ports on a shortest path
    towards it, in port order, and its distance to it in switch hops: what per-flow ECMP
    chooses among (qcn.core.ecmp.choose_port)."""
    dist = _distances_to(neighbours, home)
    return {
        s: (tuple(p for p, n in neighbours[s] if dist.get(n) == dist[s] - 1), dist[s])
        for s in neighbours
        if s != home and s in dist
    }


def _tiered_next_hops(neighbours: Neighbours, home: str) -> dict[str, tuple[list[int], int]]:
    """Each switch's equal-cost next hops towards ``home``, and the divisor that makes the
    choices along a path independent digits of a destination's index: a switch takes
    digit (index // divisor) % (its choices), its divisor being the most its next hops
    multiply the choices after them by.  With one tier of choice (a leaf-spine's leaves) it
    is index mod k; with two (a fat-tree's ToRs, then its aggregation switches) index mod k
    at both sent every destination of an aggregation switch to the same one of its cores,
    and half the cores carried nothing."""
    dist = _distances_to(neighbours, home)
    hops = {
        s: [p for p, n in neighbours[s] if dist.get(n) == dist[s] - 1]
        for s in neighbours
        if s != home and s in dist
    }
    span = {home: 1}  # a switch's choices times its divisor: the digits from it on
    divisor: dict[str, int] = {}
    for s in sorted(hops, key=dist.__getitem__):  # nearer switches first
        after = {n for p, n in neighbours[s] if p in hops[s]}
        divisor[s] = max(span[n] for n in after)
        span[s] = divisor[s] * len(hops[s])
    return {s: (ports, divisor[s]) for s, ports in hops.items()}


def spanning_tree(neighbours: Neighbours) -> dict[str, set[int]]:
    """switch -> its ports on a spanning tree of the switches (breadth first from the first
    switch of each connected part, lowest ports first): where flooding may go."""
    tree: dict[str, set[int]] = {s: set() for s in neighbours}
    seen: set[str] = set()
    for root in neighbours:
        if root in seen:
            continue
        seen.add(root)
        queue = deque([root])
        while queue:
            node = queue.popleft()
            for port, neighbour in neighbours[node]:
                if neighbour in seen:
                    continue
                seen.add(neighbour)
                tree[node].add(port)
                tree[neighbour].add(next(p for p, n in neighbours[neighbour] if n == node))
                queue.append(neighbour)
    return tree


def derangement(names: Sequence[str], seed: int) -> list[str]:
    """A permutation of ``names`` with no name in its own place (a random cyclic shift of a
    shuffled order, so it exists for any two or more names)."""
    if len(names) < 2:
        raise TopologyError("permutation traffic needs at least two hosts")
    rng = random.Random(f"permutation-{seed}")
    order = list(names)
    rng.shuffle(order)
    shift = rng.randint(1, len(order) - 1)
    target = {order[i]: order[(i + shift) % len(order)] for i in range(len(order))}
    return [target[n] for n in names]


# -- checks -----------------------------------------------------------------------------------

MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,9}$")
"""Host names become interface names (``NAME-eth0``, 15 characters at most)."""
SWITCH_RE = re.compile(r"^s([1-9][0-9]{0,2})$")
"""Switches are named sK, Mininet's way: K is the switch's number (its device id, its CNMs'
source MAC, its gRPC and Thrift ports), and sK-ethP the interfaces a run cleans up."""


def switch_number(name: str) -> int:
    m = SWITCH_RE.match(name)
    if m is None:
        raise TopologyError(
            f"switch {name!r}: switches are named s1, s2, ... (at most s{MAX_SWITCHES})"
        )
    return int(m[1])


def _check(t: Topology) -> None:
    where = t.name
    if not t.switches:
        raise TopologyError(f"{where}: needs at least one switch")
    if len(t.switches) > MAX_SWITCHES:
        raise TopologyError(f"{where}: at most {MAX_SWITCHES} switches (got {len(t.switches)})")
    if len(t.hosts) < 2:
        raise TopologyError(f"{where}: needs at least two hosts")
    if len(t.hosts) > MAX_HOSTS:
        raise TopologyError(f"{where}: at most {MAX_HOSTS} hosts (got {len(t.hosts)})")
    for sw in t.switches:
        if switch_number(sw) > MAX_SWITCHES:
            raise TopologyError(f"{where}: switch {sw}: at most s{MAX_SWITCHES}")
    names = [*t.switches, *(h.name for h in t.hosts)]
    for n in names:
        if not NAME_RE.match(n):
            raise TopologyError(
                f"{where}: node name {n!r}: a letter, then letters, digits or '_', at most "
                "10 characters (it names interfaces)"
            )
    _unique(where, "node", names)
    _unique(where, "host MAC", [h.mac for h in t.hosts])
    _unique(where, "host IP", [h.address for h in t.hosts])
    for h in t.hosts:
        if not MAC_RE.match(h.mac) or int(h.mac[:2], 16) & 1 or h.mac == ZERO_MAC:
            raise TopologyError(f"{where}: host {h.name}: {h.mac!r} is not a unicast MAC")
        why = _host_ip_refusal(h.ip)
        if why:
            raise TopologyError(f"{where}: host {h.name}: {h.ip!r} {why}")
    switches, hosts = set(t.switches), {h.name for h in t.hosts}
    used: set[tuple[str, int]] = set()
    attached: dict[str, int] = {}
    for i, link in enumerate(t.links):
        lw = f"{where}: link {i + 1} ({link.a.node}-{link.b.node})"
        if not (math.isfinite(link.rate_bps) and 1e3 <= link.rate_bps <= MAX_RATE_BPS):
            raise TopologyError(
                f"{lw}: rate must be from 1 kb/s to {MAX_RATE_BPS / 1e12:g} Tb/s "
                f"(got {link.rate_bps:g} b/s)"
            )
        if not (math.isfinite(link.delay_s) and 0 <= link.delay_s < 1):
            raise TopologyError(f"{lw}: delay must be in [0, 1) s (got {link.delay_s!r})")
        if not 1 <= link.buffer_pkts <= MAX_BUFFER_PKTS:
            raise TopologyError(f"{lw}: buffer must be 1 to {MAX_BUFFER_PKTS:,} packets")
        for end in link.ends():
            if end.node in hosts:
                attached[end.node] = attached.get(end.node, 0) + 1
                continue
            if end.node not in switches:
                raise TopologyError(f"{lw}: no switch or host named {end.node!r}")
            if not 1 <= end.port <= MAX_PORT:
                raise TopologyError(f"{lw}: port {end.port} of {end.node} not in [1, {MAX_PORT}]")
            if (end.node, end.port) in used:
                raise TopologyError(f"{lw}: {end.node} port {end.port} is used twice")
            used.add((end.node, end.port))
        if link.a.node in hosts and link.b.node in hosts:
            raise TopologyError(f"{lw}: links a host to a host (hosts hang on switches)")
        if link.a.node == link.b.node:
            raise TopologyError(f"{lw}: links {link.a.node} to itself")
    for name in hosts:
        if attached.get(name, 0) != 1:
            raise TopologyError(
                f"{where}: host {name} has {attached.get(name, 0)} links (each host has one, "
                "to a switch)"
            )
    ports = {PortRef(s, p) for s, p in used}
    for ref in (*t.cp_on, *t.cp_off, *([t.bottleneck] if t.bottleneck else [])):
        if ref not in ports:
            raise TopologyError(f"{where}: {ref}: no such switch port")
    for a in t.switches:
        if not t._ports[a]:
            raise TopologyError(f"{where}: switch {a} has no links")
    # Every host reaches every other: checked once per switch that has hosts (host by host,
    # 15 M calls for leaf-spine:32,62,64's 3,968 hosts).
    homes: dict[str, str] = {}
    for src in t.hosts:
        homes.setdefault(t.attachment(src.name).switch, src.name)
    for switch, src_name in homes.items():
        routed = t.routes[switch]
        for dst in t.hosts:
            if dst.name != src_name and dst.name not in routed:
                raise TopologyError(f"{where}: {dst.name} cannot be reached from {src_name}")


ZERO_MAC = "00:00:00:00:00:00"


@cache  # (a network is checked again each time its traffic or bottleneck is set)
def _host_ip_refusal(ip: str) -> str:
    """Why ``ip`` (ADDRESS/LEN) cannot be a host's own address ("" if it can): the
    unspecified, loopback, multicast, reserved and broadcast addresses, and its subnet's own
    network and broadcast addresses, are nobody's (docs/topology.md)."""
    try:
        iface = ipaddress.IPv4Interface(ip)
    except ValueError:
        return "is not IPv4/len"
    a, net = iface.ip, iface.network
    if a == ipaddress.IPv4Address("255.255.255.255"):
        return "is the broadcast address"
    if a.is_unspecified or a.is_loopback or a.is_multicast or a.is_reserved:
        return "is not a host's address (unspecified, loopback, multicast or reserved)"
    if net.prefixlen <= 30 and a in (net.network_address, net.broadcast_address):
        return (
            f"is its subnet's own {'network' if a == net.network_address else 'broadcast'} address"
        )
    return ""


def _unique(where: str, what: str, values: Iterable[str]) -> None:
    seen: set[str] = set()
    for v in values:
        if v in seen:
            raise TopologyError(f"{where}: {what} {v!r} appears twice")
        seen.add(v)


# -- building ---------------------------------------------------------------------------------


def host_ip(i: int) -> str:
    """Host i's address (1-based): 10.0.0.i/24 up to 254 hosts, as every run so far had;
    beyond, 10.0.H.L/16."""
    if i < 255:
        return f"10.0.0.{i}/24"
    return f"10.0.{i >> 8}.{i & 255}/16"


def host_mac(i: int) -> str:
    return f"00:00:00:00:{(i >> 8) & 255:02x}:{i & 255:02x}"


@dataclass
class Builder:
    """Adds nodes and links the way Mininet's ``Topo.build`` does; a switch's ports are
    numbered in the order its links are added unless given."""

    name: str
    switches: list[str] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    _next_port: dict[str, int] = field(default_factory=dict)

    def switch(self, name: str) -> str:
        self.switches.append(name)
        self._next_port[name] = 1
        return name

    def host(self, name: str, ip: str = "", mac: str = "") -> str:
        i = len(self.hosts) + 1
        self.hosts.append(Host(name, ip or host_ip(i), (mac or host_mac(i)).lower()))
        return name

    def _end(self, node: str, port: int | None) -> End:
        if node not in self._next_port:
            return End(node, HOST_PORT)
        if port is None:
            port = self._next_port[node]
        self._next_port[node] = max(self._next_port[node], port + 1)
        return End(node, port)

    def link(
        self,
        a: str,
        b: str,
        rate_bps: float,
        delay_s: float,
        buffer_pkts: int,
        *,
        port_a: int | None = None,
        port_b: int | None = None,
    ) -> None:
        self.links.append(
            Link(self._end(a, port_a), self._end(b, port_b), rate_bps, delay_s, buffer_pkts)
        )

    def build(self, **extra: Any) -> Topology:
        return Topology(
            self.name, tuple(self.switches), tuple(self.hosts), tuple(self.links), **extra
        )


# -- generators -------------------------------------------------------------------------------


def single(n: int, d: LinkDefaults) -> Topology:
    """The seeds' single bottleneck: sources h1..hN on s1's ports 1..N, the sink h(N+1) on
    port N+1, whose link is the bottleneck."""
    b = Builder(f"single:{n}")
    s1 = b.switch("s1")
    for i in range(1, n + 1):
        b.link(b.host(f"h{i}"), s1, d.line_rate_bps, d.delay_s, d.buffer_pkts, port_b=i)
    sink = b.host(f"h{n + 1}")
    b.link(sink, s1, d.bottleneck_rate_bps, d.delay_s, d.buffer_pkts, port_b=n + 1)
    return b.build(
        pairs=tuple((f"h{i}", sink) for i in range(1, n + 1)), bottleneck=PortRef(s1, n + 1)
    )


def multihop(hot: int, innocent: int, d: LinkDefaults) -> Topology:
    """Seed 001's output-generated hot spot two hops away: hot-spot senders h1..hN and
    innocent senders h(N+1)..h(N+K) on s1; the hot-spot sink on s2's port 1 (the
    bottleneck, the seed's only CP), the innocent sink on port 2, s1 and s2 linked by
    s1's port N+K+1 and s2's port 3."""
    b = Builder(f"multihop:{hot},{innocent}")
    s1, s2 = b.switch("s1"), b.switch("s2")
    senders = hot + innocent
    for i in range(1, senders + 1):
        b.link(b.host(f"h{i}"), s1, d.line_rate_bps, d.delay_s, d.buffer_pkts, port_b=i)
    hot_sink, innocent_sink = b.host(f"h{senders + 1}"), b.host(f"h{senders + 2}")
    b.link(hot_sink, s2, d.bottleneck_rate_bps, d.delay_s, d.buffer_pkts, port_b=1)
    b.link(innocent_sink, s2, d.innocent_rate_bps, d.delay_s, d.buffer_pkts, port_b=2)
    fabric = d.fabric_rate_bps or max(d.line_rate_bps, d.innocent_rate_bps)
    b.link(s1, s2, fabric, d.delay_s, d.buffer_pkts, port_a=senders + 1, port_b=3)
    pairs = tuple((f"h{i}", hot_sink if i <= hot else innocent_sink) for i in range(1, senders + 1))
    return b.build(
        pairs=pairs, bottleneck=PortRef(s2, 1), cp_mode="none", cp_on=frozenset({PortRef(s2, 1)})
    )


def parking_lot(hops: int, d: LinkDefaults) -> Topology:
    """H congested hops in a row: switches s1..s(H+1), hop i the link s_i -> s_(i+1) at
    the bottleneck rate.  The long flow h1 -> h2 crosses every hop; cross flow i, from
    h(2i+1) on s_i to h(2i+2) on s_(i+1), uses hop i alone.  Max-min fair: every flow
    gets half a hop."""
    b = Builder(f"parking-lot:{hops}")
    sw = [b.switch(f"s{i}") for i in range(1, hops + 2)]
    for i in range(hops):
        b.link(sw[i], sw[i + 1], d.bottleneck_rate_bps, d.delay_s, d.buffer_pkts)
    long_src, long_dst = b.host("h1"), b.host("h2")
    b.link(long_src, sw[0], d.line_rate_bps, d.delay_s, d.buffer_pkts)
    b.link(long_dst, sw[-1], d.line_rate_bps, d.delay_s, d.buffer_pkts)
    pairs = [(long_src, long_dst)]
    for i in range(hops):
        src, dst = b.host(f"h{2 * i + 3}"), b.host(f"h{2 * i + 4}")
        b.link(src, sw[i], d.line_rate_bps, d.delay_s, d.buffer_pkts)
        b.link(dst, sw[i + 1], d.line_rate_bps, d.delay_s, d.buffer_pkts)
        pairs.append((src, dst))
    topo = b.build(pairs=tuple(pairs))
    return replace(topo, bottleneck=topo.path(long_src, long_dst)[0])


def leaf_spine(spines: int, leaves: int, per_leaf: int, d: LinkDefaults) -> Topology:
    """S spines s1..sS, L leaves s(S+1)..s(S+L), H hosts on each leaf (h1..h(L*H), leaf by
    leaf).  A leaf's ports 1..H face its hosts, H+1..H+S the spines; a spine's port j the
    j-th leaf.  Host links at the line rate, leaf-spine links at the fabric rate (the
    oversubscription is H * line / (S * fabric))."""
    b = Builder(f"leaf-spine:{spines},{leaves},{per_leaf}")
    spine = [b.switch(f"s{i}") for i in range(1, spines + 1)]
    leaf = [b.switch(f"s{spines + j}") for j in range(1, leaves + 1)]
    fabric = d.fabric_rate_bps or d.line_rate_bps
    for j, lf in enumerate(leaf):
        for k in range(per_leaf):
            host = b.host(f"h{j * per_leaf + k + 1}")
            b.link(host, lf, d.line_rate_bps, d.delay_s, d.buffer_pkts, port_b=k + 1)
    for j, lf in enumerate(leaf):
        for i, sp in enumerate(spine):
            b.link(lf, sp, fabric, d.delay_s, d.buffer_pkts, port_a=per_leaf + i + 1, port_b=j + 1)
    return b.build()


def pod_fabric(
    name: str,
    d: LinkDefaults,
    *,
    pods: int,
    tors: int,
    aggs: int,
    per_tor: int,
    cores_per_agg: int,
) -> Topology:
    """A three-tier fabric of ``pods`` pods: each pod's ``tors`` top-of-rack switches are
    each linked to its ``aggs`` aggregation switches, and the i-th aggregation switch of
    every pod to the i-th group of ``cores_per_agg`` cores.  Cores s1..sC first, then pod
    by pod its aggregation switches and its ToRs; hosts h1.. ToR by ToR.  A ToR's ports
    1..H face its hosts, H+1.. its pod's aggregation switches; an aggregation switch's
    ports 1..T its pod's ToRs, T+1.. its cores; a core's port p its pod p's switch.  Host
    links at the line rate, the rest at the fabric rate."""
    b = Builder(name)
    cores = [b.switch(f"s{i}") for i in range(1, aggs * cores_per_agg + 1)]
    number = len(cores)
    fabric = d.fabric_rate_bps or d.line_rate_bps
    host = 0
    for pod in range(pods):
        agg = [b.switch(f"s{number + i + 1}") for i in range(aggs)]
        tor = [b.switch(f"s{number + aggs + j + 1}") for j in range(tors)]
        number += aggs + tors
        for j, t in enumerate(tor):
            for k in range(per_tor):
                host += 1
                b.link(
                    b.host(f"h{host}"), t, d.line_rate_bps, d.delay_s, d.buffer_pkts, port_b=k + 1
                )
            for i, a in enumerate(agg):
                b.link(t, a, fabric, d.delay_s, d.buffer_pkts, port_a=per_tor + i + 1, port_b=j + 1)
        for i, a in enumerate(agg):
            for c in range(cores_per_agg):
                core = cores[i * cores_per_agg + c]
                b.link(
                    a, core, fabric, d.delay_s, d.buffer_pkts, port_a=tors + c + 1, port_b=pod + 1
                )
    return b.build()


def fat_tree(k: int, d: LinkDefaults) -> Topology:
    """The k-ary fat-tree (Al-Fares et al.): k pods of k/2 ToRs and k/2 aggregation
    switches, (k/2)^2 cores, k/2 hosts a ToR: k^3/4 hosts, 5k^2/4 switches."""
    if k % 2:
        raise TopologyError(
            f"fat-tree:{k}: K must be even (k/2 ToRs, aggregation switches and hosts a ToR)"
        )
    half = k // 2
    return pod_fabric(
        f"fat-tree:{k}", d, pods=k, tors=half, aggs=half, per_tor=half, cores_per_agg=half
    )


def hpcc_fat_tree(d: LinkDefaults) -> Topology:
    """HPCC's evaluation fabric (its simulator's fat.txt): 320 hosts, 16 a ToR; 5 pods of 4
    ToRs and 4 aggregation switches, each ToR linked to its pod's 4, each aggregation
    switch to 4 of the 16 cores: 56 switches, 480 links (docs/topology.md)."""
    return pod_fabric("hpcc-fat-tree", d, pods=5, tors=4, aggs=4, per_tor=16, cores_per_agg=4)


@dataclass(frozen=True)
class Generator:
    """A named family of topologies: ``NAME:ARGS`` (whole numbers, comma separated)."""

    build: Callable[..., Topology]
    args: tuple[str, ...]
    """The arguments' names, in order."""
    limits: tuple[tuple[int, int], ...]
    text: str

    @property
    def usage(self) -> str:
        return ",".join(self.args)

    def spec(self, name: str) -> str:
        """How it is written: ``NAME:ARGS``, or ``NAME`` where it takes none."""
        return f"{name}:{self.usage}" if self.args else name


GENERATORS: dict[str, Generator] = {
    "single": Generator(single, ("N",), ((1, 1000),), "N sources and a sink on one switch"),
    "multihop": Generator(
        multihop,
        ("HOT", "INNOCENT"),
        ((1, 100), (0, 100)),
        "seed 001: hot-spot and innocent senders, a hot spot two hops away",
    ),
    "parking-lot": Generator(
        parking_lot, ("H",), ((1, 32),), "H congested hops, a long flow across all of them"
    ),
    "leaf-spine": Generator(
        leaf_spine,
        ("S", "L", "H"),
        ((1, 32), (1, 64), (1, 64)),
        "S spines, L leaves, H hosts per leaf",
    ),
    "fat-tree": Generator(
        fat_tree,
        ("K",),
        ((2, 12),),
        "the k-ary fat-tree: K pods, K^3/4 hosts (K even)",
    ),
    "hpcc-fat-tree": Generator(
        hpcc_fat_tree, (), (), "HPCC's 320-host fat-tree: 20 ToRs, 20 aggregation, 16 cores"
    ),
}


def generate(spec: str, defaults: LinkDefaults | None = None) -> Topology:
    """A topology from ``NAME:ARGS`` (:data:`GENERATORS`)."""
    d = defaults or LinkDefaults()
    name, _, rest = spec.partition(":")
    gen = GENERATORS.get(name)
    if gen is None:
        raise TopologyError(
            f"no topology generator {name!r} (known: "
            + ", ".join(g.spec(n) for n, g in GENERATORS.items())
            + "; or a .toml or .json file)"
        )
    words = rest.split(",") if rest else []
    if len(words) != len(gen.args):
        if not gen.args:
            raise TopologyError(f"{spec}: {name} takes no arguments")
        raise TopologyError(f"{spec}: {name} takes {gen.usage} (e.g. {_example(name, gen)})")
    values = []
    for arg, word, (lo, hi) in zip(gen.args, words, gen.limits, strict=True):
        # ASCII digits: str.isdigit takes '²', which int() refuses (a ValueError traceback).
        if not re.fullmatch(r"\s*[0-9]+\s*", word) or not lo <= int(word) <= hi:
            raise TopologyError(f"{spec}: {arg} must be a whole number in [{lo}, {hi}]")
        values.append(int(word))
    return gen.build(*values, d)


def _example(name: str, gen: Generator) -> str:
    return f"{name}:" + ",".join(str(max(lo, 2)) for lo, _ in gen.limits)


def is_generator_spec(spec: str) -> bool:
    return spec.partition(":")[0] in GENERATORS


def load(spec: str, defaults: LinkDefaults | None = None) -> Topology:
    """A generator spec, or a topology file (``.toml``, or p4lang/tutorials' ``.json``)."""
    if is_generator_spec(spec):
        return generate(spec, defaults)
    path = Path(spec)
    if path.suffix not in (".toml", ".json"):
        raise TopologyError(
            f"{spec!r} is neither a generator ("
            + ", ".join(g.spec(n) for n, g in GENERATORS.items())
            + ") nor a .toml or .json topology file"
        )
    if not path.is_file():
        raise TopologyError(f"{spec}: no such topology file")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(), object_pairs_hook=_no_duplicate_keys)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
            raise TopologyError(f"{path}: not a JSON topology ({e})") from None
        return parse_tutorials_json(data, name=path.stem, defaults=defaults)
    return parse_toml(read_toml(path, TopologyError), name=path.stem, defaults=defaults)


# -- files ------------------------------------------------------------------------------------


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused if a key appears twice (json keeps the last silently: a
    second "h1" dropped the first host)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise TopologyError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


TOML_KEYS = {"name", "defaults", "switch", "host", "link", "cp", "bottleneck", "traffic"}
LINK_KEYS = {"a", "b", "rate_bps", "delay_s", "buffer_pkts"}


def parse_toml(
    data: dict[str, Any], *, name: str, defaults: LinkDefaults | None = None
) -> Topology:
    """A topology file (docs/topology.md, "A topology file")::

    [defaults]                 # for links that do not say
    rate_bps = 10e6
    delay_s = 0.0
    buffer_pkts = 100
    [[switch]]
    name = "s1"
    [[host]]
    name = "h1"                # ip, mac: optional (10.0.0.i/24, 00:00:00:00:00:i)
    [[link]]
    a = "h1"                   # a host, or SWITCH or SWITCH:PORT (port: next free)
    b = "s1:1"
    rate_bps = 10e6
    [cp]
    ports = "congestible"      # "all", "none"
    on = ["s1:3"]
    off = []
    bottleneck = "s1:3"        # optional: the port a scenario's schedule changes
    traffic = [["h1", "h2"]]   # optional: its own streams
    """
    where = name
    _keys(where, data, TOML_KEYS)
    base = defaults or LinkDefaults()
    dflt = _table(
        where, "defaults", data.get("defaults", {}), {"rate_bps", "delay_s", "buffer_pkts"}
    )
    rate = _number(f"{where}: defaults.rate_bps", dflt.get("rate_bps", base.line_rate_bps))
    delay = _number(f"{where}: defaults.delay_s", dflt.get("delay_s", 0.0))
    buffer = _whole(f"{where}: defaults.buffer_pkts", dflt.get("buffer_pkts", base.buffer_pkts))
    b = Builder(str(data.get("name", name)))
    for i, s in enumerate(_array(where, "switch", data.get("switch"))):
        _keys(f"{where}: switch[{i}]", s, {"name"})
        b.switch(_string(f"{where}: switch[{i}].name", s.get("name")))
    for i, h in enumerate(_array(where, "host", data.get("host"))):
        _keys(f"{where}: host[{i}]", h, {"name", "ip", "mac"})
        b.host(
            _string(f"{where}: host[{i}].name", h.get("name")),
            _string(f"{where}: host[{i}].ip", h["ip"]) if "ip" in h else "",
            _string(f"{where}: host[{i}].mac", h["mac"]) if "mac" in h else "",
        )
    for i, lk in enumerate(_array(where, "link", data.get("link"))):
        lw = f"{where}: link[{i}]"
        _keys(lw, lk, LINK_KEYS)
        a, pa = _endpoint(f"{lw}.a", lk.get("a"))
        c, pc = _endpoint(f"{lw}.b", lk.get("b"))
        b.link(
            a,
            c,
            _number(f"{lw}.rate_bps", lk.get("rate_bps", rate)),
            _number(f"{lw}.delay_s", lk.get("delay_s", delay)),
            _whole(f"{lw}.buffer_pkts", lk.get("buffer_pkts", buffer)),
            port_a=pa,
            port_b=pc,
        )
    cp = _table(where, "cp", data.get("cp", {}), {"ports", "on", "off"})
    mode = cp.get("ports", "congestible")
    if mode not in CP_MODES:
        raise TopologyError(f"{where}: cp.ports must be one of {', '.join(CP_MODES)}")
    pairs = []
    for i, pair in enumerate(_list(where, "traffic", data.get("traffic", []))):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
        ):
            raise TopologyError(f"{where}: traffic[{i}] must be [SOURCE, DESTINATION]")
        pairs.append((pair[0], pair[1]))
    extra: dict[str, Any] = {
        "cp_mode": mode,
        "cp_on": frozenset(
            _port_ref(f"{where}: cp.on", x) for x in _list(where, "cp.on", cp.get("on", []))
        ),
        "cp_off": frozenset(
            _port_ref(f"{where}: cp.off", x) for x in _list(where, "cp.off", cp.get("off", []))
        ),
        "pairs": tuple(pairs),
        "emulate_delays": True,
    }
    if "bottleneck" in data:
        extra["bottleneck"] = _port_ref(f"{where}: bottleneck", data["bottleneck"])
    topo = b.build(**extra)
    _check_pairs(topo)
    return _with_default_bottleneck(topo)


TUTORIALS_LINK = re.compile(r"^(?P<switch>[A-Za-z]\w*)-p(?P<port>\d+)$")


def parse_tutorials_json(data: Any, *, name: str, defaults: LinkDefaults | None = None) -> Topology:
    """p4lang/tutorials' ``topology.json``: ``hosts`` (name -> ip, mac, commands),
    ``switches`` (name -> runtime files), ``links`` ``[a, b, latency, bandwidth]`` with
    switch ends ``sN-pM``, latency ``"5ms"`` or ms, bandwidth in Mb/s (none: the defaults'
    line rate, as a TOML file's link without a rate).  The hosts' commands
    (a default route and a static ARP entry for the tutorials' IPv4 router) and the
    switches' runtime files do not apply to this L2 network: noted, not run."""
    where = name
    if not isinstance(data, dict):
        raise TopologyError(f"{where}: a tutorials topology is a JSON object")
    _keys(where, data, {"hosts", "switches", "links"})
    raw_hosts, raw_switches = data.get("hosts", {}), data.get("switches", {})
    if isinstance(raw_hosts, list):  # the older form: a list of names
        raw_hosts = {_string(f"{where}: hosts[{i}]", h): {} for i, h in enumerate(raw_hosts)}
    if isinstance(raw_switches, list):
        raw_switches = {
            _string(f"{where}: switches[{i}]", s): {} for i, s in enumerate(raw_switches)
        }
    if not isinstance(raw_hosts, dict) or not isinstance(raw_switches, dict):
        raise TopologyError(f"{where}: hosts and switches must be objects (or lists of names)")
    base = defaults or LinkDefaults()
    b = Builder(name)
    notes = []
    ignored: dict[tuple[str, ...], list[str]] = {}  # the switches' settings not used: by kind
    for s, conf in raw_switches.items():
        if not isinstance(conf, dict):
            raise TopologyError(f"{where}: switches.{s}: must be an object (got {conf!r:.40})")
        b.switch(s)
        if set(conf) - {"program"}:
            ignored.setdefault(tuple(sorted(set(conf))), []).append(s)
    for keys, switches in ignored.items():
        # One note for all the switches that have them (it was one per switch).
        whose = (
            f"switch {switches[0]}: its"
            if len(switches) == 1
            else (f"switches {', '.join(switches)}: their")
        )
        notes.append(
            f"{whose} {', '.join(keys)} are for the tutorials' own program; this network "
            "runs the QCN pipeline, programmed by qcn's controller"
        )
    commands = 0
    for h, conf in raw_hosts.items():
        hw = f"{where}: hosts.{h}"
        if not isinstance(conf, dict):
            raise TopologyError(f"{hw}: must be an object (got {conf!r:.40})")
        b.host(
            h,
            _string(f"{hw}.ip", conf["ip"]) if "ip" in conf else "",
            _string(f"{hw}.mac", conf["mac"]) if "mac" in conf else "",
        )
        listed = conf.get("commands", [])
        if not isinstance(listed, list) or not all(isinstance(c, str) for c in listed):
            raise TopologyError(f"{hw}.commands: must be a list of strings (got {listed!r:.40})")
        commands += len(listed)
    if commands:
        notes.append(
            f"{commands} host commands (default routes and ARP entries for the tutorials' "
            "IPv4 router) not run: this is an L2 network; every host reaches every other "
            "on-link, at the addresses given"
        )
    links = data.get("links", [])
    if not isinstance(links, list):
        raise TopologyError(f"{where}: links must be a list")
    for i, raw in enumerate(links):
        lw = f"{where}: links[{i}]"
        if not isinstance(raw, list) or not 2 <= len(raw) <= 4:
            raise TopologyError(f"{lw}: must be [a, b] or [a, b, latency, bandwidth]")
        ends = [_tutorials_end(lw, x) for x in raw[:2]]
        delay = _tutorials_latency(lw, raw[2]) if len(raw) > 2 else 0.0
        # No bandwidth: the line rate of whoever loads it (a scenario's network.line_rate_bps,
        # scaled with it for BMv2; `qcn net up --line-rate`), as a TOML file's link without
        # a rate: the rate the QCN parameters are written for (docs/topology.md).
        rate = base.line_rate_bps
        if len(raw) > 3 and raw[3] is not None:
            rate = _number(f"{lw}: bandwidth (Mb/s)", raw[3]) * 1e6
        b.link(
            ends[0][0],
            ends[1][0],
            rate,
            delay,
            base.buffer_pkts,
            port_a=ends[0][1],
            port_b=ends[1][1],
        )
    topo = b.build(emulate_delays=True, notes=tuple(notes))
    return _with_default_bottleneck(topo)


def _tutorials_end(where: str, x: Any) -> tuple[str, int | None]:
    if not isinstance(x, str):
        raise TopologyError(f"{where}: a link end is a string (got {x!r})")
    m = TUTORIALS_LINK.match(x)
    return (m["switch"], int(m["port"])) if m else (x, None)


def _tutorials_latency(where: str, x: Any) -> float:
    if isinstance(x, int | float) and not isinstance(x, bool):
        value, unit = float(x), "ms"
    elif isinstance(x, str) and (
        m := re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(us|ms|s)?\s*", x)
    ):
        value, unit = float(m[1]), m[2] or "us"  # Mininet's TCLink: a bare number is us
    else:
        raise TopologyError(f"{where}: latency must be like '5ms' or a number of ms (got {x!r})")
    return value * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def _with_default_bottleneck(t: Topology) -> Topology:
    """A file's topology without a named bottleneck: its first CP port (none without)."""
    if t.bottleneck is not None and not t.bottleneck_chosen:
        return t  # named (a file's, or a generator's own)
    if t.bottleneck is None and not t.cp_ports:
        return t
    return replace(t, bottleneck=t.cp_ports[0] if t.cp_ports else None, bottleneck_chosen=True)


def _check_pairs(t: Topology) -> None:
    hosts = t.host_by_name
    for s, d in t.pairs:
        if s not in hosts or d not in hosts or s == d:
            raise TopologyError(f"{t.name}: traffic [{s}, {d}]: two different hosts of the file")
    if len({s for s, _ in t.pairs}) != len(t.pairs):
        raise TopologyError(f"{t.name}: traffic: one stream per source host")


def _port_ref(where: str, x: Any) -> PortRef:
    if isinstance(x, str) and (m := re.fullmatch(r"([A-Za-z]\w*):(\d+)", x)):
        return PortRef(m[1], int(m[2]))
    raise TopologyError(f"{where}: must be SWITCH:PORT (got {x!r})")


def _endpoint(where: str, x: Any) -> tuple[str, int | None]:
    if isinstance(x, str) and (m := re.fullmatch(r"([A-Za-z]\w*)(?::(\d+))?", x)):
        return m[1], int(m[2]) if m[2] else None
    raise TopologyError(f"{where}: must be a NODE or SWITCH:PORT (got {x!r})")


def _keys(where: str, data: Any, known: set[str]) -> None:
    if not isinstance(data, dict):
        raise TopologyError(f"{where}: must be a table")
    for k in data:
        if k not in known:
            raise TopologyError(f"{where}: {k}: unknown field (known: {', '.join(sorted(known))})")


def _table(where: str, key: str, value: Any, known: set[str]) -> dict[str, Any]:
    _keys(f"{where}: {key}", value, known)
    result: dict[str, Any] = value
    return result


def _array(where: str, key: str, value: Any) -> list[dict[str, Any]]:
    items = _list(where, key, value if value is not None else [])
    for i, x in enumerate(items):
        if not isinstance(x, dict):
            raise TopologyError(f"{where}: {key}[{i}] must be a table ([[{key}]])")
    return items


def _list(where: str, key: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TopologyError(f"{where}: {key} must be a list")
    return value


def _string(where: str, x: Any) -> str:
    if not isinstance(x, str) or not x:
        raise TopologyError(f"{where}: must be a non-empty string (got {x!r})")
    return x


def _number(where: str, x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise TopologyError(f"{where}: must be a number (got {x!r})")
    return float(x)


def _whole(where: str, x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise TopologyError(f"{where}: must be a whole number (got {x!r})")
    return x
