"""docs/your-network.md as a user follows it: its simulator commands, run as the page writes
them in a folder holding a tutorials-format pod (tests/data/pod-topo.json, as the page's
step 1 describes), work, and say what the page says they say."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_readme_examples import run_as_user

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "your-network.md"
POD = Path(__file__).resolve().parent / "data" / "pod-topo.json"


def page_commands() -> list[str]:
    """The `qcn` lines of the page's shell blocks, comments dropped."""
    out, shell = [], False
    for line in PAGE.read_text().splitlines():
        if line.startswith("```"):
            shell = line.strip() == "```sh"
            continue
        if shell and line.startswith("qcn "):
            out.append(line.split("  #")[0].strip())
    return out


@pytest.fixture(scope="module")
def users_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("your-network")
    shutil.copy(POD, where / "topology.json")
    return where


def test_the_page_has_its_commands() -> None:
    commands = page_commands()
    assert sum("--backend sim" in c for c in commands) == 2
    assert any(c.startswith("qcn net show topology.json") for c in commands)


@pytest.mark.parametrize(
    "command",
    [c for c in page_commands() if "--backend sim" in c or c.startswith("qcn net draw")]
    + [c for c in page_commands() if c.startswith("qcn net show")],
)
def test_the_pages_command_works_as_written(command: str, users_folder: Path) -> None:
    r = run_as_user(command, users_folder)
    assert r.returncode == 0, (command, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr
    assert "warning" not in r.stderr  # the pod's links take the parameters' line rate


def test_the_incast_run_names_the_congested_port_the_page_shows(users_folder: Path) -> None:
    (incast,) = [c for c in page_commands() if "incast" in c and "--backend sim" in c]
    out = re.search(r"--out (\S+)", incast)
    assert out is not None
    results = users_folder / out.group(1)
    if not (results / "summary.json").exists():
        r: subprocess.CompletedProcess[str] = run_as_user(incast, users_folder)
        assert r.returncode == 0, r.stderr
    summary = json.loads((results / "summary.json").read_text())
    ports = summary["ports"]
    busiest = max(ports, key=lambda p: ports[p]["queue_mean_pkts"])
    assert summary["headline_port"] == busiest == "s2:2"  # the incast sink h4's port
    assert f"the figures below are port {busiest}'s" in PAGE.read_text()
    for plot in ("queue.png", "ports.png", "rates.png"):
        assert (results / plot).stat().st_size > 0
