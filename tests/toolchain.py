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
