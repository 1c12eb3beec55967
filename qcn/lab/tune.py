"""`qcn tune`: find a QCN setting for a scenario, closed loop: a search on the simulator
(Optuna's TPE sampler), each trial on several seeds on the Dask cluster `qcn sweep` uses,
the best checked on seeds the search never saw, then written to a running BMv2 network's
CPs over P4Runtime (``--apply``) and checked on BMv2 beside the simulator (``--verify``).

    qcn tune fct --trials 100 --seeds 2 --holdout-seeds 5 [--objective slowdown_short_p99]
        [--constraint drops<=default] [--param qcn.cp.q_eq_pkts=5:60] [--out DIR]

**Resumable.** The study is an Optuna journal (``OUT/study.journal``) beside its trials'
runs (``OUT/points/KEY/``, each as `qcn run` writes it, with its run.toml).  Ctrl-C keeps
every finished trial and run; the same command again continues the study where it stopped
(a run already on disk is not run again), and a larger ``--trials`` extends it.

docs/tuning.md says what it searches, how, and what it can and cannot promise.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from qcn.core import provenance, publish
from qcn.core import scenario as scenarios
from qcn.core.errors import CheckFailedError, QcnError
from qcn.core.live import KnobChange, write_knobs
from qcn.core.noise import verdict_line
from qcn.core.params import (
    PORT_CP_FIELDS,
    QNTZ_FB_MAX,
    W_ONE,
    CpParams,
    CpSignal,
    DcqcnParams,
    RpParams,
)
from qcn.core.patterns import Kind
from qcn.core.progress import ProgressLine
from qcn.core.provenance import project_version
from qcn.core.results import FLOW_KEYS, SUMMARY_KEYS, json_safe
from qcn.core.scenario import Scenario
from qcn.core.signals import interrupts_deferred
from qcn.core.tomlfile import toml_value
from qcn.lab import backends
from qcn.lab.compare import EMULATION, MODEL, run_compare, run_folder
from qcn.lab.sweep import (
    DASK_LOG,
    Point,
    Store,
    dask_client,
    dask_said,
    input_hashes,
    point_key,
    quantity_label,
    run_point,
)

SIMULATED = backends.SIMULATOR.name
"""The backend a study's trials run on (by name: a Dask worker looks it up)."""
STUDY_FILE = "study.journal"
STUDY_NAME = "qcn-tune"
BEST_FILE = "best.toml"
TRIALS_FILE = "trials.csv"
REPORT_FILE = "tune.json"
APPLIED_FILE = "applied.csv"
METRICS = (*SUMMARY_KEYS, *FLOW_KEYS)
"""What a study can optimise or constrain: a run's headline figures (summary.json)."""
MAXIMISED = ("utilization", "utilization_episode", "jain_fairness", "jain_sent")
"""The figures that are better larger (the others: smaller)."""
CP_APPLIED = ("q_eq_pkts", "w", "p_base", "p_scale")
"""The CP fields ``--apply`` writes to a running network (those a tuned setting changes and
that are the same in BMv2's units: q_eq in frames, w and the probabilities have none)."""


class TuneError(QcnError):
    """A mistake in a study's objective, space, constraints or output; or no trial met the
    constraints."""


class NoSettingFoundError(CheckFailedError):
    """The study ran, and no trial met its constraints (exit 1, as a missed target)."""


# -- what the study searches -----------------------------------------------------------------


@dataclass(frozen=True)
class Dimension:
    """One tuned field: ``key`` (a scenario field, ``qcn.cp.w``) from ``low`` to ``high``."""

    key: str
    low: float
    high: float
    log: bool
    integer: bool
    step: float | None = None
    """A field the data plane holds in fixed point takes its steps (w: 1/16)."""

    def text(self) -> str:
        scale = ":log" if self.log else ""
        return f"{self.key}={self.low:g}:{self.high:g}{scale}"

    def suggest(self, trial: Any) -> Any:
        if self.integer:
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.log, step=self.step)


STEPS = {"w": 1 / W_ONE}
"""CP fields whose values the data plane holds in fixed point, and their step."""


def is_cp_key(key: str) -> bool:
    """A CP field for every port (``qcn.cp.w``) or for one (``port_cp.s2:3.w``)."""
    return key.startswith(("qcn.cp.", "port_cp."))


def quantised(key: str, low: float, high: float, log: bool) -> Dimension:
    """A float field's dimension, on its step's grid where it has one (then linear)."""
    step = STEPS.get(key.rsplit(".", 1)[-1]) if is_cp_key(key) else None
    if step is None:
        return Dimension(key, low, high, log, integer=False)
    low, high = max(step, math.ceil(low / step) * step), math.floor(high / step) * step
    if log:
        raise TuneError(f"--param {key}: it takes steps of {step:g} (fixed point): no log scale")
    if low >= high:
        raise TuneError(f"--param {key}: no step of {step:g} between its bounds")
    return Dimension(key, low, high, log=False, integer=False, step=step)


@dataclass(frozen=True)
class Objective:
    metric: str
    maximise: bool

    def text(self) -> str:
        return f"{self.metric}:{'max' if self.maximise else 'min'}"


@dataclass(frozen=True)
class Constraint:
    """``metric <= bound`` (or ``>=``); ``bound`` None: the defaults' figure in this study."""

    metric: str
    at_most: bool
    bound: float | None

    def text(self) -> str:
        bound = "default" if self.bound is None else f"{self.bound:g}"
        return f"{self.metric}{'<=' if self.at_most else '>='}{bound}"

    def excess(self, value: float, defaults: dict[str, float]) -> float:
        """How far ``value`` is past the bound (<= 0: met), as Optuna's constraints take it."""
        bound = defaults[self.metric] if self.bound is None else self.bound
        return value - bound if self.at_most else bound - value


