"""The CP pipeline as Python sees it: where it is built, how, and every name it exposes.

Everything Python says to or about ``p4src/`` is named here once: the p4c command line, the
build outputs, BMv2's default ports, and the P4 program's tables, actions, action
parameters, counters and registers.  ``tests/test_pipeline.py`` compiles the program and
checks every name against the P4Info and the BMv2 JSON, so a rename on one side fails there.

Build outputs are found by configuration, not by assuming a checkout: ``$QCN_BUILD_DIR``,
else the checkout's ``build/`` when the package runs from one, else ``./build``.

    python -m qcn.core.pipeline [--out DIR] [SOURCE]     # what `make build` runs
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from qcn.core.errors import CheckFailedError, QcnError, ToolMissingError, report

PROGRAM = "qcn_cp"
"""The top-level P4 file's stem; its outputs are PROGRAM.json and PROGRAM.p4info.txtpb."""
_CHECKOUT = Path(__file__).resolve().parents[2]

# -- BMv2 --------------------------------------------------------------------------------------
BMV2_GRPC_PORT = 9559
"""simple_switch_grpc's default --grpc-server-addr port."""
BMV2_THRIFT_PORT = 9090
"""simple_switch's default --thrift-port."""
BMV2_DEVICE_ID = 1
"""The P4Runtime device id the project's switches run with (finsy's default too)."""

# -- P4 names (P4Info aliases; full names where BMv2's Thrift API needs them) -------------------
TABLE_L2 = "l2_forwarding"
ACTION_FORWARD = "forward"
#: Per-flow ECMP (p4src/control/forwarding.p4): a destination with equal-cost ports, its
#: group of them in the selector, one member per port.
ACTION_FORWARD_BY_FLOW = "forward_by_flow"
TABLE_ECMP = "ecmp_forwarding"
ACTION_PROFILE_ECMP = "ecmp_selector"
PARSE_VSET_FLOW_ETHERTYPES = "QcnParser.flow_ethertypes"
"""The EtherTypes whose IPv4 and ports the parser reads (BMv2's Thrift name): IPv4's with
per-flow ECMP on, none otherwise (so per-destination frames cost what they did)."""
ETHERTYPE_IPV4 = 0x0800
"""IPv4's EtherType, which the controller puts in the parser's flow_ethertypes."""
TABLE_EDGE_PORT = "edge_port"
ACTION_MARK_EDGE = "mark_edge"
#: The arrival CP's stage 1, which is also every CP port's admission to its queue
#: (p4src/control/congestion_point.p4): `admit` where the departure CP judges the port.
TABLE_ADMISSION = "admission"
ACTION_ADMIT = "admit"
ACTION_ADMIT_SAMPLE_BERNOULLI = "admit_sample_bernoulli"
ACTION_ADMIT_SAMPLE_BYTE_INTERVAL = "admit_sample_byte_interval"
#: DCQCN's CP (p4src/control/ecn_marking.p4): a port whose signal is ECN marks ECN-capable
#: frames CE on its curve (the data-plane integers of qcn.core.cp_model.CpPortConfig).
TABLE_ECN_MARKING = "ecn_marking"
ACTION_MARK_ECN = "mark_ecn"
ECN_MARKING_PARAMS = ("kmin_bytes", "kmax_bytes", "ecn_slope")
#: The departure CP's stage 1: its sampling mode and depth source.
TABLE_CP_SAMPLING = "cp_sampling"
ACTION_SAMPLE_BERNOULLI = "sample_bernoulli"
ACTION_SAMPLE_BYTE_INTERVAL = "sample_byte_interval"
#: An input port's one lookup (p4src/control/input_port.p4): 802.3x PAUSE's watermarks of
#: a guarded input, seed 003's Fb tag push on a three-point host port, or both.
TABLE_INPUT_PORT = "input_port"
ACTION_WATCH = "watch"
ACTION_PUSH_FB_TAG = "push_fb_tag"
ACTION_WATCH_AND_PUSH_FB_TAG = "watch_and_push_fb_tag"
#: 802.3x PAUSE (p4src/control/pause.p4): the source address of the PAUSEs each port sends.
TABLE_PAUSE_SOURCE = "pause_source"
ACTION_SET_SOURCE = "set_source"
#: The ports that honour a PAUSE they receive by holding their queue
#: (p4src/control/port_hold.p4), with one pause quantum in µs (16 fractional bits).
TABLE_PAUSE_HONOUR = "pause_honour"
ACTION_HONOUR = "honour"
#: Seed 003's three-point QCN at the edges (p4src/control/three_point.p4): the host-facing
#: ports the tag leaves at (removed, or reflected first).
TABLE_FB_TAG_EXIT = "fb_tag_exit"
ACTION_POP_FB_TAG = "pop_fb_tag"
ACTION_REFLECT_FB = "reflect_fb"

