"""`qcn tune`: find a QCN setting for a scenario, closed loop: a search on the simulator
(Optuna's TPE sampler), each trial on several seeds on the Dask cluster `qcn sweep` uses,
the best checked on seeds the search never saw, then written to a running BMv2 network's
CPs over P4Runtime (``--apply``) and checked on BMv2 beside the simulator (``--verify``).

The command line and what it prints; the machinery is :mod:`qcn.lab.tune` (docs/layout.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qcn.cli.options import (
    add_count,
    add_duration,
    add_out,
    add_params,
    add_quiet,
    add_scenario,
    add_scheme,
    add_set,
    plain_text,
    scenario_of,
)
from qcn.core import provenance, publish
from qcn.core.resources import check_local_workers, check_study_runs
from qcn.lab import backends
from qcn.lab.inputs import check_count, require_mininet
from qcn.lab.sweep import (
    check_address,
    input_hashes,
)
from qcn.lab.tune import (
    VERIFY_DIR,
    NotVerifiedError,
    Study,
    TuneError,
    TuneReport,
    apply_to_network,
    check_network_file,
    default_objective,
    default_space,
    parse_constraint,
    parse_dimension,
    parse_objective,
    tune,
    verify_on_bmv2,
)

DEFAULT_OUT = Path("results/tune")
MAX_OBJECTIVES = 2
MAX_SAMPLER_SEED = 2**32 - 1
"""numpy's random generator, which Optuna's sampler seeds, takes 0 to 2**32 - 1 (-1 and
2**32 were a ValueError's traceback)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="search the QCN setting that best meets an objective (Optuna on the simulator)",
        description=plain_text(__doc__.split("\n\n")[0]) if __doc__ else None,
    )
    add_scenario(p)
    p.add_argument(
        "--objective", action="append", default=[], metavar="METRIC[:min|max]",
        help="a run's figure to optimise (summary.json), e.g. slowdown_short_p99; give two for a "
        "Pareto front (default: short flows' p99 slowdown, or the recovery time)",
    )  # fmt: skip
    p.add_argument(
        "--constraint", action="append", default=None, metavar="METRIC<=VALUE",
        help="a bound a setting must meet, VALUE a number or 'default' (the defaults' figure), "
        "e.g. utilization>=0.9; 'none' for none (default: drops<=default)",
    )  # fmt: skip
    p.add_argument(
        "--param", action="append", default=[], metavar="KEY=LOW:HIGH[:log]",
        help="a tuned field and its bounds, e.g. qcn.rp.gd=0.001:0.03:log; repeat (default: "
        "q_eq, w, the sampling probabilities, Gd, R_AI, the byte counter and the timer)",
    )  # fmt: skip
    p.add_argument(
        "--per-port", action="store_true",
        help="the default space's CP fields for each CP port on its own (a network of several "
        "CPs), not one value for every port",
    )  # fmt: skip
    add_count(p, "--trials", 40, "trials in the study (a rerun continues it up to this many)")
    add_count(p, "--seeds", 2, "random seeds each trial runs (1..N)")
    add_count(p, "--holdout-seeds", 5, "seeds the search never runs, for the final check")
    p.add_argument("--sampler-seed", type=int, default=1, help="the sampler's seed (default 1)")
    add_count(p, "--workers", 2, "local cluster: worker processes")
    p.add_argument("--address", help="join this Dask scheduler (tcp://HOST:PORT) instead")
    add_out(p, None, f"{DEFAULT_OUT}/SCENARIO")
    add_set(p, "a fixed override of a scenario field, for every trial (TOML value)")
    add_params(p)
    add_scheme(p)
    add_duration(p)
    p.add_argument(
        "--apply", type=Path, metavar="NETWORK",
        help="write the best setting to the CPs of the running network NETWORK describes "
        "(qcn net up writes results/net/network.toml), as qcn ctl set does",
    )  # fmt: skip
    p.add_argument(
        "--verify", action="store_true",
        help="then qcn compare the defaults and the best on BMv2 (root, the p4lang toolchain): "
        "does BMv2 show the improvement the simulator predicts?",
    )  # fmt: skip
    add_count(p, "--verify-runs", 1, "--verify: runs a backend for each setting")
    add_quiet(p)
    p.set_defaults(func=_command)


