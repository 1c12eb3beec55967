"""The simulator's compiled core held to the Python definitions (docs/simulator.md).

- Its random numbers: Python's random.Random, bit for bit (MT19937 from the same state).
- Its CP: qcn.core.cp_model's CongestionPoint, overwrite_fb_tag and end_reflection, every
  decision and every state field after every frame, over random frame sequences; DCQCN's
  marking (ecn_marks) over random queues.
- Its RP rules: qcn.reaction_point.rules, every state field after every event, over random
  event sequences, for every scheme and variant (QCN, 2-QCN, Fb-hat, timer-only, adaptive
  timer, ECM, positive reinforcement, DCQCN with its alpha).
- Its runs: the Python engine's traces, every field, on every path make reproduce takes
  (short runs; ``python -m qcn.simulator.identity`` runs them whole).
"""

from __future__ import annotations

import heapq
import math
import os
import random
import shutil
import subprocess
import sys
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.cp_model import (
    CongestionPoint,
    CpPortConfig,
    FbTag,
    ecn_marks,
    end_reflection,
    overwrite_fb_tag,
)
from qcn.core.params import CpParams, CpSignal, RpParams, SamplingMode
from qcn.core.trace import Trace
from qcn.reaction_point.rules import DcqcnRules, RateLimiterRules
from qcn.simulator import compiled, engine
from qcn.simulator.compiled import CompiledSimulation, EngineError, make_simulation, rp_params
from qcn.simulator.engine import Simulation, fast_randint
from qcn.simulator.identity import Case, cases, dcqcn_cases, run_case, same, trace_fields
from tests.test_structure import FOLDERS, installed_path, tracked

if compiled.CORE_MISSING is not None and os.environ.get("CI"):
    pytest.fail(f"CI must build the simulator's compiled core: {compiled.CORE_MISSING}")
if compiled._core is None:  # not built, or built from another source: one line
    pytest.skip(compiled.core_status(), allow_module_level=True)
core = compiled._core


# -- the event order ---------------------------------------------------------------------------


def test_the_event_heap_pops_in_heapqs_order() -> None:
    """Times drawn from a few values, so keys tie on time and on kind and source: the pop
    order is Python's heapq's over (time, kind << 27 | source, push order)."""
    draw = random.Random(5)
    for size in (1, 2, 3, 17, 600, 5000):
        events = [
            (
                draw.choice([0.0, 1e-6, 2.5e-6, draw.random()]),
                draw.randrange(12) << 27 | draw.randrange(4),
            )
            for _ in range(size)
        ]
        assert core.event_order(events) == sorted(range(size), key=lambda i: (*events[i], i))


def test_a_sources_ring_of_flows_is_a_deque() -> None:
    """Pushed, popped and rotated past its inline entries and back, wrapping around: the
    order Python's deque keeps (the Python engine's ring of a source's flows)."""
    draw = random.Random(17)
    for steps in (5, 40, 3000):
        ring: deque[int] = deque()
        ops, popped = [], []
        for i in range(steps):
            op = draw.choice([0, 0, 1, 2]) if ring else 0
            ops.append((op, i))
            if op == 0:
                ring.append(i)
            elif op == 1:
                popped.append(ring.popleft())
            else:
                ring.rotate(-1)
        assert core.flow_turns(ops) == (popped, list(ring))


def test_a_tournament_roots_at_the_earliest_time_then_member() -> None:
    """Each change (a member's new time, infinity for none) leaves the root at the earliest
    (time, member), ties to the lower member: the Python engine's heap of departures."""
    draw = random.Random(11)
    for members in (1, 2, 3, 5, 64, 300):
        times = dict.fromkeys(range(members), math.inf)
        changes, expected = [], []
        for _ in range(3000):
            member = draw.randrange(members)
            t = draw.choice([0.0, -0.0, 1e-6, 2.5e-6, math.inf, draw.random()])
            times[member] = t
            changes.append((member, t))
            expected.append(min((time + 0.0, m) for m, time in times.items()))
        assert core.tournament_order(members, changes) == expected