def field_value(sc: Scenario, key: str) -> Any:
    node: Any = sc.to_dict()
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def parse_dimension(text: str, sc: Scenario) -> Dimension:
    """``KEY=LOW:HIGH[:log]``, a numeric field of the scenario's QCN parameters."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    parts = rest.split(":")
    if not sep or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise TuneError(f"--param {text!r}: expected KEY=LOW:HIGH or KEY=LOW:HIGH:log")
    if not key.startswith(("qcn.cp.", "qcn.rp.", "port_cp.")):
        raise TuneError(
            f"--param {key}: a study tunes QCN parameters (qcn.cp.*, qcn.rp.*, or a port's "
            "own port_cp.PORT.FIELD)"
        )
    now = port_value(sc, key) if key.startswith("port_cp.") else field_value(sc, key)
    if isinstance(now, bool) or not isinstance(now, int | float):
        what = "no field of the scenario" if now is None else f"not a number ({now!r})"
        raise TuneError(f"--param {key}: {what}")
    low, high = (toml_value(p, TuneError, f"--param {key}") for p in parts[:2])
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high)):
        raise TuneError(f"--param {key}: its bounds must be numbers")
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise TuneError(f"--param {key}: empty bounds {low:g}:{high:g} (LOW must be below HIGH)")
    log = len(parts) == 3
    if log and low <= 0:
        raise TuneError(f"--param {key}: a log scale needs LOW above 0 (got {low:g})")
    if isinstance(now, int):
        if low != int(low) or high != int(high):
            raise TuneError(f"--param {key}: an integer field takes integer bounds")
        return Dimension(key, float(low), float(high), log, integer=True)
    return quantised(key, float(low), float(high), log)


def port_value(sc: Scenario, key: str) -> Any:
    """``port_cp.PORT.FIELD``'s value now: the port's own, else the scenario's CP's."""
    _, rest = key.split(".", 1)
    port, _, name = rest.rpartition(".")
    if not port:  # (port_cp.s1:11 was "port_cp.s1:11:  is not a CP port")
        raise TuneError(f"--param {key}: expected port_cp.PORT.FIELD ({', '.join(PORT_CP_FIELDS)})")
    cps = sorted(str(p) for p in sc.topology.cp_ports)
    if port not in cps:
        raise TuneError(f"--param {key}: {port} is not a CP port ({', '.join(cps) or 'none'})")
    if name not in PORT_CP_FIELDS:
        raise TuneError(f"--param {key}: a port's own fields are {', '.join(PORT_CP_FIELDS)}")
    return getattr(sc.cp_for(port), name)


SPAN = 8
"""The default space: each field from an eighth to eight times the scenario's value (on a
log scale; w on its steps).  A quarter to four times left w and Gd at their lower bounds in
seed 003's study (docs/tuning.md)."""


