"""The live view without a browser (docs/live.md): knobs change the simulator's model at a
simulated instant, the same on both engines; they are checked as `qcn ctl set` checks them;
knobs.csv; pacing; `qcn run --live` end to end with a plain HTTP client for its page (and
Ctrl-C leaves nothing); the BMv2 side against a stand-in controller."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.cp_model import CpPortConfig
from qcn.core.live import (
    KNOB_FIELDS,
    KNOBS_HEADER,
    KnobChange,
    LiveError,
    LiveFeed,
    LiveRow,
    SimulationLive,
    demote_this_thread,
    write_knobs,
)
from qcn.core.params import PROB_ONE, SEED_FRAME_BYTES, CpParams, ParamError, QueueUnit
from qcn.core.trace import Trace
from qcn.simulator import compiled
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.live import LIVE_COUNTERS, ControllerKnobs, SwitchLive, source_rates
from tests.kit import interruptible

ROOT = Path(__file__).resolve().parent.parent
needs_core = pytest.mark.skipif(compiled.CORE_MISSING is not None, reason=compiled.core_status())


def transient(duration_s: float) -> scenarios.Scenario:
    return scenarios.load("transient").with_overrides({"duration_s": duration_s})


def run_turning(
    sc: scenarios.Scenario, engine: str, at_s: float | None, changes: dict[str, Any]
) -> tuple[Trace, LiveFeed]:
    """``sc`` on ``engine`` with a live feed whose first CP port gets ``changes`` at the
    first sample at or after ``at_s`` (None: never)."""
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    live = SimulationLive(feed)
    made: list[Any] = []
    asked: list[float] = []

    def progress(now: float, _end: float) -> None:
        if at_s is not None and not asked and now >= at_s:
            asked.append(now)
            feed.tune(feed.cp_ports[0], changes)
        live.on_sample(made[0], now)

    made.append(compiled.make_simulation(sc, progress=progress, engine=engine))
    return made[0].run(), feed


def mean(values: list[int], times: list[float], a: float, b: float) -> float:
    picked = [v for v, t in zip(values, times, strict=True) if a <= t < b]
    return sum(picked) / len(picked)


# -- the simulator's knobs -------------------------------------------------------------------


@needs_core
def test_a_knob_changes_the_model_at_its_simulated_instant_the_same_on_both_engines() -> None:
    sc = transient(0.3)
    changes = {"q_eq_pkts": 4, "w": 1.0, "p_base": 0.05}
    python, feed = run_turning(sc, "python", 0.1, changes)
    core, core_feed = run_turning(sc, "compiled", 0.1, changes)
    untouched, _ = run_turning(sc, "compiled", None, {})
    assert python.queue_pkts == core.queue_pkts
    assert python.source_current_rate_bps == core.source_current_rate_bps
    assert python.port_cnms_so_far == core.port_cnms_so_far
    assert core.cnms > untouched.cnms  # the change mattered
    k = next(i for i, t in enumerate(core.times_s) if t >= 0.1)
    assert core.queue_pkts[:k] == untouched.queue_pkts[:k]  # and not before its instant
    assert [(c.field, c.old, c.new) for c in feed.changes()] == [
        ("q_eq_pkts", 22, 4), ("w", 2.0, 1.0), ("p_base", 0.01, 0.05),
    ]  # fmt: skip
    assert {c.at_s for c in feed.changes()} == {c.at_s for c in core_feed.changes()}
    assert 0.1 <= feed.changes()[0].at_s < 0.1 + 1e-3
    rows, q_eqs = core_feed.rows_since(0)
    assert rows[0].t_s < 0.1 < rows[-1].t_s
    assert q_eqs[0] == (22.0,)
    assert q_eqs[-1] == (4.0,)
    assert sum(rows[-1].qntz_counts) <= rows[-1].cnms[0]
    assert sum(rows[-1].qntz_counts) > 0


@needs_core
def test_a_marking_curve_changes_mid_run_the_same_on_both_engines() -> None:
    sc = transient(0.3).with_overrides({"qcn_preset": "dcqcn"})
    changes = {"kmin_bytes": 1_000, "kmax_bytes": 30_000, "pmax": 0.5}
    python, _ = run_turning(sc, "python", 0.1, changes)
    core, feed = run_turning(sc, "compiled", 0.1, changes)
    untouched, _ = run_turning(sc, "compiled", None, {})
    assert python.queue_pkts == core.queue_pkts
    assert python.source_current_rate_bps == core.source_current_rate_bps
    assert python.extra["marks"] == core.extra["marks"]
    assert core.extra["marks"] > 10 * untouched.extra["marks"]  # the change mattered
    assert [c.field for c in feed.changes()] == ["kmin_bytes", "kmax_bytes", "pmax"]
    with pytest.raises(LiveError, match="signal"):
        feed.tune(feed.cp_ports[0], {"signal": "cnm"})


@needs_core
def test_q_eq_from_22_to_44_in_the_hot_spot_settles_the_queue_within_a_simulated_second() -> None:
    sc = transient(4.0)  # the hot spot is 2-4 s
    # (The CP judging the onset's dropped frames too, the queue is 31 frames at 2.2-2.5 s,
    # still settling from the deeper cuts: the change comes once it has, at 3 s.)
    trace, feed = run_turning(sc, "compiled", 3.0, {"q_eq_pkts": 44})
    times, queue = trace.times_s, trace.queue_pkts
    before = mean(queue, times, 2.5, 3.0)
    after = mean(queue, times, 3.5, 4.0)  # from half a simulated second after the change
    assert 17 <= before <= 27, before
    assert 38 <= after <= 52, after  # (QCN holds a queue about q_eq, not at it)
    assert [(c.port, c.field, c.old, c.new) for c in feed.changes()] == [
        (feed.cp_ports[0], "q_eq_pkts", 22, 44)
    ]


def test_a_change_is_checked_as_qcn_ctl_set_checks_it() -> None:
    sc = transient(0.1)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    SimulationLive(feed)
    port = feed.cp_ports[0]
    for bad in ({"q_eq_pkts": 0}, {"w": 0.3}, {"p_base": 2.0}, {"q_eq_pkts": 22.5}):
        with pytest.raises(ParamError) as got:
            feed.tune(port, bad)
        with pytest.raises(ParamError) as ctl:
            CpParams().with_changes(bad)  # what `qcn ctl set` runs (SwitchAgent.set_cp)
        assert str(got.value) == str(ctl.value)
        assert "\n" not in str(got.value)
    with pytest.raises(LiveError, match="not queue_unit"):
        feed.tune(port, {"queue_unit": "packets"})
    with pytest.raises(LiveError, match="runs no CP"):
        feed.tune("s9:9", {"w": 1.0})
    feed.finished.set()
    with pytest.raises(LiveError, match="the run is over"):
        feed.tune(port, {"w": 1.0})


def test_without_qcn_there_is_no_knob() -> None:
    sc = transient(0.1)
    feed = LiveFeed.of_scenario(sc, cp=None, speed=None)
    assert feed.cp_ports == []
    with pytest.raises(LiveError, match="runs no CP"):
        feed.tune(str(sc.bottleneck_port), {"w": 1.0})


def test_knobs_csv_has_one_row_per_change(tmp_path: Path) -> None:
    changes = [
        KnobChange(2.5, "s1:11", "q_eq_pkts", 22, 44, "page"),
        KnobChange(3.25, "s1:11", "positive_feedback", False, True, "controller"),
    ]
    lines = write_knobs(tmp_path, changes).read_text().splitlines()
    assert lines[0] == ",".join(KNOBS_HEADER) == "time_s,port,field,old,new"
    assert lines[1:] == [
        "2.500000,s1:11,q_eq_pkts,22,44",
        "3.250000,s1:11,positive_feedback,False,True",
    ]


@dataclass
class FakeWall:
    """A wall clock that sleeping moves, and the sleeps it was asked for."""

    now: float = 100.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


class RowModel:
    """A model whose row is at its ``now``."""

    now = 0.0

    def live_row(self) -> LiveRow:
        return LiveRow(self.now, (), (), 0, (), (), ())

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None:  # noqa: ARG002
        raise AssertionError("no change was asked for")


def test_a_run_is_paced_to_its_speed() -> None:
    """Two simulated seconds per second: the hook sleeps until the wall clock catches up."""
    sc = transient(0.1)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=2.0)
    wall = FakeWall()
    live = SimulationLive(feed, clock=wall.clock, sleep=wall.sleep)

    model = RowModel()
    for k in range(1, 101):
        model.now = k * 1e-3
        live.on_sample(model, model.now)
    rows, _ = feed.rows_since(0)
    assert len(rows) == 10  # a row per 10 ms simulated
    assert wall.now == pytest.approx(100.0 + (rows[-1].t_s - rows[0].t_s) / 2, abs=1e-9)
    assert len(wall.slept) == 9


def test_a_run_does_not_outrun_its_page() -> None:
    """At one simulated second per second, the run goes on while an open page has shown it
    within a second of the wall clock (PAGE_LEAD_S), and waits for the page beyond that; a
    closed page holds nothing."""
    sc = transient(3.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=1.0)
    live = SimulationLive(feed, clock=time.monotonic, sleep=lambda _s: None)  # (no pacing)
    page = feed.open_page()
    model = RowModel()
    for k in range(1, 101):  # the first simulated second: within the lead of a page at 0
        model.now = k * 0.01
        live.on_sample(model, model.now)
    assert feed.held_s == 0.0
    model.now = 1.5
    on = threading.Thread(target=live.on_sample, args=(model, 1.5))
    on.start()
    assert wait_until(lambda: bool(feed.rows_since(100)[0]), 10.0)  # published, then held ...
    assert on.is_alive()
    feed.page_shown(page, 0.3)  # (not yet within a second)
    feed.page_shown(page, 0.5)  # ... until the page has shown 0.5 s
    on.join(10.0)
    assert not on.is_alive()
    assert feed.held_s > 0
    model.now = 2.0
    on = threading.Thread(target=live.on_sample, args=(model, 2.0))
    on.start()
    assert wait_until(lambda: bool(feed.rows_since(101)[0]), 10.0)
    feed.close_page(page)  # the page is gone: the run goes on
    on.join(10.0)
    assert not on.is_alive()


def test_a_run_that_waited_for_its_page_goes_on_at_its_speed() -> None:
    """After a wait, the run does not race the wall clock to make it up: it sleeps as
    before, half a row's interval per row at two simulated seconds per second."""
    sc = transient(0.1)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=2.0)
    wall = FakeWall()

    def page_took_5_s_at_the_fifth_row(
        _t_s: float, _clock: Callable[[], float] = time.monotonic
    ) -> float:
        waited = 5.0 if len(feed.rows_since(0)[0]) == 5 else 0.0
        wall.now += waited
        return waited

    feed.wait_for_page = page_took_5_s_at_the_fifth_row  # type: ignore[method-assign,assignment]
    live = SimulationLive(feed, clock=wall.clock, sleep=wall.sleep)
    model = RowModel()
    for k in range(1, 101):
        model.now = k * 1e-3
        live.on_sample(model, model.now)
    assert wall.slept == pytest.approx([0.005] * 9)


