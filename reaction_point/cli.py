"""`qcn rp`: run the reaction-point daemon, read its status, generate traffic."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from qcn.core.errors import ExitCode, QcnError
from qcn.core.params import ParamError, QcnParams, RpScheme, scheme_names
from qcn.reaction_point.daemon import (
    DEFAULT_MAX_LIMITERS,
    DEFAULT_STATUS_DIR,
    MAX_LIMITERS_LIMIT,
    DaemonOptions,
    ReactionPoint,
    daemon_alive,
    status_files,
)
from qcn.reaction_point.sources import SEND_DESCRIPTION, add_send_arguments, send


class RpUsageError(QcnError, ValueError):
    """A mistake in the `qcn rp` command line or environment, reported in one line."""


def register(sub: Any) -> None:
    rp = sub.add_parser(
        "rp",
        help="the reaction point: rate-limit this host's traffic on CNMs",
        description="The QCN reaction-point daemon and its traffic sources.",
    )
    cmds = rp.add_subparsers(dest="rp_command", metavar="ACTION", required=True)

    st = cmds.add_parser(
        "start",
        help="run the daemon on an interface (foreground)",
        description="Run the reaction-point daemon on an interface, in the foreground: it "
        "takes the CNMs that reach it (and with the dcqcn scheme the CNPs, on UDP port 4791) "
        "and limits the host's traffic by them. Ctrl-C stops.",
    )
    st.add_argument("--iface", required=True, help="the host interface, e.g. h1-eth0")
    st.add_argument("--params", type=Path, help="TOML parameter file (its [rp] table)")
    st.add_argument(
        "--preset",
        choices=scheme_names(),
        default=RpScheme.QCN.value,
        help="the scheme whose parameter set --params overrides (default: %(default)s)",
    )
    st.add_argument("--line-rate-bps", type=float, help="override rp.line_rate_bps")
    st.add_argument("--per-flow", action="store_true", help="one limiter per IPv4 flow")
    st.add_argument(
        "--max-limiters",
        type=int,
        default=DEFAULT_MAX_LIMITERS,
        help=f"limiters held at once, at most {MAX_LIMITERS_LIMIT}; a CNM for a new one "
        "beyond this releases the least recently signalled (default: %(default)s)",
    )
    st.add_argument(
        "--replace-qdisc",
        action="store_true",
        help="replace a root qdisc someone else configured on the interface (it is not "
        "restored when the daemon stops); without it the daemon refuses to start",
    )
    st.add_argument("--csv-dir", type=Path, help="write one CSV time series per limiter here")
    st.add_argument(
        "--late-after-ms",
        type=float,
        help="count the notifications applied later than this after their arrival "
        "(notifications_late in the status; a run passes its tolerable latency)",
    )
    st.add_argument(
        "--status-dir",
        type=Path,
        default=DEFAULT_STATUS_DIR,
        help="where the daemon keeps its status file (default: %(default)s)",
    )
    st.set_defaults(func=_start)

    ss = cmds.add_parser(
        "status",
        help="show the daemons' limiters and counters",
        description="Show each reaction-point daemon's limiters and counters, from the "
        "status files the daemons keep.",
    )
    ss.add_argument("--iface", help="only this interface's daemon")
    ss.add_argument(
        "--status-dir",
        type=Path,
        default=DEFAULT_STATUS_DIR,
        help="where the daemons keep their status files (default: %(default)s)",
    )
    ss.add_argument("--json", action="store_true", help="print the status as JSON")
    ss.set_defaults(func=_status)

    se = cmds.add_parser(
        "send",
        help="generate traffic through the kernel limiters",
        description=SEND_DESCRIPTION,
    )
    add_send_arguments(se)
    se.set_defaults(func=send)


def _start(args: argparse.Namespace) -> int:
    late = args.late_after_ms
    if late is not None and not (math.isfinite(late) and late > 0):
        raise RpUsageError(f"--late-after-ms {late:g}: give a positive number of milliseconds")
    if os.geteuid() != 0:
        raise RpUsageError("qcn rp start needs root (raw sockets and traffic control)")
    base = QcnParams.preset(args.preset)
    params = (QcnParams.load(args.params, base) if args.params else base).rp
    if args.line_rate_bps is not None:
        try:
            params = QcnParams.from_dict(
                {"rp": {"line_rate_bps": args.line_rate_bps}}, QcnParams(rp=params)
            ).rp
        except ParamError as e:
            # The preset's other rates are checked against the new line rate: say which.
            raise RpUsageError(
                f"--line-rate-bps {args.line_rate_bps:g}: {e} (the {args.preset} preset's; "
                "give smaller ones in a --params file)"
                if e.field != "rp.line_rate_bps"
                else f"--line-rate-bps: {e}"
            ) from None
    if not 1 <= args.max_limiters <= MAX_LIMITERS_LIMIT:
        raise RpUsageError(
            f"--max-limiters must be in [1, {MAX_LIMITERS_LIMIT}] (got {args.max_limiters})"
        )
    options = DaemonOptions(
        iface=args.iface,
        params=params,
        limit_by="flow" if args.per_flow else "destination",
        csv_dir=args.csv_dir,
        status_dir=args.status_dir,
        max_limiters=args.max_limiters,
        replace_qdisc=args.replace_qdisc,
        late_after_s=None if args.late_after_ms is None else args.late_after_ms / 1e3,
    )
    daemon = ReactionPoint(options)
    try:
        daemon.open()
    except BaseException as e:
        # Ctrl-C while starting too: nothing of the half-built tree stays behind.
        daemon.close()
        if not isinstance(e, OSError | QcnError):
            raise
        reason = f"{e.strerror}: {e.filename}" if isinstance(e, OSError) and e.filename else e
        raise RpUsageError(f"cannot start on {args.iface}: {reason}") from None
    for line in daemon.notices:
        print(f"qcn rp: {line}", flush=True)
    what = "CNMs and CNPs" if params.scheme == RpScheme.DCQCN else "CNMs"
    print(
        f"qcn rp: listening for {what} on {args.iface} ({daemon.mac}); Ctrl-C to stop", flush=True
    )
    try:
        daemon.run()
    finally:
        daemon.close()
    print(f"qcn rp: stopped; counters {dict(daemon.counters)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    """Every daemon's status; a file that is not one is skipped with a line on stderr (and
    exit status 1), so one bad file never hides the other daemons' (docs/reliability.md)."""
    files = [f for f in status_files(args.status_dir, args.iface or "*") if f.is_file()]
    if not files:
        where = args.iface or str(args.status_dir)
        raise RpUsageError(f"no reaction-point daemon status for {where}")
    reports, skipped = [], []
    for f in files:
        try:
            reports.append(read_status(f))
        except RpUsageError as e:
            skipped.append(str(e))
    if not reports:
        raise RpUsageError("; ".join(skipped))
    for line in skipped:
        print(f"qcn rp status: skipped {line}", file=sys.stderr)
    for r in reports:
        # A daemon killed outright (kill -9) could not say it stopped.
        r["stale"] = bool(r["running"]) and not daemon_alive(r)
        if r["stale"]:
            r["running"] = False
    code = ExitCode.FAILED if skipped else ExitCode.OK  # (docs/reliability.md, Exit codes)
    if args.json:
        print(json.dumps(reports, indent=2))
        return code
    names = Counter(r["iface"] for r in reports)
    for r in reports:
        # Interfaces of one name in several namespaces are told apart by namespace.
        where = f" in netns {r.get('netns_id')}" if names[r["iface"]] > 1 else ""
        if r["stale"]:
            state = f"not running (stale status from PID {r['pid']})"
        else:
            state = f"pid {r['pid']}, {'running' if r['running'] else 'stopped'}"
        print(f"{r['iface']}{where} ({state}, per {r['limit_by']})")
        for name, value in sorted(r["counters"].items()):
            print(f"  {name:32} {value}")
        if r["latency_p99_ms"] is not None:
            p50, p99 = r["latency_p50_ms"], r["latency_p99_ms"]
            print(f"  CNM-to-kernel latency p50 {p50:.3f} ms, p99 {p99:.3f} ms")
        for lim in r["limiters"]:
            cr, tr = lim["current_rate_bps"] / 1e6, lim["target_rate_bps"] / 1e6
            print(
                f"  limiter {lim['limiter']:24} {lim['stage']:3} CR {cr:10.3f} Mb/s"
                f"  TR {tr:10.3f} Mb/s  sent {lim['sent_bytes']} B"
            )
    return code