def test_pending_events_are_taken_in_heapqs_order() -> None:
    """SEND events in their sources' slots (a superseded one moving to the heap), timers in
    a heap of their own, the rest in another, pushed and popped in turns: taken in heapq's
    order over (time, kind << 27 | source, push number), as the Python engine's one heap."""
    draw = random.Random(13)
    kinds = (engine.SEND, engine.SEND, engine.SEND, engine.TIMER, engine.CNM, engine.FLOW)
    for sources in (1, 3, 40):
        steps: list[tuple[float, int, int]] = []
        heap: list[tuple[float, int, int]] = []
        expected, pushed, t = [], 0, 0.0
        for _ in range(4000):
            if heap and draw.random() < 0.45:
                steps.append((math.nan, 0, 0))
                expected.append(heapq.heappop(heap))
                t = expected[-1][0]
                continue
            at = t + draw.choice([0.0, 0.0, 1e-6, draw.random() * 1e-5])
            kind, source = draw.choice(kinds), draw.randrange(sources)
            pushed += 1
            steps.append((at, kind, source))
            heapq.heappush(heap, (at, kind << 27 | source, pushed))
        expected += [heapq.heappop(heap) for _ in range(len(heap))]
        assert core.pending_order(sources, steps) == expected


def test_a_wire_lands_frames_in_the_heaps_order() -> None:
    """Frames leave in time order; those landing at one time land by port, then in the
    order they left (the event heap's order for ARRIVE events, whose source is the port)."""
    draw = random.Random(9)
    t, landings = 0.0, []
    for _ in range(3000):
        t += draw.choice([0.0, 0.0, 1.2e-6, draw.random() * 1e-6])
        landings.append((t, draw.randrange(6)))
    expected = [landings[i] for i in sorted(range(len(landings)), key=lambda i: (*landings[i], i))]
    assert core.wire_order(landings) == expected


# -- random numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 7, 2**40 + 3, "cp-1", "reflect-3-s1:2", "ÿ-seed"])
def test_the_core_draws_pythons_random_numbers(seed: int | str) -> None:
    state = random.Random(seed).getstate()
    rng = random.Random(seed)
    assert core.random_stream(state, 2000) == [rng.random() for _ in range(2000)]
    for lo, hi in [(0, (1 << 24) - 1), (0, 0), (5, 17), (0, 1499), (0, (1 << 40) + 5)]:
        rng = random.Random(seed)
        fast = fast_randint(rng)
        assert core.randint_stream(state, lo, hi, 500) == [fast(lo, hi) for _ in range(500)]
    rng = random.Random(seed)
    assert core.expovariate_stream(state, 1 / 0.02, 500) == [
        rng.expovariate(1 / 0.02) for _ in range(500)
    ]


# -- the CP --------------------------------------------------------------------------------------

CP_VARIANTS: dict[str, CpParams] = {
    "bytes table": CpParams(),
    "bernoulli": CpParams(sampling=SamplingMode.BERNOULLI, p_base=0.01, p_scale=0.24 / 63),
    "ecm positive": CpParams(
        sampling=SamplingMode.BERNOULLI, p_base=0.05, p_scale=0.0, positive_feedback=True
    ),
    "three-point": CpParams(
        sampling=SamplingMode.BERNOULLI,
        p_base=0.02,
        p_scale=0.3 / 63,
        three_point=True,
        reflect_p0=0.05,
        reflect_p_base=0.0,
        reflect_p_scale=1 / 63,
    ),
    "three-point, bytes": CpParams(three_point=True, reflect_p0=0.025),
}


def decision_tuple(d: Any) -> tuple[Any, ...] | None:
    return None if d is None else (d.q, d.qoff, d.qdelta, d.fb_fp, d.qntz_fb, d.sampled, d.positive)


def tag_tuple(t: FbTag) -> tuple[Any, ...]:
    return (t.reflected, t.qntz_fb, t.cpid, t.qoff, t.qdelta)


