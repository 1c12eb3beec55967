"""What a frame costs the BMv2 on this machine: measured once, kept, and used by the
capacity model (qcn.core.capacity; docs/bmv2.md, "The capacity model's calibration").

A user's BMv2 is not ours: p4lang's packages, a build from source and a build configured
for speed cost very different CPU per frame.  So the first BMv2 run on a machine measures
the ``simple_switch_grpc`` on the PATH, the way the runs use it (in real time where the
machine allows, its threads where the kernel puts them, the CP pipeline with a CP on the
egress port, 1500-byte frames at a steady pace), and keeps the figures
keyed by the binary's SHA-256, the CPU model and the compiled pipeline's: another build,
machine or pipeline is measured again, without a word from the user.  ``qcn net
calibrate`` measures again on demand.

    python -m qcn.topologies.calibration [--json]    (root: one measurement, printed)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from qcn.core.capacity import BUILT_IN_COST, FrameCost
from qcn.core.params import CpParams
from qcn.core.pipeline import compile_program
from qcn.core.provenance import file_sha256
from qcn.topologies.bmv2 import SIMPLE_SWITCH_GRPC, Bmv2Config, Bmv2Process
from qcn.topologies.noise import realtime_available, threads_of
from qcn.topologies.placement import UNPINNED, plan_cpus, taskset_prefix, usable_cpus

CALIBRATION_RATE_FPS = 3000.0
"""The pace of the measured frames: a switch's share of a network at the capacity model's
budget (a few thousand frames a second), which the sender on one CPU holds steadily."""
CALIBRATION_SECONDS = 3.0
IDLE_SECONDS = 1.0
"""How long the switch's own cost at rest is measured (its gRPC and Thrift threads, the
runner's queue reads aside): every switch of a run takes it, forwarding or not."""
FRAME_BYTES = 1500
RAWFRAMES = (sys.executable, "-m", "qcn.topologies.rawframes")
SENDER_MAC, RECEIVER_MAC, SWITCH_MAC = "00:00:00:00:00:01", "00:00:00:00:00:02", "02:00:00:00:00:fe"
CACHE_VERSION = 1
"""Bumped when what is measured changes: older figures are then measured again."""


@dataclass(frozen=True)
class Calibration:
    """One measurement of a BMv2 binary on this machine."""

    frame_cost_s: float
    """The switch's CPU time per frame forwarded, all its threads, beyond its cost at rest."""
    idle_cores: float
    """A switch's CPU at rest, in cores."""
    binary: str
    binary_sha256: str
    cpu_model: str
    program_sha256: str
    measured_at: str
    frames: int
    scheduling: str

    def cost(self) -> FrameCost:
        return FrameCost(
            self.frame_cost_s,
            self.idle_cores,
            f"calibrated {self.measured_at[:10]} for {self.binary} "
            f"(sha256 {self.binary_sha256[:12]}) on {self.cpu_model}",
        )


CACHE_DIR_VARIABLE = "QCN_CACHE_DIR"
"""Where the calibration is kept, if set (the test suite keeps its own); else the user's
cache folder (``$XDG_CACHE_HOME``, ``~/.cache``), ``qcn-p4/``."""


def cache_path() -> Path:
    own = os.environ.get(CACHE_DIR_VARIABLE)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(own) if own else Path(base) / "qcn-p4") / "bmv2-calibration.json"


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "an unknown CPU"


def cache_key(binary: Path, program: Path) -> str:
    return f"v{CACHE_VERSION}:{file_sha256(binary)}:{cpu_model()}:{file_sha256(program)}"


def read_cache() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(key: str, cal: Calibration) -> None:
    data = read_cache()
    data[key] = asdict(cal)
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def cached(key: str) -> Calibration | None:
    record = read_cache().get(key)
    if not isinstance(record, dict):
        return None
    try:
        return Calibration(**record)  # type: ignore[arg-type]
    except TypeError:  # a record of another shape: measured again
        return None


class CalibrationError(RuntimeError):
    pass


def frame_cost(
    progress: Callable[[str], None] = print, *, measure: bool = True, redo: bool = False
) -> FrameCost:
    """The cost the capacity model predicts with: this machine's calibration of the BMv2 on
    the PATH (measured now, with a progress line, if it has none and ``measure``, or if
    ``redo``), or the built-in figure, saying why, where it is not measured."""
    binary = shutil.which(SIMPLE_SWITCH_GRPC)
    if binary is None:
        return BUILT_IN_COST.because(f"{SIMPLE_SWITCH_GRPC} is not installed")
    if os.geteuid() != 0:
        return BUILT_IN_COST.because("calibrating BMv2 needs root")
    _p4info, program = compile_program()
    key = cache_key(Path(binary), program)
    found = None if redo else cached(key)
    if found is not None:
        return found.cost()
    if not measure and not redo:
        return BUILT_IN_COST.because("this BMv2 is not calibrated yet: qcn net calibrate")
    progress(
        f"qcn: calibrating {binary} on this machine (once per build, about "
        f"{IDLE_SECONDS + CALIBRATION_SECONDS + 3:.0f} s): its CPU per frame"
    )
    try:
        cal = measure_in_namespace()
    except CalibrationError as e:
        return BUILT_IN_COST.because(f"the calibration failed: {e}")
    _write_cache(key, cal)
    progress(f"qcn: calibrated: {cal.frame_cost_s * 1e6:.1f} us a frame (kept in {cache_path()})")
    return cal.cost()


