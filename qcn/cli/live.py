"""The live view of a running scenario (``qcn run --live``, ``qcn net up --live``;
docs/live.md): a Bokeh server on 127.0.0.1 that draws the run's :class:`LiveFeed` as it
fills and turns its knobs.

The server runs in a thread of its own, on its own Tornado loop.  On BMv2 that thread is
an ordinary one (SCHED_OTHER, niceness 0 or above, whatever the process it lives in), so it
never takes a CPU from the switches and the reaction points, which run under SCHED_FIFO;
a simulated run has nothing to protect, and its server keeps the process's own priority.
Each page (a Bokeh session) pulls the feed's new rows up to ten times a second and streams
them into its plots, one update at a time: the browser echoes each update's number back
once it has taken it in, and the next goes after that (a slow browser gets fewer, larger
updates, never a backlog); what the page has shown paces a simulated run
(:meth:`LiveFeed.wait_for_page`).
Its knobs call :meth:`LiveFeed.tune`, which is the backend's own way of changing a CP
(the simulator's model at its next sample, or the controller's ``qcn ctl set``).  Bokeh's
JavaScript comes from its Python package: nothing is fetched from the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from qcn.controller.cli import FEEDBACK_MODES  # the mode knob's values: `ctl set --feedback`'s
from qcn.core.errors import QcnError
from qcn.core.live import (
    KNOB_FIELDS,
    QNTZ_LEVELS,
    LiveFeed,
    LiveRow,
    demote_this_thread,
    shown,
)
from qcn.core.params import ECN_QUEUE_MAX_BYTES, CpJudge, CpParams, CpSignal

UPDATE_MS = 100
"""How often a page pulls new rows: at most 10 updates a second ..."""
TICK_MS = 25
"""... checked this often, so that an update goes as soon as the browser has room for it."""
IN_FLIGHT = 1
"""Updates sent to a page and not yet acknowledged, at most.  One: a busy browser is left
gaps between updates for its user's keys (with two, the next always queued, Selenium's
keys took 2-8 s each to land with a core taken, against 0.2-3 s with one; 2026-11-27)."""
ACK_TIMEOUT_S = 2.0
"""An update the browser has not acknowledged within this is taken as lost (a page that
reconnected): the next one goes anyway."""
END_WAIT_S = 30.0
"""When the run is over, the server waits up to this for every open page to show it."""
SESSION_CHECK_MS = 1000
SESSION_LINGER_MS = 5000
"""A closed page's session is discarded within about 6 s (Bokeh's defaults: 17 s and
15 s), and the simulated run stops waiting for it (it would hold the run that long)."""
OPEN_WINDOW_S = 60.0
"""A network left running shows its last minute ..."""
OPEN_ROLLOVER = 6000
"""... and each page keeps its last 6,000 rows (10 minutes of 10 a second)."""
CNM_RATE_WINDOW_S = 0.05
"""CNMs per second are counted over windows of this much of the run's time."""
STOP_TIMEOUT_S = 5.0
RUN_OVER = " &nbsp; <b>the run is over</b>"
KNOBS_OFF = "the run is over: its knobs are off"

KNOB_STEPS: dict[str, tuple[float, float, float]] = {
    "q_eq_pkts": (1, 2047, 1),
    "w": (0, 64, 0.25),
    "p_base": (0, 1, 0.005),
    "p_scale": (0, 1, 0.0005),
    "kmin_bytes": (0, ECN_QUEUE_MAX_BYTES - 1, 1000),
    "kmax_bytes": (1, ECN_QUEUE_MAX_BYTES, 1000),
    "pmax": (0, 1, 0.01),
}
"""The number knobs: (low, high, step) of their spinners (the checks are ctl set's)."""
WHOLE_KNOBS = frozenset({"q_eq_pkts", "kmin_bytes", "kmax_bytes"})
"""The number knobs that take whole numbers (their spinners count in steps of 1 or more)."""
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip


class LiveViewError(QcnError):
    """The live view cannot start (no Bokeh, the port taken)."""


def knob_name(port: str, knob: str) -> str:
    """The Bokeh model name of a port's knob (what the browser test looks for)."""
    return f"knob {port} {knob}"


def knob_css(port: str, knob: str) -> str:
    """The CSS class of a port's knob on the page (what the browser test finds it by)."""
    return "qcn-knob-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"{port}-{knob}")