#: The CP's two instances (p4src/qcn_cp.p4), by P4Info alias prefix, with their full names:
#: the arrival CP in ingress (the standard's) and the departure CP in egress (BMv2's own
#: depths, for comparison).  A port's CP entries live in one of them
#: (qcn.controller.entries.CpPort.instance); each has a stage-1 table of its own (above), and
#: these stage-2 tables.
CP_ARRIVAL = "arrival_cp"
CP_DEPARTURE = "departure_cp"
CP_INSTANCES: dict[str, str] = {
    CP_ARRIVAL: "QcnIngress.arrival_cp",
    CP_DEPARTURE: "QcnEgress.departure_cp",
}
# Each instance's stage-2 tables and actions, by their name inside the CP control.
CP_TABLE_CONFIG = "cp_config"
CP_ACTION_COMPUTE_FEEDBACK = "compute_feedback"
CP_TABLE_SAMPLE_INTERVAL = "sample_interval"
CP_ACTION_SET_SAMPLE_INTERVAL = "set_sample_interval"
CP_ACTION_PARAMS: dict[str, tuple[str, ...]] = {
    CP_ACTION_COMPUTE_FEEDBACK: (
        "q_eq",
        "w_fixed",
        "fbmax_fixed",
        "fb_multiplier",
        "p_base_fixed",
        "p_scale_fixed",
        "cpid",
        "cp_mac",
        "positive_feedback",
        "three_point",
        "reflect_p_base_fixed",
        "reflect_p_scale_fixed",
        "signal",
    ),
    CP_ACTION_SET_SAMPLE_INTERVAL: ("base_bytes", "jitter_span_bytes"),
}
CP_TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    CP_TABLE_CONFIG: (("eg_port",), (CP_ACTION_COMPUTE_FEEDBACK,)),
    CP_TABLE_SAMPLE_INTERVAL: (("eg_port", "idx"), (CP_ACTION_SET_SAMPLE_INTERVAL,)),
}
CP_COUNTERS = ("cp_frames", "cp_samples", "cp_cnms")
CP_REGISTER_Q_OLD = "q_old"
CP_REGISTER_BYTES_TO_SAMPLE = "bytes_to_sample"
CP_REGISTER_LAST_QDEPTH = "last_qdepth"
CP_REGISTERS = (CP_REGISTER_Q_OLD, CP_REGISTER_BYTES_TO_SAMPLE, CP_REGISTER_LAST_QDEPTH)


def cp_name(instance: str, name: str) -> str:
    """The P4Info alias of one of a CP instance's tables, actions or counters."""
    return f"{instance}.{name}"


def cp_full_name(instance: str, name: str) -> str:
    """The full name (BMv2's Thrift API) of one of a CP instance's registers or counters."""
    return f"{CP_INSTANCES[instance]}.{name}"


PAUSE_PARAMS = ("hi_bytes", "lo_bytes", "partition_bytes", "refresh_us", "pause_quanta")
"""A guarded input's PAUSE settings, the parameters of its input_port action."""

