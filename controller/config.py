"""The controller's network description: switches, their ports, hosts, links, QCN per port.

A TOML file::

    [qcn]                         # CP parameters for every CP port (qcn.core.params.CpParams)
    q_eq_pkts = 22

    [[switch]]
    name = "s1"
    grpc = "127.0.0.1:9559"       # simple_switch_grpc's --grpc-server-addr
    device_id = 1                 # its --device-id
    thrift_port = 9090            # its --thrift-port (queue rate/depth, registers)
    cp_mac = "02:00:00:00:01:00"  # source MAC of its CNMs

    [[switch.port]]
    port = 1
    edge = true                   # host-facing: CNMs arriving here are dropped
    cp = true                     # run a congestion point on this egress port
    queue_rate_pps = 1000         # optional BMv2 queue shaping
    queue_depth_pkts = 100        # the port's buffer (a CP port: the pipeline's tail drop)
    qcn = { q_eq_pkts = 30 }      # optional per-port overrides
    # optional 802.3x PAUSE on frames arriving here (qcn.controller.entries.PauseWatermarks)
    pause = { hi_bytes = 130000, lo_bytes = 110000, partition_bytes = 150000,
              pause_quanta = 65535, refresh_us = 2000 }
    honour_pause_bps = 40000000   # optional: a PAUSE received here holds this port's queue,
                                  # its quanta counted at this link rate (needs queue_rate_pps)

    [[host]]
    name = "h1"
    mac = "00:00:00:00:00:01"
    switch = "s1"
    port = 1

    [[link]]                      # switch-to-switch links, for forwarding between them
    a = "s1:3"
    b = "s2:3"

Validation names the file, the field (``switch[0].port[1].qcn.q_eq_pkts``) and what is
allowed; nothing is pushed from an invalid file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from qcn.controller.entries import MAX_HONOUR_RATE_BPS, MIN_HONOUR_RATE_BPS, PauseWatermarks
from qcn.controller.errors import ConfigError
from qcn.core.ecmp import ECMP_MODES, EcmpMode
from qcn.core.params import CpParams, ParamError, QcnParams
from qcn.core.pipeline import BMV2_DEVICE_ID, BMV2_THRIFT_PORT, HELD_PORTS, outputs
from qcn.core.tomlfile import read_toml
from qcn.core.topology import equal_cost_next_hops, shortest_path_routes, spanning_tree

MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
MAX_PORT = 510
"""port_t is 9 bits, and 511 is BMv2's drop port (p4src's DROP_PORT; tests/test_p4_program.py
checks the two agree)."""
HONOUR_NEEDS_RATE = (
    "needs queue_rate_pps on the port (a held port's frames go round BMv2's queue at that rate)"
)
MAX_QUEUE_BYTES = 1 << 30
"""A sanity bound; the pipeline's own (Fb in 32 bits) is checked with w (qcn.controller.entries)."""


@dataclass(frozen=True)
class PortConfig:
    port: int
    edge: bool = False
    cp: bool = False
    cp_params: CpParams = field(default_factory=CpParams)
    queue_rate_pps: int | None = None
    queue_depth_pkts: int | None = None
    """The port's buffer: on a CP port, the pipeline's tail drop (default BMv2's 64)."""
    queue_depth_bytes: int | None = None
    """A CP port's buffer in bytes too (the pipeline drops at whichever is reached first)."""
    pause: PauseWatermarks | None = None
    """802.3x PAUSE on the frames arriving at this port."""
    honour_pause_bps: int | None = None
    """Set: a PAUSE arriving at this port holds the port's queue (p4src/control/port_hold.p4),
    its quanta counted at this link rate.  The held frames go round BMv2's queue at its
    rate, so the port needs queue_rate_pps."""

    def __post_init__(self) -> None:
        if self.honour_pause_bps is not None and not self.queue_rate_pps:
            raise ConfigError(f"honour_pause_bps: {HONOUR_NEEDS_RATE}")


