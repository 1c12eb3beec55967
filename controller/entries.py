"""P4Runtime entities of the CP pipeline: parameters in, table entries out (no I/O).

The names and constants match ``p4src/`` (tests/test_p4_constants.py checks the ones both
sides define).  Table and action names are P4Info aliases (the shortest unique suffix).
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

from qcn.cp_model import CpPortConfig
from qcn.params import CpParams, QueueDepth, SamplingMode

#: p4src/include/defines.p4: FLOOD_GROUP_BASE, CNM_SESSION_BASE.
FLOOD_GROUP_BASE = 1
CNM_SESSION_BASE = 1

CP_SAMPLING_TABLE = "cp_sampling"
#: cp_sampling's action for each sampling mode.
SAMPLING_ACTIONS = {
    SamplingMode.BERNOULLI: "sample_bernoulli",
    SamplingMode.BYTE_INTERVAL: "sample_byte_interval",
}
CP_CONFIG_TABLE = "cp_config"
SAMPLE_INTERVAL_TABLE = "sample_interval"
L2_TABLE = "l2_forwarding"
EDGE_PORT_TABLE = "edge_port"

#: Per-port counters of the pipeline, in the order `qcn ctl show` prints them.
COUNTERS = ("cp_frames", "cp_samples", "cp_cnms", "cnm_edge_drops")
#: Per-port registers (read over Thrift).
LAST_QDEPTH_REGISTER = "QcnEgress.cp.last_qdepth"


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
        args["p_max_fixed"] = cfg.p_max_fp
    return P4TableEntry(
        CP_SAMPLING_TABLE,
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(SAMPLING_ACTIONS[cfg.sampling], **args),
    )


def cp_config_entry(cp: CpPort) -> P4TableEntry:
    """Stage 2 of the CP (sampling candidates): feedback, sampling probability, identity."""
    cfg = CpPortConfig.from_params(cp.params)
    return P4TableEntry(
        CP_CONFIG_TABLE,
        match=P4TableMatch(eg_port=cp.port),
        action=P4TableAction(
            "compute_feedback",
            q_eq_pkts=cfg.q_eq,
            w_fixed=cfg.w_fp,
            fbmax_fixed=cfg.fbmax_fp,
            fb_multiplier=cfg.fb_mult,
            p_base_fixed=cfg.p_base_fp,
            p_scale_fixed=cfg.p_scale_fp,
            cpid=cp.cpid,
            cp_mac=cp.cp_mac,
        ),
    )


def sample_interval_entries(cp: CpPort) -> list[P4TableEntry]:
    cfg = CpPortConfig.from_params(cp.params)
    return [
        P4TableEntry(
            SAMPLE_INTERVAL_TABLE,
            match=P4TableMatch(eg_port=cp.port, idx=i),
            action=P4TableAction(
                "set_sample_interval",
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
        L2_TABLE, match=P4TableMatch(dst_addr=mac), action=P4TableAction("forward", port=port)
    )


def edge_port_entry(port: int) -> P4TableEntry:
    return P4TableEntry(
        EDGE_PORT_TABLE, match=P4TableMatch(ig_port=port), action=P4TableAction("mark_edge")
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
