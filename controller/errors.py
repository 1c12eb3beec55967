"""The controller's error types, importable without its gRPC/P4Runtime dependencies."""

from qcn.core.errors import QcnError


class ConfigError(QcnError, ValueError):
    """An invalid network configuration; the message names the file and the field."""


class P4RuntimeError(QcnError, RuntimeError):
    """A P4Runtime operation failed; the message says which and why."""


class NotPrimaryError(P4RuntimeError):
    """Another controller with a higher election id is primary for this switch."""


class Bmv2ThriftError(QcnError, RuntimeError):
    """BMv2's Thrift API is unreachable or refused a call."""