SELECT_KNOBS: dict[str, tuple[str, dict[str, Any]]] = {
    "positive_feedback": ("mode", FEEDBACK_MODES),
    "judge": ("judge", {j.value: j.value for j in CpJudge}),
    "signal": ("signal", {s.value: s.value for s in CpSignal}),
}
"""The knobs the page shows as a choice: their title and options (an option's name on the
page: the value `qcn ctl set` gives the field)."""


def widget_value(cp: CpParams, knob: str) -> Any:
    """A knob's value on the page for the port's parameters."""
    if knob == "positive_feedback":
        return "ecm" if cp.positive_feedback else "qcn"
    return shown(getattr(cp, knob))


class KnobValueError(QcnError):
    """A value the page sent that its knob does not take: said on the page, the knob put
    back."""


def requested(knob: str, value: Any) -> Any:
    """The page's value as `qcn ctl set` gives it (a whole q_eq or threshold as an int, so
    that any other is ctl set's own "must be a whole number").  The mode is one of its options: a
    page's message can send any text ("bogus", ""), which was a KeyError on the run's
    stderr."""
    if knob in SELECT_KNOBS:
        title, options = SELECT_KNOBS[knob]
        if not isinstance(value, str) or value not in options:
            raise KnobValueError(f"{title}: must be {' or '.join(options)} (got {value!r:.40})")
        return options[value]
    if knob in WHOLE_KNOBS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _RefusedMessageInOneLine(logging.Filter):
    """A page's message that Bokeh refuses (a knob's value of the wrong type: a list for a
    number) in one line, not a traceback on the run's stderr; the knob is unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = (
                "qcn live: a page's message was refused: %.200s",
                (record.exc_info[1],),
            )
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("bokeh.server.protocol_handler").addFilter(_RefusedMessageInOneLine())


@dataclass
class PageState:
    """One page's position in the feed."""

    rows: int = 0
    changes: int = 0
    notes: int = 0
    cnm_anchor: tuple[float, int] | None = None
    syncing: bool = False
    """The page's knobs are being set to the run's values: not a user's change."""
    knobs: dict[tuple[str, str], Any] = field(default_factory=dict)
    page: int | None = None
    """The feed's id of this page, once its browser has drawn it."""
    sent: int = 0
    """Updates sent (each numbered, the browser echoing the number back) ..."""
    acked: int = 0
    """... and acknowledged."""
    sent_at: float = -float("inf")
    """When the last update was sent (time.monotonic)."""
    shown_t: dict[int, float] = field(default_factory=dict)
    """The run's time of the last row of each update not acknowledged yet."""
    end_update: int | None = None
    """The update that said the run is over."""
    t_s: float = 0.0
    """The run's time of the last row sent."""

    def due(self, now: float) -> bool:
        """Whether the next update may go: fewer than :data:`IN_FLIGHT` unacknowledged (or
        they are lost), and not sooner than :data:`UPDATE_MS` after the last."""
        if now - self.sent_at < UPDATE_MS / 1000:
            return False
        return self.sent - self.acked < IN_FLIGHT or now - self.sent_at >= ACK_TIMEOUT_S


@dataclass
class PageModels:
    """The Bokeh models an update changes."""

    queue: Any
    rates: Any
    cnms: Any
    drops: Any
    hist: Any
    marks: list[tuple[Any, float]]
    """Each plot's knob marks and the height they are drawn to."""
    clock: Any
    log: Any
    updates: Any
    """The page's :func:`page_updates_model`."""
    rollover: int | None


@functools.cache
def page_updates_model() -> type:
    """The Bokeh model a page acknowledges its updates with (defined once, when Bokeh is
    first needed: Bokeh only for a live run)."""
    from bokeh.core.properties import Int  # noqa: PLC0415
    from bokeh.model import DataModel  # noqa: PLC0415

    class PageUpdates(DataModel):  # type: ignore[misc]
        sent = Int(0, help="The number of the last update sent to the page ...")
        shown = Int(0, help="... and of the last the browser has taken in.")

    return PageUpdates