def study_of(args: argparse.Namespace) -> Study:
    sc, overrides = scenario_of(args)
    backends.require(sc, backends.SIMULATOR, TuneError)
    backends.SIMULATOR.check(sc, backends.RunOptions())
    for flag in ("--trials", "--seeds", "--holdout-seeds", "--workers"):
        check_count(flag, getattr(args, flag.lstrip("-").replace("-", "_")), TuneError)
    # Bounded as a sweep is, before anything is written or started (qcn.core.resources).
    check_study_runs(args.trials, args.seeds, args.holdout_seeds)
    if not args.address:
        check_local_workers(args.workers)
    if not 0 <= args.sampler_seed <= MAX_SAMPLER_SEED:
        raise TuneError(
            f"--sampler-seed {args.sampler_seed}: a whole number from 0 to "
            f"{MAX_SAMPLER_SEED:,} (the sampler's random generator takes no other)"
        )
    objectives = tuple(parse_objective(o) for o in args.objective) or (default_objective(sc),)
    if len(objectives) > MAX_OBJECTIVES:
        raise TuneError(f"--objective: at most {MAX_OBJECTIVES} (a Pareto front of two)")
    if len({o.metric for o in objectives}) != len(objectives):
        raise TuneError("--objective: each figure once")
    texts = args.constraint
    if texts is None:
        texts = [] if "drops" in {o.metric for o in objectives} else ["drops<=default"]
    constraints = tuple(parse_constraint(c) for c in texts if c != "none")
    if args.per_port and args.param:
        raise TuneError("--per-port shapes the default space: give it or --param, not both")
    if args.per_port and not sc.topology.cp_ports:  # (it tuned the RP's fields alone)
        raise TuneError(
            f"--per-port: {sc.name}'s network ({sc.network.topology}) has no CP port to tune"
        )
    space = tuple(parse_dimension(d, sc) for d in args.param) or tuple(
        default_space(sc, per_port=args.per_port)
    )
    keys = [d.key for d in space]
    if len(set(keys)) != len(keys):
        raise TuneError("--param: each field once")
    fixed = sorted(set(keys) & set(overrides))
    if fixed:
        raise TuneError(f"{', '.join(fixed)}: tuned (--param or the default space) and fixed "
                        "(--set or --params): keep one")  # fmt: skip
    input_hashes(sc)  # (a file it cannot read is one line here)
    return Study(sc, objectives, space, constraints, args.seeds, args.holdout_seeds,
                 args.sampler_seed, provenance.input_files(sc))  # fmt: skip


def _command(args: argparse.Namespace) -> int:
    study = study_of(args)
    check_address(args.address)
    if args.apply is not None:
        check_network_file(args.apply)
    check_count("--verify-runs", args.verify_runs, TuneError)
    if args.verify:
        require_mininet("qcn tune --verify", TuneError)
    report, out = run_study(study, args)
    for line in report.lines:
        print(line)
    print(f"qcn tune: {report.ran} trials run in {report.wall_s:.1f} s; results in {out}/")
    for path in report.files:
        print(f"  {path.name}: {path}")
    if args.apply is not None and report.best is not None:
        for line in apply_to_network(args.apply, report.best["params"], out):
            print(line)
    if args.verify and report.best is not None:
        lines, held = verify_on_bmv2(
            study, report.best["params"], out, args.verify_runs,
            say=lambda line: print(line, flush=True),
        )  # fmt: skip
        for line in lines:
            print(line)
        if not held:
            raise NotVerifiedError(f"BMv2 did not verify the setting ({out / VERIFY_DIR})")
    return 0


def run_study(study: Study, args: argparse.Namespace, say: Any = print) -> tuple[TuneReport, Path]:
    """Run ``study`` (:func:`study_of`) into ``args.out`` (its default: DEFAULT_OUT/SCENARIO)
    with `qcn tune`'s options: what the command and :func:`qcn.tune` both call (``say``:
    its lines).  Returns its report and where its results are."""
    out = publish.resolve_out(args.out or DEFAULT_OUT / study.sc.name, TuneError)
    try:
        report = tune(study, trials=args.trials, workers=args.workers, address=args.address,
                      out=out, quiet=args.quiet, say=say)  # fmt: skip
    except KeyboardInterrupt:
        say(f"qcn tune: interrupted; every finished trial is kept in {out}: the same command "
            "continues the study")  # fmt: skip
        raise
    return report, out
