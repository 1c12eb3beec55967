"""`qcn net`: a network of BMv2 switches with QCN running, for its user.

    qcn net up leaf-spine:2,2,2 --cli     # start it; Mininet's CLI; exit stops it
    qcn net up topology.json              # p4lang/tutorials' file, as it is
    qcn net down                          # stop the one running (from another shell)
    qcn net draw parking-lot:3 -o pl.png  # a picture, its CP ports marked
    qcn net show leaf-spine:2,2,2         # its ports, links and CPs, each backend's rates

A topology is a generator or a file (qcn.core.topology, docs/topology.md).  A generator's
links run at ``--line-rate`` (10 Mb/s: what BMv2 carries comfortably per port; on ``up``,
less where this machine's switches would not keep up with every host sending at it,
said in one line); a file's at its own rates.  Every switch runs the CP pipeline with a
CP on each port that can congest, every host a reaction-point daemon with the QCN
parameters scaled to the hosts' line rate (``--params`` to give your own), and
``qcn ctl -c DIR/network.toml`` tunes it live.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qcn.cli.options import add_set, plain_text
from qcn.controller.cli import NET_UP_FILE
from qcn.core import capacity, resources
from qcn.core.ecmp import ECMP_MODES
from qcn.core.errors import QcnError
from qcn.core.live import LiveFeed
from qcn.core.params import SEED_FRAME_BYTES, Preset, QcnParams
from qcn.core.scenario import (
    MAX_TIME_SCALE,
    Network,
    ScenarioError,
    link_defaults,
    scaled_params,
)
from qcn.core.topology import GENERATORS, LinkDefaults, PortRef, Topology, is_generator_spec
from qcn.core.topology import load as load_topology
from qcn.core.units import rate_text
from qcn.lab import backends
from qcn.lab.inputs import load_scenario

DEFAULT_OUT = NET_UP_FILE.parent
NET_LINE_RATE_BPS = 10e6
"""A generator's links on BMv2 (docs/bmv2.md: BMv2 carries tens of Mb/s per port here), where
the switches keep up with every host sending at it (:func:`chosen_topology`)."""
MIN_LINE_RATE_BPS = 1e3
SEED_LINE_RATE_BPS = 10e9
"""The line rate the QCN defaults are written for (the seeds')."""
NET_TIME_SCALE = 250.0
"""The QCN parameters' time scale on ``qcn net up`` (as the fct scenario's BMv2 run: rates
times 1e-3 and times times 250, so the byte counter's cycle stays 25 frames)."""


class NetError(QcnError, ValueError):
    """A `qcn net` mistake: one line."""


def register(sub: Any) -> None:
    net = sub.add_parser(
        "net",
        help="start, stop, draw or show a network of BMv2 switches with QCN running",
        # The docstring but its examples (its second paragraph).
        description=plain_text(" ".join(__doc__.split("\n\n", 2)[::2])) if __doc__ else None,
    )
    cmds = net.add_subparsers(dest="net_command", metavar="ACTION", required=True)

    up = cmds.add_parser(
        "up",
        help="start a network and hand it over (Mininet's CLI, or wait)",
        description="Start a network of BMv2 switches with QCN running, and keep it until "
        "Ctrl-C or 'qcn net down' (or, with --cli, hand it to Mininet's CLI).",
    )
    _topology_argument(up)
    up.add_argument("--cli", action="store_true", help="Mininet's CLI; 'exit' stops the network")
    up.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="where its logs and network.toml go (default: %(default)s)",
    )
    up.add_argument(
        "--no-qcn", action="store_true", help="no reaction points, CPs that never sample"
    )
    up.add_argument(
        "--no-rp",
        action="store_true",
        help="CPs that sample and send CNMs, and no reaction-point daemon on any host: start "
        "your own on a host, 'qcn rp start --iface h1-eth0'",
    )
    up.add_argument(
        "--params", type=Path, help="QCN parameters (TOML, in the network's units) to use"
    )
    up.add_argument(
        "--live",
        action="store_true",
        help="serve a live view on 127.0.0.1 (its URL is printed): the CP ports' queues, "
        "the hosts' rates, CNMs, drops, and the CPs' knobs (docs/live.md)",
    )
    up.add_argument(
        "--live-port", type=int, default=0, metavar="PORT", help="--live: the port to serve on"
    )
    up.set_defaults(func=_up)

    down = cmds.add_parser(
        "down",
        help="stop the running network; remove what a killed one left",
        description="Stop the network qcn net up started, from another shell; remove what "
        "a killed one left behind.",
    )
    down.set_defaults(func=_down)

    draw = cmds.add_parser(
        "draw",
        help="a picture of a network, its CP ports marked (PNG)",
        description="Draw a network as a PNG: its switches, hosts and links, its CP ports "
        "marked. Nothing is started.",
    )
    _topology_argument(draw)
    draw.add_argument(
        "-o", "--out", type=Path, help="the PNG, or a directory for NAME.png (default NAME.png)"
    )
    draw.set_defaults(func=_draw)

    show = cmds.add_parser(
        "show",
        help="a network's switches, ports, links and CPs, at the rates each backend runs",
        description="Print a network's switches, ports, links and CPs, as the project "
        "derives them, each link's rate and delay as the simulator runs it and as BMv2 does "
        "(qcn net up's, or with --scenario a run's at the scale it would choose). Nothing is "
        "started.",
    )
    _topology_argument(show)
    show.add_argument(
        "--scenario",
        metavar="NAME",
        help="the rates a run of this scenario on the network has (qcn run NAME --set "
        "network.topology=TOPOLOGY): on the simulator, and on BMv2 at the scale the run "
        "would choose on this machine",
    )
    add_set(show, "with --scenario: override a field of it, as qcn run's --set; repeatable")
    show.set_defaults(func=_show)

    calibrate = cmds.add_parser(
        "calibrate",
        help="measure what a frame costs the BMv2 on the PATH (the capacity model's figure)",
        description="Measure the CPU a frame costs the simple_switch_grpc on the PATH, as "
        "the runs use it (one switch on its own CPU, 1500-byte frames at a steady pace), "
        "and keep it for the capacity model, keyed by the binary, the CPU and the pipeline. "
        "The first BMv2 run on a machine does it; this does it again (docs/bmv2.md).",
    )
    calibrate.set_defaults(func=_calibrate)


