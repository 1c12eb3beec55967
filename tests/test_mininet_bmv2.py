"""A Mininet network of BMv2 switches running the CP pipeline, programmed by the controller."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import partial
from pathlib import Path

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
    ours = [line for line in links.splitlines() if "s1-eth" in line or "h1-eth" in line]
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
