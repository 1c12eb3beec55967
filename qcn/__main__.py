"""`python -m qcn`: the same as the `qcn` command."""

import sys

from qcn.cli import main

sys.exit(main())
