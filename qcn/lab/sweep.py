"""`qcn sweep`: a parameter study — every point of a grid of scenario overrides, times random
seeds — run in parallel on Dask distributed, with the results gathered.

    qcn sweep robustness --grid network.rtt_s=10e-6,200e-6 --grid network.sources=2,10 \\
        --seeds 3 [--backend sim|mininet] [--workers N] [--address tcp://HOST:8786] [--out DIR]

Each point's results are written as `qcn run` writes them, in ``OUT/points/KEY/``; the
table of every point's summary is ``OUT/sweep.csv`` and ``OUT/sweep.parquet``; plots of each
metric against the grid's axes (a line for one axis, a heatmap for two) are
``OUT/METRIC.png``.

The axis ``qcn`` (``--grid qcn=true,false``) is no scenario field: its points run with QCN
and without it (``qcn run --no-qcn``), so a grid can set schemes against no control at all.

**Resumable.** A point's KEY hashes the scenario's content, the point's overrides, its seed,
the backend and the code's version (the project's sources): a point whose directory holds a
complete result with that key is not run again. Ctrl-C keeps every finished point (the table
is rewritten as each one lands).

**The engine** is Dask distributed: by default a local cluster of ``--workers`` processes on
this machine; ``--address`` joins an existing cluster (``dask scheduler`` and ``dask worker``
on any machines) with no other change. Workers compute and return the run's Trace; this
process writes every file, so workers need no shared file system. A point whose worker dies
is rescheduled by the scheduler. On the Mininet backend points run one at a time here: one
BMv2 network per machine.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import hashlib
import io
import itertools
import json
import logging
import math
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qcn.core import provenance, publish
from qcn.core import scenario as scenarios
from qcn.core.errors import QcnError
from qcn.core.progress import ProgressLine
from qcn.core.publish import PARTIAL_MARKER
from qcn.core.resources import check_local_workers, check_points
from qcn.core.results import FLOW_KEYS, SUMMARY_KEYS, json_safe
from qcn.core.scenario import Scenario
from qcn.core.signals import children_spared_ctrl_c, interrupts_deferred
from qcn.core.tomlfile import toml_value
from qcn.core.trace import Trace
from qcn.lab import backends
from qcn.lab.inputs import (
    check_count,
)

#: The figures plotted against the grid (those a point's summary has).
PLOT_METRICS = (
    "recovery_ms",
    "queue_mean_pkts",
    "queue_std_pkts",
    "queue_std_episode_pkts",
    "drops",
    "jain_fairness",
    "jain_sent",
    "utilization",
    *FLOW_KEYS,
)
#: Where the code's version comes from: every source file that decides a point's result.
VERSIONED = ("qcn", "simulator", "reaction_point", "topologies", "controller", "p4src")
_ROOT = Path(__file__).resolve().parents[2]


class SweepError(QcnError):
    """A mistake in a sweep's grid, seeds, workers or engine address."""


# -- the points ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One run of the sweep: the base scenario with ``overrides``, at random ``seed``."""

    overrides: tuple[tuple[str, Any], ...]
    seed: int
    key: str

    @property
    def label(self) -> str:
        values = ", ".join(f"{k}={v}" for k, v in self.overrides)
        return f"{values}{', ' if values else ''}seed {self.seed}"


QCN_AXIS = "qcn"
"""The grid key that runs points with QCN (true) or without it (false)."""


