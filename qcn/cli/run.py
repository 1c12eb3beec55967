"""`qcn run`: run a scenario on a backend and write its results."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.cli.options import (
    SET_HELP,
    add_duration,
    add_out,
    add_params,
    add_quiet,
    add_scale,
    add_scenario,
    add_set,
    scenario_of,
)
from qcn.core import capacity, control, fit, provenance, publish
from qcn.core import scenario as scenarios
from qcn.core.backend import FLAG, backend_flags, dest_of, flag_of
from qcn.core.errors import CheckFailedError
from qcn.core.live import KNOBS_FILE, LiveFeed, write_knobs
from qcn.core.noise import verdict_line
from qcn.core.progress import ProgressLine
from qcn.core.publish import PARTIAL_MARKER
from qcn.core.results import SUMMARY_KEYS, json_safe, write_csvs
from qcn.core.scenario import ScenarioError
from qcn.core.trace import Trace
from qcn.lab import backends, scheme_table

DEFAULT_OUT = Path("results")
DEFAULT_LIVE_SPEED = 1.0
MAX_LIVE_SPEED = 1000.0
KIND = "run"
"""What a run's results folder holds (qcn.core.publish.KINDS)."""
AGAIN_SUFFIX = "-again"
"""``qcn run --again DIR`` writes to DIR-again unless --out says otherwise."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run an experiment scenario (scenarios/*.toml) and write CSVs, summary, plots",
        description="Run one of the seeds' experiments. Results go to --out "
        "(default results/SCENARIO): queue.csv, sources.csv, summary.json, rates.png, queue.png; "
        "a network of several CP ports adds ports.csv and ports.png.",
    )
    add_scenario(p, optional=True)
    p.add_argument("--list", action="store_true", help="list the scenarios")
    p.add_argument(
        "--again",
        type=Path,
        metavar="DIR",
        help="run the results in DIR again: the scenario of DIR/run.toml with the seed, "
        "backend and options of DIR/provenance.json (results to --out, default DIR-again)",
    )
    p.add_argument(
        "--with-changed-inputs",
        action="store_true",
        help="--again: rerun even if DIR's run.toml or a file it reads (a topology file, a "
        "flow-size CDF) changed since the run (it is then not the same run; the new "
        "provenance.json records what it read)",
    )
    add_out(p, None, f"{DEFAULT_OUT}/SCENARIO")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace the results already in --out (once the new run is complete)",
    )
    p.add_argument("--no-qcn", action="store_true", help="the same run without QCN")
    p.add_argument(
        "--scheme",
        metavar="LIST",
        help="run under this scheme, with its own parameters on the scenario's network "
        "(none: as --no-qcn); several (qcn,dcqcn,none): the same network, traffic and seed "
        "under each, each to OUT/SCHEME/, their table and plot in OUT (default "
        "results/SCENARIO-schemes; docs/dcqcn.md)",
    )
    add_quiet(p)
    add_duration(p)
    _add_run_choices(p)
    add_backend_flags(p)  # (each backend's own: --cli, --sample-hz, --pcap...)
    _add_live_options(p)
    add_set(p, SET_HELP + "; it also wins over the scenario's [bmv2.set]")
    add_params(p)
    add_scale(p)
    p.set_defaults(func=_run)
    p.set_defaults(option_defaults=_option_defaults(p))


def _add_run_choices(p: argparse.ArgumentParser) -> None:
    """What runs: the seed, the backend, the simulator's scaled model of a BMv2 run."""
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help=f"random seed (same seed, same summary; default {backends.RunOptions().seed})",
    )
    p.add_argument(
        "--backend",
        choices=["auto", *backends.names()],
        default=None,  # (None: not given, so --again can tell --backend auto from nothing)
        help="mininet: BMv2 switches in Mininet (root and the p4lang toolchain); sim: the "
        "packet simulator; auto (default): mininet where it can run, else sim",
    )
    p.add_argument(
        "--scaled",
        action="store_true",
        help="sim: run the scenario as scaled for BMv2 (its [bmv2] section), with BMv2's CP "
        "(a departure CP judges departing frames), to predict a Mininet run",
    )


