"""Which external tools this machine has, for tests that need them (one-line skip reasons)."""

from __future__ import annotations

import os
import shutil

import pytest

P4LANG_TOOLS = ("p4c", "simple_switch_grpc")


def requires_tools(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(
        bool(missing), reason=f"missing {', '.join(missing)} (p4lang toolchain: make deps)"
    )


def requires_p4lang() -> pytest.MarkDecorator:
    return requires_tools(*P4LANG_TOOLS)


def requires_root() -> pytest.MarkDecorator:
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, tc)")


LONG_TESTS = "QCN_LONG_TESTS"
"""Set (to anything) to run the long BMv2 scenario tests too (`make test-long`)."""


def long_test() -> pytest.MarkDecorator:
    """A BMv2 scenario run too long, or too dependent on the machine's own noise, for the
    default suite: `make test-long` runs it."""
    return pytest.mark.skipif(
        not os.environ.get(LONG_TESTS), reason=f"long BMv2 run: make test-long ({LONG_TESTS}=1)"
    )
