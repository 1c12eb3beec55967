"""`qcn ctl`: the controller's command line, a thin layer over qcn.controller.agent."""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qcn.controller import config
from qcn.controller.config import PAUSE_FIELDS
from qcn.controller.entries import PauseWatermarks
from qcn.controller.errors import ConfigError
from qcn.core.params import (
    CpJudge,
    CpParams,
    CpSignal,
    ParamError,
    QueueDepth,
    QueueUnit,
    SamplingMode,
)
from qcn.core.signals import stop_on_signals

if TYPE_CHECKING:
    from qcn.controller.agent import PortStatus

DEFAULT_CONFIG = Path(os.environ.get("QCN_NETWORK", "qcn-network.toml"))
NET_UP_FILE = Path("results/net/network.toml")
"""The network file `qcn net up` writes when not told where (qcn.cli.net.DEFAULT_OUT)."""

PAUSE_HELP = {
    "hi_bytes": "bytes buffered from the port above which a PAUSE goes out of it",
    "lo_bytes": "bytes buffered below which a PAUSE of 0 (resume) goes out",
    "partition_bytes": "the port's share of the buffer: frames beyond it are dropped",
    "pause_quanta": "the PAUSE's time, in quanta of 512 bit times (0 to 65535)",
    "refresh_us": "while above --hi-bytes, a PAUSE again every this many microseconds",
}
"""`qcn ctl pause`'s options (qcn.controller.config.PAUSE_FIELDS), each one's help."""

# `qcn ctl set` options, each named after the CpParams field it sets (--q-eq-pkts sets
# q_eq_pkts): one name per quantity from the command line to the parameters.
SET_OPTIONS: dict[str, tuple[type, str]] = {
    "q_eq_pkts": (int, "equilibrium queue, packets (bytes mode: 1500 B each)"),
    "q_eq_bytes": (int, "bytes mode: equilibrium queue, bytes"),
    "w": (float, "weight of qdelta (a multiple of 1/16)"),
    "p_base": (float, "sampling probability at QntzFb 0"),
    "p_scale": (float, "added sampling probability per QntzFb step"),
    "sample_jitter": (float, "byte-interval mode: jitter fraction"),
    "reflect_p_base": (float, "three-point: reflection probability of Fb < 0 at QntzFb 0"),
    "reflect_p_scale": (float, "three-point: added reflection probability per QntzFb step"),
    "reflect_p0": (float, "three-point, host-facing port: reflection probability of Fb = 0"),
    "kmin_bytes": (int, "ECN marking: no mark while the queue holds at most this many bytes"),
    "kmax_bytes": (int, "ECN marking: the probability reaches --pmax here; above it, every frame"),
    "pmax": (float, "ECN marking: the mark probability at --kmax-bytes"),
}


#: `qcn ctl set --feedback`: the CP's feedback mode -> CpParams.positive_feedback.
FEEDBACK_MODES = {"qcn": False, "ecm": True}
#: `qcn ctl set --three-point` -> CpParams.three_point.
THREE_POINT_MODES = {"on": True, "off": False}