def add_backend_flags(p: Any) -> None:
    """Each backend's own options as flags of ``qcn run`` (declared in its module: its
    :attr:`Backend.options`), each flag's help after the backend's name; None (or a switch
    not given): not given."""
    for backend in backends.BACKENDS.values():
        for f in backend_flags(backend.options):
            flag = f.metadata[FLAG]
            kwargs: dict[str, Any] = {"dest": dest_of(f), "help": f"{backend.name}: {flag.help}"}
            if flag.choices is not None:
                kwargs.update(choices=list(flag.choices), default=None)
            elif flag.parse is None:
                kwargs.update(action="store_true")
            else:
                kwargs.update(default=None, metavar=flag.metavar)
            p.add_argument(flag_of(f), **kwargs)


def _add_live_options(p: argparse.ArgumentParser) -> None:
    """The live view (docs/live.md)."""
    p.add_argument(
        "--live",
        action="store_true",
        help="serve a live view of the run on 127.0.0.1 (its URL is printed): the queues, "
        "rates, CNMs and drops as they are measured, and the CPs' knobs (docs/live.md); sim: "
        "the run starts when the page opens",
    )
    p.add_argument(
        "--live-speed",
        type=float,
        default=DEFAULT_LIVE_SPEED,
        metavar="X",
        help="sim with --live: simulated seconds per second (default 1: real time)",
    )
    p.add_argument(
        "--live-port",
        type=int,
        default=0,
        metavar="PORT",
        help="--live: the port to serve on (default: a free one)",
    )


@dataclass(frozen=True)
class StagedResults:
    """A run's results directory, written whole or not at all (:mod:`qcn.core.publish`).

    The run writes into ``staging``, a hidden sibling of ``out`` marked partial; only when
    every file is written is it renamed to ``out``, and only if ``out`` is still free unless
    ``force`` (then the old ``out`` is replaced in the same step).  An interrupted or failed
    run publishes what it wrote, still marked partial: at ``out`` if that is free, else
    beside it, never over earlier partial results.
    """

    out: Path
    staging: Path
    force: bool = False

    def publish(self) -> None:
        """Put the finished results at ``out``; a ScenarioError if another run put its own
        there meanwhile (this run's are then kept as partial)."""
        (self.staging / PARTIAL_MARKER).unlink()
        try:
            publish.publish(self.staging, self.out, replace=self.force)
        except FileExistsError:
            (self.staging / PARTIAL_MARKER).write_text(
                "these results are complete, but another run put its own at --out while this "
                "one ran (and --force was not given): they were kept here instead\n"
            )
            where = self.keep_partial()
            raise ScenarioError(
                f"--out {self.out}: another run put its results there while this one ran; "
                f"this run's are in {where}/"
            ) from None

    def keep_partial(self) -> Path:
        """Put what an interrupted or failed run wrote where the user finds it; return where."""
        return publish.keep_partial(self.staging, self.out)


def prepare_out(out: Path, scenario: str, *, force: bool = False) -> StagedResults:
    """Make sure results can be written next to ``out`` before a run spends its time, and
    refuse an ``out`` that holds results already unless ``force``.  What runs to ``out``
    that were killed left beside it is dealt with first (:func:`publish.recover_leftovers`),
    and said."""
    out = publish.resolve_out(out, ScenarioError)
    try:
        for line in publish.recover_leftovers(out):
            print(f"qcn run: {line}", file=sys.stderr, flush=True)
    except OSError as e:
        raise ScenarioError(f"--out {out}: {e.strerror}") from None
    # (any kind of the project's results: --force replaces a sweep's folder as a run's)
    held = publish.check_results_folder(out, ScenarioError, kind=None, replace=force, renamed=True)
    if held is not None and not force:
        what = "" if held == KIND else f" ({publish.KINDS[held]})"
        raise ScenarioError(
            f"--out {out} holds results already{what}; pass --force to replace them (when the "
            "new run is complete), or choose another --out"
        )
    staging = publish.staging_path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if not publish.remove_own(staging):
            raise ScenarioError(f"--out {out}: {staging} is in the way (not a run's); move it")
        publish.make_staging(staging)
    except OSError as e:
        raise ScenarioError(f"--out {out}: cannot write results there ({e.strerror})") from None
    try:
        (staging / PARTIAL_MARKER).write_text(
            f"qcn run {scenario}: these results are incomplete (the run was interrupted or "
            "failed before it wrote them all)\n"
        )
        publish.mark_results(staging, KIND)
    except OSError as e:
        # A disk that fills right after the staging was made must not leave it behind.
        shutil.rmtree(staging, ignore_errors=True)
        raise ScenarioError(f"--out {out}: cannot write results there ({e.strerror})") from None
    return StagedResults(out, staging, force)


