"""P4Runtime entities of the CP pipeline: parameters in, table entries out (no I/O).

Every P4 name comes from :mod:`qcn.core.pipeline` (checked against the compiled program by
tests/test_pipeline.py); the constants shared with ``p4src/include/defines.p4`` are checked
by tests/test_p4_program.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property

from finsy import (
    P4ActionProfileGroup,
    P4ActionProfileMember,
    P4CloneSessionEntry,
    P4IndirectAction,
    P4Member,
    P4MulticastGroupEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)

from qcn.core.cp_model import CpPortConfig
from qcn.core.ecmp import hash_shift
from qcn.core.params import (
    ECN_SLOPE_SHIFT,
    PAUSE_QUANTA_MAX,
    PAUSE_QUANTUM_BITS,
    PROB_ONE,
    SEED_FRAME_BYTES,
    W_ONE,
    CpJudge,
    CpParams,
    CpSignal,
    ParamError,
    QueueDepth,
    QueueUnit,
    SamplingMode,
)
from qcn.core.pipeline import (
    ACTION_ADMIT,
    ACTION_ADMIT_SAMPLE_BERNOULLI,
    ACTION_ADMIT_SAMPLE_BYTE_INTERVAL,
    ACTION_FORWARD,
    ACTION_FORWARD_BY_FLOW,
    ACTION_HONOUR,
    ACTION_MARK_ECN,
    ACTION_MARK_EDGE,
    ACTION_POP_FB_TAG,
    ACTION_PROFILE_ECMP,
    ACTION_PUSH_FB_TAG,
    ACTION_REFLECT_FB,
    ACTION_SAMPLE_BERNOULLI,
    ACTION_SAMPLE_BYTE_INTERVAL,
    ACTION_SET_SOURCE,
    ACTION_WATCH,
    ACTION_WATCH_AND_PUSH_FB_TAG,
    CP_ACTION_COMPUTE_FEEDBACK,
    CP_ACTION_PARAMS,
    CP_ACTION_SET_SAMPLE_INTERVAL,
    CP_ARRIVAL,
    CP_DEPARTURE,
    CP_TABLE_CONFIG,
    CP_TABLE_SAMPLE_INTERVAL,
    ECN_MARKING_PARAMS,
    PAUSE_PARAMS,
    TABLE_ADMISSION,
    TABLE_CP_SAMPLING,
    TABLE_ECMP,
    TABLE_ECN_MARKING,
    TABLE_EDGE_PORT,
    TABLE_FB_TAG_EXIT,
    TABLE_INPUT_PORT,
    TABLE_L2,
    TABLE_PAUSE_HONOUR,
    TABLE_PAUSE_SOURCE,
    cp_name,
)

#: p4src/include/defines.p4: FLOOD_GROUP_BASE, CNM_SESSION_BASE.
FLOOD_GROUP_BASE = 1
CNM_SESSION_BASE = 1
SIGNAL_CODES: dict[CpSignal, int] = {CpSignal.CNM: 0, CpSignal.ECN: 1, CpSignal.NONE: 2}
"""A port's signal as cp_config holds it (its `signal` parameter): defines.p4's SIGNAL_CNM
is CNM's, the only one that samples; the others the controller reads back."""
SIGNAL_OF_CODE = {code: signal for signal, code in SIGNAL_CODES.items()}

#: Each sampling mode's stage-1 action: in the admission table (the arrival CP), and in
#: cp_sampling (the departure CP).
ADMIT_SAMPLING_ACTIONS = {
    SamplingMode.BERNOULLI: ACTION_ADMIT_SAMPLE_BERNOULLI,
    SamplingMode.BYTE_INTERVAL: ACTION_ADMIT_SAMPLE_BYTE_INTERVAL,
}
SAMPLING_ACTIONS = {
    SamplingMode.BERNOULLI: ACTION_SAMPLE_BERNOULLI,
    SamplingMode.BYTE_INTERVAL: ACTION_SAMPLE_BYTE_INTERVAL,
}

BMV2_DEFAULT_QUEUE_PKTS = 64
"""BMv2's egress queue depth when none is set: a CP port's buffer limit by default."""
MAX_FRAME_BYTES = 9216
"""The largest frame a port's queue is assumed to hold (jumbo), for the Fb range check."""
NO_LIMIT = (1 << 32) - 1
"""An admission limit that is never reached (the action's bit<32> maximum)."""


