"""BMv2 builds and placement: the switch's CPU per frame, as the capacity model's
calibration measures it (qcn.topologies.calibration), for each build and pinned or not.

    python -m bench.bmv2_builds [--build DIR ...] [--rounds R]

The baseline is the ``simple_switch_grpc`` on the PATH, unpinned (as runs use it); each
other figure is reported as a ratio against it, measured in the same run, rounds
alternating so that the machine's drift falls on all alike.  ``--build DIR`` adds a build
whose ``simple_switch_grpc`` is in DIR (e.g. one configured for speed: docs/bmv2.md,
"BMv2 built for speed"); ``$QCN_BMV2_BUILDS`` (colon-separated) adds them too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC

MEASURE = (sys.executable, "-m", "qcn.topologies.calibration")


def one(bin_dir: Path | None, pinned: bool) -> float:
    """One calibration's CPU per frame (s) of the build in ``bin_dir`` (None: the PATH's)."""
    env = dict(os.environ)
    if bin_dir is not None:
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    cmd = [*MEASURE, "--json", *(["--pinned"] if pinned else [])]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bmv2_builds: {done.stderr.strip() or done.stdout.strip()}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["frame_cost_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="append", type=Path, default=[], metavar="DIR")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which(SIMPLE_SWITCH_GRPC) is None:
        print("bmv2_builds: needs root and simple_switch_grpc on the PATH")
        return 2
    extra = [Path(p) for p in os.environ.get("QCN_BMV2_BUILDS", "").split(":") if p]
    builds: list[Path | None] = [None, *args.build, *extra]
    for b in builds[1:]:
        if b is not None and not (b / SIMPLE_SWITCH_GRPC).exists():
            print(f"bmv2_builds: {b}: no {SIMPLE_SWITCH_GRPC} there")
            return 2
    cases = [(b, pinned) for b in builds for pinned in (True, False)]
    figures: dict[tuple[Path | None, bool], list[float]] = {c: [] for c in cases}
    began = time.monotonic()
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", flush=True)
        for case in cases:
            figures[case].append(one(*case))
    base = statistics.median(figures[(None, False)])
    print(f"bmv2_builds: {time.monotonic() - began:.0f} s; medians of {args.rounds} rounds")
    for (b, pinned), xs in figures.items():
        name = str(shutil.which(SIMPLE_SWITCH_GRPC)) if b is None else str(b / SIMPLE_SWITCH_GRPC)
        med = statistics.median(xs)
        print(
            f"  {name} {'pinned  ' if pinned else 'unpinned'}: {med * 1e6:6.1f} us a frame "
            f"({', '.join(f'{x * 1e6:.0f}' for x in xs)}), {med / base:.2f}x the PATH's unpinned"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