def flows_line(flows: dict[str, Any]) -> str:
    """The flows workload's figures in one line (summary.json's ``flows``); a slowdown of
    no flow is ``-``, not nan; with flows unfinished, the slowdowns say they leave them
    out, and how many of each size."""

    def fig(x: float | None) -> str:
        return "-" if x is None or math.isnan(x) else f"{x:.2f}"

    def part(kind: str) -> str:
        figures = flows[f"slowdown_{kind}"]
        more = f", {figures['unfinished']} more unfinished" if figures["unfinished"] else ""
        return (
            f"{kind} {fig(figures['p50'])}/{fig(figures['p99'])} ({figures['flows']} flows{more})"
        )

    only = " of the finished flows only:" if flows["unfinished"] else ""
    return (
        f"flows: {flows['started']} started, {flows['finished']} finished, "
        f"{flows['unfinished']} unfinished; slowdown p50/p99{only} {part('short')}, "
        f"{part('long')}"
    )


def run_failure(summary: dict[str, Any], trace: Trace) -> str:
    """Why a finished run says nothing about its network ("" when it does): it started no
    flow, or delivered nothing."""
    if "flows" in summary and summary["flows"]["started"] == 0:
        return (
            "the run started no flow: workload.load of the destinations' links over the run "
            "(less workload.drain_fraction) came to less than one flow of workload.flow_sizes"
        )
    delivered = sum(map(sum, trace.source_delivered_bps)) or sum(trace.throughput_bps)
    if not delivered > 0:
        return "the run delivered nothing: no source's frame reached its destination"
    return ""


PRINTED_DIGITS = 4
"""Significant digits of the figures `qcn run` prints (summary.json keeps them whole)."""


def printed(figures: dict[str, Any]) -> dict[str, Any]:
    """The headline figures as printed: each float to :data:`PRINTED_DIGITS` significant
    digits (229.0, not 228.99999999974696), a figure with no value (NaN, infinity) null."""
    return {
        k: float(f"{v:.{PRINTED_DIGITS}g}") if isinstance(v, float) else v
        for k, v in json_safe(figures).items()
    }


def headline_line(summary: dict[str, Any]) -> str:
    """Which port the printed figures describe, and why (summary.json's headline_port and
    headline_reason)."""
    others = (
        ' every port\'s are in summary.json "ports", ports.csv and ports.png'
        if ("ports" in summary)
        else ""
    )
    return (
        f"the figures below are port {summary['headline_port']}'s "
        f"({summary['headline_reason']}; drops are the whole network's);{others}"
    ).rstrip(";")


def phase_line(p: dict[str, Any]) -> str:
    """One phase of the schedule in words (summary.json's phases); delivered above
    offered says where the surplus comes from."""
    state = "congested" if p["congested"] else "uncongested"
    line = (
        f"phase {p['from_s']:g}-{p['to_s']:g} s ({state}): capacity "
        f"{p['capacity_bps'] / 1e6:g} Mb/s, offered {p['offered_bps'] / 1e6:.3f} Mb/s, "
        f"delivered {p['delivered_bps'] / 1e6:.3f} Mb/s = {p['delivered_offered']:.2f} of "
        "offered"
    )
    if round(p["delivered_offered"], 2) > 1 and p["undelivered_at_start_bits"] > 0:
        line += (
            f" (above 1: the sources also send the backlog their reaction points held back "
            f"before this phase, {p['undelivered_at_start_bits'] / 1e6:,.0f} Mb offered and "
            "not yet delivered at its start)"
        )
    return line


def _run(args: argparse.Namespace) -> int:
    if args.list:
        for name in scenarios.available():
            sc = scenarios.load(name)
            print(f"{name:14} seed {sc.seed:4} {sc.title}")
        return 0
    if args.scheme is not None and args.again is None:
        names = scheme_table.parse_schemes(args.scheme)
        if len(names) > 1:
            return _run_schemes(args, names)
        if names[0] == scheme_table.NO_SCHEME:
            args.scheme, args.no_qcn = None, True
    if args.again is not None:
        run = again_run(args)
        # Beside DIR, even where it is named "." or "..": never inside it (nor a traceback).
        source = args.again
        if source.name in ("", ".."):
            source = Path(os.path.abspath(source))
        out = args.out or source.with_name(source.name + AGAIN_SUFFIX)
    else:
        run = fresh_run(args)
        out = args.out or DEFAULT_OUT / run.sc.name
    return _execute(args, run, out)