def measure_in_namespace(timeout_s: float = 120.0) -> Calibration:
    """One measurement, in a child process (it enters a namespace of its own)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "qcn.topologies.calibration", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CalibrationError(f"no answer within {timeout_s:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise CalibrationError(last)
    return Calibration(**json.loads(done.stdout.strip().splitlines()[-1]))


def cpu_seconds(pid: int) -> float:
    """CPU time of a process, all its threads, from the scheduler's nanosecond accounting
    (/proc/PID/task/TID/schedstat), not the 10 ms ticks of /proc/PID/stat."""
    total_ns = 0
    for tid in threads_of(pid):
        with contextlib.suppress(OSError, ValueError):  # a thread that just ended
            total_ns += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total_ns / 1e9


def offer(
    frame: bytes,
    rate_pps: float,
    duration_s: float,
    *,
    src: str = "h0",
    dst: str = "h1",
    cpus: tuple[int, ...] = (),
) -> tuple[int, int, float]:
    """Offer ``frame`` from ``src`` at ``rate_pps`` for ``duration_s``, counted at ``dst``
    (both on ``cpus``, if given); (frames sent, frames received, received frames/s)."""
    pace_args = ("--rate", str(rate_pps), "--duration", str(duration_s))
    counter = subprocess.Popen(
        [*taskset_prefix(cpus), *RAWFRAMES, "count", dst, "--ethertype", "ipv4", "--idle", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert counter.stdout is not None
    counter.stdout.readline()  # ready
    sent = subprocess.run(
        [*taskset_prefix(cpus), *RAWFRAMES, "pace", src, *pace_args],
        input=frame.hex(),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    received, pps = counter.communicate(timeout=120)[0].split()
    return int(sent), int(received), float(pps)


def calibration_frame() -> bytes:
    from scapy.layers.inet import IP, UDP  # noqa: PLC0415 - scapy's import is slow
    from scapy.layers.l2 import Ether  # noqa: PLC0415

    head = Ether(src=SENDER_MAC, dst=RECEIVER_MAC) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP()
    return bytes(head / bytes(FRAME_BYTES - len(head)))


def measure_here(
    workdir: Path, *, pinned: bool = False, rate_fps: float = CALIBRATION_RATE_FPS
) -> Calibration:
    """The measurement itself, in a namespace this process enters (root); ``pinned``
    puts the switch on one CPU and the sender on another, as ``--cpus pinned`` runs do,
    to measure what pinning saves."""
    from qcn.controller.entries import CpPort, cp_entries, l2_entry  # noqa: PLC0415
    from qcn.controller.p4runtime import P4RuntimeSwitch  # noqa: PLC0415
    from qcn.topologies.mininet_bmv2 import SWITCH_REALTIME_PRIORITY  # noqa: PLC0415
    from qcn.topologies.netns import entered_namespace  # noqa: PLC0415

    binary = shutil.which(SIMPLE_SWITCH_GRPC)
    if binary is None:
        raise CalibrationError(f"{SIMPLE_SWITCH_GRPC} is not installed")
    p4info, program = compile_program()
    plan = plan_cpus({"s1": 1.0}, usable_cpus()) if pinned else UNPINNED
    priority = SWITCH_REALTIME_PRIORITY if realtime_available() else 0
    config = Bmv2Config(
        ports={0: "sw0", 1: "sw1"},
        log_file=workdir / "switch.log",
        cpus=plan.cpus_of("s1"),
        realtime_priority=priority,
    )
    frame = calibration_frame()
    with entered_namespace(f"qcncal{os.getpid()}", 2, "h"):
        sw = Bmv2Process(config).start()
        try:
            with P4RuntimeSwitch("127.0.0.1:9559", p4info, program) as p4rt:
                p4rt.insert(
                    [
                        l2_entry(RECEIVER_MAC, 1),
                        *cp_entries(CpPort.with_default_cpid(1, CpParams(), SWITCH_MAC)),
                    ]
                )
                pid = sw.pid
                assert pid is not None
                offer(frame, rate_fps, 0.5, cpus=plan.host_cpus)  # warm-up
                idle_start, t0 = cpu_seconds(pid), time.monotonic()
                time.sleep(IDLE_SECONDS)
                idle = (cpu_seconds(pid) - idle_start) / (time.monotonic() - t0)
                busy_start, t0 = cpu_seconds(pid), time.monotonic()
                sent, received, _pps = offer(
                    frame, rate_fps, CALIBRATION_SECONDS, cpus=plan.host_cpus
                )
                busy = cpu_seconds(pid) - busy_start - idle * (time.monotonic() - t0)
        finally:
            sw.stop()
    if received < 0.95 * sent:
        raise CalibrationError(f"the switch forwarded {received} of {sent} frames")
    return Calibration(
        frame_cost_s=busy / received,
        idle_cores=idle,
        binary=binary,
        binary_sha256=file_sha256(Path(binary)),
        cpu_model=cpu_model(),
        program_sha256=file_sha256(program),
        measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        frames=received,
        scheduling=f"{config.scheduling()}; {plan.why}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Measure the BMv2 on the PATH: CPU per frame.")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--pinned", action="store_true", help="the switch on one CPU, the sender on another"
    )
    parser.add_argument(
        "--rate", type=float, default=CALIBRATION_RATE_FPS, help="frames a second offered"
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("calibration: needs root (a network namespace)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="qcn-calibration-") as tmp:
        try:
            cal = measure_here(Path(tmp), pinned=args.pinned, rate_fps=args.rate)
        except (CalibrationError, OSError, RuntimeError) as e:
            print(f"calibration: {e}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(asdict(cal)))
    else:
        print(
            f"{cal.binary}: {cal.frame_cost_s * 1e6:.1f} us a frame, "
            f"{cal.idle_cores:.4f} of a core at rest ({cal.frames} frames; {cal.scheduling})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