UNCOUNTED_HEADROOM_PKTS = 1 << 16
"""Room in a CP port's BMv2 queue for frames the pipeline does not count."""


def bmv2_queue_pkts(limit_pkts: int) -> int:
    """BMv2's own queue depth for a CP port whose pipeline admits ``limit_pkts`` frames.

    Deep enough never to drop a frame the pipeline counted, which would leave the count
    too high for ever: besides the counted frames (at most the limit), the queue holds the
    frames the pipeline does not count, flooded frames and CNMs leaving through that port,
    as many as arrive while the counted ones drain.  A deep BMv2 queue costs nothing until
    it fills, so the headroom is simply large.
    """
    return limit_pkts + UNCOUNTED_HEADROOM_PKTS


@dataclass(frozen=True)
class CpPort:
    """One CP-enabled egress port: its parameters, identity and buffer limits."""

    port: int
    params: CpParams
    cp_mac: str
    cpid: int
    limit_pkts: int = BMV2_DEFAULT_QUEUE_PKTS
    """The pipeline's tail drop: frames in the port's queue (p4src/control/admission.p4)."""
    limit_bytes: int | None = None
    """And bytes, if set."""

    @classmethod
    def with_default_cpid(
        cls,
        port: int,
        params: CpParams,
        cp_mac: str,
        limit_pkts: int = BMV2_DEFAULT_QUEUE_PKTS,
        limit_bytes: int | None = None,
    ) -> CpPort:
        return cls(port, params, cp_mac, default_cpid(cp_mac, port), limit_pkts, limit_bytes)

    def __post_init__(self) -> None:
        # Fb = -(16 qoff + w_fixed qdelta) is computed in 32 signed bits: |qoff| and
        # |qdelta| are at most the deepest queue the port admits.
        deepest = self.limit_pkts * MAX_FRAME_BYTES
        if self.limit_bytes is not None:
            deepest = min(deepest, self.limit_bytes)
        if self.params.queue_unit is QueueUnit.PACKETS:
            deepest = self.limit_pkts
        w_fixed = self.encoded.w_fixed
        if deepest * (W_ONE + w_fixed) >= 1 << 31:
            raise ParamError(
                "cp.w",
                f"port {self.port}: a queue of {deepest} {self.params.queue_unit.value} with "
                f"w = {self.params.w:g} overflows the pipeline's 32-bit Fb; lower the buffer or w",
            )

    @cached_property
    def encoded(self) -> CpPortConfig:
        """The parameters as the data plane's integers, computed once per port."""
        return CpPortConfig.from_params(self.params)

    @property
    def instance(self) -> str:
        """The CP instance that holds the entries: arrivals are judged in ingress."""
        return CP_ARRIVAL if self.params.depth_at is QueueDepth.ARRIVAL else CP_DEPARTURE


def default_cpid(cp_mac: str, port: int) -> int:
    """CPID = the switch's MAC in the top 48 bits, the port in the low 16."""
    return (int(cp_mac.replace(":", ""), 16) << 16) | port


def admission_entry(cp: CpPort) -> P4TableEntry:
    """The port's queue as the pipeline counts it (limits, unit of q) and, where the
    arrival CP judges the port, that CP's stage 1 (every frame): the sampling mode, in
    Bernoulli mode with p_max.  Where the departure CP judges it: `admit` alone."""
    cfg = cp.encoded
    args = {
        "limit_pkts": cp.limit_pkts,
        "limit_bytes": NO_LIMIT if cp.limit_bytes is None else cp.limit_bytes,
        "bytes_unit": int(cp.params.queue_unit is QueueUnit.BYTES),
    }
    action = ACTION_ADMIT
    if cp.instance == CP_ARRIVAL:
        action = ADMIT_SAMPLING_ACTIONS[cfg.sampling]
        if cfg.sampling is SamplingMode.BERNOULLI:
            args["p_max_fixed"] = cfg.p_max_fixed
        args["judge_dropped"] = int(cfg.judge_dropped)
    return P4TableEntry(
        TABLE_ADMISSION, match=P4TableMatch(eg_port=cp.port), action=P4TableAction(action, **args)
    )