def with_qcn(overrides: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether a point runs with QCN (its ``qcn`` axis, else true), and its scenario
    overrides without that axis."""
    rest = {k: v for k, v in overrides.items() if k != QCN_AXIS}
    return bool(overrides.get(QCN_AXIS, True)), rest


def parse_grid(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` with TOML values (``10e-6``, ``true``, ``"dequeue"``)."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise SweepError(f"--grid {text!r}: expected KEY=V1,V2,...")
    return grid_axis(
        key, [toml_value(raw, SweepError, f"--grid {key}") for raw in values.split(",")]
    )


def grid_axis(key: str, values: list[Any]) -> tuple[str, list[Any]]:
    """One axis of the grid, checked: a value at least, each once, the ``qcn`` axis true
    and false."""
    out = list(values)
    if not key or not out:
        raise SweepError(f"--grid {key}: expected KEY=V1,V2,...")
    # 1 and 1.0 are one point: numbers compare by value.
    same = [
        float(v) if isinstance(v, int | float) and not isinstance(v, bool) else repr(v) for v in out
    ]
    if len(set(same)) != len(same):
        raise SweepError(f"--grid {key}: a value is listed twice")
    if key == QCN_AXIS and not all(isinstance(v, bool) for v in out):
        raise SweepError(f"--grid {key}: its values are true and false (with and without QCN)")
    return key, out


DASK_SCHEMES = ("tcp", "tls", "inproc", "ucx", "ws", "wss")
SCHEDULER_TIMEOUT_S = 10.0
"""How long a scheduler given by ``--address`` may take to answer."""


def check_address(address: str | None) -> None:
    """``--address`` must name a Dask scheduler: [SCHEME://]HOST:PORT."""
    if address is not None:
        _address_parts(address)


def _address_parts(address: str) -> tuple[str, str, int]:
    """A scheduler address's scheme ("tcp" if none), host and port, or the one-line error."""
    scheme, sep, rest = address.partition("://")
    host, colon, port = (rest if sep else address).rpartition(":")
    if (sep and scheme not in DASK_SCHEMES) or not colon or not host or not port.isdigit():
        raise SweepError(
            f"--address {address!r}: expected a Dask scheduler's [SCHEME://]HOST:PORT, "
            "e.g. tcp://10.0.0.5:8786"
        )
    if not 1 <= int(port) <= 65535:
        raise SweepError(f"--address {address!r}: port must be in [1, 65535]")
    return (scheme if sep else "tcp"), host.strip("[]"), int(port)


def scheduler_refused(address: str) -> OSError | None:
    """A TCP scheduler address whose host refuses the connection (nothing listens there):
    said at once, where Dask's client would retry it for its whole timeout."""
    scheme, host, port = _address_parts(address)
    if scheme != "tcp":
        return None
    try:
        with socket.create_connection((host, port), timeout=SCHEDULER_TIMEOUT_S):
            return None
    except ConnectionRefusedError as e:
        return e
    except OSError:
        return None  # (unreachable or slow: the client's own wait decides)


@functools.cache
def code_version() -> str:
    """A hash of the sources that decide a point's result (so a code change reruns it).
    Read once per process: a sweep of 3,000 seeds hashed every source file for each point,
    some 17 ms a point, and printed nothing for over 40 s."""
    h = hashlib.sha256()
    for top in VERSIONED:
        for path in sorted((_ROOT / top).rglob("*")):
            if path.suffix in (".py", ".p4", ".toml") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(_ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


def input_hashes(sc: Scenario, memo: dict[Path, str] | None = None) -> dict[str, str]:
    """What a point's result depends on besides its scenario's fields: the content of the
    files they name (a topology file, a flows workload's CDF file), as ``qcn run --again``
    checks them (:func:`qcn.core.provenance.input_digests`).  A key on the path alone kept
    a point's stale figures after the file was edited (slowdown p50 1.11 where the edited
    CDF gives 1.88; queue mean 36.0 where the edited topology file gives 42.8)."""
    try:
        return provenance.input_digests(sc, memo)
    except provenance.ProvenanceError as e:
        raise SweepError(str(e)) from None


def point_key(
    base: dict[str, Any],
    overrides: dict[str, Any],
    seed: int,
    backend: str,
    inputs: dict[str, str] | None = None,
) -> str:
    """A point's key: everything that decides its result (the scenario, the point's
    overrides, its seed, the backend, the code, and the content of the files it reads)."""
    blob = json.dumps(
        {"scenario": base, "overrides": overrides, "seed": seed, "backend": backend,
         "code": code_version(), "inputs": inputs or {}},
        sort_keys=True, default=repr,
    )  # fmt: skip
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def make_points(
    sc: Scenario, grids: list[tuple[str, list[Any]]], seeds: int, backend: str
) -> list[Point]:
    """Every combination of the grid's values, for seeds 1..``seeds``; each is checked (a
    bad value is an error before anything runs)."""
    base = sc.to_dict()
    keys = [k for k, _ in grids]
    if len(set(keys)) != len(keys):
        raise SweepError("each --grid KEY may be given once")
    points = []
    digests: dict[Path, str] = {}  # (each file read once)
    for values in itertools.product(*(v for _, v in grids)):
        overrides = dict(zip(keys, values, strict=True))
        try:
            point_sc = sc.with_overrides(with_qcn(overrides)[1])
        except QcnError as e:
            raise SweepError(f"--grid: {e}") from None
        inputs = input_hashes(point_sc, digests)
        for seed in range(1, seeds + 1):
            key = point_key(base, overrides, seed, backend, inputs)
            points.append(Point(tuple(overrides.items()), seed, key))
    return points


def point_scenario(sc: Scenario, overrides: dict[str, Any], *, scaled: bool) -> Scenario:
    """The scenario a point runs: the base with its overrides (the ``qcn`` axis aside),
    scaled for BMv2 if asked (its figures are then in BMv2's time, as `qcn run` reports
    them)."""
    fields = with_qcn(overrides)[1]
    out = sc.with_overrides(fields)
    return out.scaled_for_bmv2(keep=fields.keys()) if scaled else out


def run_point(
    base: dict[str, Any],
    overrides: dict[str, Any],
    seed: int,
    scaled: bool,
    backend: str = backends.ANYWHERE.name,
) -> tuple[Trace, float]:
    """Run one point (on a worker): its Trace and the seconds it computed.  What the run
    keeps besides its Trace (a Mininet run's logs) goes to a temporary directory of the
    worker's machine."""
    began = time.perf_counter()
    sc = scenarios.parse(base, where=str(base.get("name")))
    _clean_up_after_the_dead()
    with publish.scratch() as d:
        unit = backends.by_name(backend)
        trace = run_point_here(sc, overrides, seed=seed, scaled=scaled, backend=unit, out=d)
    return trace, time.perf_counter() - began


@functools.cache
def _clean_up_after_the_dead() -> None:
    """Once a worker process: the scratch directories of points whose process was killed
    (on a cluster's machines as on this one)."""
    publish.remove_dead_scratch()


def run_point_here(
    sc: Scenario,
    overrides: dict[str, Any],
    *,
    seed: int,
    scaled: bool,
    backend: backends.Backend,
    out: Path,
) -> Trace:
    """One point on ``backend`` here, scaled as `qcn run` scales it (a backend in BMv2's
    units always, the simulator with ``scaled``); its logs and captures in ``out``."""
    point_sc = point_scenario(sc, overrides, scaled=scaled or backend.in_bmv2_units)
    options = backends.RunOptions(
        qcn=with_qcn(overrides)[0],
        seed=seed,
        scaled_by=_scaled_by(sc, scaled, backend),
        say=lambda _m: None,
    )
    return backends.run_scenario(point_sc, backend, out, options)


def _scaled_by(sc: Scenario, scaled: bool, backend: backends.Backend) -> float | None:
    """RunOptions.scaled_by of a point: the time scale where a simulation models BMv2's run."""
    return sc.bmv2.time_scale if scaled and not backend.in_bmv2_units else None


# -- the results ---------------------------------------------------------------------------


def put_in_place(stage: Path, place: Path) -> None:
    """A point written into ``stage`` put at ``place`` whole, over whatever a damaged one
    left there (:func:`qcn.core.publish.publish`).  Where another sweep or study into the
    same ``--out`` put this very point there meanwhile, theirs stays and this one goes: a
    point is a function of its key.  (Two identical sweeps at once: one said "cannot write
    the results in OUT: No such file or directory".)"""
    try:
        publish.publish(stage, place, replace=True)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT) or not place.is_dir():
            raise
        shutil.rmtree(stage, ignore_errors=True)
        # (the old results it had renamed aside, if it got that far: this process's own)
        publish.remove_own(publish.old_path(place))


MANIFEST = "sweep.json"
"""What sweep an ``--out`` holds (Store.prepare)."""


def _describe(identity: Any) -> str:
    """A sweep's identity in a few words, for the refusal."""
    if not isinstance(identity, dict):
        return "its sweep.json is unreadable"
    scenario = identity.get("scenario")
    name = scenario.get("name") if isinstance(scenario, dict) else None
    grid = identity.get("grid") or []
    axes = ", ".join(str(g[0]) for g in grid if isinstance(g, list) and g)
    return f"of {name}, grid {axes or 'none'}, {identity.get('seeds')} seed(s)"


class Store:
    """A sweep's output directory: one folder per point, the table, the plots."""

    manifest = MANIFEST
    """The file that says which sweep (or study: qcn.lab.tune) the directory holds."""
    kind = "sweep"
    """What its folder holds (qcn.core.publish.KINDS)."""
    error: type[QcnError] = SweepError

    def describe(self, identity: Any) -> str:
        """What the directory holds, in a few words (for the refusal)."""
        return _describe(identity)

    def same(self, held: Any, identity: dict[str, Any]) -> bool:
        """Whether the manifest's ``held`` identity is this one's."""
        return bool(held == identity)

    def other(self, held: Any, identity: dict[str, Any]) -> str:  # noqa: ARG002 - a study's
        """The refusal's words on what ``out`` holds instead of ``identity`` (``held``)."""
        return f" ({self.describe(held)})"

    def without_manifest(self) -> None:
        """An ``out`` of this kind without its manifest: taken (a study refuses it)."""

    def __init__(
        self,
        out: Path,
        sc: Scenario,
        grid_keys: list[str],
        *,
        scaled: bool,
        point_plots: bool = True,
        overrides: dict[str, Any] | None = None,
        address: str | None = None,
    ) -> None:
        self.out, self.sc, self.grid_keys, self.scaled = out, sc, grid_keys, scaled
        self.point_plots = point_plots
        self.overrides = dict(overrides or {})
        """The command line's fixed overrides (each point's provenance keeps them)."""
        self.address = address
        """The Dask scheduler whose workers compute the points (None: this machine's)."""
        self.rows: dict[str, dict[str, Any]] = {}
        self.corrupted: list[str] = []
        """Points whose results on disk were damaged (run again)."""

    def point_dir(self, p: Point) -> Path:
        return self.out / "points" / p.key

    def prepare(self, identity: dict[str, Any]) -> None:
        """Make ``out`` ready for this sweep (``identity``: what makes it this one, kept in
        sweep.json); an ``out`` holding another sweep is refused, so that its table and
        points are never mixed with this one's."""
        # Another command's folder, or a user's, is refused: a study's runs were mixed into
        # a sweep's points/, and a run's run.toml replaced.
        publish.check_results_folder(self.out, self.error, kind=self.kind)
        manifest = self.out / self.manifest
        for name in (self.manifest, "sweep.csv", "sweep.parquet", "points"):
            path = self.out / name
            kind = path.is_dir() if name == "points" else path.is_file()
            if path.exists() and not kind:
                what = "a directory" if name == "points" else "a file"
                raise self.error(f"--out {self.out}: {name} is not {what}; remove it")
        identity = json.loads(json.dumps(identity))  # as it reads back (lists, not tuples)
        if manifest.is_file():
            try:
                held = json.loads(manifest.read_text())
            except (OSError, ValueError, RecursionError):
                held = None
            if not self.same(held, identity):
                raise self.error(
                    f"--out {self.out} holds another {self.kind}{self.other(held, identity)}; "
                    "choose another --out for this one"
                )
        else:
            self.without_manifest()
        try:
            (self.out / "points").mkdir(parents=True, exist_ok=True)
            publish.mark_results(self.out, self.kind)
            self.clean_leftovers()
            publish.write_atomic(manifest, json.dumps(identity, indent=1) + "\n")
        except OSError as e:
            raise self.error(
                f"--out {self.out}: cannot write results there ({e.strerror})"
            ) from None

    def done(self, p: Point) -> bool:
        """A complete result of this very point (same key) is on disk; its row is loaded.
        A point cut short (its PARTIAL marker) runs again.  A point damaged on disk (its
        directory a file, its summary a directory or no report, a figure of another type
        than a number) is removed, counted in ``corrupted``, and runs again: a summary made
        a directory used to fail every rerun with "Is a directory", and a string in a
        figure ended the table's writing with pyarrow's traceback."""
        d = self.point_dir(p)
        if d.exists() and not d.is_dir():
            d.unlink()
            self.corrupted.append(p.label)
            return False
        summary_path = d / "summary.json"
        if (d / PARTIAL_MARKER).exists() or not summary_path.exists():
            return False
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, ValueError, RecursionError):
            summary = None
        if not isinstance(summary, dict) or not figures_are_numbers(summary):
            shutil.rmtree(d, ignore_errors=True)
            self.corrupted.append(p.label)
            return False
        if summary.get("sweep_key") != p.key:
            return False
        self.rows[p.key] = self._row(p, summary)
        return True

    def staging(self, p: Point) -> Path:
        """A fresh directory to write point ``p`` into (published by :meth:`write_point`)."""
        stage = publish.staging_path(self.point_dir(p))
        if not publish.remove_own(stage):
            raise SweepError(f"--out {self.out}: {stage} is in the way (not this sweep's)")
        publish.make_staging(stage)
        return stage

    def write_point(
        self, p: Point, trace: Trace, *, backend: backends.Backend, staging: Path | None = None
    ) -> None:
        """Record point ``p`` into ``staging`` (its own fresh one if None), then put it in
        the point's place whole (qcn.core.publish), whatever a damaged one left there."""
        sc = point_scenario(self.sc, dict(p.overrides), scaled=self.scaled)
        qcn = with_qcn(dict(p.overrides))[0]
        # The options the point ran with (run_point's), for its provenance.
        scaled_by = _scaled_by(self.sc, self.scaled, backend)
        ran_on = None
        if self.address:
            ran_on = {
                **backends.environment(backend),
                "computed_on": f"a worker of the Dask scheduler at {self.address} (the "
                "versions and machine above are those of the machine that recorded it)",
            }
        stage = staging or self.staging(p)
        try:
            (stage / PARTIAL_MARKER).write_text("this point's results are being written\n")
            summary, _plots = backends.record(
                stage,
                sc,
                trace,
                backend,
                backends.RunOptions(qcn=qcn, seed=p.seed, scaled_by=scaled_by),
                plots=self.point_plots,
                extra={"sweep_key": p.key, "sweep_overrides": dict(p.overrides)},
                overrides={**self.overrides, **dict(p.overrides)},
                ran_on=ran_on,
            )
            (stage / PARTIAL_MARKER).unlink()
            put_in_place(stage, self.point_dir(p))
        except BaseException:
            if staging is None:  # (its own: nothing in it is worth keeping; a full disk
                shutil.rmtree(stage, ignore_errors=True)  # left it in points/)
            raise
        self.rows[p.key] = self._row(p, json_safe(summary))

    def clean_leftovers(self) -> None:
        """What points of a sweep killed outright left being written (``.KEY.partial-PID``)
        or replaced (``.KEY.old-PID``): a point's partial results go (the point runs again,
        with the same result: it is a function of its key), old ones are restored if their
        point's place is empty, else removed."""
        for path, name, kind, _pid in publish.dead_leftovers(self.out / "points"):
            if kind == "old" and not os.path.lexists(path.with_name(name)):
                path.rename(path.with_name(name))
            else:
                shutil.rmtree(path, ignore_errors=True)

    def _row(self, p: Point, summary: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"key": p.key, "seed": p.seed}
        row |= {k: v for k, v in p.overrides}
        for k, v in summary.items():
            if k not in row and (v is None or isinstance(v, int | float | str | bool)):
                row[k] = v
        return row

    def write_table(self) -> tuple[Path, Path]:
        """sweep.csv and sweep.parquet: one row per finished point, in key order."""
        import pyarrow as pa  # noqa: PLC0415 - only a sweep needs it
        import pyarrow.parquet as pq  # noqa: PLC0415

        rows = [self.rows[k] for k in sorted(self.rows)]
        columns: list[str] = []
        for r in rows:
            columns += [c for c in r if c not in columns]
        csv_path, parquet_path = self.out / "sweep.csv", self.out / "sweep.parquet"
        # Each whole, through a file of this process's own: two sweeps to one --out shared
        # sweep.csv.tmp, and one found it gone ("No such file or directory"); a full disk
        # left it behind.
        text = io.StringIO()
        w = csv.DictWriter(text, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
        publish.write_atomic(csv_path, text.getvalue(), durable=False)
        table = pa.table({c: _column([r.get(c) for r in rows]) for c in columns})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        publish.write_atomic(parquet_path, sink.getvalue().to_pybytes(), durable=False)
        return csv_path, parquet_path

    def plot(self) -> list[Path]:
        """Each metric against the first one or two grid axes (means over the seeds and any
        further axes): a line with the seeds' range for one axis, a heatmap for two."""
        if not self.grid_keys or not self.rows:
            return []
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415

        axes = self.grid_keys[:2]
        paths = []
        for metric in PLOT_METRICS:
            cells, never = metric_cells(list(self.rows.values()), metric, axes)
            if not any(cells.values()):
                continue
            title = f"{self.sc.name} ({self.sc.preset})"
            if len(axes) == 1:
                fig = line_figure(cells, axes[0], metric, title)
            else:
                fig = heatmap_figure(cells, never, axes, metric, title)
            path = self.out / f"{metric}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            paths.append(path)
        return paths


METRIC_NAMES = {
    "recovery_ms": "recovery time (ms)",
    "queue_mean_pkts": "mean queue (packets)",
    "queue_std_pkts": "queue's standard deviation (packets)",
    "queue_std_episode_pkts": "queue's standard deviation in the episode (packets)",
    "drops": "frames dropped",
    "jain_fairness": "Jain's index, delivered / fair share",
    "jain_sent": "Jain's index over sent rates",
    "utilization": "bottleneck utilization",
    "flows_unfinished": "flows unfinished",
    **{
        f"slowdown_{size}_{stat}": f"{size} flows' {stat} slowdown"
        for size in ("short", "long")
        for stat in ("mean", "p50", "p99")
    },
}
"""Each plotted metric's name on an axis: words and a unit, not summary.json's key."""

UNIT_SUFFIXES = {"_ms": "ms", "_s": "s", "_bps": "b/s", "_bytes": "B", "_pkts": "packets"}
"""A scenario field's unit, from the end of its name (network.rtt_s is in seconds)."""
SI_UNITS = ("s", "b/s", "B")
"""The units whose ticks read best with an SI prefix (25 µs, not 0.000025)."""


def quantity_unit(key: str) -> str:
    """The unit a scenario field's or metric's name ends in ("" for none)."""
    return next((u for suffix, u in UNIT_SUFFIXES.items() if key.endswith(suffix)), "")


def quantity_label(key: str) -> str:
    """An axis label for ``key``: a metric's name, or a grid field with its unit."""
    if key in METRIC_NAMES:
        return METRIC_NAMES[key]
    unit = quantity_unit(key)
    return f"{key} ({unit})" if unit else key


def tick_text(key: str) -> Callable[[Any], str]:
    """How a tick of ``key``'s values reads: with an SI prefix for seconds, rates and bytes
    (matplotlib's EngFormatter: 25 µs), else as the number is."""
    from matplotlib.ticker import EngFormatter  # noqa: PLC0415

    unit = quantity_unit(key)
    if unit in SI_UNITS:
        eng = EngFormatter(unit=unit)
        return lambda x: (
            eng(x) if isinstance(x, int | float) and not isinstance(x, bool) else str(x)
        )
    return lambda x: f"{x:g}" if isinstance(x, float) else str(x)


def line_figure(
    cells: dict[tuple[Any, ...], list[float]], axis: str, metric: str, title: str
) -> Any:
    """A metric against one grid axis: each value's mean over the seeds, and error bars
    from the seeds' smallest to their largest (the legend says so)."""
    import matplotlib.pyplot as plt  # noqa: PLC0415
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = sorted((c for c in cells if cells[c]), key=lambda c: c[0])
    means = [sum(cells[x]) / len(cells[x]) for x in xs]
    lo = [m - min(cells[x]) for m, x in zip(means, xs, strict=True)]
    hi = [max(cells[x]) - m for m, x in zip(means, xs, strict=True)]
    seeds = max(len(cells[x]) for x in xs)
    label = f"mean of {seeds} seeds; bars: smallest to largest" if seeds > 1 else "one seed"
    ax.errorbar([x[0] for x in xs], means, yerr=[lo, hi], marker="o", capsize=3, label=label)
    text = tick_text(axis)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: text(x)))
    ax.set(xlabel=quantity_label(axis), ylabel=quantity_label(metric), title=title)
    ax.legend(loc="best")
    fig.tight_layout()
    return fig