# -- `qcn run --live`, without a browser ------------------------------------------------------

needs_bokeh = pytest.mark.skipif(
    importlib.util.find_spec("bokeh") is None, reason="bokeh is not installed (make venv)"
)


def start_live_run(out: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = interruptible(
        [sys.executable, "-m", "qcn", "run", "transient", "--backend", "sim", "--live",
         "--duration", "0.3", "--out", str(out), "--quiet", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "live view at " in line:
            return proc, line.split("live view at ", 1)[1].split()[0]
    proc.wait(10)
    pytest.fail(f"no live view URL: {proc.stderr.read() if proc.stderr else ''}")


def port_of(url: str) -> int:
    return int(url.rstrip("/").rsplit(":", 1)[1])


def is_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@needs_bokeh
def test_qcn_run_live_serves_its_page_waits_for_it_and_ctrl_c_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The page's HTML and BokehJS come from the run itself; fetching them is not a page
    that is up (the run starts when BokehJS has drawn it: tests/test_live_browser.py)."""
    proc, url = start_live_run(tmp_path / "run")
    try:
        served_and_interrupted(proc, url, tmp_path)
    finally:
        if proc.poll() is None:  # (a failed check leaves no run behind)
            proc.kill()
            proc.wait(10)


def served_and_interrupted(proc: subprocess.Popen[str], url: str, tmp_path: Path) -> None:
    assert url.startswith("http://127.0.0.1:")
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    assert "bokeh" in page.lower()
    assert "cdn.bokeh.org" not in page
    script = re.search(r'src="(/static/js/bokeh[^"]*)"', page)
    assert script is not None
    assert urllib.request.urlopen(url.rstrip("/") + script.group(1), timeout=10).status == 200
    time.sleep(0.5)
    assert proc.poll() is None  # still waiting for a page
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert is_free(port_of(url))
    assert list(tmp_path.iterdir()) == []  # no results, no staging


def test_live_options_are_checked_in_one_line() -> None:
    for extra, said in (
        (["--live-speed", "2"], "need --live"),
        (["--live", "--live-speed", "0"], "--live-speed must be in"),
        (["--live", "--live-port", "70000"], "--live-port must be a TCP port"),
    ):
        got = subprocess.run(
            [sys.executable, "-m", "qcn", "run", "transient", "--backend", "sim", *extra],
            capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip
        assert got.returncode == 2
        assert said in got.stderr
        assert got.stderr.count("\n") == 1, got.stderr


@needs_bokeh
@pytest.mark.parametrize("bmv2", [True, False], ids=["bmv2", "sim"])
def test_the_server_thread_gives_way_to_bmv2_only(bmv2: bool) -> None:
    """From a process that was given a negative niceness (root only: the run's processes
    may be): on BMv2 the server's thread runs at ordinary priority, below the switches; a
    simulated run has none, and its server keeps the process's priority."""
    from qcn.cli.live import LiveServer  # noqa: PLC0415

    feed = LiveFeed.of_scenario(transient(0.1), cp=None, speed=None, yields_to_network=bmv2)
    me = threading.get_native_id()
    raised = os.geteuid() == 0
    if raised:
        os.setpriority(os.PRIO_PROCESS, me, -5)
    server = LiveServer(feed)
    try:
        server.start()
        tid = server.thread_id
        assert os.sched_getscheduler(tid) == os.SCHED_OTHER
        niceness = os.getpriority(os.PRIO_PROCESS, tid)
        if bmv2:
            assert niceness >= 0
        else:
            assert niceness == os.getpriority(os.PRIO_PROCESS, me)
    finally:
        server.stop()
        if raised:
            os.setpriority(os.PRIO_PROCESS, me, 0)
    assert is_free(server.port)
    demote_this_thread()  # (a no-op here, now)


# -- BMv2's side, against a stand-in controller -----------------------------------------------


class FakeAgent:
    """What ControllerKnobs uses of a SwitchAgent: set_cp checks as ctl set does; the switch
    holds its entries in data-plane integers (read back as such)."""

    def __init__(self, cp: CpParams) -> None:
        self.held = cp

    def set_cp(self, port: int, **changes: Any) -> CpParams:
        self.held = self.read_cp(port)[0].with_changes(changes)
        return self.held

    def read_cp(self, _port: int) -> tuple[CpParams, int]:
        cfg = CpPortConfig.from_params(self.held)
        bytes_mode = self.held.queue_unit is QueueUnit.BYTES
        decoded = CpParams(
            # As qcn.controller.entries decodes it: bytes mode holds q_eq in bytes alone.
            q_eq_pkts=round(self.held.q_eq / SEED_FRAME_BYTES) if bytes_mode else self.held.q_eq,
            q_eq_bytes=self.held.q_eq if bytes_mode else 0,
            queue_unit=self.held.queue_unit,
            w=cfg.w_fixed / 16,
            p_base=cfg.p_base_fixed / PROB_ONE,
            p_scale=cfg.p_scale_fixed / PROB_ONE,
            positive_feedback=cfg.positive_feedback,
        )
        return decoded, 1

    def counters(self, _port: int, only: tuple[str, ...] | None = None) -> dict[str, int]:
        assert only == LIVE_COUNTERS  # (the page's three counters, in one read)
        return {"cp_cnms": 7, "tail_drops": 3}


def test_the_controllers_knobs_record_the_pages_and_a_shells_changes() -> None:
    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    port = feed.cp_ports[0]
    agent = FakeAgent(sc.params.cp)
    clock = [1.5]
    knobs = ControllerKnobs(feed, {feed.port(port).switch: agent}, lambda: clock[0])
    feed.tuner = knobs
    knobs.look()
    assert feed.changes() == []  # read back in fixed point: still the same entry
    feed.tune(port, {"q_eq_pkts": 30})
    with pytest.raises(ParamError, match=r"cp\.w: must be a multiple of 1/16"):
        feed.tune(port, {"w": 0.3})
    clock[0] = 2.0
    agent.held = agent.held.with_changes({"p_base": 0.02})  # `qcn ctl set` from a shell
    knobs.look()
    knobs.look()
    assert [(c.at_s, c.field, c.old, c.new, c.by) for c in feed.changes()] == [
        (1.5, "q_eq_pkts", 22, 30, "page"),
        (2.0, "p_base", 0.01, 0.02, "controller"),
    ]


def write_status(path: Path, rates: list[tuple[float, float]]) -> None:
    path.write_text(
        json.dumps(
            {
                "iface": path.stem, "pid": 1, "running": True, "limit_by": "destination",
                "counters": {},
                "limiters": [
                    {"limiter": f"10.0.0.{k}", "stage": "fr", "current_rate_bps": cr,
                     "target_rate_bps": tr, "sent_bytes": 0}
                    for k, (cr, tr) in enumerate(rates)
                ],
            }
        )
    )  # fmt: skip


def test_a_sources_rates_are_its_daemons(tmp_path: Path) -> None:
    write_status(tmp_path / "rp-h1-eth0@1.json", [(5e6, 6e6), (2e6, 4e6)])
    write_status(tmp_path / "rp-h2-eth0@1.json", [])
    assert source_rates(tmp_path, "h1", 1e8) == (2e6, 4e6)
    cr, tr = source_rates(tmp_path, "h2", 1e8)
    assert cr == 1e8
    assert math.isnan(tr)
    assert source_rates(tmp_path, "h3", 1e8)[0] == 1e8


def test_a_bmv2_row_holds_the_queues_counters_and_rates(tmp_path: Path) -> None:
    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    write_status(tmp_path / "rp-h1-eth0@1.json", [(5e6, 6e6)])
    agents = {p.switch: FakeAgent(sc.params.cp) for p in feed.ports}
    live = SwitchLive(
        feed, agents, depths=lambda: {feed.ports[0].name: 17}, status_dir=tmp_path,
        clock=lambda: 4.0,
    )  # fmt: skip
    live.publish(0)
    (row,), _ = feed.rows_since(0)
    assert row.t_s == 4.0
    assert row.queue_pkts[0] == 17
    assert row.cnms[0] == 7
    assert row.drops == 3 * len(feed.ports)
    host = feed.sources.index("h1") if "h1" in feed.sources else None
    if host is not None:
        assert row.current_rate_bps[host] == 5e6
    assert row.qntz_counts == ()


# -- the page, without a browser ---------------------------------------------------------------


class StubModel:
    """A simulation that takes any change (the page's tests look at the feed)."""

    def live_row(self) -> LiveRow:
        raise AssertionError("not asked")

    def set_port_cp(self, port: str, cfg: CpPortConfig) -> None:
        pass


def page_of(feed: LiveFeed) -> tuple[Any, Any]:
    """A page of ``feed`` as the server builds it, drawn (DocumentReady, as BokehJS announces
    it); its document and a function that runs its periodic update as its browser would
    see it: the browser acknowledges every update it has (it copies ``sent`` into
    ``shown``, as the page's own JavaScript does) unless told not to."""
    from bokeh.document import Document  # noqa: PLC0415
    from bokeh.events import DocumentReady  # noqa: PLC0415

    from qcn.cli.live import make_document  # noqa: PLC0415

    doc = Document()
    make_document(feed)(doc)
    doc.callbacks.trigger_event(DocumentReady())
    (tick,) = doc.session_callbacks
    updates = doc.get_model_by_name("updates")

    def pull(*, ack: bool = True) -> None:
        tick.callback()
        if ack:
            updates.shown = updates.sent

    return doc, pull


@pytest.fixture
def no_update_spacing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Updates as fast as the test pulls them (not 100 ms apart)."""
    import qcn.cli.live  # noqa: PLC0415

    monkeypatch.setattr(qcn.cli.live, "UPDATE_MS", 0)


@needs_bokeh
@pytest.mark.usefixtures("no_update_spacing")
def test_the_page_streams_new_rows_and_its_knobs_tune_the_run() -> None:
    from qcn.cli.live import knob_name  # noqa: PLC0415

    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    live = SimulationLive(feed)
    assert not feed.viewer.is_set()
    doc, pull = page_of(feed)
    assert feed.viewer.is_set()
    n = len(feed.sources)
    for k in range(1, 31):
        qntz = tuple(k if q == 5 else 0 for q in range(64))
        feed.publish(LiveRow(k * 5e-3, (k,), (2 * k,), k // 10, (1e9,) * n, (2e9,) * n, qntz))
    pull()
    queue = doc.get_model_by_name("queue data")
    assert queue.data["t"][-1] == pytest.approx(0.15)
    assert queue.data["q0"][:3] == [1, 2, 3]
    assert queue.data["e0"][0] == 22.0
    cnm_rate = doc.get_model_by_name("cnm data").data["rate"]
    assert cnm_rate
    assert cnm_rate[0] == pytest.approx(2 / 5e-3)  # 2 CNMs per 5 ms
    assert doc.get_model_by_name("qntz data").data["cnms"][5] == 30
    assert "t = 0.150 s" in doc.get_model_by_name("clock").text
    assert feed.shown_s() == pytest.approx(0.15)  # acknowledged by the browser
    pull()
    assert len(queue.data["t"]) == 30  # nothing streamed twice

    port = feed.cp_ports[0]
    spinner = doc.get_model_by_name(knob_name(port, "q_eq_pkts"))
    spinner.value = 44
    live.knobs.apply(StubModel(), 0.2)
    pull()
    assert [(c.at_s, c.field, c.new) for c in feed.changes()] == [(0.2, "q_eq_pkts", 44)]
    assert "q_eq_pkts 22 -> 44 (page)" in doc.get_model_by_name("knob log").text
    spinner.value = 0  # refused as `qcn ctl set` refuses it, and the knob goes back
    assert "cp.q_eq_pkts: must be" in doc.get_model_by_name("knob log").text
    assert spinner.value == 44
    mode = doc.get_model_by_name(knob_name(port, "positive_feedback"))
    mode.value = "ecm"
    live.knobs.apply(StubModel(), 0.3)
    feed.record(0.4, port, feed.params(port).with_changes({"w": 4.0}), "controller")
    pull()
    assert doc.get_model_by_name(knob_name(port, "w")).value == 4.0  # another's change shown
    assert [(c.field, c.new, c.by) for c in feed.changes()[1:]] == [
        ("positive_feedback", True, "page"), ("w", 4.0, "controller"),
    ]  # fmt: skip
    feed.finished.set()
    pull()
    assert "the run is over" in doc.get_model_by_name("clock").text
    assert "the run is over: its knobs are off" in doc.get_model_by_name("knob log").text
    assert all(doc.get_model_by_name(knob_name(port, k)).disabled for k in KNOB_FIELDS)
    assert feed.wait_for_pages_to_end(0)  # the page has shown it: the server may stop


@needs_bokeh
@pytest.mark.usefixtures("no_update_spacing")
def test_a_page_has_one_update_in_flight_and_its_acknowledgements_pace_the_feed() -> None:
    """A browser that has not taken in the last update gets no other (the rows wait and go
    together): a slow browser gets fewer, larger updates, never a backlog."""
    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    doc, pull = page_of(feed)
    queue = doc.get_model_by_name("queue data")
    n = len(feed.sources)

    def publish(t_s: float) -> None:
        feed.publish(LiveRow(t_s, (1,), (0,), 0, (1e9,) * n, (1e9,) * n, ()))

    publish(0.01)
    pull(ack=False)
    assert queue.data["t"] == [0.01]
    assert feed.shown_s() == 0.0  # sent, not yet shown
    publish(0.02)
    publish(0.03)
    pull(ack=False)
    assert queue.data["t"] == [0.01]  # the browser has not acknowledged the last one
    doc.get_model_by_name("updates").shown = 1  # now it has
    assert feed.shown_s() == pytest.approx(0.01)
    pull()
    assert queue.data["t"] == [0.01, 0.02, 0.03]  # both rows, in one update
    assert feed.shown_s() == pytest.approx(0.03)


@needs_bokeh
@pytest.mark.usefixtures("no_update_spacing")
def test_a_change_the_run_ended_before_taking_is_refused_on_the_page() -> None:
    from qcn.cli.live import knob_name  # noqa: PLC0415

    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    live = SimulationLive(feed)
    doc, pull = page_of(feed)
    port = feed.cp_ports[0]
    spinner = doc.get_model_by_name(knob_name(port, "q_eq_pkts"))
    n = len(feed.sources)

    class Model(StubModel):
        def live_row(self) -> LiveRow:
            return LiveRow(1.0, (9,), (0,), 0, (1e9,) * n, (1e9,) * n, ())

    live.on_sample(Model(), 1.0)  # the run's last sample ...
    spinner.value = 44  # ... and a change asked for after it
    live.close()
    pull()
    log = doc.get_model_by_name("knob log").text
    assert f"{port} q_eq_pkts 44: refused, the run ended at 1.000 s before it could take it" in log
    assert "firebrick" in log
    assert spinner.value == 22  # the knob shows what the port holds
    assert feed.changes() == []
    with pytest.raises(LiveError, match=re.escape("the run ended at 1.000 s before it could")):
        live.knobs.tune(port, {"q_eq_pkts": 30})


def test_the_rates_legend_lists_every_source_beside_its_plot() -> None:
    """The rates' legend, inside the plot, showed h1 to h6 of 10 sources; beside it, in as
    many columns as its height needs, it holds every one."""
    from bokeh.document import Document  # noqa: PLC0415
    from bokeh.models import Legend  # noqa: PLC0415

    from qcn.cli.live import LEGEND_ROW_PX, PLOT_CHROME_PX, make_document  # noqa: PLC0415

    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    assert len(feed.sources) == 10
    doc = Document()
    make_document(feed)(doc)
    figures = [m for m in doc.models if getattr(m, "title", None) is not None
               and "current rate" in str(getattr(m.title, "text", ""))]  # fmt: skip
    (rates,) = figures
    assert not [r for r in rates.center if isinstance(r, Legend)]  # not over the plot
    (legend,) = [r for r in rates.right if isinstance(r, Legend)]
    labels = [item.label["value"] for item in legend.items]
    assert labels == [f"h{i} → h11" for i in range(1, 11)]  # each sender and its receiver
    rows = legend.nrows
    assert rows * LEGEND_ROW_PX <= rates.height - PLOT_CHROME_PX  # every row within it
    assert -(-len(labels) // rows) >= 2  # so 10 sources take two columns


@pytest.mark.parametrize("sent", ["bogus", ""])
def test_a_mode_the_knob_does_not_offer_is_said_on_the_page_and_put_back(sent: str) -> None:
    """A page's message setting the mode to "bogus" or "" was a KeyError in requested()
    on the run's stderr."""
    from bokeh.document import Document  # noqa: PLC0415

    from qcn.cli.live import knob_name, make_document  # noqa: PLC0415

    sc = transient(1.0)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    doc = Document()
    make_document(feed)(doc)
    mode = doc.get_model_by_name(knob_name(feed.cp_ports[0], "positive_feedback"))
    mode.value = sent  # (a Select's value is any text to Bokeh, whatever its options)
    assert f"mode: must be qcn or ecm (got {sent!r})" in doc.get_model_by_name("knob log").text
    assert mode.value == "qcn"
    assert feed.changes() == []


@needs_bokeh
def test_the_judge_knob_turns_the_cps_judging_of_dropped_frames_on_both_engines() -> None:
    """The page's judge knob (docs/live.md): a choice of `qcn ctl set --judge`'s values,
    refused otherwise; turned to "admitted" on a port fed 20,000x faster than it drains,
    the model stops judging the frames its full buffer drops (far fewer CNMs), the same on
    both engines."""
    from bokeh.document import Document  # noqa: PLC0415

    from qcn.cli.live import knob_name, make_document  # noqa: PLC0415

    sc = scenarios.load("long-lived").with_overrides(
        {"duration_s": 0.02, "network.bottleneck_rate_bps": 5e5, "qcn.rp.min_rate_bps": 1e9}
    )
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    doc = Document()
    make_document(feed)(doc)
    judge = doc.get_model_by_name(knob_name(feed.cp_ports[0], "judge"))
    assert (judge.value, judge.options) == ("arrivals", ["arrivals", "admitted"])
    judge.value = "every frame"
    assert (
        "judge: must be arrivals or admitted (got 'every frame')"
        in doc.get_model_by_name("knob log").text
    )
    assert judge.value == "arrivals"
    runs = {}
    for engine in ("python", "compiled") if compiled.CORE_MISSING is None else ("python",):
        turned, turned_feed = run_turning(sc, engine, 0.01, {"judge": "admitted"})
        untouched, _ = run_turning(sc, engine, None, {})
        # Half the run judging arrivals, half admitted frames: about half the CNMs (875 of
        # 1,853; judging admitted frames throughout, 9), and five times the drops.
        assert 0.4 * untouched.cnms < turned.cnms < 0.6 * untouched.cnms, engine
        assert turned.drops > 3 * untouched.drops
        assert [(c.field, c.old, c.new) for c in turned_feed.changes()] == [
            ("judge", "arrivals", "admitted")
        ]
        runs[engine] = (turned.cnms, turned.drops, tuple(turned.queue_pkts))
    assert len(set(runs.values())) == 1


@needs_bokeh
def test_the_ecn_knobs_offer_ctl_set_s_values_and_the_simulator_refuses_a_new_signal() -> None:
    """The page's signal knob (docs/live.md): `qcn ctl set --signal`'s values, and the
    marking curve's; whether a port marks is fixed for a simulated run, so the simulator
    refuses a new signal in one line on the page, and takes a new curve."""
    from bokeh.document import Document  # noqa: PLC0415

    from qcn.cli.live import knob_name, make_document  # noqa: PLC0415

    sc = transient(0.1)
    feed = LiveFeed.of_scenario(sc, cp=sc.params.cp, speed=None)
    SimulationLive(feed)
    doc = Document()
    make_document(feed)(doc)
    signal = doc.get_model_by_name(knob_name(feed.cp_ports[0], "signal"))
    assert (signal.value, signal.options) == ("cnm", ["cnm", "ecn", "none"])
    signal.value = "ecn"
    assert "mid-run, not signal" in doc.get_model_by_name("knob log").text
    assert signal.value == "cnm"
    kmin = doc.get_model_by_name(knob_name(feed.cp_ports[0], "kmin_bytes"))
    assert (kmin.value, kmin.mode) == (sc.params.cp.kmin_bytes, "int")
    assert feed.changes() == []
    kmin.value = 6000  # taken: applied at the model's next sample
    assert "not kmin_bytes" not in doc.get_model_by_name("knob log").text
    assert kmin.value == 6000


def test_a_page_message_bokeh_refuses_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """A knob's value of the wrong type (a list, a dict) was a Bokeh validation traceback."""
    import logging  # noqa: PLC0415

    import qcn.cli.live  # noqa: F401, PLC0415 - its filter on Bokeh's message handler

    try:
        raise ValueError("expected a value of type Nullable(Float), got [1] of type list")
    except ValueError as e:
        logging.getLogger("bokeh.server.protocol_handler").error(
            "error handling message\n message: %r \n error: %r", "PATCH-DOC", e, exc_info=True
        )
    (record,) = caplog.records
    assert record.exc_info is None
    assert record.getMessage() == (
        "qcn live: a page's message was refused: expected a value of type Nullable(Float), got "
        "[1] of type list"
    )
