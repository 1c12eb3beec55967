"""Which external tools this machine has, for tests that need them (one-line skip reasons)."""

from __future__ import annotations

import os
import shutil

import pytest

P4LANG_TOOLS = ("p4c", "simple_switch_grpc")


def missing_p4lang() -> list[str]:
    return [t for t in P4LANG_TOOLS if shutil.which(t) is None]


def requires_p4lang() -> pytest.MarkDecorator:
    missing = missing_p4lang()
    return pytest.mark.skipif(
        bool(missing), reason=f"p4lang toolchain missing: {', '.join(missing)} (make deps)"
    )


def requires_root() -> pytest.MarkDecorator:
    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, tc)")