SCHEMES_SUFFIX = "-schemes"
"""``qcn run SCENARIO --scheme A,B`` writes to results/SCENARIO-schemes unless --out says."""


def _run_schemes(args: argparse.Namespace, names: tuple[str, ...]) -> int:
    """The scenario under each scheme of ``--scheme``, one `qcn run` each, then their table
    and plot (qcn.lab.scheme_table)."""
    for given, why in (
        (args.no_qcn, "give 'none' among the schemes"),
        (args.live, "a live view shows one run"),
    ):
        if given:
            raise ScenarioError(f"--scheme {args.scheme}: {why}; not with several schemes")
    if not args.scenario:
        raise ScenarioError("give a scenario name (qcn run --list) or a file")
    base = scenarios.load(args.scenario)
    out = args.out or DEFAULT_OUT / f"{base.name}{SCHEMES_SUFFIX}"
    rows: list[dict[str, Any]] = []
    traces: list[Trace] = []
    backend_name = ""
    for i, name in enumerate(names, 1):
        print(f"qcn run: scheme {i} of {len(names)}: {name}", flush=True)
        one = argparse.Namespace(**vars(args))
        none = name == scheme_table.NO_SCHEME
        one.scheme, one.no_qcn = (None, True) if none else (name, False)
        one.backend = backend_name or args.backend
        run = fresh_run(one)
        backend_name = run.backend.name  # every scheme on the backend the first ran on
        done = execute(run, out / name, force=args.force, quiet=args.quiet)
        report(done, run)
        view = scheme_table.headline_queue(run.sc, done.trace, done.summary)
        rows.append(scheme_table.scheme_row(name, out / name, done.summary, run.sc, view))
        traces.append(view)
    written = scheme_table.write(out, base.name, backend_name, rows, traces)
    print(scheme_table.format_table(base.name, backend_name, rows))
    for path in written:
        print(f"  {path}")
    return 0


@dataclass(frozen=True)
class Prepared:
    """A run ready to go."""

    sc: scenarios.Scenario
    """The scenario as it runs (scaled for BMv2 where it runs scaled)."""
    backend: backends.Backend
    why: str
    """Why this backend, in words, and how the scenario was scaled."""
    options: backends.RunOptions
    overrides: dict[str, Any]
    """The overrides the command line gave (provenance.json keeps them)."""
    units: tuple[float, float] = (1.0, 1.0)
    """The (rate, time) scale ``sc`` was scaled by from the scenario the command line gave
    (BMv2's), so that advice in its terms is given in the user's."""


def _cost(*, measure: bool = True) -> capacity.FrameCost:
    """This machine's BMv2 cost (calibrated once, :func:`backends.bmv2_cost`); calibrating
    it says so on stderr."""
    return backends.bmv2_cost(
        lambda line: print(line, file=sys.stderr, flush=True), measure=measure
    )


@dataclass(frozen=True)
class _Choice:
    """The backend ``qcn run`` runs on, why, and what choosing it already found: the
    scale chosen and the BMv2 cost it was chosen with (None: not looked at yet)."""

    backend: backends.Backend
    why: str
    scaled: tuple[scenarios.Scenario, str] | None = None
    cost: capacity.FrameCost | None = None


def _choose(requested: str, sc: scenarios.Scenario, overridden: Collection[str]) -> _Choice:
    """The backend for ``requested`` (``auto``: the first that can run here and runs
    ``sc``, at a scale this machine holds where it runs in BMv2's units), why, and the
    scale chosen on the way."""
    if requested != "auto":
        return _Choice(*backends.choose_backend(requested))
    runs_it = [b for b in backends.AUTO_ORDER if not b.refusal(sc)]
    if len(runs_it) == 1:  # (real TCP and iperf3 run on Mininet only, PAUSE on one switch in
        (backend,) = runs_it  # the simulator only)
        backend.require("this run", ScenarioError)
        return _Choice(backend, f"{backend.title} (the only backend that runs this scenario)")
    backend, why = backends.choose_backend(requested)
    if not backend.in_bmv2_units:
        return _Choice(backend, why)
    cost = _cost()
    try:
        return _Choice(backend, why, capacity.with_chosen_scale(sc, overridden, cost), cost)
    except ScenarioError as e:  # no scale fits this machine: the simulator runs it
        anywhere = backends.ANYWHERE
        return _Choice(anywhere, f"{anywhere.title} (BMv2 on this machine: {e})")


