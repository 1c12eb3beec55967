"""802.3x PAUSE honoured where it arrives: the MAC's part, below any bridge or daemon.

A PAUSE received on an interface holds that interface's transmission for its pause time
(quanta of 512 bit times at the link's rate); a later PAUSE replaces the time left, one of
0 ends the hold (docs/pause.md).  The hold is a kernel qdisc, the only place a Linux
interface's transmission can be stopped without losing frames:

    root tbf 5150:  (the gate)  open: the link's rate; held: 1 byte/s; no agent: passes all
      5150:1  the reaction point's HTB (qcn.reaction_point.tc), or a FIFO

The gate is the interface's one root, shared with the reaction-point daemon: whichever of
the two starts first installs it, either may stop or die first, and the survivor keeps it
(GateControl).  A gate a dead agent left held is lifted by the next agent or by the daemon.

This kernel has neither ``plug`` nor ``netem`` (docs/pause.md), so the gate is a token
bucket.  Changing a TBF refills its bucket, so the frame at the head of the queue when a
hold begins may still leave: one frame of at most ``mtu`` bytes per PAUSE, which the
namespace test bounds.  Frames sent during the hold wait in the gate (up to 20,000 frames,
then the kernel drops them as a full adapter queue would).  A hold and a release are one
bare netlink message each (qcn.reaction_point.netlink): with pyroute2 building them, a hold
took up to 100 ms on a loaded 2-core machine.

Open, the gate passes the link's rate with a bucket of two frames: a veth has no rate of
its own, and without one a released backlog would leave as one burst, faster than any link
and past the peer's PAUSE headroom.

The agent (``python -m qcn.reaction_point.pause``) serves switch ports and hosts alike: one
AF_PACKET socket per interface, bound to EtherType 0x8808.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import select
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netns import popns, pushns

from qcn.core.errors import ExitCode, QcnError
from qcn.core.frames import (
    ETHERTYPE_MAC_CONTROL,
    mac_control_frame,
    parse_pause,
    pause_seconds,
)
from qcn.core.signals import stop_on_signals
from qcn.core.stats import percentile
from qcn.reaction_point.claims import claim_in, claimed
from qcn.reaction_point.netlink import (
    NLM_F_CREATE,
    NLM_F_REPLACE,
    RTM_DELQDISC,
    RTM_NEWQDISC,
    TC_H_ROOT,
    TC_LINKLAYER_ETHERNET,
    TC_RATESPEC,
    TCA_KIND,
    TCA_OPTIONS,
    U32_MAX,
    open_interface,
    rtattr,
    rtnl_socket,
    send_acked,
    tc_message,
)
from qcn.reaction_point.packet_socket import (
    ANCILLARY_BYTES,
    PACKET_OUTGOING,
    rx_timestamp,
    stamp_receptions,
)

GATE_MAJOR = 0x5150
"""The gate's major number: "QP", this module's mark."""
GATE_HANDLE = GATE_MAJOR << 16
GATE_CHILD = GATE_HANDLE | 1
"""Where an interface's own qdisc tree hangs under the gate (TBF's one class)."""
GATE_FIFO_HANDLE = (GATE_MAJOR + 1) << 16
"""The plain FIFO under the gate when no tree hangs there."""
GATE_FIFO_PKTS = 20_000
"""Frames a held gate keeps (beyond, the kernel drops them as a full adapter queue would)."""
OPEN_BURST_FRAMES = 2
"""An open gate's bucket, in largest frames (larger GSO frames TBF segments)."""
HELD_RATE_BYTES_S = 1
"""A held gate's rate: its bucket must hold the largest frame (or TBF drops it), and is
refilled at this rate, one frame in some 25 minutes."""
TCA_TBF_PARMS, TCA_TBF_RATE64, TCA_TBF_BURST = 1, 4, 6
TC_TBF_QOPT = struct.Struct("=" + TC_RATESPEC + TC_RATESPEC + "III")
"""struct tc_tbf_qopt: rate, peakrate, limit (bytes), buffer (ticks), mtu."""
DEFAULT_LIMIT_BYTES = 4 << 20
TREE_MAJOR = 0x5143
"""The reaction point's tree (qcn.reaction_point.tc.ROOT_MAJOR, which imports this module)."""
TREE_HANDLE = TREE_MAJOR << 16