def make_document(feed: LiveFeed) -> Callable[[Any], None]:
    """The Bokeh application's function: builds one page of ``feed``'s run."""

    def build(doc: Any) -> None:
        from bokeh.events import DocumentReady  # noqa: PLC0415

        state = _build(doc, feed)

        def ready(_event: Any) -> None:
            # The page is up once BokehJS has drawn it (not when its HTML was fetched: a
            # browser takes seconds more, and a run started then would be half over).
            if state.page is None:
                state.page = feed.open_page()
            feed.viewer.set()

        def gone(_context: Any) -> None:
            if state.page is not None:
                feed.close_page(state.page)

        doc.on_event(DocumentReady, ready)
        doc.on_session_destroyed(gone)

    return build


def _build(doc: Any, feed: LiveFeed) -> PageState:
    """The page of ``feed``: its figures, its knobs and the update loop that fills them."""
    from bokeh.layouts import column, row  # noqa: PLC0415 - Bokeh only for a live run
    from bokeh.models import Div  # noqa: PLC0415

    state = PageState()
    plot = _plotter(feed)
    queue, queue_data = _queue_figure(plot, feed)
    rates, rate_data = _rates_figure(plot, feed)
    cnms, cnm_data, drops, drop_data, hist, hist_data = _count_figures(plot)
    marks = _knob_marks((queue, rates))
    clock, log, updates = _status_models()
    title = Div(
        text=f"<h3>{feed.name}: {feed.title}</h3>" + "<br>".join(p.text() for p in feed.phases)
    )
    doc.title = f"qcn live: {feed.name}"
    doc.add_root(
        column(
            title,
            clock,
            *_knob_rows(feed, state, log),
            log,
            queue,
            rates,
            row(cnms, hist, sizing_mode="stretch_width"),
            drops,
            sizing_mode="stretch_width",
        )
    )
    doc.add_root(updates)
    rollover = None if feed.duration_s is not None else OPEN_ROLLOVER
    models = PageModels(
        queue_data, rate_data, cnm_data, drop_data, hist_data, marks, clock, log, updates,
        rollover,
    )  # fmt: skip
    updates.on_change("shown", lambda _attr, _old, new: _acknowledged(feed, state, new))
    doc.add_periodic_callback(lambda: _update(feed, state, models), TICK_MS)
    return state


def _plotter(feed: LiveFeed) -> Callable[..., Any]:
    """A maker of the page's time plots: one time axis (the run's length, or a window that
    follows an open-ended run), the congested phases shaded."""
    from bokeh.models import BoxAnnotation, DataRange1d, Range1d  # noqa: PLC0415
    from bokeh.plotting import figure  # noqa: PLC0415

    x_range: Any = (
        Range1d(start=0, end=feed.duration_s)
        if feed.duration_s is not None
        else DataRange1d(follow="end", follow_interval=OPEN_WINDOW_S, range_padding=0)
    )

    def plot(title: str, y_label: str, height: int = 230) -> Any:
        fig = figure(
            title=title,
            height=height,
            sizing_mode="stretch_width",
            x_range=x_range,
            x_axis_label="time (s)",
            y_axis_label=y_label,
            tools="xpan,xwheel_zoom,reset,save",
            output_backend="canvas",
        )
        for phase in feed.phases:
            if phase.congested:
                fig.add_layout(
                    BoxAnnotation(
                        left=phase.from_s, right=phase.to_s, fill_alpha=0.08, fill_color="red"
                    )
                )
        return fig

    return plot


def _queue_figure(plot: Callable[..., Any], feed: LiveFeed) -> tuple[Any, Any]:
    """Each port's queue against its q_eq and its buffer, and the data it draws."""
    from bokeh.models import ColumnDataSource, Range1d, Span  # noqa: PLC0415

    ports = feed.ports
    queue_data = ColumnDataSource(
        {
            "t": [],
            **{f"q{k}": [] for k in range(len(ports))},
            **{f"e{k}": [] for k in range(len(ports))},
        },
        name="queue data",
    )
    queue = plot("queue at each port (frames) against q_eq and the buffer", "frames")
    queue.y_range = Range1d(start=0, end=max(p.buffer_pkts for p in ports) * 1.05)
    for k, p in enumerate(ports):
        color = PALETTE[k % len(PALETTE)]
        queue.line("t", f"q{k}", source=queue_data, color=color, legend_label=f"{p.name} queue")
        queue.line(
            "t", f"e{k}", source=queue_data, color=color, line_dash="dashed",
            legend_label=f"{p.name} q_eq",
        )  # fmt: skip
        queue.add_layout(
            Span(location=p.buffer_pkts, dimension="width", line_color=color, line_dash="dotted")
        )
    _legend_beside(queue)
    return queue, queue_data