def fresh_run(args: argparse.Namespace) -> Prepared:
    """A run of the command line's scenario, options and overrides."""
    if not args.scenario:
        raise ScenarioError("give a scenario name (qcn run --list) or a file")
    if args.with_changed_inputs:
        raise ScenarioError("--with-changed-inputs goes with --again DIR")
    sc, overrides = scenario_of(args)
    # Options --again refuses when given at all: None said "not given" (their defaults here).
    args.backend = args.backend or "auto"
    choice = _choose(args.backend, sc, overrides.keys())
    backend, why = choice.backend, choice.why
    backends.require(sc, backend)
    scale = sc.bmv2
    own = backends.backend_options(backend, args)
    if args.scale is not None and not backend.in_bmv2_units and not args.scaled:
        raise ScenarioError("--scale needs the Mininet backend, or --scaled on the simulator")
    if backend.in_bmv2_units or args.scaled:
        cost = choice.cost or _cost(measure=backend.in_bmv2_units)
        sc, chosen = choice.scaled or capacity.with_chosen_scale(sc, overrides.keys(), cost)
        scale = sc.bmv2
        sc = sc.scaled_for_bmv2(keep=overrides.keys())
        why += f"; {chosen}: {sc.duration_s:g} s; {cost.describe()}"
    options = backends.RunOptions(
        qcn=not args.no_qcn,
        scaled_by=scale.time_scale if args.scaled else None,
        own=own,
        **({} if args.seed is None else {"seed": args.seed}),
    )
    units = (scale.rate_scale, scale.time_scale) if backend.in_bmv2_units or args.scaled else None
    return Prepared(sc, backend, why, options, overrides, units or (1.0, 1.0))


AGAIN_KEEPS = frozenset(
    {"again", "with_changed_inputs", "out", "force", "quiet", "live", "live_speed", "live_port"}
)
"""The options of ``qcn run`` that say where its results go and how it is shown, which
``--again`` takes beside the run it reruns.  Every other option, one added later too,
changes what runs: given with ``--again`` it is refused (which would win?)."""


def _option_defaults(p: argparse.ArgumentParser) -> dict[str, Any]:
    """Each option's destination and its default, "not given" (:func:`_again_conflicts`)."""
    given, _ = p.parse_known_args([])
    return {dest: value for dest, value in vars(given).items() if dest != "func"}


def _again_conflicts(args: argparse.Namespace) -> list[str]:
    """What the command line gave besides :data:`AGAIN_KEEPS`: what ``--again`` takes from
    the results it reruns (a default given on purpose counts: ``--seed 1`` is not
    ignored)."""
    return [
        "a scenario" if dest == "scenario" else "--" + dest.replace("_", "-")
        for dest, default in args.option_defaults.items()
        if dest not in AGAIN_KEEPS and getattr(args, dest) != default
    ]


def again_run(args: argparse.Namespace) -> Prepared:
    """The run whose results are in ``args.again``, as it ran (qcn.core.provenance)."""
    conflicts = _again_conflicts(args)
    if conflicts:
        raise ScenarioError(
            f"--again takes the scenario and options recorded in {args.again}: give none of "
            f"{', '.join(conflicts)} with it (or run {args.again}/{provenance.RUN_FILE} as a "
            "scenario with your own)"
        )
    where = args.again / provenance.PROVENANCE_FILE
    sc, recorded = provenance.read(args.again)
    backend = backends.by_name(recorded["backend"], str(where))
    try:
        others = tuple(b for b in backends.BACKENDS.values() if b is not backend)
        options = backends.RunOptions.from_recorded(recorded["run"], backend, others)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {e}") from None
    if options.scaled_by is not None:
        # run.toml holds the scenario scaled: its duration over the scale is the duration the
        # command line gave, and bounds the samples (a tiny scale would sample for ever).
        ran_s = sc.duration_s / options.scaled_by
        if not scenarios.MIN_DURATION_S <= ran_s <= scenarios.MAX_DURATION_S * (1 + 1e-9):
            raise ScenarioError(
                f"{where}: run.scaled_by = {options.scaled_by:g} does not fit {provenance.RUN_FILE}"
                f"'s duration_s {sc.duration_s:g} (a scenario of {ran_s:g} s, outside "
                f"[{scenarios.MIN_DURATION_S:g}, {scenarios.MAX_DURATION_S:g}])"
            )
    changed = provenance.changed_inputs(sc, recorded)
    if changed and not args.with_changed_inputs:
        raise provenance.ProvenanceError(
            f"--again {args.again}: not the same run: {'; '.join(changed)} (--with-changed-"
            "inputs reruns it with its inputs as they are now)"
        )
    _backend, why = backends.choose_backend(backend.name)
    but = " but with inputs changed since" if changed else ""
    why += f"; again, as {args.again} ran{but}: seed {options.seed}"
    for line in changed:
        print(f"qcn run: warning: not the same run as {args.again}: {line}", file=sys.stderr)
    return Prepared(sc, backend, why, options, dict(recorded["overrides"]))