def buffer_entry(port: int, limit_pkts: int) -> P4TableEntry:
    """A port without a CP whose buffer is ``limit_pkts`` frames: the pipeline counts its
    queue and tail-drops beyond it (counted in tail_drops), as on a CP port, so that no
    frame is lost in BMv2's own queue uncounted (qcn.controller.agent, apply_queue_shaping)."""
    return P4TableEntry(
        TABLE_ADMISSION,
        match=P4TableMatch(eg_port=port),
        action=P4TableAction(
            ACTION_ADMIT, limit_pkts=limit_pkts, limit_bytes=NO_LIMIT, bytes_unit=0
        ),
    )


def cp_sampling_entry(cp: CpPort) -> P4TableEntry:
    """The departure CP's stage 1 (every departing frame): the sampling mode (in Bernoulli
    mode with p_max) and the queue depth taken as q."""
    if cp.instance != CP_DEPARTURE:
        raise ValueError(f"port {cp.port}: the arrival CP's stage 1 is its admission entry")
    cfg = cp.encoded
    args = {"dequeue_depth": int(cfg.depth_at is QueueDepth.DEQUEUE)}
    if cfg.sampling is SamplingMode.BERNOULLI:
        args["p_max_fixed"] = cfg.p_max_fixed
    return P4TableEntry(
        TABLE_CP_SAMPLING,
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(SAMPLING_ACTIONS[cfg.sampling], **args),
    )


def cp_config_entry(cp: CpPort) -> P4TableEntry:
    """Stage 2 of the CP (sampling candidates): feedback, sampling probability, identity."""
    cfg = cp.encoded
    # The data-plane integers carry the action parameters' own names; the identity is the
    # port's, and the signal its code.  One name per quantity, so no mapping to keep in step.
    held = {"cpid": cp.cpid, "cp_mac": cp.cp_mac, "signal": SIGNAL_CODES[cfg.signal]}
    args = {
        name: held[name] if name in held else int(getattr(cfg, name))
        for name in CP_ACTION_PARAMS[CP_ACTION_COMPUTE_FEEDBACK]
    }
    return P4TableEntry(
        cp_name(cp.instance, CP_TABLE_CONFIG),
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(cp_name(cp.instance, CP_ACTION_COMPUTE_FEEDBACK), **args),
    )


def sample_interval_entries(cp: CpPort) -> list[P4TableEntry]:
    cfg = cp.encoded
    return [
        P4TableEntry(
            cp_name(cp.instance, CP_TABLE_SAMPLE_INTERVAL),
            match=P4TableMatch(eg_port=cp.port, idx=i),
            action=P4TableAction(
                cp_name(cp.instance, CP_ACTION_SET_SAMPLE_INTERVAL),
                base_bytes=row.base_bytes,
                jitter_span_bytes=row.jitter_span_bytes,
            ),
        )
        for i, row in enumerate(cfg.intervals)
    ]


def ecn_marking_entry(cp: CpPort) -> P4TableEntry | None:
    """DCQCN's marking curve on a port whose signal is ECN (p4src/control/ecn_marking.p4);
    None: the port marks nothing."""
    cfg = cp.encoded
    if cfg.signal is not CpSignal.ECN:
        return None
    return P4TableEntry(
        TABLE_ECN_MARKING,
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(
            ACTION_MARK_ECN, **{name: int(getattr(cfg, name)) for name in ECN_MARKING_PARAMS}
        ),
    )


PMAX_DIGITS = 15
"""Significant digits of a pmax read back: the fewest that encode to the slope held."""


def decode_pmax(kmin_bytes: int, kmax_bytes: int, ecn_slope: int) -> float:
    """The pmax a marking entry holds: the shortest decimal whose encoding
    (CpPortConfig.from_params, the one encoder) is ``ecn_slope``."""
    exact = ecn_slope * (kmax_bytes - kmin_bytes) / (PROB_ONE << ECN_SLOPE_SHIFT)
    curve = CpParams(signal=CpSignal.ECN, kmin_bytes=kmin_bytes, kmax_bytes=kmax_bytes)
    for digits in range(1, PMAX_DIGITS + 1):
        pmax = min(1.0, float(f"{exact:.{digits}g}"))
        if CpPortConfig.from_params(replace(curve, pmax=pmax)).ecn_slope == ecn_slope:
            return pmax
    return min(1.0, exact)


