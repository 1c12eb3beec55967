"""Pinned switches and the capacity model's calibration (topologies/placement.py,
topologies/calibration.py): where a run's processes go, and what a frame costs this
machine's BMv2, measured once and kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qcn.core import scenario as scenarios
from qcn.core.capacity import (
    SWITCH_BUDGET_CORES,
    FrameCost,
    ScaleError,
    choose_scale,
    switch_load,
)
from qcn.topologies.bmv2 import Bmv2Config
from qcn.topologies.placement import UNPINNED, plan_cpus, taskset_prefix
from tests.toolchain import requires_p4lang, requires_root


def test_on_two_cpus_the_switches_share_one_and_the_hosts_have_the_other() -> None:
    plan = plan_cpus({"s1": 10.0, "s2": 5.0, "s3": 1.0}, [0, 1])
    assert plan.switch_cpu == {"s1": 1, "s2": 1, "s3": 1}
    assert plan.host_cpus == (0,)
    assert plan.cpus_of("s2") == (1,)
    assert plan.why == "switches pinned (CPU 1: 3 switches); hosts on CPU 0"


def test_on_more_cpus_the_busiest_switch_goes_first_onto_the_least_loaded_cpu() -> None:
    """Largest first: s1 (10) on CPU 2, s2 (6) on CPU 3, s3 (5) then joins s2 (6 < 10),
    s4 (4) joins s1 (10 < 11); the hosts keep CPU 1, the first the run may use."""
    plan = plan_cpus({"s1": 10.0, "s2": 6.0, "s3": 5.0, "s4": 4.0}, [1, 2, 3])
    assert plan.switch_cpu == {"s1": 2, "s2": 3, "s3": 3, "s4": 2}
    assert plan.host_cpus == (1,)


def test_one_cpu_pins_nothing_and_says_why() -> None:
    plan = plan_cpus({"s1": 1.0}, [0])
    assert (plan.switch_cpu, plan.host_cpus) == ({}, ())
    assert plan.cpus_of("s1") == ()
    assert "may use 1 CPU" in plan.why
    assert plan_cpus({}, [0, 1]) is UNPINNED


def test_a_pinned_switch_starts_under_taskset_inside_its_scheduling() -> None:
    config = Bmv2Config(ports={0: "a"}, log_file=Path("x.log"), cpus=(1,), realtime_priority=20)
    cmd = config.command()
    assert cmd[:6] == ["chrt", "-f", "20", "taskset", "-c", "1"]
    assert cmd[6] == "simple_switch_grpc"
    assert Bmv2Config(ports={}, log_file=Path("x.log")).command()[0] == "simple_switch_grpc"
    assert taskset_prefix((0, 2)) == ["taskset", "-c", "0,2"]
    assert taskset_prefix(()) == []


FRAME_BITS = 8 * 1500


def test_the_load_counts_every_switch_at_rest_beside_its_frames() -> None:
    sc = scenarios.load("parking-lot").scaled_for_bmv2()
    cost = FrameCost(50e-6, 0.002, "test")
    load = switch_load(sc, cost)
    frames = sum(load.frames_per_s.values())
    assert load.cores == pytest.approx(len(sc.topology.switches) * 0.002 + frames * 50e-6)


def test_a_slowed_scale_fits_the_frames_beside_the_switches_cost_at_rest() -> None:
    """Slowing the rates slows the frames, not the switches' cost at rest: the scale is
    chosen so that both together make the budget."""
    sc = scenarios.load("leaf-spine-fct").with_overrides({"network.topology": "leaf-spine:2,4,2"})
    cost = FrameCost(60e-6, 0.01, "test")
    choice = choose_scale(sc, cost)
    assert choice.slowed_by > 1
    assert choice.load.cores == pytest.approx(SWITCH_BUDGET_CORES)
    at_rest = len(sc.topology.switches) * 0.01
    assert choice.slowed_by == pytest.approx(
        (choice.own_cores - at_rest) / (SWITCH_BUDGET_CORES - at_rest)
    )
    # Switches that take half the budget at rest leave no room worth slowing for.
    with pytest.raises(ScaleError, match="at rest alone"):
        choose_scale(sc, FrameCost(60e-6, SWITCH_BUDGET_CORES / 12, "test"))


@requires_p4lang()
@requires_root()
def test_net_calibrate_measures_the_bmv2_on_the_path_and_runs_reuse_it(tmp_path: Path) -> None:
    """`qcn net calibrate` measures the switch in real time and placed by the kernel, as
    runs use it,
    and keeps the figures under the binary's, the CPU's and the pipeline's key; the cost
    the runs then take is that record, without measuring again."""
    env = {**os.environ, "QCN_CACHE_DIR": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "net", "calibrate"],
        capture_output=True, text=True, env=env, timeout=180, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "calibrating" in r.stdout, r.stdout
    assert "us a frame" in r.stdout, r.stdout
    (record,) = json.loads((tmp_path / "bmv2-calibration.json").read_text()).values()
    # 1500-byte frames through a switch: tens of microseconds of CPU each
    # on any machine that runs BMv2 at all, and less than a millisecond.
    assert 10e-6 < record["frame_cost_s"] < 1e-3, record
    assert 0 <= record["idle_cores"] < 0.05, record
    assert record["frames"] >= 0.95 * 3000 * 3, record
    assert "not pinned" in record["scheduling"], record
    check = (
        "from qcn.topologies.calibration import frame_cost\n"
        "print(frame_cost(lambda line: print('MEASURED', line)).describe())\n"
    )
    again = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert "MEASURED" not in again, again
    assert f"{record['frame_cost_s'] * 1e6:.0f} us a frame" in again
    assert f"calibrated {record['measured_at'][:10]}" in again