class PauseError(QcnError):
    """The gate could not be installed or changed."""


PASS_RATE_BYTES_S = 1 << 40
"""A gate no agent runs passes everything: some 8.8 Tb/s ..."""
PASS_BURST_BYTES = 1 << 20
"""... with a bucket no frame (GSO's 64 KB included) outgrows, so TBF never splits one."""


@dataclass(frozen=True)
class GateFound:
    """An interface's gate as a dump shows it."""

    held: bool
    child: tuple[str, int] | None
    """The kind and handle of the qdisc under it (None: TBF's own FIFO)."""


def find_gate(ipr: IPRoute, ifindex: int) -> GateFound | None:
    """The gate at ``ifindex``'s root, or None if the root is something else (or nothing)."""
    qdiscs = ipr.get_qdiscs(index=ifindex)
    for q in qdiscs:
        if q["parent"] == TC_H_ROOT and (q.get_attr("TCA_KIND"), q["handle"]) == (
            "tbf",
            GATE_HANDLE,
        ):
            parms = q.get_attr("TCA_OPTIONS").get_attr("TCA_TBF_PARMS")
            child = next(
                ((str(c.get_attr("TCA_KIND")), int(c["handle"])) for c in qdiscs
                 if c["parent"] == GATE_CHILD),
                None,
            )  # fmt: skip
            return GateFound(held=parms["rate"] <= HELD_RATE_BYTES_S, child=child)
    return None


class GateControl:
    """The gate's changes, one bare netlink message each (qcn.reaction_point.netlink).

    The gate is shared: the PAUSE agent holds and releases it, the reaction-point daemon
    hangs its tree under it (qcn.reaction_point.tc).  Whichever starts first installs it; an
    agent that stops while a daemon lives leaves it passing everything, and the daemon
    does the same for the agent; the last one out removes it (qcn.reaction_point.claims tells
    them apart from dead ones).
    """

    def __init__(self, ifindex: int, nl: socket.socket, limit_bytes: int) -> None:
        self.ifindex = ifindex
        self._nl = nl
        self.limit_bytes = limit_bytes
        self._seq = 0

    def close(self) -> None:
        self._nl.close()

    def message(self, rate_bytes_s: int, burst_bytes: int, *, create: bool = False) -> bytes:
        """The gate set to a rate and bucket, as one bare netlink message: the bucket
        given in bytes (TCA_TBF_BURST), so the kernel keeps it in 64-bit ns and a held gate
        may run at 1 byte/s; the link layer given, so no rate table is needed.
        ``create``: install it, replacing whatever root qdisc is there (a gate already
        there is changed, and what hangs under it stays)."""
        spec = (0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(rate_bytes_s, U32_MAX))
        parms = TC_TBF_QOPT.pack(*spec, *(0,) * 6, self.limit_bytes, 0, 0)
        options = rtattr(TCA_TBF_PARMS, parms) + rtattr(
            TCA_TBF_BURST, struct.pack("=I", burst_bytes)
        )
        if rate_bytes_s > U32_MAX:
            options += rtattr(TCA_TBF_RATE64, struct.pack("=Q", rate_bytes_s))
        attrs = rtattr(TCA_KIND, b"tbf\0") + rtattr(TCA_OPTIONS, options)
        self._seq += 1
        flags = NLM_F_CREATE | NLM_F_REPLACE if create else 0
        return tc_message(
            RTM_NEWQDISC, self._seq, (self.ifindex, GATE_HANDLE, TC_H_ROOT), attrs, flags=flags
        )

    def set(self, rate_bytes_s: int, burst_bytes: int, *, create: bool = False) -> None:
        """Raises NetlinkError."""
        send_acked(self._nl, self.message(rate_bytes_s, burst_bytes, create=create), self._seq)

    def pass_all(self, *, create: bool = False) -> None:
        self.set(PASS_RATE_BYTES_S, PASS_BURST_BYTES, create=create)

    def delete(self) -> None:
        """Remove the gate and all under it; one that is gone already is no error."""
        self._seq += 1
        message = tc_message(RTM_DELQDISC, self._seq, (self.ifindex, GATE_HANDLE, TC_H_ROOT), b"")
        try:
            send_acked(self._nl, message, self._seq)
        except NetlinkError as e:
            if e.code not in (errno.ENODEV, errno.ENOENT, errno.EINVAL):
                raise