def register(sub: Any) -> None:
    ctl = sub.add_parser(
        "ctl",
        help="program and tune the congestion points over P4Runtime",
        description="The P4Runtime controller. The network is described by a TOML file "
        f"(--config, default {DEFAULT_CONFIG} or $QCN_NETWORK).",
    )
    ctl.add_argument(
        "-c",
        "--config",
        type=Path,
        default=DEFAULT_CONFIG,
        help=f"the network file (default: {DEFAULT_CONFIG}; qcn net up writes {NET_UP_FILE})",
    )
    ctl.add_argument("--timeout", type=float, default=5.0, help="deadline per call, seconds")
    cmds = ctl.add_subparsers(dest="ctl_command", metavar="ACTION", required=True)

    up = cmds.add_parser(
        "up",
        help="push the pipeline and the configured state to switches",
        description="Push the pipeline and the network file's state (CP entries, queues, "
        "PAUSE) to its switches.",
    )
    up.add_argument("switch", nargs="*", help="only these switches (default: all)")
    up.set_defaults(func=_up)

    st = cmds.add_parser(
        "set",
        help="change one port's CP parameters live",
        description="Change a CP port's parameters, or a host-facing port's three-point "
        "settings (its Fb tag and end reflection point; docs/qcn.md), live.",
    )
    st.add_argument("switch", help="the switch's name in the network file, e.g. s1")
    st.add_argument("port", type=int, help="the port's number on that switch")
    for field, (kind, text) in SET_OPTIONS.items():
        st.add_argument("--" + field.replace("_", "-"), type=kind, help=text)
    st.add_argument("--sampling", choices=[m.value for m in SamplingMode], help="sampling mode")
    st.add_argument(
        "--signal",
        choices=[m.value for m in CpSignal],
        help="what the port signals congestion with: QCN's CNMs (cnm), DCQCN's ECN marks "
        "of ECN-capable IPv4 frames (ecn; needs --depth-at arrival), or nothing (none)",
    )
    st.add_argument(
        "--feedback",
        choices=list(FEEDBACK_MODES),
        help="qcn: CNMs for Fb < 0 only; ecm: also flagged positive ones for Fb > 0",
    )
    st.add_argument(
        "--three-point",
        choices=list(THREE_POINT_MODES),
        help="seed 003's three-point QCN on this port (on) or two-point (off)",
    )
    st.add_argument(
        "--depth-at",
        choices=[m.value for m in QueueDepth],
        help="q: the queue an arriving frame finds (arrival, the standard's CP), or BMv2's "
        "depth as a frame leaves (enqueue: the depth it found; dequeue: left behind)",
    )
    st.add_argument(
        "--queue-unit",
        choices=[u.value for u in QueueUnit],
        help="what q, q_eq and Fb count (bytes needs --depth-at arrival)",
    )
    st.add_argument(
        "--judge",
        choices=[j.value for j in CpJudge],
        help="which arriving frames the CP judges: every one, those its full queue drops "
        "included (arrivals, the default), or only those it admits (admitted; needed by "
        "--depth-at enqueue and dequeue)",
    )
    st.set_defaults(func=_set)

    show = cmds.add_parser(
        "show",
        help="read back CP entries and per-port counters",
        description="Read back each switch's CP entries and its per-port counters.",
    )
    show.add_argument("switch", nargs="*", help="only these switches (default: all)")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    show.set_defaults(func=_show)

    rn = cmds.add_parser(
        "run",
        help="keep switches in their configured state (re-push after a restart)",
        description="Keep the switches in the network file's state: check each every "
        "--interval, and push it again to one that restarted. Ctrl-C stops.",
    )
    rn.add_argument("switch", nargs="*", help="only these switches (default: all)")
    rn.add_argument("--interval", type=float, default=1.0, help="health check period, s")
    rn.set_defaults(func=_run)

    pz = cmds.add_parser(
        "pause",
        help="802.3x PAUSE on the frames arriving at a port, live (docs/pause.md)",
        description="Guard a port's input with PAUSE: past --hi-bytes buffered from it, the "
        "switch sends a PAUSE of --pause-quanta out of it (again every --refresh-us while "
        "above), below --lo-bytes one of 0; frames beyond --partition-bytes are dropped.",
    )
    pz.add_argument("switch", help="the switch's name in the network file, e.g. s1")
    pz.add_argument("port", type=int, help="the input port to guard")
    for name in PAUSE_FIELDS:
        pz.add_argument("--" + name.replace("_", "-"), type=int, help=PAUSE_HELP[name])
    pz.add_argument("--off", action="store_true", help="no PAUSE on this port")
    pz.set_defaults(func=_pause)

    q = cmds.add_parser(
        "queue",
        help="set a port's BMv2 queue rate and depth (Thrift)",
        description="Set a port's BMv2 egress queue: its service rate and its capacity.",
    )
    q.add_argument("switch", help="the switch's name in the network file, e.g. s1")
    q.add_argument("port", type=int, help="the port's number on that switch")
    q.add_argument("--rate-pps", type=int, help="service rate, packets/s (0: unlimited)")
    q.add_argument("--depth-pkts", type=int, help="capacity, packets")
    q.set_defaults(func=_queue)


MAX_TIMEOUT_S = 3600.0
MIN_INTERVAL_S = 0.05
"""`ctl run`'s shortest health-check period (0 spun a core)."""


