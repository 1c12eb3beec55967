"""A Mininet network of BMv2 switches running the CP pipeline, programmed by the controller."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from qcn.core import scenario as scenarios
from qcn.core.noise import reaction_points_late
from qcn.topologies.bmv2 import wait_until
from qcn.topologies.testbed import host_helper_pids
from tests.kit import Cluster
from tests.toolchain import LONG_TESTS, long_test, requires_p4lang, requires_root

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

    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415
    from qcn.core.params import CpParams  # noqa: PLC0415
    from qcn.core.topology import generate  # noqa: PLC0415
    from qcn.topologies.mininet_bmv2 import Bmv2Switch, QcnHost  # noqa: PLC0415
    from qcn.topologies.network import MininetTopology, network_config  # noqa: PLC0415

    subprocess.run(["make", "-s", "-C", str(ROOT), "build"], check=True)
    topo = generate("single:2")
    net = Mininet(
        topo=MininetTopology(topo).build(),
        switch=partial(Bmv2Switch, log_dir=tmp_path),
        host=QcnHost,
        controller=None,
        autoSetMacs=False,
    )
    try:
        net.start()
        config = network_config(topo, cp_params=CpParams(p_base=1.0, p_scale=0.0), frame_bytes=1500)
        assert [p.port for p in config.switch("s1").ports if p.cp] == [3]  # the sink's port
        with SwitchAgent(config, "s1") as agent:
            report = agent.bring_up()
            assert report.inserted > 0
            h1, h3 = net.get("h1"), net.get("h3")
            assert "1 received" in h1.cmd("ping -c 1 -W 2 10.0.0.3")  # ARP floods, then L2
            h3.cmd("iperf3 -s -1 -D -p 5201")
            # -D returns before the server listens: on a busy machine the client was refused.
            assert wait_until(lambda: ":5201" in h3.cmd("ss -ltnH 'sport = :5201'"), 10)
            out = h1.cmd("iperf3 -c 10.0.0.3 -u -b 2M -t 1 -l 1000 -J -p 5201")
            result = json.loads(out[out.index("{") :])
            assert "error" not in result, result["error"]
            received = result["end"]["sum_received"]["bytes"]
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
QCN_CTL = (sys.executable, "-m", "qcn", "ctl")
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
    s = qcn_run(tmp_path, *TRANSIENT, "--duration", "1.6", "--pcap")
    q_eq = s["q_eq_pkts"]
    assert s["backend"] == "mininet"
    assert s["cnms"] > 100
    assert 0.5 * q_eq <= s["queue_mean_settled_pkts"] <= 2 * q_eq, s
    assert s["drops_settled"] == 0, s
    assert s["utilization"] > 0.5
    # Fair shares by the episode's last quarter: 0.2-0.3 when the CP judged departing
    # frames by their enqueue depth (qcn/scenarios/transient.toml); with the arrival CP,
    # runs of this shortened test gave 0.58-0.84 here on a quiet machine and 0.46 with a
    # core taken (2026-11-25), the simulator modelling it 0.73-0.89 over 12 seeds; on
    # 2026-11-28 one quiet CI run gave 0.36 (three reruns: 0.75-0.85).  The bound keeps the
    # gap to the pathology without failing on spread.
    assert s["jain_sent"] >= 0.33, s
    for name in ("queue.csv", "sources.csv", "rates.png", "queue.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert leftovers() == ("", "")
    assert_captured_cnms_decode(tmp_path, s)


def assert_captured_cnms_decode(out: Path, summary: dict[str, Any]) -> None:
    """--pcap: the CP port's and h1's port's captures are named in the summary, bounded by
    their snap length, and every CNM h1's port carried decodes in tshark as the scapy layer
    reads it (docs/wireshark.md)."""
    from scapy.utils import rdpcap  # noqa: PLC0415

    from qcn.core.frames import ETHERTYPE_CNM  # noqa: PLC0415
    from qcn.wireshark import decode, mismatches  # noqa: PLC0415

    captures = summary["captures"]
    assert {c.split("_")[0] for c in captures} == {"captures/s1-eth11", "captures/s1-eth1"}
    frames = [bytes(p) for c in captures if "s1-eth1_" in c for p in rdpcap(str(out / c))]
    assert frames
    assert max(len(f) for f in frames) <= 128  # the snap length
    cnms = [f for f in frames if f[12:14] == ETHERTYPE_CNM.to_bytes(2, "big")]
    assert cnms, "h1 got CNMs during the hot spot"
    if shutil.which("tshark"):
        for cnm, got in zip(cnms, decode(cnms), strict=True):
            assert mismatches(cnm, got) == {}
    assert subprocess.run(["pgrep", "dumpcap"], capture_output=True, check=False).stdout == b""


def test_transient_without_qcn_fills_the_buffer_and_drops(tmp_path: Path) -> None:
    """With the switch pinned (--cpus pinned: qcn.topologies.placement), which the run
    records; the queue is the traffic's either way."""
    s = qcn_run(tmp_path, *TRANSIENT, "--duration", "0.6", "--no-qcn", "--cpus", "pinned")
    assert s["cnms"] == 0
    assert s["queue_mean_settled_pkts"] >= 0.9 * 100, s  # the buffer is 100 packets
    assert s["drops_settled"] > 1000, s
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        where = f"switches pinned (CPU {cpus[1]}: 1 switch); hosts on CPU {cpus[0]}"
        assert s["noise"]["switch_scheduling"].endswith(where), s["noise"]
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
    # Every frame the senders sent is placed (delivered, or dropped for a known reason).
    for s in (with_qcn, without):
        assert s["frames_unplaced"] == 0, s
    assert leftovers() == ("", "")
    iperf = subprocess.run(["pgrep", "-a", "iperf3"], capture_output=True, text=True, check=False)
    assert iperf.stdout == ""