@dataclass(frozen=True)
class SwitchConfig:
    name: str
    grpc: str
    device_id: int = BMV2_DEVICE_ID
    thrift_port: int = BMV2_THRIFT_PORT
    cp_mac: str = "02:00:00:00:00:01"
    election_id: int = 10
    ports: tuple[PortConfig, ...] = ()
    p4info: Path = field(default_factory=lambda: outputs()[0])
    """Default: the build's (qcn.core.pipeline.build_dir())."""
    bmv2_json: Path = field(default_factory=lambda: outputs()[1])

    def __post_init__(self) -> None:
        if any(p.honour_pause_bps is not None for p in self.ports) and any(
            p.port >= HELD_PORTS for p in self.ports
        ):
            raise ConfigError(
                f"switch {self.name}: a port honours PAUSE, so every port must be below "
                f"{HELD_PORTS} (the pipeline keeps a held port's order per input port)"
            )

    def port(self, number: int) -> PortConfig:
        for p in self.ports:
            if p.port == number:
                return p
        raise ConfigError(f"switch {self.name} has no port {number} in the configuration")

    @property
    def thrift_host(self) -> str:
        return self.grpc.rsplit(":", 1)[0]


@dataclass(frozen=True)
class HostConfig:
    name: str
    mac: str
    switch: str
    port: int


@dataclass(frozen=True)
class LinkConfig:
    a: tuple[str, int]
    b: tuple[str, int]


@dataclass(frozen=True)
class NetworkConfig:
    switches: tuple[SwitchConfig, ...]
    hosts: tuple[HostConfig, ...] = ()
    links: tuple[LinkConfig, ...] = ()
    ecmp: EcmpMode = "per-destination"
    """``[routing] ecmp``: where a destination has equal-cost ports, each destination takes
    one (per-destination) or each flow, by its 5-tuple (per-flow: qcn.core.ecmp)."""

    def switch(self, name: str) -> SwitchConfig:
        for s in self.switches:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.switches)
        raise ConfigError(f"no switch named '{name}' (known: {known})")

    def _neighbours(self) -> dict[str, list[tuple[int, str]]]:
        out: dict[str, list[tuple[int, str]]] = {s.name: [] for s in self.switches}
        for link in self.links:
            (sa, pa), (sb, pb) = link.a, link.b
            out[sa].append((pa, sb))
            out[sb].append((pb, sa))
        return {s: sorted(ports) for s, ports in out.items()}

    def l2_ports(self, switch: str) -> dict[str, int]:
        """For every host MAC, the port of ``switch`` that leads to it: the project's one
        routing (qcn.core.topology.shortest_path_routes: shortest paths, equal-cost ties
        spread over destinations)."""
        routes = shortest_path_routes(
            self._neighbours(), [(h.mac, h.switch, h.port) for h in self.hosts]
        )
        return routes[switch]

    def ecmp_choices(self, switch: str) -> dict[str, tuple[tuple[int, ...], int]]:
        """Per-flow ECMP: for every host MAC that ``switch`` reaches by more than one
        equal-cost port, those ports and its distance in switch hops (empty:
        per-destination, or no such host)."""
        if self.ecmp != "per-flow":
            return {}
        out = {}
        neighbours = self._neighbours()
        by_home: dict[str, dict[str, tuple[tuple[int, ...], int]]] = {}
        for h in self.hosts:
            if h.switch not in by_home:
                by_home[h.switch] = equal_cost_next_hops(neighbours, h.switch)
            ports, distance = by_home[h.switch].get(switch, ((), 0))
            if len(ports) > 1:
                out[h.mac] = (ports, distance)
        return out

    def flood_ports(self, switch: str) -> list[int]:
        """The ports of ``switch`` a flooded frame may leave by: every port but the links
        off the switches' spanning tree (qcn.core.topology.spanning_tree), so a looped
        network never floods for ever."""
        tree = spanning_tree(self._neighbours())[switch]
        links = {p for p, _ in self._neighbours()[switch]}
        return [p.port for p in self.switch(switch).ports if p.port not in links or p.port in tree]