def _topology_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "topology",
        help="a generator ("
        + ", ".join(g.spec(name) for name, g in GENERATORS.items())
        + ") or a topology file (.toml, or p4lang/tutorials' .json)",
    )
    p.add_argument(
        "--line-rate",
        type=float,
        metavar="BPS",
        help="a generator's links, and a file's that give no rate, b/s (default "
        f"{NET_LINE_RATE_BPS:g}; on 'up', less where this machine's switches would not keep "
        "up with every host sending at it: docs/experiments.md)",
    )
    p.add_argument(
        "--ecmp",
        choices=ECMP_MODES,
        default=ECMP_MODES[0],
        help="where a host has equal-cost paths: each destination takes one, or each flow "
        'by its 5-tuple\'s hash (docs/topology.md, "Routes"; default: %(default)s)',
    )


def given_line_rate(args: argparse.Namespace) -> float:
    """--line-rate's value (its default if not given), checked."""
    given = NET_LINE_RATE_BPS if args.line_rate is None else args.line_rate
    if not MIN_LINE_RATE_BPS <= given <= 100e9:
        raise NetError("--line-rate must be in [1e3, 1e11] b/s")
    return float(given)


def topology_of(args: argparse.Namespace, line_rate_bps: float | None = None) -> Topology:
    """The network the command line names, its rate-less links at ``line_rate_bps`` (by
    default --line-rate's)."""
    rate = given_line_rate(args) if line_rate_bps is None else line_rate_bps
    defaults = LinkDefaults(
        line_rate_bps=rate,
        bottleneck_rate_bps=rate,
        innocent_rate_bps=rate,
        delay_s=0.0,
    )
    topo = load_topology(args.topology, defaults)
    return topo if topo.ecmp == args.ecmp else replace(topo, ecmp=args.ecmp)