# make test-long: 25 s of BMv2 beside a busy loop, and the hot spot's share of its ideal
# throughput moves with the machine's load (0.76-0.93); PAUSE on BMv2 stays in the default
# suite in test_controller_bmv2's frames (docs/reliability.md, "The suite's time").
@long_test()
def test_tcp_multihop_pause_cascades_and_every_frame_is_placed(tmp_path: Path) -> None:
    """TCP + QCN + PAUSE (seed 001's third scheme), watermarks low enough that the hot
    spot's input at s2 passes hi: s2 pauses s1's link, s1 holds that port in its pipeline,
    its inputs fill with the held frames and s1 pauses the hosts in turn (congestion
    spreading, two hops); nothing is lost, and every frame the senders sent is placed.

    Holding s1's link never stops s2's other ports (BMv2's one transmit thread never blocks
    on a held port): the hot spot keeps its capacity, at least :data:`HOTSPOT_FLOOR` of its
    ideal.  A shortfall in a run judged noisy is measured again, up to 3 runs; one in a run
    judged clean fails at once, and every run must pass every other check."""
    for attempt in range(HOTSPOT_ATTEMPTS):
        summary = _paused_multihop_run(tmp_path / f"run-{attempt + 1}")
        kept = summary["hotspot_throughput_bps"] / summary["hotspot_ideal_bps"]
        if kept >= HOTSPOT_FLOOR:
            break
        assert summary["noise"]["verdict"] == "noisy", summary  # (a clean run has no excuse)
    assert kept >= HOTSPOT_FLOOR, summary
    assert leftovers() == ("", "")
    qdiscs = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=True)
    assert "5150:" not in qdiscs.stdout, "a PAUSE gate was left behind"


HOTSPOT_FLOOR = 0.7
"""The share of its ideal throughput the paused multihop's hot spot keeps, measured on
2026-11-28 (this test's run): 0.885 and 0.931 on a quiet machine; 0.85-0.93 in ten runs
beside two busy loops; 0.756-0.770 in three beside two busy loops and a whole suite, 0.76
once in a fresh clone's suite beside a busy loop; 0.61 and 0.69 beside a compile and
another BMv2 run.  It was 0.8, which the suite's own load broke."""
HOTSPOT_ATTEMPTS = 3
"""Runs of the paused multihop a hot-spot shortfall judged noisy is measured over."""


