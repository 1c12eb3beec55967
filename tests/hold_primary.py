"""Hold a switch as P4Runtime primary until stdin closes (a second controller, for tests).

    python -m tests.hold_primary GRPC_ADDRESS ELECTION_ID

Prints "primary" once it is.
"""

from __future__ import annotations

import sys

from controller.p4runtime import P4RuntimeSwitch
from qcn.core.pipeline import outputs


def main() -> int:
    address, election_id = sys.argv[1], int(sys.argv[2])
    sw = P4RuntimeSwitch(address, *outputs(), election_id=election_id).open()
    print("primary", flush=True)
    sys.stdin.read()
    sw.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