def _rates_figure(plot: Callable[..., Any], feed: LiveFeed) -> tuple[Any, Any]:
    """Each source's current and target rate, and the data it draws."""
    from bokeh.models import ColumnDataSource, Range1d  # noqa: PLC0415

    sources = feed.sources
    rate_data = ColumnDataSource(
        {
            "t": [],
            **{f"c{i}": [] for i in range(len(sources))},
            **{f"r{i}": [] for i in range(len(sources))},
        },
        name="rate data",
    )
    rates = plot("each source's current rate (solid) and target rate (dashed)", "Gb/s")
    rates.y_range = Range1d(start=0, end=feed.line_rate_bps / 1e9 * 1.05)
    for i, label in enumerate(feed.source_labels):
        color = PALETTE[i % len(PALETTE)]
        rates.line("t", f"c{i}", source=rate_data, color=color, legend_label=label)
        rates.line("t", f"r{i}", source=rate_data, color=color, line_dash="dashed", alpha=0.6)
    _legend_beside(rates)
    return rates, rate_data


def _count_figures(plot: Callable[..., Any]) -> tuple[Any, Any, Any, Any, Any, Any]:
    """CNMs a second, drops so far and the CNMs' QntzFb, each with its data."""
    from bokeh.models import ColumnDataSource  # noqa: PLC0415
    from bokeh.plotting import figure  # noqa: PLC0415

    cnm_data = ColumnDataSource({"t": [], "rate": []}, name="cnm data")
    cnms = plot("CNMs per second, all CP ports", "CNMs/s", height=180)
    cnms.line("t", "rate", source=cnm_data, color="black")

    drop_data = ColumnDataSource({"t": [], "drops": []}, name="drop data")
    drops = plot("frames dropped so far", "frames", height=180)
    drops.line("t", "drops", source=drop_data, color="firebrick")

    hist_data = ColumnDataSource(
        {"qntz_fb": list(range(QNTZ_LEVELS)), "cnms": [0] * QNTZ_LEVELS}, name="qntz data"
    )
    hist = figure(
        title="QntzFb of the CNMs sent so far",
        height=180,
        sizing_mode="stretch_width",
        x_axis_label="QntzFb",
        y_axis_label="CNMs",
        tools="",
    )
    hist.vbar(x="qntz_fb", top="cnms", width=0.9, source=hist_data, color="steelblue")
    return cnms, cnm_data, drops, drop_data, hist, hist_data


def _knob_marks(figures: tuple[Any, ...]) -> list[tuple[Any, float]]:
    """Each knob change is a vertical mark on these figures: their data, and each one's top."""
    from bokeh.models import ColumnDataSource  # noqa: PLC0415

    marks: list[tuple[Any, float]] = []
    for fig in figures:
        data = ColumnDataSource({"t": [], "top": [], "text": []}, name=f"knob marks {len(marks)}")
        fig.segment(
            x0="t", x1="t", y0=0, y1="top", source=data, color="black", line_width=2, alpha=0.7,
        )  # fmt: skip
        fig.text(
            x="t", y="top", text="text", source=data, text_font_size="8pt",
            text_baseline="top", x_offset=3,
        )  # fmt: skip
        marks.append((data, fig.y_range.end))
    return marks


def _status_models() -> tuple[Any, Any, Any]:
    """The run's clock line, the knob changes' log, and the model the browser acknowledges
    each update with."""
    from bokeh.models import CustomJS, Div  # noqa: PLC0415

    clock = Div(text="waiting for the run", name="clock")
    log = Div(text="", name="knob log", styles={"font-family": "monospace"})
    # The browser's acknowledgement of each update: it copies the update's number, set last
    # in the update (after its rows), into `shown`, which Bokeh syncs back.  (A model that
    # draws nothing: a Div's change costs the browser a layout.)
    updates = page_updates_model()(name="updates")
    updates.js_on_change("sent", CustomJS(code="cb_obj.shown = cb_obj.sent"))
    # Once the run is over the server stops: the page keeps its figures, with no
    # reconnection and no "connection lost" banner (the browser's own document config, set
    # silently: the server does not know that model, and a change to it is not synced).
    clock.js_on_change(
        "text",
        CustomJS(
            args={"over": RUN_OVER},
            code="if (cb_obj.text.includes(over)) { cb_obj.document.config.setv("
            "{reconnect_session: false, notify_connection_status: false}, {silent: true}); }",
        ),
    )
    return clock, log, updates