def chosen_topology(
    args: argparse.Namespace, cost: capacity.FrameCost = capacity.BUILT_IN_COST
) -> tuple[Topology, float, str]:
    """``qcn net up``'s network and its scale in words: rate-less links at --line-rate if
    given, else at the default or, where every host sending at it would take the switches
    past their budget of the cores (qcn.core.capacity), at the rate that keeps them within
    it (rounded down to two digits), the QCN parameters' times then stretched alike, so
    that byte quantities stay what the default makes them (as a run's chosen scale keeps
    them: qcn.core.capacity).  A file's own rates stand.  Returns the network, the
    parameters' time scale and the choice in words."""
    topo = topology_of(args)
    budget = capacity.SWITCH_BUDGET_CORES
    load = capacity.full_line_rate_load(topo, SEED_FRAME_BYTES, cost)
    cores = load.cores
    at = f"every host sending at its line rate would take the switches {cores:.2f} of a core"
    if args.line_rate is None and cores > budget:
        # (the switches' share at rest stays what it is at any rate)
        at_rest = min(load.at_rest_cores, budget / 2)
        rate = _two_digits_down(NET_LINE_RATE_BPS * (budget - at_rest) / (cores - at_rest))
        time_scale = NET_TIME_SCALE * NET_LINE_RATE_BPS / rate
        if time_scale > MAX_TIME_SCALE:
            raise NetError(
                f"{topo.name}: {at} at {NET_LINE_RATE_BPS / 1e6:g} Mb/s; within the budget "
                f"of {budget:g} its links would run at {rate / 1e3:.3g} kb/s, the QCN "
                f"parameters' times scaled x{time_scale:,.0f}, past the bound of "
                f"x{MAX_TIME_SCALE:g}: a smaller network, or --line-rate to run it anyway"
            )
        slowed = topology_of(args, rate)
        slowed_cores = capacity.full_line_rate_load(slowed, SEED_FRAME_BYTES, cost).cores
        if slowed_cores < cores:
            within = "within" if slowed_cores <= budget * 1.001 else "still over"
            return (
                slowed,
                time_scale,
                (
                    f"scale: links at {_mbps(slowed)}, not {NET_LINE_RATE_BPS / 1e6:g} Mb/s: at "
                    f"that {at}, over the budget of {budget:g}; at this {slowed_cores:.2f}, "
                    f"{within} it (docs/experiments.md); --line-rate sets it"
                ),
            )
    given = "--line-rate" if args.line_rate is not None else "the default"
    within = "within" if cores <= budget else "over"
    return (
        topo,
        NET_TIME_SCALE,
        (
            f"scale: links at {_mbps(topo)} ({given}): {at}, {within} the budget of {budget:g}"
            + ("" if cores <= budget else ": keep your traffic below that for fidelity")
        ),
    )


def _mbps(topo: Topology) -> str:
    rates = sorted({link.rate_bps for link in topo.links})
    shown = [f"{r / 1e6:g}" for r in rates[:3]] + (["..."] if len(rates) > 3 else [])
    return "/".join(shown) + " Mb/s"


def _two_digits_down(x: float) -> float:
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return float(math.floor(x / step) * step)


def net_params(
    topo: Topology, params_file: Path | None, time_scale: float = NET_TIME_SCALE
) -> QcnParams:
    """The reaction points' and CPs' parameters: a file's, or the defaults scaled to the
    hosts' fastest link (the daemons' line rate) and by ``time_scale``."""
    line = max(topo.access_link(h.name).rate_bps for h in topo.hosts)
    if params_file is not None:
        params = QcnParams.load(params_file, QcnParams.preset(Preset.QCN.value))
        if abs(params.rp.line_rate_bps - line) > 1e-6 * line:
            raise NetError(
                f"{params_file}: rp.line_rate_bps must be the hosts' line rate ({line:g} b/s)"
            )
        return params
    return scaled_params(QcnParams(), line / SEED_LINE_RATE_BPS, time_scale)


def _up(args: argparse.Namespace) -> int:
    cost = backends.bmv2_cost(print) if args.line_rate is None else capacity.BUILT_IN_COST
    topo, time_scale, scale = chosen_topology(args, cost)
    params = net_params(topo, args.params, time_scale)
    if args.out.exists() and not args.out.is_dir():
        raise NetError(f"--out {args.out}: not a directory")
    if args.live_port and not args.live:
        raise NetError("--live-port needs --live")
    if not 0 <= args.live_port <= 65535:
        raise NetError(f"--live-port must be a TCP port, 1-65535 (got {args.live_port})")
    feed = None
    with contextlib.ExitStack() as view:
        if args.live:
            from qcn.cli.live import serving  # noqa: PLC0415 - Bokeh only for a live network

            feed = LiveFeed.of_network(
                topo, cp=None if args.no_qcn else params.cp, frame_bytes=SEED_FRAME_BYTES
            )
            view.enter_context(
                serving(feed, args.live_port, lambda url: print(f"qcn net: live view at {url}"))
            )
        print(f"qcn net: {scale}")
        if args.line_rate is None:
            print(f"qcn net: {cost.describe()}")
        backends.network_up(
            topo,
            args.out,
            params,
            qcn=not args.no_qcn,
            reaction_points=not args.no_rp,
            cli=args.cli,
            say=print,
            live=feed,
        )
    return 0