Kinds = dict[str, type | tuple[type, ...]]
STATUS_FIELDS: Kinds = {
    "iface": str,
    "pid": int,
    "running": bool,
    "limit_by": str,
    "counters": dict,
}
LIMITER_PRINTED: Kinds = {
    "limiter": str,
    "stage": str,
    "current_rate_bps": (int, float),
    "target_rate_bps": (int, float),
    "sent_bytes": int,
}
"""What `qcn rp status` prints of each limiter (daemon.LIMITER_FIELDS), with its type."""
LATENCIES: Kinds = {"p50": (int, float), "p99": (int, float)}


def read_status(path: Path) -> dict[str, Any]:
    """One daemon's status file, checked for everything that is printed of it (a file with
    ``"limiters": 5`` gave a TypeError traceback)."""
    try:
        report = json.loads(path.read_bytes())
    except OSError as e:
        raise RpUsageError(f"{path}: cannot read: {e.strerror}") from None
    except (ValueError, RecursionError):
        raise RpUsageError(f"{path}: not a status file (not JSON); remove it") from None
    if not isinstance(report, dict) or not _typed(report, STATUS_FIELDS):
        raise RpUsageError(f"{path}: not a status file of qcn rp; remove it")
    report.setdefault("limiters", [])
    report.setdefault("latency_p50_ms", None)
    report.setdefault("latency_p99_ms", None)
    limiters, p50, p99 = report["limiters"], report["latency_p50_ms"], report["latency_p99_ms"]
    latencies_ok = p99 is None or _typed({"p50": p50, "p99": p99}, LATENCIES)
    if (
        not isinstance(limiters, list)
        or not all(isinstance(lim, dict) and _typed(lim, LIMITER_PRINTED) for lim in limiters)
        or not latencies_ok
    ):
        raise RpUsageError(f"{path}: not a status file of qcn rp (a field of another type)")
    return report


def _typed(values: dict[str, Any], kinds: Kinds) -> bool:
    """Whether each of ``kinds``' keys holds a value of its type (a bool is no number)."""
    return all(
        isinstance(values.get(k), t) and (t is bool or not isinstance(values.get(k), bool))
        for k, t in kinds.items()
    )
