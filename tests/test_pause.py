"""802.3x PAUSE: the frame layer, the receive-side timing rules, and the agent holding a
real interface's transmission (root: two namespaces, a veth pair, the kernel's qdisc)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from scapy.layers.l2 import Ether

from qcn.core.frames import (
    PAUSE_FRAME_BYTES,
    mac_control_frame,
    parse_pause,
    pause_frame,
    pause_quanta,
    pause_seconds,
)
from qcn.reaction_point.claims import claim_in
from qcn.reaction_point.pause import PauseGate, PauseState
from qcn.reaction_point.tc import ROOT_HANDLE, FlowMatch, HtbLimiters, RootQdisc
from tests.kit import Link, in_ns, largest_gap, started
from tests.toolchain import requires_root


def test_pause_frame_bytes() -> None:
    frame = pause_frame("02:00:00:00:00:01", 0x1234)
    assert len(frame) == PAUSE_FRAME_BYTES
    assert frame.hex() == (
        "0180c2000001" "020000000001" "8808" "0001" "1234" + "00" * 42
    )  # fmt: skip
    assert parse_pause(frame) == 0x1234
    assert Ether(frame).pause_time == 0x1234
    # The agent's wake-up frame: MAC Control, no opcode, nothing else.
    kick = mac_control_frame("02:00:00:00:00:01", opcode=0)
    assert kick == frame[:14] + bytes(PAUSE_FRAME_BYTES - 14)
    assert parse_pause(kick) is None


@pytest.mark.parametrize(
    "frame",
    [
        pause_frame("02:00:00:00:00:01", 5)[:15],  # cut short
        bytes.fromhex("020000000002") + pause_frame("02:00:00:00:00:01", 5)[6:],  # unicast
        pause_frame("02:00:00:00:00:01", 5)[:14] + b"\x00\x02" + bytes(44),  # GATE opcode
        bytes.fromhex("0180c20000010200000000010800") + bytes(46),  # not MAC Control
    ],
)
def test_anything_but_a_pause_is_ignored(frame: bytes) -> None:
    assert parse_pause(frame) is None


def test_quanta_are_512_bit_times() -> None:
    assert pause_seconds(0xFFFF, 100e6) == pytest.approx(0.3355392)
    assert pause_quanta(0.001, 100e6) == 196  # 195.3 rounded up: at least the time asked
    with pytest.raises(ValueError, match="at most 65535"):
        pause_quanta(1.0, 100e6)


def test_a_new_pause_replaces_the_time_left_and_zero_ends_it() -> None:
    s = PauseState(line_rate_bps=512e3)  # one quantum = 1 ms
    s.on_pause(100, now=0.0)
    assert s.until == pytest.approx(0.1)
    s.on_pause(10, now=0.05)  # shorter: the new time wins, as 802.3x has it
    assert s.until == pytest.approx(0.06)
    s.expire(0.059)
    assert s.held
    s.expire(0.0601)
    assert not s.held
    assert s.held_s == pytest.approx(0.06)
    s.on_pause(100, now=1.0)
    s.on_pause(0, now=1.02)
    assert not s.held
    assert (s.pauses, s.resumes, s.held_s) == (3, 1, pytest.approx(0.08))


# -- on real interfaces ---------------------------------------------------------------------


@requires_root()
def test_a_pause_holds_transmission_for_its_time(link: Link) -> None:
    gap = largest_gap(link, line_rate_mbps=100, pauses=[0xFFFF])
    assert gap == pytest.approx(pause_seconds(0xFFFF, 100e6), rel=0.10)


@requires_root()
def test_a_zero_pause_ends_the_hold(link: Link) -> None:
    # 65535 quanta at 20 Mb/s hold for 1.7 s; the zero PAUSE 0.25 s later ends it.
    gap = largest_gap(link, line_rate_mbps=20, pauses=[0xFFFF, 0], gap_s=0.25)
    assert gap == pytest.approx(0.25, rel=0.10)


@requires_root()
def test_the_agent_leaves_no_qdisc(link: Link) -> None:
    largest_gap(link, line_rate_mbps=100, pauses=[])
    assert "tbf" not in tc_show(link)


@requires_root()
def test_the_reaction_points_tree_hangs_under_the_gate_and_is_held(link: Link) -> None:
    gate = PauseGate(link.host_if, 100e6, netns=link.host_ns)
    agent_claim = claim_in("pause", gate.ifindex, link.host_ns)  # as a live agent holds it
    assert agent_claim is not None
    gate.open()
    try:
        with HtbLimiters(link.host_if, netns=link.host_ns, line_rate_bps=100e6) as tree:
            assert tree.root_qdisc() == RootQdisc("htb", ROOT_HANDLE)
            tree.add(FlowMatch("10.0.0.1", "10.0.0.2", 17, 1, 2), 10e6)
            shown = tc_show(link)
            assert "qdisc tbf 5150: root" in shown
            assert "qdisc htb 5143: parent 5150:1" in shown
        shown = tc_show(link)
        assert "htb" not in shown, "the tree is gone"
        # and a second daemon finds the gate's FIFO, not someone else's qdisc
        with HtbLimiters(link.host_if, netns=link.host_ns) as again:
            assert again.root_qdisc() == RootQdisc("htb", ROOT_HANDLE)
        shown = tc_show(link)
        assert "qdisc pfifo 5151: parent 5150:1" in shown, "and the gate still passes"
    finally:
        agent_claim.close()
        gate.close()
    assert "tbf" not in tc_show(link)


@requires_root()
def test_a_pause_holds_the_reaction_points_traffic(link: Link) -> None:
    gap = largest_gap(link, line_rate_mbps=100, pauses=[0xFFFF], rp_tree=True)
    assert gap == pytest.approx(pause_seconds(0xFFFF, 100e6), rel=0.10)


def tc_show(link: Link) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", link.host_ns, "tc", "qdisc", "show", "dev", link.host_if],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@requires_root()
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--line-rate-mbps", "nan"), "--line-rate-mbps must be in [0.01, 400000] (got nan)"),
        (("--line-rate-mbps", "inf"), "(got inf)"),
        (("--line-rate-mbps", "1e-9"), "(got 1e-09)"),
        (("--line-rate-mbps", "1e12"), "(got 1e+12)"),
        (("IF", "--line-rate-mbps", "100"), "interface named more than once: IF"),
        (("--line-rate-mbps", "100", "--mtu", "0"), "--mtu must be in [64, 65535] bytes (got 0)"),
        (("--line-rate-mbps", "100", "--mtu", "10000000"), "(got 10000000)"),
        (("--line-rate-mbps", "100", "--netns", "qcnnosuchns"), "no network namespace named"),
    ],
)
def test_the_agent_refuses_bad_input_without_a_trace(
    link: Link, args: tuple[str, ...], message: str
) -> None:
    """Bad rates and MTUs, an interface twice and a missing namespace: one message, no
    traceback, and no namespace created for the missing one."""
    argv = [link.host_if, *(a.replace("IF", link.host_if) for a in args)]
    if "--netns" not in argv:
        argv += ["--netns", link.host_ns]
    r = subprocess.run(
        [sys.executable, "-m", "qcn.reaction_point.pause", *argv],
        capture_output=True, text=True, check=False, timeout=30,
    )  # fmt: skip
    assert r.returncode == 2  # refused before it began (docs/reliability.md, Exit codes)
    assert message.replace("IF", link.host_if) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert (
        "qcnnosuchns"
        not in subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=True
        ).stdout
    )


@requires_root()
def test_a_second_agent_on_an_interface_is_refused(link: Link) -> None:
    """One PAUSE agent per interface: a second is refused in one line and leaves the first's
    gate alone, which still holds on a PAUSE (the second used to take it over, and its
    stop crashed the first)."""
    agent = in_ns(link.host_ns, "-m", "qcn.reaction_point.pause", link.host_if,
                  "--line-rate-mbps", "100")  # fmt: skip
    first = started(agent, "honouring")
    try:
        second = subprocess.run(agent, capture_output=True, text=True, check=False, timeout=30)
        assert second.returncode == 2
        assert second.stderr.startswith(
            f"pause agent: another PAUSE agent already honours PAUSE on {link.host_if} "
        )
        assert second.stderr.count("\n") == 1
        assert "tbf" in tc_show(link)
        assert first.poll() is None
    finally:
        first.terminate()
        first.communicate(timeout=10)
    assert first.returncode == 0
    assert largest_gap(link, line_rate_mbps=100, pauses=[0xFFFF]) == pytest.approx(
        pause_seconds(0xFFFF, 100e6), rel=0.10
    )
