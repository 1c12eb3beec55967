"""Fixtures shared by the test modules (their helpers are in tests/kit.py)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from qcn.topologies.calibration import CACHE_DIR_VARIABLE
from qcn.topologies.netns import VethEnd, add_veth, namespaces
from tests.kit import DASK, Cluster, Link, free_port
from tests.toolchain import ALONE, runs_alone


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that run alone (tests.toolchain.ALONE): `make test` selects by it."""
    for item in items:
        if runs_alone(item):
            item.add_marker(ALONE)


@pytest.fixture(scope="session", autouse=True)
def calibration_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite keeps its own BMv2 calibration (measured once, by the first BMv2 run that
    needs it), not the user's: every run the tests start, and their children, use it."""
    was = os.environ.get(CACHE_DIR_VARIABLE)
    os.environ[CACHE_DIR_VARIABLE] = str(tmp_path_factory.mktemp("calibration"))
    yield
    if was is None:
        del os.environ[CACHE_DIR_VARIABLE]
    else:
        os.environ[CACHE_DIR_VARIABLE] = was


@pytest.fixture
def link() -> Iterator[Link]:
    tag = os.getpid() % 100000
    lk = Link(f"pzh{tag}", f"pzp{tag}")
    with namespaces(lk.host_ns, lk.peer_ns):
        add_veth(VethEnd(lk.host_ns, lk.host_if), VethEnd(lk.peer_ns, lk.peer_if))
        yield lk


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    port = free_port()
    scheduler = subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    c = Cluster(f"tcp://127.0.0.1:{port}")
    try:
        for _ in range(2):
            c.start_worker(tmp_path)
        c.wait_for_workers(2)
        yield c
    finally:
        for p in [*c.workers, scheduler]:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in [*c.workers, scheduler]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