SIGNAL_FIELDS: dict[CpSignal, tuple[str, ...]] = {
    CpSignal.CNM: ("sampling", "p_base", "p_scale"),
    CpSignal.ECN: ("kmin_bytes", "kmax_bytes", "pmax"),
}
"""The CpParams fields the switch holds only on a port of that signal (a port that sends no
CNM samples nothing; one that does not mark has no curve): read back from another port, they
are the configured ones."""


def decode_cp(
    entries: Iterable[P4TableEntry], port: int, configured: CpParams | None = None
) -> tuple[CpParams, int] | None:
    """The CP parameters and CPID that ``entries`` hold for ``port`` (None: no CP there):
    the inverse of :func:`cp_entries`, for entries read back from a switch.  The fields the
    switch does not hold for the port's signal (:data:`SIGNAL_FIELDS`) are ``configured``'s
    (default: the defaults)."""
    held: dict[str, list[P4TableEntry]] = {}
    for e in entries:
        if _match_field(e, "eg_port") == port:
            held.setdefault(str(e.table_id), []).append(e)
    admitted = held.get(TABLE_ADMISSION, [])
    if not admitted:
        return None
    admit = _action(admitted[0]).name
    instance = CP_DEPARTURE if admit == ACTION_ADMIT else CP_ARRIVAL
    stage1 = admitted if instance == CP_ARRIVAL else held.get(TABLE_CP_SAMPLING, [])
    found = held.get(cp_name(instance, CP_TABLE_CONFIG), [])
    if not (stage1 and found):
        return None
    args = _action_args(found[0])
    modes = {
        action: mode
        for actions in (ADMIT_SAMPLING_ACTIONS, SAMPLING_ACTIONS)
        for mode, action in actions.items()
    }
    intervals = held.get(cp_name(instance, CP_TABLE_SAMPLE_INTERVAL), [])
    rows = sorted((_match_field(e, "idx"), _action_args(e)) for e in intervals)
    depth_at, judge = QueueDepth.ARRIVAL, CpJudge.ADMITTED
    if instance != CP_ARRIVAL:
        dequeue = _action_args(stage1[0])["dequeue_depth"]
        depth_at = QueueDepth.DEQUEUE if dequeue else QueueDepth.ENQUEUE
    elif _action_args(stage1[0])["judge_dropped"]:
        judge = CpJudge.ARRIVALS
    bytes_unit = _action_args(admitted[0])["bytes_unit"]
    unit = QueueUnit.BYTES if bytes_unit else QueueUnit.PACKETS
    q_eq = args["q_eq"]
    params = CpParams(
        # Bytes mode holds q_eq in bytes only; q_eq_pkts is its nearest frame count.
        q_eq_pkts=q_eq if unit is QueueUnit.PACKETS else max(1, round(q_eq / SEED_FRAME_BYTES)),
        q_eq_bytes=q_eq if unit is QueueUnit.BYTES else 0,
        queue_unit=unit,
        w=args["w_fixed"] / W_ONE,
        p_base=args["p_base_fixed"] / PROB_ONE,
        p_scale=args["p_scale_fixed"] / PROB_ONE,
        sampling=modes[_action(stage1[0]).name],
        depth_at=depth_at,
        judge=judge,
        positive_feedback=bool(args["positive_feedback"]),
        three_point=bool(args["three_point"]),
        reflect_p_base=args["reflect_p_base_fixed"] / PROB_ONE,
        reflect_p_scale=args["reflect_p_scale_fixed"] / PROB_ONE,
    )
    params = replace(params, signal=SIGNAL_OF_CODE[args["signal"]])
    marking = held.get(TABLE_ECN_MARKING, [])
    if marking:
        curve = _action_args(marking[0])
        kmin, kmax = curve["kmin_bytes"], curve["kmax_bytes"]
        params = replace(
            params,
            kmin_bytes=kmin,
            kmax_bytes=kmax,
            pmax=decode_pmax(kmin, kmax, curve["ecn_slope"]),
        )
    base = configured if configured is not None else CpParams()
    params = replace(
        params,
        **{
            name: getattr(base, name)
            for other, names in SIGNAL_FIELDS.items()
            if other is not params.signal
            for name in names
        },
    )
    if len(rows) == len(params.sample_intervals_bytes):
        bases = tuple(a["base_bytes"] for _, a in rows)
        half = rows[0][1]["jitter_span_bytes"] // 2
        params = replace(
            params, sample_intervals_bytes=bases, sample_jitter=round(half / bases[0], 6)
        )
    return params, args["cpid"]


