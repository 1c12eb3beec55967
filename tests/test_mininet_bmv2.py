"""A Mininet network of BMv2 switches running the CP pipeline, programmed by the controller."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.toolchain import requires_p4lang, requires_root

pytestmark = [
    requires_p4lang(),
    requires_root(),
    pytest.mark.skipif(shutil.which("mnexec") is None, reason="mininet not installed"),
]

ROOT = Path(__file__).resolve().parent.parent


def leftovers() -> tuple[str, str]:
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    ours = [line for line in links.splitlines() if "s1-eth" in line or "-eth" in line.split(":")[1]]
    procs = subprocess.run(
        ["pgrep", "-a", "simple_switch"], capture_output=True, text=True, check=False
    )
    return "\n".join(ours), procs.stdout


def test_bmv2_in_mininet_forwards_and_counts(tmp_path: Path) -> None:
    from mininet.net import Mininet  # noqa: PLC0415 - Debian's package, root only

    from controller.agent import SwitchAgent  # noqa: PLC0415
    from topologies.bmv2 import wait_until  # noqa: PLC0415
    from topologies.mininet_bmv2 import (  # noqa: PLC0415
        Bmv2Switch,
        QcnHost,
        SingleBottleneckTopo,
        network_config,
    )

    subprocess.run(["make", "-s", "-C", str(ROOT), "build"], check=True)
    net = Mininet(
        topo=SingleBottleneckTopo(sources=2),
        switch=partial(Bmv2Switch, log_dir=tmp_path),
        host=QcnHost,
        controller=None,
        autoSetMacs=False,
    )
    try:
        net.start()
        config = network_config(
            net, cp_ports={"s1": [3]}, cp_params={"p_base": 1.0, "p_scale": 0.0}
        )
        with SwitchAgent(config, "s1") as agent:
            report = agent.bring_up()
            assert report.inserted > 0
            h1, h3 = net.get("h1"), net.get("h3")
            assert "1 received" in h1.cmd("ping -c 1 -W 2 10.0.0.3")  # ARP floods, then L2
            h3.cmd("iperf3 -s -1 -D -p 5201")
            out = h1.cmd("iperf3 -c 10.0.0.3 -u -b 2M -t 1 -l 1000 -J -p 5201")
            received = json.loads(out[out.index("{") :])["end"]["sum_received"]["bytes"]
            assert received > 100_000  # checksums intact across BMv2 (offload off)
            # Read once traffic has stopped (iperf3's closing exchange may still be crossing).
            reads = [agent.counters(3)]

            def settled() -> bool:
                reads.append(agent.counters(3))
                return reads[-1] == reads[-2]

            assert wait_until(settled, 5.0, interval_s=0.2)
            counters = reads[-1]
            assert counters["cp_frames"] > 100
            assert counters["cp_samples"] == counters["cp_frames"]
    finally:
        net.stop()
    links, procs = leftovers()
    assert links == ""
    assert procs == ""


# -- `qcn run --backend mininet`: the transient experiment, shortened --------------------------

# The hot spot from 0.2 s (scaled: 5 s) to the end, so a short run is mostly the congested,
# then settled, state the assertions are about.
QCN_RUN = (sys.executable, "-m", "qcn", "run")
QCN_RUN_MININET = (*QCN_RUN, "transient", "--backend", "mininet")
HOT_SPOT = "schedule=[{at_s = 0.2, bottleneck_rate_bps = 0.5e9}]"
TRANSIENT = ("transient", "--backend", "mininet", "--set", HOT_SPOT)


def qcn_run(out: Path, *args: str) -> dict[str, Any]:
    """``qcn run ARGS --out OUT``; its summary."""
    r = subprocess.run(
        [*QCN_RUN, *args, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def test_transient_with_qcn_holds_the_queue_near_q_eq(tmp_path: Path) -> None:
    s = qcn_run(tmp_path, *TRANSIENT, "--duration", "1.6")
    q_eq = s["q_eq_pkts"]
    assert s["backend"] == "mininet"
    assert s["cnms"] > 100
    assert 0.5 * q_eq <= s["queue_mean_settled_pkts"] <= 2 * q_eq, s
    assert s["drops_settled"] == 0, s
    assert s["utilization"] > 0.5
    # Fair shares by the episode's last quarter (0.2-0.3 when the CP judged departing
    # frames by their enqueue depth, scenarios/transient.toml).
    assert s["jain_fairness"] >= 0.6, s
    for name in ("queue.csv", "sources.csv", "rates.png", "queue.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert leftovers() == ("", "")


def test_transient_without_qcn_fills_the_buffer_and_drops(tmp_path: Path) -> None:
    s = qcn_run(tmp_path, *TRANSIENT, "--duration", "0.6", "--no-qcn")
    assert s["cnms"] == 0
    assert s["queue_mean_settled_pkts"] >= 0.9 * 100, s  # the buffer is 100 packets
    assert s["drops_settled"] > 1000, s
    assert leftovers() == ("", "")


# -- seed 002: the output-generated hot spot (exact scaling; the run cut at 10 s, after the
# hot spot's last quarter, 7 s to 9 s) ----------------------------------------------------


def test_og_hotspot_holds_the_queue_at_the_service_rate(tmp_path: Path) -> None:
    s = qcn_run(tmp_path, "og-hotspot", "--backend", "mininet", "--duration", "0.1")
    assert s["fairness_window_s"] == [7.0, 9.0]
    assert 0.5 * s["q_eq_pkts"] <= s["queue_mean_episode_pkts"] <= 2.5 * s["q_eq_pkts"], s
    assert s["utilization_episode"] >= 0.9, s
    assert leftovers() == ("", "")


# -- seed 001: TCP through the RPs, the hot spot two hops away (shortened: 0.5 s, scaled 10 s,
# the hot-spot flows from 2 s to 8 s) ---------------------------------------------------------

MULTIHOP_SHORT = (
    "tcp-multihop",
    *("--duration", "0.5"),
    *("--set", "workload.hotspot_start_s=0.1", "--set", "workload.hotspot_duration_s=0.3"),
)


def test_tcp_multihop_qcn_spares_the_innocent_flows(tmp_path: Path) -> None:
    with_qcn = qcn_run(tmp_path / "qcn", *MULTIHOP_SHORT)
    without = qcn_run(tmp_path / "tcp", *MULTIHOP_SHORT, "--no-qcn")
    # TCP alone fills the hot spot's buffer at times; QCN's CNMs cut the hot-spot senders.
    assert with_qcn["cnms"] > 0
    assert without["cnms"] == 0
    assert without["queue_max_pkts"] >= 90, without
    assert with_qcn["queue_mean_pkts"] < without["queue_mean_pkts"], (with_qcn, without)
    # The seed's findings: the innocent flows keep their ideal throughput either way (the
    # sinks count Ethernet bytes, a few % above the senders' TCP payload rate)...
    for s in (with_qcn, without):
        assert s["innocent_throughput_bps"] >= 0.9 * s["innocent_ideal_bps"], s
    # ...and TCP alone carries the hot spot near its capacity; QCN may cost some of it.
    assert without["hotspot_throughput_bps"] >= 0.7 * without["hotspot_ideal_bps"], without
    assert 0 < with_qcn["hotspot_throughput_bps"] <= 1.1 * without["hotspot_throughput_bps"]
    assert leftovers() == ("", "")
    iperf = subprocess.run(["pgrep", "-a", "iperf3"], capture_output=True, text=True, check=False)
    assert iperf.stdout == ""


def test_interrupted_run_leaves_nothing_behind(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*QCN_RUN_MININET, "--duration", "2", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:  # the run is at full strength once the sources start
        seen.append(line)
        if "t=  1.0/" in line:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "stopping Mininet" in rest
    assert leftovers() == ("", "")
    helpers = subprocess.run(
        ["pgrep", "-af", "topologies.sink|qcn rp|mnexec"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert helpers.stdout == ""
