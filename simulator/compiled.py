"""The simulator on its compiled event core (``qcn.simulator._core``, docs/simulator.md).

:class:`CompiledSimulation` is :class:`qcn.simulator.engine.Simulation` with the event loop in
C++: the Python engine's own constructor builds the run (its topology, routes, inputs,
sources, the CP and reflection streams, the flows drawn), the core takes that state over
and runs the same events in the same order, drawing the same random numbers, and the Python
engine's own code makes the trace of what the core measured (``_finish_trace``,
``partial_trace``).  The core re-implements the CP (:mod:`qcn.core.cp_model`, DCQCN's ECN
marking included) and the RP rules of the five built-in schemes
(:mod:`qcn.reaction_point.rules`); tests/test_sim_core.py
holds both to those definitions, field by field, over random event sequences.

:func:`make_simulation` chooses the engine: ``QCN_SIM_ENGINE=python`` the Python engine
(the reference), ``compiled`` the core (an error where it cannot run), unset or ``auto``
the core where it is built and knows the scenario's scheme, else the Python engine, with
one line on stderr saying why.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import struct
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, Unpack

from qcn.core import patterns as traffic_patterns
from qcn.core.cp_model import CpPortConfig
from qcn.core.errors import QcnError
from qcn.core.flows import FlowRecord, flow_frames, ideal_fct_s
from qcn.core.live import LiveRow
from qcn.core.params import CpSignal, DcqcnParams, EcmParams, RpParams
from qcn.core.scenario import Scenario, ScenarioError
from qcn.core.trace import Trace
from qcn.reaction_point.rules import (
    DcqcnRules,
    EcmRules,
    QcnRules,
    TimerQcnRules,
    TwoQcnRules,
    rules_class,
)
from qcn.simulator.engine import (
    Route,
    Simulation,
    SimulationArgs,
    bernoulli_gap,
    ecn_stream_name,
    pattern_refusal,
    port_stream_names,
)

CORE_SOURCE = Path(__file__).with_name("_core.cpp")


def _stale(core: ModuleType) -> str | None:
    """Why ``core`` is not the build of the ``_core.cpp`` beside it (None: it is, or there is
    no source to compare, as in an installed wheel): a source changed and not rebuilt, or
    a build that failed and left the old one, must not run in the source's name."""
    try:
        source = hashlib.sha256(CORE_SOURCE.read_bytes()).hexdigest()
    except OSError:
        return None
    if getattr(core, "source_sha256", "") == source:
        return None
    return "it was built from another simulator/_core.cpp ('make venv' builds it again)"


ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class _ElfLayout:
    """Where an ELF file of one class keeps what says how long it must be."""

    header_bytes: int
    word: str  # struct format of an address or offset
    tables_at: int  # e_phoff, then e_shoff
    counts_at: int  # e_phentsize, e_phnum, e_shentsize, e_shnum
    segment_at: tuple[int, int]  # a program header's p_offset and p_filesz


#: By EI_CLASS: 1, 32-bit; 2, 64-bit (the System V ABI's ELF header and program header).
_ELF = {1: _ElfLayout(52, "I", 28, 42, (4, 16)), 2: _ElfLayout(64, "Q", 32, 54, (8, 32))}