def _network(args: argparse.Namespace) -> config.NetworkConfig:
    # Comparisons that NaN fails too.
    if not 0 < args.timeout <= MAX_TIMEOUT_S:
        raise ConfigError(
            f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds (got {args.timeout:g})"
        )
    interval = getattr(args, "interval", None)
    if interval is not None and not MIN_INTERVAL_S <= interval <= MAX_TIMEOUT_S:
        raise ConfigError(
            f"--interval must be in [{MIN_INTERVAL_S:g}, {MAX_TIMEOUT_S:g}] seconds "
            f"(got {interval:g})"
        )
    if args.config == DEFAULT_CONFIG and not args.config.exists():
        raise ConfigError(no_network_file())
    return config.load(args.config)


def no_network_file() -> str:
    """What `qcn ctl` says when it has no network file: where one comes from (it said
    only "qcn-network.toml: cannot read")."""
    if NET_UP_FILE.is_file():
        return (
            f"no {DEFAULT_CONFIG} here; the network qcn net up started is described by "
            f"{NET_UP_FILE}: give it with -c {NET_UP_FILE}"
        )
    return (
        f"no network is up (no {DEFAULT_CONFIG} here): start one with 'qcn net up NET', "
        f"which writes {NET_UP_FILE}, then give it with -c {NET_UP_FILE}; or name another "
        "network's file with -c FILE (or $QCN_NETWORK)"
    )


def _selected(net: config.NetworkConfig, names: list[str]) -> list[str]:
    for n in names:
        net.switch(n)
    return names or [s.name for s in net.switches]