class PauseGate:
    """The agent's side of the root TBF of one interface (in ``netns``, or this process's
    namespace)."""

    def __init__(
        self,
        ifname: str,
        line_rate_bps: float,
        *,
        netns: str | None = None,
        mtu: int = 1600,
        limit_bytes: int = DEFAULT_LIMIT_BYTES,
    ) -> None:
        self.ifname = ifname
        self.netns = netns
        self.open_rate_bytes_s = round(line_rate_bps / 8)
        self.open_burst_bytes = OPEN_BURST_FRAMES * mtu
        self.mtu = mtu
        self._ipr, self.ifindex = open_interface(ifname, netns, PauseError)
        self.held = False
        self._open = False
        self.control = GateControl(self.ifindex, rtnl_socket(netns), limit_bytes)

    def open(self) -> str | None:
        """Install the gate, open; return a line about what was found, if anything.

        A gate already there (a daemon's, or one a dead agent left, held or not) is taken
        over; a dead daemon's tree under it is replaced by a FIFO, a live one's is kept.  A
        root qdisc someone else configured is refused.
        """
        found = find_gate(self._ipr, self.ifindex)
        said = None
        if found is None:
            root = next(
                (q for q in self._ipr.get_qdiscs(index=self.ifindex) if q["parent"] == TC_H_ROOT),
                None,
            )
            if root is not None and root["handle"] not in (0, TREE_HANDLE):
                kind = root.get_attr("TCA_KIND")
                raise PauseError(
                    f"{self.ifname} already has a root qdisc ({kind} {root['handle'] >> 16:x}:) "
                    "that qcn did not create; remove it first"
                )
        elif found.held:
            said = f"{self.ifname}: took over the PAUSE gate a stopped agent left held"
        try:
            self.control.set(self.open_rate_bytes_s, self.open_burst_bytes, create=True)
        except NetlinkError as e:
            raise PauseError(f"{self.ifname}: cannot install the PAUSE gate: {e}") from e
        self._open = True
        tree = found is not None and found.child is not None and found.child[1] == TREE_HANDLE
        dead_tree = tree and not self._daemon_alive()
        if dead_tree:
            said = f"{self.ifname}: removed the rate limiters a stopped daemon left behind"
        if not tree or dead_tree:
            fifo_under_gate(self._ipr, self.ifindex)
        self.held = False
        return said

    def interface_exists(self) -> bool:
        try:
            return bool(self._ipr.link_lookup(index=self.ifindex))
        except NetlinkError:
            return False

    def _daemon_alive(self) -> bool:
        return claimed("rp", self.ifindex, self.netns)

    def _change(self, rate_bytes_s: int, burst_bytes: int) -> None:
        try:
            self.control.set(rate_bytes_s, burst_bytes)
        except NetlinkError as e:
            raise PauseError(f"{self.ifname}: cannot change the PAUSE gate: {e}") from e

    def hold(self) -> None:
        if not self.held:
            self._change(HELD_RATE_BYTES_S, self.mtu)
            self.held = True

    def release(self) -> None:
        if self.held:
            self._change(self.open_rate_bytes_s, self.open_burst_bytes)
            self.held = False

    def close(self) -> None:
        """Lift the gate: removed, with whatever hangs under it, unless a live daemon's tree
        hangs there; then it passes everything (the daemon removes it when it stops)."""
        if self._open:
            with contextlib.suppress(NetlinkError):
                if self._daemon_alive():
                    self.control.pass_all()
                else:
                    self.control.delete()
            self._open = False
        self._ipr.close()
        self.control.close()