def cp_dimensions(prefix: str, cp: CpParams, buffer_pkts: int) -> list[Dimension]:
    """q_eq, w and the sampling probabilities under ``prefix`` (``qcn.cp.``, or a port's
    ``port_cp.s2:3.``), around ``cp``'s values (:data:`SPAN`; q_eq below the buffer)."""
    dims = [
        Dimension(f"{prefix}q_eq_pkts", max(2, cp.q_eq_pkts // SPAN),
                  min(cp.q_eq_pkts * 3, buffer_pkts - 1), log=True, integer=True),
        # (w at most 8: (2w+1) q_eq must fit the data plane's fixed point.)
        quantised(f"{prefix}w", cp.w / SPAN, min(cp.w * SPAN, 8.0), log=False),
        Dimension(f"{prefix}p_base", cp.p_base / SPAN, min(cp.p_base * SPAN, 0.5), log=True,
                  integer=False),
    ]  # fmt: skip
    if cp.p_scale > 0:
        # (p_base + 63 p_scale is a probability.)
        top = min(cp.p_scale * SPAN, (1 - cp.p_base) / QNTZ_FB_MAX)
        dims.append(Dimension(f"{prefix}p_scale", cp.p_scale / SPAN, top, True, False))
    return dims


def ecn_dimensions(sc: Scenario) -> list[Dimension]:
    """DCQCN's marking curve around the scenario's: Kmin below Kmax whatever is drawn (Kmin
    up to halfway to Kmax, Kmax from just above that), Kmax within the buffer, Pmax up to 1."""
    cp = sc.params.cp
    buffer_bytes = sc.network.buffer_pkts * sc.network.frame_bytes
    kmin_high = min(cp.kmin_bytes * SPAN, (cp.kmin_bytes + cp.kmax_bytes) // 2)
    kmax_high = max(min(cp.kmax_bytes * SPAN, buffer_bytes), kmin_high + 2)
    return [
        Dimension("qcn.cp.kmin_bytes", max(1, cp.kmin_bytes // SPAN), kmin_high, log=True,
                  integer=True),
        Dimension("qcn.cp.kmax_bytes", max(cp.kmax_bytes // SPAN, kmin_high + 1), kmax_high,
                  log=True, integer=True),
        Dimension("qcn.cp.pmax", cp.pmax / SPAN, min(cp.pmax * SPAN, 1.0), True, False),
    ]  # fmt: skip


def dcqcn_dimensions(rp: RpParams) -> list[Dimension]:
    """DCQCN's reaction point: R_AI, the timer, g and the alpha timer."""
    own = rp.own(DcqcnParams)
    return [
        Dimension("qcn.rp.r_ai_bps", rp.r_ai_bps / SPAN, rp.r_ai_bps * SPAN, True, False),
        Dimension("qcn.rp.timer_s", rp.timer_s / SPAN, rp.timer_s * SPAN, True, False),
        Dimension("qcn.rp.dcqcn.g", own.g / SPAN, min(own.g * SPAN, 1.0), True, False),
        Dimension("qcn.rp.dcqcn.alpha_timer_s", own.alpha_timer_s / SPAN,
                  own.alpha_timer_s * SPAN, True, False),
    ]  # fmt: skip


def default_space(sc: Scenario, *, per_port: bool = False) -> list[Dimension]:
    """CP: q_eq, w and the sampling probabilities (``per_port``: each CP port's own); RP
    (QCN's own scheme): Gd, R_AI, the byte counter and the timer.  Ports that mark ECN:
    the marking curve, and DCQCN's own reaction point (:func:`ecn_dimensions`).  Each from
    an eighth to eight times the scenario's value (:data:`SPAN`), on a log scale."""
    rp, buffer = sc.params.rp, sc.network.buffer_pkts
    if sc.params.cp.signal is CpSignal.ECN:
        if per_port:
            raise TuneError(
                "--per-port: a port's own fields are QCN's CP's; these ports mark ECN "
                "(tune the marking curve for every port, without --per-port)"
            )
        return ecn_dimensions(sc) + (dcqcn_dimensions(rp) if str(rp.scheme) == "dcqcn" else [])
    if per_port:
        dims = [d for p in sorted(str(p) for p in sc.topology.cp_ports)
                for d in cp_dimensions(f"port_cp.{p}.", sc.cp_for(p), buffer)]  # fmt: skip
    else:
        dims = cp_dimensions("qcn.cp.", sc.params.cp, buffer)
    if str(rp.scheme) == "qcn":
        dims += [
            # (Gd at most 1/63: the largest quantised Fb must not take the rate to zero.)
            Dimension("qcn.rp.gd", rp.gd / SPAN, min(rp.gd * SPAN, 1 / QNTZ_FB_MAX), True, False),
            Dimension("qcn.rp.r_ai_bps", rp.r_ai_bps / SPAN, rp.r_ai_bps * SPAN, True, False),
            Dimension("qcn.rp.bc_limit_bytes", max(1500, rp.bc_limit_bytes // SPAN),
                      rp.bc_limit_bytes * SPAN, log=True, integer=True),
            Dimension("qcn.rp.timer_s", rp.timer_s / SPAN, rp.timer_s * SPAN, True, False),
        ]  # fmt: skip
    return dims


def parse_objective(text: str) -> Objective:
    """``METRIC`` or ``METRIC:min`` / ``METRIC:max``."""
    metric, _, way = text.partition(":")
    metric = metric.strip()
    if metric not in METRICS:
        raise TuneError(
            f"--objective {metric}: not a figure of a run (one of {', '.join(METRICS)})"
        )
    if way not in ("", "min", "max"):
        raise TuneError(f"--objective {text}: the direction is min or max")
    return Objective(metric, way == "max" if way else metric in MAXIMISED)


CONSTRAINT = re.compile(r"^\s*([a-z_0-9]+)\s*(<=|>=)\s*(\S+)\s*$")


def parse_constraint(text: str) -> Constraint:
    """``METRIC<=VALUE`` or ``METRIC>=VALUE``; VALUE a number or ``default``."""
    m = CONSTRAINT.match(text)
    if not m:
        raise TuneError(f"--constraint {text!r}: expected METRIC<=VALUE or METRIC>=VALUE")
    metric, op, raw = m.groups()
    if metric not in METRICS:
        raise TuneError(
            f"--constraint {metric}: not a figure of a run (one of {', '.join(METRICS)})"
        )
    bound = None
    if raw != "default":
        value = toml_value(raw, TuneError, f"--constraint {metric}")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise TuneError(f"--constraint {text}: the bound is a number or 'default'")
        bound = float(value)
    return Constraint(metric, op == "<=", bound)


def default_objective(sc: Scenario) -> Objective:
    """Short flows' p99 slowdown on a flows workload; the recovery time where a schedule
    changes the bottleneck; else the caller must name one."""
    if sc.workload.declared.kind is Kind.FLOWS:
        return Objective("slowdown_short_p99", maximise=False)
    if sc.schedule:
        return Objective("recovery_ms", maximise=False)
    raise TuneError(
        f"{sc.name}: no objective is implied (no flows, no schedule): give one, e.g. "
        "--objective queue_mean_pkts"
    )


@dataclass(frozen=True)
class Study:
    """What a study is: its identity (a study's ``--out`` holds one)."""

    sc: Scenario
    objectives: tuple[Objective, ...]
    space: tuple[Dimension, ...]
    constraints: tuple[Constraint, ...]
    seeds: int
    holdout_seeds: int
    sampler_seed: int
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    """The files the scenario reads, by field: where, and their SHA-256
    (qcn.core.provenance.input_files): a study continued on an edited CDF kept the trials
    measured on the old one."""

    @property
    def search_seeds(self) -> list[int]:
        return list(range(1, self.seeds + 1))

    @property
    def held_out(self) -> list[int]:
        """Seeds the search never ran: after its own."""
        return list(range(self.seeds + 1, self.seeds + self.holdout_seeds + 1))

    def identity(self) -> dict[str, Any]:
        return {
            "study": {
                "scenario": self.sc.to_dict(),
                "objectives": [o.text() for o in self.objectives],
                "space": [d.text() for d in self.space],
                "constraints": [c.text() for c in self.constraints],
                "seeds": self.seeds,
                "holdout_seeds": self.holdout_seeds,
                "sampler": f"optuna TPESampler(seed={self.sampler_seed}, constant_liar=True)",
                "inputs": self.inputs,
            }
        }


class StudyStore(Store):
    """A study's directory: its trials' runs as a sweep keeps its points."""

    manifest = "study.json"
    kind = "study"
    error = TuneError

    def same(self, held: Any, identity: dict[str, Any]) -> bool:
        """The same study: its inputs the same files by content (wherever they are now); a
        study recorded before its inputs were is taken as the same on the rest."""
        old = held.get("study") if isinstance(held, dict) else None
        if not isinstance(old, dict):
            return False
        new = identity["study"]
        if "inputs" not in old:
            return old == {k: v for k, v in new.items() if k != "inputs"}
        return _by_content(old) == _by_content(new)

    def other(self, held: Any, identity: dict[str, Any]) -> str:
        """What changed, a phrase each: its objectives, constraints, space, seeds or
        sampler; the scenario's fields; the content of the files it reads."""
        old = held.get("study") if isinstance(held, dict) else None
        if not isinstance(old, dict):
            return f" ({self.describe(held)})"
        new = identity["study"]
        said = [f"{key}: {old.get(key)} there, {value} here" for key, value in new.items()
                if key not in ("scenario", "inputs") and old.get(key) != value]  # fmt: skip
        before, now = _flat(old.get("scenario")), _flat(new["scenario"])
        said += [f"{key}: {before.get(key)!r} there, {now.get(key)!r} here"
                 for key in sorted(set(before) | set(now))
                 if before.get(key) != now.get(key)]  # fmt: skip
        if "inputs" in old:  # (not in a study recorded before its inputs were)
            try:
                recorded = {"inputs": old["inputs"]}
                said += provenance.changed_inputs(self.sc, recorded, who="study")
            except (KeyError, TypeError, AttributeError):
                said.append("its record of its inputs is damaged")
        return f": {'; '.join(said)}" if said else f" ({self.describe(held)})"

    def without_manifest(self) -> None:
        journal = self.out / STUDY_FILE
        if os.path.lexists(journal):
            raise TuneError(
                f"--out {self.out}: {STUDY_FILE} is there without {self.manifest}: what its "
                "trials were measured on is unknown; choose another --out (or remove "
                f"{journal} to start afresh)"
            )

    def describe(self, identity: Any) -> str:
        study = identity.get("study") if isinstance(identity, dict) else None
        if not isinstance(study, dict):
            return "not a study of qcn tune"
        name = (
            study.get("scenario", {}).get("name")
            if isinstance(study.get("scenario"), dict)
            else None
        )
        return f"of {name}, objectives {', '.join(map(str, study.get('objectives', [])))}"


def _by_content(study: dict[str, Any]) -> dict[str, Any]:
    """A study's identity with each input file by its content alone (not where it is)."""
    inputs = study.get("inputs")
    if not isinstance(inputs, dict):
        return study
    digests = {k: v.get("sha256") if isinstance(v, dict) else v for k, v in inputs.items()}
    return {**study, "inputs": digests}


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    """A scenario's fields as dotted keys (``workload.load``)."""
    if not isinstance(node, dict):
        return {prefix.rstrip("."): node} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out |= _flat(value, f"{prefix}{key}.")
    return out


# -- running the trials ------------------------------------------------------------------------


@dataclass
class Figures:
    """A setting's figures over seeds: each metric's mean, smallest and largest."""

    by_seed: dict[int, dict[str, Any]] = field(default_factory=dict)

    def values(self, metric: str) -> list[float]:
        out = []
        for summary in self.by_seed.values():
            v = summary.get(metric)
            out.append(math.nan if v is None or isinstance(v, bool) else float(v))
        return out

    def mean(self, metric: str) -> float:
        values = self.values(metric)
        if any(math.isnan(v) for v in values) or not values:
            return math.nan
        return statistics.fmean(values)

    def as_dict(self, metrics: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for m in metrics:
            values = self.values(m)
            finite = [v for v in values if math.isfinite(v)]
            out[m] = {
                "mean": json_safe(self.mean(m)),
                "min": json_safe(min(finite)) if finite else None,
                "max": json_safe(max(finite)) if finite else None,
                "seeds": [json_safe(v) for v in values],
            }
        return out


def record_point(out: Path, base: dict[str, Any], p: Point) -> dict[str, Any]:
    """Run point ``p`` and write it into the study ``out`` (on a worker of this machine):
    its summary's row, as :meth:`Store.write_point` keeps it."""
    sc = scenarios.parse(base, where=str(base.get("name")))
    trace, _seconds = run_point(base, dict(p.overrides), p.seed, False, SIMULATED)
    store = StudyStore(out, sc, [], scaled=False, point_plots=False)
    store.write_point(p, trace, backend=backends.SIMULATOR)
    return store.rows[p.key]


class Runner:
    """Runs settings (scenario overrides) on seeds, on the Dask cluster, each run kept in
    the store; a run whose result is on disk is not run again."""

    def __init__(self, client: Any, store: StudyStore, sc: Scenario) -> None:
        self.client, self.store, self.sc = client, store, sc
        self.base = sc.to_dict()
        self.futures: dict[Any, Point] = {}
        self.inputs: dict[Path, str] = {}

    def points(self, overrides: dict[str, Any], seeds: list[int]) -> list[Point]:
        inputs = input_hashes(self.sc.with_overrides(overrides), self.inputs)
        return [
            Point(tuple(sorted(overrides.items())), s,
                  point_key(self.base, dict(sorted(overrides.items())), s, SIMULATED, inputs))
            for s in seeds
        ]  # fmt: skip

    def submit(self, points: list[Point]) -> None:
        running = {p.key for p in self.futures.values()}
        for p in points:
            if p.key in running or self.store.done(p):
                continue
            if self.store.address is None:
                # This machine's workers write the run themselves (the same file system):
                # recording a run here took this process 60 ms a run, beside two workers
                # on two cores, and two workers ran no faster than one.
                fut = self.client.submit(
                    record_point, self.store.out, self.base, p,
                    key=f"qcn-tune-{p.key}", pure=False, retries=2,
                )  # fmt: skip
            else:
                fut = self.client.submit(
                    run_point, self.base, dict(p.overrides), p.seed, False, SIMULATED,
                    key=f"qcn-tune-{p.key}", pure=False, retries=2,
                )  # fmt: skip
            self.futures[fut] = p
            running.add(p.key)

    def finished(self, p: Point) -> bool:
        return p.key in self.store.rows

    def wait(self) -> None:
        """Until at least one run lands (written to the store)."""
        from distributed import wait  # noqa: PLC0415

        if not self.futures:
            return
        done, _ = wait(list(self.futures), return_when="FIRST_COMPLETED")  # type: ignore[no-untyped-call]
        for fut in done:
            p = self.futures.pop(fut)
            try:
                result = fut.result()
            except (QcnError, OSError):  # (OSError: the study cannot be written: tune says so)
                raise
            except Exception as e:
                log = dask_said(self.store.out / DASK_LOG)
                raise TuneError(f"the run {p.label} failed: {e}{log}") from None
            if isinstance(result, dict):  # (written by the worker: its summary's row)
                self.store.rows[p.key] = result
                continue
            with interrupts_deferred():
                self.store.write_point(p, result[0], backend=backends.SIMULATOR)

    def run_all(self, points: list[Point]) -> Figures:
        self.submit(points)
        while not all(self.finished(p) for p in points):
            self.wait()
        return Figures({p.seed: self.store.rows[p.key] for p in points})

    def cancel(self) -> None:
        self.client.cancel(list(self.futures))
        self.futures.clear()


@dataclass
class TrialRun:
    trial: Any
    """Optuna's trial, asked in this process."""
    params: dict[str, Any]
    points: list[Point]


@dataclass
class TuneReport:
    trials: int
    ran: int
    best: dict[str, Any] | None
    files: list[Path]
    wall_s: float
    lines: list[str]
    search_s: float = 0.0
    """Seconds of the search itself (its trials, not the cluster's start or the final check)."""


def _quiet_optuna() -> Any:
    import optuna  # noqa: PLC0415

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


STUDY_TOML = "run.toml"


def write_study_toml(path: Path, study: Study) -> None:
    """The study's run.toml: its objective(s), space, constraints, seeds and sampler, and the
    scenario it searched (every field, overrides applied)."""
    identity = study.identity()["study"]
    header = (
        "# A qcn tune study: what it searched, and the scenario it searched it on.\n"
        f"# Made by: qcn {' '.join(sys.argv[1:])}\n"
        f"# Version: project {project_version()}; optuna {_quiet_optuna().__version__}\n\n"
    )
    data = {"study": {k: v for k, v in identity.items() if k != "scenario"},
            "scenario": identity["scenario"]}  # fmt: skip
    publish.write_atomic(path, header + tomli_w.dumps(data))


def open_study(study: Study, out: Path) -> Any:
    """The study's journal in ``out``, created or continued: checked first
    (:func:`check_journal`), and its trials after it is read (:func:`_check_trials`)."""
    optuna = _quiet_optuna()
    from optuna.storages.journal import JournalFileBackend  # noqa: PLC0415

    path = out / STUDY_FILE
    cut = check_journal(path)
    if cut:
        print(f"qcn tune: {cut}", file=sys.stderr, flush=True)
    sampler = optuna.samplers.TPESampler(
        seed=study.sampler_seed,
        constant_liar=True,  # trials in flight count as tried (several run at once)
    )
    try:
        storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
        handle = optuna.create_study(
            study_name=STUDY_NAME,
            storage=storage,
            sampler=sampler,
            directions=["maximize" if o.maximise else "minimize" for o in study.objectives],
            load_if_exists=True,
        )
    except OSError as e:
        raise TuneError(f"{path}: cannot be read or written ({e.strerror})") from None
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, AssertionError) as e:
        # (an operation Optuna does not know is an AssertionError of its own)
        raise _damaged(path, f"a record Optuna cannot apply: {type(e).__name__} {e}") from None
    _check_trials(handle, study, path)
    return handle


def check_journal(path: Path) -> str:
    """A study's journal before Optuna reads it: a file of JSON records, a line each, each
    with its operation (``op_code``).  A last record cut short (a crash or a full disk while
    it was written: the next run's first record was glued onto it, and every run after
    failed) is dropped, and said (the returned line); any other damage is one line naming
    the file (TuneError)."""
    if not os.path.lexists(path):
        return ""
    if path.is_symlink() or not path.is_file():
        raise _damaged(path, "not a file")
    try:
        data = path.read_bytes()
        said = ""
        if data and not data.endswith(b"\n"):
            whole = data.rfind(b"\n") + 1
            os.truncate(path, whole)
            data = data[:whole]
            said = f"{path}: its last record was cut short (a stop while it was written): dropped"
    except OSError as e:
        raise TuneError(f"{path}: cannot be read or written ({e.strerror})") from None
    for number, line in enumerate(data.splitlines(), start=1):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
            raise _damaged(path, f"line {number} is not a JSON record") from None
        if not isinstance(record, dict) or type(record.get("op_code")) is not int:
            raise _damaged(path, f"line {number} is no operation of a journal")
    return said


def _damaged(path: Path, why: str) -> TuneError:
    return TuneError(
        f"{path}: not a study's journal, or damaged ({why}); choose another --out for a new "
        f"study (or remove {path.name} to start afresh)"
    )


def _check_trials(handle: Any, study: Study, path: Path) -> None:
    """Every trial the journal holds as this study's trials are: a finished one's figures
    numbers, one an objective; its setting numbers; what this study notes of it the types it
    writes.  A tampered value ("values": "abc") was a TypeError when the best was chosen."""
    optuna = _quiet_optuna()

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    for t in handle.get_trials(deepcopy=False):
        values = t.values
        attrs = t.user_attrs
        why = ""
        if t.state == optuna.trial.TrialState.COMPLETE and not (
            isinstance(values, list)
            and len(values) == len(study.objectives)
            and all(map(number, values))
        ):
            why = f"{len(study.objectives)} number(s) as its objective(s)"
        elif not all(map(number, t.params.values())):
            why = "numbers as its setting"
        elif not isinstance(attrs.get("figures", {}), dict):
            why = "a table of figures"
        elif not (
            isinstance(attrs.get("excess", []), list) and all(map(number, attrs.get("excess", [])))
        ):
            why = "numbers as its constraints' excess"
        elif not isinstance(attrs.get("resumes", 0), int):
            why = "a trial's number as the trial it resumes"
        if why:
            raise _damaged(path, f"trial {t.number} has not {why}")


def tune(
    study: Study,
    *,
    trials: int,
    workers: int,
    address: str | None,
    out: Path,
    quiet: bool = False,
    say: Any = print,
) -> TuneReport:
    """Run the study until ``trials`` trials have finished; check the best on the held-out
    seeds; write its files."""
    began = time.perf_counter()
    store = StudyStore(out, study.sc, [], scaled=False, point_plots=False, address=address)
    store.prepare(study.identity())
    write_study_toml(out / STUDY_TOML, study)
    objective_names = [o.metric for o in study.objectives]
    metrics = list(dict.fromkeys([*objective_names, *(c.metric for c in study.constraints)]))
    handle = open_study(study, out)
    already = finished_trials(handle)
    say(
        f"qcn tune: {study.sc.name}: {trials} trials ({already} already done) of "
        f"{', '.join(o.text() for o in study.objectives)}, each on {study.seeds} seed(s), "
        f"over {len(study.space)} parameters"
        + (
            f"; constraints {', '.join(c.text() for c in study.constraints)}"
            if study.constraints
            else ""
        )
    )
    progress = ProgressLine(f"qcn tune: {study.sc.name}", unit="trials", quiet=quiet)
    log = out / DASK_LOG
    with dask_client(address, workers, log) as client:
        client.wait_for_workers(1, timeout=60)
        runner = Runner(client, store, study.sc)
        try:
            defaults = runner.run_all(runner.points({}, study.search_seeds))
            _check_produced(defaults, metrics, study.sc)
            search_began = time.perf_counter()
            ran = _search(handle, study, runner, trials=trials, workers=workers,
                          reference={m: defaults.mean(m) for m in metrics},
                          progress=progress)  # fmt: skip
            progress.close()
            search_s = time.perf_counter() - search_began
            best = _best(handle, study)
            held = None
            if best is not None:
                held_out = len(study.held_out)
                say(f"qcn tune: the best and the defaults on {held_out} held-out seed(s)")
                held = (
                    runner.run_all(runner.points({}, study.held_out)),
                    runner.run_all(runner.points(best.params, study.held_out)),
                )
        except OSError as e:  # (a full disk, here or in a worker: one line)
            raise TuneError(
                f"cannot write the study in {out}: {e.strerror or e}{dask_said(log)}"
            ) from None
        finally:
            progress.close()
            runner.cancel()
            with contextlib.suppress(OSError):
                write_trials(out / TRIALS_FILE, handle, study)
    try:
        report = _finish(study, handle, best=best, held=held, defaults=defaults, metrics=metrics,
                         out=out, trials=trials, ran=ran, began=began)  # fmt: skip
    except OSError as e:
        raise TuneError(f"cannot write the study in {out}: {e.strerror or e}") from None
    report.search_s = search_s
    return report


def _search(
    handle: Any,
    study: Study,
    runner: Runner,
    *,
    trials: int,
    workers: int,
    reference: dict[str, float],
    progress: ProgressLine,
) -> int:
    """Ask and tell trials until ``trials`` have finished, as many in flight as ``workers``;
    ``reference``: the defaults' figures (a constraint's ``default``).  How many it ran."""
    trial_state = _quiet_optuna().trial.TrialState
    ran = 0
    # Trials a Ctrl-C cut short: asked again, first (their runs on disk are kept).
    for cut in handle.get_trials(deepcopy=False, states=(trial_state.RUNNING,)):
        with interrupts_deferred():  # (a journal's record is written whole)
            handle.tell(cut.number, state=trial_state.FAIL)
            handle.enqueue_trial(cut.params, user_attrs={"resumes": cut.number})
    active: list[TrialRun] = []
    while True:
        done = finished_trials(handle)
        progress.update(done, trials)
        if done + len(active) < trials and len(active) < workers:
            refused = refused_trials(handle)
            if refused > MAX_REFUSED_SHARE * trials:
                raise TuneError(
                    f"the parameters' checks refused {refused} settings of this space "
                    f"({done} run): narrow it (--param); {TRIALS_FILE} says why"
                )
            asked = _ask(handle, study, runner)
            if asked is not None:
                active.append(asked)
            continue
        if not active:
            break
        told = [t for t in active if all(runner.finished(p) for p in t.points)]
        for t in told:
            figures = Figures({p.seed: runner.store.rows[p.key] for p in t.points})
            with interrupts_deferred():
                _tell(handle, study, t, figures, reference)
            active.remove(t)
            ran += 1
        if not told:  # (else first ask the next: a worker is free)
            runner.wait()
    return ran


def finished_trials(handle: Any) -> int:
    """Trials the study has run to their figures.  A setting the parameters' own checks
    refuse ((2w+1) q_eq too large for the data plane's fixed point) is not counted, nor is
    a trial a Ctrl-C cut short (it is asked again)."""
    optuna = _quiet_optuna()
    return len(handle.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def refused_trials(handle: Any) -> int:
    return sum("refused" in t.user_attrs for t in handle.get_trials(deepcopy=False))


MAX_REFUSED_SHARE = 10
"""A study gives up when the parameters' checks refused this many settings per trial asked."""


def _check_produced(defaults: Figures, metrics: list[str], sc: Scenario) -> None:
    for m in metrics:
        if all(math.isnan(v) for v in defaults.values(m)):
            raise TuneError(
                f"{m}: the scenario {sc.name} does not produce it (its runs leave it empty); "
                "choose another objective or constraint"
            )


def _ask(handle: Any, study: Study, runner: Runner) -> TrialRun | None:
    """A new trial, its runs submitted; None if its setting is refused (told failed).  Its
    records are written whole: a Ctrl-C waits for them (one cut in the journal's lock held
    the next run for 30 s)."""
    optuna = _quiet_optuna()
    with interrupts_deferred():
        trial = handle.ask()
        params = {d.key: d.suggest(trial) for d in study.space}
        try:
            study.sc.with_overrides(params)
        except QcnError as e:  # a combination the parameters refuse (p_base + 63 p_scale > 1)
            trial.set_user_attr("refused", str(e))
            handle.tell(trial, state=optuna.trial.TrialState.FAIL)
            return None
    t = TrialRun(trial, params, runner.points(params, study.search_seeds))
    runner.submit(t.points)
    return t


def _objective_value(figures: Figures, o: Objective) -> float:
    """The mean over seeds; a seed without the figure (never recovered) counts as worst."""
    values = [(-math.inf if o.maximise else math.inf) if math.isnan(v) else v
              for v in figures.values(o.metric)]  # fmt: skip
    return statistics.fmean(values)


def _tell(
    handle: Any, study: Study, t: TrialRun, figures: Figures, reference: dict[str, float]
) -> None:
    metrics = list(dict.fromkeys([*(o.metric for o in study.objectives),
                                  *(c.metric for c in study.constraints)]))  # fmt: skip
    excess = [c.excess(figures.mean(c.metric), reference) for c in study.constraints]
    excess = [math.inf if math.isnan(e) else e for e in excess]
    t.trial.set_user_attr("figures", figures.as_dict(metrics))
    t.trial.set_user_attr("excess", excess)
    for c, e in zip(study.constraints, excess, strict=True):
        t.trial.set_constraint(c.text(), e)  # (what TPE's sampler reads inside tell)
    handle.tell(t.trial, [_objective_value(figures, o) for o in study.objectives])


def _feasible(t: Any) -> bool:
    return all(e <= 0 for e in t.user_attrs.get("excess", []))


def _best(handle: Any, study: Study) -> Any:
    """The best feasible trial (two objectives: the front's best by the first)."""
    optuna = _quiet_optuna()
    done = [t for t in handle.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if _feasible(t)]  # fmt: skip
    if not done:
        return None
    front = pareto_front(done, study.objectives) if len(study.objectives) > 1 else done
    first = study.objectives[0]
    return (max if first.maximise else min)(front, key=lambda t: t.values[0])


def pareto_front(trials: list[Any], objectives: tuple[Objective, ...]) -> list[Any]:
    """The trials no other beats on every objective (ties kept)."""
    signs = [-1.0 if o.maximise else 1.0 for o in objectives]

    def key(t: Any) -> list[float]:
        return [s * v for s, v in zip(signs, t.values, strict=True)]

    out = []
    for t in trials:
        k = key(t)
        dominated = any(
            all(a <= b for a, b in zip(key(u), k, strict=True)) and key(u) != k for u in trials
        )
        if not dominated:
            out.append(t)
    return out


def write_trials(path: Path, handle: Any, study: Study) -> None:
    """trials.csv: one row per trial: its state, setting, objective(s) and constraints."""
    names = [d.key for d in study.space]
    objectives = [o.metric for o in study.objectives]
    f = io.StringIO()  # (written whole: a full disk left trials.csv.tmp in --out)
    w = csv.writer(f)
    w.writerow(["trial", "state", *names, *objectives, "feasible", "note"])
    trials = handle.get_trials(deepcopy=False)
    again = {t.user_attrs["resumes"]: t.number for t in trials if "resumes" in t.user_attrs}
    for t in trials:
        values = list(t.values) if t.values else [""] * len(objectives)
        note = t.user_attrs.get("refused", "")
        if t.number in again:
            note = f"cut short (Ctrl-C): asked again as trial {again[t.number]}"
        w.writerow([t.number, t.state.name.lower(), *(t.params.get(n, "") for n in names),
                    *values, _feasible(t) if t.values else "", note])  # fmt: skip
    publish.write_atomic(path, f.getvalue())


def best_params_toml(study: Study, params: dict[str, Any]) -> str:
    """The best setting as a parameter file (`qcn params FILE --check`, `qcn run --params`):
    the tuned fields only, in the scenario's units."""
    tables: dict[str, dict[str, Any]] = {}
    for key, value in sorted(params.items()):
        if key.startswith("port_cp."):  # [port_cp."s2:3"]: a port's own CP fields
            port, _, name = key.removeprefix("port_cp.").rpartition(".")
            tables.setdefault("port_cp", {}).setdefault(port, {})[name] = value
            continue
        _, table, name = key.split(".", 2)
        tables.setdefault(table, {})[name] = value
    head = (
        f"# qcn tune's best setting for {study.sc.name}, in the scenario's units\n"
        "# (qcn run SCENARIO --params FILE; on BMv2 qcn run scales it with the scenario)\n"
    )
    return head + tomli_w.dumps(tables)


def _finish(
    study: Study,
    handle: Any,
    *,
    best: Any,
    held: tuple[Figures, Figures] | None,
    defaults: Figures,
    metrics: list[str],
    out: Path,
    trials: int,
    ran: int,
    began: float,
) -> TuneReport:
    files: list[Path] = [out / STUDY_TOML, out / TRIALS_FILE]
    lines: list[str] = []
    importance = param_importances(handle, study)
    report: dict[str, Any] = {
        **study.identity()["study"],
        "trials": trials,
        "defaults_search_seeds": defaults.as_dict(metrics),
        "importance": importance,
    }
    if best is None:
        report["best"] = None
        _write_json(out / REPORT_FILE, report)
        files += [out / REPORT_FILE, *plot_study(out, handle, study, defaults, None)]
        unmet = ", ".join(c.text() for c in study.constraints) or "none"
        raise NoSettingFoundError(
            f"no trial met the constraints ({unmet}) in {trials} trials: loosen them, or widen "
            f"the space (trials in {out / TRIALS_FILE})"
        )
    assert held is not None
    held_defaults, held_best = held
    report["best"] = {
        "trial": best.number,
        "params": best.params,
        "search_seeds": best.user_attrs.get("figures"),
        "held_out_seeds": held_best.as_dict(metrics),
    }
    report["defaults_held_out_seeds"] = held_defaults.as_dict(metrics)
    report["held_out_seeds"] = study.held_out
    change = {}
    for o in study.objectives:
        a, b = held_defaults.mean(o.metric), held_best.mean(o.metric)
        change[o.metric] = (b - a) / a if a else None
        lines.append(
            f"  {o.metric}: {b:.4g} (defaults {a:.4g}) on {len(study.held_out)} held-out "
            f"seed(s), {_percent(b, a)}; range over seeds {min(held_best.values(o.metric)):.4g}"
            f"-{max(held_best.values(o.metric)):.4g}"
        )
    for c in study.constraints:
        a, b = held_defaults.mean(c.metric), held_best.mean(c.metric)
        met = c.excess(b, {c.metric: a}) <= 0 if c.bound is None else c.excess(b, {}) <= 0
        lines.append(
            f"  {c.metric}: {b:.4g} (defaults {a:.4g}): {c.text()} "
            + ("met" if met else "NOT met on the held-out seeds")
        )
    report["change_held_out"] = change
    (out / BEST_FILE).write_text(best_params_toml(study, best.params))
    _write_json(out / REPORT_FILE, report)
    files += [out / BEST_FILE, out / REPORT_FILE, *plot_study(out, handle, study, defaults, best)]
    setting = ", ".join(f"{k.removeprefix('qcn.')}={_short(v)}" for k, v in best.params.items())
    lines.insert(0, f"qcn tune: best trial {best.number}: {setting}")
    if importance:
        ranked = sorted(importance.items(), key=lambda kv: -kv[1])
        lines.append("  importance: " + ", ".join(f"{k.removeprefix('qcn.')} {v:.2f}"
                                                  for k, v in ranked[:4]))  # fmt: skip
    return TuneReport(trials, ran, report["best"], files, time.perf_counter() - began, lines)


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _percent(new: float, old: float) -> str:
    if not old or not math.isfinite(old) or not math.isfinite(new):
        return "change not defined"
    return f"{(new - old) / old * 100:+.1f} %"


def _write_json(path: Path, data: dict[str, Any]) -> None:
    # (json_safe: a figure a run left without a value, NaN, is null, as in summary.json)
    publish.write_atomic(
        path, json.dumps(json_safe(data), indent=1, allow_nan=False, default=str) + "\n"
    )


def param_importances(handle: Any, study: Study) -> dict[str, float]:
    """Each parameter's share of the first objective's variation (PED-ANOVA, Optuna's own:
    fANOVA, its default, needs scikit-learn); empty with too few trials to say."""
    optuna = _quiet_optuna()
    complete = handle.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 4 or len(study.space) < 2:
        return {}
    sign = -1.0 if study.objectives[0].maximise else 1.0  # (PED-ANOVA looks at low values)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(
                handle,
                evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
                target=lambda t: sign * t.values[0],
            )
    except (ValueError, RuntimeError, TypeError, ZeroDivisionError):
        return {}
    return {k: float(v) for k, v in found.items()}


# -- plots ---------------------------------------------------------------------------------------


def plot_study(out: Path, handle: Any, study: Study, defaults: Figures, best: Any) -> list[Path]:
    """history.png (each trial's first objective, the best so far, the chosen trial, the
    defaults), importance.png, and pareto.png with two objectives."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    optuna = _quiet_optuna()
    done = handle.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    ok = [t for t in done if _feasible(t) and math.isfinite(t.values[0])]
    bad = [t for t in done if not _feasible(t) and math.isfinite(t.values[0])]
    paths = [_save(_history_figure(study, ok, bad, defaults, best), out / "history.png")]
    importance = param_importances(handle, study)
    if importance:
        paths.append(_save(_importance_figure(study, importance), out / "importance.png"))
    if len(study.objectives) == 2:
        paths.append(_save(_pareto_figure(study, ok, defaults), out / "pareto.png"))
    return paths


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _history_figure(
    study: Study, ok: list[Any], bad: list[Any], defaults: Figures, best: Any
) -> Any:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    first = study.objectives[0]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter([t.number for t in ok], [t.values[0] for t in ok], s=14, label="trial")
    if bad:
        ax.scatter([t.number for t in bad], [t.values[0] for t in bad], s=14, marker="x",
                   color="0.6", label="trial breaking a constraint")  # fmt: skip
    running, xs, ys = None, [], []
    for t in sorted(ok, key=lambda t: t.number):
        v = t.values[0]
        if running is None or (v > running if first.maximise else v < running):
            running = v
        xs.append(t.number)
        ys.append(running)
    if xs:
        ax.step(xs, ys, where="post", color="C2", label="best so far")
    if best is not None and math.isfinite(best.values[0]):
        ax.scatter([best.number], [best.values[0]], marker="*", s=160, color="C1", zorder=3,
                   label=f"chosen (trial {best.number})")  # fmt: skip
    ref = defaults.mean(first.metric)
    if math.isfinite(ref):
        ax.axhline(ref, color="C3", linestyle="--", label="defaults")
    ax.set(xlabel="trial", ylabel=quantity_label(first.metric),
           title=f"{study.sc.name}: {study.seeds} seed(s) a trial")  # fmt: skip
    ax.legend(loc="best")
    return fig


def _importance_figure(study: Study, importance: dict[str, float]) -> Any:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 0.5 * len(importance) + 1.5))
    names = sorted(importance, key=lambda k: importance[k])
    ax.barh([n.removeprefix("qcn.") for n in names], [importance[n] for n in names])
    metric = quantity_label(study.objectives[0].metric)
    ax.set(xlabel=f"share of {metric}'s variation (PED-ANOVA)",
           title=f"{study.sc.name}: what mattered")  # fmt: skip
    return fig


def _pareto_figure(study: Study, ok: list[Any], defaults: Figures) -> Any:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.5))
    finite = [t for t in ok if all(math.isfinite(v) for v in t.values)]
    ax.scatter([t.values[0] for t in finite], [t.values[1] for t in finite], s=14,
               color="0.6", label="trial")  # fmt: skip
    front = sorted(pareto_front(finite, study.objectives), key=lambda t: t.values[0])
    ax.plot([t.values[0] for t in front], [t.values[1] for t in front], "o-", color="C1",
            label="Pareto front")  # fmt: skip
    d = [defaults.mean(o.metric) for o in study.objectives]
    if all(math.isfinite(v) for v in d):
        ax.scatter([d[0]], [d[1]], marker="*", s=150, color="C3", label="defaults")
    ax.set(xlabel=quantity_label(study.objectives[0].metric),
           ylabel=quantity_label(study.objectives[1].metric),
           title=f"{study.sc.name}: {study.seeds} seed(s) a trial")  # fmt: skip
    ax.legend(loc="best")
    return fig


# -- applying it to a running network ------------------------------------------------------


def apply_to_network(network: Path, params: dict[str, Any], out: Path) -> list[str]:
    """The best setting's CP fields written to every CP port of the running network described
    by ``network`` (the `qcn ctl set` path), a port's own (``port_cp.s2:3.w``) over those for
    every port; each change logged in ``out/applied.csv`` as the live view logs knobs.  What
    it said, a line each."""
    from qcn.controller import config  # noqa: PLC0415
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415

    net = config.load(network)
    cps = {f"{sw.name}:{p.port}": (sw.name, p.port) for sw in net.switches for p in sw.ports
           if p.cp}  # fmt: skip
    cp_keys = {f"qcn.cp.{name}": name for name in CP_APPLIED}
    everywhere = {cp_keys[k]: v for k, v in params.items() if k in cp_keys}
    own: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        if key.startswith("port_cp."):
            port, _, name = key.removeprefix("port_cp.").rpartition(".")
            if port not in cps:
                raise TuneError(f"{network}: the setting names {port}, not a CP port of this "
                                f"network ({', '.join(sorted(cps)) or 'none'})")  # fmt: skip
            own.setdefault(port, {})[name] = value
    left = sorted(k for k in params if k not in cp_keys and not k.startswith("port_cp."))
    changes: list[KnobChange] = []
    lines = []
    began = time.monotonic()
    for sw in net.switches:
        ports = [name for name, (s, _n) in cps.items() if s == sw.name]
        if not ports or not (everywhere or own):
            continue
        with SwitchAgent(net, sw.name, one_shot=True) as agent:
            for name in ports:
                fields = {**everywhere, **own.get(name, {})}
                if not fields:
                    continue
                number = cps[name][1]
                held = agent.read_cp(number)
                old = held[0] if held else None
                new = agent.set_cp(number, **fields)
                for field in fields:
                    changes.append(KnobChange(
                        time.monotonic() - began, name, field, getattr(old, field, None),
                        getattr(new, field), by="qcn tune"))  # fmt: skip
                lines.append(f"qcn tune: {sw.name} port {number}: " + ", ".join(
                    f"{k}={_short(getattr(new, k))}" for k in fields))  # fmt: skip
    if not changes and (everywhere or own):
        raise TuneError(f"{network}: no switch of the network has a CP port to apply it to")
    write_knobs(out, changes).replace(out / APPLIED_FILE)
    if left:
        lines.append(
            f"qcn tune: not applied (the hosts' reaction points take them at start): "
            f"{', '.join(left)}: start the network with them (qcn net up --params)"
        )
    return lines


def check_network_file(network: Path) -> None:
    """``--apply NETWORK`` names a network file (before a study spends its time)."""
    if not network.is_file():
        raise TuneError(f"--apply {network}: no such network file (qcn net up writes one)")


# -- verifying it on BMv2 ------------------------------------------------------------------

VERIFY_DIR = "verify"


def verify_on_bmv2(
    study: Study, params: dict[str, Any], out: Path, runs: int, say: Any = print
) -> tuple[list[str], bool]:
    """`qcn compare` of the defaults and of the best setting (BMv2 beside the simulator, the
    scenario scaled for BMv2): whether BMv2 shows the improvement the simulator predicts,
    and whether the best's runs meet compare's fidelity targets.  What it found, a line
    each, and whether it held; ``out/verify/`` keeps both comparisons and verify.json."""
    first = study.objectives[0]
    rows: dict[str, list[dict[str, Any]]] = {}
    figures: dict[str, dict[str, float]] = {}
    noise: dict[str, list[str]] = {}
    for name, overrides in (("defaults", {}), ("best", params)):
        sc = study.sc.with_overrides(overrides) if overrides else study.sc
        where = out / VERIFY_DIR / name
        say(f"qcn tune: verifying on BMv2: the {name} ({runs} run(s) a backend)")
        rows[name] = run_compare(sc, runs=runs, out=where, keep=list(overrides),
                                 overrides=overrides, say=say)  # fmt: skip
        noise[name] = [
            _summary_noise(run_folder(where, EMULATION, k) / "summary.json")
            for k in range(1, runs + 1)
        ]
        figures[name] = {
            backend.name: statistics.fmean(
                _summary_figure(run_folder(where, backend, k) / "summary.json", first.metric)
                for k in range(1, runs + 1)
            )
            for backend in (MODEL, EMULATION)
        }
    change = {
        b: (figures["best"][b] - figures["defaults"][b]) / figures["defaults"][b]
        if figures["defaults"][b]
        else math.nan
        for b in (MODEL.name, EMULATION.name)
    }
    bmv2, sim = EMULATION.name, MODEL.name
    better = change[bmv2] > 0 if first.maximise else change[bmv2] < 0
    missed = [r["label"] for r in rows["best"] if r["ok"] is False]
    held = better and not missed
    compare_said = (
        f"missed compare's targets: {', '.join(missed)}" if missed else "met every compare target"
    )
    lines = [
        f"qcn tune: verify: {first.metric} on BMv2 {figures['best'][bmv2]:.4g} with the best, "
        f"{figures['defaults'][bmv2]:.4g} with the defaults ({change[bmv2] * 100:+.1f} %); "
        f"the simulator predicted {figures['best'][sim]:.4g} and "
        f"{figures['defaults'][sim]:.4g} ({change[sim] * 100:+.1f} %)",
        "qcn tune: verify: the best's BMv2 runs " + compare_said,
        # A small q_eq tolerates only short stalls: a tuned setting's runs may be judged
        # noisy where the defaults' were not (docs/tuning.md).
        *(
            f"qcn tune: verify: BMv2 noise with the {name}: {v}"
            for name, vs in noise.items()
            for v in vs
        ),
        "qcn tune: verify: " + ("BMv2 shows the improvement" if held else "NOT verified on BMv2"),
    ]
    _write_json(
        out / VERIFY_DIR / "verify.json",
        {"metric": first.metric, "runs": runs, "figures": figures,
         "change": change,
         "missed_targets": missed, "noise": noise, "verified": held},
    )  # fmt: skip
    return lines, held


def _summary_noise(path: Path) -> str:

    noise = json.loads(path.read_text()).get("noise")
    return verdict_line(noise) if isinstance(noise, dict) else "not measured"


def _summary_figure(path: Path, metric: str) -> float:
    value = json.loads(path.read_text()).get(metric)
    return float(value) if isinstance(value, int | float) else math.nan


class NotVerifiedError(CheckFailedError):
    """BMv2 did not show the improvement the simulator predicted (exit 1)."""


# -- the command ---------------------------------------------------------------------------
