"""Traffic sources: rates and patterns as specified, against a local UDP receiver."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import fields
from pathlib import Path

import pytest

from qcn.core.ecmp import ECN_ECT0, ECN_MASK, TRAFFIC_TOS
from qcn.reaction_point.sources import SourceReport, SourceSpec, run_source

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def receiver() -> tuple[int, list[int]]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    got = [0]

    def drain() -> None:
        while True:
            try:
                sock.recv(9000)
            except TimeoutError:
                return
            got[0] += 1

    threading.Thread(target=drain, daemon=True).start()
    return sock.getsockname()[1], got


def test_constant_rate(receiver: tuple[int, list[int]]) -> None:
    port, _ = receiver
    spec = SourceSpec(("127.0.0.1",), rate_bps=4e6, duration_s=0.6, port=port)
    report = run_source(spec)
    expected = 4e6 * 0.6 / (1500 * 8)  # 200 frames
    assert abs(report.sent_frames - expected) <= 0.05 * expected
    assert report.sent_bytes == report.sent_frames * 1500


def test_bernoulli_load() -> None:
    spec = SourceSpec(("127.0.0.1",), "bernoulli", rate_bps=12e6, load=0.25, duration_s=0.5)
    report = run_source(spec, rng=random.Random(4))
    slots = 12e6 * 0.5 / 12000  # 500 frame slots
    assert abs(report.sent_frames - 0.25 * slots) < 4 * (slots * 0.25 * 0.75) ** 0.5


def test_onoff_sends_about_half_the_time() -> None:
    spec = SourceSpec(
        ("127.0.0.1",), "onoff", rate_bps=12e6, mean_on_s=0.01, mean_off_s=0.01, duration_s=1.0
    )
    report = run_source(spec, rng=random.Random(1))
    full = 12e6 * 1.0 / 12000
    assert 0.3 * full < report.sent_frames < 0.7 * full


def test_a_stall_is_skipped_not_sent_as_a_burst(receiver: tuple[int, list[int]]) -> None:
    """A source that was not run for 55 ms does not send what fell due meanwhile back to
    back (a burst the modelled source never makes): it skips it, and says how long."""
    port, _ = receiver
    now = [0.0]
    stalled = [False]

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if not stalled[0] and now[0] >= 0.1:
            stalled[0] = True
            now[0] += 0.055  # descheduled: the clock runs on

    spec = SourceSpec(("127.0.0.1",), rate_bps=1.2e6, duration_s=0.3, port=port)  # 10 ms frames
    report = run_source(spec, clock=clock, sleep=sleep)
    assert report.stalled_s == pytest.approx(0.055)
    assert report.late_frames == 0
    # Frames at 0..90 ms, then from 155 ms on every 10 ms: the five due meanwhile skipped.
    assert report.sent_frames == 10 + 15


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (SourceSpec(()), "destination"),
        (SourceSpec(("127.0.0.1",), rate_bps=0), "rate"),
        (SourceSpec(("127.0.0.1",), load=1.5), "load"),
        (SourceSpec(("127.0.0.1",), frame_bytes=20), "frame size"),
    ],
)
def test_invalid_specs_refused(spec: SourceSpec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spec.validate()


def test_send_reports_as_json_also_when_interrupted(tmp_path: Path) -> None:
    """``qcn rp send --report``: what a Mininet run adds up of its senders' stalls, written
    also when the source is stopped by Ctrl-C (status 130)."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(20)
    port = sink.getsockname()[1]
    report = tmp_path / "source.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "qcn", "rp", "send", "--dst", "127.0.0.1", "--port",
         str(port), "--rate-bps", "1.2e6", "--duration", "30", "--report", str(report)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    with sink:
        for _ in range(5):  # sending: a frame every 10 ms
            sink.recv(9000)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 130, out
    data = json.loads(report.read_text())
    assert data["interrupted"] is True
    assert data["sent_frames"] >= 5
    assert data["sent_bytes"] == 1500 * data["sent_frames"]
    assert set(data) == {f.name for f in fields(SourceReport)}
    assert "interrupted" in out


def test_a_runs_sources_start_light() -> None:
    """A BMv2 run starts ten sources at once (``python -m qcn.reaction_point.sources``): none
    may import the controller's or the daemon's libraries, a second of CPU each, which
    delayed the sources' start and everything else on the machine."""
    heavy = (
        "scapy",
        "pyroute2",
        "finsy",
        "grpc",
        "p4",
        "qcn.controller",
        "qcn.reaction_point.daemon",
    )
    r = subprocess.run(
        [sys.executable, "-c",
         "import sys, qcn.reaction_point.sources; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    assert [m for m in r.stdout.split() if m.startswith(heavy)] == []


def test_the_sources_module_is_qcn_rp_send() -> None:
    """The module's command line is `qcn rp send`'s: the same options and one-line errors."""
    argv = ["--dst", "10.0.0.2", "--port", "70000"]
    runs = [
        subprocess.run(
            [sys.executable, *how, *argv], capture_output=True, text=True, cwd=ROOT, check=False
        )
        for how in (("-m", "qcn.reaction_point.sources"), ("-m", "qcn", "rp", "send"))
    ]
    assert [r.returncode for r in runs] == [2, 2]
    assert [r.stderr for r in runs] == [
        "qcn: error: --port must be in [1, 65535] (got 70000)\n"
    ] * 2
    helps = [
        subprocess.run(
            [sys.executable, *how, "--help"], capture_output=True, text=True, cwd=ROOT, check=False
        )
        for how in (("-m", "qcn.reaction_point.sources"), ("-m", "qcn", "rp", "send"))
    ]
    assert helps[0].stdout == helps[1].stdout


def test_every_frame_is_ecn_capable() -> None:
    """The sources' datagrams carry ECT(0) (qcn.core.ecmp.TRAFFIC_TOS), as a receiver
    reads each one's TOS byte (IP_RECVTOS)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
        sock.setblocking(False)
        spec = SourceSpec(
            ("127.0.0.1",), rate_bps=1.2e6, duration_s=0.05, port=sock.getsockname()[1]
        )
        report = run_source(spec)
        assert report.sent_frames > 0
        tos = []
        for _ in range(report.sent_frames):
            _, ancdata, _, _ = sock.recvmsg(9000, socket.CMSG_SPACE(4))
            tos += [data[0] for level, kind, data in ancdata if kind == socket.IP_TOS]
    assert tos == [TRAFFIC_TOS] * report.sent_frames
    assert TRAFFIC_TOS & ECN_MASK == ECN_ECT0
