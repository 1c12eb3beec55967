"""Errors of the topologies and experiments a user sees in one line (light to import)."""

from qcn.core.errors import QcnError


class ExperimentError(QcnError, RuntimeError):
    """An experiment could not be set up or run; the message says what and where."""


class Bmv2Error(ExperimentError):
    """The switch could not be started; the message carries its log's last lines."""