@pytest.mark.parametrize("variant", CP_VARIANTS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_cores_cp_is_the_cp_model(variant: str, seed: int) -> None:
    """Every frame's decision (or stage 1's None) and the registers after it, sample() and
    on_frame() alike, and the three-point tag a CP and the end reflection point leave."""
    cfg = CpPortConfig.from_params(CP_VARIANTS[variant])
    draw = random.Random(seed)
    names = (f"cp-{seed}", f"reflect-{seed}")
    model = CongestionPoint(cfg, fast_randint(random.Random(names[0])))
    reflect = fast_randint(random.Random(names[1]))
    mine = core.CpModel(cfg, random.Random(names[0]).getstate(), random.Random(names[1]).getstate())
    q_max = 4 * cfg.q_eq
    tag = FbTag()
    for _ in range(3000):
        q = min(q_max, max(0, int(draw.gauss(cfg.q_eq, cfg.q_eq))))
        frame_bytes = draw.choice([64, 1500, 1500, 9000])
        if draw.random() < 0.1:
            assert mine.on_frame(q, frame_bytes) == decision_tuple(model.on_frame(q, frame_bytes))
        elif cfg.three_point:
            cpid = draw.randrange(8)
            decision = model.sample(q, frame_bytes)
            new = tag if decision is None else overwrite_fb_tag(decision, tag, cfg, cpid, reflect)
            got_decision, got_tag = mine.three_point(q, frame_bytes, tag_tuple(tag), cpid)
            assert (got_decision, tuple(got_tag)) == (decision_tuple(decision), tag_tuple(new))
            tag = new if draw.random() < 0.7 else FbTag()
            end = end_reflection(tag, cfg, cpid, reflect)
            got = mine.end_reflection(tag_tuple(tag), cpid)
            assert (None if got is None else tuple(got)) == (
                None if end is None else tag_tuple(end)
            )
        else:
            assert mine.sample(q, frame_bytes) == decision_tuple(model.sample(q, frame_bytes))
        assert mine.state() == {"q_old": model.q_old, "bytes_to_sample": model.bytes_to_sample}


ECN_VARIANTS: dict[str, CpParams] = {
    "the paper's curve": CpParams(signal=CpSignal.ECN),
    "a short, steep ramp": CpParams(
        signal=CpSignal.ECN, kmin_bytes=3000, kmax_bytes=9001, pmax=1.0
    ),
    "a ramp from 0": CpParams(signal=CpSignal.ECN, kmin_bytes=0, kmax_bytes=1_000_000, pmax=0.2),
}


@pytest.mark.parametrize("variant", ECN_VARIANTS)
@pytest.mark.parametrize("seed", [1, 2])
def test_the_cores_ecn_marking_is_the_marking_model(variant: str, seed: int) -> None:
    """Every decision over random queues below, on and above the ramp (its ends
    included), drawing from one stream: the same marks and the same draws after them."""
    cfg = CpPortConfig.from_params(ECN_VARIANTS[variant])
    draw = random.Random(seed)
    ends = [cfg.kmin_bytes, cfg.kmin_bytes + 1, cfg.kmax_bytes, cfg.kmax_bytes + 1]
    queues = [draw.choice([*ends, draw.randrange(0, 2 * cfg.kmax_bytes + 2)]) for _ in range(5000)]
    name = f"ecn-{seed}"
    model = fast_randint(random.Random(name))
    expected = [ecn_marks(q, cfg, model) for q in queues]
    assert core.ecn_marks(cfg, random.Random(name).getstate(), queues) == expected
    assert 0 < sum(expected) < len(expected)


# -- the RP rules --------------------------------------------------------------------------------

FULL_QCN = {
    "qcn.rp.scheme": "qcn",
    "qcn.rp.timer_enabled": True,
    "qcn.rp.hai_enabled": True,
    "qcn.rp.shorten_cycles_after_fr": True,
}
REINFORCED = {"qcn.cp.three_point": True, "qcn.rp.positive_reinforcement": True}
RP_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "2-qcn": ("transient", {}),
    "2-qcn + fb-hat": ("transient", {"qcn.rp.fb_hat": True}),
    "qcn (timer + hai)": ("transient", FULL_QCN),
    "qcn + fb-hat": ("transient", {**FULL_QCN, "qcn.rp.fb_hat": True}),
    "qcn, timer without hai": ("transient", {**FULL_QCN, "qcn.rp.hai_enabled": False}),
    "timer-only": ("robustness", {"qcn_preset": "timer-qcn"}),
    "adaptive timer": ("robustness", {"qcn_preset": "qcn", "qcn.rp.adaptive_timer": True}),
    "adaptive timer-only": (
        "robustness",
        {"qcn_preset": "timer-qcn", "qcn.rp.adaptive_timer": True},
    ),
    "ecm": ("robustness", {"qcn_preset": "ecm", "qcn.cp.sampling": "bernoulli"}),
    "ecm, stable gi": (
        "robustness",
        {"qcn_preset": "ecm", "qcn.cp.sampling": "bernoulli", "qcn.rp.ecm.gi": 0.0053333},
    ),
    "2-qcn, positive reinforcement": ("transient", REINFORCED),
    "qcn, positive reinforcement": ("transient", {**FULL_QCN, **REINFORCED}),
    "timer-only, positive reinforcement": (
        "robustness",
        {"qcn_preset": "timer-qcn", **REINFORCED},
    ),
    "dcqcn": ("transient", {"qcn_preset": "dcqcn"}),
    "dcqcn, jittered, fast alpha, no hai": (
        "transient",
        {
            "qcn_preset": "dcqcn",
            "qcn.rp.jitter": 0.15,
            "qcn.rp.hai_enabled": False,
            "qcn.rp.dcqcn.g": 1 / 16,
            "qcn.rp.dcqcn.alpha_timer_s": 1e-5,
            "qcn.rp.dcqcn.alpha_initial": 0.5,
        },
    ),
    "dcqcn, byte counter alone": (
        "transient",
        {"qcn_preset": "dcqcn", "qcn.rp.timer_enabled": False},
    ),
}