#: Every action the controller writes, with its parameters, in the P4 program's order.  The
#: data-plane integers of a CP port (qcn.core.cp_model.CpPortConfig) carry the same names.
ACTION_PARAMS: dict[str, tuple[str, ...]] = {
    ACTION_FORWARD: ("port",),
    ACTION_FORWARD_BY_FLOW: ("port", "hash_shift"),
    ACTION_MARK_EDGE: (),
    ACTION_ADMIT: ("limit_pkts", "limit_bytes", "bytes_unit"),
    ACTION_ADMIT_SAMPLE_BERNOULLI: (
        "limit_pkts",
        "limit_bytes",
        "bytes_unit",
        "p_max_fixed",
        "judge_dropped",
    ),
    ACTION_ADMIT_SAMPLE_BYTE_INTERVAL: ("limit_pkts", "limit_bytes", "bytes_unit", "judge_dropped"),
    ACTION_MARK_ECN: ECN_MARKING_PARAMS,
    ACTION_SAMPLE_BERNOULLI: ("p_max_fixed", "dequeue_depth"),
    ACTION_SAMPLE_BYTE_INTERVAL: ("dequeue_depth",),
    ACTION_WATCH: PAUSE_PARAMS,
    ACTION_WATCH_AND_PUSH_FB_TAG: PAUSE_PARAMS,
    ACTION_SET_SOURCE: ("port_mac",),
    ACTION_HONOUR: ("quantum_us_fp16",),
    ACTION_PUSH_FB_TAG: (),
    ACTION_POP_FB_TAG: (),
    ACTION_REFLECT_FB: (
        "p0_fixed",
        "reflect_p_base_fixed",
        "reflect_p_scale_fixed",
        "cpid",
        "rp_mac",
    ),
    **{cp_name(i, a): params for i in CP_INSTANCES for a, params in CP_ACTION_PARAMS.items()},
}
#: Each table's match fields (their @name) and the actions the controller puts in it.
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    TABLE_L2: (("dst_addr",), (ACTION_FORWARD, ACTION_FORWARD_BY_FLOW)),
    # (P4Info leaves the selector's field out: the switch hashes it, nobody matches on it.)
    TABLE_ECMP: (("dst_addr",), (ACTION_FORWARD,)),
    TABLE_EDGE_PORT: (("ig_port",), (ACTION_MARK_EDGE,)),
    TABLE_ADMISSION: (
        ("eg_port",),
        (ACTION_ADMIT, ACTION_ADMIT_SAMPLE_BERNOULLI, ACTION_ADMIT_SAMPLE_BYTE_INTERVAL),
    ),
    TABLE_ECN_MARKING: (("eg_port",), (ACTION_MARK_ECN,)),
    TABLE_CP_SAMPLING: (("eg_port",), (ACTION_SAMPLE_BERNOULLI, ACTION_SAMPLE_BYTE_INTERVAL)),
    TABLE_INPUT_PORT: (
        ("ig_port",),
        (ACTION_WATCH, ACTION_PUSH_FB_TAG, ACTION_WATCH_AND_PUSH_FB_TAG),
    ),
    TABLE_PAUSE_SOURCE: (("eg_port",), (ACTION_SET_SOURCE,)),
    TABLE_PAUSE_HONOUR: (("ig_port",), (ACTION_HONOUR,)),
    TABLE_FB_TAG_EXIT: (("eg_port",), (ACTION_POP_FB_TAG, ACTION_REFLECT_FB)),
    **{
        cp_name(i, t): (fields, tuple(cp_name(i, a) for a in actions))
        for i in CP_INSTANCES
        for t, (fields, actions) in CP_TABLES.items()
    },
}

#: Per-port counters, by P4Info alias, in the order `qcn ctl show` prints them; the value is
#: the full name BMv2's Thrift API takes.
COUNTERS: dict[str, str] = {
    **{cp_name(i, c): cp_full_name(i, c) for i in CP_INSTANCES for c in CP_COUNTERS},
    "tail_drops": "tail_drops",
    "ecn_marks": "QcnIngress.ecn_cp.ecn_marks",
    "cnm_edge_drops": "QcnIngress.l2.cnm_edge_drops",
    "pause_sent": "pause_sent",
    "pause_drops": "QcnIngress.input_port.pause_drops",
    "pause_received": "QcnIngress.mac_control.pause_received",
    "mac_control_drops": "QcnIngress.mac_control.mac_control_drops",
    "frames_in": "frames_in",
    "frames_out": "frames_out",
    "hold_rounds": "hold_rounds",
    "order_rounds": "order_rounds",
    "order_late": "order_late",
    "fb_reflections": "QcnIngress.fb_tag_exit.fb_reflections",
    "p0_reflections": "QcnIngress.fb_tag_exit.p0_reflections",
}
#: Per-port registers (Thrift only: PI does not serve registers over P4Runtime).  The
#: occupancy is the pipeline's own count of each CP port's queue (p4src/control/admission.p4):
#: frames and bytes in one word (split_occupancy).
REGISTER_OCCUPANCY = "occupancy"
OCCUPANCY_FRAMES_SHIFT = 32
"""p4src/include/defines.p4's OCCUPANCY_FRAMES_SHIFT."""
#: Bytes buffered from each PAUSE-guarded input, and when its PAUSE in force was sent (µs;
#: 0: none).
REGISTER_INPUT_BYTES = "input_bytes"
REGISTER_PAUSE_SENT_AT = "pause_sent_at"
#: A port holding its queue for a PAUSE (p4src/control/port_hold.p4): until when (µs), and
#: per (port, input) its held frames numbered (high 32 bits) and the number whose turn it is
#: (low 32).
REGISTER_HOLD_UNTIL = "hold_until"
REGISTER_HELD_FRAMES = "held_frames"
HELD_FRAMES_SHIFT = 32
HELD_PORT_BITS = 6
"""p4src/include/size.p4's HELD_PORT_BITS: a switch whose ports all lie below 2**HELD_PORT_BITS
can hold a port (the order is kept per (port, input) in 2**(2 HELD_PORT_BITS) cells)."""
HELD_PORTS = 1 << HELD_PORT_BITS
REGISTERS = (
    REGISTER_OCCUPANCY,
    REGISTER_INPUT_BYTES,
    REGISTER_PAUSE_SENT_AT,
    REGISTER_HOLD_UNTIL,
    REGISTER_HELD_FRAMES,
    *(cp_full_name(i, r) for i in CP_INSTANCES for r in CP_REGISTERS),
)


