"""Hold a switch as P4Runtime primary until stdin closes (a second controller, for tests).

    python -m tests.hold_primary GRPC_ADDRESS ELECTION_ID
    python -m tests.hold_primary --agent NETWORK_TOML SWITCH

Prints "primary" once it is.  With ``--agent`` it is the network's own controller, as a
live run holds a switch (``SwitchAgent`` at the file's election id), and each line
``PORT Q_EQ`` on stdin is a ``set_cp`` it answers with "ok" or the error, in one line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from qcn.controller.p4runtime import P4RuntimeSwitch
from qcn.core.pipeline import outputs

RETRY_S = 3.0
"""A write is retried for this long: the switch is handed back by an arbitration message
that may follow the other controller's exit by a moment."""


def hold_as_agent(network: str, switch: str) -> int:
    from qcn.controller import config  # noqa: PLC0415
    from qcn.controller.agent import SwitchAgent  # noqa: PLC0415
    from qcn.controller.errors import P4RuntimeError  # noqa: PLC0415

    with SwitchAgent(config.load(Path(network)), switch) as agent:
        agent.connect()
        print("primary", flush=True)
        for line in sys.stdin:
            port, q_eq = (int(x) for x in line.split())
            deadline = time.monotonic() + RETRY_S
            while True:
                try:
                    agent.set_cp(port, q_eq_pkts=q_eq)
                    print("ok", flush=True)
                    break
                except P4RuntimeError as e:
                    if time.monotonic() > deadline:
                        print(f"error: {e}", flush=True)
                        break
                    time.sleep(0.1)
    return 0


def main() -> int:
    if sys.argv[1] == "--agent":
        return hold_as_agent(sys.argv[2], sys.argv[3])
    address, election_id = sys.argv[1], int(sys.argv[2])
    sw = P4RuntimeSwitch(address, *outputs(), election_id=election_id).open()
    print("primary", flush=True)
    sys.stdin.read()
    sw.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