def _calibrate(_args: argparse.Namespace) -> int:
    backends.require_mininet("qcn net calibrate", NetError)
    cost = backends.calibrate_bmv2(print)
    print(f"qcn net: {cost.describe()}")
    return 0 if cost.source.startswith("calibrated") else 1


def _down(_args: argparse.Namespace) -> int:
    if not backends.network_down(say=print):
        print("qcn net: no network was running")
    return 0


def _draw(args: argparse.Namespace) -> int:
    from qcn.core.netdraw import draw  # noqa: PLC0415 - matplotlib's import

    topo = topology_of(args)
    resources.check_drawing(len(topo.switches) + len(topo.hosts), topo.name)
    out = drawing_path(args.topology, args.out)
    if os.path.lexists(out) and (args.out is None or args.out.is_dir()):
        # (a name the command chose: single-3.png was replaced without a word)
        raise NetError(f"{out} exists: name it with -o {out} to replace it, or give another -o")
    try:
        draw(topo, out)
    except OSError as e:  # a read-only directory, a full disk: nothing is left behind
        raise NetError(f"-o {out}: cannot write the picture ({e.strerror or e})") from None
    print(f"qcn net: {topo.describe()}: drew {out}")
    return 0


def drawing_path(topology: str, out: Path | None) -> Path:
    """Where ``qcn net draw`` writes: ``-o`` as given if it names a PNG, NAME.png inside it
    if it is a directory, else NAME.png here (docs/reliability.md).  Anything else is
    refused: a name without .png was written as NAME.png and reported as NAME, and
    ``x.txt`` was a traceback."""
    name = Path(topology).stem if not is_generator_spec(topology) else topology
    default = Path(name.replace(":", "-").replace(",", "-").replace("/", "-") + ".png")
    if out is None:
        return default
    if out.is_dir():
        return out / default
    if out.suffix.lower() != ".png":
        raise NetError(
            f"-o {out}: the picture is a PNG: give a name ending in .png, or a directory"
        )
    return out


def _show(args: argparse.Namespace) -> int:
    print("\n".join(show_lines(backend_views(args))))
    return 0


@dataclass(frozen=True)
class BackendViews:
    """A network as the simulator runs it and as BMv2 does (None: it would not), and how
    each was taken, in words."""

    sim: Topology
    sim_how: str
    bmv2: Topology | None
    bmv2_how: str


def backend_views(args: argparse.Namespace) -> BackendViews:
    """`qcn net show`'s network as the simulator and as BMv2 run it: without --scenario,
    the simulator's at a scenario's defaults (a link without a rate at
    network.line_rate_bps) and BMv2's as `qcn net up` runs it (:func:`chosen_topology`);
    with it, that scenario's run on the network, on the simulator and at the scale a BMv2
    run would choose (qcn.core.capacity).  A rate neither uses is never shown: a link
    without one was listed at net up's 10 Mb/s, which the simulator ran at 10 Gb/s."""
    if args.scenario is None:
        if args.set:
            raise NetError("--set goes with --scenario (a field of the scenario's)")
        given_line_rate(args)  # (a mistake in it is the user's, not net up's refusal)
        net = Network()
        sim_how = (
            "sim: as a scenario runs it on the simulator, at its defaults (links without a "
            f"rate at network.line_rate_bps, {rate_text(net.line_rate_bps)}; delays "
            "network.rtt_s / 2; --scenario for one's own)"
        )
        sim = replace(load_topology(args.topology, link_defaults(net)), ecmp=args.ecmp)
        try:
            topo, _, scale = chosen_topology(args, backends.bmv2_cost(measure=False))
        except NetError as e:
            return BackendViews(sim, sim_how, None, f"BMv2: qcn net up would not run it: {e}")
        return BackendViews(sim, sim_how, topo, f"BMv2: as qcn net up runs it; {scale}")
    if args.line_rate is not None:
        raise NetError("--line-rate is qcn net up's: with --scenario the rates are the run's")
    sc, overrides = load_scenario(args.scenario, args.set, None)
    if "network.topology" in overrides:
        raise NetError("--set network.topology: the network is the command's own argument")
    sc = sc.with_overrides({"network.topology": args.topology})
    given = [*overrides, "network.topology"]
    sim_how = f"sim: {sc.name} on the simulator"
    try:
        chosen, scale = capacity.with_chosen_scale(sc, given, backends.bmv2_cost(measure=False))
        scaled = chosen.scaled_for_bmv2(keep=given)
    except ScenarioError as e:
        return BackendViews(sc.topology, sim_how, None, f"BMv2: {sc.name} would not run there: {e}")
    return BackendViews(sc.topology, sim_how, scaled.topology, f"BMv2: {sc.name} at {scale}")