# -- loading ------------------------------------------------------------------------------


def load(path: Path) -> NetworkConfig:
    """Read and validate a network configuration file."""
    data = read_toml(path, ConfigError)
    try:
        return parse(data, base_dir=path.parent)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def parse(data: dict[str, Any], base_dir: Path | None = None) -> NetworkConfig:
    """``base_dir``: where relative paths in ``data`` start (default: the working folder)."""
    base_dir = base_dir if base_dir is not None else Path.cwd()
    _keys("", data, {"qcn", "routing", "switch", "host", "link"})
    routing = data.get("routing", {})
    if not isinstance(routing, dict):
        raise ConfigError("routing: must be a table")
    _keys("routing", routing, {"ecmp"})
    ecmp = routing.get("ecmp", "per-destination")
    if ecmp not in ECMP_MODES:
        raise ConfigError(f"routing.ecmp: must be one of {', '.join(ECMP_MODES)} (got {ecmp!r})")
    base = _cp_params("qcn", data.get("qcn", {}), CpParams())
    raw_switches = _list("switch", data.get("switch"), required=True)
    switches = tuple(_switch(f"switch[{i}]", s, base, base_dir) for i, s in enumerate(raw_switches))
    _unique("switch", [s.name for s in switches])
    _unique("switch grpc address", [s.grpc for s in switches])
    by_name = {s.name: s for s in switches}
    hosts = tuple(
        _host(f"host[{i}]", h, by_name) for i, h in enumerate(_list("host", data.get("host")))
    )
    _unique("host", [h.name for h in hosts])
    _unique("host mac", [h.mac.lower() for h in hosts])
    links = tuple(
        _link(f"link[{i}]", lk, by_name) for i, lk in enumerate(_list("link", data.get("link")))
    )
    return NetworkConfig(switches, hosts, links, ecmp=ecmp)


def _switch(where: str, s: Any, base: CpParams, base_dir: Path) -> SwitchConfig:
    if not isinstance(s, dict):
        raise ConfigError(f"{where}: must be a table")
    _keys(
        where,
        s,
        {
            "name",
            "grpc",
            "device_id",
            "thrift_port",
            "cp_mac",
            "election_id",
            "port",
            "p4info",
            "bmv2_json",
        },
    )
    name = _str(f"{where}.name", s.get("name"), required=True)
    grpc = _str(f"{where}.grpc", s.get("grpc"), required=True)
    m = re.match(r"^[\w.\-]+:(\d{1,5})$", grpc)
    if not m or not 1 <= int(m.group(1)) <= 65535:
        raise ConfigError(f"{where}.grpc: must be HOST:PORT, the port in [1, 65535] (got {grpc!r})")
    ports = tuple(
        _port(f"{where}.port[{i}]", p, base)
        for i, p in enumerate(_list(f"{where}.port", s.get("port")))
    )
    _unique(f"{where}.port", [str(p.port) for p in ports])
    out = SwitchConfig(
        name=name,
        grpc=grpc,
        device_id=_int(f"{where}.device_id", s.get("device_id", BMV2_DEVICE_ID), 0, 2**32 - 1),
        thrift_port=_int(f"{where}.thrift_port", s.get("thrift_port", BMV2_THRIFT_PORT), 1, 65535),
        cp_mac=_mac(f"{where}.cp_mac", s.get("cp_mac", "02:00:00:00:00:01")),
        election_id=_int(f"{where}.election_id", s.get("election_id", 10), 1, 2**63 - 1),
        ports=ports,
    )
    if "p4info" in s:
        out = replace(out, p4info=base_dir / _str(f"{where}.p4info", s["p4info"], required=True))
    if "bmv2_json" in s:
        path = _str(f"{where}.bmv2_json", s["bmv2_json"], required=True)
        out = replace(out, bmv2_json=base_dir / path)
    return out


