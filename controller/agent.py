"""The controller's operations on one switch: bring-up, live CP tuning, read-back, queues.

Bring-up reconciles: it reads what the switch holds and inserts, modifies or deletes only
the difference, so running it twice leaves the same state and does not disturb traffic.
Live tuning validates the new parameters first; an invalid value changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from finsy import (
    P4ActionProfileGroup,
    P4ActionProfileMember,
    P4CloneSessionEntry,
    P4CounterEntry,
    P4MulticastGroupEntry,
    P4TableEntry,
    P4TableMatch,
)

from qcn.controller.bmv2_thrift import Bmv2Thrift
from qcn.controller.config import NetworkConfig, PortConfig, SwitchConfig
from qcn.controller.entries import (
    BMV2_DEFAULT_QUEUE_PKTS,
    CpPort,
    EcmpProgram,
    PauseWatermarks,
    admission_entry,
    bmv2_queue_pkts,
    buffer_entry,
    cnm_clone_session,
    cp_config_entry,
    cp_entries,
    cp_sampling_entry,
    decode_cp,
    decode_edge,
    decode_input_port,
    default_cpid,
    ecn_marking_entry,
    edge_entries,
    fb_tag_exit_entry,
    flood_groups,
    forwarding_entries,
    input_port_entry,
    pause_honour_entry,
    pause_source_entry,
    sample_interval_entries,
    stage2_entries,
)
from qcn.controller.errors import Bmv2ThriftError, ConfigError, P4RuntimeError
from qcn.controller.p4runtime import P4RuntimeSwitch
from qcn.core.params import (
    CpParams,
    CpSignal,
    QcnParams,
)
from qcn.core.pipeline import (
    ACTION_PROFILE_ECMP,
    COUNTERS,
    CP_DEPARTURE,
    CP_INSTANCES,
    CP_TABLE_CONFIG,
    CP_TABLE_SAMPLE_INTERVAL,
    ETHERTYPE_IPV4,
    PARSE_VSET_FLOW_ETHERTYPES,
    TABLE_ADMISSION,
    TABLE_CP_SAMPLING,
    TABLE_ECMP,
    TABLE_ECN_MARKING,
    TABLE_FB_TAG_EXIT,
    TABLE_INPUT_PORT,
    TABLE_PAUSE_SOURCE,
    cp_name,
)

IPV4_PARSED = [ETHERTYPE_IPV4.to_bytes(2, "big")]
"""The parser's flow_ethertypes where it reads IPv4 (per-flow ECMP, ECN marking)."""

EDGE_SETTINGS = ("three_point", "reflect_p0", "reflect_p_base", "reflect_p_scale")
"""The CpParams fields a host-facing port's Fb tag and reflection point use."""


