"""`qcn net down`'s view of the network's process (qcn.topologies.session), without Mininet."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from qcn.topologies.session import _alive


def test_an_exited_process_not_yet_reaped_is_not_alive() -> None:
    """`qcn net up` started by a script that reaps it only after `qcn net down` returns is
    a zombie once it has stopped: down must see it stopped, not wait 30 s and kill it."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while _alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child.pid)
        assert child.poll() == 0  # (reaped only now)
    finally:
        child.wait()
    assert _alive(os.getpid())