def _port(where: str, p: Any, base: CpParams) -> PortConfig:
    if not isinstance(p, dict):
        raise ConfigError(f"{where}: must be a table")
    _keys(
        where,
        p,
        {
            "port",
            "edge",
            "cp",
            "qcn",
            "queue_rate_pps",
            "queue_depth_pkts",
            "queue_depth_bytes",
            "pause",
            "honour_pause_bps",
        },
    )
    rate = p.get("queue_rate_pps")
    honour = p.get("honour_pause_bps")
    if honour is not None:
        honour = _int(f"{where}.honour_pause_bps", honour, MIN_HONOUR_RATE_BPS, MAX_HONOUR_RATE_BPS)
    depth = p.get("queue_depth_pkts")
    depth_bytes = p.get("queue_depth_bytes")
    port = PortConfig(
        port=_int(f"{where}.port", p.get("port"), 0, MAX_PORT),
        edge=_bool(f"{where}.edge", p.get("edge", False)),
        cp=_bool(f"{where}.cp", p.get("cp", False)),
        cp_params=_cp_params(f"{where}.qcn", p.get("qcn", {}), base),
        queue_rate_pps=None if rate is None else _int(f"{where}.queue_rate_pps", rate, 0, 10**7),
        queue_depth_pkts=None
        if depth is None
        else _int(f"{where}.queue_depth_pkts", depth, 1, 100_000),
        queue_depth_bytes=None
        if depth_bytes is None
        else _int(f"{where}.queue_depth_bytes", depth_bytes, 64, MAX_QUEUE_BYTES),
        pause=None if p.get("pause") is None else _pause(f"{where}.pause", p["pause"]),
    )
    try:  # what PortConfig checks itself, named where it is
        return replace(port, honour_pause_bps=honour)
    except ConfigError as e:
        raise ConfigError(f"{where}.{e}") from None


PAUSE_FIELDS = ("hi_bytes", "lo_bytes", "partition_bytes", "pause_quanta", "refresh_us")


def _pause(where: str, values: Any) -> PauseWatermarks:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: must be a table ({', '.join(PAUSE_FIELDS)})")
    _keys(where, values, set(PAUSE_FIELDS))
    for name in PAUSE_FIELDS:
        if name not in values:
            raise ConfigError(f"{where}.{name}: required")
    try:
        return PauseWatermarks(
            **{n: _int(f"{where}.{n}", values[n], 0, MAX_QUEUE_BYTES) for n in PAUSE_FIELDS}
        )
    except ParamError as e:
        raise ConfigError(f"{where}: {str(e).split(': ', 1)[1]}") from None


def _host(where: str, h: Any, switches: dict[str, SwitchConfig]) -> HostConfig:
    if not isinstance(h, dict):
        raise ConfigError(f"{where}: must be a table")
    _keys(where, h, {"name", "mac", "switch", "port"})
    sw = _str(f"{where}.switch", h.get("switch"), required=True)
    if sw not in switches:
        raise ConfigError(f"{where}.switch: no switch named '{sw}' (known: {', '.join(switches)})")
    return HostConfig(
        name=_str(f"{where}.name", h.get("name"), required=True),
        mac=_mac(f"{where}.mac", h.get("mac")),
        switch=sw,
        port=_int(f"{where}.port", h.get("port"), 0, MAX_PORT),
    )


def _link(where: str, lk: Any, switches: dict[str, SwitchConfig]) -> LinkConfig:
    if not isinstance(lk, dict):
        raise ConfigError(f"{where}: must be a table")
    _keys(where, lk, {"a", "b"})
    ends = []
    for side in ("a", "b"):
        text = _str(f"{where}.{side}", lk.get(side), required=True)
        m = re.match(r"^([\w.\-]+):(\d+)$", text)
        if not m or m.group(1) not in switches:
            raise ConfigError(
                f"{where}.{side}: must be SWITCH:PORT of a known switch (got {text!r})"
            )
        ends.append((m.group(1), _int(f"{where}.{side}", int(m.group(2)), 0, MAX_PORT)))
    if ends[0] == ends[1]:
        raise ConfigError(f"{where}: a link from a port to itself ({ends[0][0]}:{ends[0][1]})")
    return LinkConfig(ends[0], ends[1])


