"""The PTF suite (ptf_tests/) on a real simple_switch_grpc, as `make ptf` runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qcn.core.errors import ExitCode
from qcn.ptf_tests import run
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


def test_without_the_test_cases_it_says_to_run_from_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wheel has the runner but not the test cases (docs/layout.md): `qcn ptf` there
    exits 3 with one line, before it looks for the toolchain or root."""
    monkeypatch.setattr(run, "TEST_DIR", tmp_path)
    assert run.main([]) == ExitCode.TOOL_MISSING
    assert capsys.readouterr().err == (
        "qcn: error: the PTF tests cannot run: their test cases (ptf_tests/test_*.py) are not "
        "installed; run qcn ptf from a checkout (docs/layout.md)\n"
    )