def _up(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    net = _network(args)
    for name in _selected(net, args.switch):
        with SwitchAgent(net, name, timeout_s=args.timeout, one_shot=True) as agent:
            r = agent.bring_up()
            print(f"{name}: up ({r.inserted} inserted, {r.modified} modified, {r.deleted} deleted)")
    return 0


def _set(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    changes: dict[str, Any] = {
        field: getattr(args, field) for field in SET_OPTIONS if getattr(args, field) is not None
    }
    if args.sampling:
        changes["sampling"] = args.sampling
    if args.signal:
        changes["signal"] = args.signal
    if args.depth_at:
        changes["depth_at"] = args.depth_at
    if args.queue_unit:
        changes["queue_unit"] = args.queue_unit
    if args.judge:
        changes["judge"] = args.judge
    if args.feedback:
        changes["positive_feedback"] = FEEDBACK_MODES[args.feedback]
    if args.three_point:
        changes["three_point"] = THREE_POINT_MODES[args.three_point]
    if not changes:
        raise ConfigError("nothing to set: give at least one of --q-eq-pkts, --w, --p-base, ...")
    net = _network(args)
    with SwitchAgent(net, args.switch, timeout_s=args.timeout, one_shot=True) as agent:
        new = agent.set_cp(args.port, **changes)
    print(
        f"{args.switch} port {args.port}: {q_eq_text(new)} w={new.w:g} "
        f"p_base={new.p_base:g} p_scale={new.p_scale:g} sampling={new.sampling.value} "
        f"depth_at={new.depth_at.value} judge={new.judge.value} "
        f"feedback={'ecm' if new.positive_feedback else 'qcn'}{three_point_text(new)}"
        f"{signal_text(new)}"
    )
    return 0


def signal_text(cp: CpParams) -> str:
    """The port's signal where it is not QCN's CNMs, with ECN's marking curve."""
    if cp.signal is CpSignal.CNM:
        return ""
    if cp.signal is CpSignal.NONE:
        return " signal=none"
    return f" signal=ecn kmin_bytes={cp.kmin_bytes} kmax_bytes={cp.kmax_bytes} pmax={cp.pmax:g}"


def three_point_text(cp: CpParams) -> str:
    if not cp.three_point:
        return ""
    return (
        f" three-point p0={cp.reflect_p0:g} reflect_p_base={cp.reflect_p_base:g} "
        f"reflect_p_scale={cp.reflect_p_scale:g}"
    )


def q_eq_text(cp: CpParams) -> str:
    """q_eq under the name of the field that holds it in the port's unit."""
    if cp.queue_unit is QueueUnit.BYTES:
        return f"q_eq_bytes={cp.q_eq}"
    return f"q_eq_pkts={cp.q_eq}"


def _show(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    net = _network(args)
    report: dict[str, list[PortStatus]] = {}
    for name in _selected(net, args.switch):
        with SwitchAgent(net, name, timeout_s=args.timeout, read_only=True) as agent:
            report[name] = agent.status()
    if args.json:
        print(json.dumps({n: [r.to_json() for r in rows] for n, rows in report.items()}, indent=2))
        return 0
    print(
        f"{'switch':8} {'port':>4} {'CP':32} {'frames':>9} {'samples':>8} {'CNMs':>7} "
        f"{'CE marks':>8} "
        f"{'tail drops':>10} {'edge drops':>10} {'queue':>6} {'PAUSE hi/lo KB':>14} "
        f"{'sent':>5} {'rcvd':>5} {'reflected':>12}"
    )
    for name, rows in report.items():
        for r in rows:
            cp = (
                f"{q_eq_text(r.cp)} "
                f"w={r.cp.w:g} {r.cp.sampling.value[:4]} "
                f"{r.cp.depth_at.value[:3]}{' ecm' if r.cp.positive_feedback else ''}"
                f"{' 3pt' if r.cp.three_point else ''}"
                f"{'' if r.cp.signal is CpSignal.CNM else ' ' + r.cp.signal.value}"
                f"{' admitted' if r.cp.judge is CpJudge.ADMITTED else ''}"
                if r.cp
                else "off"
            )
            c = r.counters
            depth = "-" if r.queue_pkts is None else str(r.queue_pkts)
            pause = f"{r.pause.hi_bytes / 1e3:g}/{r.pause.lo_bytes / 1e3:g}" if r.pause else "off"
            # The end reflection point's CNMs: for Fb < 0 / for Fb = 0 (P0).
            reflected = (
                f"{c['fb_reflections']}/{c['p0_reflections']}"
                if r.edge and r.edge["three_point"]
                else "-"
            )
            print(
                f"{name:8} {r.port:>4} {cp:32} {c['cp_frames']:>9} {c['cp_samples']:>8} "
                f"{c['cp_cnms']:>7} {c['ecn_marks']:>8} {c['tail_drops']:>10} "
                f"{c['cnm_edge_drops']:>10} {depth:>6} "
                f"{pause:>14} {c['pause_sent']:>5} {c['pause_received']:>5} {reflected:>12}"
            )
    return 0


def _run(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    net = _network(args)
    names = _selected(net, args.switch)
    stopping = threading.Event()
    stop_on_signals(stopping.set, (signal.SIGTERM,))  # SIGINT: Ctrl-C, below
    agents = [SwitchAgent(net, n, timeout_s=args.timeout) for n in names]
    threads = [
        threading.Thread(
            target=a.keep_up,
            args=(stopping.is_set, args.interval, lambda m: print(m, flush=True)),
            daemon=True,
        )
        for a in agents
    ]
    for t in threads:
        t.start()
    print(f"qcn ctl: holding {', '.join(names)}; Ctrl-C to stop", flush=True)
    try:
        while not stopping.wait(0.5):
            pass
    except KeyboardInterrupt:
        stopping.set()
    for t in threads:
        t.join(timeout=args.timeout + args.interval + 1)
    for a in agents:
        a.close()
    return 0


def _pause(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    given = {n: getattr(args, n) for n in PAUSE_FIELDS if getattr(args, n) is not None}
    if args.off and given:
        raise ConfigError("--off takes no watermarks")
    pause = None
    if not args.off:
        absent = [f"--{n.replace('_', '-')}" for n in PAUSE_FIELDS if n not in given]
        if absent:
            raise ConfigError(f"give {', '.join(absent)} (or --off)")
        try:
            pause = PauseWatermarks(**given)
        except ParamError as e:
            raise ConfigError(str(e)) from None
    net = _network(args)
    with SwitchAgent(net, args.switch, timeout_s=args.timeout, one_shot=True) as agent:
        agent.set_pause(args.port, pause)
    state = "off" if pause is None else ", ".join(f"{k}={v}" for k, v in given.items())
    print(f"{args.switch} port {args.port}: PAUSE {state}")
    return 0


def _queue(args: argparse.Namespace) -> int:
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415 - gRPC only when needed

    if args.rate_pps is None and args.depth_pkts is None:
        raise ConfigError("give --rate-pps and/or --depth-pkts")
    for value, what in ((args.rate_pps, "--rate-pps"), (args.depth_pkts, "--depth-pkts")):
        if value is not None and value < 0:
            raise ConfigError(f"{what} must be >= 0")
    net = _network(args)
    with SwitchAgent(net, args.switch, timeout_s=args.timeout, one_shot=True) as agent:
        agent.set_queue(args.port, args.rate_pps, args.depth_pkts)
    print(f"{args.switch} port {args.port}: queue set")
    return 0
