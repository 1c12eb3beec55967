"""Studies of many runs, as the commands make them: :func:`sweep` (`qcn sweep`), :func:`tune`
and its :class:`Study` (`qcn tune`), :func:`compare` (`qcn compare`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qcn.api import support
from qcn.cli import compare as comparing
from qcn.cli import sweep as sweeping
from qcn.cli import tune as tuning
from qcn.core.scenario import Scenario
from qcn.lab import compare as comparison
from qcn.lab import sweep as sweeps
from qcn.lab import tune as tuned

if TYPE_CHECKING:
    import pandas as pd


@support.one_line
def sweep(
    scenario: str | Path,
    grid: Mapping[str, Sequence[Any]],
    *,
    seeds: int = 1,
    backend: str = "sim",
    scaled: bool = False,
    set: Mapping[str, Any] | None = None,
    params: str | Path | None = None,
    duration: float | None = None,
    workers: int = 2,
    address: str | None = None,
    out: str | Path | None = None,
    point_plots: bool | None = None,
    verbose: bool = False,
) -> pd.DataFrame:
    """Run ``scenario`` over ``grid`` (a scenario field and its values an axis:
    ``{"network.rtt_s": [10e-6, 200e-6]}``; ``"qcn": [True, False]`` runs with and
    without QCN) times ``seeds`` random seeds, as ``qcn sweep`` runs it: on Dask, a local
    cluster of ``workers`` processes or the scheduler at ``address``
    (``"tcp://HOST:8786"``).  Returns its table: a row per point (its grid values, its
    seed, ``key``: the folder ``out/points/KEY/`` of its results, and its summary's
    figures), as sweep.parquet has it.

    ``set``, ``params``, ``duration``, ``backend`` and ``scaled`` as :func:`run`'s, fixed
    for every point.  ``out``: where the points, the table and the plots go, and a sweep
    run again there runs only the points not done (None: a temporary folder, removed once
    the table is read).  ``point_plots``: each point's two plots (None: as the command,
    but not in a temporary folder).  A mistake raises :class:`QcnError` with the
    command's line.
    """
    axes = [
        sweeps.grid_axis(str(k), [support.plain(v) for v in values]) for k, values in grid.items()
    ]
    where, owned = support.out_folder(out, "sweep")
    plots = owned is None if point_plots is None else point_plots
    args = support.command_args(
        "sweep",
        unsaid=("quiet", "out") if owned else ("quiet",),
        scenario=str(scenario),
        grid=axes,
        seeds=seeds,
        backend=backend,
        scaled=scaled,
        set=support.overrides(set),
        params=support.path_or_none(params),
        duration=duration,
        workers=workers,
        address=address,
        out=where,
        quiet=not verbose,
        no_point_plots=not plots,
    )
    with support.pyplot_kept():
        report, where = sweeping.sweep_of(args, say=support.sayer(verbose))
    import pandas as pd  # noqa: PLC0415

    if report.table is None:
        return pd.DataFrame(columns=["key", "seed", *(k for k, _ in axes)])
    return pd.read_parquet(report.table[1])


@support.one_line
def tune(
    scenario: str | Path,
    *,
    objective: str | Sequence[str] = (),
    constraint: str | Sequence[str] | None = None,
    param: Mapping[str, str | Sequence[Any]] | None = None,
    per_port: bool = False,
    trials: int = 40,
    seeds: int = 2,
    holdout_seeds: int = 5,
    sampler_seed: int = 1,
    set: Mapping[str, Any] | None = None,
    params: str | Path | None = None,
    duration: float | None = None,
    workers: int = 2,
    address: str | None = None,
    out: str | Path | None = None,
    verbose: bool = False,
) -> Study:
    """Search the QCN setting that best meets an objective, as ``qcn tune`` does (Optuna's
    TPE on the simulator, each trial on ``seeds`` seeds on Dask: a local cluster of
    ``workers`` processes or the scheduler at ``address``), the best then checked on
    ``holdout_seeds`` seeds the search never ran.  Returns the :class:`Study`.

    ``objective``: a run's figure, ``"METRIC"`` or ``"METRIC:min"``/``":max"`` (two: a
    Pareto front; none: the scenario's own, as the command's); ``constraint``:
    ``"drops<=default"``, ``"utilization>=0.9"`` (None: the command's default; ``[]``:
    none); ``param``: each tuned field's bounds, ``{"qcn.rp.gd": "0.001:0.03:log"}`` or
    ``{"qcn.cp.q_eq_pkts": (5, 60)}`` (None: the command's default space; ``per_port``:
    each CP port's own).  ``out``: the study's folder, continued by a call with the same
    study and more ``trials`` (None: a temporary one the Study owns).  The rest as
    :func:`sweep`'s.  A mistake raises :class:`QcnError` with the command's line; no trial
    meeting the constraints, the command's CheckFailedError.
    """
    objectives = [objective] if isinstance(objective, str) else list(objective)
    constraints = [constraint] if isinstance(constraint, str) else constraint
    space = [f"{key}={_bounds(bounds)}" for key, bounds in (param or {}).items()]
    where, owned = support.out_folder(out, "tune")
    args = support.command_args(
        "tune",
        unsaid=("quiet", "out") if owned else ("quiet",),
        scenario=str(scenario),
        objective=objectives,
        constraint=None if constraints is None else list(constraints) or ["none"],
        param=space,
        per_port=per_port,
        trials=trials,
        seeds=seeds,
        holdout_seeds=holdout_seeds,
        sampler_seed=sampler_seed,
        set=support.overrides(set),
        params=support.path_or_none(params),
        duration=duration,
        workers=workers,
        address=address,
        out=where,
        quiet=not verbose,
    )
    study = tuning.study_of(args)
    sweeps.check_address(address)
    with support.pyplot_kept():
        report, where = tuning.run_study(study, args, say=support.sayer(verbose))
    return Study(study, report, where, owned)


def _bounds(bounds: str | Sequence[Any]) -> str:
    """A tuned field's bounds as ``--param`` takes them: ``LOW:HIGH[:log]``."""
    if isinstance(bounds, str):
        return bounds
    return ":".join(v if isinstance(v, str) else support.toml_text(v) for v in bounds)


class Study:
    """A finished ``qcn tune`` study (:func:`tune` returns one): its folder's files, read
    as Python reads them."""

    def __init__(
        self, study: tuned.Study, report: tuned.TuneReport, out: Path, owned: support.Owned | None
    ) -> None:
        self.directory: Path = out
        """The study's folder: its journal, trials.csv, best.toml, tune.json, plots, and
        its trials' runs (points/KEY/)."""
        self.best: dict[str, Any] | None = report.best
        """The best setting (``params``: field -> value) and its figures on the search's
        seeds and on the held-out ones (tune.json's ``best``)."""
        self.lines: list[str] = report.lines
        """What the command prints of the best and how it fared on the held-out seeds."""
        self.scenario: Scenario = study.sc
        """The scenario it searched (qcn.core.scenario.Scenario)."""
        self._owned = owned

    def __repr__(self) -> str:
        trial = self.best["trial"] if self.best else None
        return f"<qcn.Study {self.scenario.name}: best trial {trial}: {self.directory}>"

    @property
    def params(self) -> dict[str, Any]:
        """The best setting: each tuned field's value (``qcn.run(..., set=study.params)``
        runs it)."""
        return dict(self.best["params"]) if self.best else {}

    @property
    def trials(self) -> pd.DataFrame:
        """trials.csv: a row per trial, its state, setting, objective(s) and whether it met
        the constraints."""
        import pandas as pd  # noqa: PLC0415

        return pd.read_csv(self.directory / tuned.TRIALS_FILE)

    @property
    def best_file(self) -> Path:
        """best.toml: the best setting as a parameter file (``qcn.run(..., params=...)``)."""
        return self.directory / tuned.BEST_FILE

    @support.one_line
    def apply(self, network: str | Path) -> list[str]:
        """Write the best setting to the CPs of the running network ``network`` describes
        (``qcn net up`` writes results/net/network.toml), as ``qcn tune --apply`` does;
        each change is logged in applied.csv.  Returns what it said, a line each."""
        path = Path(network)
        tuned.check_network_file(path)
        return tuned.apply_to_network(path, self.params, self.directory)


@support.one_line
def compare(
    scenario: str | Path,
    *,
    runs: int = 3,
    set: Mapping[str, Any] | None = None,
    params: str | Path | None = None,
    duration: float | None = None,
    scale: str | None = None,
    out: str | Path | None = None,
    verbose: bool = False,
) -> pd.DataFrame:
    """Run ``scenario`` on BMv2 in Mininet and on the simulator ``runs`` times each, as
    ``qcn compare`` does, and return its table: a row per figure (its ``label`` with its
    unit), each backend's mean, smallest and largest (``sim_mean``, ``mininet_min``, ...:
    the backends' declared names), their ``ratio``, the fidelity ``target`` and whether it
    was met (``ok``; None: no target).
    It needs root and the p4lang toolchain: without them it raises :class:`QcnError`
    with the command's line.  The rest as :func:`run`'s (``out`` None: a temporary folder,
    removed once the table is made).
    """
    where, _owned = support.out_folder(out, "compare")
    args = support.command_args(
        "compare",
        unsaid=("out",) if _owned else (),
        scenario=str(scenario),
        runs=runs,
        set=support.overrides(set),
        params=support.path_or_none(params),
        duration=duration,
        scale=scale,
        out=where,
    )
    with support.pyplot_kept():
        rows, _where = comparing.compare_of(args, say=support.sayer(verbose))
    import pandas as pd  # noqa: PLC0415

    return pd.DataFrame(
        [
            {
                "figure": r["figure"], "label": r["label"],
                **{f"{b}_{s}": v for b in (comparison.MODEL.name, comparison.EMULATION.name)
                   for s, v in zip(("mean", "min", "max"), r[b], strict=True)},
                "ratio": r["ratio"], "target": r["target"], "ok": r["ok"],
            }
            for r in rows
        ]
    )  # fmt: skip
