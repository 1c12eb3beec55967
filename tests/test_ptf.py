"""The PTF suite (ptf_tests/) on a real simple_switch_grpc, as `make ptf` runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.toolchain import requires_p4lang, requires_root


@requires_p4lang()
@requires_root()
def test_ptf_suite_passes() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "qcn.ptf_tests.run"],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert r.returncode == 0, f"{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
    assert "FAILED" not in r.stderr