@dataclass(frozen=True)
class PortStatus:
    """What `qcn ctl show` reports for one port."""

    port: int
    cp: CpParams | None
    cpid: int | None
    counters: dict[str, int]
    queue_pkts: int | None
    """The pipeline's count of the port's queue (None: no CP port, or no Thrift)."""
    pause: PauseWatermarks | None = None
    """802.3x PAUSE on the frames arriving at the port, as the switch holds it."""
    edge: dict[str, Any] | None = None
    """A host-facing port's three-point settings (qcn.controller.entries.decode_edge)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "cp": None if self.cp is None else QcnParams(cp=self.cp).to_dict()["cp"],
            "cpid": None if self.cpid is None else f"0x{self.cpid:016x}",
            "counters": self.counters,
            "queue_pkts": self.queue_pkts,
            "pause": None if self.pause is None else asdict(self.pause),
            "edge": self.edge,
        }


@dataclass(frozen=True)
class ReconcileReport:
    inserted: int
    modified: int
    deleted: int


TAKE_OVER_SPAN = 1_000_000
"""The election ids of this network's own controllers: the network file's and up to this
many above it.  A controller holding the switch takes the election id of each one-shot
write that outbid it when that write hands the switch back (finsy bids the highest id the
switch has seen), so its id rises by one per shell write; a controller at or above the file's
id + TAKE_OVER_SPAN is another one's, and a shell's write is refused beside it."""


class SwitchAgent:
    """One switch as the controller sees it: its config, P4Runtime and Thrift."""

    def __init__(
        self,
        net: NetworkConfig,
        name: str,
        *,
        timeout_s: float = 5.0,
        read_only: bool = False,
        one_shot: bool = False,
    ) -> None:
        self.net = net
        self.cfg: SwitchConfig = net.switch(name)
        self.timeout_s = timeout_s
        self.read_only = read_only
        """Reads only: a backup connection will do (e.g. beside a running `qcn ctl run`)."""
        self.one_shot = one_shot
        """A write from a shell (`qcn ctl set`): it outbids a controller of this network
        that holds the switch (a live run, `qcn ctl run`) for as long as it is connected;
        see :data:`TAKE_OVER_SPAN`."""
        self._p4rt: P4RuntimeSwitch | None = None

    # -- connections -------------------------------------------------------------------------

    def connect(self) -> P4RuntimeSwitch:
        if self._p4rt is None:
            self._p4rt = P4RuntimeSwitch(
                self.cfg.grpc,
                self.cfg.p4info,
                self.cfg.bmv2_json,
                device_id=self.cfg.device_id,
                election_id=self.cfg.election_id,
                name=self.cfg.name,
                timeout_s=self.timeout_s,
            ).open(
                require_primary=not self.read_only,
                take_over_below=self.cfg.election_id + TAKE_OVER_SPAN if self.one_shot else None,
            )
        return self._p4rt

    def thrift(self) -> Bmv2Thrift:
        return Bmv2Thrift(self.cfg.thrift_port, self.cfg.thrift_host, self.timeout_s)

    def close(self) -> None:
        if self._p4rt is not None:
            self._p4rt.close()
            self._p4rt = None

    def __enter__(self) -> SwitchAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bring-up ----------------------------------------------------------------------------

    def cpid(self, port: int) -> int:
        return default_cpid(self.cfg.cp_mac, port)

    def cp_port(self, port: int, params: CpParams | None = None) -> CpPort:
        p = self.cfg.port(port)
        return CpPort(
            port,
            params or p.cp_params,
            self.cfg.cp_mac,
            self.cpid(port),
            limit_pkts=p.queue_depth_pkts or BMV2_DEFAULT_QUEUE_PKTS,
            limit_bytes=p.queue_depth_bytes,
        )

    def forwarding(self) -> tuple[list[P4TableEntry], EcmpProgram]:
        """The switch's forwarding entries, and its per-flow ECMP program (empty but with
        per-flow ECMP)."""
        name = self.cfg.name
        return forwarding_entries(self.net.l2_ports(name), self.net.ecmp_choices(name))

    def desired_table_entries(
        self, forwarding: tuple[list[P4TableEntry], EcmpProgram] | None = None
    ) -> list[P4TableEntry]:
        """Every table entry the switch should hold (``forwarding``: :meth:`forwarding`'s,
        if already found)."""
        plain, program = forwarding or self.forwarding()
        out = [*plain, *program.entries]
        for p in self.cfg.ports:
            if p.edge:
                cpid = self.cpid(p.port)
                out += edge_entries(p.port, p.cp_params, cpid, self.cfg.cp_mac, p.pause)
            elif (guarded := input_port_entry(p.port, p.pause, push_fb_tag=False)) is not None:
                out.append(guarded)
        if any(p.pause for p in self.cfg.ports):
            out += self._pause_source_entries()
        out += [
            pause_honour_entry(p.port, p.honour_pause_bps)
            for p in self.cfg.ports
            if p.honour_pause_bps is not None
        ]
        for p in self.cfg.ports:
            if p.cp:
                out += cp_entries(self.cp_port(p.port))
            elif p.queue_depth_pkts is not None:
                out.append(buffer_entry(p.port, p.queue_depth_pkts))
        return out

    def bring_up(self) -> ReconcileReport:
        """Push the pipeline (if it differs) and make the switch hold exactly the config."""
        sw = self.connect()
        ports = [p.port for p in self.cfg.ports]
        # The selector's groups before the entries that name them.
        forwarding = self.forwarding()
        report = self._reconcile_ecmp(sw, forwarding[1])
        report = _add(report, self._reconcile_tables(sw, self.desired_table_entries(forwarding)))
        groups = flood_groups(self.net.flood_ports(self.cfg.name))
        report = _add(
            report, self._reconcile_ids(sw, P4MulticastGroupEntry(), groups, "multicast_group_id")
        )
        sessions = [cnm_clone_session(p) for p in ports]
        report = _add(
            report, self._reconcile_ids(sw, P4CloneSessionEntry(), sessions, "session_id")
        )
        self.apply_queue_shaping()
        return report

    def apply_queue_shaping(self) -> None:
        """Queue rates; and depths: a port's buffer is the pipeline's limit (a CP port's
        admission entry; on another port, qcn.controller.entries.buffer_entry), and BMv2's
        own queue is made deeper (qcn.controller.entries.bmv2_queue_pkts): BMv2 drops a frame
        that finds its queue full without a trace.  With PAUSE on any input, every port's
        queue is made that deep: a frame BMv2 dropped would stay counted in its input's
        buffer for ever (the partitions are the only limit)."""
        pause = any(p.pause for p in self.cfg.ports)
        shaped = [
            p
            for p in self.cfg.ports
            if p.queue_rate_pps is not None or p.queue_depth_pkts or p.cp or pause
        ]
        if not shaped:
            return
        with self.thrift() as t:
            for p in shaped:
                if p.queue_rate_pps is not None:
                    t.set_queue_rate(p.queue_rate_pps, p.port)
                if p.cp:
                    t.set_queue_depth(bmv2_queue_pkts(self.cp_port(p.port).limit_pkts), p.port)
                elif pause or p.queue_depth_pkts is not None:
                    t.set_queue_depth(self._deep_queue_pkts(p), p.port)

    def _reconcile_tables(
        self, sw: P4RuntimeSwitch, desired: list[P4TableEntry]
    ) -> ReconcileReport:
        schema = sw.switch.p4info
        have = {
            _entry_key(e, schema): e for e in sw.read(P4TableEntry()) if not e.is_default_action
        }
        want = {_entry_key(e, schema): e for e in desired}
        return _apply_difference(
            sw, have, want, lambda a, b: _action_bytes(a, schema) == _action_bytes(b, schema)
        )

    def _reconcile_ecmp(self, sw: P4RuntimeSwitch, program: EcmpProgram) -> ReconcileReport:
        """Make the ECMP selector hold exactly ``program``'s members and groups, and the
        parser read IPv4 exactly where it has any.  A difference rebuilds both from empty:
        members must be created in port order (qcn.controller.entries.EcmpProgram)."""
        schema = sw.switch.p4info
        members = sw.read(P4ActionProfileMember(ACTION_PROFILE_ECMP))
        groups = sw.read(P4ActionProfileGroup(ACTION_PROFILE_ECMP))

        def encoded(entities: Any) -> list[bytes]:
            return sorted(e.encode(schema).SerializeToString() for e in entities)

        report = ReconcileReport(0, 0, 0)
        if encoded(members) != encoded(program.members) or encoded(groups) != encoded(
            program.groups
        ):
            using = [e for e in sw.read(P4TableEntry(TABLE_ECMP)) if not e.is_default_action]
            for stale in (using, groups, members):
                if stale:
                    sw.delete(stale)
            for fresh in (program.members, program.groups):
                if fresh:
                    sw.insert(fresh)
            report = ReconcileReport(
                len(program.members) + len(program.groups),
                0,
                len(using) + len(groups) + len(members),
            )
        with self.thrift() as t:
            reads_ipv4 = bool(program.members) or self.marks_ecn()
            t.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, IPV4_PARSED if reads_ipv4 else [])
        return report

    def marks_ecn(self) -> bool:
        """Some CP port of the configuration marks ECN: the parser reads IPv4."""
        return any(p.cp and p.cp_params.signal is CpSignal.ECN for p in self.cfg.ports)

    def _reconcile_ids(
        self, sw: P4RuntimeSwitch, wildcard: Any, desired: list[Any], id_field: str
    ) -> ReconcileReport:
        schema = sw.switch.p4info
        have = {getattr(e, id_field): e for e in sw.read(wildcard)}
        want = {getattr(e, id_field): e for e in desired}
        return _apply_difference(sw, have, want, lambda a, b: a.encode(schema) == b.encode(schema))

    def healthy(self) -> bool:
        """True if the connection answers and the switch still holds our pipeline."""
        if self._p4rt is None:
            return False
        try:
            self._p4rt.read(P4TableEntry(TABLE_ADMISSION))
        except P4RuntimeError:
            return False
        return True

    def keep_up(
        self, stop: Callable[[], bool], interval_s: float = 1.0, log: Callable[[str], None] = print
    ) -> None:
        """Hold the switch in its configured state until ``stop()``: after a lost
        connection or a switch restart, reconnect and bring it up again."""
        was_up = False
        reported = ""
        while not stop():
            if not self.healthy():
                if was_up:
                    log(f"{self.cfg.name}: connection lost; reconnecting")
                self.close()
                try:
                    r = self.bring_up()
                except (P4RuntimeError, Bmv2ThriftError) as e:
                    # Said once per distinct reason (each attempt ends within the deadline),
                    # so an absent switch is reported at once, not retried in silence.
                    if str(e) != reported:
                        log(
                            f"{self.cfg.name}: not reachable ({e}); retrying every {interval_s:g} s"
                        )
                        reported = str(e)
                    was_up = False
                else:
                    reported = ""
                    log(
                        f"{self.cfg.name}: up ({r.inserted} inserted, {r.modified} modified, "
                        f"{r.deleted} deleted)"
                    )
                    was_up = True
            time.sleep(interval_s)

    # -- live tuning -------------------------------------------------------------------------

    def read_cp(self, port: int) -> tuple[CpParams, int] | None:
        """The CP parameters the switch holds for ``port`` (None: CP off) and its CPID."""
        sw = self.connect()
        match = P4TableMatch(eg_port=port)
        # One read request for everything (each round trip costs about a millisecond).
        wanted = [
            P4TableEntry(TABLE_ADMISSION, match=match),
            P4TableEntry(TABLE_CP_SAMPLING, match=match),
            P4TableEntry(TABLE_ECN_MARKING, match=match),
        ]
        for instance in CP_INSTANCES:
            wanted += [
                P4TableEntry(cp_name(instance, CP_TABLE_CONFIG), match=match),
                P4TableEntry(cp_name(instance, CP_TABLE_SAMPLE_INTERVAL)),
            ]
        return decode_cp(sw.read(wanted), port, self.cfg.port(port).cp_params)

    def read_edge(self, port: int) -> dict[str, Any] | None:
        """The three-point settings of host-facing ``port`` as the switch holds them, as
        CpParams fields (None: no Fb tag exit there)."""
        entries = self.connect().read(
            P4TableEntry(TABLE_FB_TAG_EXIT, match=P4TableMatch(eg_port=port))
        )
        return decode_edge(entries, port)

    def set_cp(self, port: int, **changes: Any) -> CpParams:
        """Change some CP parameters of one port; validated before anything is written.
        On a host-facing port the three-point settings (three_point, reflect_*) change its
        Fb tag push and reflection point too."""
        p = self.cfg.port(port)
        if not p.cp and not p.edge:
            raise ConfigError(
                f"{self.cfg.name} port {port} runs no CP and faces no host (set cp = true or "
                "edge = true in the config)"
            )
        if not p.cp and not changes.keys() <= set(EDGE_SETTINGS):
            raise ConfigError(
                f"{self.cfg.name} port {port} runs no CP (set cp = true in the config); a "
                f"host-facing port takes only {', '.join(EDGE_SETTINGS)}"
            )
        current = self.read_cp(port) if p.cp else None
        base = current[0] if current else p.cp_params
        edge = self.read_edge(port) if p.edge else None
        if edge is not None:
            base = replace(base, **edge)
        new = base.with_changes(changes)  # raises ParamError (the live view's check too)
        if not p.cp and not new.three_point and changes.keys() - {"three_point"}:
            # A two-point host port's entry holds no probabilities: they would be lost.
            raise ConfigError(
                f"{self.cfg.name} port {port}: the reflection settings apply in three-point "
                "mode only (add --three-point on)"
            )
        if p.edge:
            self._set_edge(port, new)
        if p.cp:
            self._set_cp_entries(port, new, current)
        return new

    def _set_edge(self, port: int, params: CpParams) -> None:
        """The port's reflection point first, then its push: a tag is never pushed that
        the path's end would not handle as configured."""
        self.connect().modify([fb_tag_exit_entry(port, params, self.cpid(port), self.cfg.cp_mac)])
        pause, pushing = self._read_input_port(port)
        held = pushing is not None
        self._write_input_port(port, pause, push_fb_tag=params.three_point, held=held)

    def _read_input_port(self, port: int) -> tuple[PauseWatermarks | None, bool | None]:
        """The port's input_port entry, decoded: its PAUSE watermarks and whether it pushes
        the Fb tag (None: no entry)."""
        for e in self.connect().read(
            P4TableEntry(TABLE_INPUT_PORT, match=P4TableMatch(ig_port=port))
        ):
            if e.action is not None and int(e.match["ig_port"]) == port:
                return decode_input_port(e)
        return None, None

    def _write_input_port(
        self, port: int, pause: PauseWatermarks | None, *, push_fb_tag: bool, held: bool
    ) -> None:
        """Make the port's input_port entry hold ``pause`` and the push; ``held``: the
        switch holds an entry for the port now (_read_input_port)."""
        sw = self.connect()
        entry = input_port_entry(port, pause, push_fb_tag=push_fb_tag)
        if entry is None:
            if held:
                sw.delete([P4TableEntry(TABLE_INPUT_PORT, match=P4TableMatch(ig_port=port))])
        else:
            (sw.modify if held else sw.insert)([entry])

    def _set_cp_entries(
        self, port: int, new: CpParams, current: tuple[CpParams, int] | None
    ) -> None:
        cp = self.cp_port(port, new)
        sw = self.connect()
        if new.signal is CpSignal.ECN:
            # Before the first mark can be asked for: the parser reads IPv4 (and goes on
            # reading it until the next bring-up, whatever the port signals later).
            with self.thrift() as t:
                t.set_parse_vset(PARSE_VSET_FLOW_ETHERTYPES, IPV4_PARSED)
        if current is None:
            sw.insert(cp_entries(cp))
            return
        old = self.cp_port(port, current[0])
        marking, was_marking = ecn_marking_entry(cp), ecn_marking_entry(old)
        # A port never both marks and samples: marking stops before sampling may start, and
        # starts after it stopped (ECN marking needs the arrival CP, so the curve is never
        # there while the departure CP judges the port).
        if marking is None and was_marking is not None:
            sw.delete([was_marking])
        if old.instance != cp.instance:
            # Another CP judges the port now: its entries first, then the admission points
            # at it, then the old CP's entries go.
            sw.insert(stage2_entries(cp))
            sw.modify([admission_entry(cp)])
            sw.delete(stage2_entries(old)[::-1])
        else:
            changed = [admission_entry(cp), cp_config_entry(cp)]
            if cp.instance == CP_DEPARTURE:
                changed.append(cp_sampling_entry(cp))
            sw.modify(changed)
        if marking is not None:
            (sw.modify if was_marking is not None else sw.insert)([marking])
        if old.instance == cp.instance and (
            old.params.sample_intervals_bytes != new.sample_intervals_bytes
            or old.params.sample_jitter != new.sample_jitter
        ):
            sw.modify(sample_interval_entries(cp))

    def set_queue(self, port: int, rate_pps: int | None, depth_pkts: int | None) -> None:
        """A port's queue rate and buffer; the buffer is the pipeline's limit (a CP port's
        admission entry, another port's buffer_entry), BMv2's own queue then deeper
        (qcn.controller.entries.bmv2_queue_pkts)."""
        current = self.read_cp(port) if self.cfg.port(port).cp else None
        with self.thrift() as t:
            if rate_pps is not None:
                t.set_queue_rate(rate_pps, port)
            if depth_pkts is None:
                return
            sw = self.connect()
            if current is None:
                held = sw.read(P4TableEntry(TABLE_ADMISSION, match=P4TableMatch(eg_port=port)))
                write = sw.modify if any(e.action is not None for e in held) else sw.insert
                write([buffer_entry(port, depth_pkts)])
            else:
                cp = replace(self.cp_port(port, current[0]), limit_pkts=depth_pkts)
                sw.modify([admission_entry(cp)])
            t.set_queue_depth(bmv2_queue_pkts(depth_pkts), port)

    def set_pause(self, port: int, pause: PauseWatermarks | None) -> None:
        """802.3x PAUSE on the frames arriving at ``port`` (None: off), live.  The first
        guarded port also gets every port its PAUSE source address and a deep BMv2 queue
        (apply_queue_shaping)."""
        self.cfg.port(port)  # a port the configuration knows
        sw = self.connect()
        _, pushing = self._read_input_port(port)
        held = pushing is not None
        if pause is None:
            self._write_input_port(port, None, push_fb_tag=bool(pushing), held=held)
            return
        schema = sw.switch.p4info
        sources = {_entry_key(e, schema) for e in sw.read(P4TableEntry(TABLE_PAUSE_SOURCE))}
        missing = [e for e in self._pause_source_entries() if _entry_key(e, schema) not in sources]
        if missing:
            sw.insert(missing)
        self._write_input_port(port, pause, push_fb_tag=bool(pushing), held=held)
        with self.thrift() as t:
            for p in self.cfg.ports:
                if not p.cp:
                    t.set_queue_depth(self._deep_queue_pkts(p), p.port)

    def _pause_source_entries(self) -> list[P4TableEntry]:
        """Every port's PAUSEs come from the switch's address."""
        return [pause_source_entry(p.port, self.cfg.cp_mac) for p in self.cfg.ports]

    @staticmethod
    def _deep_queue_pkts(p: PortConfig) -> int:
        """BMv2's queue on a port that is not a CP's: deeper than the pipeline's buffer,
        or when PAUSE is on, than any frame its input counted (apply_queue_shaping)."""
        return bmv2_queue_pkts(p.queue_depth_pkts or BMV2_DEFAULT_QUEUE_PKTS)

    def read_pause(self, port: int) -> PauseWatermarks | None:
        """The port's PAUSE watermarks as the switch holds them (None: not guarded)."""
        return self._read_input_port(port)[0]

    # -- read-back ---------------------------------------------------------------------------

    def counters(self, port: int, only: tuple[str, ...] | None = None) -> dict[str, int]:
        """``port``'s pipeline counters (``only``: these, as :func:`read_counters` names
        them, in one P4Runtime read)."""
        return read_counters(self.connect(), port, only)

    def status(self) -> list[PortStatus]:
        self.connect()  # a switch with no ports configured must still answer
        rows = []
        try:
            thrift: Bmv2Thrift | None = self.thrift()
        except Bmv2ThriftError:
            thrift = None
        try:
            for p in self.cfg.ports:
                cp = self.read_cp(p.port)
                depth = thrift.occupancy(p.port)[0] if thrift and p.cp else None
                rows.append(
                    PortStatus(
                        p.port,
                        cp[0] if cp else None,
                        cp[1] if cp else None,
                        self.counters(p.port),
                        depth,
                        self.read_pause(p.port),
                        self.read_edge(p.port) if p.edge else None,
                    )
                )
        finally:
            if thrift:
                thrift.close()
        return rows