def heatmap_figure(
    cells: dict[tuple[Any, ...], list[float]],
    never: dict[tuple[Any, ...], int],
    axes: list[str],
    metric: str,
    title: str,
) -> Any:
    """A metric over two grid axes: each cell's mean over the seeds, written in it."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = sorted({c[0] for c in cells})
    ys = sorted({c[1] for c in cells})
    grid = [
        [sum(cells[(x, y)]) / len(cells[(x, y)]) if cells.get((x, y)) else math.nan for x in xs]
        for y in ys
    ]
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(xs)), [tick_text(axes[0])(x) for x in xs])
    ax.set_yticks(range(len(ys)), [tick_text(axes[1])(y) for y in ys])
    for j, row in enumerate(grid):
        for i, v in enumerate(row):
            n_inf = never.get((xs[i], ys[j]), 0)
            text = f"{v:.3g}" if math.isfinite(v) else ""
            if n_inf:  # seeds with no finite figure (e.g. never recovered)
                text = f"{text} ({n_inf}x inf)".strip()
            if text:
                ax.text(i, j, text, ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im, ax=ax, label=quantity_label(metric))
    ax.set(
        xlabel=quantity_label(axes[0]),
        ylabel=quantity_label(axes[1]),
        title=f"{title}: mean over seeds",
    )
    fig.tight_layout()
    return fig


def metric_cells(
    rows: list[dict[str, Any]], metric: str, axes: list[str]
) -> tuple[dict[tuple[Any, ...], list[float]], dict[tuple[Any, ...], int]]:
    """A metric's finite values per cell of the grid's ``axes``, and per cell how many seeds
    gave an infinite one (no recovery within the run): those are not averaged in, but shown."""
    cells: dict[tuple[Any, ...], list[float]] = {}
    never: dict[tuple[Any, ...], int] = {}
    for r in rows:
        v = r.get(metric)
        if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
            continue
        key = tuple(r[a] for a in axes)
        values = cells.setdefault(key, [])
        if math.isinf(v):
            never[key] = never.get(key, 0) + 1
        else:
            values.append(float(v))
    return cells, never


def figures_are_numbers(summary: dict[str, Any]) -> bool:
    """Whether a point's headline figures (those the table and the plots take) are numbers
    or null, as a run writes them."""
    return all(
        summary.get(k) is None
        or (isinstance(summary[k], int | float) and not isinstance(summary[k], bool))
        for k in (*SUMMARY_KEYS, *PLOT_METRICS)
    )


def _cell(v: Any) -> Any:
    """Parquet columns need one type: numbers as floats, anything else as text."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float):
        return float(v)
    return str(v)