def _paused_multihop_run(tmp_path: Path) -> dict[str, Any]:
    """One run of the test above, every check but the hot spot's throughput made."""
    summary = qcn_run(
        tmp_path,
        *MULTIHOP_SHORT,
        *("--set", "network.pause=true"),
        *("--set", "network.pause_hi_bytes=30000", "--set", "network.pause_lo_bytes=15000"),
    )
    pause = json.loads((tmp_path / "pause.json").read_text())
    ports, honoured = pause["switch_ports"], pause["honoured"]
    link, senders = "s1-eth9", [f"s1-eth{i}" for i in range(1, 9)]
    # Hop 1: s2 paused s1's link, and s1 received each PAUSE and held the port with it.
    sent = ports["s2-eth3"]["pause_sent"]
    assert sent > 0, pause
    assert ports[link]["pause_received"] == sent, ports
    assert ports[link]["hold_rounds"] > 0, ports
    # Each input's frames keep their order through the holds but for a few (docs/pause.md,
    # "Order": 0.1-0.5 % measured).
    crossed = pause["frame_balance"]["counters"]["s1:9:frames_out"]
    assert ports[link]["order_late"] <= 0.02 * crossed, (ports[link], crossed)
    # Hop 2: the held frames stayed in s1's inputs' counts, which passed hi: s1 paused the
    # hosts, and the hosts' MACs held.
    paused_hosts = [p for p in senders if ports[p]["pause_sent"] > 0]
    assert len(paused_hosts) >= 4, ports
    held_hosts = [h for h, v in honoured.items() if v["held_s"] > 0]
    assert len(held_hosts) >= 4, honoured
    assert summary["pause_frames_sent"] == sum(c["pause_sent"] for c in ports.values())
    # The partitions' headroom (120 KB) covers the loop: nothing dropped anywhere.
    assert sum(c["pause_drops"] for c in ports.values()) == 0, ports
    # The frame balance closes: every frame the senders put on the wire was delivered or
    # dropped for a known reason (here only the agents' MAC Control wake-ups).
    frames = pause["frame_balance"]
    assert frames["unplaced"] == 0, frames
    assert frames["closed"], frames
    assert frames["dropped"]["mac_control"] > 0, frames
    assert frames["delivered"] > 1000, frames
    assert summary["frames_unplaced"] == 0
    return summary


def run_at_full_strength(
    out: Path, command: tuple[str, ...] = (), at_s: float = 1.0, until: str | None = None
) -> tuple[subprocess.Popen[str], list[str]]:
    """A run (``command``; by default a 2 s transient), returned once its progress line
    reaches ``at_s`` or later (a line is printed about once a second, at whatever time the
    run has reached: waiting for exactly ``t=  1.0`` read on to the run's end when the
    first line said 1.2), or once it prints ``until`` where given, with what it printed
    until then."""
    # A suite started as a shell's background job runs with SIGINT ignored (POSIX), which
    # its children inherit, and Python then keeps ignoring it: the run would not see the
    # test's Ctrl-C (it ran to its end once, under `make test &`).  A handler here is reset
    # to the default in the child.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [*(command or (*QCN_RUN_MININET, "--duration", "2")), "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if until is not None:
            if until in line:
                break
            continue
        reached = re.search(r"\bt=\s*([0-9.]+)/", line)
        if reached and float(reached[1]) >= at_s:
            break
    return proc, seen