RP_FIELDS = (
    "timer_period_s",
    "current_rate_bps",
    "target_rate_bps",
    "byte_stage",
    "time_stage",
    "bytes_left",
    "timer_deadline",
    "frames_since_cnm",
    "cnms",
    "reinforcements",
    "fb_hat",
)


def rp_state(rules: RateLimiterRules) -> dict[str, Any]:
    return {name: getattr(rules, name) for name in RP_FIELDS}


def variant_params(variant: str) -> RpParams:
    name, overrides = RP_VARIANTS[variant]
    return scenarios.load(name).with_overrides(overrides).params.rp


def test_the_variants_are_the_schemes_the_issue_names() -> None:
    schemes = {str(variant_params(v).scheme) for v in RP_VARIANTS}
    assert schemes == {"qcn", "2-qcn", "timer-qcn", "ecm", "dcqcn"}
    assert any(variant_params(v).fb_hat for v in RP_VARIANTS)
    assert any(variant_params(v).adaptive_timer for v in RP_VARIANTS)
    assert any(variant_params(v).positive_reinforcement for v in RP_VARIANTS)


@pytest.mark.parametrize("variant", RP_VARIANTS)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_cores_rp_rules_are_the_rules(variant: str, seed: int) -> None:
    """Random CNMs (every QntzFb, positive ones, bursts of them), frames sent, timer
    expiries (advance and on_timer): every field equal after every event."""
    params = variant_params(variant)
    if seed == 4:  # no jitter, short cycles: the stages and HAI reached often
        params = replace(params, jitter=0.0, bc_limit_bytes=3000, hai_min_frames=5)
    now = [0.0]
    rules = RateLimiterRules(params, lambda: now[0], random.Random(seed).random)
    mine = core.RpModel(rp_params(params), random.Random(seed).getstate())
    draw = random.Random(100 + seed)
    assert mine.state() == rp_state(rules)
    for step in range(4000):
        now[0] += draw.expovariate(1 / 2e-4)
        event = draw.random()
        if event < 0.15:
            qntz_fb = draw.choice([0, 0, 1, 2, 7, 31, 63, draw.randrange(64)])
            positive = draw.random() < 0.3
            rules.on_cnm(qntz_fb, positive=positive)
            mine.on_cnm(qntz_fb, positive, now[0])
        elif event < 0.85:
            frames = draw.choice([1, 1, 1, 2, 60])
            nbytes = frames * draw.choice([64, 1500, 1500])
            rules.on_transmit(nbytes, frames)
            mine.on_transmit(nbytes, frames)
        elif event < 0.97:
            if rules.timer_deadline is not None and draw.random() < 0.8:
                now[0] = max(now[0], rules.timer_deadline + draw.random() * 0.05)
            assert mine.advance(now[0]) == rules.advance(now[0])
        else:
            rules.on_timer()
            mine.on_timer(now[0])
        assert mine.state() == rp_state(rules), f"after event {step}"
        if isinstance(rules, DcqcnRules):
            since = rules._alpha_since  # (the state the core keeps)
            alpha = (rules._alpha, since, rules.alpha)
            assert mine.alpha(now[0]) == alpha, f"after event {step}"