def _column(values: list[Any]) -> list[Any]:
    """One column's cells (:func:`_cell`); a column whose cells are of several kinds (a
    number here, text there) is text throughout, as pyarrow takes one type a column."""
    cells = [_cell(v) for v in values]
    kinds = {type(c) for c in cells if c is not None}
    if len(kinds) > 1:
        return [None if c is None else str(c) for c in cells]
    return cells


# -- the engine ----------------------------------------------------------------------------


DASK_LOG = "dask.log"
"""Dask's own log, in a sweep's or a study's ``--out``: what its scheduler, nannies and
workers say (a point's failure among it: "Compute Failed ... Traceback", 19-23 lines of it
before the one-line error), kept out of the terminal; kept only when an error's line names
it (:func:`dask_said`)."""
_DASK_LOG_ENV = "QCN_DASK_LOG"
"""Where a local cluster's workers write their standard error (:func:`dask_setup`)."""
_LOGGERS = ("distributed", "tornado", "asyncio", "bokeh")


@contextlib.contextmanager
def dask_client(address: str | None, workers: int, log: Path | None = None) -> Iterator[Any]:
    """A client of the cluster at ``address``, or of a local cluster of ``workers``
    single-threaded worker processes (each simulation is single-threaded Python); Dask's
    log to ``log`` (:data:`DASK_LOG`), not the terminal."""
    from distributed import Client  # noqa: PLC0415

    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    if address:
        try:
            if (refused := scheduler_refused(address)) is not None:
                raise refused
            client = Client(address, timeout=f"{SCHEDULER_TIMEOUT_S:g}s")
        except OSError as e:
            raise SweepError(
                f"--address {address}: no Dask scheduler answers there ({e})"
            ) from None
        try:
            with dask_logged_to(log):
                yield client
        finally:
            client.close()
        return
    with dask_logged_to(log):
        publish.remove_dead_scratch()  # (what points in flight left when a run was killed)
        yield from _local_cluster(workers, log)


