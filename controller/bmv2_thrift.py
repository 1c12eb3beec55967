"""BMv2's Thrift API for what P4Runtime cannot do: queue rate and depth, register reads.

It uses the Python Thrift modules BMv2 installs (``bm_runtime``, ``sswitch_runtime``);
``make venv`` makes the folder BMv2 puts them in importable (a ``.pth`` file).
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType
from typing import Any

from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from qcn.controller.errors import Bmv2ThriftError
from qcn.core.pipeline import BMV2_THRIFT_PORT, REGISTER_OCCUPANCY, split_occupancy

# The thrift library logs connection failures itself; Bmv2ThriftError says it once.
logging.getLogger("thrift").setLevel(logging.CRITICAL)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        top = name.split(".", maxsplit=1)[0]
        raise Bmv2ThriftError(
            f"BMv2's Thrift Python module '{top}' is not importable: it comes with BMv2; "
            "after installing BMv2, run 'make venv' to make it importable"
        ) from None


class Bmv2Thrift:
    """A Thrift connection to one simple_switch (``--thrift-port``)."""

    def __init__(
        self, port: int = BMV2_THRIFT_PORT, host: str = "127.0.0.1", timeout_s: float = 5.0
    ) -> None:
        standard = _import("bm_runtime.standard.Standard")
        sswitch = _import("sswitch_runtime.SimpleSwitch")
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(timeout_s * 1000))
        self._transport = TTransport.TBufferedTransport(sock)
        # The C codec where Thrift has it: a read of the occupancy register's 512 cells
        # took 0.43 ms of the runner's CPU decoded in Python, 0.11 ms in C, and the runner
        # reads every switch each 10 ms (docs/bmv2.md, "The runner's samples").
        proto = TBinaryProtocol.TBinaryProtocolAccelerated(self._transport)
        try:
            self._transport.open()
        except Exception as e:
            raise Bmv2ThriftError(f"cannot reach BMv2's Thrift API at {host}:{port}: {e}") from e
        self.standard: Any = standard.Client(
            TMultiplexedProtocol.TMultiplexedProtocol(proto, "standard")
        )
        self.sswitch: Any = sswitch.Client(
            TMultiplexedProtocol.TMultiplexedProtocol(proto, "simple_switch")
        )

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Bmv2Thrift:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_queue_rate(self, rate_pps: int, port: int | None = None) -> None:
        """Egress queue service rate in packets/s (0: unlimited); all ports if None."""
        if port is None:
            self.sswitch.set_all_egress_queue_rates(rate_pps)
        else:
            self.sswitch.set_egress_queue_rate(port, rate_pps)

    def set_queue_depth(self, depth_pkts: int, port: int | None = None) -> None:
        """Egress queue capacity in packets; all ports if None."""
        if port is None:
            self.sswitch.set_all_egress_queue_depths(depth_pkts)
        else:
            self.sswitch.set_egress_queue_depth(port, depth_pkts)

    def set_parse_vset(self, name: str, values: list[bytes]) -> None:
        """Make parser value set ``name`` hold exactly ``values`` (PI writes none)."""
        if sorted(bytes(v) for v in self.standard.bm_parse_vset_get(0, name)) == sorted(values):
            return
        self.standard.bm_parse_vset_clear(0, name)
        for value in values:
            self.standard.bm_parse_vset_add(0, name, value)

    def register_read(self, name: str, index: int) -> int:
        return int(self.standard.bm_register_read(0, name, index))

    def register_write(self, name: str, index: int, value: int) -> None:
        self.standard.bm_register_write(0, name, index, value)

    def occupancy(self, port: int) -> tuple[int, int]:
        """The pipeline's own count of a CP port's queue: (frames, bytes)."""
        return split_occupancy(self.register_read(REGISTER_OCCUPANCY, port))

    def occupancies(self, ports: list[int]) -> list[tuple[int, int]]:
        """:meth:`occupancy` of each of ``ports``, in one call where several are asked
        (the whole register array comes back at once)."""
        if len(ports) <= 2:
            return [self.occupancy(p) for p in ports]
        cells = self.standard.bm_register_read_all(0, REGISTER_OCCUPANCY)
        return [split_occupancy(int(cells[p])) for p in ports]

    def ask_occupancies(self) -> None:
        """Ask for every port's :meth:`occupancy` without waiting for the answer
        (:meth:`asked_occupancies` takes it): a runner that asks every switch before it
        waits for any waits for the slowest, not for all of them in turn."""
        self.standard.send_bm_register_read_all(0, REGISTER_OCCUPANCY)

    def asked_occupancies(self, ports: list[int]) -> list[tuple[int, int]]:
        """The answer to :meth:`ask_occupancies`, for ``ports``."""
        cells = self.standard.recv_bm_register_read_all()
        return [split_occupancy(int(cells[p])) for p in ports]

    def register_reset(self, name: str) -> None:
        self.standard.bm_register_reset(0, name)

    def counter_reset(self, name: str) -> None:
        self.standard.bm_counter_reset_all(0, name)