# -- whole runs ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.label)
def test_a_short_run_is_the_python_engines_run(case: Case) -> None:
    """Every make reproduce row, and the paths it leaves out: 20 ms, every trace field."""
    diff, *_ = run_case(case, seed=2, duration=0.02)
    assert diff == []


@pytest.mark.parametrize("case", dcqcn_cases(), ids=lambda c: c.label)
def test_a_short_dcqcn_run_marks_and_notifies(case: Case) -> None:
    """The DCQCN cases above are not vacuous: their 20 ms mark frames, send CNPs and
    no CNM (on the core; the test above holds the Python engine to it)."""
    sc = scenarios.load(case.scenario).with_overrides({**case.overrides, "duration_s": 0.02})
    tr = CompiledSimulation(sc, seed=2).run()
    assert tr.extra["marks"] > 0
    assert tr.extra["cnps"] > 0
    assert tr.cnms == 0


def test_the_cores_ports_keep_their_signal() -> None:
    sc = scenarios.load("transient").with_overrides({"qcn_preset": "dcqcn", "duration_s": 0.01})
    sim = CompiledSimulation(sc)
    name = sim.ref.bottleneck.name
    with pytest.raises(ValueError, match="whether a port marks ECN is fixed for the run"):
        sim.set_port_cp(name, CpPortConfig.from_params(CpParams()))
    sim.set_port_cp(name, CpPortConfig.from_params(CpParams(signal=CpSignal.ECN)))


def test_a_scaled_run_is_the_python_engines_run() -> None:
    """--scaled: the scenario as scaled for BMv2, its departure CP and sample interval."""
    from qcn.simulator.identity import scaled  # noqa: PLC0415

    for case in cases()[:2]:
        diff, *_ = run_case(scaled(case), seed=1, duration=0.2)
        assert diff == []


@pytest.mark.parametrize("preset", [None, "dcqcn"])
def test_progress_and_ctrl_c_keep_what_was_measured(preset: str | None) -> None:
    """The progress callback is told each sample; an exception from it (Ctrl-C) stops the
    run with its samples whole and its flows so far (DCQCN's marks and CNPs so far too),
    as on the Python engine."""
    sc = scenarios.load("fct").with_overrides(
        {"duration_s": 0.05, **({"qcn_preset": preset} if preset else {})}
    )

    def stop_at(seen: list[float]) -> Any:
        def progress(t: float, end: float) -> None:
            assert end == 0.05
            seen.append(t)
            if t >= 0.02:
                raise KeyboardInterrupt

        return progress

    partial: list[Trace] = []
    for kind in (Simulation, CompiledSimulation):
        seen: list[float] = []
        sim = kind(sc, seed=1, progress=stop_at(seen))
        with pytest.raises(KeyboardInterrupt):
            sim.run()
        partial.append(sim.partial_trace())
        assert len(seen) == 20
    py, cc = (trace_fields(t) for t in partial)
    assert len(partial[1].times_s) == 20
    assert partial[1].flows  # the flows started so far
    if preset:
        assert partial[1].extra["marks"] > 0
    assert [k for k in py if not same(py[k], cc[k])] == []


def test_the_engine_is_chosen_by_qcn_sim_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.01})
    monkeypatch.setenv("QCN_SIM_ENGINE", "python")
    assert type(make_simulation(sc)) is Simulation
    monkeypatch.setenv("QCN_SIM_ENGINE", "compiled")
    assert type(make_simulation(sc)) is CompiledSimulation
    monkeypatch.delenv("QCN_SIM_ENGINE")
    assert type(make_simulation(sc)) is CompiledSimulation
    for wrong in ("fast", "garbage", "pythön"):
        monkeypatch.setenv("QCN_SIM_ENGINE", wrong)
        with pytest.raises(EngineError, match=f"QCN_SIM_ENGINE='{wrong}': expected one of"):
            make_simulation(sc)