def line_within(proc: subprocess.Popen[str], text: str, timeout_s: float) -> str:
    """The first line of ``proc``'s output with ``text`` in it, read within ``timeout_s``
    (what comes before it is read and dropped)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break  # the run ended
        if text in line:
            return line
    raise AssertionError(f"no {text!r} from the run within {timeout_s:g} s")


def host_helpers() -> str:
    """Any process a run started on its hosts still running (none should be): those marked
    as such, and any by name, in case the mark went missing."""
    found = subprocess.run(
        ["pgrep", "-af", r"-m (reaction_point|topologies)\.|-m qcn rp|iperf3|mnexec"],
        capture_output=True,
        text=True,
        check=False,
    )
    marked = []
    for pid in host_helper_pids():
        with contextlib.suppress(OSError):  # it exited meanwhile
            marked.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()!r}\n")
    return found.stdout + "".join(marked)


PAGE_WAIT_S = 60.0


# make test-long: 62 s of BMv2 on a fresh clone beside a busy loop (2026-11-28); the default
# suite stays under 20 minutes (docs/reliability.md, "The suite's time").
@long_test()
def test_interrupted_live_run_takes_a_shells_change_and_leaves_nothing_behind(
    tmp_path: Path,
) -> None:
    """A live run (docs/live.md) serves its page; `qcn ctl set` from a shell writes beside
    the run's own controller and the change is the run's knobs.csv; Ctrl-C then stops it
    all and keeps what it measured."""
    # 4 s (100 s at BMv2's scale), stopped by the Ctrl-C below: with a core taken, the page
    # and the shell's `qcn ctl set` once took the 2 s run's whole 50 s, and it ended first.
    proc, seen = run_at_full_strength(tmp_path, (*QCN_RUN_MININET, "--duration", "4", "--live"))
    try:
        said = "".join(seen)
        url = re.search(r"live view at (\S+)", said)
        network = re.search(r"qcn ctl -c (\S+) set", said)
        assert url, said
        assert network, said
        # The page is built on request, in an ordinary thread beside a switch and ten
        # daemons under SCHED_FIFO: 2-4 s on a quiet machine; a browser waits as long.
        with urllib.request.urlopen(url[1], timeout=PAGE_WAIT_S) as page:
            assert "bokeh" in page.read().decode().lower()
        r = subprocess.run(
            [*QCN_CTL, "-c", network[1], "set", "s1", "11", "--p-base", "0.05"],
            capture_output=True, text=True, check=False, cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        # The run reads its entries back twice a second and says what another controller
        # set: waited for (a second's sleep missed it once on a loaded machine).
        took = line_within(proc, "another controller set s1:11 p_base 0.04 -> 0.05", 60.0)
        seen.append(took)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "stopping Mininet" in rest
    assert leftovers() == ("", "")
    assert host_helpers() == ""
    # What it measured before the Ctrl-C is kept, marked partial; the shell's change too.
    assert (tmp_path / "PARTIAL").exists()
    with (tmp_path / "queue.csv").open() as f:
        assert len(list(csv.DictReader(f))) > 10
    assert (tmp_path / "sources.csv").stat().st_size > 0
    with (tmp_path / "knobs.csv").open() as f:
        changes = [(c["port"], c["field"], c["old"], c["new"]) for c in csv.DictReader(f)]
    assert changes == [("s1:11", "p_base", "0.04", "0.05")]
    with pytest.raises(urllib.error.URLError):  # the page's server is gone with the run
        urllib.request.urlopen(url[1], timeout=5)


# make test-long: 85 s of BMv2 on a fresh clone beside a busy loop (2026-11-28); the default
# suite stays under 20 minutes (docs/reliability.md, "The suite's time").
@long_test()
def test_a_run_after_a_killed_run_cleans_up_and_measures(tmp_path: Path) -> None:
    """A run killed outright (kill -9, the OOM killer) leaves its switches, still holding
    their ports, and its hosts' helpers: the next run stops them and measures its own."""
    killed, _seen = run_at_full_strength(tmp_path / "killed")
    killed.kill()
    killed.communicate(timeout=60)
    assert leftovers()[1] != "", "the killed run's switches should still be running"
    # Its sources run to their scheduled end (50 s): they are there for the next run to find.
    assert host_helpers() != "", "the killed run's sources should still be running"
    r = subprocess.run(
        [*QCN_RUN, *TRANSIENT, "--duration", "0.4", "--out", str(tmp_path / "next")],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "stopped 1 switches left by an earlier run" in r.stdout, r.stdout
    assert "host processes left by an earlier run" in r.stdout, r.stdout
    summary = json.loads((tmp_path / "next" / "summary.json").read_text())
    assert summary["cnms"] > 0, summary
    assert summary["utilization"] > 0.5, summary
    assert leftovers() == ("", "")
    assert host_helpers() == ""


FAT_TREE_RUN = (
    *QCN_RUN, "leaf-spine-fct", "--backend", "mininet", "--duration", "0.02",
    "--set", 'network.topology="fat-tree:4"', "--set", "workload.rto_s=5e-3",
)  # fmt: skip
"""A fat-tree's 20 switches to start, about 8 s from `starting Mininet` to
the switches programmed on a quiet machine."""
START_UP_S = 8.0
INTERRUPTS = 12 if os.environ.get(LONG_TESTS) else 2
"""Interrupts at random instants of the start-up: two in the default suite (about 30 s),
twelve in make test-long."""


def test_a_network_interrupted_at_any_moment_of_its_start_leaves_no_switch(
    tmp_path: Path,
) -> None:
    """SIGTERM or SIGINT at a random instant while Mininet starts a fat-tree's 20 switches:
    exit 130, and no switch, link or host helper left (a switch launched as the signal came
    was once left running, its parent 1, 8-13 s after the command had exited)."""
    seed = int(os.environ.get("QCN_INTERRUPT_SEED") or random.randrange(2**32))  # (to replay)
    draw = random.Random(seed)
    for k in range(INTERRUPTS):
        at_s = draw.uniform(0.0, START_UP_S)
        sig = (signal.SIGTERM, signal.SIGINT)[k % 2]
        what = f"{sig.name} {at_s:.2f} s after 'starting Mininet' (random seed {seed})"
        proc, seen = run_at_full_strength(
            tmp_path / f"run-{k}", FAT_TREE_RUN, until="starting Mininet"
        )
        time.sleep(at_s)  # (the random instant itself, not a wait for anything)
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=120)
        said = "".join(seen) + rest
        # (a start-up the signal came after has begun the traffic: a run stopped early)
        assert proc.returncode == 130, f"{what}: exit {proc.returncode}\n{said[-3000:]}"
        assert "Traceback" not in said, f"{what}\n{said[-3000:]}"
        # (a switch the kernel is still reaping goes within milliseconds; one nobody stopped stays)
        wait_until(lambda: leftovers() == ("", ""), 5.0)
        assert leftovers() == ("", ""), f"{what}: left behind\n{said[-3000:]}"
        assert host_helpers() == "", what


