"""The testbed's own bookkeeping that needs no network (topologies/testbed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topologies import testbed


@pytest.fixture
def sysctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """net.core.wmem_default, as a file of our own; the saved copy beside it."""
    default = tmp_path / "wmem_default"
    default.write_text("212992\n")
    monkeypatch.setattr(testbed, "WMEM_DEFAULT", default)
    monkeypatch.setattr(testbed, "WMEM_SAVED", tmp_path / "run" / "wmem_default")
    return default


def test_a_raised_send_buffer_default_is_put_back(sysctl: Path) -> None:
    testbed.raise_wmem_default()
    assert sysctl.read_text() == str(testbed.SWITCH_SEND_BUFFER_BYTES)
    assert testbed.restore_wmem_default() is True
    assert sysctl.read_text() == "212992"
    assert not testbed.WMEM_SAVED.exists()
    assert testbed.restore_wmem_default() is False  # nothing raised: nothing touched
    assert sysctl.read_text() == "212992"


def test_a_run_killed_while_it_was_raised_leaves_what_the_next_run_puts_back(
    sysctl: Path,
) -> None:
    testbed.raise_wmem_default()
    # kill -9 here: the saved value outlives the process (/run, until reboot).
    assert testbed.WMEM_SAVED.read_text().strip() == "212992"
    assert testbed.restore_wmem_default() is True
    assert sysctl.read_text() == "212992"