def live_feed(args: argparse.Namespace, run: Prepared) -> LiveFeed | None:
    """The feed of ``--live``'s view (None without it), its options checked."""
    if not args.live:
        if args.live_speed != DEFAULT_LIVE_SPEED or args.live_port:
            raise ScenarioError("--live-speed and --live-port need --live")
        return None
    backends.refuse_live(run.backend)
    if run.backend.real_time and args.live_speed != DEFAULT_LIVE_SPEED:
        raise ScenarioError("--live-speed paces the simulator; BMv2 runs in real time")
    if not 0 < args.live_speed <= MAX_LIVE_SPEED:
        raise ScenarioError(
            f"--live-speed must be in (0, {MAX_LIVE_SPEED:g}] (got {args.live_speed:g})"
        )
    if not 0 <= args.live_port <= 65535:
        raise ScenarioError(f"--live-port must be a TCP port, 1-65535 (got {args.live_port})")
    if args.cli:
        raise ScenarioError("--live and --cli: the Mininet CLI takes the run over; choose one")
    return LiveFeed.of_scenario(
        run.sc,
        cp=run.sc.params.cp if run.options.qcn else None,
        speed=None if run.backend.real_time else args.live_speed,
        yields_to_network=run.backend.real_time,
    )


def _execute(args: argparse.Namespace, run: Prepared, out: Path) -> int:
    """Run ``run`` into ``out``, whole or not at all, and say what it found."""
    feed = live_feed(args, run)
    with contextlib.ExitStack() as view:
        if feed is not None:
            from qcn.cli.live import serving  # noqa: PLC0415 - Bokeh only for a live run

            view.enter_context(
                serving(feed, args.live_port, lambda url: _say_live(url, run.backend))
            )
        return _execute_run(args, dataclasses.replace(run, options=dataclasses.replace(
            run.options, live=feed)), out)  # fmt: skip


def _fit_advice(fitted: fit.Fit, out: Path, overrides: Collection[str]) -> str:
    """What the misfit line tells the user to run instead (without the --set options the
    fitted file gives too: given twice, a field is refused)."""
    clash = [k for k in fitted.fields_set() if k in overrides]
    without = f", without --set {', '.join(clash)}" if clash else ""
    return (
        f"Parameters fitted to {fitted.to}: run it again with --params "
        f"{out / fit.FITTED_FILE} --duration {fitted.duration_s:g}{without} (written with "
        "the results)"
    )


def _misfit_figures(sc: scenarios.Scenario, fitted: fit.Fit, out: Path) -> dict[str, Any]:
    """summary.json's record of the misfit check: what it found and the fit it wrote."""
    return {
        "parameters_misfit": fit.misfits(sc),
        "parameters_fitted": {
            "file": str(out / fit.FITTED_FILE),
            "to": fitted.to,
            "duration_s": fitted.duration_s,
            "rate_scale": fitted.rate_scale,
            "time_scale": fitted.time_scale,
        },
    }


def _say_live(url: str, backend: backends.Backend) -> None:
    when = "live now" if backend.real_time else "the simulation starts when the page opens"
    print(f"qcn run: live view at {url} ({when}; Ctrl-C stops the run)", flush=True)


def _execute_run(args: argparse.Namespace, run: Prepared, out: Path) -> int:
    done = execute(run, out, force=args.force, quiet=args.quiet)
    report(done, run)
    check_said_something(done)
    return 0


def check_said_something(done: Done) -> None:
    """A run that says nothing of its network (:func:`run_failure`) failed its own check
    (docs/reliability.md): a CheckFailedError, whose line says where its results are."""
    failure = run_failure(done.summary, done.trace)
    if failure:
        raise CheckFailedError(f"{failure}; its results are in {done.out}/")


