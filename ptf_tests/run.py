"""Runs the PTF tests of the CP pipeline on a real simple_switch_grpc.

    python -m qcn.ptf_tests.run [--trace] [--keep-logs DIR] [TEST ...]

It compiles the pipeline (if it changed), creates a network namespace holding one veth
pair per switch port (``swN`` for BMv2, ``ptfN`` for PTF), moves itself into it, starts
the switch there, runs ``ptf`` against it and, whatever happens (failure, Ctrl-C, SIGTERM),
stops the switch and deletes the namespace, which takes the veths with it.  On failure it
prints the last lines of the switch's log.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from qcn.core.errors import ExitCode, QcnError, ToolMissingError, report
from qcn.core.pipeline import BMV2_GRPC_PORT, BMV2_THRIFT_PORT, compile_program
from qcn.core.signals import sigterm_as_interrupt
from qcn.topologies.bmv2 import Bmv2Config, Bmv2Process
from qcn.topologies.errors import Bmv2Error
from qcn.topologies.netns import entered_namespace

TEST_DIR = Path(__file__).resolve().parent
NUM_PORTS = 4
MTU = 9500  # the tests send 9000-byte frames


def missing_tools() -> list[str]:
    tools = ["p4c", "simple_switch_grpc"]
    missing = [t for t in tools if shutil.which(t) is None]
    if not ptf_binary().exists():
        missing.append("ptf")
    return missing


def ptf_binary() -> Path:
    return Path(sys.executable).parent / "ptf"


def ready_to_run() -> tuple[Path, Path]:
    """The compiled pipeline (P4Info, BMv2 JSON), once what the tests need is here: a tool
    missing is exit status 3, not a skip that exits 0 (docs/reliability.md, Exit codes).
    The test cases are a checkout's: the wheel has this runner but not them (docs/layout.md)."""
    if not any(TEST_DIR.glob("test_*.py")):
        raise ToolMissingError(
            "the PTF tests cannot run: their test cases (ptf_tests/test_*.py) are not "
            "installed; run qcn ptf from a checkout (docs/layout.md)"
        )
    missing = missing_tools()
    if missing:
        raise ToolMissingError(
            f"the PTF tests cannot run: {', '.join(missing)} not installed (make deps)"
        )
    if os.geteuid() != 0:
        raise QcnError("the PTF tests need root (network namespaces and veths)")
    return compile_program()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run the PTF tests of the CP pipeline on a simple_switch_grpc of their "
        "own, in a network namespace removed afterwards (root, and the p4lang toolchain)."
    )
    parser.add_argument("tests", nargs="*", help="PTF test names (default: all)")
    parser.add_argument("--trace", action="store_true", help="log every packet in the switch")
    parser.add_argument("--keep-logs", type=Path, help="copy the switch log here")
    args = parser.parse_args(argv)

    try:
        p4info, bmv2_json = ready_to_run()
    except QcnError as e:
        return report(e)

    workdir = Path(tempfile.mkdtemp(prefix="qcn-ptf-"))
    switch = Bmv2Process(
        Bmv2Config(
            ports={i: f"sw{i}" for i in range(NUM_PORTS)},
            log_file=workdir / "switch.log",
            grpc_port=BMV2_GRPC_PORT,
            thrift_port=BMV2_THRIFT_PORT,
            log_level="trace" if args.trace else "warn",
        )
    )
    params = ";".join(
        [
            f"grpc_addr='127.0.0.1:{BMV2_GRPC_PORT}'",
            f"thrift_port={BMV2_THRIFT_PORT}",
            f"p4info='{p4info}'",
            f"bmv2_json='{bmv2_json}'",
        ]
    )
    cmd = [str(ptf_binary()), "--test-dir", str(TEST_DIR), "--test-params", params]
    # PTF reads 4096 bytes per frame by default; the jumbo-frame test needs more.
    cmd += ["--socket-recv-size", str(MTU + 100)]
    for i in range(NUM_PORTS):
        cmd += ["--interface", f"{i}@ptf{i}"]
    cmd += ["--log-file", str(workdir / "ptf.log"), *args.tests]
    rc = ExitCode.FAILED
    try:
        with (
            sigterm_as_interrupt(),
            entered_namespace(f"qcnptf{os.getpid()}", NUM_PORTS, "ptf", mtu=MTU),
        ):
            switch.start()
            try:
                ran = subprocess.run(cmd, cwd=workdir, check=False).returncode
                rc = ExitCode.OK if ran == 0 else ExitCode.FAILED
            finally:
                if rc != 0:
                    print(switch.log_tail(40), file=sys.stderr)
                switch.stop()
    except Bmv2Error as e:
        print(f"ptf: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        print("ptf: interrupted; switch stopped and namespace removed", file=sys.stderr)
        rc = ExitCode.INTERRUPTED
    finally:
        if args.keep_logs:
            shutil.copytree(workdir, args.keep_logs, dirs_exist_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