def _action(entry: P4TableEntry) -> P4TableAction:
    if not isinstance(entry.action, P4TableAction):
        raise ValueError(f"{entry.table_id}: an entry without a direct action")
    return entry.action


def _action_args(entry: P4TableEntry) -> dict[str, int]:
    """An entry's integer action parameters (the CP's MAC, written as text, is left out)."""
    return {
        name: int(value)
        for name, value in _action(entry).args.items()
        if not (isinstance(value, str) and ":" in value)
    }


def _match_field(entry: P4TableEntry, name: str) -> int:
    if entry.match is None:
        raise ValueError(f"{entry.table_id}: an entry without a match")
    return int(entry.match[name])


def stage2_entries(cp: CpPort) -> list[P4TableEntry]:
    """The port's entries in its CP instance's stage-2 tables (and the departure CP's
    stage 1): what moves when another CP instance takes the port over."""
    out = [cp_config_entry(cp), *sample_interval_entries(cp)]
    if cp.instance == CP_DEPARTURE:
        out.append(cp_sampling_entry(cp))
    return out


def cp_entries(cp: CpPort) -> list[P4TableEntry]:
    """Everything that configures one CP port (its admission last: once a frame can be
    sampled, stage 2 is there; once one is admitted, its marking curve)."""
    marking = ecn_marking_entry(cp)
    return [*stage2_entries(cp), *([marking] if marking else []), admission_entry(cp)]


def l2_entry(mac: str, port: int) -> P4TableEntry:
    return P4TableEntry(
        TABLE_L2, match=P4TableMatch(dst_addr=mac), action=P4TableAction(ACTION_FORWARD, port=port)
    )


@dataclass(frozen=True)
class EcmpProgram:
    """Per-flow ECMP on one switch (p4src/control/forwarding.p4, qcn.core.ecmp): the
    selector's members and groups, and the entries that use them."""

    members: tuple[P4ActionProfileMember, ...]
    """One per port, created in port order: BMv2 takes a group's members in the order of
    their handles, which is the order of creation."""
    groups: tuple[P4ActionProfileGroup, ...]
    entries: tuple[P4TableEntry, ...]
    """Each destination with equal-cost ports: its l2_forwarding entry (forward_by_flow),
    then its ecmp_forwarding entry (its group)."""


def forwarding_entries(
    ports: dict[str, int], choices: dict[str, tuple[tuple[int, ...], int]]
) -> tuple[list[P4TableEntry], EcmpProgram]:
    """A switch's forwarding: for each destination MAC in ``ports`` (its per-destination
    port), an l2_forwarding entry; where ``choices`` gives it equal-cost ports (and its
    distance, qcn.core.ecmp.hash_shift), one that sends flows by their hash instead, and
    the selector's program."""
    plain = [l2_entry(mac, port) for mac, port in sorted(ports.items()) if mac not in choices]
    spread = sorted(choices.items())
    member_ports = sorted({p for hops, _ in choices.values() for p in hops})
    members = tuple(
        P4ActionProfileMember(
            ACTION_PROFILE_ECMP, member_id=port + 1, action=P4TableAction(ACTION_FORWARD, port=port)
        )
        for port in member_ports
    )
    group_ids = {hops: i + 1 for i, hops in enumerate(sorted({h for h, _ in choices.values()}))}
    groups = tuple(
        P4ActionProfileGroup(
            ACTION_PROFILE_ECMP,
            group_id=gid,
            max_size=len(hops),
            members=[P4Member(port + 1, weight=1) for port in hops],
        )
        for hops, gid in group_ids.items()
    )
    entries: list[P4TableEntry] = []
    for mac, (hops, distance) in spread:
        entries.append(
            P4TableEntry(
                TABLE_L2,
                match=P4TableMatch(dst_addr=mac),
                action=P4TableAction(
                    ACTION_FORWARD_BY_FLOW, port=ports[mac], hash_shift=hash_shift(distance)
                ),
            )
        )
        entries.append(
            P4TableEntry(
                TABLE_ECMP,
                match=P4TableMatch(dst_addr=mac),
                action=P4IndirectAction(group_id=group_ids[hops]),
            )
        )
    return plain, EcmpProgram(members, groups, tuple(entries))