def test_without_the_core_one_line_and_the_python_engine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sc = scenarios.load("transient").with_overrides({"duration_s": 0.01})
    monkeypatch.setattr(compiled, "CORE_MISSING", "No module named 'qcn.simulator._core'")
    monkeypatch.setattr(compiled, "_said", set())
    assert type(make_simulation(sc)) is Simulation
    assert type(make_simulation(sc)) is Simulation
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no compiled core" in err
    assert "Python engine runs" in err
    monkeypatch.setenv("QCN_SIM_ENGINE", "compiled")
    with pytest.raises(EngineError, match="no usable compiled core"):
        make_simulation(sc)
    with pytest.raises(EngineError, match="no usable compiled core"):
        compiled.check_engine()


def test_a_scheme_the_core_does_not_know_runs_on_the_python_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from qcn.reaction_point.rules import RULES, rules_class  # noqa: PLC0415

    sc = scenarios.load("transient").with_overrides({"duration_s": 0.01})
    scheme = sc.params.rp.scheme

    class Mine(rules_class(scheme)):  # type: ignore[misc]
        pass

    monkeypatch.setitem(RULES, scheme, Mine)
    assert compiled.unsupported(sc) == f"the scheme {scheme!r} has rules of its own (Mine)"
    assert type(make_simulation(sc)) is Simulation


def test_a_core_built_from_another_source_is_not_run() -> None:
    """A stale build (the source changed since, or a failed build left the old one) would
    run another model in the source's name: it is refused in one line."""
    import types  # noqa: PLC0415

    built = types.ModuleType("_core")
    built.source_sha256 = "0" * 64  # type: ignore[attr-defined]
    assert "built from another simulator/_core.cpp" in (compiled._stale(built) or "")
    assert compiled._stale(core) is None  # this checkout's build is its source's


# -- a damaged core, and a wrong engine ----------------------------------------------------

CORE_FILE = Path(str(core.__file__))


def test_a_truncated_core_is_known_before_it_is_loaded(tmp_path: Path) -> None:
    """Loading a truncated module killed the process with SIGBUS: its headers say how long
    it must be, and every cut of it is caught by them."""
    assert compiled.elf_damage(CORE_FILE) is None
    whole = CORE_FILE.read_bytes()
    cut = tmp_path / "_core.so"
    for size in [*range(0, 80), *range(80, len(whole), 4099), len(whole) - 1]:
        cut.write_bytes(whole[:size])
        assert compiled.elf_damage(cut) is not None, size
    cut.write_text("not a module")
    assert compiled.elf_damage(cut) == "not a shared object (12 bytes)"


def checkout_with_core(tmp_path: Path, size: int) -> Path:
    """A copy of the project's package, laid out as installed, whose simulator's compiled
    core is cut to ``size`` bytes, in a folder that a command started there imports it from
    (its working directory comes first on the import path)."""
    where = tmp_path / "checkout"
    for path in tracked("qcn/*", *(f"{d}/*" for d in FOLDERS)):
        (where / installed_path(path)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, where / installed_path(path))
    (where / "qcn" / "simulator" / CORE_FILE.name).write_bytes(CORE_FILE.read_bytes()[:size])
    return where


def test_a_run_with_a_truncated_core_falls_back_in_one_line(tmp_path: Path) -> None:
    """An interrupted build or a full disk left a truncated core: every simulator run died
    of SIGBUS (exit status 135, no message) and left its staging behind."""
    where = checkout_with_core(tmp_path, CORE_FILE.stat().st_size // 2)
    out = tmp_path / "r"
    run = [sys.executable, "-m", "qcn", "run", "transient", "--backend", "sim",
           "--duration", "0.01", "--quiet"]  # fmt: skip
    done = subprocess.run([*run, "--out", str(out)], cwd=where, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("simulator: no compiled core (")
    assert f"{CORE_FILE.name} is damaged, truncated: " in line
    assert "the Python engine runs" in line
    assert (out / "summary.json").exists()
    # Insisting on the core is refused in one line, before anything is written.
    env = {**os.environ, "QCN_SIM_ENGINE": "compiled"}
    done = subprocess.run([*run, "--out", str(tmp_path / "r2")], cwd=where, env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("qcn: error: QCN_SIM_ENGINE=compiled: no usable compiled core (")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkout", "r"]