def read_counters(
    sw: P4RuntimeSwitch, port: int, only: tuple[str, ...] | None = None
) -> dict[str, int]:
    """The pipeline's per-port packet counters (frames, samples, CNMs: of the CP instance
    that judges the port, the other's being 0; tail drops, edge drops), or ``only`` these
    figures (``cp_cnms``, ``tail_drops``, ...), all in one read request (each round trip is
    work for the switch's threads, which run under SCHED_FIFO beside its packets)."""
    names = [n for n in COUNTERS if only is None or n.rsplit(".", 1)[-1] in only]
    entries = sw.read([P4CounterEntry(name, index=port) for name in names])
    if sorted(e.counter_id for e in entries) != sorted(names):
        raise P4RuntimeError(
            f"{sw.address}: counters of port {port} read {len(entries)} entries for "
            f"{len(names)} counters"
        )
    out: dict[str, int] = {}
    for e in entries:
        key = e.counter_id.rsplit(".", 1)[-1]  # one figure for both CP instances
        out[key] = out.get(key, 0) + (e.data.packet_count if e.data else 0)
    return out


def _apply_difference(
    sw: P4RuntimeSwitch,
    have: dict[Any, Any],
    want: dict[Any, Any],
    same: Callable[[Any, Any], bool],
) -> ReconcileReport:
    """Make the switch hold ``want``: delete the extra, modify the changed, insert the new."""
    insert = [e for k, e in want.items() if k not in have]
    modify = [e for k, e in want.items() if k in have and not same(e, have[k])]
    delete = [e for k, e in have.items() if k not in want]
    if delete:
        sw.delete(delete)
    if modify:
        sw.modify(modify)
    if insert:
        sw.insert(insert)
    return ReconcileReport(len(insert), len(modify), len(delete))


def _entry_key(entry: P4TableEntry, schema: Any) -> tuple[int, bytes]:
    te = entry.encode(schema).table_entry
    return te.table_id, b"".join(sorted(m.SerializeToString() for m in te.match))


def _action_bytes(entry: P4TableEntry, schema: Any) -> bytes:
    """The entry's action, encoded, with its parameters in id order (a switch returns them
    in its own order, not necessarily the one they were written in)."""
    action = entry.encode(schema).table_entry.action
    params = sorted(action.action.params, key=lambda p: p.param_id)
    del action.action.params[:]
    action.action.params.extend(params)
    return bytes(action.SerializeToString())


def _add(a: ReconcileReport, b: ReconcileReport) -> ReconcileReport:
    return ReconcileReport(a.inserted + b.inserted, a.modified + b.modified, a.deleted + b.deleted)


__all__ = ["P4RuntimeError", "PortStatus", "ReconcileReport", "SwitchAgent"]