def show_lines(views: BackendViews) -> list[str]:
    """`qcn net show`: the network in one line, its notes, how each backend runs it, then a
    table of every switch port (its rate and delay on each backend; its buffer and CP,
    both where the backends differ) and one of the hosts, each under its column headers."""
    topo = views.sim
    lines = [topo.describe(), *(f"note: {note}" for note in topo.notes)]
    lines += [views.sim_how, views.bmv2_how, ""]
    lines += [
        PORT_GROUPS.format("", "", "rate", "delay").rstrip(),
        PORT_ROW.format("port", "to", "sim", "BMv2", "sim", "BMv2", "buffer", "CP"),
    ]
    for row in port_rows(views):
        cells = [
            (f"{row['sim_buffer_pkts']} pkts", None if row["bmv2_buffer_pkts"] is None
             else f"{row['bmv2_buffer_pkts']} pkts"),
            (row["sim_cp"], row["bmv2_cp"]),
        ]  # fmt: skip
        buffer, runs_cp = (a if b in (None, a) else f"{a} sim, {b} BMv2" for a, b in cells)
        there = row["bmv2_rate_bps"] is not None
        lines.append(
            PORT_ROW.format(
                row["port"], row["to"], rate_text(row["sim_rate_bps"]),
                rate_text(row["bmv2_rate_bps"]) if there else "-",
                f"{row['sim_delay_s'] * 1e3:.3g} ms",
                f"{row['bmv2_delay_s'] * 1e3:.3g} ms" if there else "-", buffer, runs_cp,
            )
        )  # fmt: skip
    lines += ["", HOST_ROW.format("host", "IP", "MAC", "attached to")]
    for h in host_rows(topo):
        lines.append(HOST_ROW.format(h["host"], h["ip"], h["mac"], h["attached_to"]))
    lines += ["", "CP: a congestion point runs on that egress port; no: it can congest but "
              "runs none; -: what may arrive for it never exceeds its rate"]  # fmt: skip
    return lines


def port_rows(views: BackendViews) -> list[dict[str, Any]]:
    """`qcn net show`'s table of switch ports as data: per egress port, where it goes (a
    host, or a switch's port), its rate, delay and buffer on each backend (BMv2's None
    where BMv2 would not run it), and on each whether it runs a CP ("CP"), can congest and
    runs none ("no"), or never congests ("-")."""
    topo, other = views.sim, views.bmv2
    sim_cps = set(topo.cp_ports)
    bmv2_cps = set(other.cp_ports) if other is not None else set()

    def cp(t: Topology, cps: set[PortRef], ref: PortRef) -> str:
        return "CP" if ref in cps else ("no" if t.congestible(ref) else "-")

    rows = []
    for ref in topo.port_refs():
        link, far = topo.link_at(ref), topo.far_end(ref)
        there = other.link_at(ref) if other is not None else None
        rows.append(
            {
                "port": str(ref),
                "to": far.node if far.node in topo.host_by_name else f"{far.node}:{far.port}",
                "sim_rate_bps": link.rate_bps,
                "bmv2_rate_bps": there.rate_bps if there else None,
                "sim_delay_s": link.delay_s,
                "bmv2_delay_s": there.delay_s if there else None,
                "sim_buffer_pkts": link.buffer_pkts,
                "bmv2_buffer_pkts": there.buffer_pkts if there else None,
                "sim_cp": cp(topo, sim_cps, ref),
                "bmv2_cp": cp(other, bmv2_cps, ref) if other is not None else None,
            }
        )
    return rows


def host_rows(topo: Topology) -> list[dict[str, str]]:
    """`qcn net show`'s table of hosts as data: each host's IP, MAC and switch port."""
    return [
        {"host": h.name, "ip": h.ip, "mac": h.mac, "attached_to": str(topo.attachment(h.name))}
        for h in topo.hosts
    ]


PORT_ROW = "{:<10} {:<10} {:>11} {:>11} {:>9} {:>9} {:>10}  {}"
PORT_GROUPS = "{:<10} {:<10} {:^23} {:^19}"
"""The header over PORT_ROW's two columns of rates (sim, BMv2) and two of delays."""
HOST_ROW = "{:<10} {:<18} {:<18} {}"