def _local_cluster(workers: int, log: Path | None) -> Iterator[Any]:
    """A client of a local cluster of ``workers`` processes, closed after, whatever comes."""
    from distributed import Client, LocalCluster  # noqa: PLC0415

    cluster: Any = None
    local: Any = None
    try:
        # An interrupt while the workers start waits until they have (a cluster cut half-way
        # cannot be closed), and then the cluster is closed below.  The workers never see
        # Ctrl-C from a terminal: this process ends them.
        with interrupts_deferred(), children_spared_ctrl_c():
            cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # (an HTTP server of its own on any free port of loopback: on 8787 beside
                # another cluster, Dask warned on the terminal)
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.ERROR,
                preload=[__name__],  # (dask_setup: the workers' log)
                env={_DASK_LOG_ENV: str(log)} if log else {},
            )
        # The scheduler (in this process) hooks a diagnosis into Python's garbage collector:
        # a Ctrl-C or SIGTERM whose KeyboardInterrupt fell inside that hook was printed as
        # "Exception ignored" and lost, and the sweep ran on to its end (exit 0).
        from distributed.gc import disable_gc_diagnosis  # noqa: PLC0415

        disable_gc_diagnosis(force=True)
        local = Client(cluster)
        yield local
    finally:
        # A second Ctrl-C waits until the cluster is closed (pressed twice, it printed 210
        # lines and 12 tracebacks); a cluster that fails to close says so in the log.
        with interrupts_deferred():
            for closing in (local, cluster):
                try:
                    if closing is not None:
                        closing.close()
                except Exception:  # (the run's own outcome stands)
                    logging.getLogger("distributed").exception("closing the cluster")