def fifo_under_gate(ipr: IPRoute, ifindex: int) -> None:
    """A FIFO of a known handle under the gate (TBF's own has none that a dump shows)."""
    try:
        ipr.tc(
            "replace", "pfifo", ifindex, GATE_FIFO_HANDLE, parent=GATE_CHILD, limit=GATE_FIFO_PKTS
        )
    except NetlinkError as e:
        raise PauseError(f"cannot put a FIFO under the PAUSE gate: {e}") from e


@dataclass
class PauseState:
    """802.3x's receive side for one link: when the current hold ends (None: not held)."""

    line_rate_bps: float
    until: float | None = None
    pauses: int = 0
    resumes: int = 0
    held_s: float = 0.0
    _since: float = field(default=0.0, repr=False)

    def on_pause(self, quanta: int, now: float) -> None:
        """A PAUSE arrived: hold until its time is up (a new one replaces the old), or
        release at once for 0."""
        if quanta == 0:
            self.resumes += 1
            self._end(now)
            return
        self.pauses += 1
        if self.until is None:
            self._since = now
        self.until = now + pause_seconds(quanta, self.line_rate_bps)

    def expire(self, now: float) -> None:
        if self.until is not None and now >= self.until:
            self._end(self.until)

    def _end(self, at: float) -> None:
        if self.until is not None:
            self.held_s += at - self._since
        self.until = None

    @property
    def held(self) -> bool:
        return self.until is not None


def pause_socket(ifname: str) -> socket.socket:
    """A socket that receives the MAC Control frames arriving on ``ifname``."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETHERTYPE_MAC_CONTROL))
    try:
        sock.bind((ifname, ETHERTYPE_MAC_CONTROL))
    except OSError as e:
        sock.close()
        raise PauseError(f"cannot listen on {ifname}: {e.strerror}") from e
    sock.setblocking(False)
    stamp_receptions(sock)
    return sock


@dataclass
class HonouredPort:
    ifname: str
    gate: PauseGate
    state: PauseState
    sock: socket.socket
    kick: bytes
    """What wakes the gate after a release (PauseAgent.step): a MAC Control frame of no
    opcode from the interface's own address."""
    hold_asked_at: float | None = None
    """The kernel's receive time of the PAUSE that began the hold to come."""
    stop_latency_s: list[float] = field(default_factory=list)
    """Per hold: from the PAUSE's reception to the gate held."""
    tc_latency_s: list[float] = field(default_factory=list)
    """Per hold: the netlink change alone."""
    wake_latency_s: list[float] = field(default_factory=list)
    """Per PAUSE: from its reception to the agent reading it (the part before any tc)."""
    link_down: bool = False
    """A link-down was seen and no frame since (the interface may be being deleted)."""


