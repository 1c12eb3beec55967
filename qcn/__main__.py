"""`python -m qcn`: the same as the `qcn` command."""

import sys

from qcn.cli.main import main

sys.exit(main())
