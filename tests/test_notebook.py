"""The shipped notebook (docs/notebooks/quickstart.md, Jupytext's Markdown form) runs from
its first cell to its last on the simulator, in its own folder, within a minute, and shows
what it says it shows: every plot as an image, every table."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jupytext  # type: ignore[import-untyped]
import nbclient
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "notebooks" / "quickstart.md"
BUDGET_S = 60.0


KERNEL = "qcn-test-python"


@pytest.fixture
def this_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel that is this interpreter (its venv's qcn, pandas, ipykernel): a machine's
    own ``python3`` kernel, if it has one, may be another Python's."""
    spec = tmp_path / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "qcn's Python", "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return KERNEL


def test_the_notebook_runs_and_shows_its_plots_and_tables(this_python: str) -> None:
    nb = jupytext.read(NOTEBOOK)
    began = time.monotonic()
    try:
        nbclient.NotebookClient(
            nb, timeout=int(BUDGET_S), kernel_name=this_python,
            resources={"metadata": {"path": str(NOTEBOOK.parent)}},
        ).execute()  # fmt: skip
    except nbclient.exceptions.CellExecutionError as e:
        pytest.fail(f"{NOTEBOOK.name}: a cell failed:\n{e}")
    took = time.monotonic() - began
    assert took < BUDGET_S, f"{NOTEBOOK.name} took {took:.0f} s"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    errors = [out for cell in code for out in cell.outputs if out.output_type == "error"]
    assert errors == []

    def shows(kind: str) -> list[str]:
        return [cell.source.splitlines()[0] for cell in code
                if any(kind in out.get("data", {}) for out in cell.outputs)]  # fmt: skip

    # r.plot(), net.draw(), and last the notebook's own pyplot figure after its runs: the
    # inline backend still draws (the project's Agg was put back).
    assert shows("image/png") == ["r.plot()", "net.draw()", code[-1].source.splitlines()[0]]
    assert len(shows("text/html")) == 3  # (the figures of both settings, the ports)