class PauseAgent:
    """Honours PAUSE on a set of interfaces of one namespace until stopped."""

    def __init__(
        self,
        ifnames: list[str],
        line_rate_bps: float,
        *,
        netns: str | None = None,
        mtu: int = 1600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.ports: list[HonouredPort] = []
        self._claims: list[socket.socket] = []
        self._stop = False
        self.notices: list[str] = []
        """Lines for the user about what the gates' opening found."""
        # The name each interface was given by, by index: two names of one interface (an
        # altname) are one interface (qcn.reaction_point.claims).
        named: dict[int, str] = {}
        try:
            for name in ifnames:
                gate = PauseGate(name, line_rate_bps, netns=netns, mtu=mtu)
                if gate.ifindex in named:
                    gate.close()
                    raise PauseError(
                        f"{named[gate.ifindex]} and {name} are one interface (index "
                        f"{gate.ifindex}): name it once"
                    )
                named[gate.ifindex] = name
                # A claim belongs to the namespace it is made in, and to the interface
                # whatever name it was given by.
                held = claim_in("pause", gate.ifindex, netns)
                if held is None:
                    gate.close()
                    raise PauseError(
                        f"another PAUSE agent already honours PAUSE on {name} (interface "
                        f"index {gate.ifindex}, by this or another of its names)"
                    )
                self._claims.append(held)
                # So does a packet socket.
                if netns:
                    pushns(netns)
                try:
                    sock = pause_socket(name)
                finally:
                    if netns:
                        popns()
                mac: bytes = sock.getsockname()[4]
                kick = mac_control_frame(mac.hex(":"), opcode=0)
                self.ports.append(HonouredPort(name, gate, PauseState(line_rate_bps), sock, kick))
                found = gate.open()
                if found:
                    self.notices.append(found)
        except (PauseError, OSError):
            self.close()
            raise

    def stop(self, _signum: int = 0, _frame: FrameType | None = None) -> None:
        self._stop = True

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        while not self._stop and not until():
            self.step(timeout_s=0.1)

    def step(self, timeout_s: float) -> None:
        """Wait for PAUSEs or the next hold's end (at most ``timeout_s``), act on both."""
        now = self.clock()
        ends = [p.state.until for p in self.ports if p.state.until is not None]
        timeout = max(0.0, min([now + timeout_s, *ends]) - now)
        with contextlib.suppress(InterruptedError):
            readable, _, _ = select.select([p.sock for p in self.ports], [], [], timeout)
        now = self.clock()
        for port in self.ports:
            if port.sock in readable:
                self._receive(port, now)
            if port.link_down and not port.gate.interface_exists():
                raise PauseError(f"{port.ifname} disappeared")
            port.state.expire(self.clock())
            if port.state.held:
                if not port.gate.held:
                    began = time.time()
                    port.gate.hold()
                    port.tc_latency_s.append(time.time() - began)
                    if port.hold_asked_at is not None:
                        port.stop_latency_s.append(time.time() - port.hold_asked_at)
                        port.hold_asked_at = None
            elif port.gate.held:
                port.gate.release()
                # A changed TBF is not run again until a frame arrives, and senders held
                # by their socket's buffer (or TCP's small queues) send none: one frame
                # wakes it.  It is a MAC Control frame of no opcode, which the peer's MAC
                # discards (a bridge never forwards 01-80-C2-00-00-01).
                with contextlib.suppress(OSError):
                    port.sock.send(port.kick)

    def _receive(self, port: HonouredPort, now: float) -> None:
        while True:
            try:
                data, ancdata, _, addr = port.sock.recvmsg(2048, ANCILLARY_BYTES)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.ENETDOWN:
                    # A link going down is weather; one being deleted ends the agent, which
                    # step() finds out while the link stays down.
                    port.link_down = True
                    return
                raise
            port.link_down = False
            if addr[2] == PACKET_OUTGOING:
                continue
            quanta = parse_pause(data)
            rx = rx_timestamp(ancdata)
            if quanta is not None:
                if rx is not None:
                    port.wake_latency_s.append(time.time() - rx)
                if quanta and not port.state.held:
                    port.hold_asked_at = rx
                port.state.on_pause(quanta, now)

    def close(self) -> None:
        for port in self.ports:
            port.sock.close()
            port.gate.close()
        self.ports = []
        for held in self._claims:
            held.close()
        self._claims = []

    def summary(self) -> dict[str, dict[str, float]]:
        return {
            p.ifname: {
                "pauses": p.state.pauses,
                "resumes": p.state.resumes,
                "held_s": round(p.state.held_s, 6),
                "stop_p50_ms": _ms(p.stop_latency_s, 0.5),
                "stop_p99_ms": _ms(p.stop_latency_s, 0.99),
                "tc_p99_ms": _ms(p.tc_latency_s, 0.99),
                "wake_p50_ms": _ms(p.wake_latency_s, 0.5),
                "wake_p99_ms": _ms(p.wake_latency_s, 0.99),
            }
            for p in self.ports
        }


def _ms(seconds: list[float], q: float) -> float:
    """A latency quantile in ms for the summary (0 when there was none)."""
    return 1e3 * (percentile(seconds, q) or 0.0)


MIN_LINE_RATE_MBPS = 0.01
MAX_LINE_RATE_MBPS = 400_000.0
"""The link rates an agent takes: 10 kb/s (a quantum is then 51 ms) to 400 Gb/s."""
MIN_MTU_BYTES = 64
MAX_MTU_BYTES = 65_535
"""The largest frames an agent takes (``--mtu``): from a minimum Ethernet frame to IPv4's
largest packet.  The gate's bucket holds one such frame held, two open: 0 was refused by the
kernel only at the gate's install ("Invalid argument"), and 10,000,000 made a 20 MB bucket
that let a held link send on."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Honour 802.3x PAUSE on interfaces: hold their transmission as asked. "
        "Exit status 2 if it cannot start on them, 1 if one disappears while it runs.",
    )
    parser.add_argument("interfaces", nargs="+", help="interfaces to honour PAUSE on")
    parser.add_argument(
        "--line-rate-mbps",
        type=float,
        required=True,
        help="the links' rate: a quantum's length, and what an open gate passes",
    )
    parser.add_argument("--netns", help="the interfaces' network namespace (default: this one)")
    parser.add_argument(
        "--mtu",
        type=int,
        default=1600,
        help=f"largest frame (bytes, {MIN_MTU_BYTES} to {MAX_MTU_BYTES})",
    )
    args = parser.parse_args(argv)
    if not MIN_LINE_RATE_MBPS <= args.line_rate_mbps <= MAX_LINE_RATE_MBPS:  # NaN fails too
        parser.error(
            f"--line-rate-mbps must be in [{MIN_LINE_RATE_MBPS:g}, {MAX_LINE_RATE_MBPS:g}] "
            f"(got {args.line_rate_mbps:g})"
        )
    if not MIN_MTU_BYTES <= args.mtu <= MAX_MTU_BYTES:
        parser.error(f"--mtu must be in [{MIN_MTU_BYTES}, {MAX_MTU_BYTES}] bytes (got {args.mtu})")
    twice = sorted({i for i in args.interfaces if args.interfaces.count(i) > 1})
    if twice:
        parser.error(f"interface named more than once: {', '.join(twice)}")
    try:
        agent = PauseAgent(
            args.interfaces, args.line_rate_mbps * 1e6, netns=args.netns, mtu=args.mtu
        )
    except (PauseError, OSError) as e:
        # Refused before it began (no such interface, another agent's): exit status 2.
        print(f"pause agent: {e}", file=sys.stderr)
        return ExitCode.USAGE
    stop_on_signals(agent.stop)
    for line in agent.notices:
        print(f"pause agent: {line}", flush=True)
    print(f"pause agent: honouring PAUSE on {', '.join(args.interfaces)}", flush=True)
    code = ExitCode.OK
    try:
        agent.run()
    except PauseError as e:
        # The one fault a gate cannot survive: its interface deleted under it.
        print(f"pause agent: {e}; stopped", file=sys.stderr, flush=True)
        code = ExitCode.FAILED
    finally:
        summary = agent.summary()
        agent.close()
        for name, s in summary.items():
            print(f"pause agent: {name}: {s['pauses']} pauses, {s['resumes']} resumes, "
                  f"held {s['held_s']:.3f} s, PAUSE to held p50 {s['stop_p50_ms']:.3f} ms "
                  f"p99 {s['stop_p99_ms']:.3f} ms (reading it p99 {s['wake_p99_ms']:.3f} ms, "
                  f"the hold p99 {s['tc_p99_ms']:.3f} ms)", flush=True)  # fmt: skip
    return code


if __name__ == "__main__":
    raise SystemExit(main())