def elf_damage(path: Path) -> str | None:
    """Why the shared object ``path`` cannot be loaded whole (None: every table and segment
    its headers name lies within the file).  A truncated module, as an interrupted build or
    a full disk leaves, is mapped past its end by the dynamic loader and kills the process
    with SIGBUS (exit status 135, no message) at import; this reads ~1 KB and takes
    microseconds, against a child process's ~100 ms to try the import (docs/reliability.md)."""
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(64)
            elf = _ELF.get(head[4]) if head[:4] == ELF_MAGIC and len(head) > 5 else None
            if elf is None or len(head) < elf.header_bytes:
                return f"not a shared object ({size} bytes)"
            order = "<" if head[5] == 1 else ">"
            phoff, shoff = struct.unpack_from(order + elf.word * 2, head, elf.tables_at)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(
                order + "HHHH", head, elf.counts_at
            )
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if phnum and phentsize < elf.segment_at[1] + struct.calcsize(elf.word):
        return f"not a shared object (program headers of {phentsize} bytes)"
    ends = [phoff + phentsize * phnum, shoff + shentsize * shnum]
    for i in range(len(table) // phentsize if phentsize else 0):  # each segment's bytes
        offset, filesz = (
            struct.unpack_from(order + elf.word, table, i * phentsize + at)[0]
            for at in elf.segment_at
        )
        ends.append(offset + filesz)
    if max(ends) > size:
        return f"truncated: {size} bytes where its headers need {max(ends)}"
    return None


def _load_core() -> tuple[ModuleType | None, str | None]:
    """The compiled core and None, or None and why it cannot run: not built, damaged on
    disk (checked before the loader maps it), or stale."""
    try:
        spec = importlib.util.find_spec("qcn.simulator._core")
    except (ImportError, ValueError) as e:
        return None, f"{e}"
    if spec is None or spec.origin is None:
        return None, "No module named 'qcn.simulator._core'"
    damage = elf_damage(Path(spec.origin))
    if damage is not None:
        return None, f"{spec.origin} is damaged, {damage}"
    try:
        from qcn.simulator import _core as built  # noqa: PLC0415
    except ImportError as e:  # (no compiler, no Python headers: the Python engine runs)
        return None, f"{e}"
    stale = _stale(built)
    return (built, None) if stale is None else (None, stale)


_core, CORE_MISSING = _load_core()

ENGINE_ENV = "QCN_SIM_ENGINE"
ENGINES = ("auto", "compiled", "python")

#: The schemes whose rules the core re-implements: each class exactly (a subclass a user
#: adds may change any rule, so it runs on the Python engine).
CORE_RULES = (QcnRules, TwoQcnRules, TimerQcnRules, EcmRules, DcqcnRules)


class Runnable(Protocol):
    """What a caller of either engine uses."""

    def run(self) -> Trace: ...

    def partial_trace(self) -> Trace: ...

    def live_row(self) -> LiveRow: ...

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None: ...


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(message, file=sys.stderr, flush=True)


def core_status() -> str:
    """One line: whether the compiled core is here."""
    if CORE_MISSING is None:
        return "simulator: compiled core built (simulator/_core.cpp)"
    return (
        f"simulator: no compiled core ({CORE_MISSING}): the Python engine runs, about 20x "
        "slower ('make venv' builds the core with g++ and python3-dev; docs/simulator.md)"
    )


def patterns() -> tuple[str, ...]:
    """The traffic patterns the core generates (simulator/_core.cpp), as qcn.core.patterns
    declares them; a pattern the Python engine generates and the core does not runs there
    (``auto``, said in one line) or is refused (``compiled``)."""
    return traffic_patterns.generated_by(traffic_patterns.COMPILED_CORE)


def unsupported(scenario: Scenario) -> str | None:
    """Why the core cannot run ``scenario`` (None: it can)."""
    if scenario.workload.pattern not in patterns():
        return f"the compiled core has no traffic pattern {scenario.workload.pattern!r}"
    rp = scenario.params.rp
    try:
        kind = rules_class(rp.scheme)
    except ValueError as e:
        return str(e)
    if kind not in CORE_RULES:
        return f"the scheme {rp.scheme!r} has rules of its own ({kind.__name__})"
    return None


class EngineError(QcnError):
    """``QCN_SIM_ENGINE`` names no engine, or one that cannot run here (one line)."""


def engine_choice() -> str:
    """``QCN_SIM_ENGINE``'s choice; an EngineError if it names none of :data:`ENGINES`."""
    choice = os.environ.get(ENGINE_ENV, "auto").strip().lower() or "auto"
    if choice not in ENGINES:
        raise EngineError(f"{ENGINE_ENV}={choice!r}: expected one of {', '.join(ENGINES)}")
    return choice


def check_engine() -> None:
    """Refuse, before a command starts any work, an engine choice that cannot run: no such
    engine, or ``compiled`` with no usable core (an EngineError, one line)."""
    if engine_choice() == "compiled" and CORE_MISSING is not None:
        raise EngineError(f"{ENGINE_ENV}=compiled: {core_unusable()}")


def engine_for(scenario: Scenario, choice: str | None = None) -> tuple[str, str | None]:
    """The engine that runs ``scenario`` under ``choice`` (default: ``QCN_SIM_ENGINE``,
    else ``auto``): "compiled" or "python", and why the core does not (None where it does,
    or where the Python engine was chosen).  An EngineError, one line, where ``compiled``
    was chosen and cannot run it."""
    choice = choice or engine_choice()
    if choice == "python":
        return "python", None
    why = core_status() if CORE_MISSING is not None else unsupported(scenario)
    if why is None:
        return "compiled", None
    if choice == "compiled":
        cannot = core_unusable() if CORE_MISSING is not None else why
        raise EngineError(f"{ENGINE_ENV}=compiled: {cannot}")
    return "python", why


def check_runs(scenario: Scenario) -> None:
    """Refuse, before a command writes anything, a scenario the chosen engine would refuse
    at its start (:func:`make_simulation`): one line."""
    if engine_for(scenario)[0] == "python":
        refused = pattern_refusal(scenario)
        if refused:
            raise ScenarioError(refused)


def core_unusable() -> str:
    """Why the compiled core cannot run, in words for ``QCN_SIM_ENGINE=compiled``'s refusal."""
    return f"no usable compiled core ({CORE_MISSING}; 'make venv' builds it)"


def make_simulation(
    scenario: Scenario, *, engine: str | None = None, **kwargs: Unpack[SimulationArgs]
) -> Runnable:
    """The simulation of ``scenario`` on the engine ``engine`` (default: ``QCN_SIM_ENGINE``,
    else ``auto``)."""
    chosen, why = engine_for(scenario, engine)
    if chosen == "compiled":
        return CompiledSimulation(scenario, **kwargs)
    if why is not None and CORE_MISSING is None:
        _say_once(f"simulator: the Python engine runs this scenario, about 20x slower: {why}")
    elif why is not None:
        _say_once(why)
    return Simulation(scenario, **kwargs)


def rp_params(rp: RpParams) -> dict[str, Any]:
    """The RP parameters the core's rules read."""
    out: dict[str, Any] = {f.name: getattr(rp, f.name) for f in fields(rp)}
    del out["scheme_params"]
    out["scheme"] = str(rp.scheme)
    ecm = rp.own(EcmParams)
    for name in ("gi", "gd", "ru_bps", "rd_bps", "td_s", "fb_max"):
        out[f"ecm_{name}"] = getattr(ecm, name)
    dcqcn = rp.own(DcqcnParams)
    for name in ("g", "alpha_timer_s", "alpha_initial"):
        out[f"dcqcn_{name}"] = getattr(dcqcn, name)
    return out


def random_state(rng: random.Random) -> tuple[Any, ...]:
    return rng.getstate()


class CompiledSimulation:
    """:class:`qcn.simulator.engine.Simulation`'s run on the compiled core (same arguments)."""

    def __init__(self, scenario: Scenario, **kwargs: Unpack[SimulationArgs]) -> None:
        if _core is None:
            raise RuntimeError(core_status())
        why = unsupported(scenario)
        if why is not None:
            raise ValueError(f"the compiled core cannot run this scenario: {why}")
        # The Python engine's constructor builds the run (and holds its arguments, with
        # their defaults); its loop never runs.
        self.ref = ref = Simulation(scenario, **kwargs)
        self.progress = ref.progress
        self.core = core = _core.Core()
        core.configure(self._run_config(scenario))
        bottleneck = scenario.bottleneck_port
        for port_ref, port in ref.port_by_ref.items():
            cp_stream, reflect_stream = port_stream_names(ref.seed, port_ref, bottleneck)
            ecn_stream = ecn_stream_name(ref.seed, port_ref, bottleneck)
            core.add_port(
                port.rate_bps,
                port.buffer_pkts,
                port.delay_s,
                port.cp is not None,
                port.arrival_cp is not None,
                random_state(random.Random(cp_stream)),
                random_state(random.Random(reflect_stream)),
                port.paced,
                port.service_bits,
                None
                if port.ecn_rand is None
                else random_state(random.Random(ecn_stream)),  # (its marking stream)
            )
        for inp in ref.inputs:
            core.add_input(
                inp.partition_bytes,
                inp.delay_s,
                inp.quantum_s,
                -1 if inp.source is None else inp.source.index,
                -1 if inp.upstream is None else inp.upstream.index,
            )
        self._add_traffic(scenario)
        core.finish_setup()
        for name, _own in scenario.port_cp:  # a port's own CP fields, as the Python engine's
            if ref.ports[ref.port_index(name)].cp is not None:
                cfg = CpPortConfig.from_params(scenario.cp_for(name))
                core.set_port_cp(ref.port_index(name), cfg)

    def _run_config(self, sc: Scenario) -> dict[str, Any]:
        """The run's settings, as the core takes them (the Python engine's, as it built them)."""
        ref, net, wl = self.ref, sc.network, sc.workload
        return {
            "end": sc.duration_s,
            "sample_interval_s": ref.sample_interval_s,
            "frame_bytes": ref.frame_bytes,
            "q_unit": ref.q_unit,
            "qcn": ref.qcn,
            "pause": ref.pause,
            "three_point": ref.three_point,
            "flow_mode": ref.flow_mode,
            "cp_at_departure": ref.cp_at_departure,
            "left_behind": ref.depth_left_behind,
            "pause_hi_bytes": net.pause_hi_bytes,
            "pause_lo_bytes": net.pause_lo_bytes,
            "stagger_s": wl.stagger_s,
            "mean_on_s": wl.mean_on_s,
            "mean_off_s": wl.mean_off_s,
            "rto_s": wl.rto_s,
            "cnp_interval_s": ref.cnp_interval_s,
            "rate_times": [c.at_s for c in sc.schedule],
            "rates": [c.bottleneck_rate_bps for c in sc.schedule],
            "bottleneck": ref.bottleneck.index,
            "measured": [p.index for p in ref.measured],
            "cp_config": ref.cp_cfg,
            "rp": rp_params(sc.params.rp),
            "rng_state": random_state(ref.rng),
        }

    def _add_traffic(self, sc: Scenario) -> None:
        """The routes the run's traffic takes, its sources, and the flows' arrivals."""
        ref, core = self.ref, self.core
        route_ids: dict[int, int] = {}
        self.routes: list[Route] = []
        for s in ref.sources:
            for route in s.routes.values():
                route_ids[id(route)] = len(self.routes)
                self.routes.append(route)
                core.add_route(
                    route.source.index,
                    [p.index for p in route.ports],
                    [i.index for i in route.inputs],
                    list(route.cnm_delay_s),
                    route.ack_after_depart_s,
                )
        for s in ref.sources:
            core.add_source(
                s.rules is not None,
                s.offered_bps,
                s.line_rate_bps,
                s.slot_s,
                s.quantum_s,
                s.gap is bernoulli_gap,  # (the core's Bernoulli slots; else its constant rate)
                s.onoff,
                s.load,
                route_ids[id(s.routes[0])] if 0 in s.routes and not ref.flow_mode else -1,
            )
        if ref.arrivals:
            shapes = [flow_frames(a.size_bytes, sc.network.frame_bytes) for a in ref.arrivals]
            core.set_arrivals(
                [a.start_s for a in ref.arrivals],
                [a.source for a in ref.arrivals],
                [a.destination for a in ref.arrivals],
                [a.size_bytes for a in ref.arrivals],
                [frames for frames, _ in shapes],
                [last for _, last in shapes],
                [route_ids[id(route)] for route in ref.arrival_routes],
            )

    # Single-bottleneck views, as the Python engine's.
    @property
    def sources(self) -> list[Any]:
        return self.ref.sources

    def run(self) -> Trace:
        started = time.perf_counter()
        self.core.run(self.progress)
        self._collect()
        return self.ref._finish_trace(self.core.events, started)

    def live_row(self) -> LiveRow:
        """What the run measures now, as the Python engine's."""
        t, queue, cnms, drops, current, target, qntz = self.core.live_row()
        return LiveRow(t, queue, cnms, drops, current, target, qntz)

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None:
        """As the Python engine's: the port's CP takes ``cfg`` from now on."""
        index = self.ref.port_index(port)
        cp = self.ref.ports[index].cp  # (its configuration at the start: the signal's)
        if cp is not None and (cfg.signal is CpSignal.ECN) != (cp.cfg.signal is CpSignal.ECN):
            raise ValueError(f"port {port}: whether a port marks ECN is fixed for the run")
        self.core.set_port_cp(index, cfg)

    def partial_trace(self) -> Trace:
        """The trace as far as the run got (Ctrl-C), as the Python engine's."""
        self._collect()
        return self.ref.partial_trace()

    def _collect(self) -> None:
        """What the core measured, into the Python engine's trace and records."""
        ref, core = self.ref, self.core
        tr = ref.trace
        got = core.samples()
        rows = len(got["times_s"])
        n = len(ref.sources)
        tr.times_s = got["times_s"]
        tr.queue_pkts = got["queue_pkts"]
        tr.drops_so_far = got["drops_so_far"]
        tr.throughput_bps = got["throughput_bps"]
        tr.capacity_bps = got["capacity_bps"]
        for name in (
            "source_current_rate_bps",
            "source_target_rate_bps",
            "source_throughput_bps",
            "source_delivered_bps",
        ):
            flat = got[name]
            setattr(tr, name, [flat[k * n : (k + 1) * n] for k in range(rows)])
        for k, port in enumerate(ref.measured):
            tr.port_queue_pkts[port.name] = got["port_queue_pkts"][k]
            tr.port_throughput_bps[port.name] = got["port_throughput_bps"][k]
            tr.port_drops_so_far[port.name] = got["port_drops_so_far"][k]
            tr.port_cnms_so_far[port.name] = got["port_cnms_so_far"][k]
        tr.drops = core.drops
        tr.cnms = core.cnms
        ref.cnps = core.cnps
        for key, count in core.extra:
            tr.extra[key] = count
        for port, counts in zip(ref.ports, core.port_counts(), strict=True):
            (port.drops, port.cnms, port.cp_reflections, port.fb_reflections) = counts[:4]
            port.p0_reflections = counts[4]
            port.marks = counts[6]
        for inp, pauses in zip(ref.inputs, core.input_pauses(), strict=True):
            inp.pauses = pauses
        for s, sent in zip(ref.sources, core.sent_frames(), strict=True):
            s.sent_frames = sent
        self._flow_records()

    def _flow_records(self) -> None:
        ref = self.ref
        start, finish, retransmitted = self.core.flow_results()
        frame_bytes = ref.sc.network.frame_bytes
        records = ref.flow_records
        for number in range(len(records), len(start)):
            arrival = ref.arrivals[number]
            route = ref.arrival_routes[number]
            size = arrival.size_bytes
            records.append(
                FlowRecord(
                    flow_id=number,
                    source=arrival.source,
                    destination=arrival.destination,
                    size_bytes=size,
                    start_s=start[number],
                    ideal_fct_s=ideal_fct_s(
                        size, frame_bytes, route.ideal_rate_bps, route.one_way_s
                    ),
                    hops=route.last + 1,
                )
            )
        for record, fin, retx in zip(records, finish, retransmitted, strict=True):
            record.finish_s = fin
            record.retransmitted_frames = retx