def _knob_rows(feed: LiveFeed, state: PageState, log: Any) -> list[Any]:
    """A row of widgets for each CP port's knobs; a change goes to the run (_on_knob)."""
    from bokeh.layouts import row  # noqa: PLC0415
    from bokeh.models import Div, Select, Spinner  # noqa: PLC0415

    knob_rows = []
    for port in feed.cp_ports:
        cp = feed.params(port)
        widgets = []
        for knob in KNOB_FIELDS:
            name = knob_name(port, knob)
            if knob in SELECT_KNOBS:
                title, options = SELECT_KNOBS[knob]
                widget: Any = Select(
                    title=title, options=list(options), value=widget_value(cp, knob),
                    name=name, width=90, css_classes=[knob_css(port, knob)],
                )  # fmt: skip
            else:
                low, high, step = KNOB_STEPS[knob]
                widget = Spinner(
                    title=knob, low=low, high=high, step=step, value=widget_value(cp, knob),
                    name=name, width=110, mode="int" if knob in WHOLE_KNOBS else "float",
                    css_classes=[knob_css(port, knob)],
                )  # fmt: skip
            state.knobs[(port, knob)] = widget
            widget.on_change("value", _on_knob(feed, state, port, knob, log))
            widgets.append(widget)
        knob_rows.append(row(Div(text=f"<b>CP {port}</b>", width=80), *widgets))
    return knob_rows


def _acknowledged(feed: LiveFeed, state: PageState, number: int) -> None:
    """The browser has taken in update ``number`` (and every one before it)."""
    if number <= state.acked:
        return
    state.acked = number
    t_s = state.shown_t.get(number, state.t_s)
    for k in [k for k in state.shown_t if k <= number]:
        del state.shown_t[k]
    if state.page is not None:
        saw_end = state.end_update is not None and number >= state.end_update
        feed.page_shown(state.page, t_s, saw_end=saw_end)


def _update(feed: LiveFeed, state: PageState, models: PageModels) -> None:
    """One update of the page, when it is due: the rows and knob changes since the last,
    the notes of changes the run could not take, and at the end that the run is over."""
    now = time.monotonic()
    if not state.due(now):
        return
    got, q_eqs = feed.rows_since(state.rows)
    new = feed.changes_since(state.changes)
    notes = feed.notes_since(state.notes)
    over = feed.finished.is_set() and not got and state.end_update is None
    if not (got or new or notes or over):
        return
    if got:
        state.rows += len(got)
        state.t_s = got[-1].t_s
        _stream(got, q_eqs, models.queue, models.rates, models.drops, rollover=models.rollover)
        _cnm_rates(state, got, models.cnms, models.rollover)
        if got[-1].qntz_counts:
            models.hist.data["cnms"] = list(got[-1].qntz_counts)
        models.clock.text = _clock_text(feed, got[-1])
    if new:
        state.changes += len(new)
        for data, top in models.marks:
            data.stream(
                {
                    "t": [c.at_s for c in new],
                    "top": [top] * len(new),
                    "text": [f"{c.port} {c.field} {c.old}->{c.new}" for c in new],
                }
            )
        models.log.text = "<br>".join(
            f"{c.at_s:.3f} s: {c.port} {c.field} {c.old} -> {c.new} ({c.by})"
            for c in feed.changes()[-5:]
        )
    if notes:
        state.notes += len(notes)
        models.log.text = _with_refusal(models.log.text, notes[-1])
    if new or notes:
        _sync_knobs(feed, state)
    if over:
        _show_run_over(state, models)
    state.sent += 1
    state.sent_at = now
    state.shown_t[state.sent] = state.t_s
    if over:
        state.end_update = state.sent
    models.updates.sent = state.sent  # last: the browser echoes it once it has the rest


