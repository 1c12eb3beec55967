"""Which external tools this machine has, for tests that need them (one-line skip reasons)."""

from __future__ import annotations

import os
import shutil

import pytest

P4LANG_TOOLS = ("p4c", "simple_switch_grpc")


TOOLS_REASON = "(p4lang toolchain: make deps)"
ROOT_REASON = "needs root (namespaces, veths, tc)"


def requires_tools(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"missing {', '.join(missing)} {TOOLS_REASON}")


def requires_p4lang() -> pytest.MarkDecorator:
    return requires_tools(*P4LANG_TOOLS)


def requires_root() -> pytest.MarkDecorator:
    return pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_REASON)


ALONE = "alone"
"""The mark of a test that runs by itself, after the others (`make test` runs the rest two or
more at a time): one that needs root or the p4lang toolchain starts namespaces, switches and
real-time processes, and its timing is measured against the machine (docs/reliability.md,
"The suite's time")."""


def runs_alone(item: pytest.Item) -> bool:
    """Whether ``item`` needs root or the p4lang toolchain (one of the marks above), or is
    marked to run alone in its own right."""
    if item.get_closest_marker(ALONE) is not None:
        return True
    reasons = (str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif"))
    return any(r == ROOT_REASON or r.endswith(TOOLS_REASON) for r in reasons)


LONG_TESTS = "QCN_LONG_TESTS"
"""Set (to anything) to run the long BMv2 scenario tests too (`make test-long`)."""


def long_test() -> pytest.MarkDecorator:
    """A BMv2 scenario run too long, or too dependent on the machine's own noise, for the
    default suite: `make test-long` runs it."""
    return pytest.mark.skipif(
        not os.environ.get(LONG_TESTS), reason=f"long BMv2 run: make test-long ({LONG_TESTS}=1)"
    )
