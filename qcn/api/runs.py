""":func:`run`: one run of a scenario, as `qcn run` makes it, and its :class:`Result`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qcn.api import support
from qcn.cli import run as command
from qcn.core import provenance
from qcn.core.errors import CheckFailedError
from qcn.core.flows import FLOW_CSV_COLUMNS
from qcn.core.results import PORT_CSV_COLUMNS, figures
from qcn.core.scenario import Scenario, ScenarioError
from qcn.core.trace import Trace

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure


@support.one_line
def run(
    scenario: str | Path,
    *,
    backend: str = "sim",
    set: Mapping[str, Any] | None = None,
    params: str | Path | None = None,
    seed: int | None = None,
    duration: float | None = None,
    qcn: bool = True,
    scaled: bool = False,
    scale: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
    verbose: bool = False,
) -> Result:
    """Run ``scenario`` (a name, ``qcn run --list``, or a TOML file) as ``qcn run`` runs it,
    and return its :class:`Result`.

    Each argument is the command's option of that name: ``backend`` (``"sim"``,
    ``"mininet"`` or ``"auto"``), ``set`` (``{"qcn.rp.fb_hat": True}``: ``--set`` KEY=VALUE
    pairs, the values Python's; a :class:`Network` or a path as ``network.topology``),
    ``params`` (a parameter file, ``--params``), ``seed`` (default 1), ``duration`` (s),
    ``qcn`` (False: ``--no-qcn``), ``scaled`` and ``scale`` (BMv2's scale), ``out`` (where
    the results go; None: a temporary folder the Result owns, removed with it), ``force``
    (replace the results in ``out``).  ``verbose``: print what the command prints.

    A mistake (an unknown scenario or field, a value out of range, a backend that cannot
    run here) raises :class:`QcnError` with the command's own line.  A run that says
    nothing of its network (it started no flow, delivered nothing) raises the command's
    CheckFailedError; its ``result`` attribute holds the :class:`Result`.
    """
    args = support.command_args(
        "run",
        scenario=str(scenario),
        backend=backend,
        set=support.overrides(set),
        params=support.path_or_none(params),
        seed=seed,
        duration=duration,
        no_qcn=not qcn,
        scaled=scaled,
        scale=scale,
        out=support.path_or_none(out),
        force=force,
        quiet=not verbose,
    )
    prepared = command.fresh_run(args)
    where, owned = support.out_folder(out, prepared.sc.name)
    return _finish(prepared, where, owned, force=force, verbose=verbose)


def _finish(
    prepared: command.Prepared,
    out: Path,
    owned: support.Owned | None,
    *,
    force: bool,
    verbose: bool,
) -> Result:
    """Execute ``prepared`` into ``out`` and say what `qcn run` says (its figures only
    ``verbose``; its warnings always); the Result, or the command's CheckFailedError."""
    with support.pyplot_kept():
        done = command.execute(
            prepared, out, force=force, quiet=not verbose, say=support.sayer(verbose)
        )
    command.report(done, prepared, figures=verbose)
    result = Result(done, prepared.sc, owned)
    try:
        command.check_said_something(done)
    except CheckFailedError as e:
        e.result = result  # type: ignore[attr-defined]
        raise
    return result


class Result:
    """A finished run's results (:func:`run` and :meth:`Result.again` return one): the
    files ``qcn run`` writes (in :attr:`directory`), read as Python reads them.

    Tables are pandas DataFrames whose columns name their hosts and ports and carry their
    units (``time_s``, ``queue_pkts``, ``current_rate_bps``): the CSVs the run wrote.
    """

    def __init__(self, done: command.Done, scenario: Scenario, owned: support.Owned | None) -> None:
        self.directory: Path = done.out
        """Where the results are: the files of ``qcn run`` (summary.json, CSVs, plots,
        run.toml, provenance.json)."""
        self.scenario: Scenario = scenario
        """The scenario as it ran (every field, overrides applied)."""
        self.trace: Trace = done.trace
        """What the backend recorded (qcn.core.trace.Trace), from which the files were
        made."""
        self.summary: dict[str, Any] = json.loads((done.out / "summary.json").read_text())
        """summary.json: the run's figures (a figure with no value is None)."""
        self._figures_summary = done.summary
        self._owned = owned

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"<qcn.Result {s['scenario']} on {s['backend']}, seed {s['random_seed']}: "
            f"{self.directory}>"
        )

    def _table(self, name: str, columns: tuple[str, ...] = ()) -> pd.DataFrame:
        import pandas as pd  # noqa: PLC0415

        path = self.directory / name
        if not path.exists():  # (a run that has no such table: its columns, no row)
            return pd.DataFrame(columns=list(columns))
        return pd.read_csv(path)

    @property
    def queue(self) -> pd.DataFrame:
        """queue.csv: per sample, the scenario's bottleneck port's queue, throughput and
        capacity (``port`` names it)."""
        frame = self._table("queue.csv")
        frame.insert(1, "port", str(self.scenario.bottleneck_port))
        return frame

    @property
    def sources(self) -> pd.DataFrame:
        """sources.csv: per sample and source, its sender and receiver hosts, its current
        and target rates and what it sent (a network run: and what reached its receiver)."""
        return self._table("sources.csv")

    @property
    def ports(self) -> pd.DataFrame:
        """ports.csv: per sample and followed port (a network of several CP ports), its
        queue, throughput, and drops and CNMs so far; no row for a run of one CP port."""
        return self._table("ports.csv", PORT_CSV_COLUMNS)

    @property
    def flows(self) -> pd.DataFrame:
        """flows.csv: per flow of the flows workload, its sender and receiver, size, start,
        completion time, ideal completion time and slowdown (``finished`` true or false);
        no row for another workload."""
        frame = self._table("flows.csv", FLOW_CSV_COLUMNS)
        frame["finished"] = frame["finished"].astype(bool)
        return frame

    def plot(self, *names: str) -> Figures:
        """The plots the run wrote, as matplotlib figures by name (``rates``, ``queue``, a
        network run's ``ports``, a flows run's ``slowdown``): ``names``, or all of them.
        A notebook shows each."""
        with support.pyplot_kept():
            made = figures(support.Unmanaged, self.scenario, self.trace, self._figures_summary)
        every = {name.removesuffix(".png"): fig for name, fig in made.items()}
        wanted = [n.removesuffix(".png") for n in names] or list(every)
        unknown = [n for n in wanted if n not in every]
        if unknown:
            raise ScenarioError(
                f"plot {', '.join(unknown)}: this run's plots are {', '.join(every)}"
            )
        return Figures({n: every[n] for n in wanted})

    @property
    def run_toml(self) -> str:
        """run.toml: the scenario as it ran, every field (``qcn.run(result.directory /
        "run.toml")`` runs it)."""
        return (self.directory / provenance.RUN_FILE).read_text()

    @property
    def provenance(self) -> dict[str, Any]:
        """provenance.json: the seed, backend and options, the command line that makes the
        same run, and what it ran on."""
        data: dict[str, Any] = json.loads((self.directory / provenance.PROVENANCE_FILE).read_text())
        return data

    @support.one_line
    def again(
        self,
        *,
        out: str | Path | None = None,
        with_changed_inputs: bool = False,
        verbose: bool = False,
    ) -> Result:
        """Run it again as it ran (``qcn run --again DIR``): its run.toml with the seed,
        backend and options its provenance.json records; the same figures.  ``out`` as
        :func:`run`'s; ``with_changed_inputs``: run it even if a file it read changed."""
        args = support.command_args(
            "run",
            again=self.directory,
            with_changed_inputs=with_changed_inputs,
            out=support.path_or_none(out),
            quiet=not verbose,
        )
        prepared = command.again_run(args)
        where, owned = support.out_folder(out, prepared.sc.name)
        return _finish(prepared, where, owned, force=False, verbose=verbose)


class Figures(dict[str, "Figure"]):
    """What :meth:`Result.plot` returns: matplotlib figures by name (``figures["rates"]``),
    which a notebook shows one under the other; ``fig.savefig(path)`` writes one."""

    def _ipython_display_(self) -> None:
        from IPython.display import display  # noqa: PLC0415 - only in IPython

        display(*self.values())  # type: ignore[no-untyped-call]
