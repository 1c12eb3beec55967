"""The ``qcn`` command line: one entry point, one subcommand per job."""

from __future__ import annotations

# Ctrl-C while the command is still importing (a second and more) printed a traceback of
# whatever import it cut.  Until the imports below are done it ends the process at once,
# with the line and status of any interrupted command; nothing has started to clean up.
# (First, before any heavy import: see _quiet_while_importing.)
import signal
import sys
import threading

from qcn.core.errors import ExitCode  # (light: the standard library's enum only)


def _interrupted_while_importing(_signum: int, _frame: object) -> None:
    sys.stderr.write("qcn: interrupted\n")
    raise SystemExit(ExitCode.INTERRUPTED)


def _quiet_while_importing() -> object:
    """Install :func:`_interrupted_while_importing` for SIGINT, where Python's own handler
    is (not where SIGINT is ignored, nor off the main thread); return what to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return None
    signal.signal(signal.SIGINT, _interrupted_while_importing)
    return previous


_BEFORE_IMPORTS = _quiet_while_importing()

import argparse  # noqa: E402 - after the handler above
import importlib  # noqa: E402
import os  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

from qcn.core import provenance  # noqa: E402
from qcn.core.errors import QcnError  # noqa: E402
from qcn.core.params import QcnParams, RpScheme, scheme_names  # noqa: E402
from qcn.core.signals import (  # noqa: E402
    ignore_stop_signals,
    interrupts_never_lost,
    sigterm_as_interrupt,
)

if _BEFORE_IMPORTS is not None:
    # Importers of this module (tests, a tool) keep their own Ctrl-C; main() catches the
    # KeyboardInterrupt of its own later imports (the subcommands').
    signal.signal(signal.SIGINT, _BEFORE_IMPORTS)  # type: ignore[arg-type]


def _params_command(args: argparse.Namespace) -> int:
    base = QcnParams.preset(args.preset)
    params, ports = QcnParams.load_with_ports(args.file, base) if args.file else (base, {})
    if ports and not args.check:
        # A port's own CP fields belong to a scenario (qcn run --params takes them).
        print(f"qcn params: {args.file}'s port_cp table is left out here", file=sys.stderr)
    if args.write:
        params.save(args.write)
        print(f"wrote {args.write}")
    elif args.check:
        print(f"{args.file}: valid")
    else:
        sys.stdout.write(params.dumps())
    return 0


#: Jobs whose command line lives in their own module (each also runs as ``python -m
#: MODULE``, the same parser): ``qcn NAME ARGS`` hands ARGS to that module's ``main``.
TOOLS: dict[str, tuple[str, str]] = {
    "build": ("qcn.core.pipeline", "compile the CP pipeline for BMv2 (what 'make build' runs)"),
    "pause": ("qcn.reaction_point.pause", "honour 802.3x PAUSE on interfaces: the MAC's side"),
    "reproduce": (
        "qcn.simulator.reproduce",
        "the seeds' figures on the simulator (make reproduce)",
    ),
    "ptf": ("qcn.ptf_tests.run", "the PTF tests of the pipeline on a BMv2 of their own"),
    "sink": ("qcn.topologies.sink", "count the frames that reach this host, by source"),
    "frames": ("qcn.topologies.rawframes", "send or capture raw frames on an interface"),
}


def run_tool(name: str, argv: Sequence[str]) -> int:
    """``qcn NAME ARGS``: the module's own main, its usage lines saying ``qcn NAME``."""
    module = importlib.import_module(TOOLS[name][0])
    saved, sys.argv[0] = sys.argv[0], f"qcn {name}"  # argparse's prog
    try:
        code: int = module.main(list(argv))
    finally:
        sys.argv[0] = saved
    return code