def split_occupancy(word: int) -> tuple[int, int]:
    """The frames and bytes one ``occupancy`` register cell holds."""
    return word >> OCCUPANCY_FRAMES_SHIFT, word & ((1 << OCCUPANCY_FRAMES_SHIFT) - 1)


# -- building ----------------------------------------------------------------------------------


class PipelineBuildError(QcnError):
    """The P4 program could not be compiled: no such program (exit status 2)."""


class P4cMissingError(PipelineBuildError, ToolMissingError):
    """p4c is not installed (exit status 3)."""


class P4cRefusedError(PipelineBuildError, CheckFailedError):
    """p4c refused the program (exit status 1)."""


def source_dir() -> Path:
    """``p4src/``: ``$QCN_P4SRC``, else the checkout's."""
    return Path(os.environ.get("QCN_P4SRC", _CHECKOUT / "p4src"))


def default_source() -> Path:
    """The CP pipeline's P4 program."""
    return source_dir() / f"{PROGRAM}.p4"


def build_dir() -> Path:
    """Where the compiled pipeline lives (see the module docstring)."""
    if "QCN_BUILD_DIR" in os.environ:
        return Path(os.environ["QCN_BUILD_DIR"])
    if (_CHECKOUT / "p4src" / f"{PROGRAM}.p4").is_file():
        return _CHECKOUT / "build"
    return Path("build")


def outputs(out_dir: Path | None = None, program: str = PROGRAM) -> tuple[Path, Path]:
    """(P4Info text file, BMv2 JSON) of ``program`` in ``out_dir`` (default: build_dir())."""
    out = out_dir if out_dir is not None else build_dir()
    return out / f"{program}.p4info.txtpb", out / f"{program}.json"


def p4c_command(source: Path, out_dir: Path) -> list[str]:
    """The one p4c command line: BMv2 simple_switch, v1model, P4Info as text."""
    p4info, _ = outputs(out_dir, source.stem)
    return [
        "p4c",
        "--target", "bmv2",
        "--arch", "v1model",
        "--std", "p4-16",
        "-I", str(source_dir()),
        "--p4runtime-files", str(p4info),
        "-o", str(out_dir),
        str(source),
    ]  # fmt: skip


def compile_program(source: Path | None = None, out_dir: Path | None = None) -> tuple[Path, Path]:
    """Compile ``source`` (default: the CP pipeline) into ``out_dir``; return its outputs.

    Skips the work when the outputs are newer than every ``.p4`` file they depend on.
    """
    source = source if source is not None else default_source()
    out = out_dir if out_dir is not None else build_dir()
    results = outputs(out, source.stem)
    inputs = [source, *source_dir().rglob("*.p4")]
    if all(r.exists() for r in results) and min(r.stat().st_mtime for r in results) >= max(
        i.stat().st_mtime for i in inputs if i.exists()
    ):
        return results
    if not source.is_file():
        raise PipelineBuildError(f"{source}: no such P4 program (set QCN_P4SRC?)")
    if shutil.which("p4c") is None:
        raise P4cMissingError(f"p4c: not installed (try 'make deps'); cannot build {source}")
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(p4c_command(source, out), capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise P4cRefusedError(f"p4c refused {source}:\n{r.stderr.strip()}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compile the CP pipeline for BMv2 with p4c: the BMv2 JSON and the P4Info "
        "(skipped when they are newer than every .p4 file)."
    )
    parser.add_argument(
        "source", nargs="?", type=Path, help=f"the P4 program (default: {default_source()})"
    )
    parser.add_argument(
        "--out", type=Path, help=f"the output directory (default: {build_dir()}, or $QCN_BUILD_DIR)"
    )
    args = parser.parse_args(argv)
    try:
        p4info, bmv2_json = compile_program(args.source, args.out)
    except PipelineBuildError as e:
        return report(e)
    print(f"built {bmv2_json} and {p4info}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
