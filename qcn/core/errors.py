"""The one base of every error a user is told about in one line (``qcn: error: ...``), and
the exit statuses of every command (docs/reliability.md, "Exit codes").

Each layer derives its own errors from :class:`QcnError`, so the command line catches this
base once and anything else is a bug that deserves its traceback.  An error's class says
which exit status it ends the command with.
"""

from __future__ import annotations

import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """What a ``qcn`` command's exit status says, the same for every command."""

    OK = 0
    """It did what was asked, and what it checked held."""
    FAILED = 1
    """It ran, and what it ran failed its own check: tests failed, a build was refused, a
    measurement missed its target or was cut short by a fault, a file it read was skipped."""
    USAGE = 2
    """It did not run as asked: a bad argument or input file, or an environment the user
    can put right (not root, no network up, an interface that does not exist).  argparse's
    own errors exit 2 too."""
    TOOL_MISSING = 3
    """A program it needs is not installed (p4c, simple_switch_grpc, Mininet, ptf)."""
    INTERRUPTED = 130
    """Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)."""


class QcnError(Exception):
    """A mistake in the user's input or environment; the message says what and where."""

    exit_code: ExitCode = ExitCode.USAGE


class ToolMissingError(QcnError):
    """A program the command needs is not installed; the message says which and how to get
    it."""

    exit_code = ExitCode.TOOL_MISSING


class CheckFailedError(QcnError):
    """The command ran, and what it ran failed its own check."""

    exit_code = ExitCode.FAILED


def report(error: QcnError) -> int:
    """Print ``error`` as the one line a user sees, and return its exit status: for a tool
    whose ``main`` runs both as ``qcn NAME`` and as ``python -m MODULE``."""
    print(f"qcn: error: {error}", file=sys.stderr)
    return int(error.exit_code)