#: The commands whose command line their own module registers (its ``register(sub)``), in
#: the order `qcn --help` lists them.  `qcn NAME ...` imports only NAME's module: all of
#: them (the controller's and the daemon's bring gRPC, finsy, scapy and pyroute2) cost
#: every command most of a second (1.1 s for `qcn params`; a test suite runs qcn hundreds
#: of times).
COMMANDS: dict[str, str] = {
    "ctl": "qcn.controller.cli",
    "rp": "qcn.reaction_point.cli",
    "run": "qcn.cli.run",
    "sweep": "qcn.cli.sweep",
    "compare": "qcn.cli.compare",
    "tune": "qcn.cli.tune",
    "schemes": "qcn.cli.schemes",
    "net": "qcn.cli.net",
    "wireshark": "qcn.wireshark",
}


class _Version(argparse.Action):
    """``--version``: the installed package's (read when asked, not at every start)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"qcn-p4 {provenance.package_version()}")  # (stdout, as argparse's own)
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `qcn` command line; ``only``: with that command's own options alone (the others
    are named, not imported)."""
    parser = argparse.ArgumentParser(
        prog="qcn",
        description="IEEE 802.1Qau QCN on P4/BMv2: congestion point, controller, reaction point.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "params",
        help="show, check or write a QCN parameter file (TOML)",
        description="Print the parameters (spec defaults, a preset, or FILE merged over them).",
    )
    p.add_argument("file", nargs="?", type=Path, help="a TOML parameter file to read")
    p.add_argument(
        "--preset",
        default=RpScheme.QCN.value,
        choices=scheme_names(),
        help="the scheme whose parameter set FILE's values override (default: %(default)s)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true", help="only validate FILE")
    g.add_argument("--write", type=Path, metavar="OUT", help="write the result to OUT")
    p.set_defaults(func=_params_command)

    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(sub)
        else:  # (another command's: its module is not imported)
            sub.add_parser(name, add_help=False)
    for name, (_module, text) in TOOLS.items():
        # Listed here for --help; main() hands them their arguments before parsing.
        sub.add_parser(name, help=text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status is one of :class:`ExitCode` (docs/reliability.md).
    ``argv`` None: the process's own command line (``qcn``, ``python -m qcn``), which this
    process exits with once the command has ended (:func:`_ended`)."""
    own = argv is None
    try:
        # SIGTERM ends a command as Ctrl-C does: its cleanup runs (a sweep's Dask cluster, a
        # run's partial results) and it says so.  (A Ctrl-C that fell in a weakref's callback
        # was dropped: interrupts_never_lost.)
        with interrupts_never_lost(), sigterm_as_interrupt(ctrl_c=True):
            return _main(argv, own)
    except KeyboardInterrupt:  # (before the command ran: importing its modules, parsing)
        _ended(own)
        print("qcn: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def _ended(own: bool) -> None:
    """The command has ended (its outcome is decided): in a process of its own, a Ctrl-C or
    SIGTERM from now on changes nothing.  One pressed while the last line was said, or while
    Python and Dask closed down, printed a traceback or a second line, or ended the process
    by the signal instead of its status."""
    if own:
        ignore_stop_signals()


def _main(argv: Sequence[str] | None, own: bool = False) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in TOOLS:
        try:
            status = run_tool(argv[0], argv[1:])
        except QcnError as e:  # one a tool's main let through
            _ended(own)
            print(f"qcn: error: {e}", file=sys.stderr)
            return e.exit_code
        _ended(own)
        return status
    named = argv[0] if argv and (argv[0] in COMMANDS or argv[0] == "params") else None
    parser = build_parser(only=named)
    args = parser.parse_args(argv)
    provenance.set_command(["qcn", *argv])  # what every run's provenance.json records
    if getattr(args, "check", False) and not args.file:
        parser.error("--check needs a FILE")
    try:
        code: int = args.func(args)
    except QcnError as e:
        _ended(own)
        print(f"qcn: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        _ended(own)
        print("qcn: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        _ended(own)
        # The reader closed early (`qcn wireshark | head -1`): what it wanted it has.  Point
        # stdout at /dev/null so that Python's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    _ended(own)
    return code


if __name__ == "__main__":
    sys.exit(main())
