"""The `qcn` command line as a user runs it (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def qcn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qcn.cli", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_subcommands() -> None:
    r = qcn("--help")
    assert r.returncode == 0
    assert "params" in r.stdout


def test_params_prints_defaults_and_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    r = qcn("params", "--preset", "2-qcn", "--write", str(out))
    assert r.returncode == 0, r.stderr
    assert "timer_enabled = false" in out.read_text()
    r = qcn("params", str(out), "--check")
    assert r.returncode == 0
    assert "valid" in r.stdout


def test_bad_file_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("[cp]\np_base = 2\n")
    r = qcn("params", str(f))
    assert r.returncode == 2
    assert "cp.p_base: must be in [0, 1]" in r.stderr
    assert "Traceback" not in r.stderr
