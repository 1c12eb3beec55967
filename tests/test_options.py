"""The options the front door's commands share are one definition (qcn/cli/options.py): the
same option reads the same in every command, and its check speaks in the command's own
error class with the same words."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from qcn.cli.main import build_parser
from qcn.core.errors import QcnError
from qcn.core.publish import RESULTS_MARKER
from qcn.lab.compare import CompareError
from qcn.lab.inputs import check_count, make_results_dir
from qcn.lab.schemes import SchemesError
from qcn.lab.sweep import SweepError

SHARED = ("--set", "--out")
COMMANDS = ("run", "compare", "sweep", "schemes")


def option(command: str, flag: str) -> argparse.Action:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands: dict[str, argparse.ArgumentParser] = sub.choices
    return next(a for a in commands[command]._actions if flag in a.option_strings)


@pytest.mark.parametrize("flag", SHARED)
def test_a_shared_option_is_the_same_option_everywhere(flag: str) -> None:
    actions = [option(c, flag) for c in COMMANDS]
    assert {(type(a), a.metavar, a.nargs, a.type) for a in actions} == {
        (type(actions[0]), actions[0].metavar, actions[0].nargs, actions[0].type)
    }


@pytest.mark.parametrize(
    ("flag", "error"),
    [("--runs", CompareError), ("--runs", SchemesError), ("--seeds", SweepError)],
)
def test_a_counts_check_speaks_in_the_commands_error_class(
    flag: str, error: type[QcnError]
) -> None:
    with pytest.raises(error, match=rf"^{flag} must be at least 1 \(got 0\)$"):
        check_count(flag, 0, error)
    check_count(flag, 1, error)


def test_compare_and_schemes_write_into_their_own_folders_only(tmp_path: Path) -> None:
    """They wrote into any --out: a user's folder, a run's, a sweep's."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(CompareError, match=r"holds files that are not qcn's results \(notes.txt\)"):
        make_results_dir(mine, "compare", CompareError)
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "sweep.json").write_text("{}")  # (a sweep's, made before the marker)
    with pytest.raises(SchemesError, match=r"holds a sweep \(qcn sweep\), not a comparison of"):
        make_results_dir(tmp_path / "sweep", "schemes", SchemesError)
    assert sorted(p.name for p in tmp_path.rglob("*")) == [
        "mine",
        "notes.txt",
        "sweep",
        "sweep.json",
    ]
    make_results_dir(tmp_path / "new", "compare", CompareError)
    make_results_dir(tmp_path / "new", "compare", CompareError)  # (its own: again)
    assert (tmp_path / "new" / RESULTS_MARKER).read_text() == "compare\n"