def _cp_params(where: str, values: Any, base: CpParams) -> CpParams:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: must be a table of CP parameters")
    try:
        return QcnParams.from_dict({"cp": values}, QcnParams(cp=base)).cp
    except ParamError as e:
        field_name = e.field.removeprefix("cp.")
        raise ConfigError(f"{where}.{field_name}: {str(e).split(': ', 1)[1]}") from None


def _keys(where: str, data: dict[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            prefix = f"{where}." if where else ""
            raise ConfigError(f"{prefix}{key}: unknown field (known: {', '.join(sorted(known))})")


def _list(where: str, value: Any, *, required: bool = False) -> list[Any]:
    if value is None:
        if required:
            raise ConfigError(f"{where}: at least one [[{where}]] is required")
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be an array of tables ([[{where}]])")
    return value


def _unique(what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ConfigError(f"{what} '{n}' appears twice")
        seen.add(n)


def _str(where: str, value: Any, *, required: bool = False) -> str:
    if value is None and required:
        raise ConfigError(f"{where}: required")
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a non-empty string (got {value!r})")
    return value


def _int(where: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{where}: must be a whole number in [{lo}, {hi}] (got {value!r})")
    return value


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: must be true or false (got {value!r})")
    return value


def _mac(where: str, value: Any) -> str:
    if not isinstance(value, str) or not MAC_RE.match(value):
        raise ConfigError(f"{where}: must be a MAC address like 00:00:00:00:00:01 (got {value!r})")
    if int(value[:2], 16) & 1:
        raise ConfigError(f"{where}: must be a unicast address (got {value})")
    return value.lower()


# -- writing ------------------------------------------------------------------------------


def dumps(cfg: NetworkConfig) -> str:
    """``cfg`` as a network file :func:`parse` reads back to the same configuration (what
    ``qcn net up`` leaves for ``qcn ctl -c``).  The CP parameters every CP port shares go
    in ``[qcn]``; a port's own differences in its ``qcn`` table."""
    cps = [p.cp_params for s in cfg.switches for p in s.ports if p.cp]
    base = cps[0] if cps else CpParams()
    base_values = QcnParams(cp=base).to_dict()["cp"]
    switches = []
    for s in cfg.switches:
        ports = []
        for p in s.ports:
            own = QcnParams(cp=p.cp_params).to_dict()["cp"]
            port: dict[str, Any] = {"port": p.port, "edge": p.edge, "cp": p.cp}
            if differing := {k: v for k, v in own.items() if base_values[k] != v}:
                port["qcn"] = differing
            for name in ("queue_rate_pps", "queue_depth_pkts", "queue_depth_bytes"):
                if getattr(p, name) is not None:
                    port[name] = getattr(p, name)
            if p.pause is not None:
                port["pause"] = {f: getattr(p.pause, f) for f in PAUSE_FIELDS}
            if p.honour_pause_bps is not None:
                port["honour_pause_bps"] = p.honour_pause_bps
            ports.append(port)
        switches.append(
            {
                "name": s.name,
                "grpc": s.grpc,
                "device_id": s.device_id,
                "thrift_port": s.thrift_port,
                "cp_mac": s.cp_mac,
                "election_id": s.election_id,
                "p4info": str(s.p4info),
                "bmv2_json": str(s.bmv2_json),
                "port": ports,
            }
        )
    data = {
        "qcn": base_values,
        "routing": {"ecmp": cfg.ecmp},
        "switch": switches,
        "host": [
            {"name": h.name, "mac": h.mac, "switch": h.switch, "port": h.port} for h in cfg.hosts
        ],
        "link": [{"a": f"{lk.a[0]}:{lk.a[1]}", "b": f"{lk.b[0]}:{lk.b[1]}"} for lk in cfg.links],
    }
    return tomli_w.dumps(data)