# make test-long: 32 s of BMv2 on a fresh clone beside a busy loop (2026-11-28); the default
# suite stays under 20 minutes (docs/reliability.md, "The suite's time").
@long_test()
def test_sweep_on_the_mininet_backend(tmp_path: Path) -> None:
    """Points one at a time on this machine's BMv2 network, scaled as `qcn run` scales them,
    with the same outputs as the simulator's sweep."""
    out = tmp_path / "sweep"
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "sweep", "transient", "--backend", "mininet",
         "--duration", "0.2", "--grid", "qcn.rp.fb_hat=false,true", "--out", str(out),
         "--quiet"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 points run, 0 already done" in r.stdout
    rows = (out / "sweep.csv").read_text().splitlines()
    assert len(rows) == 3
    for key in (line.split(",")[0] for line in rows[1:]):
        summary = json.loads((out / "points" / key / "summary.json").read_text())
        assert summary["backend"] == "mininet"
        assert summary["duration_s"] == pytest.approx(0.2 * 25)  # transient's time_scale
        assert summary["queue_max_pkts"] > 0
    assert leftovers() == ("", "")


def test_mininet_points_run_on_a_dask_worker_that_declares_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The same seam on a cluster: two workers that cannot run Mininet points and one that
    declares it can; the point's Trace comes back like a simulated point's."""
    cluster.start_worker(tmp_path, resources="mininet=1")
    cluster.wait_for_workers(3)
    out = tmp_path / "sweep"
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "sweep", "transient", "--backend", "mininet",
         "--duration", "0.2", "--grid", "qcn.rp.fb_hat=true", "--address", cluster.address,
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 points run, 0 already done" in r.stdout
    (key,) = [line.split(",")[0] for line in (out / "sweep.csv").read_text().splitlines()[1:]]
    summary = json.loads((out / "points" / key / "summary.json").read_text())
    assert summary["backend"] == "mininet"
    assert summary["duration_s"] == pytest.approx(0.2 * 25)
    assert summary["queue_max_pkts"] > 0
    assert summary["noise"]["switch_scheduling"]  # measured on the worker's machine
    assert leftovers() == ("", "")


@contextlib.contextmanager
def cpu_hog() -> Iterator[None]:
    """Another process taking a whole core for as long as the block runs (a fresh machine
    of this kind is that noisy: docs/bmv2.md, "Noise")."""
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


# make test-long: 54 s of BMv2 on a fresh clone beside a busy loop (2026-11-28); the default
# suite stays under 20 minutes (docs/reliability.md, "The suite's time").
@long_test()
def test_with_a_core_taken_the_runner_takes_its_queue_samples_on_time(tmp_path: Path) -> None:
    """The runner samples the queue every 10 ms in real time while it measures (below the
    switch, the daemons and the sink, above the senders): with a CPU hog taking a core it
    misses at most 1 % of the samples, and the run does not blame it.  (At ordinary
    priority it missed 25 % of a quiet `make run`'s, its longest gap 1.3 s.)"""
    with cpu_hog():
        s = qcn_run(tmp_path, *TRANSIENT, "--duration", "1.6")
    noise = s["noise"]
    samples = noise["samples"]
    assert samples["scheduling"] == "SCHED_FIFO 5", samples
    assert samples["missed_fraction"] <= 0.01, samples
    assert not [r for r in noise["reasons"] if r.startswith("the runner")], noise
    assert leftovers() == ("", "")


# 161 s, and on 2026-11-27 it failed 3 of 4 runs on a quiet machine (switch stalls up to
# 1.1 s, judged noisy; daemons' p99 latency 127 ms): out of the default suite.  The switch's
# stalls were its threads waiting for each other, no longer counted (docs/bmv2.md, "A
# switch waiting for itself"); it then passed once.  Later that day it failed 6 of 6, 5 on
# delivered/offered (0.81-0.93) whether the runner was in real time or not and with the
# senders at niceness -10 (the sixth: the ordinary runner missed 46 % of its samples).  In
# the run looked into, the queue rose past q_eq 16 times, each after a senders' stall, and
# the CNMs that answered cut their rates.  With the switch (about a core), the daemons, the
# sink and the runner in real time, the senders and the hog share what is left of two CPUs
# (docs/bmv2.md, "What is left").
@long_test()
def test_transient_with_a_core_taken_carries_its_load_in_both_uncongested_phases(
    tmp_path: Path,
) -> None:
    """The whole 150 s transient with QCN on and a CPU hog taking one of the two cores:
    the reaction points must not throttle a network that is not congested, before the hot
    spot or after it (where the sources drain their backlogs), with the daemons' CNM-to-rate
    latency within its tolerance (docs/bmv2.md, "The reaction points' latency").  (Its 50 s
    after the hot spot are needed: over the first 25 s the sources are still recovering
    their rates, delivered/offered 0.86.)"""
    with cpu_hog():
        r = subprocess.run(
            [*QCN_RUN_MININET, "--out", "rel-out"],
            capture_output=True, text=True, check=False, cwd=tmp_path, timeout=400,
        )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((tmp_path / "rel-out" / "summary.json").read_text())  # relative --out
    noise = summary["noise"]
    before, hot_spot, after = summary["phases"]
    assert [before["congested"], hot_spot["congested"], after["congested"]] == [False, True, False]
    assert before["delivered_offered"] >= 0.95, (before, noise)
    assert after["delivered_offered"] >= 0.95, (after, noise)
    assert noise["switch_scheduling"].startswith("SCHED_FIFO"), noise
    rp = noise["reaction_points"]
    assert (rp["scheduling"], rp["daemons"]) == ("SCHED_FIFO 10", 10), rp
    assert not reaction_points_late(rp), rp
    # The hog may still make the switch stall more often than the verdict allows (0-23
    # stalls over 3.1 ms in 150 s measured, 15 allowed): the run must then say so, and
    # nothing else may be wrong (the queue, the senders, the reaction points).
    for reason in noise["reasons"]:
        assert reason.startswith("the switch stalled"), noise
    assert ("emulation noise ok" in r.stdout) == (noise["verdict"] == "ok"), r.stdout
    assert leftovers() == ("", "")


# make test-long: 21 s of BMv2 beside a busy loop (2026-11-28); the verdict's arithmetic
# stays in the default suite in test_noise (docs/reliability.md, "The suite's time").
@long_test()
def test_injected_stalls_make_the_run_say_it_was_noisy(tmp_path: Path) -> None:
    """Stalls injected into the switch (a real-time busy loop on its CPU, 20 ms every
    200 ms: each long enough to fill q_eq 6 times over) are measured and the run says its
    results are not QCN's alone, with the figures."""
    s = qcn_run(tmp_path, *QCN_RUN_MININET[4:], "--duration", "0.4", "--inject-stalls", "20/200")
    noise = s["noise"]
    assert noise["verdict"] == "noisy", noise
    assert noise["injected"] == "20 ms every 200 ms on CPU 0"
    switch = noise["stalls"]["switch"]
    # 10 s of run at one stall every 200 ms: about 50, each at least ~20 ms (a thread may
    # wait longer: pinned to one CPU at one real-time priority, the switch's threads then
    # also wait for each other to work off what piled up; 110 ms measured).
    assert switch["over_tolerance"] >= 35, switch
    assert switch["longest_ms"] >= 15, switch
    assert any("the switch stalled" in reason for reason in noise["reasons"]), noise
    assert leftovers() == ("", "")


def test_compare_sets_bmv2_beside_the_simulator(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "qcn", "compare", "transient", "--runs", "1",
         "--duration", "0.4", "--out", str(tmp_path / "cmp"), "--live"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    # A run this short may miss a target: exit 1 by the convention (docs/reliability.md).
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "queue mean, episode (pkts)" in r.stdout
    assert "qcn compare: live view at http://127.0.0.1:" in r.stdout  # (what watching costs)
    result = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    rows = {row["figure"]: row for row in result["rows"]}
    # One uncongested phase on both backends (the load it carries is asserted at full
    # strength by test_uncongested_phase_carries_its_offered_load_with_qcn).
    assert rows["delivered_offered_uncongested"]["sim"][0] >= 0.95
    assert 0 < rows["delivered_offered_uncongested"]["mininet"][0] <= 1.05
    assert rows["queue_mean_episode_pkts"]["ok"] in (True, False)  # both sides measured it
    assert (tmp_path / "cmp" / "mininet-1" / "summary.json").exists()
    assert leftovers() == ("", "")


# -- seed 003's dynamic flows: every flow finished or counted (docs/fct.md) -----------------


def test_fct_every_started_flow_finishes_or_is_counted(tmp_path: Path) -> None:
    s = qcn_run(tmp_path, "fct", "--backend", "mininet", "--duration", "0.06")  # 15 s on BMv2
    flows = s["flows"]
    assert flows["started"] > 500
    assert flows["finished"] + flows["unfinished"] == flows["started"]
    assert flows["finished"] >= 0.95 * flows["started"]
    with (tmp_path / "flows.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == flows["started"]
    assert sum(int(r["finished"]) for r in rows) == flows["finished"]
    assert all(float(r["slowdown"]) >= 1 for r in rows if r["finished"] == "1")
    assert s["cnms"] > 0  # the flows' own reaction points were told
    # Every loss the receiver saw was sent again (and a few copies after late ACKs).
    assert flows["retransmitted_frames"] >= s["drops"]
    # The senders kept to the flows' arrival times: none fell a second behind.
    assert s["flow_start_late_max_ms"] < 1000, s
    assert leftovers() == ("", "")


def test_dcqcn_on_bmv2_marks_and_its_cnps_reach_the_senders(tmp_path: Path) -> None:
    """DCQCN end to end on BMv2: the switch marks CE, the flow receivers answer with CNPs,
    the senders' daemons take them (docs/dcqcn.md)."""
    s = qcn_run(tmp_path, "fct", "--scheme", "dcqcn", "--backend", "mininet", "--duration", "0.06")
    assert s["marks"] > 0
    assert s["cnms"] == 0  # no CP sends a CNM
    taken = [
        int(m.group(1))
        for log in (tmp_path / "logs").glob("rp-*.log")
        for m in re.finditer(r"'cnps_accepted': (\d+)", log.read_text())
    ]
    assert sum(taken) > 0
    # The CNPs the receivers sent, counted as the simulator counts them: at most one a
    # marked frame, and every one the daemons took was sent.
    assert sum(taken) <= s["cnps"] <= s["marks"]
    assert leftovers() == ("", "")


def test_an_interrupted_fct_run_keeps_every_flows_record(tmp_path: Path) -> None:
    command = (*QCN_RUN, "fct", "--backend", "mininet", "--duration", "0.08")  # 20 s
    ack_dirs = set(Path(tempfile.gettempdir()).glob("qcn-acks-*"))
    proc, seen = run_at_full_strength(tmp_path, command, at_s=6.0)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    with (tmp_path / "flows.csv").open() as f:
        rows = list(csv.DictReader(f))
    arrivals = scenarios.load("fct").with_overrides({"duration_s": 0.08}).scaled_for_bmv2()
    assert len(rows) == len(arrivals.draw_flows(1))  # every flow, started or not
    finished = sum(int(r["finished"]) for r in rows)
    assert 0 < finished < len(rows)
    assert (tmp_path / "PARTIAL").exists()
    assert leftovers() == ("", "")
    assert host_helpers() == ""
    # The senders' acknowledgement sockets went with the run.
    assert set(Path(tempfile.gettempdir()).glob("qcn-acks-*")) <= ack_dirs
