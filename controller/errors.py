"""The controller's error types, importable without its gRPC/P4Runtime dependencies."""


class ConfigError(ValueError):
    """An invalid network configuration; the message names the file and the field."""


class P4RuntimeError(RuntimeError):
    """A P4Runtime operation failed; the message says which and why."""


class NotPrimaryError(P4RuntimeError):
    """Another controller with a higher election id is primary for this switch."""


class Bmv2ThriftError(RuntimeError):
    """BMv2's Thrift API is unreachable or refused a call."""
