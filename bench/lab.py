"""A throwaway network namespace with one BMv2 and veth-attached ports, for benchmarks.

The benchmark process moves itself into the namespace (so gRPC on the switch's loopback
is reachable) and the namespace, veths and switch are removed on exit, whatever happens.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC, Bmv2Config, Bmv2Process
from qcn.topologies.netns import entered_namespace

BENCH_DIR = Path(__file__).resolve().parent


@contextmanager
def namespace(num_ports: int) -> Iterator[str]:
    """Enter a fresh namespace with veth pairs swN <-> hN (N < num_ports), all up."""
    with entered_namespace(f"qcnbench{os.getpid()}", num_ports, "h") as name:
        yield name


@contextmanager
def switch(
    num_ports: int, workdir: Path, executable: str = SIMPLE_SWITCH_GRPC, start_timeout_s: float = 20
) -> Iterator[Bmv2Process]:
    sw = Bmv2Process(
        Bmv2Config(
            ports={i: f"sw{i}" for i in range(num_ports)},
            log_file=workdir / "sw.log",
            executable=executable,
        )
    )
    sw.start(start_timeout_s)
    try:
        yield sw
    finally:
        sw.stop()