def _with_refusal(log: str, why: str) -> str:
    """The page's log with ``why`` (a change the run did not take) as its last line, in
    red, in place of the last such line."""
    kept = [ln for ln in log.split("<br>") if ln and "firebrick" not in ln]
    return "<br>".join([*kept, f"<span style='color:firebrick'>{why}</span>"])


def _show_run_over(state: PageState, models: PageModels) -> None:
    """The run is over: the clock says so (and the page stops watching its connection:
    ``_build``), and the knobs are off."""
    models.clock.text += RUN_OVER
    for widget in state.knobs.values():
        widget.disabled = True
    if state.knobs:
        models.log.text = _with_refusal(models.log.text, KNOBS_OFF)


LEGEND_ROW_PX = 21
"""A legend entry's height at 8 pt (Bokeh's 20 px glyph and its spacing)."""
PLOT_CHROME_PX = 75
"""What a plot's title and x axis take of its height."""


def _legend_beside(fig: Any) -> None:
    """``fig``'s legend to the right of its plot, in as many columns as its entries need to
    fit the plot's height: inside it, a legend of 10 sources showed h1 to h6 (the rest cut
    off below the plot)."""
    (legend,) = fig.legend
    fig.center = [r for r in fig.center if r is not legend]
    legend.nrows = max(1, (fig.height - PLOT_CHROME_PX) // LEGEND_ROW_PX)
    legend.location = "top_left"
    legend.label_text_font_size = "8pt"
    legend.label_height = legend.glyph_height = LEGEND_ROW_PX - 5
    legend.spacing = 5
    fig.add_layout(legend, "right")


def _on_knob(
    feed: LiveFeed, state: PageState, port: str, knob: str, log: Any
) -> Callable[[str, Any, Any], None]:
    def changed(_attr: str, old: Any, new: Any) -> None:
        if state.syncing or new == old:
            return
        if new is None:  # an emptied field: the port keeps what it has
            _revert(state, port, knob, old)
            return
        try:
            feed.tune(port, {knob: requested(knob, new)})
        except QcnError as e:
            log.text = _with_refusal(log.text, str(e))
            _revert(state, port, knob, old)

    return changed


def _revert(state: PageState, port: str, knob: str, value: Any) -> None:
    state.syncing = True
    try:
        state.knobs[(port, knob)].value = value
    finally:
        state.syncing = False


def _sync_knobs(feed: LiveFeed, state: PageState) -> None:
    """Show the run's parameters on the knobs (a change from another page or a shell)."""
    state.syncing = True
    try:
        for (port, knob), widget in state.knobs.items():
            value = widget_value(feed.params(port), knob)
            if widget.value != value:
                widget.value = value
    finally:
        state.syncing = False


def _stream(
    got: list[LiveRow],
    q_eqs: list[tuple[float, ...]],
    queue: Any,
    rates: Any,
    drops: Any,
    *,
    rollover: int | None,
) -> None:
    t = [r.t_s for r in got]
    ports = len(got[0].queue_pkts)
    queue.stream(
        {
            "t": t,
            **{f"q{k}": [r.queue_pkts[k] for r in got] for k in range(ports)},
            **{f"e{k}": [e[k] for e in q_eqs] for k in range(ports)},
        },
        rollover,
    )
    n = len(got[0].current_rate_bps)
    rates.stream(
        {
            "t": t,
            **{f"c{i}": [r.current_rate_bps[i] / 1e9 for r in got] for i in range(n)},
            **{f"r{i}": [r.target_rate_bps[i] / 1e9 for r in got] for i in range(n)},
        },
        rollover,
    )
    drops.stream({"t": t, "drops": [r.drops for r in got]}, rollover)


def _cnm_rates(state: PageState, got: list[LiveRow], cnm_data: Any, rollover: int | None) -> None:
    ts, rates = [], []
    for r in got:
        total = sum(r.cnms)
        if state.cnm_anchor is None:
            state.cnm_anchor = (r.t_s, total)
            continue
        t0, n0 = state.cnm_anchor
        if r.t_s - t0 >= CNM_RATE_WINDOW_S - 1e-9:  # (times summed in floats)
            ts.append(r.t_s)
            rates.append((total - n0) / (r.t_s - t0))
            state.cnm_anchor = (r.t_s, total)
    if ts:
        cnm_data.stream({"t": ts, "rate": rates}, rollover)


def _clock_text(feed: LiveFeed, last: LiveRow) -> str:
    phase = next(
        (p for p in feed.phases if p.from_s <= last.t_s < p.to_s),
        feed.phases[-1] if feed.phases else None,
    )
    where = f"phase {phase.text()}" if phase else ""
    held = f"; {feed.held_s:.1f} s waiting for its page" if feed.held_s >= 0.05 else ""
    speed = "" if feed.speed is None else f" (x{feed.speed:g} of real time{held})"
    drops = f"drops {last.drops}"
    return f"<b>t = {last.t_s:.3f} s</b>{speed} &nbsp; {where} &nbsp; {drops}"


# -- the server --------------------------------------------------------------------------------


class LiveServer:
    """The Bokeh server of one feed, in its own thread: :meth:`start`, :meth:`stop`
    (which frees its port and closes every page's connection)."""

    def __init__(self, feed: LiveFeed, port: int = 0) -> None:
        self.feed = feed
        self.requested_port = port
        self.port = 0
        self.thread_id = 0
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: Any = None
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> str:
        """Serve the page; its URL."""
        try:
            import bokeh  # noqa: F401, PLC0415
        except ImportError:
            raise LiveViewError(
                "--live needs Bokeh (pip install bokeh, or make venv: it is a dependency)"
            ) from None
        self._thread = threading.Thread(target=self._serve, name="qcn-live", daemon=True)
        self._thread.start()
        self._ready.wait(STOP_TIMEOUT_S)
        if self._failure is not None:
            self._thread.join(STOP_TIMEOUT_S)
            raise LiveViewError(f"the live view cannot start: {self._failure}")
        return self.url

    def _serve(self) -> None:
        if self.feed.yields_to_network:
            demote_this_thread()
        self.thread_id = threading.get_native_id()
        try:
            from bokeh.application import Application  # noqa: PLC0415
            from bokeh.application.handlers.function import FunctionHandler  # noqa: PLC0415
            from bokeh.server.server import BaseServer  # noqa: PLC0415
            from bokeh.server.tornado import BokehTornado  # noqa: PLC0415
            from tornado.httpserver import HTTPServer  # noqa: PLC0415
            from tornado.ioloop import IOLoop  # noqa: PLC0415
            from tornado.netutil import bind_sockets  # noqa: PLC0415

            asyncio.set_event_loop(asyncio.new_event_loop())
            loop = IOLoop.current()
            sockets = bind_sockets(self.requested_port, "127.0.0.1")
            self.port = sockets[0].getsockname()[1]
            origins = [f"127.0.0.1:{self.port}", f"localhost:{self.port}"]
            app = BokehTornado(
                {"/": Application(FunctionHandler(make_document(self.feed)))},
                extra_websocket_origins=origins,
                check_unused_sessions_milliseconds=SESSION_CHECK_MS,
                unused_session_lifetime_milliseconds=SESSION_LINGER_MS,
            )
            http = HTTPServer(app)
            http.add_sockets(sockets)
            self._server = BaseServer(loop, app, http)
            self._server.start()
            self._loop = loop
        except BaseException as e:
            self._failure = e
            self._ready.set()
            return
        self._ready.set()
        loop.start()
        loop.close(all_fds=True)

    def stop(self, *, wait_for_pages: bool = False) -> None:
        """Stop serving: the port is free and no page holds a connection once it returns.
        With ``wait_for_pages``, once every open page has shown that the run is over (at
        most :data:`END_WAIT_S`): a page behind the run is not cut off at its end."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        if wait_for_pages:
            self.feed.finished.set()
            self.feed.wait_for_pages_to_end(END_WAIT_S)

        def shut() -> None:
            with contextlib.suppress(Exception):
                self._server.stop()
            loop.stop()

        loop.add_callback(shut)
        thread.join(STOP_TIMEOUT_S)
        self._loop = None


@contextlib.contextmanager
def serving(feed: LiveFeed, port: int = 0, say: Callable[[str], None] = print) -> Iterator[str]:
    """The live view of ``feed`` while the block runs; stopped however the block ends."""
    server = LiveServer(feed, port)
    url = server.start()
    say(url)
    try:
        yield url
    except BaseException:  # Ctrl-C, a failure: stop now
        feed.finished.set()
        server.stop()
        raise
    server.stop(wait_for_pages=True)
