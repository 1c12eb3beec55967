"""A P4Runtime connection to one switch, as primary controller, usable from plain code.

finsy does the P4Runtime work (arbitration, pipeline push with VERIFY_AND_COMMIT, entity
encoding); this wraps its asyncio ``Switch`` in a background event loop so the CLI, the PTF
tests and the topology runner can call it synchronously, with a deadline on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

import finsy

from qcn.controller.errors import NotPrimaryError, P4RuntimeError

T = TypeVar("T")

# finsy logs every gRPC hiccup and that BMv2 has no gNMI; our errors say what matters.
logging.getLogger("finsy").setLevel(logging.CRITICAL)

_loop_lock = threading.Lock()


@functools.cache
def _start_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="p4runtime", daemon=True).start()
    return loop


def _event_loop() -> asyncio.AbstractEventLoop:
    """The process's one background event loop for gRPC.

    grpc.aio binds its completion-queue poller to the first loop it runs on; a loop per
    connection, closed afterwards, makes later connections in the same process log
    "Event loop is closed" tracebacks.  So every connection shares one daemon loop.
    """
    with _loop_lock:
        return _start_loop()


class P4RuntimeSwitch:
    """One switch, connected as primary, with its pipeline pushed."""

    def __init__(
        self,
        address: str,
        p4info: Path,
        bmv2_json: Path,
        *,
        device_id: int = 1,
        election_id: int = 10,
        name: str = "sw",
        timeout_s: float = 10.0,
    ) -> None:
        for f in (p4info, bmv2_json):
            if not f.exists():
                raise P4RuntimeError(f"{f} not found: build the pipeline first ('make build')")
        try:
            schema = finsy.P4Schema(p4info)
            tables = schema.tables
        except Exception as e:  # protobuf's text parser raises its own kinds
            raise P4RuntimeError(f"{p4info}: not a P4Info file ({type(e).__name__}: {e})") from None
        if not len(tables):
            raise P4RuntimeError(f"{p4info}: a P4Info without tables, not this pipeline's")
        self.address = address
        self.timeout_s = timeout_s
        self._options = finsy.SwitchOptions(
            p4info=p4info,
            p4blob=bmv2_json,
            device_id=device_id,
            initial_election_id=election_id,
        )
        self._name = name
        self._loop = _event_loop()
        self._switch: finsy.Switch | None = None

    # -- life cycle --------------------------------------------------------------------------

    def open(
        self, *, require_primary: bool = True, take_over_below: int | None = None
    ) -> P4RuntimeSwitch:
        """Connect, win arbitration and push the pipeline if it differs.

        With ``require_primary=False`` a backup connection is accepted (reads only).  With
        ``take_over_below``, a primary whose election id is below it is outbid: the
        connection arbitrates again with the primary's id + 1 (P4Runtime: the highest
        election id is primary; the one outbid becomes a backup and is primary again once
        this connection closes).  It is how a one-shot `qcn ctl set` writes beside a
        controller of the same network that holds the switch (docs/controller.md).
        """
        try:
            self._switch = self._call(self._open(), what="connect")
            primary = self._switch.primary_id
            outbid = take_over_below is not None and primary < take_over_below
            if outbid and not self._switch.is_primary:
                self.close()
                self._options = self._options(initial_election_id=primary + 1)
                self._switch = self._call(self._open(), what="connect")
        except BaseException:
            self.close()
            raise
        if require_primary and not self._switch.is_primary:
            primary = self._switch.primary_id
            self.close()
            raise NotPrimaryError(
                f"{self.address}: not primary (election id {self._options.initial_election_id}"
                f" is not above the primary's {primary}); another controller owns this switch"
            )
        return self

    async def _open(self) -> finsy.Switch:
        sw = finsy.Switch(self._name, self.address, self._options)
        await sw.__aenter__()
        return sw

    def close(self) -> None:
        if self._switch is not None:
            sw, self._switch = self._switch, None
            with contextlib.suppress(P4RuntimeError):
                self._call(sw.__aexit__(None, None, None), what="disconnect")

    def __enter__(self) -> P4RuntimeSwitch:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- operations --------------------------------------------------------------------------

    @property
    def switch(self) -> finsy.Switch:
        if self._switch is None:
            raise P4RuntimeError(f"{self.address}: not connected")
        return self._switch

    def insert(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.insert(list(entities)), what="insert")

    def modify(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.modify(list(entities)), what="modify")

    def delete(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.delete(list(entities)), what="delete")

    def read(self, entity: Any) -> list[Any]:
        # finsy's overloads declare read() as a coroutine; it is an async generator.
        reader: Any = self.switch.read

        async def collect() -> list[Any]:
            return [e async for e in reader(entity)]

        return self._call(collect(), what="read")

    def _call(self, coro: Coroutine[Any, Any, T], *, what: str) -> T:
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, self.timeout_s), self._loop)
        try:
            return fut.result(self.timeout_s + 1)
        except TimeoutError:
            fut.cancel()
            raise P4RuntimeError(
                f"{self.address}: {what} timed out after {self.timeout_s:g} s "
                "(is simple_switch_grpc running with this gRPC address and device id?)"
            ) from None
        except finsy.P4ClientError as e:
            raise P4RuntimeError(f"{self.address}: {what} failed: {e}") from None
        except Exception as e:  # finsy asserts when its channel is down (switch gone)
            raise P4RuntimeError(
                f"{self.address}: {what} failed: {type(e).__name__} {e}".rstrip()
            ) from None
