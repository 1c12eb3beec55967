"""Types of the compiled core (simulator/_core.cpp); see simulator/compiled.py."""

from collections.abc import Callable
from typing import Any

source_sha256: str

class Core:
    events: int
    drops: int
    cnms: int
    now: float
    extra: list[tuple[str, int]]
    def configure(self, config: dict[str, Any]) -> None: ...
    def add_port(
        self,
        rate_bps: float,
        buffer_pkts: int,
        delay_s: float,
        has_cp: bool,
        arrival_cp: bool,
        cp_state: tuple[Any, ...],
        reflect_state: tuple[Any, ...],
        paced: bool,
        service_bits: int,
    ) -> None: ...
    def add_input(
        self, partition_bytes: int, delay_s: float, quantum_s: float, source: int, upstream: int
    ) -> None: ...
    def add_source(
        self,
        has_rules: bool,
        offered_bps: float,
        line_rate_bps: float,
        slot_s: float,
        quantum_s: float,
        bernoulli: bool,
        onoff: bool,
        load: float,
        route: int,
    ) -> None: ...
    def add_route(
        self,
        source: int,
        ports: list[int],
        inputs: list[int],
        cnm_delay_s: list[float],
        ack_after_depart_s: float,
    ) -> None: ...
    def set_arrivals(
        self,
        start: list[float],
        source: list[int],
        destination: list[int],
        size: list[int],
        frames: list[int],
        last: list[int],
        route: list[int],
    ) -> None: ...
    def finish_setup(self) -> None: ...
    def run(self, progress: Callable[[float, float], None] | None = None) -> bool: ...
    def samples(self) -> dict[str, Any]: ...
    def port_counts(self) -> list[tuple[int, int, int, int, int, int]]: ...
    def input_pauses(self) -> list[int]: ...
    def sent_frames(self) -> list[int]: ...
    def flow_results(self) -> tuple[list[float], list[float], list[int]]: ...
    def set_port_cp(self, port: int, cfg: Any) -> None: ...
    def live_row(
        self,
    ) -> tuple[
        float,
        tuple[int, ...],
        tuple[int, ...],
        int,
        tuple[float, ...],
        tuple[float, ...],
        tuple[int, ...],
    ]: ...

Decision = tuple[int, int, int, int, int, bool, bool]
Tag = tuple[bool, int, int, int, int]

class CpModel:
    def __init__(
        self, config: Any, rand_state: tuple[Any, ...], reflect_state: tuple[Any, ...]
    ) -> None: ...
    def sample(self, q: int, frame_bytes: int) -> Decision | None: ...
    def on_frame(self, q: int, frame_bytes: int) -> Decision: ...
    def three_point(
        self, q: int, frame_bytes: int, tag: Tag, cpid: int
    ) -> tuple[Decision | None, Tag]: ...
    def end_reflection(self, tag: Tag, cpid: int) -> Tag | None: ...
    def state(self) -> dict[str, int]: ...

class RpModel:
    def __init__(self, params: dict[str, Any], uniform_state: tuple[Any, ...]) -> None: ...
    def on_cnm(self, qntz_fb: int, positive: bool, now: float) -> None: ...
    def on_transmit(self, nbytes: int, frames: int) -> None: ...
    def on_timer(self, now: float) -> None: ...
    def advance(self, now: float) -> int: ...
    def state(self) -> dict[str, Any]: ...

def bare_loop(events: int, width: int = 12) -> float: ...
def random_stream(state: tuple[Any, ...], n: int) -> list[float]: ...
def randint_stream(state: tuple[Any, ...], lo: int, hi: int, n: int) -> list[int]: ...
def expovariate_stream(state: tuple[Any, ...], lambd: float, n: int) -> list[float]: ...
