"""P4Runtime entities of the CP pipeline: parameters in, table entries out (no I/O).

Every P4 name comes from :mod:`qcn.core.pipeline` (checked against the compiled program by
tests/test_pipeline.py); the constants shared with ``p4src/include/defines.p4`` are checked
by tests/test_p4_program.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy import (
    P4CloneSessionEntry,
    P4MulticastGroupEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)

from qcn.core.cp_model import CpPortConfig
from qcn.core.params import CpParams, QueueDepth, SamplingMode
from qcn.core.pipeline import (
    ACTION_COMPUTE_FEEDBACK,
    ACTION_FORWARD,
    ACTION_MARK_EDGE,
    ACTION_PARAMS,
    ACTION_SAMPLE_BERNOULLI,
    ACTION_SAMPLE_BYTE_INTERVAL,
    ACTION_SET_SAMPLE_INTERVAL,
    TABLE_CP_CONFIG,
    TABLE_CP_SAMPLING,
    TABLE_EDGE_PORT,
    TABLE_L2,
    TABLE_SAMPLE_INTERVAL,
)

#: p4src/include/defines.p4: FLOOD_GROUP_BASE, CNM_SESSION_BASE.
FLOOD_GROUP_BASE = 1
CNM_SESSION_BASE = 1

#: cp_sampling's action for each sampling mode.
SAMPLING_ACTIONS = {
    SamplingMode.BERNOULLI: ACTION_SAMPLE_BERNOULLI,
    SamplingMode.BYTE_INTERVAL: ACTION_SAMPLE_BYTE_INTERVAL,
}


@dataclass(frozen=True)
class CpPort:
    """One CP-enabled egress port: its parameters and identity."""

    port: int
    params: CpParams
    cp_mac: str
    cpid: int

    @classmethod
    def with_default_cpid(cls, port: int, params: CpParams, cp_mac: str) -> CpPort:
        return cls(port, params, cp_mac, default_cpid(cp_mac, port))


def default_cpid(cp_mac: str, port: int) -> int:
    """CPID = the switch's MAC in the top 48 bits, the port in the low 16."""
    return (int(cp_mac.replace(":", ""), 16) << 16) | port


def cp_sampling_entry(cp: CpPort) -> P4TableEntry:
    """Stage 1 of the CP (every frame): the sampling mode (in Bernoulli mode with p_max) and
    the queue depth taken as q."""
    cfg = CpPortConfig.from_params(cp.params)
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
    cfg = CpPortConfig.from_params(cp.params)
    # The data-plane integers carry the action parameters' own names; the identity is the
    # port's.  One name per quantity, so no mapping to keep in step.
    identity = {"cpid": cp.cpid, "cp_mac": cp.cp_mac}
    args = {
        name: identity[name] if name in identity else int(getattr(cfg, name))
        for name in ACTION_PARAMS[ACTION_COMPUTE_FEEDBACK]
    }
    return P4TableEntry(
        TABLE_CP_CONFIG,
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(ACTION_COMPUTE_FEEDBACK, **args),
    )


def sample_interval_entries(cp: CpPort) -> list[P4TableEntry]:
    cfg = CpPortConfig.from_params(cp.params)
    return [
        P4TableEntry(
            TABLE_SAMPLE_INTERVAL,
            match=P4TableMatch(eg_port=cp.port, idx=i),
            action=P4TableAction(
                ACTION_SET_SAMPLE_INTERVAL,
                base_bytes=row.base_bytes,
                jitter_span_bytes=row.jitter_span_bytes,
            ),
        )
        for i, row in enumerate(cfg.intervals)
    ]


def cp_entries(cp: CpPort) -> list[P4TableEntry]:
    """Everything that configures one CP port."""
    return [cp_config_entry(cp), *sample_interval_entries(cp), cp_sampling_entry(cp)]


def l2_entry(mac: str, port: int) -> P4TableEntry:
    return P4TableEntry(
        TABLE_L2, match=P4TableMatch(dst_addr=mac), action=P4TableAction(ACTION_FORWARD, port=port)
    )


def edge_port_entry(port: int) -> P4TableEntry:
    return P4TableEntry(
        TABLE_EDGE_PORT,
        match=P4TableMatch(ig_port=port),
        action=P4TableAction(ACTION_MARK_EDGE),
    )


def flood_groups(ports: list[int]) -> list[P4MulticastGroupEntry]:
    """One flood group per port: every other port (none for a switch with one port)."""
    return [
        P4MulticastGroupEntry(
            FLOOD_GROUP_BASE + p, replicas=[(q, 1) for q in sorted(ports) if q != p]
        )
        for p in sorted(ports)
        if len(ports) > 1
    ]


def cnm_clone_session(port: int) -> P4CloneSessionEntry:
    """CNMs for frames that came in on ``port`` go back out of it."""
    return P4CloneSessionEntry(CNM_SESSION_BASE + port, replicas=[(port, 1)])