def edge_port_entry(port: int) -> P4TableEntry:
    return P4TableEntry(
        TABLE_EDGE_PORT,
        match=P4TableMatch(ig_port=port),
        action=P4TableAction(ACTION_MARK_EDGE),
    )


def fb_tag_exit_entry(port: int, params: CpParams, cpid: int, mac: str) -> P4TableEntry:
    """Tagged frames towards the host on ``port`` lose the tag; in three-point mode they
    meet the end reflection point first (its CNMs from ``mac``, Fb = 0's under ``cpid``)."""
    if not params.three_point:
        action = P4TableAction(ACTION_POP_FB_TAG)
    else:
        cfg = CpPortConfig.from_params(params)
        action = P4TableAction(
            ACTION_REFLECT_FB,
            p0_fixed=cfg.p0_fixed,
            reflect_p_base_fixed=cfg.reflect_p_base_fixed,
            reflect_p_scale_fixed=cfg.reflect_p_scale_fixed,
            cpid=cpid,
            rp_mac=mac,
        )
    return P4TableEntry(TABLE_FB_TAG_EXIT, match=P4TableMatch(eg_port=port), action=action)


def edge_entries(
    port: int, params: CpParams, cpid: int, mac: str, pause: PauseWatermarks | None = None
) -> list[P4TableEntry]:
    """Everything a host-facing port holds: the CNM guard, the Fb tag's exit, and its input
    port entry (the tag's push in three-point mode, and ``pause`` if PAUSE guards it)."""
    out = [edge_port_entry(port), fb_tag_exit_entry(port, params, cpid, mac)]
    entry = input_port_entry(port, pause, push_fb_tag=params.three_point)
    if entry is not None:
        out.append(entry)
    return out


def decode_edge(entries: Iterable[P4TableEntry], port: int) -> dict[str, object] | None:
    """The three-point settings ``entries`` hold for host-facing ``port``, as CpParams
    fields (None: the port has no Fb tag exit, so it faces no host)."""
    for e in entries:
        if str(e.table_id) != TABLE_FB_TAG_EXIT or _match_field(e, "eg_port") != port:
            continue
        if _action(e).name != ACTION_REFLECT_FB:
            return {"three_point": False}
        args = _action_args(e)
        return {
            "three_point": True,
            "reflect_p0": args["p0_fixed"] / PROB_ONE,
            "reflect_p_base": args["reflect_p_base_fixed"] / PROB_ONE,
            "reflect_p_scale": args["reflect_p_scale_fixed"] / PROB_ONE,
        }
    return None


def flood_groups(ports: list[int]) -> list[P4MulticastGroupEntry]:
    """One flood group per port that may flood (``ports``: the host ports and the switch
    links of the network's spanning tree): every other such port.  A frame entering by a
    link off the tree finds no group and is not flooded (none for a switch with one
    port)."""
    return [
        P4MulticastGroupEntry(
            FLOOD_GROUP_BASE + p, replicas=[(q, 1) for q in sorted(ports) if q != p]
        )
        for p in sorted(ports)
        if len(ports) > 1
    ]


@dataclass(frozen=True)
class PauseWatermarks:
    """802.3x PAUSE on one input port (p4src/control/pause.p4): its buffer partition, the
    watermarks, and the PAUSE it sends."""

    hi_bytes: int
    lo_bytes: int
    partition_bytes: int
    """Frames from the input beyond this are dropped (pause_drops)."""
    pause_quanta: int
    """The pause time each PAUSE asks for (512-bit quanta at the peer's rate)."""
    refresh_us: int
    """While above hi, a PAUSE again once this long has passed since the last."""

    def __post_init__(self) -> None:
        if not 0 <= self.lo_bytes < self.hi_bytes < self.partition_bytes <= NO_LIMIT:
            raise ParamError(
                "pause",
                f"watermarks must satisfy 0 <= lo < hi < partition (got lo {self.lo_bytes}, "
                f"hi {self.hi_bytes}, partition {self.partition_bytes} bytes)",
            )
        if not 1 <= self.pause_quanta <= PAUSE_QUANTA_MAX:
            raise ParamError(
                "pause.pause_quanta", f"must be 1..{PAUSE_QUANTA_MAX} (got {self.pause_quanta})"
            )
        if not 1 <= self.refresh_us < 1 << 48:
            raise ParamError("pause.refresh_us", f"must be positive (got {self.refresh_us})")