def _flushed(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class Done:
    """A finished run: where its results are, its summary, its Trace and its plots."""

    out: Path
    summary: dict[str, Any]
    trace: Trace
    plots: list[Path]


def execute(
    run: Prepared,
    out: Path,
    *,
    force: bool = False,
    quiet: bool = False,
    say: Callable[[str], None] | None = None,
) -> Done:
    """Run ``run`` into ``out``, whole or not at all (`qcn run` and :func:`qcn.run`):
    ``say`` takes what it is about to do (None: printed); warnings go to stderr."""
    sc, backend = run.sc, run.backend
    feed = run.options.live
    backend.check(sc, run.options)  # (before anything is written)
    staged = prepare_out(out, sc.name, force=force)
    (say or _flushed)(f"qcn run: {sc.name} on the {run.why}")
    misfit, fitted = "", None
    if run.options.qcn and fit.misfits(sc):
        fitted = fit.fitted(sc, run.units)
        misfit = fit.misfit_line(sc, _fit_advice(fitted, out, run.overrides))
        print(f"qcn run: warning: {misfit}", file=sys.stderr, flush=True)
        (staged.staging / fit.FITTED_FILE).write_text(fitted.toml())
    if feed is not None and not backend.real_time:  # (a simulation waits for its viewer)
        try:
            feed.wait_for_viewer()
        except BaseException:
            shutil.rmtree(staged.staging, ignore_errors=True)  # nothing ran: nothing to keep
            raise

    progress = ProgressLine(f"qcn run: {sc.name} simulated", quiet=quiet)

    def keep_measured(trace: Trace) -> None:
        """An interrupted simulation's CSVs, beside its PARTIAL marker: what it measured
        (only the marker was kept, though the documentation says an interrupted run keeps what
        it measured)."""
        try:
            write_csvs(staged.staging, sc, trace)
        except Exception as e:  # the interrupt is the one to report
            print(f"qcn run: the partial results could not be written ({e})", file=sys.stderr)

    options = dataclasses.replace(
        run.options,
        progress=None if backend.real_time else progress.update,
        partial=keep_measured,
    )
    try:
        try:
            trace = backends.run_scenario(sc, backend, staged.staging, options)
        finally:
            progress.close()
            if feed is not None:
                feed.finished.set()
                write_knobs(staged.staging, feed.changes())
        summary, staged_plots = backends.record(
            staged.staging, sc, trace, backend, options, overrides=run.overrides,
            extra=_misfit_figures(sc, fitted, out) if fitted else None,
        )  # fmt: skip
        staged.publish()
    except BaseException as e:
        if staged.staging.exists():
            where = staged.keep_partial()
            print(f"qcn run: partial results in {where}/ ({where / PARTIAL_MARKER})",
                  file=sys.stderr, flush=True)  # fmt: skip
        if isinstance(e, OSError):
            # A full disk, or the directory taken away: one line, not a traceback.
            raise ScenarioError(f"cannot write the results: {e.strerror or e}") from None
        raise
    plots = [out / p.relative_to(staged.staging) for p in staged_plots]
    return Done(out, summary, trace, plots)


def report(done: Done, run: Prepared, *, figures: bool = True) -> None:
    """What `qcn run` says of a finished run: its figures (``figures``), and on stderr the
    warnings of its ports' control."""
    summary, trace, out, feed = done.summary, done.trace, done.out, run.options.live
    if figures:
        print(f"qcn run: {headline_line(summary)}")
        print(json.dumps(printed({k: summary[k] for k in (*SUMMARY_KEYS, *trace.extra)})))
        for p in summary["phases"]:
            print(f"  {phase_line(p)}")
        if "flows" in summary:
            print(f"  {flows_line(summary['flows'])}")
        if "noise" in summary:
            print(f"qcn run: {verdict_line(summary['noise'])}")
    for line in control.control_lines(summary, run.sc.params.rp.min_rate_bps):
        print(f"qcn run: warning: {line}", file=sys.stderr, flush=True)
    if not figures:
        return
    for capture in trace.captures:
        print(f"  capture: {out / capture}")
    print(f"qcn run: done in {trace.wall_s:.1f} s; results in {out}/")
    if feed is not None:
        print(f"  knob changes: {len(feed.changes())} ({out / KNOBS_FILE})")
    for p in done.plots:
        print(f"  plot: {p}")