@contextlib.contextmanager
def dask_logged_to(path: Path | None) -> Iterator[None]:
    """Dask's log in this process (its scheduler's and nannies') to ``path`` for the block,
    not the terminal; removed after unless an error's line named it (:func:`dask_said`):
    what a cluster says while it closes on Ctrl-C (a worker's heartbeat cut short) is no
    news, and was left in ``--out``."""
    if path is None:
        yield
        return
    handler = logging.FileHandler(path, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    loggers = _dask_loggers()
    saved = [(x.handlers, x.propagate) for x in loggers], logging.raiseExceptions
    for x in loggers:
        x.handlers, x.propagate = [handler], False
    logging.raiseExceptions = False  # (a full disk: not "--- Logging error ---" on the terminal)
    try:
        yield
    finally:
        for x, (handlers, propagate) in zip(loggers, saved[0], strict=True):
            x.handlers, x.propagate = handlers, propagate
        logging.raiseExceptions = saved[1]
        handler.close()
        if path not in _NAMED:
            with contextlib.suppress(OSError):
                path.unlink()
        _NAMED.discard(path)


def _dask_loggers() -> list[logging.Logger]:
    """The loggers of :data:`_LOGGERS` and each one below them that prints on its own:
    Dask's configuration gives ``tornado.application`` (and ``distributed.client``...) a
    handler of its own on stderr, and a second Ctrl-C mid-study printed Dask's NameError
    traceback through it (CI, 2026-11-28)."""
    below = [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.split(".")[0] in _LOGGERS and "." in name
    ]
    return [logging.getLogger(name) for name in _LOGGERS] + [
        x for x in below if x.handlers or not x.propagate
    ]


_NAMED: set[Path] = set()
"""Dask's logs an error's line named (:func:`dask_said`): kept."""


def dask_said(path: Path | None) -> str:
    """Where Dask's log is, for an error's line (:data:`DASK_LOG`), if it holds anything;
    then it is kept.  Called in :func:`dask_client`'s block."""
    try:
        if path is None or not path.stat().st_size:
            return ""
    except OSError:
        return ""
    _NAMED.add(path)
    return f" (Dask's log: {path})"


def dask_setup(worker: Any) -> None:  # noqa: ARG001 - Dask's preload interface
    """A local cluster's worker as it starts (a Dask preload: :func:`dask_client` names this
    module): its standard error, where Dask's log and any traceback of its go, is the log
    file its sweep or study names (a full disk, or no file: the terminal's, as it was)."""
    path = os.environ.get(_DASK_LOG_ENV)
    if not path:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        return
    os.dup2(fd, 2)
    os.close(fd)
    logging.raiseExceptions = False


@dataclass
class SweepReport:
    points: int
    ran: int
    skipped: int
    wall_s: float
    compute_s: float
    """Seconds the points computed, summed over workers (for the engine's overhead)."""
    table: tuple[Path, Path] | None
    plots: list[Path]
    startup_s: float = 0.0
    """Seconds to start (or join) the cluster."""
    loop_s: float = 0.0
    """Seconds from the first submission to the last point's result written."""


def sweep(
    sc: Scenario,
    grids: list[tuple[str, list[Any]]],
    *,
    seeds: int = 1,
    backend: str = backends.ANYWHERE.name,
    workers: int = 2,
    address: str | None = None,
    out: Path,
    scaled: bool = False,
    quiet: bool = False,
    point_plots: bool = True,
    say: Any = print,
    overrides: dict[str, Any] | None = None,
) -> SweepReport:
    """Run every point not already done; write the points, the table and the plots
    (``overrides``: the command line's fixed ones, kept in each point's provenance)."""
    check_count("--seeds", seeds, SweepError)
    check_count("--workers", workers, SweepError)
    # Bounded by the machine before a point is checked or a worker started (qcn.core.resources).
    check_points(math.prod(len(v) for _, v in grids), seeds)
    unit = backends.by_name(backend)
    here = unit.exclusive and not address  # (one point at a time, on this machine)
    if not here and not address:
        check_local_workers(workers)
    backends.require(sc, unit, SweepError)
    unit.check(sc, backends.RunOptions())  # (here once, not in a worker's traceback)
    # A point's key names how it runs: the backend, and scaled for BMv2 or not.
    points = make_points(sc, grids, seeds, f"{backend}-scaled" if scaled else backend)
    # A backend in BMv2's units runs its points scaled, as `qcn run` runs them.
    store = Store(
        out, sc, [k for k, _ in grids], scaled=scaled or unit.in_bmv2_units,
        point_plots=point_plots, overrides=overrides, address=address,
    )  # fmt: skip
    store.prepare(
        {
            "scenario": sc.to_dict(),
            "grid": [[k, list(v)] for k, v in grids],
            "seeds": seeds,
            "backend": backend,
            "scaled": scaled,
        }
    )
    pending = [p for p in points if not store.done(p)]
    skipped = len(points) - len(pending)
    where = address or f"a local Dask cluster of {workers} worker process(es)"
    say(
        f"qcn sweep: {sc.name}: {len(points)} points ({skipped} already done) on the "
        f"{backend} backend" + (f", {where}" if not here and pending else "")
    )
    if store.corrupted:
        say(
            f"qcn sweep: {len(store.corrupted)} point(s) damaged on disk, run again: "
            + ", ".join(store.corrupted)
        )
    began = time.perf_counter()
    compute = startup = loop = 0.0
    progress = ProgressLine(f"qcn sweep: {sc.name}", unit="points", quiet=quiet)
    try:
        if here:
            compute = _run_here(sc, pending, store, progress, unit)
        elif pending:
            compute, startup, loop = _run_on_dask(
                sc, pending, store, progress, scaled=scaled, backend=unit,
                address=address, workers=workers, began=began,
            )  # fmt: skip
    except OSError as e:
        # A full disk, or the directory taken away: one line; a point cut short stays
        # marked partial and runs again next time.
        raise SweepError(f"cannot write the results in {out}: {e.strerror or e}") from None
    finally:
        progress.close()
        table = None
        with contextlib.suppress(OSError):
            table = store.write_table() if store.rows else None
    plots = store.plot()
    return SweepReport(
        len(points),
        len(pending),
        skipped,
        time.perf_counter() - began,
        compute,
        table,
        plots,
        startup,
        loop,
    )


def _run_on_dask(
    sc: Scenario,
    pending: list[Point],
    store: Store,
    progress: ProgressLine,
    *,
    scaled: bool,
    backend: backends.Backend,
    address: str | None,
    workers: int,
    began: float,
) -> tuple[float, float, float]:
    """The pending points on a Dask cluster (a local one, or ``address``), each written as
    it completes.  Returns the points' own compute time, the cluster's start-up time (from
    ``began``) and the time of the loop over the points."""
    compute = 0.0
    log = store.out / DASK_LOG
    with dask_client(address, workers, log) as client:
        client.wait_for_workers(1, timeout=60)
        resources = None
        if backend.exclusive:  # (a worker declares it can: one point at a time there)
            resources = {require_workers_for(backend, client, address or ""): 1}
        startup = time.perf_counter() - began
        base = sc.to_dict()
        loop_began = time.perf_counter()
        futures = {
            client.submit(
                run_point, base, dict(p.overrides), p.seed, scaled, backend.name,
                key=f"qcn-point-{p.key}", pure=False, retries=2, resources=resources,
            ): p
            for p in pending
        }  # fmt: skip
        from distributed import as_completed  # noqa: PLC0415

        try:
            for done, fut in enumerate(as_completed(futures), start=1):
                p = futures[fut]
                try:
                    trace, seconds = fut.result()
                except (QcnError, OSError):  # (OSError: the results cannot be written)
                    raise
                except Exception as e:
                    raise SweepError(f"point {p.label} failed: {e}{dask_said(log)}") from None
                compute += seconds
                store.write_point(p, trace, backend=backend)
                store.write_table()
                progress.update(done, len(pending))
            loop = time.perf_counter() - loop_began
        except OSError as e:  # (a full disk, here or in a worker: one line)
            raise SweepError(
                f"cannot write the results in {store.out}: {e.strerror or e}{dask_said(log)}"
            ) from None
        finally:
            client.cancel(list(futures))
    return compute, startup, loop


def require_workers_for(backend: backends.Backend, client: Any, address: str) -> str:
    """The Dask resource a worker declares to run ``backend``'s points, one at a time on
    its machine (an exclusive backend holds the machine's network): the backend's declared
    name (``dask worker ADDRESS --resources mininet=1``).  Fails unless a worker of the
    cluster declares it (else the points would wait for one for ever)."""
    resource = backend.name
    workers = client.scheduler_info().get("workers", {}).values()
    if not any(w.get("resources", {}).get(resource) for w in workers):
        raise SweepError(
            f"no worker of the scheduler at {address} declares the {resource} resource: "
            f"on a machine that can run the {backend.title}, as root, start one with "
            f"'dask worker {address} --nworkers 1 --nthreads 1 --resources {resource}=1'"
        )
    return resource


def _run_here(
    sc: Scenario,
    pending: list[Point],
    store: Store,
    progress: ProgressLine,
    backend: backends.Backend,
) -> float:
    """One point at a time on this machine (each a whole Mininet run on its network)."""
    if pending:
        backend.require("this sweep", SweepError)
    compute = 0.0
    for i, p in enumerate(pending, start=1):
        stage = store.staging(p)  # (its logs and captures go with its results)
        trace = run_point_here(
            sc, dict(p.overrides), seed=p.seed, scaled=False, backend=backend, out=stage
        )
        compute += trace.wall_s
        store.write_point(p, trace, backend=backend, staging=stage)
        store.write_table()
        progress.update(i, len(pending))
    return compute


# -- the command ---------------------------------------------------------------------------
