"""BMv2's Thrift API for what P4Runtime cannot do: queue rate and depth, register reads.

It uses the Python Thrift modules BMv2 installs (``bm_runtime``, ``sswitch_runtime``),
found where BMv2's install puts them when they are not already importable.
"""

from __future__ import annotations

import glob
import importlib
import logging
import sys
from types import ModuleType
from typing import Any

from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from controller.errors import Bmv2ThriftError

# The thrift library logs connection failures itself; Bmv2ThriftError says it once.
logging.getLogger("thrift").setLevel(logging.CRITICAL)

_SEARCH = (
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/usr/lib/python3/dist-packages",
)


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    top = name.split(".", maxsplit=1)[0]
    for pattern in _SEARCH:
        for path in sorted(glob.glob(pattern), reverse=True):
            if glob.glob(f"{path}/{top}/__init__.py") and path not in sys.path:
                sys.path.append(path)
                try:
                    return importlib.import_module(name)
                except ImportError:
                    continue
    raise Bmv2ThriftError(
        f"BMv2's Thrift Python module '{top}' is not installed (it comes with BMv2)"
    )


class Bmv2Thrift:
    """A Thrift connection to one simple_switch (``--thrift-port``)."""

    def __init__(self, port: int = 9090, host: str = "127.0.0.1", timeout_s: float = 5.0) -> None:
        standard = _import("bm_runtime.standard.Standard")
        sswitch = _import("sswitch_runtime.SimpleSwitch")
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(int(timeout_s * 1000))
        self._transport = TTransport.TBufferedTransport(sock)
        proto = TBinaryProtocol.TBinaryProtocol(self._transport)
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

    def register_read(self, name: str, index: int) -> int:
        return int(self.standard.bm_register_read(0, name, index))

    def register_reset(self, name: str) -> None:
        self.standard.bm_register_reset(0, name)

    def counter_reset(self, name: str) -> None:
        self.standard.bm_counter_reset_all(0, name)