def input_port_entry(
    port: int, pause: PauseWatermarks | None, *, push_fb_tag: bool
) -> P4TableEntry | None:
    """The input port's one entry (p4src/control/input_port.p4): PAUSE's watermarks, the
    Fb tag's push, or both (None: neither)."""
    if pause is None:
        if not push_fb_tag:
            return None
        return P4TableEntry(
            TABLE_INPUT_PORT,
            match=P4TableMatch(ig_port=port),
            action=P4TableAction(ACTION_PUSH_FB_TAG),
        )
    return P4TableEntry(
        TABLE_INPUT_PORT,
        match=P4TableMatch(ig_port=port),
        action=P4TableAction(
            ACTION_WATCH_AND_PUSH_FB_TAG if push_fb_tag else ACTION_WATCH,
            **{name: getattr(pause, name) for name in PAUSE_PARAMS},
        ),
    )


def decode_input_port(entry: P4TableEntry) -> tuple[PauseWatermarks | None, bool]:
    """An input_port entry's PAUSE watermarks (None: not guarded) and whether it pushes the
    Fb tag: the inverse of :func:`input_port_entry`."""
    action = _action(entry)
    push = action.name in (ACTION_PUSH_FB_TAG, ACTION_WATCH_AND_PUSH_FB_TAG)
    if action.name == ACTION_PUSH_FB_TAG:
        return None, push
    args = _action_args(entry)
    return PauseWatermarks(**{name: args[name] for name in PAUSE_PARAMS}), push


def pause_source_entry(port: int, mac: str) -> P4TableEntry:
    """PAUSEs leaving ``port`` come from ``mac`` (the switch's)."""
    return P4TableEntry(
        TABLE_PAUSE_SOURCE,
        match=P4TableMatch(eg_port=port),
        action=P4TableAction(ACTION_SET_SOURCE, port_mac=mac),
    )


QUANTUM_FRAC_BITS = 16
"""p4src/control/port_hold.p4's honour(quantum_us_fp16): µs with 16 fractional bits."""
MIN_HONOUR_RATE_BPS = 10_000
MAX_HONOUR_RATE_BPS = 10**12
"""Link rates a port honouring PAUSE may count quanta at: the quantum stays within 32 bits
and at least 34 units (0.3 % at 1 Tb/s)."""


def quantum_us_fp16(link_rate_bps: float) -> int:
    """One pause quantum at ``link_rate_bps`` in µs, with 16 fractional bits."""
    if not MIN_HONOUR_RATE_BPS <= link_rate_bps <= MAX_HONOUR_RATE_BPS:
        raise ParamError(
            "honour_pause_bps",
            f"must be {MIN_HONOUR_RATE_BPS:,}..{MAX_HONOUR_RATE_BPS:.0e} b/s (got {link_rate_bps})",
        )
    return round(PAUSE_QUANTUM_BITS * 1e6 * (1 << QUANTUM_FRAC_BITS) / link_rate_bps)


def pause_honour_entry(port: int, link_rate_bps: float) -> P4TableEntry:
    """``port`` honours the PAUSEs it receives: its queue is held for their time, counted
    in quanta of ``link_rate_bps`` (p4src/control/port_hold.p4)."""
    return P4TableEntry(
        TABLE_PAUSE_HONOUR,
        match=P4TableMatch(ig_port=port),
        action=P4TableAction(ACTION_HONOUR, quantum_us_fp16=quantum_us_fp16(link_rate_bps)),
    )


def cnm_clone_session(port: int) -> P4CloneSessionEntry:
    """CNMs for frames that came in on ``port`` go back out of it."""
    return P4CloneSessionEntry(CNM_SESSION_BASE + port, replicas=[(port, 1)])
